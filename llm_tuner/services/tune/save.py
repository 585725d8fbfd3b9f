"""Save a tune's winner as a new version of a profile (what "Save as new profile version" and
`llm-tuner tune --save-as NAME` do)."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from llm_tuner.core.cmdline import FlagCatalog, import_command
from llm_tuner.core.profile import LaunchProfile, SavedProfile
from llm_tuner.core.tune import TuneResult, TuneSpec
from llm_tuner.store.profiles import ProfileRepository


def winner_profile(result: TuneResult, spec: TuneSpec, catalog: FlagCatalog | None = None) -> LaunchProfile:
    """The winner's settings as a LaunchProfile: its argv read back (core.cmdline.import_command) with the
    tune's environment and program."""
    imported = import_command(list(result.winner_argv), catalog, env=dict(spec.base_env)).profile
    return imported.model_copy(update={"binary": spec.binary}) if spec.binary else imported


def save_winner(engine: Engine, name: str, result: TuneResult, spec: TuneSpec,
                catalog: FlagCatalog | None = None) -> SavedProfile:
    """Append the winner as a new version of profile `name` (created when new); returns the SavedProfile."""
    note = f"tune {result.tune_number or result.tune_id}: {result.verdict}" + (
        "; " + ", ".join(f"{c['flag']} {c.get('a')} -> {c.get('b')}" for c in result.changed_flags)
        if result.winner_argv != result.baseline_argv else "; baseline kept")
    return ProfileRepository(engine).save(name, winner_profile(result, spec, catalog), note=note[:500])
