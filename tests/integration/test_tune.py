"""The tune against the real llama-server (short: -c 512, tiny prompt and generation), with the tiny random model
(tests/conftest.py) where the claim is what is stored, pruned, resumed and kept, the demo model where it is the
perplexity of K/V types.

Behaviour only (what is stored, what never launched, what was re-measured); no assertion on which setting is
faster. The final comparison's design and its interleaving: tests/unit/test_tune_final.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.tune import Knob, Objective, TuneSpec, parse_knob, tune_report_markdown
from llm_tuner.services.tune import TuneRunner, make_plan_fn
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engine(tmp_path):
    return open_engine(tmp_path / "h.sqlite")


# The tunes' time budget here is a cap that never binds: each tune ends when its search does (seconds on a quiet
# machine), and on a busy one a 300 s budget ran out before the knob a test is about was tried (KeyError 'spec-type'
# beside a busy core). What a budget that runs out does: tests/unit/test_tune_budget.py.
BUDGET_S = 3600


def _spec(model, *knobs, **kw) -> TuneSpec:
    base = (*flags.argv_for("model", str(model)), *flags.argv_for("ctx_size", "512"), *flags.argv_for("threads", "2"))
    args = dict(objective=Objective(kind="gen_tps", prompt_tokens=16, gen_tokens=8), knobs=tuple(knobs),
                budget_s=BUDGET_S, final_reps=1, screen_reps=1, warmup=0, label="t")
    return TuneSpec(base_argv=base, **{**args, **kw})


def test_pruned_candidates_never_launch_and_a_failed_launch_is_a_trial(engine, tiny_model):
    """Planned host of 70 MiB, no headroom: -c 512 and 1024 fit, 16384 and 32768 do not (the plan of the tiny
    model says ~55/56 vs ~86/118 MiB resident); a bad value makes llama-server exit: a failed trial, the tune
    finishes."""
    ctx = Knob(key="c", flag="ctx_size", values=("1024", "16384", "32768"))
    bad = parse_knob("custom:--flash-attn=bogus")
    host = PlanDevice("Host", "CPU", 70, None, "planned RAM", True)
    trials = []
    repo = TuneRepository(engine)
    result = TuneRunner(repo, plan_fn=make_plan_fn(0, gpus=[], host=host)).run(
        _spec(tiny_model, ctx, bad), on_trial=trials.append)
    stored = repo.list_trials(result.tune_id)
    by_value = {t.values.get("c"): t for t in stored if t.knob == "c"}
    for big in ("16384", "32768"):
        assert by_value[big].status == "pruned" and "Host needs" in by_value[big].reason
        assert by_value[big].run_id is None
    # launched and measured ("final" when it also led into the final comparison: which setting is faster is noise)
    assert by_value["1024"].status in ("measured", "final") and by_value["1024"].run_id
    runs = RunRepository(engine).list_runs(group_id=result.tune_id)
    assert runs and not any({"16384", "32768"} & set(r.server_argv) for r in runs)  # never launched
    failed = [t for t in stored if t.status == "failed"]
    assert len(failed) == 1 and "bogus" in failed[0].argv and "bogus" in failed[0].reason
    assert repo.get(result.tune_id).status == "complete"
    assert {t.id for t in trials} >= {t.id for t in stored}  # every trial was reported as it was decided
    md = tune_report_markdown(result)
    assert "| pruned |" in md and "Host needs" in md and "| failed |" in md


def test_a_knob_without_effect_keeps_the_baseline(engine, tiny_model):
    repo = TuneRepository(engine)
    spec = _spec(tiny_model, parse_knob("custom:--alias=a,b"), final_reps=2)
    result = TuneRunner(repo).run(spec)
    assert repo.get(result.tune_id).status == "complete"
    assert {t.values["custom:--alias"] for t in repo.list_trials(result.tune_id)} == {None, "a", "b"}
    if result.verdict != "better":  # an A/A comparison: kept unless it separates
        assert result.winner_argv == result.baseline_argv
        md = tune_report_markdown(result)  # kept by the final A/B, or already while racing (issue 35 item 6)
        assert "no change better than noise" in md or "no candidate beat the baseline while racing" in md
    runs = RunRepository(engine).list_runs(group_id=result.tune_id)
    assert all(r.status == "complete" for r in runs)  # every measurement is a run in History


def test_flash_attention_on_where_auto_ran_it_on_is_the_baseline_not_a_second_start(engine, tiny_model):
    """The `fa` knob races on and off beside the baseline's -fa auto; on this CPU auto runs it on (the server's log
    says so by not warning): `-fa on` is then the baseline's run, never launched; off is."""
    repo = TuneRepository(engine)
    result = TuneRunner(repo).run(_spec(tiny_model, Knob(key="fa", flag="flash_attn", values=("on", "off"))))
    assert repo.get(result.tune_id).status == "complete"
    stored = repo.list_trials(result.tune_id)
    assert {t.values.get("fa") for t in stored} == {None, "off"}  # "on" went to the baseline's trial
    base = next(t for t in stored if t.values.get("fa") is None)
    assert base.reason.startswith("fa=on run as the baseline")  # the report and the Trials table say so
    launched = [flags.value_of(r.server_argv, "flash_attn") for r in RunRepository(engine).list_runs(
        group_id=result.tune_id)]
    assert "off" in launched and "on" not in launched


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "llm_tuner", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, **kw)


