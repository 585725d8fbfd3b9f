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
from llm_tuner.services.paths import config_dir, data_dir

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


def database_path(configured_dir: str | None = None) -> Path:
    """The SQLite file: in the configured data folder (Settings: read here when not given, so the CLI and the
    app use one history), unless LLM_TUNER_DATA_DIR overrides."""
    if configured_dir is None and not os.environ.get("LLM_TUNER_DATA_DIR"):
        configured_dir = load_settings().data_dir
    # the user's folder: created, never changed
    if configured_dir and not os.environ.get("LLM_TUNER_DATA_DIR"):
        folder = Path(configured_dir).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        return folder / "llm-tuner.sqlite"
    return data_dir() / "llm-tuner.sqlite"
