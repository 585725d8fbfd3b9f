"""Issue 35, done-when: a bad value never gives a traceback or Python's own words at these entry points: `estimate`
(and its `--devices`), `profile import`, `profile check`, the paste dialog, the Plan, `sweep --values`, `tune
--knob`. A property test (hypothesis) over the flag catalog's value kinds (integer, number, choice, list), each flag
of the tested build's --help given a malformed value; the entry points are the real ones (the CLI in-process on
the demo model's header, the dialog offscreen, PlanState with the model read). No server starts: a value that is
refused is refused before that (a sweep or a tune that started one would exit 1, not 2)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_tuner.cli import main
from llm_tuner.core.cmdline import FIELD_FLAGS, classify, import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.services.binaries import default_catalog
from llm_tuner.state.plan import PlanState
from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog

PYTHON_WORDS = re.compile(r"Traceback|invalid literal|could not convert|KeyError|ValueError|TypeError|base 10|"
                          r"object has no attribute|unsupported operand|division by zero|index out of range|"
                          r"errors\.pydantic\.dev|OverflowError|cannot convert float|NoneType|Error\(")
CATALOG = default_catalog()
FIELDS = classify(CATALOG)
_SKIP = {"--model", "--hf-repo", "--mmproj", "--alias", "--spec-draft-model", "--chat-template", "--host",
         "--chat-template-file", "--chat-template-kwargs", "--api-key-file", "--rpc", "--port"}


def _kinds() -> dict[str, list[str]]:
    """The catalog's flags by value kind: integer, number, choice, list (hand-made fields and generated ones)."""
    out: dict[str, list[str]] = {"integer": [], "number": [], "choice": [], "list": []}
    for ff in FIELD_FLAGS:
        if ff.flag in _SKIP or CATALOG.lookup(ff.flag) is None:
            continue
        kind = {"int": "integer", "layers": "integer", "float": "number", "fa": "choice", "onoff": "choice",
                "floats": "list", "ints": "list", "list": "list"}.get(ff.kind)
        if kind is None and ff.kind == "str" and ff.flag in ("--cache-type-k", "--cache-type-v", "--split-mode",
                                                               "--load-mode", "--spec-draft-type-k"):
            kind = "choice"
        if kind is not None:
            out[kind].append(ff.flag)
    for gf in FIELDS.generated:
        if gf.kind == "number":
            out["integer" if gf.integer else "number"].append(gf.flag)
        elif gf.kind == "choice" and "," not in (gf.spec.value or "").strip("{}[]<>"):
            out["choice"].append(gf.flag)
    return out


KINDS = _kinds()
_LETTERS = st.text(alphabet="abcxyzé%_ ", min_size=1, max_size=6).map(lambda t: "q" + t)
MALFORMED = {
    "integer": st.one_of(st.sampled_from(["abc", "1.5", "two", "0x1F", "٣", "1,2", "--", "9" * 25, "-9" + "9" * 20,
                                          "12abc", "+", "1 2"]), _LETTERS),
    "number": st.one_of(st.sampled_from(["abc", "1.2.3", "1,5", "--", "e5", "١٫٥", "0..1", "hot"]), _LETTERS),
    "choice": st.one_of(st.sampled_from(["maybe", "q9_0", "sideways", "ON!", "yes please"]), _LETTERS),
    "list": st.one_of(st.sampled_from(["a,b", "1,,b", "x/y", "1;2", "1,two", "nan?"]),
                      _LETTERS.map(lambda t: f"1,{t}")),
}


@st.composite
def flag_and_value(draw):
    kind = draw(st.sampled_from([k for k, v in KINDS.items() if v]))
    return kind, draw(st.sampled_from(KINDS[kind])), draw(MALFORMED[kind])


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out + cap.err


def _plain(text: str) -> None:
    assert not PYTHON_WORDS.search(text), text


def test_the_catalog_has_every_kind():
    assert all(len(v) >= 2 for v in KINDS.values()), {k: len(v) for k, v in KINDS.items()}
    assert "--ctx-size" in KINDS["integer"] and "--temp" in KINDS["number"]
    assert "--flash-attn" in KINDS["choice"] and "--tensor-split" in KINDS["list"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=flag_and_value())
def test_a_malformed_value_is_said_in_plain_words_everywhere(qtbot, capsys, tmp_path, demo_model, case):
    kind, flag, value = case
    argv = ["-m", str(demo_model), flag, value]

    # estimate: a plan, or an error in plain words (never a traceback: main re-raises what it does not know)
    code, text = _cli(capsys, "estimate", "--devices", "Host=16384", "--", *argv)
    assert code in (0, 1, 2)
    _plain(text)
    code, text = _cli(capsys, "estimate", f"--devices=CUDA0={value}", "--", "-m", demo_model)
    assert code == 2 and "--devices" in text
    _plain(text)

    # profile import (what it understood and why not), then profile check of the file it printed
    code, text = _cli(capsys, "profile", "import", "--json", "--", *argv)
    assert code in (0, 1, 2)
    _plain(text)
    if code != 2:
        f = tmp_path / "p.json"
        f.write_text(json.dumps(json.loads(text[:text.rindex("}") + 1])["profile"]))
        code, text = _cli(capsys, "profile", "check", f)
        assert code in (0, 1)
        _plain(text)

    # the Plan: the profile of the paste, planned or refused in words
    state = PlanState(inventory=lambda: DeviceInventory(host=HostInfo(memory_total_mib=16384,
                                                                      memory_available_mib=12000)))
    state.use_profile(import_command(["llama-server", *argv], CATALOG).profile)
    state.recompute()
    _plain(state.model_line() + state.summary() + state.verdict())

    # the paste dialog's report
    dlg = PasteCommandDialog(CATALOG)
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.read_finished, timeout=10_000):
        dlg.set_text(f"llama-server -m {demo_model} {flag} '{value}'")
    _plain(dlg.report.text())
    dlg.close()

    # sweep and tune values: refused before any server starts (exit 2), in plain words
    if kind != "list":
        sep = ";" if "," in value else ","
        code, text = _cli(capsys, "sweep", f"--param={flag}", f"--values={value}{sep}{value}", "--reps", "1",
                          "--", "-m", demo_model, "-c", "512")
        assert code == 2 and "nothing was started" in text, text
        _plain(text)
        code, text = _cli(capsys, "tune", f"--knob=custom:{flag}={value};{value}", "--budget", "60",
                          "--", "-m", demo_model, "-c", "512")
        assert code == 2 and "nothing was started" in text, text
        _plain(text)


@pytest.mark.parametrize("option", [("--reps", "-1"), ("--prompt-tokens", "0"), ("--clients", "0"),
                                    ("--warmup", "-2"), ("--depth", "-5"), ("--stall-after", "-1"),
                                    ("--stall-after", "nan")])
def test_bench_options_are_refused_in_plain_words(capsys, demo_model, option):
    code = main(["bench", *option, "--", "-m", str(demo_model)]) if option[0] != "--stall-after" else None
    if code is None:
        with pytest.raises(SystemExit) as exc:
            main(["bench", *option, "--", "-m", str(demo_model)])
        code = exc.value.code
    text = capsys.readouterr().err
    assert code == 2 and option[0] in text
    _plain(text)
