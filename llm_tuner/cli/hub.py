"""`llm-tuner models search|files|plan|download`: the Get-models window, headless (services.hub).

    llm-tuner models search QUERY [--limit N] [--json]
    llm-tuner models files REPO [--json]
    llm-tuner models plan REPO FILE [--devices NAME=MiB,...] [--json]
    llm-tuner models download REPO FILE [--to DIR] [--json]

The hub is Hugging Face's through its own client, or the one `HF_ENDPOINT` names; `HF_TOKEN` (or a stored
`hf auth login`) opens gated and private repositories. The token goes to the hub only and is never printed.
FILE is a model's file name as `models files` lists it (for a split set, its first part; any part names it).
A download shows its progress on stderr, resumes what an earlier one left (`NAME.gguf.part`), checks the
repository's sha256, and checks the disk's free space before a byte is written.

Exit status: 0 done; 1 the hub or the network failed; 2 bad input (not a repository, no such repository or
file); download also 3 when the file's sha256 is not the repository's (the file is removed), 5 when the disk
has not enough free space (nothing more is written) and 130 when cancelled (Ctrl-C; what came is kept, the
same command goes on from there).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

from llm_tuner.cli.interrupt import Interrupt, positive_int
from llm_tuner.cli.model_json import info_json
from llm_tuner.cli.output import CliError, emit_json
from llm_tuner.cli.solve import add_devices_argument

CHECKSUM_EXIT = 3
DISK_FULL_EXIT = 5
CANCELLED_EXIT = 130
HUB_FAILED_EXIT = 1
PROGRESS_INTERVAL_S = 1.0  # progress lines when stderr is not a terminal (a log, a pipe): about one a second


def register(msub: argparse._SubParsersAction) -> None:
    """Add search, files, plan and download under `models` (cli.models makes the group)."""
    epilog = __doc__.split("\n\n")[-1]
    q = msub.add_parser("search", help="search the model hub for repositories with GGUF files (most "
                        "downloaded first)", epilog=epilog)
    q.add_argument("query", help="words in the repository's name")
    q.add_argument("--limit", type=positive_int, default=50, help="at most this many repositories (default 50)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_search)
    q = msub.add_parser("files", help="a hub repository's GGUF models: split sets as one, sizes, "
                        "quantisation, sha256", epilog=epilog)
    q.add_argument("repo", metavar="REPO", help="owner/name")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_files)
    q = _model_parser(msub, "plan", "a hub model's memory plan on this machine before downloading it (its "
                      "header only, read with range requests)", epilog)
    add_devices_argument(q)
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_plan)
    q = _model_parser(msub, "download", "download a hub model into a models folder (resumes, checks sha256 "
                      "and free space)", epilog)
    q.add_argument("--to", metavar="DIR", help="the folder (default: the first of Settings' model folders); "
                   "it is added to the model folders, as the window does")
    q.add_argument("--json", action="store_true", help="print JSON when done (progress stays on stderr)")
    q.set_defaults(func=cmd_download)


def _model_parser(msub: argparse._SubParsersAction, name: str, what: str, epilog: str) -> argparse.ArgumentParser:
    """A subcommand about one model of a repository: REPO FILE."""
    q = msub.add_parser(name, help=what, epilog=epilog)
    q.add_argument("repo", metavar="REPO", help="owner/name")
    q.add_argument("file", metavar="FILE", help="the model's file name, as `models files` lists it")
    return q


class HubFailed(Exception):
    """The hub or the network failed (not the user's input): said in one line, exit 1."""


def _hub_command(func):
    """A command whose hub or network failure is one line and exit 1 (bad input stays CliError: exit 2)."""

    @functools.wraps(func)
    def run(args) -> int:
        try:
            return func(args)
        except HubFailed as exc:
            _say(f"llm-tuner: error: {exc}", sys.stderr)
            return HUB_FAILED_EXIT

    return run


def _hub():
    from llm_tuner.services.hub import Hub

    return Hub.from_env()


def _ask(hub, work):
    """`work()` against the hub; its failure as one line: bad input (exit 2) or the hub's failure (exit 1)."""
    from llm_tuner.services.hub import BAD_INPUT_ERRORS, describe_error

    try:
        return work()
    except BAD_INPUT_ERRORS as exc:
        raise CliError(describe_error(exc, hub)) from None
    except Exception as exc:  # noqa: BLE001 - the hub's or the network's failure, said in one line
        why = describe_error(exc, hub)
        raise HubFailed(why if hub.endpoint in why else f"the hub at {hub.endpoint} (HF_ENDPOINT): {why}") from None


def _say(line: str, file=None) -> None:
    from llm_tuner.core.units import printable

    print(printable(line), file=file or sys.stdout)


def _model_json(m) -> dict:
    return {"name": m.name, "file_name": m.file_name, "quant": m.quant, "size_bytes": m.size_bytes,
            "is_projector": m.is_projector, "complete": m.complete, "has_checksums": m.has_checksums,
            "revision": m.revision,
            "files": [{"path": f.path, "size_bytes": f.size_bytes, "sha256": f.sha256} for f in m.files]}


def _find(models: list, repo: str, file: str):
    """The model FILE names: its name, its file name, or any of its parts."""
    want = file.strip()
    for m in models:
        names = {m.name, m.file_name} | {p.path for p in m.files} | {p.path.rsplit("/", 1)[-1] for p in m.files}
        if want in names:
            return m
    listed = ", ".join(m.name for m in models[:8]) + (" …" if len(models) > 8 else "")
    raise CliError(f"{repo} has no GGUF model {file!r}" + (f"; it has: {listed}" if models else
                                                           " (it has no GGUF files)")
                   + f". List them with `llm-tuner models files {repo}`")


def _remote(hub, repo: str, file: str):
    from llm_tuner.services.hub import list_gguf_models

    models = _ask(hub, lambda: list_gguf_models(hub, repo))
    return _find(models, repo, file)


# -- commands -------------------------------------------------------------------------------------

@_hub_command
def cmd_search(args) -> int:
    from llm_tuner.services.hub import search_models

    if not args.query.strip():
        raise CliError("give words to search for, e.g. `llm-tuner models search qwen3`")
    hub = _hub()
    hits = _ask(hub, lambda: search_models(hub, args.query, limit=args.limit))
    if args.json:
        emit_json({"endpoint": hub.endpoint, "repositories": [
            {"repo": h.repo_id, "downloads": h.downloads, "likes": h.likes, "last_modified": h.last_modified,
             "gated": h.gated} for h in hits]})
        return 0
    for h in hits:
        downloads = f"{h.downloads:,}" if h.downloads is not None else "—"
        _say(f"{h.repo_id}  {downloads} downloads" + (f" · {h.last_modified}" if h.last_modified else "")
             + (" · gated (HF_TOKEN)" if h.gated else ""))
    if not hits:
        _say(f"no repository with GGUF files matches {args.query!r} on {hub.endpoint}")
    return 0


@_hub_command
def cmd_files(args) -> int:
    from llm_tuner.core.units import format_bytes
    from llm_tuner.services.hub import list_gguf_models

    hub = _hub()
    models = _ask(hub, lambda: list_gguf_models(hub, args.repo))
    if args.json:
        emit_json({"endpoint": hub.endpoint, "repo": args.repo, "models": [_model_json(m) for m in models]})
        return 0
    for m in models:
        parts = f" ({len(m.files)} parts" + ("" if m.complete else ", some missing: cannot be downloaded") + ")" \
            if len(m.files) > 1 or not m.complete else ""
        _say(f"{m.name}  {m.quant or '?'}  {format_bytes(m.size_bytes)}{parts}"
             + ("  projector (--mmproj)" if m.is_projector else "")
             + ("" if m.has_checksums else "  no sha256 given"))
    if not models:
        _say(f"{args.repo} has no GGUF files")
    return 0


def predicted_speed(info, plan) -> dict | None:
    """The predicted speed of the plan (core.speed, this machine's calibration for the build in use if there is
    one): the JSON key `predicted_speed` of `models plan` and a line beside the plan's."""
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.services.speed import predict_plan
    from llm_tuner.store.db import open_engine

    return predict_plan(info, plan, open_engine(database_path()))


@_hub_command
def cmd_plan(args) -> int:
    from llm_tuner.services.hub import plan_text, read_remote_model

    hub = _hub()
    model = _remote(hub, args.repo, args.file)
    info = read_remote_model(hub, model)
    if info.error:
        raise HubFailed(f"{model.name}: the header could not be read: {info.error}")
    plan = None if info.is_projector else _plan(info, args.devices)
    speed = predicted_speed(info, plan) if plan is not None else None
    if args.json:
        emit_json({"endpoint": hub.endpoint, "repo": model.repo_id, "model": _model_json(model),
                   "info": info_json(info), "plan": plan.to_json() if plan is not None else None,
                   "fits": plan.fits if plan is not None else None, "predicted_speed": speed})
        return 0
    _say(f"{info.display_name()}: {info.architecture}, {info.file_type}, {info.block_count} blocks, trained "
         f"context {info.context_length}")
    if plan is None:
        _say("a projector: planned with its main model (--mmproj)")
        return 0
    _say(f"llama-server -m {model.file_name} (llama.cpp's defaults): {plan_text(plan)}")
    for d in plan.devices:
        cap = f"{d.capacity_mib} MiB" if d.capacity_mib is not None else "size unknown"
        _say(f"  {d.name:10} {d.total_mib:9.0f} MiB (weights {d.model_mib:.0f}, KV {d.kv_mib:.0f}, compute "
             f"{d.compute_mib:.0f}) of {cap}" + ("" if d.fits is None else ("  fits" if d.fits else "  does NOT fit")))
    for w in plan.warnings:
        _say(f"warning: {w}", sys.stderr)
    if speed is not None:
        _say(f"predicted: {speed['text']}")
    _say({True: "Fits.", False: "Does NOT fit.", None: "No fit verdict: this machine's memory is unknown."}[plan.fits])
    return 0


def _plan(info, devices: str | None):
    """The plan of `llama-server -m FILE` with llama.cpp's defaults: on this machine's devices (the window's
    default_plan), or on the --devices given (as `estimate --devices`)."""
    from llm_tuner.cli.solve import inventory_here
    from llm_tuner.services.hub import default_plan

    if not devices:
        return default_plan(info, inventory_here())
    from llm_tuner.cli.plan import parse_devices
    from llm_tuner.core.devices import DeviceInventory
    from llm_tuner.core.memory import PlacementArgs, host_device, plan_memory
    from llm_tuner.services.telemetry.host import host_info

    gpus, host = parse_devices(devices)
    here = host_info()  # RAM unless Host=MiB is given, as estimate --devices
    return plan_memory(info, PlacementArgs(model=info.path), gpus, host or host_device(DeviceInventory(host=here)),
                       cpu_flags=tuple(here.cpu_flags))


@_hub_command
def cmd_download(args) -> int:
    from llm_tuner.services.hub import download_folder
    from llm_tuner.services.settings_store import load_settings

    settings = load_settings()
    folder = Path(args.to).expanduser() if args.to else download_folder(settings)
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{folder} is not a folder: give --to a folder to save the model in")
    hub = _hub()
    model = _remote(hub, args.repo, args.file)
    if not model.complete:
        raise CliError(f"{model.name}: the repository lacks parts of this split set; it cannot be downloaded whole")
    return _download(hub, model, folder, settings, args.json)


def _download(hub, model, folder, settings, as_json: bool) -> int:
    from llm_tuner.services.hub import ChecksumError, DownloadCancelled, NotEnoughSpace, download_model

    progress = _Progress()
    with Interrupt() as stop:
        try:
            path = download_model(hub, model, folder, progress=progress, cancelled=stop.event.is_set)
        except DownloadCancelled:
            progress.end()
            _say(f"llm-tuner: cancelled: what was downloaded is kept in {folder}; the same command goes on from "
                 "there", sys.stderr)
            return CANCELLED_EXIT
        except ChecksumError as exc:
            progress.end()
            _say(f"llm-tuner: error: {exc}", sys.stderr)
            return CHECKSUM_EXIT
        except NotEnoughSpace as exc:
            progress.end()
            _say(f"llm-tuner: error: {exc}", sys.stderr)
            return DISK_FULL_EXIT
        except FileExistsError as exc:
            progress.end()
            raise CliError(str(exc)) from None
        except PermissionError as exc:
            progress.end()
            raise CliError(f"cannot write in {folder} ({exc.strerror}): choose another folder with --to") from None
        except OSError as exc:
            progress.end()
            if _disk_full(exc):
                _say(f"llm-tuner: error: the disk of {folder} is full: what was downloaded is kept; free "
                     "space there and run the same command again", sys.stderr)
                return DISK_FULL_EXIT
            raise HubFailed(_failure(exc, hub)) from None
        except Exception as exc:  # noqa: BLE001 - the hub's or the network's failure, said in one line
            progress.end()
            raise HubFailed(_failure(exc, hub)) from None
    progress.end()
    added = _add_model_folder(settings, folder)
    if as_json:
        emit_json({"path": str(path), "files": [str(folder / p.path.rsplit("/", 1)[-1]) for p in model.files],
                   "size_bytes": model.size_bytes, "sha256_checked": model.has_checksums,
                   "resumed_from": progress.resumed_from, "folder_added": added})
    else:
        _say(str(path))
        _say(f"saved {model.file_name} into {folder}" + (" (added to the model folders)" if added else "")
             + ("; sha256 checked" if model.has_checksums else "; the repository gives no sha256 to check"),
             sys.stderr)
    return 0


def _failure(exc: BaseException, hub) -> str:
    from llm_tuner.services.hub import describe_error

    return f"the download failed: {describe_error(exc, hub)}; what was downloaded is kept, run the same command again"


def _disk_full(exc: OSError) -> bool:
    import errno

    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _add_model_folder(settings, folder) -> bool:
    """The folder joins Settings' model folders (the window lists what was downloaded), as the dialog does."""
    from llm_tuner.services.settings_store import save_settings

    name = str(folder)
    if name in {str(Path(f).expanduser()) for f in settings.model_folders}:
        return False
    save_settings(settings.model_copy(update={"model_folders": [*settings.model_folders, name]}))
    return True


class _Progress:
    """Progress on stderr: one line rewritten on a terminal, else a line about every second (and at each
    phase)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = (0.0, "")
        self.shown = False
        self.resumed_from = 0

    def __call__(self, p) -> None:
        now = time.monotonic()
        if p.resumed_from and not self.resumed_from:
            self.resumed_from = p.resumed_from
        if now - self.last[0] < (0.1 if self.tty else PROGRESS_INTERVAL_S) and p.phase == self.last[1] \
                and p.done_bytes < p.total_bytes:
            return
        self.last = (now, p.phase)
        from llm_tuner.core.units import printable

        line = printable(f"{p.text()} ({100 * p.fraction:.0f} %)")
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.tty and self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.shown = False
