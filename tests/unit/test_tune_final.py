"""The final comparison: its design (core.tune.final, pure) and the runner carrying it out through the public
TuneRunner.run, measured by a scripted measurer that stores real runs in a real SQLite history (the real
server's path is tests/integration/test_tune.py)."""

import pytest

from llm_tuner.core.tune import (
    BaselineCost,
    Objective,
    Trial,
    TuneSpec,
    design_final,
    final_cost,
    measured_in_starts,
    parse_knob,
    start_noise,
)
from llm_tuner.core.tune.report import tune_report_markdown
from llm_tuner.services.tune import TuneRunner
from llm_tuner.state.tune_result import result_words, verdict_text
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository
from tests.support.tune_bench import Clock, ScriptedBench

SPEC = TuneSpec(base_argv=("-m", "m.gguf"), final_reps=3, final_rounds=2, warmup=1)


def _trial(argv, samples, status="measured", run_ids=(1,)) -> Trial:
    return Trial(argv=argv, samples=tuple(samples), score=sorted(samples)[len(samples) // 2] if samples else None,
                 status=status,
                 run_ids=run_ids)


def test_n_stays_at_final_reps_when_the_spread_cannot_hide_the_gain():
    base, win = _trial(("a",), [100.0, 100.2]), _trial(("b",), [110.0, 110.1])
    d = design_final(SPEC, [base, win], win, base, noise=None, threshold_pct=2.0, time_left_s=1e6, cost=None)
    assert (d.n, d.plan, d.why, d.note) == (3, (2, 1), "n = 3 per side", "")


def test_a_wide_spread_raises_n_within_the_budget_and_says_why():
    base, win = _trial(("a",), [100.0, 120.0]), _trial(("b",), [110.0, 130.0])
    free = design_final(SPEC, [base, win], win, base, noise=None, threshold_pct=2.0, time_left_s=1e6, cost=None)
    assert free.n == 12 and "spread" in free.note  # capped at 4 × final_reps
    cost = BaselineCost(seconds=20.0, reps=2)  # 20 s for 2 repetitions and 1 warm-up: ~6.7 s a request
    assert final_cost(SPEC, 3, cost) == pytest.approx(2 * (20 * 3 / 3 + 20 * 2 / 3))
    capped = design_final(SPEC, [base, win], win, base, noise=None, threshold_pct=2.0,
                          time_left_s=final_cost(SPEC, 6, cost), cost=cost)
    assert capped.n == 6 and final_cost(SPEC, 7, cost) > final_cost(SPEC, 6, cost)


def test_a_lead_far_beyond_the_noise_is_called_in_one_start_per_side():
    base, win = _trial(("a",), [30.0, 31.0]), _trial(("b",), [40.0, 41.0])  # +32 %
    d = design_final(SPEC, [base, win], win, base, noise=None, threshold_pct=2.0, time_left_s=1e6, cost=None)
    assert d.plan == (3,) and "one start per side" in d.note


def test_a_decisive_lead_needs_no_fresh_start_but_an_overlap_or_one_sample_does():
    base, win = _trial(("a",), [30.0, 31.0]), _trial(("b",), [60.0, 61.0])  # +97 % (the scores), every run above
    d = design_final(SPEC, [base, win], win, base, noise=None, threshold_pct=2.0, time_left_s=1e6, cost=None)
    assert d.plan == () and "no fresh start" in d.note and "+97%" in d.note
    overlap = _trial(("b",), [60.0, 30.5, 61.0])  # the median leads by 95 %, one run does not
    one = _trial(("b",), [60.0])
    for w in (overlap, one):
        assert design_final(SPEC, [base, w], w, base, noise=None, threshold_pct=2.0, time_left_s=1e6,
                            cost=None).plan


def _alias_tune(tmp_path, speed, objective=None, **kw):
    """A tune of one candidate (--alias a) against its baseline, measured by ScriptedBench(speed, **kw)."""
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    spec = TuneSpec(base_argv=("-m", str(tmp_path / "m.gguf"), "-t", "2"), knobs=(parse_knob("custom:--alias=a"),),
                    objective=objective or Objective(prompt_tokens=16, gen_tokens=8), budget_s=600, screen_reps=2,
                    final_reps=3, final_rounds=2, warmup=0)
    bench = ScriptedBench(RunRepository(engine), clock, speed, lines=("main: server is listening",), **kw)
    runner = TuneRunner(TuneRepository(engine), bench_runner=bench, plan_fn=lambda argv, env: (True, ""), clock=clock)
    return engine, spec, runner


def _finals(engine, result):
    return [r for r in RunRepository(engine).list_runs(group_id=result.tune_id)
            if (r.sweep_value or "").startswith("final")]


def test_a_decisive_screened_lead_is_judged_on_the_screening_runs(tmp_path):
    engine, spec, runner = _alias_tune(tmp_path, lambda argv: 200.0 if "a" in argv else 100.0)
    result = runner.run(spec)
    assert not _finals(engine, result) and result.final_run_ids == ()
    assert result.verdict == "better" and "--alias" in result.winner_argv
    assert "screening" in result.note and "no fresh start" in result.final_n_note and result.on_screening
    words = result_words(result)
    assert "no fresh A/B" in verdict_text(result) and "racing runs" in words.table_title
    main = next(c for c in result.comparisons if c["name"] == result.objective_metric)
    assert main["b"]["median"] == pytest.approx(2 * main["a"]["median"], rel=0.05)
    assert [t.status for t in result.trials if "--alias" in t.argv] == ["final"]
    report = tune_report_markdown(result, objective="generation t/s")
    assert "## Comparison on the racing runs" in report and "## Final comparison" not in report


def test_a_decisive_lead_the_screening_cannot_call_runs_the_fresh_final(tmp_path):
    """+110 % and every repetition above the baseline's, but two repetitions a side that far apart leave the
    screening's comparison within noise: the final runs fresh, as without the shortcut."""
    engine, spec, runner = _alias_tune(tmp_path, lambda argv: 210.0 if "a" in argv else 100.0,
                                       wobble=lambda i: 1 + 0.45 * (i % 2))
    result = runner.run(spec)
    assert len(_finals(engine, result)) == 2 and not result.on_screening  # one fresh start per side
    assert "fresh interleaved" in result.note and "no fresh start" not in result.final_n_note


def test_no_shortcut_where_the_score_is_not_a_measured_speed_or_a_side_was_measured_before_a_resume(tmp_path):
    ctx = Objective(kind="max_context", prompt_tokens=16, gen_tokens=8, min_gen_tps=1.0)
    base, win = _trial(("a",), [4096.0, 4096.0]), _trial(("b",), [16384.0, 16384.0])
    spec = SPEC.model_copy(update={"objective": ctx})
    assert design_final(spec, [base, win], win, base, noise=None, threshold_pct=2.0, time_left_s=1e6,
                        cost=None).plan  # a context size four times larger is no speed lead
    gen_base, gen_win = _trial(("a",), [30.0, 31.0]), _trial(("b",), [60.0, 61.0])
    assert design_final(SPEC, [gen_base, gen_win], gen_win, gen_base, noise=None, threshold_pct=2.0,
                        time_left_s=1e6, cost=None, on_screening=False).plan


def test_a_resumed_tune_compares_fresh_even_on_a_decisive_lead(tmp_path):
    engine, spec, runner = _alias_tune(tmp_path, lambda argv: 200.0 if "a" in argv else 100.0)
    first = runner.run(spec.model_copy(update={"budget_s": 5}))  # the baseline only: the candidate left untried
    assert first.verdict == "not measured"
    result = runner.run(spec, resume_tune_id=first.tune_id)  # the baseline is not measured again
    assert result.verdict == "better" and not result.on_screening and len(_finals(engine, result)) == 2


def test_the_screening_runs_are_the_kept_ones_not_a_run_thrown_away_as_busy(tmp_path):
    """The candidate's first run measured on a busy machine (and slower) is re-measured; the comparison pools the
    re-measurement only, as the trial's samples do."""
    starts: dict[tuple, int] = {}

    def speed(argv):
        starts[argv] = starts.get(argv, 0) + 1
        return (200.0 if starts[argv] > 1 else 120.0) if "a" in argv else 100.0

    engine, spec, runner = _alias_tune(
        tmp_path, speed, other_cpu=lambda argv: 90.0 if "a" in argv and starts.get(argv) == 1 else 0.0)
    result = runner.run(spec)
    cand = next(t for t in result.trials if "--alias" in t.argv)
    assert len(cand.run_ids) > len(cand.samples) // 2 and "Re-measured" in (cand.flagged or "")
    assert result.on_screening and not _finals(engine, result)
    main = next(c for c in result.comparisons if c["name"] == result.objective_metric)
    assert main["b"]["n"] == len(cand.samples) and main["b"]["mean"] == pytest.approx(200.0, rel=0.01)


def test_the_noise_between_starts_comes_from_trials_measured_in_several_starts():
    once, twice = _trial(("a",), [1.0, 2.0]), _trial(("b",), [1.0, 2.0], run_ids=(1, 2))
    pruned = _trial(("c",), [], status="pruned", run_ids=(3, 4))
    assert measured_in_starts([once, twice, pruned]) == [twice]
    assert start_noise([]) is None and start_noise([[100.0, None]]) is None
    assert start_noise([[100.0, 110.0]]) == pytest.approx(7.07 / 105, rel=1e-2)


def _alias_a_is_10_pct_faster(argv) -> float:
    return 110.0 if "a" in argv else 100.0


def test_the_final_is_interleaved_with_n_fixed_before_its_first_run(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    spec = TuneSpec(base_argv=("-m", str(tmp_path / "m.gguf"), "-t", "2"), knobs=(parse_knob("custom:--alias=a"),),
                    objective=Objective(prompt_tokens=16, gen_tokens=8), budget_s=600, screen_reps=2,
                    final_reps=3, final_rounds=2, warmup=0)
    bench = ScriptedBench(RunRepository(engine), clock, _alias_a_is_10_pct_faster, lines=("main: server is listening",))
    runner = TuneRunner(TuneRepository(engine), bench_runner=bench,
                        plan_fn=lambda argv, env: (True, ""), clock=clock)
    result = runner.run(spec)
    runs = sorted(RunRepository(engine).list_runs(group_id=result.tune_id), key=lambda r: r.id)
    finals = [r for r in runs if (r.sweep_value or "").startswith("final")]
    assert [r.sweep_value for r in finals] == ["final:baseline", "final:winner"] * 2  # A B A B
    assert [len(r.reps) for r in finals] == [2, 2, 1, 1]  # n = 3 per side over two starts, fixed before the first
    assert result.final_run_ids == tuple(r.id for r in finals)
    main = next(c for c in result.comparisons if c["name"] == result.objective_metric == "gen_tps@16")
    assert main["a"]["n"] == main["b"]["n"] == 3
    assert result.verdict == "better" and "--alias" in result.winner_argv
    assert result.final_n_note == ""  # n and the starts as the spec asked
    assert not result.on_screening and "fresh interleaved" in verdict_text(result)
