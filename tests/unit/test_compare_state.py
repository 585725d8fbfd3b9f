"""Compare's state without Qt (state/compare.py): the choices read through `run` from a real SQLite store, the
newest two chosen by default, a pick kept across a refresh, two profiles' latest runs, the verdict and the rows
of what differs, the words when nothing can be compared, and a build A/B's verdict first."""

from __future__ import annotations

from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.build import BuildStamp
from llm_tuner.services.bench.builds import BuildsVerdict
from llm_tuner.state.compare import NO_FINISHED_RUN, NOTHING_YET, SAME_COMMAND, CompareState
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64)


def _store(tmp_path):
    engine = open_engine(tmp_path / "compare.sqlite")
    return engine, RunRepository(engine)


def _run(repo, label: str, gen_tps: float, argv: tuple[str, ...] = ("-ub", "512"), build=None) -> int:
    run_id = repo.create_run(BenchRun(label=label, status="running", server_argv=argv, build=build))
    for i in range(4):
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, predicted_n=16, predicted_ms=400.0,
                                        predicted_per_second=gen_tps + 0.1 * i))
    repo.finish_run(run_id, "complete")
    return run_id


def _state(engine, seen: list[str]) -> CompareState:
    state = CompareState(engine, threshold_pct=2.0)
    state.add_callback(lambda what, *_d: seen.append(what))
    return state


def test_the_newest_two_runs_are_chosen_and_compared_with_their_flags(tmp_path):
    engine, repo = _store(tmp_path)
    first = _run(repo, "ub512", 40.0)
    second = _run(repo, "ub256", 60.0, ("-ub", "256"))
    seen: list[str] = []
    state = _state(engine, seen)
    assert state.chosen == (None, None) and not state.choices
    state.refresh_choices()
    assert [c.key for c in state.choices] == [second, first] and state.choices[0].text.startswith(f"#{second} · ub256")
    assert state.chosen == (first, second)  # A the older, B the newest
    assert state.compare()
    assert "comparison" in seen and not state.busy
    assert (state.run_a.id, state.run_b.id) == (first, second)
    verdicts = {c.name: c.verdict for c in state.comparisons}
    assert verdicts["gen_tps@64"] == "better"
    assert f"B = run {second} (ub256) against A = run {first} (ub512): 1 better" in state.message
    assert [(d.a, d.b) for d in state.diff] == [("512", "256")] and state.diff[0].flag in ("-ub", "--ubatch-size")


def test_a_pick_is_kept_until_a_new_run_arrives_and_a_and_b_are_never_one_entry(tmp_path):
    engine, repo = _store(tmp_path)
    ids = [_run(repo, f"r{i}", 40.0) for i in range(3)]
    state = _state(engine, [])
    state.refresh_choices()
    state.choose(ids[0], ids[2])
    state.refresh_choices()  # nothing new: the pick stays
    assert state.chosen == (ids[0], ids[2])
    state.choose(ids[2], ids[2])
    newest = _run(repo, "r3", 41.0)
    state.refresh_choices()  # a new run: the newest two
    assert state.chosen == (ids[2], newest)


def test_two_profiles_compare_their_latest_runs(tmp_path):
    engine, repo = _store(tmp_path)
    _run(repo, "a", 10.0, ("-ub", "128"))  # an earlier version of profile a: other settings, not pooled
    latest_a = _run(repo, "a", 40.0)
    latest_b = _run(repo, "b", 40.2)
    state = _state(engine, [])
    state.refresh_choices()
    state.set_by_profiles(True)
    assert {c.key for c in state.choices} == {"a", "b"}
    state.choose("a", "b")
    assert state.compare()
    assert (state.run_a.id, state.run_b.id) == (latest_a, latest_b)
    assert {c.verdict for c in state.comparisons} == {"within noise"}
    assert [(d.flag, d.a, d.b) for d in state.diff] == [(SAME_COMMAND, "", "")]


def test_nothing_chosen_or_a_profile_without_a_run_is_said(tmp_path):
    engine, repo = _store(tmp_path)
    seen: list[str] = []
    state = _state(engine, seen)
    state.refresh_choices()
    assert not state.compare() and state.message == NOTHING_YET
    _run(repo, "a", 40.0)
    state.set_by_profiles(True)
    state.choose("a", "gone")
    assert state.compare()
    assert state.message == NO_FINISHED_RUN and state.run_b is None and "comparison" not in seen


