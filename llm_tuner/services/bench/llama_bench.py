"""Identity of what ran, argv helpers, and the translation of a server command to llama-bench."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from llm_tuner.core.bench_spec import BenchSpec, LlamaBenchResult

# -- identity of what ran -----------------------------------------------------------------------

def model_identity(path: str | None) -> dict:
    """Path, size, mtime and sha256 of the first MiB (GGUF header + metadata: cheap and distinctive)."""
    if not path or not Path(path).is_file():
        return {"model_path": path}
    p = Path(path)
    st = p.stat()
    with p.open("rb") as f:
        digest = hashlib.sha256(f.read(2**20)).hexdigest()
    return {"model_path": str(p.resolve()), "model_size": st.st_size, "model_mtime": st.st_mtime, "model_hash": digest}


def argv_model(argv: list[str]) -> str | None:
    for flag in ("-m", "--model"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return argv[argv.index(flag) + 1]
    return None


def _has_flag(argv: list[str], *names: str) -> bool:
    return any(a in names or any(a.startswith(n + "=") for n in names if n.startswith("--")) for a in argv)


def set_flag(argv: list[str], flag: str, value: str | None, aliases: tuple[str, ...] = ()) -> list[str]:
    """argv with `flag value` replacing any earlier occurrence (of the flag or its aliases)."""
    names = {flag, *aliases}
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in names:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            i += 2 if nxt is not None and (not nxt.startswith("-") or _num(nxt)) else 1
            continue
        out.append(argv[i])
        i += 1
    return out + ([flag] if value is None else [flag, value])


def _num(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


# -- llama-bench translation --------------------------------------------------------------------

# llama-server flag -> llama-bench flag, and how the value changes (None: same value).
_BENCH_MAP: dict[str, tuple[str, Callable[[str], str] | None]] = {}
for _names, _target, _fn in (
    (("-m", "--model"), "-m", None),
    (("-ngl", "--gpu-layers", "--n-gpu-layers"), "-ngl", lambda v: "999" if v == "all" else v),
    (("-b", "--batch-size"), "-b", None),
    (("-ub", "--ubatch-size"), "-ub", None),
    (("-t", "--threads"), "-t", None),
    (("-fa", "--flash-attn"), "-fa", None),
    (("-ctk", "--cache-type-k"), "-ctk", None),
    (("-ctv", "--cache-type-v"), "-ctv", None),
    (("-sm", "--split-mode"), "-sm", None),
    (("-mg", "--main-gpu"), "-mg", None),
    (("-ncmoe", "--n-cpu-moe"), "-ncmoe", None),
    (("-ts", "--tensor-split"), "-ts", lambda v: v.replace(",", "/")),
    (("-ot", "--override-tensor"), "-ot", lambda v: v.replace(",", ";")),
    (("-dev", "--device"), "-dev", lambda v: v.replace(",", "/")),
):
    for _n in _names:
        _BENCH_MAP[_n] = (_target, _fn)
_BENCH_SWITCHES = {"-nkvo": ("-nkvo", "1"), "--no-kv-offload": ("-nkvo", "1"), "--no-host": ("--no-host", "1")}
# Flags that only concern serving (network, UI, logging): no effect on speed, not reported as lacking.
_SERVER_ONLY = {"--host", "--port", "--metrics", "--api-key", "--alias", "-a", "--no-webui", "--webui",
                "--log-file", "--log-colors", "--log-verbosity", "-lv", "--log-prefix", "--log-timestamps",
                "--jinja", "--no-jinja", "--slots", "--no-slots", "--props"}


def _takes_value(argv: list[str], i: int) -> bool:
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    return nxt is not None and (not nxt.startswith("-") or _num(nxt))


def translate_to_llama_bench(server_argv: list[str], spec: BenchSpec) -> tuple[list[str], list[str]]:
    """llama-bench arguments for the same settings, and the llama-server flags it lacks (listed, not
    silently dropped). `-ts` lists use '/', `-ot` lists ';', `-dev` lists '/' (llama-bench uses ',' to
    separate configurations)."""
    out: list[str] = []
    lacking: list[str] = []
    i = 0
    while i < len(server_argv):
        tok = server_argv[i]
        name, _, inline = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        has_val = bool(inline) or _takes_value(server_argv, i)
        value = inline or (server_argv[i + 1] if has_val else None)
        step = 2 if has_val and not inline else 1
        if name in _BENCH_MAP and value is not None:
            target, fn = _BENCH_MAP[name]
            if name in ("-ngl", "--gpu-layers", "--n-gpu-layers") and value == "auto":
                lacking.append(f"{name} auto")
            else:
                out += [target, fn(value) if fn else value]
        elif name in _BENCH_SWITCHES:
            out += list(_BENCH_SWITCHES[name])
            step = 1
        elif name in _SERVER_ONLY:
            pass
        elif tok.startswith("-") and not _num(tok):
            lacking.append(f"{name} {value}" if value is not None else name)
        i += step
    lengths = ",".join(str(n) for n in spec.prompt_tokens)
    out += ["-p", lengths, "-n", str(spec.gen_tokens), "-r", str(spec.reps), "-o", "json"]
    if spec.depth:
        out += ["-d", str(spec.depth)]
    if spec.warmup == 0:
        out.append("--no-warmup")
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
