"""Load and save `Settings` as JSON in the config folder. A broken file is kept aside, never lost.

The history database's path lives here too: it depends on a setting (the data folder), and paths.py stays a
leaf.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

from llm_tuner.core.settings import Settings
from llm_tuner.core.units import first_line
from llm_tuner.services.paths import DATA_DIR_ENV, config_dir, data_dir, data_dir_override, readable_by_others

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
    app use one history), unless LLM_TUNER_DATA_DIR overrides. The chosen folder is made when Settings saves
    it (`make_data_folder`), never here: a folder that is gone (a drive not connected) raises
    DataFolderUnusable instead of starting an empty history on the bare mount point."""
    if configured_dir is None and not data_dir_override():
        configured_dir = load_settings().data_dir
    if configured_dir and not data_dir_override():
        folder = Path(configured_dir).expanduser()
        usable, why = _folder_problem(folder)
        if not usable:
            raise DataFolderUnusable(f"the data folder chosen in Settings cannot be used: {why}")
        return folder / DATABASE_NAME
    return default_database_path()


def _folder_problem(folder: Path) -> tuple[bool, str]:
    """Whether an existing folder can hold the history, and why not (one sentence)."""
    if not folder.exists():
        return False, f"{folder} does not exist (is its drive connected?)."
    if not folder.is_dir():
        return False, f"{folder} is a file, not a folder."
    if not os.access(folder, os.W_OK | os.X_OK):
        return False, f"{folder} cannot be written by this user."
    return True, ""


def make_data_folder(text: str) -> None:
    """Create the data folder a user just chose in Settings (its parents too); an empty text is the app's own
    folder. Raises OSError when it cannot be made."""
    if text.strip():
        Path(text.strip()).expanduser().mkdir(parents=True, exist_ok=True)


def default_database_path() -> Path:
    """The history's file in the app's own data folder (where an unusable chosen folder falls back)."""
    return data_dir() / DATABASE_NAME


def data_folder_note(text: str, in_use: Path | None = None, saved: str | None = None) -> tuple[bool, str]:
    """What Settings says under the data folder as typed: (usable, note). An empty text is the app's own
    folder; a folder that does not exist yet is usable when it can be created (Save makes it); other users
    being able to read it is said (the history may hold a saved profile's API key), and whether a history is
    there already (`in_use`: the folder of the history open now). `saved`: the folder in the settings now
    (gone since: its drive is not connected, said as such). LLM_TUNER_DATA_DIR, when set, overrides the
    field: said first."""
    override = data_dir_override()
    env = f"{DATA_DIR_ENV} is set ({override}): it overrides this field. " if override else ""
    if not text.strip():
        return True, env.strip()
    folder = Path(text.strip()).expanduser()
    if not folder.is_absolute():
        return False, env + "Give a full path (it would be read from wherever the app was started)."
    if not folder.exists() and saved and folder == Path(saved).expanduser():  # the saved one, gone since
        return False, env + _folder_problem(folder)[1] + " This session uses the app's own folder."
    if not folder.exists():
        parent = next((p for p in folder.parents if p.exists()), None)
        if parent is None or not parent.is_dir():
            return False, env + f"{folder} cannot be created: {parent} is a file, not a folder."
        if not os.access(parent, os.W_OK | os.X_OK):
            return False, env + f"{folder} does not exist and cannot be created ({parent} is not writable)."
        return True, env + ("Does not exist yet: Save creates it, and the next start begins a new, empty "
                            "history there.")
    usable, why = _folder_problem(folder)
    if not usable:
        return False, env + why
    notes = []
    if in_use is not None and folder.resolve() == Path(in_use).expanduser().resolve():
        notes.append("This is the history in use now.")
    elif (folder / DATABASE_NAME).is_file():
        notes.append("Holds an llm-tuner history: the app uses it from the next start (the current one is "
                     "not moved).")
    else:
        notes.append("A new, empty history starts there at the next start (the current one is not moved).")
    mode = folder.stat().st_mode
    not_ours = hasattr(os, "getuid") and folder.stat().st_uid != os.getuid()
    if mode & stat.S_ISVTX or mode & stat.S_IWOTH or not_ours:
        notes.append("Others can write in or own this folder: choose a folder of your own inside it.")
    elif readable_by_others(folder):
        notes.append(f"Other users can read this folder, and saved profiles may hold API keys: consider "
                     f"chmod 700 {folder}.")
    return True, env + " ".join(notes)
