"""Every flag of llama-server's --help has a field (hand-made or generated) or is text-only with a reason, and a
generated field writes its flag into the profile's arguments so that a pasted command line reads back the same."""

from __future__ import annotations

import shlex

import pytest

from llm_tuner.core.cmdline import (
    FIELD_FLAGS,
    FlagCatalog,
    GeneratedField,
    classify,
    import_command,
    parse_help,
    profile_to_argv,
    read_value,
    unlisted_flags,
    write_value,
)
from llm_tuner.core.settings import Settings
from llm_tuner.services.binaries import SERVER, default_catalog, probe


def _embedded_catalog() -> FlagCatalog:
    info = probe(SERVER, Settings(), with_devices=False)
    assert info.ok, info.error
    return info.catalog


def _account(catalog: FlagCatalog) -> dict[tuple[str, ...], str]:
    """Each flag of the catalog (by its spellings) -> how it is edited; fails on a flag counted twice or none."""
    sorted_flags = classify(catalog)
    seen: dict[tuple[str, ...], str] = {}
    for spec, field in sorted_flags.hand_made:
        seen[spec.names] = f"hand-made field {field}"
    for gf in sorted_flags.generated:
        assert gf.spec.names not in seen, gf.spec.names
        seen[gf.spec.names] = f"generated {gf.kind}"
    for entry in sorted_flags.text_only:
        assert entry.spec.names not in seen, entry.spec.names
        assert len(entry.reason) > 20, entry  # a reason a user can act on, not a bare label
        seen[entry.spec.names] = "text only: " + entry.reason
    return seen


@pytest.mark.server
@pytest.mark.parametrize("which", ["data file", "embedded build"])
def test_every_flag_of_the_help_has_a_field_or_a_reason(which):
    catalog = default_catalog() if which == "data file" else _embedded_catalog()
    seen = _account(catalog)
    assert sorted(seen) == sorted(spec.names for spec in catalog.flags)  # every flag, once
    counts = {kind: sum(1 for how in seen.values() if how.startswith(kind))
              for kind in ("hand-made", "generated", "text only")}
    assert sum(counts.values()) == len(catalog.flags) > 250
    assert counts["generated"] > 150 and counts["text only"] < 20  # text-only stays the exception
    # every hand-made field the build lists is counted as one (none shadowed by a generated field)
    listed = {ff.field for ff in FIELD_FLAGS if catalog.lookup(ff.flag) is not None}
    assert {how.removeprefix("hand-made field ") for how in seen.values() if how.startswith("hand-made")} == listed


def test_the_help_parser_reads_a_flag_with_a_dot():
    assert default_catalog().lookup("--fim-qwen-1.5b-default") is not None


def _by_flag(catalog: FlagCatalog) -> dict[str, GeneratedField]:
    return {gf.flag: gf for gf in classify(catalog).generated}


def test_fields_are_typed_from_the_help_text():
    gen = _by_flag(default_catalog())
    kinds = {flag: (gen[flag].kind, gen[flag].choices) for flag in (
        "--ignore-eos", "--perf", "--mirostat", "--rope-scale", "--rope-scaling", "--numa", "--log-colors",
        "--cpu-strict", "--lora", "--models-dir", "--override-kv", "--hf-token")}
    assert kinds == {
        "--ignore-eos": ("switch", ()), "--perf": ("toggle", ()), "--mirostat": ("number", ()),
        "--rope-scale": ("number", ()), "--rope-scaling": ("choice", ("none", "linear", "yarn")),
        "--numa": ("choice", ("distribute", "isolate", "numactl")), "--log-colors": ("choice", ("on", "off", "auto")),
        "--cpu-strict": ("choice", ("0", "1")), "--lora": ("path", ()), "--models-dir": ("folder", ()),
        "--override-kv": ("text", ()), "--hf-token": ("secret", ())}
    assert gen["--mirostat"].integer and not gen["--rope-scale"].integer  # default 0 vs none: any number
    assert gen["--mirostat"].problem("1.5") and gen["--rope-scale"].problem("1.5") is None
    assert gen["--rope-scale"].problem("big") == "--rope-scale needs a number, got 'big'"
    assert gen["--perf"].neg_flag == "--no-perf" and gen["--ui"].neg_flag == "--no-ui"
    assert gen["--mmproj-auto"].neg_flag == "--no-mmproj-auto"  # its own negative, not --no-mmproj
    assert "--ctx-size" not in gen and "--override-tensor" not in gen  # hand-made


