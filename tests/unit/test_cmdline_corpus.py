"""Real-world command lines (tests/data/commands/commands.txt, each with its source) import and export
with nothing lost or reordered that matters, judged by llama-server's own flag catalog."""

from __future__ import annotations

import re

import pytest

from llm_tuner.core.cmdline import import_command, parse_help, profile_to_argv, split_command_text
from tests.conftest import DATA

CATALOG = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())
_APPEND = {"--spec-type", "--override-tensor", "--spec-draft-override-tensor"}
_FA = {"on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"}
_NEG = re.compile(r"^--?no-|^-n(kvo|ocb|r)$")


def load_corpus() -> dict[str, tuple[str, str]]:
    text = (DATA / "commands" / "commands.txt").read_text()
    out = {}
    for block in text.split("\n### ")[1:]:
        head, _, body = block.partition("\n")
        source, _, command = body.partition("\n")
        assert source.startswith("# source: "), head
        out[head.strip()] = (source[len("# source: "):], command.strip())
    return out


CORPUS = load_corpus()


def _norm_value(v: str):
    parts = re.split(r"[,/]", v)
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        return v


def semantics(argv: list[str]) -> tuple[dict, list[str]]:
    """What llama-server makes of an argv: canonical flag -> value (last wins, appending flags append),
    and the tokens it does not know, in order."""
    known: dict = {}
    other: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        spec = CATALOG.lookup(tok)
        legacy_fa = tok in ("-fa", "--flash-attn") and (i + 1 >= len(argv) or argv[i + 1] not in _FA)
        if spec is None or legacy_fa or spec.help.startswith("the argument has been removed"):
            other.append(tok)
            i += 1
            continue
        n = 0 if spec.value is None else (2 if re.fullmatch(r"[A-Z_]+ [A-Z_]+", spec.value) else 1)
        vals = argv[i + 1:i + 1 + n]
        if spec.canonical in _APPEND:
            known[spec.canonical] = known.get(spec.canonical, ()) + tuple(",".join(vals).split(","))
        elif n == 0:
            known[spec.canonical] = not _NEG.match(tok)
        else:
            known[spec.canonical] = tuple(_norm_value(v) for v in vals)
        i += 1 + n
    return known, other


def test_corpus_has_the_field_notes_and_twenty_more_with_sources():
    assert {"field-notes-a", "field-notes-b", "field-notes-c"} <= set(CORPUS)
    assert len(CORPUS) >= 23
    assert all(src.startswith(("http", "shared/reference")) for src, _ in CORPUS.values())


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_import_export_keeps_everything_that_matters(name):
    _source, text = CORPUS[name]
    split = split_command_text(text)
    result = import_command(text, CATALOG)
    out_argv, out_env = profile_to_argv(result.profile)
    assert semantics(out_argv) == semantics(list(split.argv))
    assert out_env == split.env
    # unknown tokens are reported in the order they were written
    assert result.unknown == [t for t in result.unknown if t in split.argv]
    # and the export reads back to the same profile
    again = import_command(out_argv, CATALOG, env=out_env).profile
    assert again == result.profile.model_copy(update={"binary": None})


EXPECTED = {
    "field-notes-c": lambda r: r.unknown == ["-tbq", "4", "--mtp-draft", "3"],
    "field-notes-b": lambda r: [x.flag for x in r.removed] == ["--mlock"] and r.profile.fit is False,
    "speed-bench-readme": lambda r: r.unknown == ["--np", "1"] and r.profile.flash_attn == "on",
    "server-readme-router-ctx": lambda r: r.unknown == ["-ctx", "8192"] and r.profile.parallel == 2,
    "pr10455-speculative": lambda r: [x.flag for x in r.removed] == ["--draft-max", "--draft-min"]
    and r.profile.draft_gpu_layers == 99,
    "issue14057-draft": lambda r: [x.flag for x in r.removed] == ["-fa", "--draft-max", "--draft-min"],
    "issue9013-windows": lambda r: r.binary == ".\\llama-server" and r.profile.top_k == 40,
    "issue25320-windows-moe": lambda r: r.profile.override_tensor[0].pattern == r"\.*\.ffn_(gate|up|down)_exps.",
    "pr15077-n-cpu-moe": lambda r: r.profile.n_cpu_moe == 3 and [x.flag for x in r.removed] == ["--flash-attn"],
    "cookbook-muse-after": lambda r: r.profile.hf_repo == "meta-models/Muse-Glimmer-30B-GGUF"
    and r.profile.alias == "muse-glimmer",
    "pr9105-env": lambda r: r.profile.env["LLAMA_ARG_CTX_SIZE"] == "1024" and r.profile.ctx_size is None,
    "ik-llama-moe-offload": lambda r: r.profile.gpu_layers == 99 and str(r.profile.override_tensor[0]) == "exps=CPU",
    "server-tests-gdb": lambda r: r.profile.slots is False and r.profile.alias == "tinyllama-2",
    "fit-params-readme": lambda r: r.profile.model == "/opt/models/qwen_3-30b3a-f16.gguf",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_specific_readings(name):
    assert EXPECTED[name](import_command(CORPUS[name][1], CATALOG))