def test_runs_sent_from_the_history_switch_to_runs_and_compare_those(tmp_path):
    engine, repo = _store(tmp_path)
    a = _run(repo, "x", 40.0)
    _run(repo, "y", 30.0)
    b = _run(repo, "z", 20.0)
    state = _state(engine, [])
    state.refresh_choices()
    state.set_by_profiles(True)
    state.compare_runs(a, b)
    assert not state.by_profiles and state.chosen == (a, b)
    assert (state.run_a.id, state.run_b.id) == (a, b)
    assert {c.name: c.verdict for c in state.comparisons}["gen_tps@64"] == "worse"


def test_a_build_ab_puts_its_verdict_first_or_alone(tmp_path):
    engine, repo = _store(tmp_path)
    a = repo.get_run(_run(repo, "p", 40.0, build=OLD))
    b = repo.get_run(_run(repo, "p", 44.0))
    state = _state(engine, [])
    state.show_builds(BuildsVerdict(None, None, None, (), "B against A: no run finished"))
    assert state.message == "B against A: no run finished" and state.run_a is None
    state.show_builds(BuildsVerdict(7, a, b, (), "B against A: 10% faster"))
    assert state.message.startswith("B against A: 10% faster\nB = run")
    assert ("llama-server build", "aaaaaaaa", "(absent)") in [(d.flag, d.a, d.b) for d in state.diff]
    # the chart names each side by its build, whose rounds it pools (not by its first round's run id)
    assert state.chart_sides[0][0] == "A: build aaaaaaaa (its rounds pooled)"
    assert state.chart_sides[1][0].startswith("B: ") and "pooled" in state.chart_sides[1][0]


def test_a_store_that_fails_is_said_and_compare_waits_no_more(tmp_path):
    engine, _repo = _store(tmp_path)

    def failing(work, done, failed):
        failed(RuntimeError("database is locked"))

    state = CompareState(engine, run=failing)
    state.refresh_choices()
    assert state.message == "Could not read the runs to compare: database is locked"
    state.compare_runs(1, 2)
    assert not state.busy and "database is locked" in state.message


def test_a_comparison_that_cannot_tell_says_inconclusive_and_how_to_narrow_it(tmp_path):
    """Two runs whose repetitions scatter by ±10 %: within noise, but not shown equal; the words say so."""
    engine, repo = _store(tmp_path)
    for label, gens in (("a", (100.0, 80.0, 92.0)), ("b", (95.0, 110.0, 84.0))):
        run_id = repo.create_run(BenchRun(label=label, status="running", server_argv=("-ub", "512")))
        for i, gen in enumerate(gens):
            repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, predicted_n=16, predicted_ms=400.0,
                                            predicted_per_second=gen))
        repo.finish_run(run_id, "complete")
    state = _state(engine, [])
    state.refresh_choices()
    assert state.compare()
    gen = next(c for c in state.comparisons if c.name == "gen_tps@64")
    assert gen.verdict == "within noise" and gen.inconclusive
    assert "Inconclusive (Generation @ 64 tok (t/s)): within noise, but the 95 % interval" in state.message


def test_a_pooled_side_is_charted_whole_and_named_by_its_runs(tmp_path):
    """Two profiles benchmarked twice each: the verdict pools both runs a side, and so does the chart (every
    repetition, one series a side named by its runs), not only the newest run."""
    engine, repo = _store(tmp_path)
    a1, b1 = _run(repo, "a", 40.0), _run(repo, "b", 44.0)
    a2, b2 = _run(repo, "a", 41.0), _run(repo, "b", 45.0)
    state = _state(engine, [])
    state.refresh_choices()
    state.set_by_profiles(True)
    state.choose("a", "b")
    assert state.compare()
    (name_a, side_a), (name_b, side_b) = state.chart_sides
    assert name_a == f"A: runs {a1}, {a2} · a" and name_b == f"B: runs {b1}, {b2} · b"
    assert len(side_a.reps) == len(side_b.reps) == 8
    assert sorted(r.predicted_per_second for r in side_a.reps) == sorted(
        [40.0 + 0.1 * i for i in range(4)] + [41.0 + 0.1 * i for i in range(4)])
