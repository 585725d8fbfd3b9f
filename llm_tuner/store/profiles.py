"""Named launch profiles with immutable versions (tables + repository).

Each save appends a version; nothing is edited in place, so a benchmark run that points at a
`version_id` always finds the exact settings it ran with. Deleting a name hides it (soft delete) and
keeps its versions readable for the run history. Rows never leave this module: the repository
returns frozen `core.profile.SavedProfile` values.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from llm_tuner.core.build import BuildStamp
from llm_tuner.core.profile import LaunchProfile, SavedProfile, unique_name
from llm_tuner.store.base import Base
from llm_tuner.store.db import session_scope


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class ProfileRow(Base):
    __tablename__ = "profiles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class ProfileVersionRow(Base):
    __tablename__ = "profile_versions"
    __table_args__ = (UniqueConstraint("profile_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    profile_id: Mapped[int] = mapped_column(ForeignKey("profiles.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)
    data: Mapped[str] = mapped_column(Text)  # LaunchProfile JSON, API key included (local file)
    note: Mapped[str] = mapped_column(String(500), default="")
    build_key: Mapped[str | None] = mapped_column(String(128), nullable=True)  # BuildStamp.key
    build_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class BuildHelpRow(Base):
    """The `--help` text of a build a profile version was saved with, once per text (keyed by its sha256, the
    BuildStamp's help_sha256): `profile migrate` compares it with the current build's to find renamed flags."""

    __tablename__ = "build_helps"

    help_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    text: Mapped[str] = mapped_column(Text)


class ProfileNameError(ValueError):
    """A name that is empty, already used, or unknown; the message says which."""


def _saved(p: ProfileRow, v: ProfileVersionRow) -> SavedProfile:
    return SavedProfile(id=p.id, name=p.name, version=v.version, version_id=v.id, created_at=v.created_at,
                        profile=LaunchProfile.model_validate_json(v.data), note=v.note,
                        build=BuildStamp(**v.build_json) if v.build_json else None)


class ProfileRepository:
    """Save, list, rename, duplicate, delete and revert named profiles. Each call is one short transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _live(session: Session, name: str) -> ProfileRow | None:
        return session.scalars(select(ProfileRow).where(ProfileRow.name == name, ProfileRow.deleted_at.is_(None))
                               ).first()

    @staticmethod
    def _check_name(name: str) -> str:
        name = (name or "").strip()
        if not name:
            raise ProfileNameError("a profile needs a name")
        return name

    @staticmethod
    def _latest_row(session: Session, profile_id: int) -> ProfileVersionRow | None:
        return session.scalars(select(ProfileVersionRow).where(ProfileVersionRow.profile_id == profile_id)
                               .order_by(ProfileVersionRow.version.desc())).first()

    # -- queries -------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """Live profile names, alphabetical."""
        with session_scope(self.engine) as s:
            return list(s.scalars(select(ProfileRow.name).where(ProfileRow.deleted_at.is_(None))
                                  .order_by(func.lower(ProfileRow.name))))

    def latest(self, name: str) -> SavedProfile | None:
        """The newest version of a live profile, or None."""
        with session_scope(self.engine) as s:
            p = self._live(s, name)
            v = self._latest_row(s, p.id) if p else None
            return _saved(p, v) if p and v else None

    def versions(self, name: str) -> list[SavedProfile]:
        """Every version of a live profile, newest first."""
        with session_scope(self.engine) as s:
            p = self._live(s, name)
            if p is None:
                return []
            rows = s.scalars(select(ProfileVersionRow).where(ProfileVersionRow.profile_id == p.id)
                             .order_by(ProfileVersionRow.version.desc()))
            return [_saved(p, v) for v in rows]

    def get_version(self, version_id: int) -> SavedProfile | None:
        """One version by id, also when its profile was deleted (runs keep pointing at it)."""
        with session_scope(self.engine) as s:
            v = s.get(ProfileVersionRow, version_id)
            p = s.get(ProfileRow, v.profile_id) if v else None
            return _saved(p, v) if p and v else None

    # -- changes -------------------------------------------------------------------------------
    def save(self, name: str, profile: LaunchProfile, note: str = "", *, build: BuildStamp | None = None,
             help_text: str | None = None) -> SavedProfile:
        """Append a version to `name` (creating the name). Saving settings equal to the newest version
        returns that version instead of adding a duplicate. `build`: the llama-server build it is saved with
        (services.binaries.build_stamp), and `help_text` that build's --help, kept once per text."""
        name = self._check_name(name)
        if build is not None and help_text:
            self.keep_help(build.help_sha256, help_text)
        data = profile.to_json()
        with session_scope(self.engine) as s:
            p = self._live(s, name)
            if p is None:
                p = ProfileRow(name=name)
                s.add(p)
                s.flush()
            last = self._latest_row(s, p.id)
            if last is not None and LaunchProfile.model_validate_json(last.data) == profile:
                return _saved(p, last)
            v = ProfileVersionRow(profile_id=p.id, version=(last.version + 1) if last else 1, data=data, note=note,
                                  build_key=build.key if build else None,
                                  build_json=build.model_dump(mode="json") if build else None)
            s.add(v)
            s.flush()
            return _saved(p, v)

    def rename(self, old: str, new: str) -> None:
        new = self._check_name(new)
        with session_scope(self.engine) as s:
            p = self._live(s, old)
            if p is None:
                raise ProfileNameError(f"no profile named {old!r}")
            if new != old and self._live(s, new) is not None:
                raise ProfileNameError(f"a profile named {new!r} exists already")
            p.name = new

    def duplicate(self, name: str, new: str) -> SavedProfile:
        """A new name whose first version has the newest settings of `name`."""
        src = self.latest(name)
        if src is None:
            raise ProfileNameError(f"no profile named {name!r}")
        with session_scope(self.engine) as s:
            if self._live(s, self._check_name(new)) is not None:
                raise ProfileNameError(f"a profile named {new!r} exists already")
        return self.save(new, src.profile, note=f"copy of {name} v{src.version}", build=src.build)

    def delete(self, name: str) -> None:
        """Hide a name; its versions stay readable by id for the run history."""
        with session_scope(self.engine) as s:
            p = self._live(s, name)
            if p is None:
                raise ProfileNameError(f"no profile named {name!r}")
            p.deleted_at = _now()

    def revert(self, name: str, version: int) -> SavedProfile:
        """Save an earlier version's settings as the newest version (history is never rewritten)."""
        old = next((v for v in self.versions(name) if v.version == version), None)
        if old is None:
            raise ProfileNameError(f"{name!r} has no version {version}")
        with session_scope(self.engine) as s:
            p = self._live(s, name)
            latest = self._latest_row(s, p.id) if p else None
            if p is None or latest is None:  # deleted since the versions were read
                raise ProfileNameError(f"{name!r} is gone")
            v = ProfileVersionRow(profile_id=p.id, version=latest.version + 1,
                                  data=old.profile.to_json(), note=f"reverted to v{version}",
                                  build_key=old.build.key if old.build else None,
                                  build_json=old.build.model_dump(mode="json") if old.build else None)
            s.add(v)
            s.flush()
            return _saved(p, v)

    def keep_help(self, help_sha256: str, text: str) -> None:
        """Keep a build's --help text (once per text)."""
        with session_scope(self.engine) as s:
            if help_sha256 and s.get(BuildHelpRow, help_sha256) is None:
                s.add(BuildHelpRow(help_sha256=help_sha256, text=text))

    def help_text(self, help_sha256: str) -> str | None:
        """A kept --help text by its sha256, or None."""
        with session_scope(self.engine) as s:
            row = s.get(BuildHelpRow, help_sha256)
            return row.text if row else None

    def unique_name(self, base: str) -> str:
        """`base`, or `base 2`, `base 3`... whichever no saved profile uses."""
        return unique_name(base, self.names())
