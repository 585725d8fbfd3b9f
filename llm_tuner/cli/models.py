"""`llm-tuner model info PATH` and `llm-tuner models scan DIR...`: the model library, headless (the hub's
`models search|files|plan|download`: cli.hub)."""

from __future__ import annotations

import argparse
import sys

from llm_tuner.cli import hub
from llm_tuner.cli.model_json import info_json
from llm_tuner.cli.output import CliError, emit_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add `model info` and `models scan`."""
    p = sub.add_parser("model", help="one model file: metadata from its GGUF header")
    msub = p.add_subparsers(dest="model_command", metavar="SUBCOMMAND")
    info = msub.add_parser("info", help="architecture, quantisation, layers, heads, experts, context of a GGUF")
    info.add_argument("path", help="a .gguf file (for a split set, its -00001-of-0000N part)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--tensors", action="store_true", help="also list the tensor table")
    info.set_defaults(func=cmd_model_info)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])

    p = sub.add_parser("models", help="the model library, and models from the hub: scan, search, files, plan, download")
    msub = p.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    scan = msub.add_parser("scan", help="find GGUF models under folders (recursive) and read their headers")
    scan.add_argument("dirs", nargs="+", metavar="DIR", help="folders (or files) to scan")
    scan.add_argument("--json", action="store_true", help="print JSON")
    scan.add_argument("--no-cache", action="store_true", help="read every header again, ignoring the cache")
    scan.set_defaults(func=cmd_models_scan)
    hub.register(msub)  # search, files, plan, download: the model hub
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _tensor_json(t) -> dict:
    return {"name": t.name, "shape": list(t.shape), "type": t.type_name, "n_bytes": t.n_bytes,
            "layer": t.layer, "role": t.role, "file_index": t.file_index}


def _fmt_gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1024**3:.2f} GiB"


def _say(line: str) -> None:
    """One line of text output: a GGUF's strings (name, architecture, tensor names) never act on the
    terminal."""
    from llm_tuner.core.units import printable

    print(printable(line))


def _print_info(info) -> None:
    if info.error:
        _say(f"{info.path}: error: {info.error}")
        return
    params = f"{info.n_params / 1e9:.2f} B" if info.n_params else "?"
    _say(f"{info.display_name()}  [{info.architecture}, {info.file_type}, {params} params, "
         f"{_fmt_gib(info.size_bytes)}]")
    _say(f"  path: {info.path}" + (f" ({info.split_count} parts)" if info.split_count > 1 else ""))
    _say(f"  layers: {info.block_count}" + (f" (+{info.nextn_layers} MTP)" if info.nextn_layers else "")
          + f" · context: {info.context_length} · embedding: {info.embedding_length}")
    _say(f"  heads: {info.head_count} · kv heads: {info.head_count_kv} · head dims: "
         f"{info.key_length}/{info.value_length}")
    if info.expert_count:
        _say(f"  experts: {info.expert_used_count} of {info.expert_count}"
             + (f" (+{info.expert_shared_count} shared)" if info.expert_shared_count else ""))
    if info.sliding_window:
        pattern = f" · pattern: {info.sliding_window_pattern}" if info.sliding_window_pattern else ""
        _say(f"  sliding window: {info.sliding_window}{pattern}")
    _say(f"  vocab: {info.vocab_size} ({info.tokenizer_model}) · chat template: "
         f"{'yes' if info.chat_template else 'no'} · tensors: {info.n_tensors}")


def cmd_model_info(args) -> int:
    from pathlib import Path

    from llm_tuner.services.library import not_a_file_reason, read_model

    path = Path(args.path).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    reason = not_a_file_reason(mode)
    if reason is not None:
        raise CliError(f"{path} {reason}")
    info = read_model(path)
    if args.json:
        data = info_json(info)
        if info.error:
            data["error"] = info.error
        if args.tensors:
            data["tensors"] = [_tensor_json(t) for t in info.tensors]
        emit_json(data)
    else:
        _print_info(info)
        if args.tensors and not info.error:
            for t in info.tensors:
                _say(f"  {t.name:40s} {str(list(t.shape)):24s} {t.type_name:6s} "
                     f"{t.n_bytes / 2**20:9.2f} MiB  {t.role}")
    return 1 if info.error else 0


def cmd_models_scan(args) -> int:
    from llm_tuner.core.units import printable
    from llm_tuner.services.library import find_models, scan
    from llm_tuner.services.settings_store import database_path, load_settings

    cache = None
    if not args.no_cache:
        from llm_tuner.store.db import open_engine
        from llm_tuner.store.model_cache import ModelCacheRepo

        cache = ModelCacheRepo(open_engine(database_path(load_settings().data_dir)))
    missing = [d for d in args.dirs if not __import__("os").path.exists(d)]
    for d in missing:
        print(printable(f"llm-tuner: warning: {d} does not exist"), file=sys.stderr)
    skipped: list[dict] = []

    def on_skipped(path: str, reason: str) -> None:
        skipped.append({"path": path, "reason": reason})
        print(printable(f"llm-tuner: warning: skipped {path}: {reason}"), file=sys.stderr)

    entries = find_models(args.dirs, on_skipped=on_skipped)
    infos = scan(entries, cache=cache)
    also_at = {e.path: list(e.also_at) for e in entries}
    if args.json:
        emit_json({"models": [{"path": i.path, "files": i.files, **info_json(i), "error": i.error,
                               "is_projector": i.is_projector, "also_at": also_at.get(i.path, [])} for i in infos],
                   "skipped": skipped})
    else:
        if not infos:
            print("No .gguf files found.")
        for i in infos:
            _print_info(i)
            if also_at.get(i.path):  # links to this file: listed once, their paths said
                print(printable(f"  also at: {', '.join(also_at[i.path])} (links to the same file)"))
    return 0
