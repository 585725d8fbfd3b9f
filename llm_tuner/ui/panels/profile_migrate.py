"""The Profile tab's build banner: the open profile was saved with another llama-server build (or GPU driver),
and the flags that build renamed or removed, offered as a migration the user reviews and accepts.

`check(saved)` compares the version's build with the one its program is now, off the GUI thread
(services.builds.check_profile); when something changed the banner says so in one line, and "Review
migration…" shows each move (old flag -> new), a choice box for an ambiguous replacement (`--draft-max` ->
`--spec-draft-n-max` or `--spec-ngram-mod-n-max`: never decided for the user; the one the profile points at is
marked), and the command line before and after. "Apply" saves the migrated settings as a new version
(`migrated` carries it and the versions). At start the banner also says in the status bar when the configured
llama-server is not the build of the last benchmark (services.builds.changed_since_last_run).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.cmdline.migrate import apply_migration, command_lines
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services import builds
from llm_tuner.store.profiles import ProfileRepository

CHOOSE = "choose…"


class MigrationBanner(QFrame):
    """Hidden until the open profile's build differs from its program's now, or its flags need moving."""

    migrated = Signal(object)  # (SavedProfile, its versions) after "Apply"

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.check_result: builds.ProfileBuildCheck | None = None
        self._seq = 0
        self.setObjectName("migrate_banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#migrate_banner { background: #fff4e0; }")
        self.headline = QLabel("")
        self.headline.setWordWrap(True)
        self.review_button = QPushButton("Review migration…")
        self.review_button.setCheckable(True)
        self.review_button.toggled.connect(self._on_review_toggled)
        top = QHBoxLayout()
        top.addWidget(self.headline, 1)
        top.addWidget(self.review_button)
        self.details = QWidget()
        dv = QVBoxLayout(self.details)
        dv.setContentsMargins(0, 0, 0, 0)
        self.moves_form = QFormLayout()
        dv.addLayout(self.moves_form)
        self.diff_view = QPlainTextEdit()
        self.diff_view.setObjectName("migrate_diff")
        self.diff_view.setReadOnly(True)
        self.diff_view.setFixedHeight(90)
        dv.addWidget(self.diff_view)
        self.apply_button = QPushButton("Apply: save as a new version")
        self.apply_button.clicked.connect(self._on_apply_clicked)
        self.result_label = QLabel("")
        self.result_label.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.apply_button)
        row.addWidget(self.result_label, 1)
        dv.addLayout(row)
        self.details.hide()
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.details)
        self.choice_boxes: dict[str, QComboBox] = {}
        self.hide()
        self._say_changed_since_last_run()

    # -- checking --------------------------------------------------------------------------------
    def _say_changed_since_last_run(self) -> None:
        engine, settings = self.ctx.engine, self.ctx.settings
        job = BackgroundJob(
            lambda _ctl: builds.changed_since_last_run(engine, settings),
            what="Comparing llama-server with the build of the last benchmark",
        )
        job.succeeded.connect(self._on_changed_checked)
        job.start()

    def _on_changed_checked(self, line) -> None:
        if line:
            self.ctx.state.workspace.post_status(line)

    def check(self, saved) -> None:
        """Compare the version `saved` with its program's build now (background); the banner shows the
        answer."""
        self._seq += 1
        seq = self._seq
        engine, settings = self.ctx.engine, self.ctx.settings
        job = BackgroundJob(
            lambda _ctl: (seq, builds.check_profile(engine, saved, settings)),
            what=f"Checking {saved.name}'s llama-server build",
        )
        job.succeeded.connect(self._on_checked)
        job.start()
        self._check_job = job

    def _on_checked(self, result) -> None:
        seq, check = result
        if seq != self._seq:
            return  # another profile was opened meanwhile
        self.show_check(check)

    def show_check(self, check: builds.ProfileBuildCheck) -> None:
        self.check_result = check
        headline = check.headline
        self.review_button.setChecked(False)
        if headline is None:
            self.hide()
            return
        self.headline.setText(headline)
        self.review_button.setVisible(bool(check.migration))
        self._fill_moves(check)
        self.result_label.setText("")
        self.show()

    def _fill_moves(self, check: builds.ProfileBuildCheck) -> None:
        while self.moves_form.rowCount():
            self.moves_form.removeRow(0)
        self.choice_boxes = {}
        for move in check.migration.moves:
            if move.ambiguous:
                box = QComboBox()
                box.addItem(CHOOSE, None)
                for c in move.choices:
                    box.addItem(
                        f"{c} {' '.join(move.tokens[1:])}".strip()
                        + ("  (the profile points here)" if c == move.suggested else ""),
                        c,
                    )
                box.currentIndexChanged.connect(self._on_choice_changed)
                self.choice_boxes[move.old] = box
                self.moves_form.addRow(QLabel(" ".join(move.tokens) + "  ->"), box)
            else:
                label = QLabel(move.text())
                label.setToolTip(move.reason)
                self.moves_form.addRow(QLabel("•"), label)
        for note in check.migration.notes:
            self.moves_form.addRow(QLabel("note"), QLabel(note))
        self._show_diff()

    def choices(self) -> dict[str, str]:
        return {old: box.currentData() for old, box in self.choice_boxes.items() if box.currentData()}

    def _show_diff(self) -> None:
        check = self.check_result
        if check is None or check.new_catalog is None or not check.migration:
            self.diff_view.setPlainText("")
            return
        migrated, undone = apply_migration(
            check.saved.profile, check.migration, check.new_catalog, self.choices()
        )
        before, after = command_lines(check.saved.profile, migrated, check.new_catalog)
        text = f"- {before}\n+ {after}"
        if undone:
            text += "\n(left as they are until chosen: " + ", ".join(m.old for m in undone) + ")"
        self.diff_view.setPlainText(text)

    def _on_choice_changed(self, _index: int) -> None:
        self._show_diff()

    def _on_review_toggled(self, on: bool) -> None:
        self.details.setVisible(on)

    # -- applying --------------------------------------------------------------------------------
    def apply(self) -> None:
        """Save the migrated settings (with the choices made) as a new version, in the background."""
        check = self.check_result
        if check is None or not check.migration:
            return
        engine, settings, choices = self.ctx.engine, self.ctx.settings, self.choices()

        def work(_ctl):
            saved, undone = builds.migrate_profile(engine, check, choices, settings)
            versions = ProfileRepository(engine).versions(check.saved.name) if saved is not None else []
            return saved, versions, undone

        self.apply_button.setEnabled(False)
        job = BackgroundJob(work, what=f"Migrating {check.saved.name} to this build")
        job.succeeded.connect(self._on_applied)
        job.finished.connect(lambda: self.apply_button.setEnabled(True))
        job.start()
        self._apply_job = job

    def _on_apply_clicked(self) -> None:
        self.apply()

    def _on_applied(self, result) -> None:
        saved, versions, undone = result
        if saved is None:
            self.result_label.setText("Nothing was saved: make the choices above first.")
            return
        left = f"; still to choose: {', '.join(m.old for m in undone)}" if undone else ""
        self.ctx.state.workspace.post_status(
            f"Migrated {saved.name}: saved as version {saved.version}{left}."
        )
        self.migrated.emit((saved, versions))  # the panel opens the new version, which checks it again
