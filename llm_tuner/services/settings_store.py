"""Load and save `Settings` as JSON in the config folder. A broken file is kept aside, never lost.

The history database's path lives here too: it depends on a setting (the data folder), and paths.py stays a
leaf.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from llm_tuner.core.settings import Settings
from llm_tuner.core.units import first_line
from llm_tuner.services.paths import config_dir, data_dir, readable_by_others

log = logging.getLogger(__name__)


class SettingsUnreadable(ValueError):
    """The settings file could not be read: it was kept aside and the defaults stand in."""


_set_aside: list[SettingsUnreadable] = []  # this process's, until the window says them (take_set_aside)


def take_set_aside() -> list[SettingsUnreadable]:
    """The settings files found unreadable (and kept aside) since the last call: the window says them, so a
    user whose folders and binary path are suddenly gone knows why and where the old file is."""
    out = list(_set_aside)
    _set_aside.clear()
    return out


def settings_path() -> Path:
    return config_dir() / "settings.json"


def load_settings(path: Path | None = None) -> Settings:
    """Read settings; a missing file gives defaults, an unreadable one is renamed to *.broken and reported."""
    path = path or settings_path()
    if not path.exists():
        return Settings()
    try:
        return Settings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        broken = path.with_suffix(".json.broken")
        log.warning("settings file %s is unreadable (%s); kept as %s, using defaults", path, exc, broken)
        why = first_line(exc)
        try:
            path.replace(broken)
            kept = f"kept as {broken}"
        except OSError as move_exc:
            kept = f"left in place ({move_exc.strerror or move_exc})"
        _set_aside.append(SettingsUnreadable(f"the settings file {path} could not be read ({why}); {kept}; "
                                             "default settings are in use"))
        return Settings()


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write settings atomically (temp file + rename)."""
    path = path or settings_path()
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private from its first byte
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(settings.model_dump_json(indent=2))
    os.chmod(tmp, 0o600)  # an older tmp file kept its mode
    tmp.replace(path)


DATABASE_NAME = "llm-tuner.sqlite"


class DataFolderUnusable(OSError):
    """The data folder chosen in Settings cannot hold the history (gone, not writable, a file, an unmounted
    drive); `str()` names it and why."""


def database_path(configured_dir: str | None = None) -> Path:
    """The SQLite file: in the configured data folder (Settings: read here when not given, so the CLI and the
    app use one history), unless LLM_TUNER_DATA_DIR overrides. Raises DataFolderUnusable when the chosen
    folder cannot be created or written."""
    if configured_dir is None and not os.environ.get("LLM_TUNER_DATA_DIR"):
        configured_dir = load_settings().data_dir
    # the user's folder: created, never changed
    if configured_dir and not os.environ.get("LLM_TUNER_DATA_DIR"):
        folder = Path(configured_dir).expanduser()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataFolderUnusable(f"the data folder {folder} (chosen in Settings) cannot be created "
                                     f"({exc.strerror or first_line(exc)})") from exc
        if not os.access(folder, os.W_OK | os.X_OK):
            raise DataFolderUnusable(f"the data folder {folder} (chosen in Settings) cannot be written by "
                                     "this user")
        return folder / DATABASE_NAME
    return data_dir() / DATABASE_NAME


def default_database_path() -> Path:
    """The history's file in the app's own data folder (where an unusable chosen folder falls back)."""
    return data_dir() / DATABASE_NAME


def data_folder_note(text: str) -> tuple[bool, str]:
    """What Settings says under the data folder as typed: (usable, note). An empty text is the app's own
    folder; a folder that does not exist yet is usable when it can be created; other users being able to read
    it is said (the history may hold a saved profile's API key), and whether a history is there already (the
    current one is not moved)."""
    if not text.strip():
        return True, ""
    folder = Path(text.strip()).expanduser()
    if not folder.is_absolute():
        return False, "Give a full path (it would be read from wherever the app was started)."
    if folder.exists() and not folder.is_dir():
        return False, f"{folder} is a file, not a folder."
    if not folder.exists():
        parent = next((p for p in folder.parents if p.exists()), None)
        if parent is None or not parent.is_dir():
            return False, f"{folder} cannot be created: {parent} is a file, not a folder."
        if not os.access(parent, os.W_OK | os.X_OK):
            return False, f"{folder} does not exist and cannot be created here ({parent} is not writable)."
        return True, "Does not exist yet: it is created at the next start, with a new, empty history."
    if not os.access(folder, os.W_OK | os.X_OK):
        return False, f"{folder} cannot be written by this user."
    notes = []
    if (folder / DATABASE_NAME).is_file():
        notes.append("Holds an llm-tuner history: the app uses it from the next start (the current one is "
                     "not moved).")
    else:
        notes.append("A new, empty history starts there at the next start (the current one is not moved).")
    if readable_by_others(folder):
        notes.append(f"Other users can read this folder, and saved profiles may hold API keys: consider "
                     f"chmod 700 {folder}.")
    return True, " ".join(notes)