def test_text_only_flags_say_why():
    why = {entry.spec.canonical: entry.reason for entry in classify(default_catalog()).text_only}
    assert "two values" in why["--control-vector-layer-range"]
    assert "each use adds" in why["--reverse-prompt"] and "each use adds" in why["--logit-bias"]
    assert "exits" in why["--help"] and "exits" in why["--list-devices"]
    assert why["--draft"].startswith("removed from llama-server") and "--spec-draft-n-max" in why["--draft"]


def _sample(gf: GeneratedField) -> list[str]:
    """Values a user could set: each a value the written command line must carry back."""
    return {"switch": ["on"], "toggle": ["off", "on"], "choice": [gf.choices[-1] if gf.choices else "x"],
            "number": ["-1" if gf.integer else "0.25"], "path": ["/models/a b.gguf"], "folder": ["/models"],
            "text": ["a,b"], "secret": ["s3cret"]}[gf.kind]


@pytest.mark.parametrize("catalog", [default_catalog()], ids=["data file"])
def test_every_generated_field_round_trips_through_a_pasted_command(catalog):
    fork = ("-tbq", "4")  # a fork's flag: kept, in its place
    checked = 0
    for gf in classify(catalog).generated:
        for value in _sample(gf):
            args = write_value(fork, gf, value, catalog)
            assert args[:2] == fork and read_value(args, gf, catalog) == value, (gf.flag, args)
            command = "llama-server -m m.gguf " + shlex.join(args)
            profile = import_command(command, catalog).profile
            assert profile.extra_args == args, (gf.flag, profile.extra_args)  # the fields show what was pasted
            assert read_value(profile.extra_args, gf, catalog) == value
            argv, _env = profile_to_argv(profile, catalog)
            assert argv[1:] == ["m.gguf", *args], (gf.flag, argv)  # the built command line is the pasted one
            assert unlisted_flags(profile.extra_args, catalog) == ["-tbq 4"]
            assert write_value(args, gf, None, catalog) == fork  # cleared: the flag is gone, nothing else
            checked += 1
    assert checked > 150


def test_writing_keeps_the_users_spelling_and_place_and_the_last_value_counts():
    catalog = default_catalog()
    gen = _by_flag(catalog)
    args = ("-n", "5", "--fork-x", "1", "--no-perf", "-n", "9")
    assert read_value(args, gen["--predict"], catalog) == "9"  # the last one counts, as in llama-server
    assert write_value(args, gen["--predict"], "7", catalog) == ("-n", "7", "--fork-x", "1", "--no-perf")
    assert read_value(args, gen["--perf"], catalog) == "off"
    assert write_value(args, gen["--perf"], "on", catalog) == ("-n", "5", "--fork-x", "1", "--perf", "-n", "9")
    assert write_value(("-e",), gen["--escape"], "on", catalog) == ("-e",)  # already on: as written
    assert write_value((), gen["--yarn-ext-factor"], "-1.5", catalog) == ("--yarn-ext-factor", "-1.5")


def test_a_forks_help_gets_its_own_fields():
    """A flag only a fork's --help lists is a generated field there; the same flag is unlisted for upstream."""
    fork = parse_help("----- common params -----\n\n--mtp-draft N                 MTP draft tokens (default: 3)\n"
                      "--fast-mode, --no-fast-mode   whether to go fast (default: enabled)\n"
                      "--no-checks                   skip the checks\n")
    gen = _by_flag(fork)
    assert gen["--mtp-draft"].kind == "number" and gen["--mtp-draft"].integer and gen["--fast-mode"].kind == "toggle"
    assert gen["--no-checks"].kind == "switch" and write_value((), gen["--no-checks"], "on", fork) == ("--no-checks",)
    assert write_value((), gen["--mtp-draft"], "4", fork) == ("--mtp-draft", "4")
    assert unlisted_flags(("--mtp-draft", "4"), default_catalog()) == ["--mtp-draft 4"]
