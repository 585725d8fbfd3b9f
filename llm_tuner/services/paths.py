"""Where llm-tuner keeps its files (platformdirs), with the overrides tests and scripts use.

Folders the app creates are 0700 and its files 0600 (a saved profile may hold an API key);
`tighten_app_files()` brings existing ones of ours there at start. A folder the user chose is never
changed: `readable_by_others()` says when it should be.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

APP_NAME = "llm-tuner"
DATA_DIR_ENV = "LLM_TUNER_DATA_DIR"  # moves the data, config and log folders (tests, scripts)


def data_dir_override() -> str | None:
    """The folder DATA_DIR_ENV names, when it is set (it overrides the data folder chosen in Settings)."""
    return os.environ.get(DATA_DIR_ENV) or None
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600


def _ensure(path: Path) -> Path:
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    return path


def private_file(path: Path | str) -> None:
    """Make one of our files readable by its owner only (no error if it is gone or not ours)."""
    try:
        os.chmod(path, PRIVATE_FILE)
    except OSError:
        pass


def readable_by_others(folder: Path | str) -> bool:
    """True when users other than the owner can list or enter `folder` (group/other r or x bits)."""
    try:
        return bool(os.stat(folder).st_mode & (stat.S_IRWXG | stat.S_IRWXO) & ~(stat.S_IWGRP | stat.S_IWOTH))
    except OSError:
        return False


def tighten_app_files() -> list[str]:
    """Our own folders (data, config, logs; not a user-chosen data folder, not the shared model cache) to 0700
    and the files in them to 0600. Returns one note per change, for the log."""
    notes: list[str] = []
    for folder in {data_dir(), config_dir(), log_dir()}:
        files = [(p, PRIVATE_FILE) for p in folder.iterdir() if p.is_file() and not p.is_symlink()]
        for path, want in [(folder, PRIVATE_DIR), *files]:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
                if mode & ~want & 0o077:
                    os.chmod(path, mode & ~0o077 if want == PRIVATE_DIR else want)
                    notes.append(f"{path}: mode {mode:o} -> {stat.S_IMODE(path.stat().st_mode):o} "
                                 "(other users could read it)")
            except OSError as exc:
                notes.append(f"{path}: could not restrict its mode ({exc.strerror or exc})")
    return notes


def data_dir() -> Path:
    """The data folder (the SQLite history lives here). `LLM_TUNER_DATA_DIR` overrides it."""
    override = data_dir_override()
    return _ensure(Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME)))


def config_dir() -> Path:
    """The config folder (settings.json). Follows `LLM_TUNER_DATA_DIR` when set, so tests stay isolated."""
    override = data_dir_override()
    return _ensure(Path(override) / "config" if override else Path(platformdirs.user_config_dir(APP_NAME)))


def log_dir() -> Path:
    """The log folder (app log, unhandled exceptions, server logs)."""
    override = data_dir_override()
    return _ensure(Path(override) / "logs" if override else Path(platformdirs.user_log_dir(APP_NAME)))


def cache_dir() -> Path:
    """Shared cache (the assembled demo model). Not moved by `LLM_TUNER_DATA_DIR`: it is large and
    immutable."""
    return _ensure(Path(platformdirs.user_cache_dir(APP_NAME)))

