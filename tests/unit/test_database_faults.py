"""A damaged, non-database or newer history file: one message naming the file, non-zero exit, never overwritten."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from llm_tuner.store.db import DatabaseError, move_aside, open_engine


def _good(path: Path) -> Path:
    open_engine(path).dispose()
    return path


def _garbage_pages(tmp_path: Path) -> Path:
    good = _good(tmp_path / "good.sqlite")
    bad = tmp_path / "llm-tuner.sqlite"
    data = bytearray(good.read_bytes())
    data[4096:] = b"\x5a" * (len(data) - 4096)  # page 1 (the header and schema) intact, every other page garbage
    bad.write_bytes(bytes(data))
    return bad


def _plain_text(tmp_path: Path) -> Path:
    p = tmp_path / "llm-tuner.sqlite"
    p.write_text("these are my notes, not a database\n" * 50)
    return p


def _newer(tmp_path: Path) -> Path:
    p = _good(tmp_path / "llm-tuner.sqlite")
    con = sqlite3.connect(p)
    con.execute("UPDATE alembic_version SET version_num = '9999'")
    con.commit()
    con.close()
    return p


@pytest.mark.parametrize("make, kind", [(_garbage_pages, "damaged"), (_plain_text, "damaged"), (_newer, "newer")])
def test_open_reports_unusable_file_and_leaves_it_unchanged(tmp_path, make, kind):
    path = make(tmp_path)
    before = path.read_bytes()
    with pytest.raises(DatabaseError) as info:
        open_engine(path)
    assert info.value.kind == kind
    assert str(path) in str(info.value)
    assert path.read_bytes() == before  # never "repaired", migrated or overwritten


def test_move_aside_keeps_the_old_file_and_a_fresh_one_opens(tmp_path):
    path = _plain_text(tmp_path)
    text = path.read_text()
    moved = move_aside(path)
    assert moved.read_text() == text and moved.name.startswith("llm-tuner.sqlite.unusable-")
    open_engine(path).dispose()
    assert path.exists() and moved.read_text() == text


@pytest.mark.parametrize("argv", [["runs", "list"], ["profile", "list"], ["models", "scan", "."], ["database", "check"],
                                  ["run", "--attach", "http://127.0.0.1:9", "--duration", "1"]])
def test_every_command_says_what_to_do_without_a_traceback(isolated_data_dir, argv):
    db = _newer(isolated_data_dir) if argv[0] == "runs" else _plain_text(isolated_data_dir)
    before = db.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "llm_tuner", *argv], capture_output=True, text=True, timeout=120,
                          cwd=isolated_data_dir)
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(db) in proc.stderr and "llm-tuner database move-aside" in proc.stderr
    assert db.read_bytes() == before


def test_database_move_aside_command_then_commands_work(isolated_data_dir):
    db = _plain_text(isolated_data_dir)
    run = [sys.executable, "-m", "llm_tuner"]
    proc = subprocess.run([*run, "database", "move-aside"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    moved = [p for p in isolated_data_dir.iterdir() if p.name.startswith("llm-tuner.sqlite.unusable-")]
    assert len(moved) == 1 and moved[0].read_text().startswith("these are my notes")
    assert subprocess.run([*run, "runs", "list"], capture_output=True, timeout=60).returncode == 0
    assert db.exists()


def test_smoke_test_fails_with_the_message(isolated_data_dir):
    shutil.copy(_plain_text(isolated_data_dir), isolated_data_dir / "x")
    proc = subprocess.run([sys.executable, "-m", "llm_tuner", "--smoke-test"], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 4
    assert "Traceback" not in proc.stderr and "llm-tuner.sqlite" in proc.stderr


def test_a_file_damaged_after_its_last_check_is_caught(tmp_path):
    path = _good(tmp_path / "llm-tuner.sqlite")
    open_engine(path).dispose()  # checked and remembered
    data = bytearray(_garbage_pages(tmp_path).read_bytes())  # replaces the file: another size or mtime
    path.write_bytes(bytes(data))
    with pytest.raises(DatabaseError):
        open_engine(path)
