"""The Tune view's state without Qt (state/tune.py): the choices from a real SQLite store (saved profiles, the
tunes Resume offers), the base that follows the Profile tab until chosen, the knobs proposed for a base (the real
proposal over a GGUF written here) with only the newest kept, the candidates, the spec a Run builds and the
name its result is saved under, Resume's spec, the tune's words, and saving the result as a profile version."""

from __future__ import annotations

import pytest

from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.tune import Knob, Objective, TuneResult, TuneSpec
from llm_tuner.state.benchmarks import ProfileFacts
from llm_tuner.state.tune import DEMO, EDITED, NO_BASE, Base, TuneState, base_target, load_choices
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.tunes import TuneRepository
from tests.support.random_gguf import write_qwen3_dense

KNOB = Knob(key="ubatch_size", flag="-ub", values=("256", "512"))


def _state(tmp_path, **kw) -> tuple[TuneState, list[tuple]]:
    state = TuneState(open_engine(tmp_path / "t.sqlite"), **kw)
    seen: list[tuple] = []
    state.add_callback(lambda what, *d: seen.append((what, *d)))
    return state, seen


def test_choices_list_saved_profiles_and_the_tunes_resume_continues(tmp_path):
    state, seen = _state(tmp_path)
    ProfileRepository(state.engine).save("fast", LaunchProfile(model="/m.gguf"))
    tunes = TuneRepository(state.engine)
    left = tunes.create(TuneSpec(base_argv=("-m", "/m.gguf"), label="fast", knobs=(KNOB,)))
    done = tunes.create(TuneSpec(base_argv=("-m", "/m.gguf"), label="done", knobs=(KNOB,)))
    tunes.finish(done, "complete", TuneResult(verdict="better"))
    tunes.finish(left, "cancelled")
    state.reload_choices()
    assert state.profiles == ("fast",) and [t.id for t in state.resumable] == [left]
    assert state.resumable_text(state.resumable[0]).startswith("tune #1 fast (cancelled, 0 trials)")
    assert ("choices",) in seen
    assert [t.id for t in load_choices(state.engine).resumable] == [left]


def test_the_base_follows_the_profile_tab_until_a_tune_chooses_it(tmp_path):
    facts = ProfileFacts(LaunchProfile(model="/m.gguf"), None)
    state, seen = _state(tmp_path, profile=facts)
    assert state.preferred_base(facts) == EDITED and state.preferred_base(ProfileFacts()) is None
    assert state.preferred_base(ProfileFacts(LaunchProfile(), "fast")) == "fast"
    assert state.profile_changed(facts, Base(EDITED)) == "propose"  # edits to the one being edited
    assert state.profile_changed(facts, Base("fast")) == ""
    assert state.profile_changed(ProfileFacts(LaunchProfile(), "saved"), Base(EDITED)) == "reload"
    assert ("choices",) in seen


def test_the_base_target_is_a_saved_profile_the_edited_one_or_the_demo_with_extra_flags(tmp_path):
    engine = open_engine(tmp_path / "t.sqlite")
    ProfileRepository(engine).save("fast", LaunchProfile(model="/m.gguf", ubatch_size=512))
    target = base_target(engine, "fast", None, None, "-ub 256 --no-warmup")
    assert target.argv.count("-ub") + target.argv.count("--ubatch-size") == 1 and target.argv[-3:] == [
        "-ub", "256", "--no-warmup"]
    assert base_target(engine, EDITED, LaunchProfile(model="/e.gguf"), None, "").label == "unsaved profile"
    from llm_tuner.services.bench import BenchError

    with pytest.raises(BenchError, match="No profile is being edited"):
        base_target(engine, EDITED, None, None, "")
    with pytest.raises(BenchError, match="is gone"):
        base_target(engine, "gone", None, None, "")


