"""Builds in the History and in comparisons (real SQLite): runs keep their build and notes, the History filters by
build, a build A/B's verdict pools each side, and a tuned profile now slower than its stored measurement under
another build offers a re-tune."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from llm_tuner.cli.bench_builds import _retune_line
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, DevicePeak, Repetition
from llm_tuner.core.build import BuildStamp
from llm_tuner.services.bench.builds import builds_verdict, slower_than_stored
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64, driver="550.54", cuda="12.4")
NEW = BuildStamp(key="f:bbbbbbbbbbbb h:1 p:-", file_sha256="b" * 64, help_sha256="1" * 64, driver="550.54", cuda="12.4")
SPEC = BenchSpec(prompt_tokens=(64,), gen_tokens=16, reps=4)
T0 = datetime(2026, 12, 1, 12, 0)


def _run(repo, build, speeds, *, label="tuned", version=7, side=None, minutes=0, temp=None, notes=()):
    run = BenchRun(label=label, profile_version_id=version, build=build, spec=SPEC, status="complete",
                   started_at=T0 + timedelta(minutes=minutes), sweep_value=side, notes=notes,
                   binary_path=build.path if build else None)
    run_id = repo.create_run(run)
    for i, s in enumerate(speeds):
        peaks = (DevicePeak(device="CUDA0", temp_c=temp, sm_clock_mhz=1900.0),) if temp is not None else ()
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, prompt_n=64, prompt_ms=10.0,
                                        prompt_per_second=6400.0, predicted_n=16, predicted_ms=16000 / s,
                                        predicted_per_second=s, peaks=peaks))
    repo.finish_run(run_id, "complete")
    return repo.get_run(run_id)


def test_runs_keep_their_build_and_notes_and_the_history_filters_by_build(tmp_path):
    repo = RunRepository(open_engine(tmp_path / "db.sqlite"))
    a = _run(repo, OLD, [50, 51, 50, 49], notes=("cool-down: waited 12 s",))
    b = _run(repo, NEW, [50, 50, 51, 50], minutes=5)
    _run(repo, None, [50, 50], minutes=6)
    assert repo.get_run(a.id).build == OLD and repo.get_run(a.id).notes == ("cool-down: waited 12 s",)
    assert [x.key for x in repo.builds()] == [NEW.key, OLD.key]  # the newest run's build first
    assert repo.latest_build() == NEW
    assert [r.id for r in repo.list_overview(build=OLD.key)] == [a.id]
    assert [r.id for r in repo.list_runs(build=NEW.key)] == [b.id]
    assert len(repo.list_runs(build="")) == 1  # runs that recorded no build


def test_a_build_ab_pools_each_side_and_says_when_b_is_slower(tmp_path):
    repo = RunRepository(open_engine(tmp_path / "db.sqlite"))
    runs = [_run(repo, OLD, [50, 51, 50, 49], side="A", temp=45.0),
            _run(repo, NEW, [40, 41, 40, 39], side="B", minutes=1, temp=46.0),
            _run(repo, OLD, [50, 50, 51, 50], side="A", minutes=2, temp=45.0),
            _run(repo, NEW, [40, 40, 41, 40], side="B", minutes=3, temp=47.0)]
    verdict = builds_verdict(runs, group_id=None)
    assert len(verdict.a.reps) == 8 and len(verdict.b.reps) == 8
    gen = next(c for c in verdict.comparisons if c.name == "gen_tps@64")
    assert gen.verdict == "worse" and gen.delta_pct < -15
    assert verdict.text.startswith("B against A: Generation") and "-> worse" in verdict.text
    assert "llama-server build aaaaaaaa -> bbbbbbbb" in verdict.text
    assert verdict.warnings == ()  # 45-47 °C: one thermal state
    assert verdict.b_slower and verdict.to_json()["b_slower"]  # the re-tune offer (CLI and Compare)
    assert not builds_verdict([r.model_copy(update={"sweep_value": "B" if r.sweep_value == "A" else "A"})
                               for r in runs]).b_slower  # B faster: nothing to re-tune
    assert _retune_line("q", "my q", Path("/opt/new/llama-server")).endswith(
        "(llm-tuner tune --binary /opt/new/llama-server --profile 'my q', or Compare's \"Re-tune for this build\").")
    hot = [r.model_copy(update={"reps": tuple(x.model_copy(update={"peaks": (DevicePeak(device="CUDA0", temp_c=80.0),)})
                                              for x in r.reps)}) if r.sweep_value == "B" else r for r in runs]
    assert "different thermal states" in builds_verdict(hot).warnings[0]


def test_a_tuned_profile_slower_under_a_new_build_offers_a_retune(tmp_path):
    repo = RunRepository(open_engine(tmp_path / "db.sqlite"))
    _run(repo, OLD, [50, 51, 50, 49, 50])
    same_speed = _run(repo, NEW, [50, 50, 51, 49, 50], minutes=5)
    assert slower_than_stored(repo, same_speed) is None  # within noise
    slower = _run(repo, NEW, [40, 41, 40, 39, 40], minutes=10)
    msg = slower_than_stored(repo, slower)
    assert msg is not None and "slower than its stored measurement" in msg and "re-tune it" in msg
    assert "llama-server build aaaaaaaa -> bbbbbbbb" in msg and "tune --profile 'tuned'" in msg
    other_version = _run(repo, NEW, [40, 41, 40, 39], version=8, minutes=15)
    assert slower_than_stored(repo, other_version) is None  # no earlier measurement of this version
