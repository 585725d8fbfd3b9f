"""Issue 35 item 14: ids never change meaning. A deleted run's id is not given to the next run (SQLite alone gives
max(id) + 1), tunes, sweeps and A/B groups are numbered per kind (the first tune of a history is tune 1, not 4),
and a history from before keeps every id and every group's number. Real SQLite files, the real migrations, the
CLI in-process."""

from __future__ import annotations

import json
import sqlite3

from llm_tuner.cli import main
from llm_tuner.core.bench_spec import BenchRun, RunGroup
from llm_tuner.core.tune import Knob, Objective, TuneSpec
from llm_tuner.qt.bench_models import group_label
from llm_tuner.services.settings_store import database_path
from llm_tuner.store.db import alembic_config, open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository

SPEC = TuneSpec(base_argv=("-m", "m.gguf"), label="m", objective=Objective(),
                knobs=(Knob(key="ub", flag="ubatch_size", values=("64", "128")),))


def test_a_deleted_runs_id_is_never_given_again(tmp_path):
    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    first, second = repo.create_run(BenchRun(label="a")), repo.create_run(BenchRun(label="b"))
    repo.delete_run(second)  # the newest: SQLite alone would give its id to the next run
    third = repo.create_run(BenchRun(label="c"))
    assert (first, second, third) == (1, 2, 3)
    repo.delete_run(third)
    repo.delete_run(first)
    assert repo.create_run(BenchRun(label="d")) == 4


def test_tunes_sweeps_and_ab_groups_are_numbered_per_kind(tmp_path, capsys):
    engine = open_engine(database_path())  # the CLI's history (an isolated data folder: tests/conftest.py)
    runs, tunes = RunRepository(engine), TuneRepository(engine)
    sweeps = [runs.create_group(RunGroup(param="-ub", values=("64", "128"))) for _ in range(3)]
    tune_id = tunes.create(SPEC)
    assert tunes.get(tune_id).number == 1 and tune_id == 4  # was shown as "tune #4": the first tune
    assert [runs.get_group(g).number for g in sweeps] == [1, 2, 3]
    assert group_label(runs.get_group(sweeps[2])) == "sweep #3 (-ub)"
    assert group_label(RunGroup(id=tune_id, number=1, kind="tune")) == "tune #1"
    assert tunes.id_of_number(1) == tune_id and tunes.id_of_number(4) is None
    assert main(["tunes", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["tune"], r["tune_id"]) for r in rows] == [(1, 4)]
    next_sweep = runs.create_group(RunGroup(param="-t", values=("1", "2")))
    assert runs.get_group(next_sweep).number == 4 and next_sweep == 5


def test_a_history_from_before_keeps_its_ids_and_numbers(tmp_path):
    from alembic import command

    path = tmp_path / "old.sqlite"
    old = open_engine(path, migrate=False)
    command.upgrade(alembic_config(old), "0009")  # the schema before this change
    old.dispose()
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO bench_groups (id, kind, param, values_json, label, created_at) "
                    "VALUES (?, ?, '', '[]', '', '2026-12-01 10:00:00')", [(1, "sweep"), (2, "sweep"), (4, "tune")])
    con.executemany("INSERT INTO bench_runs (id, label, status, server_argv, server_env, binary_backends, devices, "
                    "spec, llama_bench, llama_bench_skipped, started_at) VALUES (?, 'r', 'complete', '[]', '{}', '[]', "
                    "'[]', '{}', '[]', '[]', '2026-12-01 10:00:00')", [(3,), (7,)])
    con.commit()
    con.close()
    engine = open_engine(path)  # migrated to this build's schema
    runs, tunes = RunRepository(engine), TuneRepository(engine)
    assert [r.id for r in runs.list_runs(with_reps=False)] == [7, 3]
    assert runs.get_group(2).number == 2 and [t.number for t in tunes.list_tunes()] == [4]
    new_tune = tunes.create(SPEC)
    assert new_tune == 5 and tunes.get(new_tune).number == 5  # after tune 4 (number = id before): tune 5
    assert runs.create_run(BenchRun(label="n")) == 8
    assert runs.get_group(runs.create_group(RunGroup(param="-ub"))).number == 3
