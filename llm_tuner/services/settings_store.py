"""Load and save `Settings` as JSON in the config folder. A broken file is kept aside, never lost."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from llm_tuner.core.settings import Settings
from llm_tuner.services.paths import config_dir

log = logging.getLogger(__name__)


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
        try:
            path.replace(broken)
        except OSError:
            pass
        return Settings()


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write settings atomically (temp file + rename)."""
    path = path or settings_path()
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(settings.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(path)
