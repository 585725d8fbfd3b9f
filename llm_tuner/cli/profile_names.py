"""`llm-tuner profile rename|delete|duplicate`: the Profile tab's name buttons, headless (store.profiles).

    llm-tuner profile rename OLD NEW [--json]
    llm-tuner profile delete NAME [--json]
    llm-tuner profile duplicate NAME NEW [--json]

Delete hides the name; its versions stay readable for the runs that used them (the window's Delete). Duplicate
gives NEW a first version with NAME's newest settings. Exit status: 0 done; 2 an unknown name, a name already
taken, or an empty one (nothing is changed).
"""

from __future__ import annotations

import argparse

from llm_tuner.cli.output import CliError, emit_json


def register(psub: argparse._SubParsersAction) -> None:
    """Add rename, delete and duplicate under `profile` (cli.profile makes the group)."""
    q = psub.add_parser("rename", help="give a saved profile another name (its versions and runs follow)")
    q.add_argument("name", metavar="OLD")
    q.add_argument("new", metavar="NEW")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_rename)
    q = psub.add_parser("delete", help="delete a saved profile (runs keep the settings they ran with)")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_delete)
    q = psub.add_parser("duplicate",
                        help="a new profile whose first version is a saved one's newest settings")
    q.add_argument("name", metavar="NAME")
    q.add_argument("new", metavar="NEW")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_duplicate)


def _change(work):
    """Run a repository change; its name error (unknown, taken, empty) is the user's: one line, exit 2."""
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileNameError, ProfileRepository

    try:
        return work(ProfileRepository(open_engine(database_path())))
    except ProfileNameError as exc:
        raise CliError(f"{exc}. List names with `llm-tuner profile list`") from None


def _done(args, data: dict, text: str) -> int:
    from llm_tuner.core.units import printable

    if args.json:
        emit_json(data)
    else:
        print(printable(text))
    return 0


def cmd_rename(args) -> int:
    new = args.new.strip()
    if new == args.name:
        raise CliError(f"{args.name!r} already has that name")
    saved = _change(lambda repo: (repo.rename(args.name, new), repo.latest(new))[1])
    return _done(args, {"renamed": args.name, "name": saved.name, "version": saved.version,
                        "version_id": saved.version_id}, f"renamed {args.name!r} to {saved.name!r}")


def cmd_delete(args) -> int:
    _change(lambda repo: repo.delete(args.name))
    return _done(args, {"deleted": args.name},
                 f"deleted {args.name!r} (runs keep the settings they ran with)")


def cmd_duplicate(args) -> int:
    saved = _change(lambda repo: repo.duplicate(args.name, args.new))
    return _done(args, {"copy_of": args.name, "name": saved.name, "version": saved.version,
                        "version_id": saved.version_id}, f"duplicated {args.name!r} as {saved.name!r}")
