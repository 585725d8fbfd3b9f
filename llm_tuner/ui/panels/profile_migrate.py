"""The Profile tab's build banner: the open profile was saved with another llama-server build (or GPU driver),
and the flags that build renamed or removed, offered as a migration the user reviews and accepts.

`check(saved)` compares the version's build with the one its program is now, off the GUI thread
(services.builds.check_profile); when something changed the banner says so in one line, and "Review
migration…" shows each move (old flag -> new), a choice box for an ambiguous replacement (`--draft-max` ->
`--spec-draft-n-max` or `--spec-ngram-mod-n-max`: never decided for the user; the one the profile points at is
marked), and the command line before and after. "Apply" saves the migrated settings as a new version
(`migrated` carries it and the versions). At start the banner also says in the status bar when the configured
llama-server is not the build of the last benchmark (services.builds.changed_since_last_run). Widgets only:
the check, the rows, the choices, the diff and Apply are state.profile_migrate.MigrationState's.
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

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.state.profile_migrate import CHOOSE, MigrationState


class MigrationBanner(QFrame):
    """Hidden until the open profile's build differs from its program's now, or its flags need moving."""

    migrated = Signal(object)  # (SavedProfile, its versions) after "Apply"

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.state = MigrationState(ctx.engine, ctx.state.workspace, settings=lambda: ctx.settings,
                                    run=self._run)
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
        self.state.add_callback(self._on_state_changed)
        self.state.say_changed_since_last_run()

    @property
    def check_result(self):
        return self.state.check_result

    def _run(self, work, done, failed) -> None:
        """The state's reads and writes as jobs; a failure also goes to the app's error surface."""
        job = BackgroundJob(lambda _ctl: work(), self, what=self.state.jobs.doing)
        job.succeeded.connect(done)
        job.failed.connect(failed)
        job.start()
        self._job = job

    def _on_state_changed(self, what: str, *details) -> None:
        st = self.state
        if what == "shown":
            self.review_button.setChecked(False)
            self.setVisible(st.shown)
        elif what == "headline":
            self.headline.setText(st.headline)
        elif what == "reviewable":
            self.review_button.setVisible(st.reviewable)
        elif what == "moves":
            self.review_button.setChecked(False)
            self._fill_moves()
        elif what == "diff":
            self.diff_view.setPlainText(st.diff)
        elif what == "result":
            self.result_label.setText(st.result)
        elif what == "applying":
            self.apply_button.setEnabled(not st.applying)
        elif what == "migrated":
            self.migrated.emit(details[0])  # the panel opens the new version, which checks it again

    # -- checking --------------------------------------------------------------------------------
    def check(self, saved) -> None:
        """Compare the version `saved` with its program's build now (background); the banner shows the
        answer."""
        self.state.check(saved)

    def show_check(self, check) -> None:
        self.state.show_check(check)

    def _fill_moves(self) -> None:
        while self.moves_form.rowCount():
            self.moves_form.removeRow(0)
        self.choice_boxes = {}
        for row in self.state.rows:
            if row.kind == "choice":
                box = QComboBox()
                box.addItem(CHOOSE, None)
                for text, choice in row.options:
                    box.addItem(text, choice)
                box.currentIndexChanged.connect(
                    lambda _i, old=row.old, b=box: self.state.choose(old, b.currentData()))
                self.choice_boxes[row.old] = box
                self.moves_form.addRow(QLabel(row.label), box)
            else:
                label = QLabel(row.text)
                label.setToolTip(row.tip)
                self.moves_form.addRow(QLabel(row.label), label)

    def choices(self) -> dict[str, str]:
        return dict(self.state.choices)

    def _on_review_toggled(self, on: bool) -> None:
        self.details.setVisible(on)

    # -- applying --------------------------------------------------------------------------------
    def apply(self) -> None:
        """Save the migrated settings (with the choices made) as a new version, in the background."""
        self.state.apply()

    def _on_apply_clicked(self) -> None:
        self.apply()
