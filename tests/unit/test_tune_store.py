"""store.tunes: a tune group records every knob, the objective and the spec; trials are stored one by one and
survive the process (a killed tune is marked interrupted and can be resumed)."""

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.tune import Knob, Objective, Trial, TuneResult, TuneSpec
from llm_tuner.store.db import open_engine, session_scope
from llm_tuner.store.runs import BenchGroupRow, RunRepository
from llm_tuner.store.tunes import TuneRepository


def test_tune_round_trip_trials_result_and_interrupt(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    repo = TuneRepository(engine)
    knobs = (Knob(key="ub", flag="ubatch_size", values=("64", "128"), reason="r"),
             Knob(key="custom:--alias", flag="--alias", values=("a", "b")))
    argv = ("-m", "m.gguf", *flags.argv_for("api_key", "sekrit"))
    spec = TuneSpec(base_argv=argv, label="demo", objective=Objective(kind="ttft", prompt_tokens=64),
                    knobs=knobs, budget_s=60)
    tid = repo.create(spec)
    rec = repo.get(tid)
    assert rec.status == "running" and rec.spec.knobs == knobs and rec.spec.objective.kind == "ttft"
    assert "sekrit" not in str(rec.spec.base_argv)  # secrets never stored
    runs = RunRepository(engine)
    run_id = runs.create_run(BenchRun(label="demo", group_id=tid))
    assert runs.get_group(tid).kind == "tune" and runs.get_group(tid).values == ("ub", "custom:--alias")
    t1 = repo.add_trial(Trial(tune_id=tid, seq=1, values={"ub": None}, argv=("-m", "m.gguf"), run_id=run_id,
                              run_ids=(run_id,), samples=(1.0, 2.0), score=1.5))
    repo.add_trial(Trial(tune_id=tid, seq=2, knob="ub", values={"ub": "128"}, argv=("-m", "m.gguf", "-ub", "128"),
                         status="pruned", reason="Host needs 3.0 of 2.0 GiB"))
    repo.update_trial(t1, samples=(1.0, 2.0, 3.0), score=2.0, flagged="busy")
    trials = repo.list_trials(tid)
    assert [(t.seq, t.status, t.score) for t in trials] == [(1, "measured", 2.0), (2, "pruned", None)]
    assert trials[0].samples == (1.0, 2.0, 3.0) and trials[0].flagged == "busy" and trials[1].reason.startswith("Host")

    # the owning process died: the tune becomes "interrupted", its trials stay
    with session_scope(engine) as s:
        s.get(BenchGroupRow, tid).owner_pid = 2**22 + 4321
    assert repo.mark_interrupted() == 1 and repo.get(tid).status == "interrupted"
    assert len(repo.list_trials(tid)) == 2

    repo.finish(tid, "complete", TuneResult(tune_id=tid, verdict="within noise", trials=tuple(trials)))
    rec = repo.get(tid)
    assert rec.status == "complete" and rec.result.verdict == "within noise" and rec.n_trials == 2
    assert [t.id for t in repo.list_tunes()] == [tid] and repo.list_tunes()[0].n_trials == 2
    assert repo.get(99) is None
