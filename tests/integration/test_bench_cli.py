"""`llm-tuner bench`, `runs list|compare|export|delete` and `sweep` on the real server (short specs, the tiny
random model of tests/conftest.py: the claims are what the commands store and print, not the model's figures)."""

import json

import pytest

from llm_tuner.cli import main

pytestmark = pytest.mark.server


def _json(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def test_bench_runs_and_sweep_commands(capsys, tiny_model, tmp_path):
    common = ["--prompt-tokens", "16", "--gen-tokens", "4", "--reps", "2", "--warmup", "0", "--json"]
    assert main(["bench", *common, "--label", "A", "--", "-m", str(tiny_model), "-t", "2", "-c", "1024"]) == 0
    a = _json(capsys)
    assert set(a["reps"][0]) >= {"prompt_tokens", "prompt_n", "prompt_ms", "prompt_per_second", "predicted_n",
                                 "predicted_ms", "predicted_per_second", "draft_n", "draft_n_accepted", "ttft_ms"}
    assert [r["prompt_n"] for r in a["reps"]] == [16, 16] and [r["predicted_n"] for r in a["reps"]] == [4, 4]
    assert a["summary"]["metrics"]["gen_tps@16"]["n"] == 2 and a["llama_bench"] == []

    assert main(["sweep", "--param=-ub", "--values", "32,256", *common, "--label", "S", "--",
                 "-m", str(tiny_model), "-t", "2", "-c", "1024"]) == 0
    captured = capsys.readouterr()
    sweep = json.loads(captured.out.strip().splitlines()[-1])
    assert "sweep: about" in captured.err and "-ub=256 (2/2)" in captured.err  # progress with time left
    assert [r["status"] for r in sweep["runs"]] == ["complete", "complete"]
    assert [r["label"] for r in sweep["runs"]] == ["S -ub=32", "S -ub=256"]
    assert sweep["runs"][1]["server_argv"][-2:] == ["-ub", "256"]

    assert main(["runs", "list", "--json"]) == 0
    runs = _json(capsys)
    assert {r["profile"] for r in runs} == {"A", "S -ub=32", "S -ub=256"}
    assert {"run_id", "profile", "model", "status", "started"} <= set(runs[0])

    b_id = sweep["runs"][1]["run_id"]
    assert main(["runs", "compare", str(a["run_id"]), str(b_id), "--json"]) == 0
    cmp = _json(capsys)
    names = [m["name"] for m in cmp["metrics"]]
    assert "prefill_tps@16" in names and "gen_tps@16" in names and "ttft_ms@16" in names
    m = cmp["metrics"][0]
    assert {"a", "b", "delta_pct", "ci_low_pct", "ci_high_pct", "verdict"} <= set(m)
    assert {"median", "n"} <= set(m["a"])
    assert {"flag": "--ubatch-size", "a": None, "b": "256"} in cmp["profile_diff"]  # one name for every spelling

    assert main(["runs", "compare", "A", "S -ub=32", "--profiles", "--json"]) == 0
    assert _json(capsys)["b"]["label"] == "S -ub=32"

    for fmt in ("csv", "json"):
        assert main(["runs", "export", str(a["run_id"]), "--format", fmt, "--out", str(tmp_path)]) == 0
    assert (tmp_path / f"run-{a['run_id']}.csv").read_text().count("\n") == 3
    assert json.loads((tmp_path / f"run-{a['run_id']}.json").read_text())["run_id"] == a["run_id"]

    # A saved profile file (LaunchProfile JSON) goes through core.cmdline.profile_to_argv.
    from llm_tuner.core.profile import LaunchProfile

    prof = tmp_path / "small-ub.json"
    prof.write_text(LaunchProfile(model=str(tiny_model), threads=2, ctx_size=1024, ubatch_size=128).model_dump_json())
    assert main(["bench", *common, "--profile", str(prof)]) == 0
    p = _json(capsys)
    assert p["label"] == "small-ub" and "--ubatch-size" in p["server_argv"] and p["status"] == "complete"

    # A profile saved by name (store.profiles): the run points at its version.
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    saved = ProfileRepository(open_engine(database_path())).save(
        "named", LaunchProfile(model=str(tiny_model), threads=2, ctx_size=1024))
    assert main(["bench", *common, "--profile", "named"]) == 0
    named = _json(capsys)
    assert named["label"] == "named" and named["profile_version_id"] == saved.version_id
    assert main(["runs", "compare", "small-ub", "named", "--profiles", "--json"]) == 0
    assert _json(capsys)["profile_diff"] == [{"flag": "--ubatch-size", "a": "128", "b": None}]
    assert main(["bench", *common, "--profile", "no-such-profile"]) == 2

    assert main(["runs", "delete", str(a["run_id"])]) == 0
    capsys.readouterr()
    assert main(["runs", "compare", str(a["run_id"]), str(b_id)]) == 2


def test_compare_by_profile_finds_the_drafting_profile_after_its_ab(capsys, tiny_model):
    """Issue 35 item 13: after `bench --profile spec --vs-no-draft`, `runs compare --profiles demo spec` found no
    "spec": every run was labelled "spec --spec-type=…". The run of the profile as it is carries its name."""
    base = ["--", "-m", str(tiny_model), "-t", "2", "-c", "1024", "-np", "1"]
    assert main(["profile", "import", "--name", "demo", *base]) == 0
    assert main(["profile", "import", "--name", "spec", *base, "--spec-type", "ngram-simple"]) == 0
    common = ["--prompt-tokens", "16", "--gen-tokens", "4", "--reps", "1", "--warmup", "0"]
    assert main(["bench", "--profile", "demo", *common]) == 0
    assert main(["bench", "--profile", "spec", "--vs-no-draft", "1", *common]) in (0, 1)
    capsys.readouterr()
    assert main(["runs", "list", "--json"]) == 0
    labels = [r["profile"] for r in _json(capsys)]
    assert sorted(labels) == ["demo", "spec", "spec --spec-type=none"]
    assert main(["runs", "compare", "--profiles", "demo", "spec", "--json"]) == 0
    result = _json(capsys)
    assert (result["a"]["label"], result["b"]["label"]) == ("demo", "spec")
    assert "spec-type" in str(result["profile_diff"])  # the drafting run, not its --spec-type none twin
