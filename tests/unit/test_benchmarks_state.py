"""The Benchmarks view's state without Qt (state/benchmarks.py, state/bench_history.py): the form's rules
(lengths, a sweep, an attached server, the workspace's profile, its problem and advice errors, the demo model),
the saved version a run points at (a real SQLite store), the job's words, the run and sweep shown; the
History's filters, newest-load-wins, open with the sweep, delete, compare two, re-run, export."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core.advice import Advice
from llm_tuner.core.bench_spec import BenchRun, Repetition, RunGroup
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.bench import BenchError
from llm_tuner.state.bench_history import NO_RUNS, SELECT_TWO, BenchHistory, HistoryFilters
from llm_tuner.state.benchmarks import (
    AB_NEEDS_START,
    NO_DEMO,
    SWEEP_NEEDS,
    BenchmarksState,
    ProfileFacts,
    parse_sweep_values,
    sweep_table,
)
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository

DEMO = Path("/models/demo.gguf")
PROFILE = LaunchProfile(model="/models/m.gguf", ctx_size=2048, threads=2)
ERROR = Advice(id="kv-type", severity="error", message="-ctk q9 is not a cache type")


def _state(tmp_path, demo: Path | None = DEMO) -> tuple[BenchmarksState, list[str]]:
    state = BenchmarksState(open_engine(tmp_path / "b.sqlite"), demo_model=lambda: demo)
    seen: list[str] = []
    state.add_callback(lambda what, *_d: seen.append(what))
    return state, seen


def _run(repo: RunRepository, label: str, gen: list[float], *, sweep: str | None = None,
         group: int | None = None) -> int:
    run_id = repo.create_run(BenchRun(label=label, status="running", sweep_value=sweep, group_id=group,
                                      server_argv=("-m", "x.gguf")))
    for i, g in enumerate(gen):
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, prompt_n=64, prompt_per_second=500.0,
                                        predicted_n=16, predicted_ms=400.0, predicted_per_second=g))
    repo.finish_run(run_id, "complete")
    return run_id


def test_the_form_makes_the_spec_and_a_bad_length_is_said(tmp_path):
    state, seen = _state(tmp_path)
    state.set_form(prompt_lengths="128, 512", gen_tokens=32, reps=2, warm_cache=True, router_model=" gemma ")
    spec = state.spec()
    assert spec.prompt_tokens == (128, 512) and spec.gen_tokens == 32 and spec.reps == 2
    assert spec.warm_cache and spec.model == "gemma" and spec.prompt_file is None
    state.set_form(prompt_lengths="12x")
    assert state.prepare("run", ProfileFacts()) is None
    assert state.status.startswith("Cannot start:") and "status" in seen


def test_the_target_is_the_url_the_profile_or_the_demo_model_with_extra_flags(tmp_path):
    state, _ = _state(tmp_path)
    state.set_form(url=" http://127.0.0.1:9/ ")
    assert state.target(ProfileFacts(PROFILE, "p")).attached_url == "http://127.0.0.1:9/"
    state.set_form(url="", extra_flags="-ub 256", binary="/opt/other/llama-server")
    target = state.target(ProfileFacts(PROFILE, "p"))
    assert target.label == "p -ub 256" and target.argv[-2:] == ["-ub", "256"]
    assert target.binary == "/opt/other/llama-server" and "/models/m.gguf" in target.argv
    state.set_form(extra_flags="", binary="", label="mine")
    demo = state.target(ProfileFacts())
    assert demo.label == "mine" and str(DEMO) in demo.argv
    assert state.target_line(ProfileFacts()).startswith("demo model demo.gguf")
    assert state.target_line(ProfileFacts(PROFILE, None)) == "the unsaved profile, as edited in the Profile tab"
    bare, _ = _state(tmp_path / "x", demo=None)
    with pytest.raises(BenchError, match="demo model is missing"):
        bare.target(ProfileFacts())
    assert bare.prepare("run", ProfileFacts()) is None and bare.status == f"Cannot start: {NO_DEMO}"


def test_a_problem_refuses_and_advice_errors_offer_run_anyway(tmp_path):
    state, seen = _state(tmp_path)
    assert state.prepare("run", ProfileFacts(PROFILE, "p", problem="Fix context (tokens)")) is None
    assert state.status == "Cannot start: Fix context (tokens)" and not state.refused
    facts = ProfileFacts(PROFILE, "p", errors=(ERROR,))
    assert state.prepare("run", facts) is None
    assert state.refused and "refused" in seen and "-ctk q9 is not a cache type" in state.status
    assert "Run anyway" in state.status
    ready = state.prepare("run", facts, force=True)
    assert ready is not None and not state.refused


def test_a_sweep_needs_a_flag_values_and_a_started_server(tmp_path):
    assert parse_sweep_values(" 256, 512 ,,1024") == ["256", "512", "1024"]
    assert parse_sweep_values("0,1;2,3; ") == ["0,1", "2,3"]
    state, _ = _state(tmp_path)
    facts = ProfileFacts(PROFILE, "p")
    assert state.prepare("sweep", facts) is None and state.status == SWEEP_NEEDS
    state.set_form(sweep_flag="-ub", sweep_values="256,512")
    ready = state.prepare("sweep", facts)
    assert ready is not None and (ready.sweep_flag, ready.sweep_values) == ("-ub", ("256", "512"))
    state.set_form(url="http://127.0.0.1:9")
    assert state.prepare("sweep", facts) is None and state.status == SWEEP_NEEDS
    assert state.prepare("spec_ab", facts) is None and state.status == AB_NEEDS_START
    assert state.prepare("router_all", facts) is not None


def test_the_run_points_at_the_saved_version_or_says_unsaved_edits(tmp_path):
    state, _ = _state(tmp_path)
    saved = ProfileRepository(state.engine).save("p", PROFILE)
    ready = state.prepare("run", ProfileFacts(PROFILE, "p"))
    assert ready is not None and ready.resolve().profile_version_id == saved.version_id
    edited = PROFILE.model_copy(update={"ctx_size": 4096})
    ready = state.prepare("run", ProfileFacts(edited, "p"))
    target = ready.resolve()
    assert target.profile_version_id is None and target.label == "p (unsaved edits)"


def test_the_job_says_how_it_goes_and_shows_what_it_made(tmp_path):
    state, seen = _state(tmp_path)
    repo = RunRepository(state.engine)
    state.started("Benchmark")
    assert state.running and state.status == "Benchmark: starting…" and state.progress == 0.0
    state.progressed(0.5, "prompt 64, rep 2/3")
    state.progressed(-1, "waiting for the server")
    assert state.progress == 0.5 and state.status == "waiting for the server"
    run = repo.get_run(_run(repo, "p", [40.0, 41.0]))
    state.succeeded(run)
    assert state.last_run is run and "run" in seen and not state.sweep_runs
    assert state.status == f"Run {run.id} complete. Compare runs in the Compare tab."
    state.cancelled()
    assert state.progress_note == "cancelled" and "kept in the History" in state.status
    state.failed(RuntimeError("port in use"))
    assert state.status.startswith("The benchmark failed: port in use.")
    state.set_running(False)
    assert not state.running and seen.count("running") == 2


def test_a_sweep_shows_each_value_and_its_last_run(tmp_path):
    state, seen = _state(tmp_path)
    repo = RunRepository(state.engine)
    runs = [repo.get_run(_run(repo, "p", [g, g + 1], sweep=v)) for v, g in (("256", 40.0), ("512", 50.0))]
    state.succeeded(runs)
    assert state.sweep_runs == tuple(runs) and state.last_run is runs[-1] and "sweep" in seen
    table = state.sweep_table()
    assert table.values == ["256", "512"] and table.headers[0] == "Value"
    assert table.rows[0][0] == "256 (complete)" and len(table.rows[0]) == len(table.headers)
    assert [len(s) for s in table.series[0][1]] == [2, 2]
    assert sweep_table([]).values == []


def _history(tmp_path) -> tuple[BenchHistory, RunRepository, list[tuple]]:
    engine = open_engine(tmp_path / "h.sqlite")
    history = BenchHistory(engine)
    seen: list[tuple] = []
    history.add_callback(lambda what, *d: seen.append((what, *d)))
    return history, RunRepository(engine), seen


def test_the_history_lists_filters_and_says_when_empty(tmp_path):
    history, repo, _ = _history(tmp_path)
    history.refresh()
    assert history.runs == () and history.hint == NO_RUNS
    a = _run(repo, "a", [40.0])
    _run(repo, "b", [30.0])
    history.mark_interrupted_then_refresh()
    assert [r.id for r in history.runs] == [a + 1, a] and history.labels == ("a", "b") and history.hint == ""
    history.refresh(HistoryFilters(label="a"))
    assert [r.label for r in history.runs] == ["a"]
    history.refresh()  # the filters in force stay
    assert [r.label for r in history.runs] == ["a"]


def test_only_the_newest_load_is_shown(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    repo = RunRepository(engine)
    pending: list = []
    history = BenchHistory(engine, run=lambda work, done, failed: pending.append((work(), done)))
    history.refresh()
    _run(repo, "a", [40.0])
    history.refresh()
    new, old = pending[1], pending[0]
    new[1](new[0])
    old[1](old[0])  # the older load finishes last: ignored
    assert [r.label for r in history.runs] == ["a"]


def test_open_delete_compare_rerun_and_export(tmp_path):
    history, repo, seen = _history(tmp_path)
    group = repo.create_group(RunGroup(kind="sweep", flag="-ub"))
    ids = [_run(repo, "s", [40.0], sweep=v, group=group) for v in ("256", "512")]
    lone = _run(repo, "x", [30.0])
    history.refresh()
    history.open(ids[0])
    opened = [e for e in seen if e[0] == "opened"][-1]
    assert opened[1].id == ids[0] and [r.id for r in opened[2]] == ids and opened[1].reps
    runs = list(history.runs)
    assert history.compare_pair(runs[:1]) is None and history.hint == SELECT_TWO
    assert history.compare_pair([runs[0], runs[2]]) == (ids[0], lone)
    assert history.rerun([]) is None and "Select a run" in history.hint
    assert history.rerun(runs[1:]) is runs[1]
    assert not history.read_for_export([]) and "export" in history.hint
    assert history.read_for_export(runs[:1])
    assert [r.id for r in [e for e in seen if e[0] == "export"][-1][1]] == [runs[0].id]
    assert history.confirm_delete([]) is None
    assert history.confirm_delete(runs[:2]).startswith(f"Delete run(s) {runs[0].id}, {runs[1].id} and")
    history.delete(runs[:2])
    assert ("deleted",) in seen and history.hint == ""
    assert [r.id for r in repo.list_overview()] == [ids[0]]


def test_a_run_asked_while_the_profile_store_saves_waits_for_it_or_is_cancelled(tmp_path):
    """A profile saved just before Run is still on the store's worker thread: the Run waits for the workspace's
    profile_store_busy to go False, then runs; Cancel while it waits drops it."""
    from llm_tuner.state.benchmarks import CANCELLED_BEFORE_START, WAITING_FOR_SAVE
    from llm_tuner.state.workspace import Workspace

    workspace = Workspace()
    state = BenchmarksState(open_engine(tmp_path / "b.sqlite"), workspace=workspace)
    ran: list[str] = []
    assert not state.wait_for_profile_store(lambda: ran.append("run"))  # nothing saving: runs now
    workspace.profile_store_busy = True
    assert state.wait_for_profile_store(lambda: ran.append("run"))
    assert state.running and state.waiting and state.status == WAITING_FOR_SAVE and ran == []
    workspace.profile_store_busy = False  # the save landed
    assert ran == ["run"] and not state.running and not state.waiting
    workspace.profile_store_busy = True
    state.wait_for_profile_store(lambda: ran.append("again"))
    assert state.cancel_wait() and state.status == CANCELLED_BEFORE_START and not state.running
    workspace.profile_store_busy = False
    assert ran == ["run"] and not state.cancel_wait()
    workspace.profile_store_busy = True
    state.wait_for_profile_store(lambda: ran.append("gone"))
    state.close()  # the view went: nothing follows the workspace any more
    workspace.profile_store_busy = False
    assert ran == ["run"]
