"""The one loader for a `--profile NAME|FILE` argument, used by every command that takes one.

FILE is a profile JSON file (a bare profile object, or what `llm-tuner profile import --json` prints, whose
`profile` object is used) or a text file holding a llama-server command line. NAME is the newest saved
version of a named profile. A file is read strictly: a key a profile does not have, or a value of the wrong
type, is an error naming the key and the file, so a typo never launches a server without the setting the
user meant. (Stored history keeps loading old versions leniently: strictness lives here, not in the model.)
A NUL byte in any field is refused too, naming the field (no program can take one), and so is an environment
variable whose name is not a name (`A=1 $(touch X) B`: a copied shell line would run it).

A profile's own program (`binary`) runs only once the user confirmed it (services.binaries' trust):
`profile_binary` is the one check for every command, `--trust-binary` (add_trust_argument) confirms it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from llm_tuner.cli.output import CliError

# keys of `profile import --json` beside its `profile` object
_IMPORT_OUTPUT_KEYS = frozenset({"profile", "argv", "env", "unknown", "bad_values", "advice", "removed", "notes",
                                 "saved"})


@dataclass(frozen=True)
class LoadedProfile:
    profile: object  # core.profile.LaunchProfile
    label: str  # the saved name, or the file's stem
    version_id: int | None = None  # the saved version, None for a file


def load_profile(ref: str) -> LoadedProfile:
    """NAME or FILE -> the profile (CliError with a message that says what to do when it cannot)."""
    path = Path(ref).expanduser()
    if path.is_file():
        return LoadedProfile(refuse_unusable(profile_from_file(path), str(path)), path.stem)
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    saved = ProfileRepository(open_engine(database_path())).latest(ref)
    if saved is None:
        raise CliError(f"no saved profile named {ref!r} and no such file. List names with `llm-tuner profile "
                       "list`, or pass a profile JSON file (what `llm-tuner profile import --json` prints).")
    refuse_unusable(saved.profile, f"saved profile {saved.name!r} (version {saved.version})")
    return LoadedProfile(saved.profile, saved.name, saved.version_id)


def refuse_unusable(profile, where: str):
    """The profile, or CliError naming what no program can take: a NUL byte, an environment name that is no
    name."""
    from llm_tuner.core.profile import bad_env_names, nul_fields

    bad = nul_fields(profile)
    if bad:
        many = len(bad) > 1
        raise CliError(f"{where}: {'keys' if many else 'key'} {', '.join(repr(b) for b in bad)} "
                       f"{'hold' if many else 'holds'} a NUL byte (\\0), which no program can take: remove it and try again")
    names = bad_env_names(profile)
    if names:
        raise CliError(f"{where}: {names[0]!r} is not an environment variable name (letters, digits and _, "
                       "not starting with a digit): rename or remove it in 'env' and try again")
    return profile


def add_trust_argument(parser) -> None:
    """`--trust-binary`: the CLI's counterpart of the Profile tab's Confirm for a profile's own program."""
    parser.add_argument("--trust-binary", action="store_true",
                        help="confirm that the profile's own program (its `binary`, e.g. from a pasted "
                             "command or a shared file) may run; recorded in settings like the Profile tab's "
                             "Confirm. Without it an unconfirmed program is never run, not even with --help")


def profile_binary(profile, trust: bool = False) -> str | None:
    """The profile's own program when it may run (confirming it first when `trust`), or None when the profile
    names none (the configured llama-server runs). CliError, with what to do, when it may not run."""
    from llm_tuner.services.binaries import BinaryError, require_trusted, trust_binary

    if not profile.binary:
        return None
    try:
        if trust:
            trust_binary(profile.binary)
        require_trusted(profile.binary)
    except BinaryError as exc:
        raise CliError(str(exc)) from None
    return profile.binary


def profile_from_file(path: Path):
    """A profile JSON file (strict) or a command-line text file -> LaunchProfile."""
    from llm_tuner.core.cmdline import import_command
    from llm_tuner.core.profile import LaunchProfile

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    if path.suffix.lower() != ".json" and not text.lstrip().startswith(("{", "[")):
        return import_command(text).profile
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path} is not readable JSON ({exc}). Save the `profile` object that "
                       "`llm-tuner profile import --json` prints.") from None
    if isinstance(data, dict) and isinstance(data.get("profile"), dict):
        extra = sorted(set(data) - _IMPORT_OUTPUT_KEYS)
        if extra:
            raise CliError(f"{path}: unknown key {extra[0]!r} beside 'profile'")
        data = data["profile"]
    if not isinstance(data, dict):
        raise CliError(f"{path} does not hold a profile (a JSON object of profile settings)")
    unknown = sorted(set(data) - set(LaunchProfile.model_fields))
    if unknown:
        raise CliError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(repr(k) for k in unknown)} (not a profile setting; see "
                       "`llm-tuner profile import --json` for the keys)")
    try:
        return LaunchProfile.model_validate(data)
    except ValueError as exc:
        errors = getattr(exc, "errors", lambda: [])()
        if errors:
            e = errors[0]
            key = ".".join(str(x) for x in e.get("loc", ())) or "?"
            raise CliError(f"{path}: key {key!r}: {e.get('msg', exc)} (got {e.get('input')!r})") from None
        raise CliError(f"{path} does not hold a profile: {exc}") from None
