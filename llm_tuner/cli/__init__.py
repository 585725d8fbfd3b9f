"""Headless commands over the same services as the window; JSON on stdout for scripts.

Each module of this package adds its subcommands with `register(subparsers)`; a subcommand's
function takes the parsed args and returns the process exit code.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any

from llm_tuner import __version__
from llm_tuner.cli import agent, bench, chat, models, plan, profile, router, run, solve, system, tune, workers
from llm_tuner.cli.output import DATABASE_EXIT, CliError, HelpFormatter
from llm_tuner.services.settings_store import DataFolderUnusable, settings_path

_MODULES = (system, workers, agent, profile, models, plan, solve, run, chat, bench, tune, router)


class _Parser(argparse.ArgumentParser):
    """Every parser and subparser of the CLI formats its help with HelpFormatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="llm-tuner", description="Tune llama.cpp's llama-server.")
    parser.add_argument("--version", action="version", version=f"llm-tuner {__version__}")
    parser.add_argument("--smoke-test", action="store_true",
                        help="open the main window, let the event loop settle, exit 0 (non-zero on any "
                             "error)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so a closed pipe is caught below and not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except CliError as exc:
        print(f"llm-tuner: error: {exc}", file=sys.stderr)
        return 2
    except DataFolderUnusable as exc:
        print(f"llm-tuner: error: {exc}\n  Connect the drive that holds it, or change data_dir in "
              f"{settings_path()} (or in the window's File > Settings).", file=sys.stderr)
        return DATABASE_EXIT
    except BrokenPipeError:
        return _stdout_closed()
    except Exception as exc:
        if _is_storage_full(exc):
            print(f"llm-tuner: error: {_storage_full_text(exc)}", file=sys.stderr)
            return DATABASE_EXIT
        if not _is_database_error(exc):
            raise
        print(f"llm-tuner: error: {exc}\n  To start with a fresh database: llm-tuner database move-aside",
              file=sys.stderr)
        return DATABASE_EXIT


def _is_database_error(exc: BaseException) -> bool:
    """Without importing the store (SQLAlchemy, Alembic) for commands that never open it."""
    db = sys.modules.get("llm_tuner.store.db")
    return db is not None and isinstance(exc, db.DatabaseError)


def _is_storage_full(exc: BaseException) -> bool:
    """The history's disk is full (store.db.StorageFullError) or a file could not be written for want of
    space."""
    db = sys.modules.get("llm_tuner.store.db")
    if db is not None and isinstance(exc, db.StorageFullError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _storage_full_text(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f" for {exc.filename}" if exc.filename else ""
        return (f"no space left on the disk{where}: nothing more could be written. Free space on that disk and "
                "try again")
    return str(exc)


def _stdout_closed() -> int:
    """The reader of stdout went away (`llm-tuner runs list | head`): stop quietly, as a shell tool does.

    Further output goes to the null device, so Python's flush at exit does not complain; 141 = 128 + SIGPIPE.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141
