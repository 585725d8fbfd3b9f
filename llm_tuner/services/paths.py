"""Where llm-tuner keeps its files (platformdirs), with the overrides tests and scripts use."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "llm-tuner"


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """The data folder (the SQLite history lives here). `LLM_TUNER_DATA_DIR` overrides it."""
    override = os.environ.get("LLM_TUNER_DATA_DIR")
    return _ensure(Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME)))


def config_dir() -> Path:
    """The config folder (settings.json). Follows `LLM_TUNER_DATA_DIR` when set, so tests stay isolated."""
    override = os.environ.get("LLM_TUNER_DATA_DIR")
    return _ensure(Path(override) / "config" if override else Path(platformdirs.user_config_dir(APP_NAME)))


def log_dir() -> Path:
    """The log folder (app log, unhandled exceptions, server logs)."""
    override = os.environ.get("LLM_TUNER_DATA_DIR")
    return _ensure(Path(override) / "logs" if override else Path(platformdirs.user_log_dir(APP_NAME)))


def cache_dir() -> Path:
    """Shared cache (the assembled demo model). Not moved by `LLM_TUNER_DATA_DIR`: it is large and immutable."""
    return _ensure(Path(platformdirs.user_cache_dir(APP_NAME)))


def database_path(configured_dir: str | None = None) -> Path:
    """The SQLite file: in the configured data folder (Settings), unless LLM_TUNER_DATA_DIR overrides."""
    if configured_dir and not os.environ.get("LLM_TUNER_DATA_DIR"):
        return _ensure(Path(configured_dir).expanduser()) / "llm-tuner.sqlite"
    return data_dir() / "llm-tuner.sqlite"
