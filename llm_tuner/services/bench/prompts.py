"""Prompt text for benchmark requests: the prompts folder, its texts, token slices of them."""

from __future__ import annotations

import os
from pathlib import Path

from llm_tuner.services.bench.errors import BenchError
from llm_tuner.services.client import LlamaClient

PROMPTS_DIR_ENV = "LLM_TUNER_PROMPTS_DIR"


# -- prompt text --------------------------------------------------------------------------------

def prompts_dir() -> Path:
    """The shipped prompt texts: `LLM_TUNER_PROMPTS_DIR` if set, else the package's data/prompts (in a
    checkout, a wheel and the PyInstaller bundle alike)."""
    override = os.environ.get(PROMPTS_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "data" / "prompts"


def prompt_texts(prompt_file: str | None = None) -> list[str]:
    """The texts prompts are cut from: the user's file, or the shipped prose and code."""
    if prompt_file:
        text = Path(prompt_file).expanduser().read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            raise BenchError(f"the prompt file {prompt_file} is empty; choose a file with text in it")
        return [text]
    folder = prompts_dir()
    files = sorted(p for p in folder.glob("*.txt")) if folder.is_dir() else []
    if not files:
        raise BenchError(f"no prompt text found in {folder}; set {PROMPTS_DIR_ENV} or give a prompt file")
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


class PromptBuilder:
    """Token streams from real text, tokenized by the server under test; prompts of exactly N tokens.

    The texts are tokenized in chunks of ~2000 characters and interleaved (prose, code, prose, ...)
    so every prompt of a few hundred tokens or more mixes both. Prompts longer than the text cycle
    through it. A leading BOS is added when the model's vocabulary uses one (as real requests have).
    """

    CHUNK_CHARS = 2000

    def __init__(self, client: LlamaClient, texts: list[str]) -> None:
        chunks: list[list[str]] = [[t[i:i + self.CHUNK_CHARS] for i in range(0, len(t), self.CHUNK_CHARS)]
                                   for t in texts]
        order: list[str] = []
        for i in range(max(len(c) for c in chunks)):
            order += [c[i] for c in chunks if i < len(c)]
        tokens: list[int] = []
        for chunk in order:
            tokens += client.tokenize(chunk, add_special=False)
        if not tokens:
            raise BenchError("the prompt text tokenized to nothing")
        self.stream = tokens
        special = client.tokenize("", add_special=True)
        self.bos = special[:1]

    def prompt(self, n: int, offset: int = 0) -> list[int]:
        """Exactly `n` tokens: BOS (if any) then the stream from `offset`, cycling."""
        head = self.bos[:n]
        need = n - len(head)
        s = self.stream
        start = offset % len(s)
        body: list[int] = []
        while len(body) < need:
            body += s[start:start + need - len(body)]
            start = 0
        return head + body