def test_a_retune_request_runs_the_base_by_the_other_build(tmp_path):
    """Compare's re-tune: the saved profile is the chosen base and the other llama-server runs it (the
    knob proposal and the spec use `target_for`); without a request the base's own binary stays."""
    state, seen = _state(tmp_path)
    ProfileRepository(state.engine).save("q", LaunchProfile(model="/m.gguf", ctx_size=512, binary="/old/llama-server"))
    assert state.target_for("q").binary == "/old/llama-server"
    state.retune_for_build("q", "/new/llama-server")
    assert state.user_chose_base and state.requested_base == "q" and ("choices",) in seen
    target = state.target_for("q", extra="--no-warmup")
    assert target.binary == "/new/llama-server" and "512" in target.argv and target.argv[-1] == "--no-warmup"
    edited = state.target_for(EDITED, ProfileFacts(LaunchProfile(model="/e.gguf"), None))
    assert edited.binary == "/new/llama-server" and "/e.gguf" in edited.argv


def test_knobs_are_proposed_for_a_real_model_and_only_the_newest_proposal_counts(tmp_path):
    model = write_qwen3_dense(tmp_path / "q.gguf", n_layer=2, n_embd=64, n_ff=128)
    pending: list = []
    state, seen = _state(tmp_path, run=lambda work, done, failed: pending.append((work, done, failed)))
    facts = ProfileFacts(LaunchProfile(model=str(model), ctx_size=512), "q")
    state.propose(Base(EDITED), facts, Objective(), 128)
    state.propose(Base(EDITED, "-t 2"), facts, Objective(), 128)
    assert ("knobs_hint", "Proposing knobs…") in seen
    for work, done, failed in pending:
        try:
            done(work())
        except Exception as exc:  # noqa: BLE001
            failed(exc)
    knobs = [d[1] for d in seen if d[0] == "knobs"]
    assert len(knobs) == 1 and knobs[0] and all(isinstance(k, Knob) for k in knobs[0])
    assert state.base_target is not None and state.base_target.argv[-2:] == ["-t", "2"]


def test_a_proposal_that_fails_is_said_and_candidates_need_a_base(tmp_path):
    state, seen = _state(tmp_path)
    state.plan_candidates([KNOB], 128, Objective())
    assert state.candidates_message == NO_BASE and state.candidates == ()
    state.propose(Base(EDITED), ProfileFacts(), Objective(), 128)
    assert seen[-1][0] == "knobs_hint" and seen[-1][1].startswith("No knobs proposed: No profile is being edited")
    state.propose(Base(None), ProfileFacts(), Objective(), 128)  # nothing chosen: nothing asked
    assert seen[-1][1].startswith("No knobs proposed")


def test_run_builds_the_spec_and_names_what_the_result_is_saved_as(tmp_path):
    state, seen = _state(tmp_path)
    facts = ProfileFacts(LaunchProfile(model="/m.gguf"), "mine")
    assert state.prepare_run(Base(None), facts, Objective(), [KNOB], {}) is None
    assert state.status == "Cannot start: choose a base profile first."
    assert state.prepare_run(Base(EDITED), facts, Objective(), [], {}) is None
    assert "check at least one knob" in state.status and not state.user_chose_base
    build = state.prepare_run(Base(EDITED, "-t 2"), facts, Objective(), [KNOB], {"budget_s": 60.0})
    spec = build()
    assert spec.label == "mine" and spec.knobs == (KNOB,) and spec.budget_s == 60.0 and spec.base_argv[-2:] == (
        "-t", "2")
    assert state.user_chose_base and state.save_name == "mine tuned" and state.objective_text
    ProfileRepository(state.engine).save("fast", LaunchProfile(model="/m.gguf"))
    assert state.prepare_run(Base("fast"), facts, Objective(), [KNOB], {}) is not None
    assert state.save_name == "fast"
    state.prepare_run(Base(DEMO), ProfileFacts(), Objective(), [KNOB], {})
    assert state.save_name == "profile tuned"


def test_resume_takes_the_stored_spec_with_a_new_budget(tmp_path):
    state, _ = _state(tmp_path)
    tunes = TuneRepository(state.engine)
    tune_id = tunes.create(TuneSpec(base_argv=("-m", "/m.gguf"), label="fast", knobs=(KNOB,), budget_s=600))
    tunes.finish(tune_id, "cancelled")
    record = tunes.get(tune_id)
    assert state.prepare_resume(None, 60) is None
    spec = state.prepare_resume(record, 90)()
    assert spec.budget_s == 90.0 and state.save_name == "fast"
    no_spec = record.model_copy(update={"spec": None})
    assert state.prepare_resume(no_spec, 90) is None and "has no stored spec" in state.status


