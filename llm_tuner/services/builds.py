"""Saved profiles and the llama-server build they were saved with: record it, notice a new one, migrate the
flags.

A profile version records the build stamp of the llama-server it is meant for (its own program, else the
configured one) and that build's `--help` text (kept once per text in the store), so when the build changes
the flags the old `--help` knew can be compared with the new one's (core.cmdline.migrate). A version saved
before builds were recorded takes the build of its newest run. `check_profile` says what changed and which
flags move; `migrate_profile` saves the migrated settings as a new version with the current build;
`changed_since_last_run` is the one line the window says when the chosen llama-server is not the build of the
last run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_tuner.core.build import BuildStamp, build_changes
from llm_tuner.core.cmdline import FlagCatalog, parse_help
from llm_tuner.core.cmdline.migrate import FlagMove, Migration, apply_migration, plan_migration
from llm_tuner.core.profile import LaunchProfile, SavedProfile
from llm_tuner.core.settings import Settings
from llm_tuner.services import binaries
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository


def profile_program(profile: LaunchProfile, settings: Settings | None = None) -> Path | None:
    """The llama-server a profile runs: its own program once the user confirmed it, else the configured one;
    None when there is none (or its own is not confirmed: nothing runs it, not even --help)."""
    if profile.binary:
        return Path(profile.binary) if binaries.is_trusted(profile.binary, settings) else None
    loc = binaries.locate(binaries.SERVER, settings)
    return loc.path if loc is not None else None


def stamp_for(
    profile: LaunchProfile, settings: Settings | None = None
) -> tuple[BuildStamp | None, str | None]:
    """The build stamp of the program a profile runs, and that build's --help text; (None, None) when
    unknown."""
    path = profile_program(profile, settings)
    stamp = binaries.build_stamp(path, settings) if path is not None else None
    if stamp is None or path is None:
        return None, None
    ident = binaries.build_identity(path)
    return stamp, binaries.build_help_text(ident, path)


def save_profile(
    repo: ProfileRepository,
    name: str,
    profile: LaunchProfile,
    note: str = "",
    settings: Settings | None = None,
) -> SavedProfile:
    """Save a version with the build it is meant for (ProfileRepository.save with the stamp and --help)."""
    stamp, help_text = stamp_for(profile, settings)
    return repo.save(name, profile, note, build=stamp, help_text=help_text)


def saved_build(engine: Any, saved: SavedProfile) -> BuildStamp | None:
    """The build a version was saved with, else the build of its newest run that recorded one."""
    if saved.build is not None:
        return saved.build
    runs = RunRepository(engine).list_runs(label=saved.name, with_reps=False, limit=200)
    return next(
        (r.build for r in runs if r.profile_version_id == saved.version_id and r.build is not None), None
    )


@dataclass(frozen=True)
class ProfileBuildCheck:
    """A saved version against the build it would run with now."""

    saved: SavedProfile
    saved_build: BuildStamp | None
    current: BuildStamp | None
    changes: tuple[
        str, ...
    ]  # in words ('llama-server build 1a2b3c4d -> 5e6f7a8b', 'GPU driver ...'); () same
    migration: Migration = field(default_factory=Migration)
    new_catalog: FlagCatalog | None = None
    old_help_kept: bool = False

    @property
    def headline(self) -> str | None:
        """The banner's first line, or None when nothing changed and nothing moves."""
        if not self.changes and not self.migration:
            return None
        parts = []
        if self.changes:
            parts.append(
                f"{self.saved.name} v{self.saved.version} was saved with another build: "
                + "; ".join(self.changes)
                + "."
            )
        if self.migration:
            n_amb = len(self.migration.ambiguous)
            parts.append(
                f"{len(self.migration.moves)} flag(s) this build renamed or removed"
                + (f", {n_amb} with a choice to make" if n_amb else "")
                + ": review the migration."
            )
        elif self.changes:
            parts.append("Its flags are all accepted; speeds may have moved: re-measure it (Benchmarks).")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.saved.name,
            "version": self.saved.version,
            "saved_build": self.saved_build.model_dump(mode="json") if self.saved_build else None,
            "current_build": self.current.model_dump(mode="json") if self.current else None,
            "changes": list(self.changes),
            "old_help_kept": self.old_help_kept,
            "moves": [move_json(m) for m in self.migration.moves],
            "notes": list(self.migration.notes),
        }


def move_json(m: FlagMove) -> dict[str, Any]:
    return {
        "flag": m.old,
        "env": m.env or None,  # the variable moved (LLAMA_ARG_*), None for a flag on the command line
        "tokens": list(m.tokens),
        "choices": list(m.choices),
        "fix": list(m.fix),
        "ambiguous": m.ambiguous,
        "suggested": m.suggested,
        "reason": m.reason,
        "text": m.text(),
    }


def check_profile(engine: Any, saved: SavedProfile, settings: Settings | None = None) -> ProfileBuildCheck:
    """Compare a saved version's build with the one its program is now, and plan the flags' migration (with
    the old --help when it was kept, else from the new --help's own words)."""
    old_build = saved_build(engine, saved)
    current, help_text = stamp_for(saved.profile, settings)
    if help_text is None:
        return ProfileBuildCheck(saved, old_build, current, tuple(build_changes(old_build, current)))
    new = parse_help(help_text)
    old_text = ProfileRepository(engine).help_text(old_build.help_sha256) if old_build is not None else None
    old = parse_help(old_text) if old_text else None
    return ProfileBuildCheck(
        saved,
        old_build,
        current,
        tuple(build_changes(old_build, current)),
        plan_migration(saved.profile, new, old),
        new,
        old_text is not None,
    )


def migrate_profile(
    engine: Any,
    check: ProfileBuildCheck,
    choices: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> tuple[SavedProfile | None, tuple[FlagMove, ...]]:
    """Save the migrated settings as a new version (with the current build) and return it with the moves left
    undone (ambiguous ones without a choice); (None, undone) when nothing could be applied."""
    if check.new_catalog is None or not check.migration:
        return None, ()
    migrated, undone = apply_migration(check.saved.profile, check.migration, check.new_catalog, choices)
    if migrated == check.saved.profile:
        return None, undone
    done = [m.old for m in check.migration.moves if m not in undone]
    note = "migrated to this build: " + ", ".join(done)
    saved = save_profile(ProfileRepository(engine), check.saved.name, migrated, note[:500], settings)
    return saved, undone


def changed_since_last_run(engine: Any, settings: Settings | None = None) -> str | None:
    """One line when the configured llama-server (or the GPU driver) is not the build of the newest run; None
    when it is, or when either is unknown."""
    last = RunRepository(engine).latest_build()
    if last is None:
        return None
    now = binaries.build_stamp(None, settings)
    changes = build_changes(last, now)
    if not changes:
        return None
    return (
        "Since the last benchmark: "
        + "; ".join(changes)
        + ". Speeds measured before may not hold: re-measure, or compare the builds (bench --vs-binary)."
    )
