"""The Tune view's result: the winner against the baseline per metric (Δ, interval, verdict), the flags that
changed, the quality cost, the memory-bandwidth figure; "Save as new profile version" and "Export report".

When nothing beats the baseline beyond noise it says so plainly and what is saved is the baseline.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.tune import TuneResult
from llm_tuner.qt.tune_models import TuneComparisonModel
from llm_tuner.state.tune_result import NO_RESULT, ShownResult, result_words
from llm_tuner.ui.panels.bench_tables import make_table


class TuneResultView(QWidget):
    """A finished tune's verdict and its two actions; `save_requested(name)` is handled by the panel."""

    save_requested = Signal(str)  # profile name for the new version

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.shown = ShownResult()  # the result, its report's head and trials, what its actions said
        self.verdict_label = QLabel(NO_RESULT)
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.verdict_label.font()
        font.setBold(True)
        self.verdict_label.setFont(font)
        self.model = TuneComparisonModel(self)
        self.view, _ = make_table(self.model)
        self.details_label = QLabel()
        self.details_label.setWordWrap(True)
        self.details_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("profile name for the new version")
        self.save_button = QPushButton("Save as new profile version")
        self.save_button.clicked.connect(self._on_save_clicked)
        self.export_button = QPushButton("Export report…")
        self.export_button.clicked.connect(self._on_export_clicked)
        self.action_label = QLabel()
        self.action_label.setWordWrap(True)
        self.action_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        name_row = QHBoxLayout()
        name_row.addWidget(QLabel("Profile:"))
        name_row.addWidget(self.name_edit, 1)
        actions = QHBoxLayout()
        actions.addWidget(self.save_button)
        actions.addWidget(self.export_button)
        actions.addStretch(1)
        lay = QVBoxLayout(self)
        self.table_title = QLabel()
        self.table_title.setWordWrap(True)
        lay.addWidget(self.verdict_label)
        lay.addWidget(self.table_title)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.details_label)
        lay.addLayout(name_row)
        lay.addLayout(actions)
        lay.addWidget(self.action_label)
        # takes the table's space while it is hidden: the lines stay together at the top
        self._filler = QWidget()
        lay.addWidget(self._filler, 1)
        self.shown.add_callback(self._on_shown_changed)
        self.set_result(None)

    @property
    def result(self) -> TuneResult | None:
        return self.shown.result

    def _on_shown_changed(self, what: str, *_details) -> None:
        if what == "message":
            self.action_label.setText(self.shown.message)

    def set_result(self, result: TuneResult | None, profile_name: str = "", trials: list | None = None,
                   y_label: str = "score", objective: str = "") -> None:
        """Show `result`; `profile_name` is suggested for the new version, `objective` heads the report."""
        self.shown.show(result, profile_name, trials, y_label, objective)
        for w in (self.save_button, self.export_button, self.name_edit):
            w.setEnabled(result is not None)
        self.action_label.setText("")
        if result is None:
            self.model.set_comparisons([])
            self.view.setVisible(False)
            self._filler.setVisible(True)
            self.table_title.setText("")
            self.details_label.setText("")
            return
        words = result_words(result)
        self.verdict_label.setText(words.verdict)
        self.model.set_comparisons(list(result.comparisons))
        self.view.setVisible(bool(result.comparisons))
        self._filler.setVisible(not result.comparisons)
        self.table_title.setText(words.table_title)
        self.details_label.setText(words.details)
        self.name_edit.setText(profile_name)
        self.save_button.setText(words.save_text)
        self.save_button.setToolTip(words.save_tip)

    def _on_save_clicked(self) -> None:
        name = self.shown.save_name(self.name_edit.text())
        if name is not None:
            self.save_requested.emit(name)

    def _on_export_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export the tune report to folder")
        if folder:
            self.export_report(Path(folder))

    def export_report(self, folder: Path) -> Path | None:
        """Write `tune-<id>.md` with the trial plot `tune-<id>-trials.svg` beside it (state.tune_result)."""
        return self.shown.export(Path(folder))
