"""`llm-tuner profile migrate NAME [--yes] [--choose OLD=NEW ...]`: a saved profile brought to this build.

Compares the build the profile version was saved with (its stamp and kept --help) with the llama-server it
runs now (its own program once confirmed, else the configured one), and lists the flags the new build renamed
or removed with what replaces them, and the command line before and after. Nothing is saved without --yes;
then the migrated settings are saved as a new version.

A flag with several possible replacements (`--draft-max` -> `--spec-draft-n-max` or `--spec-ngram-mod-n-max`)
is never picked for you: it is applied only with `--choose draft-max=spec-draft-n-max`; without it the rest is
applied and the exit code is 1. The profile's LLAMA_ARG_* variables are migrated the same way (each becomes
its replacement's variable); a choice for one names it: `--choose LLAMA_ARG_DRAFT_MAX=spec-draft-n-max`.
"""

from __future__ import annotations

import argparse

from llm_tuner.cli.output import CliError, RawDescription, emit_json
from llm_tuner.cli.profile_file import add_trust_argument
from llm_tuner.core import flags


def register(psub: argparse._SubParsersAction) -> None:
    mig = psub.add_parser(
        "migrate",
        help="bring a saved profile to this llama-server build (renamed/removed flags)",
        description=__doc__,
        formatter_class=RawDescription,
    )
    mig.add_argument("name", metavar="NAME")
    mig.add_argument("--yes", action="store_true", help="save the migrated settings as a new version")
    mig.add_argument(
        "--choose",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="the replacement of an ambiguous flag, e.g. draft-max=spec-draft-n-max (repeatable)",
    )
    mig.add_argument("--json", action="store_true", help="print JSON")
    add_trust_argument(mig)
    mig.set_defaults(func=cmd_migrate)


def _flag(name: str) -> str:
    name = name.strip()
    if name.startswith("-") or name.startswith(flags.ENV_PREFIX):  # a flag, or a LLAMA_ARG_* variable's move
        return name
    return ("-" if len(name) <= 4 and "-" not in name else "--") + name


def parse_choices(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise CliError(f"--choose {item!r}: give OLD=NEW, e.g. draft-max=spec-draft-n-max")
        out[_flag(old)] = _flag(new)
    return out


def cmd_migrate(args) -> int:
    from llm_tuner.cli.profile_file import profile_binary
    from llm_tuner.core.cmdline.migrate import apply_migration, command_lines
    from llm_tuner.services import builds
    from llm_tuner.services.settings_store import database_path, load_settings
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    engine = open_engine(database_path())
    saved = ProfileRepository(engine).latest(args.name)
    if saved is None:
        raise CliError(f"no saved profile named {args.name!r}: see `llm-tuner profile list`")
    if saved.profile.binary:
        profile_binary(
            saved.profile, getattr(args, "trust_binary", False)
        )  # refused here, before anything runs
    settings = load_settings()
    check = builds.check_profile(engine, saved, settings)
    choices = parse_choices(args.choose)
    _check_choices(check.migration, choices)
    before = after = None
    undone = check.migration.ambiguous
    if check.new_catalog is not None and check.migration:
        migrated, undone = apply_migration(saved.profile, check.migration, check.new_catalog, choices)
        before, after = command_lines(saved.profile, migrated, check.new_catalog)
    result = None
    if args.yes and check.migration:
        result, undone = builds.migrate_profile(engine, check, choices, settings)
    data = {
        **check.to_json(),
        "command_before": before,
        "command_after": after,
        "saved": None if result is None else {"name": result.name, "version": result.version},
        "undone": [m.old for m in undone],
    }
    if args.json:
        emit_json(data)
    else:
        _print_report(saved, check, choices, before, after, result, undone, yes=args.yes)
    return 1 if args.yes and undone else 0


def _check_choices(migration, choices: dict[str, str]) -> None:
    """Refuse a --choose that names a flag the migration does not move, or a target it does not offer."""
    bad = [o for o in choices if o not in {m.old for m in migration.moves}]
    if bad:
        raise CliError(f"--choose names {', '.join(bad)}, which this migration does not move")
    for m in migration.moves:
        if m.old in choices and choices[m.old] not in m.choices:
            raise CliError(f"--choose {m.old}={choices[m.old]}: choose one of {', '.join(m.choices)}")


def _print_report(saved, check, choices: dict[str, str], before, after, result, undone, *, yes: bool) -> None:
    """The migration in words: the headline, each move, the notes, the command lines, what was saved."""
    from llm_tuner.core.units import printable

    print(
        printable(
            check.headline
            or f"{saved.name} v{saved.version}: nothing to migrate "
            f"({'the same build' if check.current else 'the current build cannot be read'})."
        )
    )
    if check.saved_build is None:
        print("  (this version recorded no build: compared with the new build's --help alone)")
    elif not check.old_help_kept and check.migration:
        print("  (the old build's --help was not kept: compared with the new build's --help alone)")
    for m in check.migration.moves:
        chosen = choices.get(m.old)
        mark = " [a choice: --choose " + m.old.lstrip("-") + "=...]" if m.ambiguous and not chosen else ""
        hint = (
            f" (the profile points at {m.suggested})"
            if m.ambiguous and m.suggested and not chosen
            else ""
        )
        print(printable(f"  {m.text(chosen)}{mark}{hint}"))
    for note in check.migration.notes:
        print(printable(f"  note: {note}"))
    if before and after and before != after:
        print(printable(f"before: {before}"))
        print(printable(f"after:  {after}"))
    if result is not None:
        print(f"saved as {result.name!r} version {result.version}")
    elif check.migration and not yes:
        print("nothing saved: run again with --yes to save the migrated settings as a new version")
    for m in undone:
        print(
            printable(
                f"not applied: {m.old} needs a choice: --choose {m.old.lstrip('-')}="
                + " or ".join(c.lstrip("-") for c in m.choices)
            )
        )
