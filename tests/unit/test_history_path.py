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
    (tmp_path / "chosen").mkdir()  # Settings makes it on Save (make_data_folder)
    assert database_path() == tmp_path / "chosen" / "llm-tuner.sqlite"  # the CLI's default now (it ignored it)
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "env"))
    assert database_path() == tmp_path / "env" / "llm-tuner.sqlite"  # the override still wins


def _platform_folders(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("LLM_TUNER_DATA_DIR", raising=False)
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(tmp_path / sub))


def test_a_chosen_folder_that_is_gone_is_said_not_a_traceback_and_not_made_again(tmp_path, monkeypatch):
    """An unmounted drive leaves its mount point empty (or a typo names a path under a file): the CLI names the
    folder and how to change it, and creates nothing there (a new, empty history on the bare mount point would
    look like a lost one). It used to end in FileNotFoundError's traceback, and so did the window's start."""
    import os
    import subprocess
    import sys

    import pytest

    from llm_tuner.services.settings_store import DataFolderUnusable

    _platform_folders(tmp_path, monkeypatch)
    mount = tmp_path / "media" / "usb"
    mount.mkdir(parents=True)  # the drive is not connected: its mount point is an empty folder
    save_settings(Settings(data_dir=str(mount / "llm-tuner")))
    with pytest.raises(DataFolderUnusable, match="llm-tuner does not exist \\(is its drive connected\\?\\)"):
        database_path()
    done = subprocess.run([sys.executable, "-m", "llm_tuner", "runs", "list"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr and not (mount / "llm-tuner").exists()
    assert f"the data folder chosen in Settings cannot be used: {mount / 'llm-tuner'} does not exist" in done.stderr
    assert "settings.json" in done.stderr and "Connect the drive" in done.stderr
    (tmp_path / "a-file").write_text("x")
    save_settings(Settings(data_dir=str(tmp_path / "a-file")))
    with pytest.raises(DataFolderUnusable, match="is a file, not a folder"):
        database_path()


def test_what_settings_says_about_a_data_folder(tmp_path, monkeypatch):
    import os

    from llm_tuner.services.settings_store import data_folder_note

    assert data_folder_note("")[1].startswith("LLM_TUNER_DATA_DIR is set (")  # the tests' own override: said
    monkeypatch.delenv("LLM_TUNER_DATA_DIR")
    assert data_folder_note("") == (True, "")
    assert data_folder_note("relative/dir")[0] is False
    (tmp_path / "f").write_text("x")
    assert data_folder_note(str(tmp_path / "f")) == (False, f"{tmp_path / 'f'} is a file, not a folder.")
    usable, note = data_folder_note(str(tmp_path / "f" / "sub"))
    assert not usable and "cannot be created" in note
    usable, note = data_folder_note(str(tmp_path / "new" / "deeper"))
    assert usable and "Save creates it" in note and not (tmp_path / "new").exists()  # nothing made yet
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(private, 0o700)
    usable, note = data_folder_note(str(private))
    assert usable and "new, empty history" in note and "chmod" not in note
    (private / "llm-tuner.sqlite").write_bytes(b"")
    os.chmod(private, 0o755)
    usable, note = data_folder_note(str(private))
    assert usable and "Holds an llm-tuner history" in note and f"chmod 700 {private}" in note
    assert data_folder_note(str(private), in_use=private)[1].startswith("This is the history in use now.")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: chmod 700 there would break others
    usable, note = data_folder_note(str(shared))
    assert usable and "choose a folder of your own inside it" in note and "chmod" not in note
