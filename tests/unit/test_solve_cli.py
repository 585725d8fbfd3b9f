"""`llm-tuner solve layers|context|split`: the Plan tab's buttons from the command line, on the real demo model,
planned devices and profiles in a real SQLite file. The answer, its reason and the profile it writes are the
Plan tab's (state.plan.PlanState driven as the buttons drive it)."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.core.cmdline import import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.services.binaries import default_catalog
from llm_tuner.state.plan import PlanState

HOST = 65536


def run(capsys, *argv: str) -> tuple[int, dict | str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    try:
        return code, json.loads(out.out), out.err
    except ValueError:
        return code, out.out, out.err


def plan_tab(argv: list[str], devices: dict[str, int], goal: str):
    """What the Plan tab's button answers for the same profile and planned devices, and the profile it writes."""
    state = PlanState(inventory=lambda: DeviceInventory(host=HostInfo(memory_total_mib=HOST,
                                                                       memory_available_mib=HOST)))
    for name, mib in devices.items():
        state.add_planned_device(name, "CUDA", mib)
    written = []
    state.add_callback(lambda what, *d: written.append(d[0]) if what == "profile" else None)
    state.use_profile(import_command(argv, default_catalog()).profile)
    return state.solve(goal), written[-1] if written else None


@pytest.mark.parametrize(("goal", "devices", "extra", "expected"), [
    ("layers", {"CUDA0": 2500}, ["-c", "8192"], "-ngl 9 of 19; one more layer does not fit: CUDA0 is the limit"),
    ("layers", {"CUDA0": 4096}, ["-c", "8192"], "every layer fits on the GPUs"),
    ("context", {"CUDA0": 2500}, [], "largest context 256 tokens; one more step does not fit: CUDA0 is the limit"),
    ("context", {"CUDA0": 8192}, [], "largest context 32768 tokens; the trained context fits"),
    ("split", {"CUDA0": 2500, "CUDA1": 4000}, ["-c", "8192"], "-ts 26,74 puts layers in proportion"),
])
def test_the_answer_and_its_reason_are_the_plan_tabs(capsys, demo_model, goal, devices, extra, expected):
    argv = ["-m", str(demo_model), *extra]
    spec = ",".join(f"{k}={v}" for k, v in devices.items()) + f",Host={HOST}"
    code, data, _ = run(capsys, "solve", goal, "--json", "--devices", spec, "--", *argv)
    reason, profile = plan_tab(argv, devices, goal)
    assert code == 0 and data["found"] and data["fits"] is True
    assert data["reason"] == reason and data["reason"].startswith(expected)
    assert data["changes"] == {k: v for k, v in profile.to_dict().items()
                               if import_command(argv).profile.to_dict().get(k) != v}
    assert [d["name"] for d in data["plan"]["devices"]] == [*devices, "Host"]


def test_the_answer_goes_into_a_saved_profile_and_the_profile_is_solved_as_saved(capsys, demo_model):
    assert main(["profile", "import", "--name", "chat", "--", "-m", str(demo_model), "-c", "8192"]) == 0
    capsys.readouterr()
    code, data, err = run(capsys, "solve", "layers", "--devices", "CUDA0=2500", "--profile", "chat",
                          "--save-as", "chat", "--json")
    assert code == 0 and data["saved"]["name"] == "chat" and data["saved"]["version"] == 2, err
    code, cmd, _ = run(capsys, "profile", "command", "chat", "--json")
    assert cmd["argv"][cmd["argv"].index("--n-gpu-layers") + 1] == "9" and "--ctx-size" in cmd["argv"]
    code, text, _ = run(capsys, "solve", "context", "--devices", "CUDA0=2500", "--profile", "chat", "--save-as",
                        "chat small")
    assert code == 0 and text.startswith("largest context ") and "--n-gpu-layers 9" in text
    code, names, _ = run(capsys, "profile", "list", "--json")
    assert [p["name"] for p in names["profiles"]] == ["chat", "chat small"]


def test_nothing_fits_exits_1_with_the_limit_and_saves_nothing(capsys, demo_model):
    code, data, _ = run(capsys, "solve", "layers", "--json", "--devices", "CUDA0=1024,Host=128", "--save-as", "x",
                        "--", "-m", str(demo_model))
    assert code == 1 and not data["found"] and data["reason"].startswith("nothing fits, even on the CPU: ")
    assert "is the limit" in data["reason"] and "saved" not in data
    code, names, _ = run(capsys, "profile", "list", "--json")
    assert names["profiles"] == []


@pytest.mark.parametrize(("argv", "words"), [
    (["solve", "layers"], "nothing to solve for"),
    (["solve", "layers", "--", "-m", "/no/such/model.gguf"], "does not exist"),
    (["solve", "context", "--devices", "CUDA0", "--", "-m", "x.gguf"], "is not NAME=MiB"),
    (["solve", "split", "--profile", "nope"], "no saved profile named 'nope'"),
    (["solve", "split", "--profile", "nope", "--", "-m", "x.gguf"], "not both"),
    (["solve", "layers", "--", "-c", "4096"], "no model"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and words in err, err


@pytest.mark.parametrize(("tail", "words"), [
    (["-c", "abc"], "-c needs a whole number, got 'abc'"),
    (["-ctk", "q9_0"], "q9_0: not a K/V cache type of llama-server"),
])
def test_a_value_llama_server_refuses_is_said_not_no_model(capsys, demo_model, tail, words):
    """Issue 35's ArgumentError through issue 41's solve: the value is named (it said 'the profile names no
    model (-m)' for a profile whose -m exists)."""
    code, out, err = run(capsys, "solve", "layers", "--", "-m", str(demo_model), *tail)
    assert code == 2 and out == "" and "Traceback" not in err
    assert words in err and "no model" not in err, err


def test_a_draft_model_that_cannot_be_read_is_a_warning_not_a_silent_omission(capsys, demo_model, tmp_path):
    """-md naming a file that is not there: the plan (and its answer) leaves the draft out, and says so."""
    missing = tmp_path / "draft-typo.gguf"
    code, data, err = run(capsys, "solve", "layers", "--json", "--devices", f"CUDA0=4096,Host={HOST}", "--",
                          "-m", str(demo_model), "-md", str(missing), "--spec-type", "draft-simple")
    assert code == 0 and data["found"]
    assert "warning: the draft model (-md) could not be read" in err and "does not exist" in err, err
