"""A router's presets file (`--models-preset`): llama.cpp's INI, read and written; each model's arguments.

The format (common/preset.cpp in the pinned llama.cpp): `[name]` sections of `key = value` lines, `;`/`#`
comments; a key is any spelling of a flag without its dashes (`ctx-size`, `c`, `no-mmap`) or its `LLAMA_ARG_*`
variable; a flag that takes no value reads `true`/`false` (`on`/`off`, `1`/`0`), a negative spelling reversed.
The `[*]` section applies to every model; a model's own section overrides it, and the router's own command
line overrides both, flag by flag (server-models.cpp: cascade(global, presets), then merge(router args)). Keys
only a preset knows (`load-on-startup`, `stop-timeout`) are no flags of an instance. A `--models-dir` folder
gives each `.gguf` file (not an `mmproj`/draft companion) a model named by its file name without `.gguf`, and
each sub-folder one named by the folder.

Pure: text in, text out. Files are read and written by services.router_presets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llm_tuner.core import flags
from llm_tuner.core.cmdline import import_command, profile_to_argv
from llm_tuner.core.profile import LaunchProfile

GLOBAL = "*"  # the section every model inherits
PRESET_ONLY = frozenset({"load-on-startup", "stop-timeout", "dedup-cache-models", "version"})
# what the router sets for each instance itself, or keeps for itself: never a model's own argument
ROUTER_OWN = ("models_dir", "models_preset", "models_max", "models_autoload", "port", "host", "alias")
# what stays out of a written file: the router's own, and secrets (a presets file is plain text)
_NOT_WRITTEN = frozenset(ROUTER_OWN)

_HEADER = re.compile(r"^\s*\[\s*([^\]]*?)\s*\]\s*(?:[;#].*)?$")
_KV = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*(?:[;#].*)?$")


class PresetError(ValueError):
    """A presets file llama-server would not read (a line that is neither a section, a key nor a comment)."""


@dataclass(frozen=True)
class Presets:
    """A presets file: the `[*]` section's options and each model's (section -> key -> value, in order)."""

    global_options: dict[str, str] = field(default_factory=dict)
    models: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_ini(text: str) -> Presets:
    """The text of a presets file -> Presets (keys and values as written). PresetError on a line llama.cpp's
    parser refuses, naming it."""
    sections: dict[str, dict[str, str]] = {}
    current = "default"  # lines before any section: llama.cpp's "default" preset
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if m := _HEADER.match(line):
            current = m.group(1)
            sections.setdefault(current, {})
            continue
        if m := _KV.match(line):
            if m.group(1) == "version":
                continue  # reserved by llama.cpp, not an option
            sections.setdefault(current, {})[m.group(1)] = m.group(2)
            continue
        raise PresetError(f"line {no} is neither [section] nor key = value: {raw.strip()!r}")
    glob = sections.pop(GLOBAL, {})
    if not sections.get("default"):
        sections.pop("default", None)
    return Presets(glob, sections)


def _flag_of(key: str) -> tuple[flags.Flag, bool] | None:
    """The flag a preset key names (a spelling without dashes, or its variable) and whether it is positive."""
    for spelled in (f"--{key}", f"-{key}"):
        if (hit := flags.lookup(spelled)) is not None:
            return hit
    f = flags.by_env(key)
    return (f, True) if f is not None else None


def options_to_argv(options: Mapping[str, str]) -> list[str]:
    """A section's options -> llama-server arguments (long spellings; `true`/`false` as the flag or its
    negative, as llama.cpp's to_args writes them). Preset-only keys are left out; an unknown key becomes
    `--key value` (or `--key` for a true word), as llama-server would be given it."""
    out: list[str] = []
    for key, value in merge_options(options).items():  # one value per flag, whichever spelling came last
        if key in PRESET_ONLY:
            continue
        hit = _flag_of(key)
        if hit is None:
            out += [f"--{key}"] if value.lower() in flags.TRUE_WORDS else [f"--{key}", value]
            continue
        f, positive = hit
        if positive and f.takes_value:
            out += [f.flag, value]
            continue
        on = value.lower() not in flags.FALSE_WORDS
        if not positive:
            on = not on
        if on:
            out.append(f.flag)
        elif f.neg_flag:
            out.append(f.neg_flag)
    return out


def argv_to_options(argv: Sequence[str]) -> dict[str, str]:
    """llama-server arguments -> preset options, one per flag (a later use wins, as llama.cpp's own map does;
    a repeated `-ot` joins its rules with ','). Keys are long spellings without dashes; a switch reads `true`,
    a toggle's negative spelling its positive key `false`."""
    out: dict[str, str] = {}
    for _i, tok, value in flags.iter_flags(list(argv)):
        hit = flags.lookup(tok)
        if hit is None:
            name = flags.normalize(tok).lstrip("-")
            out[name] = "true" if value is None else value
            continue
        f, positive = hit
        name = f.flag.lstrip("-")
        if positive and f.takes_value:
            value = value if value is not None else ""
            out[name] = f"{out[name]},{value}" if f.repeats and name in out else value
        elif positive:
            out[name] = "true"
        elif f.names:
            out[name] = "false"
        else:
            out[(f.neg_flag or tok).lstrip("-")] = "true"
    return out


