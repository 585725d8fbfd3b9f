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