def test_the_tune_says_how_it_goes_and_keeps_its_result(tmp_path):
    state, seen = _state(tmp_path)
    state.started("Tune")
    assert state.running and state.status == "Tune: starting…" and state.result is None
    state.progressed(0.25, "trial 3, 2 min left")
    state.progressed(-1, "final A/B")
    assert state.progress == 0.25 and state.status == "final A/B"
    state.not_started("Tune")
    assert state.status == "Tune not started: a tune is running."
    state.cancelling()
    assert "Resume continues" in state.status
    result = TuneResult(tune_id=4, tune_number=2, verdict="baseline kept")
    state.succeeded(result, 7)
    assert state.result is result and state.progress == 1.0
    assert state.status == "Tune #2 finished: baseline kept. 7 trial(s) kept in the History."
    state.failed(RuntimeError("out of memory"))
    assert state.status.startswith("The tune failed: out of memory.")
    state.cancelled()
    assert state.progress_note == "cancelled"
    state.finished()
    assert not state.running and [s[0] for s in seen].count("running") == 2


def test_the_result_is_saved_as_a_profile_version_once(tmp_path):
    state, seen = _state(tmp_path)
    assert not state.save_result("x")  # no result yet
    tunes = TuneRepository(state.engine)
    spec = TuneSpec(base_argv=("-m", "/m.gguf", "-ub", "512"), label="fast", knobs=(KNOB,))
    tune_id = tunes.create(spec)
    result = TuneResult(tune_id=tune_id, verdict="better", baseline_argv=spec.base_argv,
                        winner_argv=("-m", "/m.gguf", "-ub", "256"))
    tunes.finish(tune_id, "complete", result)
    state.succeeded(result, 1)
    assert state.save_result("fast")
    saved = [d for d in seen if d[0] == "saved"]
    assert len(saved) == 1 and saved[0][1].name == "fast" and saved[0][1].profile.ubatch_size == 256
    assert ("save_message", f"Saved fast version {saved[0][1].version}.") in seen
    assert state.save_result("fast")
    assert seen[-1][0] == "save_message" and "has these settings already" in seen[-1][1]


def test_a_save_that_fails_is_said(tmp_path):
    state, seen = _state(tmp_path)
    state.succeeded(TuneResult(tune_id=99, verdict="better"), 0)
    assert state.save_result("fast")
    assert seen[-1] == ("save_message", "Could not save: tune 99 is not in the store any more")


def test_the_result_in_words_for_a_winner_and_for_a_kept_baseline():
    from llm_tuner.state.tune_result import result_words, value_text

    assert (value_text(None), value_text(""), value_text("256")) == ("default", "(on)", "256")
    better = TuneResult(verdict="better", baseline_argv=("-ub", "512"), searched_winner_argv=("-ub", "256"),
                        changed_flags=({"flag": "--ubatch-size", "a": "512", "b": "256"},),
                        comparisons=({"name": "gen_tps@512"},), final_n_note="n=8: the screening was noisy",
                        bandwidth={"text": "62 % of the measured peak"})
    words = result_words(better)
    assert words.verdict.startswith("The winner beats the baseline beyond noise")
    assert words.table_title.endswith("(n=8: the screening was noisy):")
    assert words.details.splitlines() == ["Flags that changed: --ubatch-size: 512 → 256",
                                          "Quality: no knob that changes results was tried",
                                          "Memory bandwidth: 62 % of the measured peak"]
    assert words.save_text == "Save as new profile version" and words.save_tip.startswith("Save the winner's")
    kept = TuneResult(verdict="within noise", baseline_argv=("-ub", "512"), note="cancelled before the final",
                      quality={"-ctk q8_0": "+0.3 % perplexity"})
    words = result_words(kept)
    assert words.verdict == "No candidate beat the baseline while racing: the baseline is kept."
    assert words.table_title == "No final A/B was run: the winner is the baseline."
    assert words.details.splitlines()[:3] == ["Cancelled before the final.",
                                              "Flags that changed: none (the winner is the baseline)",
                                              "Quality: -ctk q8_0: +0.3 % perplexity"]
    assert words.save_text == "Save the baseline"


