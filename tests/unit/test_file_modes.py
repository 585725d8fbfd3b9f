"""Files the app creates are 0600 and its folders 0700; existing ones of ours are tightened at start with a
note in the log; a folder the user chose is not changed, but a warning says when others can read it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llm_tuner", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_created_files_and_folders_are_private(tmp_path, monkeypatch):
    home = tmp_path / "fresh"  # nothing exists yet: the app creates all of it
    env = {"LLM_TUNER_DATA_DIR": str(home)}
    assert _cli("runs", "list", env=env).returncode == 0
    from llm_tuner.core.settings import Settings
    from llm_tuner.services.settings_store import save_settings

    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(home))
    save_settings(Settings())
    for folder in (home, home / "config", home / "logs"):
        assert _mode(folder) == 0o700, folder
    for f in (home / "llm-tuner.sqlite", home / "config" / "settings.json", home / "logs" / "llm-tuner.log"):
        assert _mode(f) == 0o600, f


def test_existing_files_are_tightened_with_a_note(isolated_data_dir):
    from llm_tuner.store.db import open_engine

    db = isolated_data_dir / "llm-tuner.sqlite"
    open_engine(db).dispose()  # the history as an earlier start left it (in this process: one CLI start, not two)
    os.chmod(isolated_data_dir, 0o755)
    os.chmod(db, 0o644)  # as the app used to leave them
    assert _cli("runs", "list").returncode == 0
    assert _mode(db) == 0o600 and _mode(isolated_data_dir) == 0o700
    log = (isolated_data_dir / "logs" / "llm-tuner.log").read_text()
    assert f"file permissions: {db}: mode 644 -> 600" in log


def test_a_chosen_folder_is_not_changed_but_a_readable_one_is_warned_about(tmp_path, monkeypatch):
    from llm_tuner import app
    from llm_tuner.core.settings import Settings
    from llm_tuner.services.settings_store import save_settings

    chosen = tmp_path / "shared"
    chosen.mkdir(mode=0o755)
    os.chmod(chosen, 0o755)
    save_settings(Settings(data_dir=str(chosen)))
    monkeypatch.delenv("LLM_TUNER_DATA_DIR")
    monkeypatch.setattr("platformdirs.user_data_dir", lambda _n: str(tmp_path / "d"))
    monkeypatch.setattr("platformdirs.user_config_dir", lambda _n: str(tmp_path / "c"))
    monkeypatch.setattr("platformdirs.user_log_dir", lambda _n: str(tmp_path / "l"))
    (tmp_path / "c").mkdir(mode=0o700)
    save_settings(Settings(data_dir=str(chosen)))
    records = []
    monkeypatch.setattr(app.log, "warning", lambda msg, *a: records.append(msg % a))
    app.check_file_modes()
    assert _mode(chosen) == 0o755
    assert len(records) == 1 and str(chosen) in records[0] and "can be read by other users" in records[0]
