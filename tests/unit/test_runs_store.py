"""store.runs: repetitions stored one by one; interrupted runs become incomplete and keep them."""

from llm_tuner.core.bench_spec import BenchRun, BenchSpec, DevicePeak, Repetition, RunGroup
from llm_tuner.store.db import open_engine, session_scope
from llm_tuner.store.runs import BenchRunRow, RunRepository


def test_run_round_trip_filters_and_interrupt(tmp_path):
    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    gid = repo.create_group(RunGroup(param="-ub", values=("512", "2048")))
    run_id = repo.create_run(BenchRun(label="fast", model_path="/m/demo.gguf", binary_version="b1",
                                      spec=BenchSpec(prompt_tokens=(64,), reps=2), group_id=gid,
                                      server_argv=("-m", "/m/demo.gguf")))
    repo.add_rep(run_id, Repetition(seq=0, prompt_tokens=64, prompt_n=64, prompt_per_second=500.0,
                                    peaks=(DevicePeak(device="CUDA0", vram_used_mib=1234.0),)))
    other = repo.create_run(BenchRun(label="slow", model_path="/m/other.gguf"))
    repo.finish_run(other, "complete")

    # The process that owned run_id died (a crash or kill): opening the history marks it incomplete.
    with session_scope(repo.engine) as s:
        s.get(BenchRunRow, run_id).owner_pid = 2**22 + 12345
    assert repo.mark_interrupted() == 1
    run = repo.get_run(run_id)
    assert run.status == "incomplete" and "interrupted" in run.error
    assert run.reps[0].prompt_n == 64 and run.reps[0].peaks[0].vram_used_mib == 1234.0
    assert run.spec.prompt_tokens == (64,) and run.server_argv == ("-m", "/m/demo.gguf")

    assert [r.id for r in repo.list_runs(model="demo")] == [run_id]
    assert [r.id for r in repo.list_runs(label="slow")] == [other]
    assert [r.id for r in repo.list_runs(group_id=gid)] == [run_id]
    assert repo.labels() == ["fast", "slow"]
    newest = max((r for r in repo.list_runs()), key=lambda r: r.id).label
    assert repo.labels(newest_first=True)[0] == newest  # Compare's profile choices: the newest two are A and B
    repo.delete_run(run_id)
    assert repo.get_run(run_id) is None and len(repo.list_runs()) == 1


def test_history_overview_reads_only_what_the_table_shows(tmp_path):
    from llm_tuner.qt.bench_models import RunTableModel

    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    run_id = repo.create_run(BenchRun(label="a", spec=BenchSpec(prompt_tokens=(64,), reps=3)))
    for i, (pre, gen) in enumerate([(500.0, 60.0), (520.0, 62.0), (480.0, 58.0)]):
        repo.add_rep(run_id, Repetition(seq=i, prompt_tokens=64, prompt_n=64, prompt_per_second=pre, predicted_n=32,
                                        predicted_per_second=gen, ttft_ms=100.0,
                                        peaks=(DevicePeak(device="Host", vram_used_mib=400.0),)))
    (light,) = repo.list_overview()
    (full,) = repo.list_runs()
    assert [r.seq for r in light.reps] == [0, 1, 2]
    assert all(r.peaks == () and r.ttft_ms is None for r in light.reps)  # timings and peaks stay in SQLite
    shown = []
    for runs in ([light], [full]):
        model = RunTableModel()
        model.set_runs(runs)
        shown.append([model.column_texts(c) for c in range(model.columnCount())])
    assert shown[0] == shown[1]  # the History shows the same row either way
    assert shown[0][7] == ["500.0"] and shown[0][8] == ["60.0"] and shown[0][9] == ["3"]
    assert repo.list_overview(label="b") == []