def test_the_candidates_in_words():
    from llm_tuner.services.tune.preview import Candidate
    from llm_tuner.state.tune_result import candidate_cells, candidates_summary

    assert candidates_summary([]) == "No knob is checked."
    fits = Candidate(knob="ubatch_size", value="256", label="256", fits=True, plan="CUDA0 5.1 GiB",
                     args=("-ub", "256"))
    big = Candidate(knob="ubatch_size", value="4096", label="4096", fits=False, plan="CUDA0 over by 1 GiB",
                    args=("-ub", "4096"))
    assert candidates_summary([fits, big]) == "2 candidates, 1 pruned by the memory plan (never started)."
    cells, tip, muted = candidate_cells(big)
    assert cells == ("ubatch_size", "4096", "pruned", "–", "CUDA0 over by 1 GiB", "-ub 4096") and muted
    assert tip == "-ub 4096\nCUDA0 over by 1 GiB" and not candidate_cells(fits)[2]


def test_the_form_inputs_make_the_objective_with_only_the_rows_its_kind_uses():
    from llm_tuner.state.tune import TuneInputs

    plain = TuneInputs(kind="gen_tps", clients=8, min_gen_tps=20.0, min_ctx=0)
    objective = plain.objective()
    assert objective.kind == "gen_tps" and objective.clients == 1 and objective.min_gen_tps is None
    assert objective.weights is None and plain.constraints()["min_ctx"] is None
    from llm_tuner.core.tune import OBJECTIVES
    from llm_tuner.core.tune.objectives import CLIENTS, WEIGHTS

    kinds = {k: row.uses for k, row in OBJECTIVES.items()}

    weighted = next(k for k, uses in kinds.items() if WEIGHTS in uses)
    assert TuneInputs(kind=weighted, gen_weight=0.7, prefill_weight=0.3).objective().weights == {
        "gen_tps": 0.7, "prefill_tps": 0.3}
    served = next(k for k, uses in kinds.items() if CLIENTS in uses)
    assert TuneInputs(kind=served, clients=8).objective().clients == 8
    assert TuneInputs(min_ctx=8192, budget_s=120).constraints() == {
        "min_ctx": 8192, "headroom_mib": TuneInputs().headroom_mib, "budget_s": 120, "max_ppl_increase_pct": 1.0,
        "final_reps": 5, "final_rounds": 2, "screen_reps": 2}


def test_the_shown_result_needs_a_name_to_save_and_exports_its_report(tmp_path):
    """The Result tab's state (state.tune_result.ShownResult): a save needs a profile name; the export writes
    the report and its trial plot side by side (the files `tune --report` writes), or says why not."""
    from llm_tuner.core.tune import Trial
    from llm_tuner.state.tune_result import NAME_FIRST, ShownResult

    shown = ShownResult()
    assert shown.export(tmp_path) is None and shown.message == ""  # nothing shown: nothing written
    result = TuneResult(tune_id=7, tune_number=3, verdict="better", baseline_argv=("-ub", "512"),
                        winner_argv=("-ub", "256"))
    trials = [Trial(id=1, values={"ubatch_size": "256"}, score=61.0, status="measured")]
    shown.show(result, "demo", trials, "gen t/s", "generation speed")
    assert shown.save_name("  ") is None and shown.message == NAME_FIRST
    assert shown.save_name(" demo tuned ") == "demo tuned"
    path = shown.export(tmp_path / "reports")
    assert path == tmp_path / "reports" / "tune-3.md" and shown.message == f"Exported: {path}"
    assert "generation speed" in path.read_text() and (tmp_path / "reports" / "tune-3-trials.svg").is_file()
    (tmp_path / "blocked").write_text("a file where the folder should be")
    assert shown.export(tmp_path / "blocked") is None
    assert shown.message.startswith("The report could not be written:")
    shown.show(None)
    assert shown.message == "" and shown.trials == []
