"""The Profile tab's build banner as plain state: the open profile was saved with another llama-server build
(or GPU driver), and the flags that build renamed or removed, offered as a migration the user reviews and
accepts.

`check(saved)` compares the version's build with the one its program is now (services.builds.check_profile,
through the `Run` given); an answer about a profile no longer open is dropped. When something changed, the
headline says so in one line; the moves are rows (`move_rows`): each rename or removal in words, a choice
for an ambiguous replacement (`--draft-max` -> `--spec-draft-n-max` or `--spec-ngram-mod-n-max`: never
decided for the user; the one the profile points at is marked), and notes; `diff` is the command line
before and after with the choices made. `apply` saves the migrated settings as a new version (through
`run`) and says "migrated" with (the new version, its versions). `say_changed_since_last_run` puts a status
line through the workspace when the configured llama-server is not the build of the last benchmark.

Declared properties (said once per change): "shown", "headline", "reviewable" (there are moves to review),
"moves" (the check changed: the rows again), "diff", "result" (what Apply said), "applying". `jobs.doing`
names the work handed to `run` last, in the user's words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.cmdline.migrate import apply_migration, command_lines
from llm_tuner.core.profile import SavedProfile
from llm_tuner.core.settings import Settings
from llm_tuner.services import builds
from llm_tuner.state.callbacks import Declared, Jobs, Observable, Run, run_now
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.profiles import ProfileRepository

CHOOSE = "choose…"
POINTS_HERE = "  (the profile points here)"
NOTHING_SAVED = "Nothing was saved: make the choices above first."


@dataclass(frozen=True)
class MoveRow:
    """One row of the review: a move in words (`tip`: why), a choice to make (`options`: (text, the new
    spelling), after CHOOSE), or a note."""

    kind: str  # "move", "choice" or "note"
    label: str
    text: str = ""
    tip: str = ""
    old: str = ""  # a choice's old spelling (the key of `choices`)
    options: tuple[tuple[str, str], ...] = ()


def move_rows(check: builds.ProfileBuildCheck) -> tuple[MoveRow, ...]:
    rows: list[MoveRow] = []
    for move in check.migration.moves:
        if move.ambiguous:
            rest = " ".join(move.tokens[1:])
            options = tuple(
                (f"{c} {rest}".strip() + (POINTS_HERE if c == move.suggested else ""), c)
                for c in move.choices
            )
            rows.append(MoveRow("choice", " ".join(move.tokens) + "  ->", old=move.old, options=options))
        else:
            rows.append(MoveRow("move", "•", move.text(), move.reason))
    rows += [MoveRow("note", "note", note) for note in check.migration.notes]
    return tuple(rows)


class MigrationState(Observable):
    """The build banner: hidden until the open profile's build differs from its program's now, or its flags
    need moving."""

    shown = Declared[bool](False, topic="shown")
    headline = Declared[str]("", topic="headline")
    reviewable = Declared[bool](False, topic="reviewable")
    diff = Declared[str]("", topic="diff")
    result = Declared[str]("", topic="result")
    applying = Declared[bool](False, topic="applying")

    def __init__(
        self,
        engine: Any,
        workspace: Workspace,
        *,
        settings: Callable[[], Settings] = Settings,
        run: Run = run_now,
    ) -> None:
        super().__init__()
        self.engine = engine  # the store's engine (the profiles, the runs' builds)
        self.workspace = workspace
        self.settings = settings
        self.jobs = Jobs(run)  # the checks and the migrations, with their words
        self.check_result: builds.ProfileBuildCheck | None = None
        self.choices: dict[str, str] = {}  # old spelling -> the new one chosen
        self._seq = 0

    def say_changed_since_last_run(self) -> None:
        """A status line when the configured llama-server is not the build of the last benchmark."""
        engine, settings = self.engine, self.settings()
        self.jobs(
            "Comparing llama-server with the build of the last benchmark",
            lambda: builds.changed_since_last_run(engine, settings),
            self._changed_checked,
            lambda exc: None,
        )  # a status line only: the view's job reports a failure

    def _changed_checked(self, line: str | None) -> None:
        if line:
            self.workspace.post_status(line)

    # -- checking ------------------------------------------------------------------------------------------
    def check(self, saved: SavedProfile) -> None:
        """Compare the version `saved` with its program's build now (through `run`)."""
        self._seq += 1
        seq = self._seq
        engine, settings = self.engine, self.settings()
        self.jobs(
            f"Checking {saved.name}'s llama-server build",
            lambda: builds.check_profile(engine, saved, settings),
            lambda check: self._checked(seq, check),
            lambda exc: self._check_failed(seq, exc),
        )

    def _checked(self, seq: int, check: builds.ProfileBuildCheck) -> None:
        if seq == self._seq:  # else another profile was opened meanwhile
            self.show_check(check)

    def _check_failed(self, seq: int, exc: BaseException) -> None:
        if seq == self._seq:
            self.shown = False
            self.result = f"The build could not be checked: {exc}"

    def show_check(self, check: builds.ProfileBuildCheck) -> None:
        self.check_result = check
        self.choices = {}
        headline = check.headline
        if headline is None:
            self.shown = False
            return
        self.headline = headline
        self.reviewable = bool(check.migration)
        self.result = ""
        self.notify("moves")
        self._show_diff()
        self.shown = True

    @property
    def rows(self) -> tuple[MoveRow, ...]:
        return move_rows(self.check_result) if self.check_result is not None else ()

    def choose(self, old: str, new: str | None) -> None:
        """The user's choice for an ambiguous move (None: not chosen)."""
        if new:
            self.choices[old] = new
        else:
            self.choices.pop(old, None)
        self._show_diff()

    def _show_diff(self) -> None:
        check = self.check_result
        if check is None or check.new_catalog is None or not check.migration:
            self.diff = ""
            return
        migrated, undone = apply_migration(
            check.saved.profile, check.migration, check.new_catalog, self.choices
        )
        before, after = command_lines(check.saved.profile, migrated, check.new_catalog)
        text = f"- {before}\n+ {after}"
        if undone:
            text += "\n(left as they are until chosen: " + ", ".join(m.old for m in undone) + ")"
        self.diff = text

    # -- applying ------------------------------------------------------------------------------------------
    def apply(self) -> None:
        """Save the migrated settings (with the choices made) as a new version (through `run`)."""
        check = self.check_result
        if check is None or not check.migration:
            return
        engine, settings, choices = self.engine, self.settings(), dict(self.choices)

        def work() -> tuple[SavedProfile | None, list[SavedProfile], tuple[Any, ...]]:
            saved, undone = builds.migrate_profile(engine, check, choices, settings)
            versions = ProfileRepository(engine).versions(check.saved.name) if saved is not None else []
            return saved, versions, undone

        self.applying = True
        self.jobs(f"Migrating {check.saved.name} to this build", work, self._applied, self._apply_failed)

    def _apply_failed(self, exc: BaseException) -> None:
        self.applying = False
        self.result = f"Not migrated: {exc}"

    def _applied(self, result: tuple[SavedProfile | None, list[SavedProfile], tuple[Any, ...]]) -> None:
        self.applying = False
        saved, versions, undone = result
        if saved is None:
            self.result = NOTHING_SAVED
            return
        left = f"; still to choose: {', '.join(m.old for m in undone)}" if undone else ""
        self.workspace.post_status(f"Migrated {saved.name}: saved as version {saved.version}{left}.")
        self.notify("migrated", (saved, versions))  # the panel opens the new version, which checks it again