def test_kill_mid_tune_then_resume_without_re_measuring(tiny_model, tmp_path):
    from llm_tuner.services.settings_store import database_path

    base = ["-m", str(tiny_model), *flags.argv_for("ctx_size", "512"), *flags.argv_for("threads", "2")]
    proc = _cli("tune", "--json-lines", "--prompt-tokens", "16", "--gen-tokens", "8", "--warmup", "0",
                "--screen-reps", "1", "--final-reps", "1", "--budget", str(BUDGET_S), "--knob", "custom:--alias=a,b,c",
                "--", *base, start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + 240
        while len({o["id"] for o in seen}) < 2 and time.monotonic() < deadline:  # a top-up repeats a trial
            line = proc.stdout.readline()
            if not line:
                break
            obj = json.loads(line)
            if obj["type"] == "trial":
                seen.append(obj)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9 mid-tune (its llama-server dies with it)
        proc.communicate()
    assert len({o["id"] for o in seen}) == 2, "the tune did not store two trials before the kill"
    tune_id = seen[0]["tune_id"]
    engine = open_engine(database_path())
    assert TuneRepository(engine).get(tune_id).status != "complete"  # killed mid-tune, not after it
    before = {tuple(t.argv): t for t in TuneRepository(engine).list_trials(tune_id)}
    assert len(before) >= 2
    runs_before = {r.id for r in RunRepository(engine).list_runs(group_id=tune_id)}

    resumed = _cli("tune", "--json-lines", "--resume", str(tune_id), "--report", str(tmp_path / "r.md"))
    out, err = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["type"] == "result" and result["tune_id"] == tune_id
    after = TuneRepository(engine).list_trials(tune_id)
    assert {t.values["custom:--alias"] for t in after} == {None, "a", "b", "c"}
    for t in after:  # the trials stored before the kill are kept, not measured again
        if tuple(t.argv) in before:
            assert t.id == before[tuple(t.argv)].id and t.run_ids[:1] == before[tuple(t.argv)].run_ids[:1]
    new_runs = [r for r in RunRepository(engine).list_runs(group_id=tune_id) if r.id not in runs_before]
    assert not [r for r in new_runs if tuple(r.server_argv) in before and r.sweep_value in ("baseline", "screen")]
    assert TuneRepository(engine).get(tune_id).status == "complete"
    # --report: the Markdown with its plot beside it, every trial in both
    md, svg = (tmp_path / "r.md").read_text(), (tmp_path / "r-trials.svg").read_text()
    assert "](r-trials.svg)" in md and md.count("\n| ") >= len(after)
    dotted = [t for t in after if t.score is not None and t.status != "final"]  # measured and flagged: dots
    kinds = {"flagged" if t.flagged else "measured" for t in dotted}  # each also has a dot in the legend
    assert svg.startswith("<svg") and svg.count("<circle") == len(dotted) + len(kinds)


def test_cancel_keeps_the_trials_and_resume_reuses_them(engine, tiny_model):
    repo = TuneRepository(engine)
    spec = _spec(tiny_model, parse_knob("custom:--alias=a"), final_reps=2)
    stop = []
    result = TuneRunner(repo).run(spec, cancelled=lambda: bool(stop), on_trial=lambda t: stop.append(t))
    assert repo.get(result.tune_id).status == "cancelled" and "cancelled" in result.note
    kept = repo.list_trials(result.tune_id)
    assert [t.knob for t in kept] == [None] and kept[0].status == "measured"  # the baseline, measured before Cancel
    n_runs = len(RunRepository(engine).list_runs(group_id=result.tune_id))

    resumed = TuneRunner(repo).run(resume_tune_id=result.tune_id)
    assert resumed.tune_id == result.tune_id and repo.get(result.tune_id).status == "complete"
    runs = RunRepository(engine).list_runs(group_id=result.tune_id)
    baseline_runs = [r for r in runs if r.sweep_value == "baseline"]
    assert len(baseline_runs) == 1 and len(runs) > n_runs  # the baseline was not measured again
    assert repo.list_trials(result.tune_id)[0].id == kept[0].id


@pytest.mark.timeout(900)  # two llama-perplexity runs, 3-5 starts of the demo model: 16 s quiet, 4-5 min at load 12
def test_kv_types_show_their_perplexity_and_speculation_must_keep_the_output(engine, demo_model):
    """K/V q4_0 against f16 with no perplexity increase allowed: llama-perplexity runs for both and the candidate
    is dropped as "quality" with the figure; an n-gram speculative type is compared at --temp 0 first."""
    repo = TuneRepository(engine)
    spec = _spec(demo_model, parse_knob("kv=q4_0"), parse_knob("spec-type=ngram-simple"), max_ppl_increase_pct=0.0)
    result = TuneRunner(repo).run(spec)
    trials = {t.knob: t for t in repo.list_trials(result.tune_id)}
    kv = trials["kv"]
    assert kv.status == "failed" and kv.reason.startswith("quality: perplexity") and kv.run_id is None
    assert "perplexity" in result.quality["kv=q4_0"] and "vs baseline" in result.quality["kv=q4_0"]
    spec_trial = trials["spec-type"]
    assert "output at --temp 0" in result.quality["spec-type=ngram-simple"]
    if spec_trial.status == "failed":  # rejected: its run stays in History, its figures do not count
        assert spec_trial.reason.startswith("quality: output") and spec_trial.score is None
    else:
        assert spec_trial.status == "measured" and "identical" in result.quality["spec-type=ngram-simple"]
    # the output at --temp 0 was read from the measuring servers: no server was started for the check alone
    runs = RunRepository(engine).list_runs(group_id=result.tune_id)
    assert {r.sweep_value for r in runs} <= {"baseline", "screen", "top-up", "re-measure", "final:baseline",
                                             "final:winner"}
    assert spec_trial.run_id in {r.id for r in runs}
