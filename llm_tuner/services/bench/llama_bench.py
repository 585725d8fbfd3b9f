"""Identity of what ran, argv helpers, and the translation of a server command to llama-bench."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchSpec, LlamaBenchResult
from llm_tuner.core.cmdline import set_flag as set_flag  # re-exported (services.bench, its runner)

# -- identity of what ran -----------------------------------------------------------------------

def model_identity(path: str | None) -> dict[str, Any]:
    """Path, size, mtime and sha256 of the first MiB (GGUF header + metadata: cheap and distinctive)."""
    if not path or not Path(path).is_file():
        return {"model_path": path}
    p = Path(path)
    st = p.stat()
    with p.open("rb") as f:
        digest = hashlib.sha256(f.read(2**20)).hexdigest()
    return {"model_path": str(p.resolve()), "model_size": st.st_size, "model_mtime": st.st_mtime, "model_hash": digest}


def argv_model(argv: list[str]) -> str | None:
    return flags.value_of(argv, "model")


# -- llama-bench translation --------------------------------------------------------------------

def translate_to_llama_bench(server_argv: list[str], spec: BenchSpec) -> tuple[list[str], list[str]]:
    """llama-bench arguments for the same settings and measurement, and the llama-server flags it lacks
    (listed, not silently dropped); the translation itself is core.flags.to_llama_bench."""
    out, lacking = flags.to_llama_bench(server_argv)
    lengths = ",".join(str(n) for n in spec.prompt_tokens)
    out += [flags.BENCH_PROMPT, lengths, flags.BENCH_GEN, str(spec.gen_tokens), flags.BENCH_REPS, str(spec.reps),
            flags.BENCH_OUTPUT, "json"]
    if spec.depth:
        out += [flags.BENCH_DEPTH, str(spec.depth)]
    if spec.warmup == 0:
        out.append(flags.BENCH_NO_WARMUP)
    return out, lacking


def parse_llama_bench_json(text: str) -> list[LlamaBenchResult]:
    """llama-bench `-o json` (one array) or `-o jsonl` (one object a line)."""
    text = text.strip()
    if not text:
        return []
    try:
        objs = json.loads(text)
        objs = objs if isinstance(objs, list) else [objs]
    except json.JSONDecodeError:
        objs = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    return [LlamaBenchResult(n_prompt=o.get("n_prompt", 0), n_gen=o.get("n_gen", 0), n_depth=o.get("n_depth", 0),
                             avg_ts=o.get("avg_ts", 0.0), stddev_ts=o.get("stddev_ts"),
                             samples_ts=tuple(o.get("samples_ts") or ()), raw=o) for o in objs]