def option_key(key: str) -> str:
    """The flag a preset key stands for (its table key), so `c` and `ctx-size` merge as one; the key itself
    when unknown."""
    hit = _flag_of(key)
    return hit[0].key if hit is not None else key


def merge_options(*layers: Mapping[str, str]) -> dict[str, str]:
    """Options cascaded as llama.cpp does: a later layer's flag replaces an earlier one's (any spelling)."""
    out: dict[str, tuple[str, str]] = {}
    for layer in layers:
        for key, value in layer.items():
            out[option_key(key)] = (key, value)
    return {k: v for k, v in out.values()}


def model_argvs(
    presets: Presets | None, dir_models: Mapping[str, str], router_argv: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Each model of a router -> the arguments its instance gets (the router's own flags left out): models of
    the `--models-dir` folder (name -> file) and of the presets file, each over the `[*]` section, the
    router's command line over both."""
    glob = presets.global_options if presets is not None else {}
    router = argv_to_options(flags.without(list(router_argv), *ROUTER_OWN))
    own: dict[str, dict[str, str]] = {name: {"model": path} for name, path in dir_models.items()}
    for name, opts in presets.models.items() if presets is not None else ():
        own[name] = merge_options(own.get(name, {}), opts)
    return {
        name: flags.without(options_to_argv(merge_options(glob, opts, router)), *ROUTER_OWN)
        for name, opts in sorted(own.items())
    }


def shared_and_own(named: Mapping[str, Sequence[str]]) -> Presets:
    """Named arguments (model name -> its instance's argv) -> Presets: the options every model has with the
    same value go to `[*]`, the rest (each model's file among them) to its own section. The router's own flags
    and secrets are left out."""
    opts = {
        name: {
            k: v
            for k, v in argv_to_options(flags.strip_secrets(list(argv), {})[0]).items()
            if option_key(k) not in _NOT_WRITTEN
        }
        for name, argv in named.items()
    }
    shared: dict[str, str] = {}
    if len(opts) > 1:
        first, *rest = opts.values()
        shared = {
            k: v for k, v in first.items() if option_key(k) != "model" and all(o.get(k) == v for o in rest)
        }
    return Presets(
        shared, {name: {k: v for k, v in o.items() if k not in shared} for name, o in opts.items()}
    )


def write_ini(presets: Presets, header: str = "") -> str:
    """Presets -> the text of a presets file (`[*]` first, then each model's section in the order given)."""
    lines = [f"; {line}" for line in header.splitlines()]
    lines.append("version = 1")
    for name, options in ((GLOBAL, presets.global_options), *presets.models.items()):
        if name == GLOBAL and not options:
            continue
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {v}" for k, v in options.items()]
    return "\n".join(lines) + "\n"


def profile_argv(profile: LaunchProfile) -> list[str]:
    """A profile's instance arguments as llama-server acts on them (its LLAMA_ARG_* variables as flags)."""
    argv, env = profile_to_argv(profile)
    return flags.effective_argv(argv, env)


def presets_from_profiles(
    profiles: Mapping[str, LaunchProfile], solved: Mapping[str, Sequence[str]] | None = None
) -> Presets:
    """Saved profiles (section name -> profile) and models without one (name -> arguments, the fit solver's
    answer with its -m) -> Presets: what all share in `[*]`, each model's own placement, K/V and file in its
    section."""
    named: dict[str, Sequence[str]] = {name: profile_argv(p) for name, p in profiles.items()}
    named.update(solved or {})
    return shared_and_own(named)


def profiles_from_presets(presets: Presets) -> dict[str, LaunchProfile]:
    """A presets file's models -> one profile each (its section over `[*]`), read as a pasted command."""
    return {
        name: import_command(options_to_argv(merge_options(presets.global_options, opts))).profile
        for name, opts in presets.models.items()
    }
