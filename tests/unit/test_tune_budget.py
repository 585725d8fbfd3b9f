"""The tune keeps its time budget: the final comparison's share is reserved from the baseline's cost, the
search stops before eating into it, the final still runs. Time is an injected clock; every run is stored in a
real SQLite history by a scripted measurer (a server's speed per argv), since only the timing is under test."""

from llm_tuner.core import flags
from llm_tuner.core.tune import Knob, Objective, TuneSpec
from llm_tuner.services.tune import TuneRunner
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository
from tests.support.tune_bench import Clock, ScriptedBench


def _faster_with_a_smaller_ub(argv) -> float:
    return 1000 / int(flags.value_of(argv, "ubatch_size") or 512)


KNOB = Knob(key="ub", flag="ubatch_size", values=tuple(str(v) for v in (8, 16, 32, 64, 128, 256, 1024, 2048)))
SPEC = TuneSpec(base_argv=("-m", "m.gguf"), objective=Objective(prompt_tokens=16, gen_tokens=8), knobs=(KNOB,),
                budget_s=100, screen_reps=1, final_reps=2, final_rounds=2, warmup=0)


def test_search_stops_for_the_reserved_final_and_the_final_runs_within_budget(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    bench = ScriptedBench(RunRepository(engine), clock, _faster_with_a_smaller_ub)
    knob, spec = KNOB, SPEC
    repo = TuneRepository(engine)
    result = TuneRunner(repo, bench_runner=bench, plan_fn=lambda a, e: (True, ""), clock=clock).run(spec)
    runs = RunRepository(engine).list_runs(group_id=result.tune_id)
    finals = [r for r in runs if (r.sweep_value or "").startswith("final")]
    assert len(finals) == 4  # 2 per side, interleaved: the reserved share was kept for it
    assert clock.t <= spec.budget_s
    measured = [t for t in repo.list_trials(result.tune_id) if t.status == "measured"]
    assert 1 < len(measured) < 1 + len(knob.values)  # the search stopped early
    assert repo.get(result.tune_id).status == "complete"


def test_a_resumed_tune_reserves_the_final_from_the_stored_baseline(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    bench = ScriptedBench(RunRepository(engine), clock, _faster_with_a_smaller_ub)
    repo = TuneRepository(engine)
    stop = []
    first = TuneRunner(repo, bench_runner=bench, plan_fn=lambda a, e: (True, ""), clock=clock).run(
        SPEC, cancelled=lambda: bool(stop), on_trial=stop.append)
    assert repo.get(first.tune_id).status == "cancelled"
    t0 = clock.t
    result = TuneRunner(repo, bench_runner=bench, plan_fn=lambda a, e: (True, ""), clock=clock).run(
        resume_tune_id=first.tune_id)
    assert clock.t - t0 <= SPEC.budget_s  # the baseline was not re-measured, yet its cost reserved the final
    finals = [r for r in RunRepository(engine).list_runs(group_id=result.tune_id)
              if (r.sweep_value or "").startswith("final")]
    assert len(finals) == 4


def test_the_final_takes_enough_repetitions_for_the_spread_the_screening_saw(tmp_path):
    """Screening saw ±8 % between repetitions: 2 per side could not call even a real gain, so the final's n is
    raised before it starts (the same on both sides), within the budget; a tight budget keeps the minimum."""
    knob = Knob(key="ub", flag="ubatch_size", values=("448",))  # 1000/448 vs 1000/512: +14 %
    spec = SPEC.model_copy(update={"knobs": (knob,), "screen_reps": 2, "budget_s": 1000})
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    repo = TuneRepository(engine)

    def wobbly(clock):  # ±8 % between repetitions
        return ScriptedBench(RunRepository(engine), clock, _faster_with_a_smaller_ub,
                             wobble=lambda i: 1.08 if i % 2 else 0.92)

    result = TuneRunner(repo, bench_runner=wobbly(clock), plan_fn=lambda a, e: (True, ""),
                        clock=clock).run(spec)
    finals = [r for r in RunRepository(engine).list_runs(group_id=result.tune_id)
              if (r.sweep_value or "").startswith("final")]
    per_side = {side: sum(len(r.reps) for r in finals if r.sweep_value == side)
                for side in ("final:baseline", "final:winner")}
    assert per_side["final:baseline"] == per_side["final:winner"] > spec.final_reps
    assert len(finals) == 2 * spec.final_rounds  # more repetitions per start, not more starts
    assert "chosen before the final" in result.note and clock.t <= spec.budget_s
    assert result.final_n_note.startswith(f"n = {per_side['final:winner']} per side, chosen before the final")

    tight = spec.model_copy(update={"budget_s": 45})  # search 20 s + a final of 2 per side (20 s) fits; 3 would not
    clock.t = 0.0
    result = TuneRunner(repo, bench_runner=wobbly(clock), plan_fn=lambda a, e: (True, ""),
                        clock=clock).run(tight)
    finals = [r for r in RunRepository(engine).list_runs(group_id=result.tune_id)
              if (r.sweep_value or "").startswith("final")]
    assert sum(len(r.reps) for r in finals if r.sweep_value == "final:winner") == tight.final_reps


def threads_bench(engine, clock) -> ScriptedBench:
    """A CPU server: without -t it runs 2 threads (its log says so); -t 1 is 39 % slower."""
    return ScriptedBench(RunRepository(engine), clock,
                         lambda argv: 100.0 if (flags.value_of(argv, "threads") or "2") == "2" else 61.0,
                         lines=("llama threadpool init, n_threads = 2",))


def test_a_value_that_is_the_default_is_not_left_untried_and_a_slower_candidate_is_not_within_noise(tmp_path):
    """Issue 35 item 6: `tune --budget 150 --knob t=1,2` ended in 22 s saying "1 candidates left untried: the budget
    ran out" (t=2 is the default, merged into the baseline) and "within noise" for a candidate 39 % slower."""
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    spec = SPEC.model_copy(update={"knobs": (Knob(key="t", flag="threads", values=("1", "2")),), "budget_s": 150})
    result = TuneRunner(TuneRepository(engine), bench_runner=threads_bench(engine, clock),
                        plan_fn=lambda a, e: (True, ""), clock=clock).run(spec)
    assert clock.t < 150 and result.winner_argv == result.baseline_argv
    assert "untried" not in result.note and "budget ran out" not in result.note, result.note
    assert result.verdict != "within noise" and result.verdict == "baseline kept"
    assert "t=1" in result.note and "39 % worse than the baseline" in result.note, result.note
    base = next(t for t in TuneRepository(engine).list_trials(result.tune_id) if t.knob is None)
    assert base.reason.startswith("t=2 run as the baseline")  # where the default's candidate went


def test_flash_attention_at_what_auto_ran_is_the_baseline_and_never_started_again(tmp_path):
    """A server whose log warns that -fa auto turned flash attention off (a device without it): `-fa off` is then
    the baseline's own run; `-fa on` is a change and is started. (On runs it on: tests/integration/test_tune.py.)"""
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    bench = ScriptedBench(RunRepository(engine), clock, lambda argv: 100.0, lines=(
        "W resolve_fused_ops: Flash Attention not supported, set to disabled",
        "I cmn          init: llama threadpool init, n_threads = 2"))
    spec = SPEC.model_copy(update={"knobs": (Knob(key="fa", flag="flash_attn", values=("on", "off")),)})
    repo = TuneRepository(engine)
    result = TuneRunner(repo, bench_runner=bench, plan_fn=lambda a, e: (True, ""), clock=clock).run(spec)
    started = {flags.value_of(a, "flash_attn") for a in bench.started}
    assert started == {None, "on"}  # the baseline (auto), its final comparison, and on; never off
    base = next(t for t in repo.list_trials(result.tune_id) if tuple(t.argv) == result.baseline_argv)
    assert base.reason.startswith("fa=off run as the baseline")
