"""`llm-tuner profile import|command|check|list`: launch profiles, headless (rename|delete|duplicate: cli.profile_names).

    llm-tuner profile import --json [--name NAME] (--command "STRING" | -- ARGV...)
    llm-tuner profile command NAME|FILE [--show-secrets] [--json]
    llm-tuner profile check NAME|FILE --json
    llm-tuner profile list [--json]
    llm-tuner profile migrate NAME [--yes] [--choose OLD=NEW]  (renamed/removed flags of a new build: cli.profile_migrate)

NAME is the newest saved version of a named profile; FILE is a JSON file holding either the `profile`
object that `import` prints or the whole `import` output. A profile's own program (`binary`) is run (by
`check`, `run`, `bench`) only once confirmed: in the Profile tab, or with --trust-binary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_tuner.cli import profile_migrate, profile_names
from llm_tuner.cli.output import CliError, emit_json
from llm_tuner.cli.profile_file import add_trust_argument


def register(sub: argparse._SubParsersAction) -> None:
    """Add `profile` and its subcommands."""
    p = sub.add_parser("profile", help="launch profiles: import a command line, print it, check it")
    psub = p.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")

    imp = psub.add_parser("import", help="read a llama-server command line into a profile (never runs it)",
                          description="Give the command as one string with --command, or as arguments after --. "
                          "Exits 1 when the advice holds an error (llama-server would refuse or fail; the profile "
                          "is printed and saved), 2 when the command cannot be read or is not a llama-server "
                          "command at all (no model, no flag it knows: nothing is saved).")
    imp.add_argument("--json", action="store_true", help="print JSON")
    imp.add_argument("--name", help="also save it as a new version of this named profile")
    imp.add_argument("--command", dest="command_text", metavar="STRING",
                     help="the command as pasted (may start with the binary, VAR=value, export lines)")
    imp.add_argument("--binary", help="validate against this llama-server's --help (default: the tested build's)")
    imp.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the llama-server arguments (no binary)")
    imp.set_defaults(func=cmd_import)

    cmd = psub.add_parser("command", help="print a profile's shell command line (API key masked)")
    cmd.add_argument("target", metavar="NAME|FILE")
    cmd.add_argument("--show-secrets", action="store_true", help="print the API key in clear")
    cmd.add_argument("--json", action="store_true", help="print JSON: argv, env, binary and the shell line")
    add_trust_argument(cmd)
    cmd.set_defaults(func=cmd_command)

    chk = psub.add_parser("check", help="advice on a profile: removed/unknown flags and known traps")
    chk.add_argument("target", metavar="NAME|FILE")
    chk.add_argument("--json", action="store_true", help="print JSON")
    chk.add_argument("--binary", help="validate against this llama-server's --help (default: the profile's own "
                     "program once confirmed, else the tested build's)")
    add_trust_argument(chk)
    chk.set_defaults(func=cmd_check)

    lst = psub.add_parser("list", help="saved profile names with their newest version")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=cmd_list)
    profile_names.register(psub)  # rename, delete, duplicate
    profile_migrate.register(psub)  # migrate: to this llama-server build
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


# -- helpers ------------------------------------------------------------------------------------

def _repo():
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    return ProfileRepository(open_engine(database_path()))


def _catalog(binary: str | None, profile=None, *, trust: bool = False):
    """The chosen binary's catalog: --binary, else the profile's own program once confirmed (never run before:
    a note says so), else the tested build's. `trust` confirms the profile's program first (--trust-binary)."""
    from llm_tuner.cli.profile_file import profile_binary
    from llm_tuner.core.cmdline import parse_help
    from llm_tuner.services.binaries import BinaryError, check_executable, default_catalog, read_help

    path = binary
    if not path and profile is not None and profile.binary:
        try:
            path = profile_binary(profile, trust)
        except CliError as exc:
            print(f"note: {exc}; checked against the tested build's flags instead", file=sys.stderr)
    if not path:
        return default_catalog()
    try:
        check_executable(Path(path))
        return parse_help(read_help(Path(path)))
    except BinaryError as exc:
        if binary or trust:
            raise CliError(str(exc)) from exc
        return default_catalog()


def _advice(profile, catalog):
    """Advice with this machine's facts (services.preflight: the model file as the header reader sees it, the
    GPUs, the cores)."""
    from llm_tuner.services.preflight import advice_here

    return advice_here(profile, catalog)


def _load(target: str):
    """NAME (newest saved version) or FILE -> LaunchProfile, through the one loader (cli.profile_file)."""
    from llm_tuner.cli.profile_file import load_profile

    return load_profile(target).profile


def _advice_json(advice) -> list[dict]:
    return [{"id": a.id, "severity": a.severity, "message": a.message} for a in advice]


# -- commands -------------------------------------------------------------------------------------

def cmd_import(args) -> int:
    from llm_tuner.cli.profile_file import refuse_unusable
    from llm_tuner.core.cmdline import PASTE_LIMIT_CHARS, import_command, profile_to_argv, render_shell

    argv = list(args.argv or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if args.command_text is not None and argv:
        raise CliError("give the command either with --command STRING or after --, not both")
    if args.command_text is None and not argv:
        raise CliError('nothing to import: use --command "llama-server -m ..." or -- -m MODEL ...')
    size = len(args.command_text) if args.command_text is not None else sum(len(a) + 1 for a in argv)
    if size > PASTE_LIMIT_CHARS:
        raise CliError(f"the command is {size // 1024} KiB long; a llama-server command line is a few KiB "
                       f"(the limit is {PASTE_LIMIT_CHARS // 1024} KiB): is this the right text?")
    catalog = _catalog(args.binary)
    result = import_command(args.command_text if args.command_text is not None else argv, catalog)
    if result.problem:  # a wrong paste: nothing is saved (exit 2, as --help says)
        raise CliError(result.problem)
    profile = refuse_unusable(result.profile, "the command")
    out_argv, env = profile_to_argv(profile)
    advice = _advice(profile, catalog)
    failed = 1 if any(a.severity == "error" for a in advice) else 0
    if args.name:
        from llm_tuner.services.builds import save_profile
        from llm_tuner.services.settings_store import load_settings

        saved = save_profile(_repo(), args.name, profile, "imported", load_settings())  # with the build it is for
    else:
        saved = None
    if args.json:
        data = {"profile": profile.to_dict(), "argv": out_argv, "env": env, "unknown": result.unknown,
                "bad_values": result.bad_values, "advice": _advice_json(advice),
                "removed": [{"tokens": list(r.tokens), "replacement": r.replacement} for r in result.removed],
                "notes": result.notes}
        if saved is not None:
            data["saved"] = {"name": saved.name, "version": saved.version, "version_id": saved.version_id}
        emit_json(data)
        return failed
    print(render_shell(out_argv, env, binary=profile.binary))
    for a in advice:
        print(f"{a.severity}: {a.message} [{a.id}]", file=sys.stderr)
    for n in result.notes:
        print(f"note: {n}", file=sys.stderr)
    if saved is not None:
        print(f"saved as {saved.name!r} version {saved.version}", file=sys.stderr)
    return failed


def cmd_command(args) -> int:
    from llm_tuner.cli.profile_file import profile_binary
    from llm_tuner.core.cmdline import parse_help, profile_to_argv, render_shell
    from llm_tuner.services.binaries import BinaryError, read_help

    profile = _load(args.target)
    catalog = None
    if profile.binary:  # the program shown is the one run, check and bench run, once it is confirmed
        try:  # spelled as that program's --help lists each flag (a fork or an older build)
            catalog = parse_help(read_help(Path(profile_binary(profile, args.trust_binary))))
        except (CliError, BinaryError) as exc:
            print(f"note: {exc}", file=sys.stderr)
    argv, env = profile_to_argv(profile, catalog)
    shell = render_shell(argv, env, binary=profile.binary, mask_secrets=not args.show_secrets)
    if args.json:
        from llm_tuner.core.flags import mask_argv, mask_env

        masked = not args.show_secrets
        emit_json({"argv": mask_argv(argv) if masked else argv, "env": mask_env(env) if masked else env,
                   "binary": profile.binary, "command": shell})
        return 0
    print(shell)
    return 0


def cmd_check(args) -> int:
    """Exit 0 when nothing is at error level, 1 otherwise (llama-server would refuse or fail)."""
    profile = _load(args.target)
    advice = _advice(profile, _catalog(args.binary, profile, trust=args.trust_binary))
    if args.json:
        emit_json({"advice": _advice_json(advice)})
    else:
        for a in advice:
            print(f"{a.severity}: {a.message} [{a.id}]\n    {a.reason} ({a.source})")
        if not advice:
            print("no advice: nothing known to go wrong with this profile")
    return 1 if any(a.severity == "error" for a in advice) else 0


def cmd_list(args) -> int:
    from llm_tuner.core.units import printable

    repo = _repo()
    rows = []
    for name in repo.names():
        s = repo.latest(name)
        rows.append({"name": name, "version": s.version, "version_id": s.version_id,
                     "created_at": s.created_at.isoformat(timespec="seconds")})
    if args.json:
        emit_json({"profiles": rows})
    else:
        for r in rows:
            print(printable(f"{r['name']}  v{r['version']}  ({r['created_at']})"))
        if not rows:
            print("no saved profiles: import one with `llm-tuner profile import --name NAME --command '...'`")
    return 0
