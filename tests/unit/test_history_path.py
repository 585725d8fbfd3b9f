"""The CLI and the app use one history: the data folder chosen in Settings, unless LLM_TUNER_DATA_DIR overrides."""

from __future__ import annotations

from llm_tuner.core.settings import Settings
from llm_tuner.services.settings_store import database_path, save_settings


def test_database_path_follows_the_settings_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("LLM_TUNER_DATA_DIR", raising=False)
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"),
                     ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    assert database_path().parent == tmp_path / "data" / "llm-tuner"  # nothing chosen: the platform's folder
    save_settings(Settings(data_dir=str(tmp_path / "chosen")))
    assert database_path() == tmp_path / "chosen" / "llm-tuner.sqlite"  # the CLI's default now (it ignored it)
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "env"))
    assert database_path() == tmp_path / "env" / "llm-tuner.sqlite"  # the override still wins


def _platform_folders(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("LLM_TUNER_DATA_DIR", raising=False)
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(tmp_path / sub))


def test_a_chosen_folder_that_cannot_be_made_is_said_not_a_traceback(tmp_path, monkeypatch):
    """An unmounted drive or a typo under a file: the CLI names the folder and how to change it (it used to end
    in FileNotFoundError's traceback, and so did the window's start)."""
    import os
    import subprocess
    import sys

    import pytest

    from llm_tuner.services.settings_store import DataFolderUnusable

    _platform_folders(tmp_path, monkeypatch)
    (tmp_path / "a-file").write_text("x")
    save_settings(Settings(data_dir=str(tmp_path / "a-file" / "history")))
    with pytest.raises(DataFolderUnusable, match="a-file/history.*cannot be created"):
        database_path()
    done = subprocess.run([sys.executable, "-m", "llm_tuner", "runs", "list"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    assert f"the data folder {tmp_path / 'a-file' / 'history'} (chosen in Settings) cannot be created" in done.stderr
    assert "settings.json" in done.stderr and "LLM_TUNER_DATA_DIR" in done.stderr


def test_what_settings_says_about_a_data_folder(tmp_path):
    import os

    from llm_tuner.services.settings_store import data_folder_note

    assert data_folder_note("") == (True, "")
    assert data_folder_note("relative/dir")[0] is False
    (tmp_path / "f").write_text("x")
    assert data_folder_note(str(tmp_path / "f")) == (False, f"{tmp_path / 'f'} is a file, not a folder.")
    usable, note = data_folder_note(str(tmp_path / "f" / "sub"))
    assert not usable and "cannot be created" in note
    usable, note = data_folder_note(str(tmp_path / "new" / "deeper"))
    assert usable and "created at the next start" in note and not (tmp_path / "new").exists()  # nothing made yet
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(private, 0o700)
    usable, note = data_folder_note(str(private))
    assert usable and "new, empty history" in note and "chmod" not in note
    (private / "llm-tuner.sqlite").write_bytes(b"")
    os.chmod(private, 0o755)
    usable, note = data_folder_note(str(private))
    assert usable and "Holds an llm-tuner history" in note and f"chmod 700 {private}" in note
