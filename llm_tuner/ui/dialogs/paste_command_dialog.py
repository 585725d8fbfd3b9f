"""Paste a llama-server command line; see what was understood, what is unknown and what was removed.

The text is only tokenised (never run, never given to a shell). OK hands the ImportResult back to the caller.
Reading happens off the GUI thread, ~250 ms after the typing stops (a big paste cannot freeze the window);
text over core.cmdline.PASTE_LIMIT_CHARS is refused with a message instead of being read. Widgets only: the
reading's rules and words are state.paste_command.PasteState's.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.cmdline import PASTE_LIMIT_CHARS, FlagCatalog, ImportResult
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.state.paste_command import NOTHING_YET, PasteState, read_command

__all__ = ["PASTE_LIMIT_CHARS", "DEBOUNCE_MS", "PasteCommandDialog"]

DEBOUNCE_MS = 250


def _read(text: str, catalog: FlagCatalog | None) -> tuple[ImportResult, str]:
    """The import and its report (HTML): the work done off the GUI thread (state.paste_command)."""
    return read_command(text, catalog)


class PasteCommandDialog(QDialog):
    read_finished = Signal()  # the report now describes the text as it is (or says why it was not read)

    def __init__(self, catalog: FlagCatalog | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Paste a llama-server command")
        self.resize(760, 520)
        self.catalog = catalog
        self.state = PasteState(catalog, read=lambda text, cat: _read(text, cat), run=self._run)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Paste the command as you would type it (binary path, VAR=value, export "
                                "lines, backslash continuations are fine). It is read, never run."))
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText(
            "llama-server -m model.gguf -c 32768 -ngl 99 -fa on -ctk q8_0 -ctv q8_0")
        # wrapped like a terminal, anywhere: the word-boundary search of the default wrap over one pasted
        # 256 KiB token held the GUI thread 5-14 s; this way it takes ~0.2 s
        self.input.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.input.textChanged.connect(self._on_input_text_changed)
        layout.addWidget(self.input, 2)
        self.report = QLabel(NOTHING_YET)
        self.report.setWordWrap(True)
        self.report.setTextFormat(Qt.TextFormat.RichText)
        self.report.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.report.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.report, 2)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

        self._job: BackgroundJob | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self.state.add_callback(self._on_state_changed)

    @property
    def result(self) -> ImportResult | None:
        """What Import hands back (None: nothing importable, or the text waits to be read)."""
        return self.state.result

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)

    @property
    def busy(self) -> bool:
        """Text waits to be read (typing pause or reading in progress)."""
        return self._timer.isActive() or self.state.reading

    def _run(self, work, done, failed) -> None:
        job = BackgroundJob(lambda _ctl: work(), self, what="Reading the pasted command", on_failed=failed)
        job.succeeded.connect(done)
        self._job = job.start()

    def _on_state_changed(self, what: str, *_details) -> None:
        if what == "result":
            self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(self.state.result is not None)
        elif what == "report":
            self.report.setText(self.state.report)
        elif what == "read":
            self.read_finished.emit()
        elif what == "stale" and not self._timer.isActive():
            self._timer.start(0)

    def _on_input_text_changed(self) -> None:
        self.state.edited()  # Import waits for the reading of this text
        self._timer.start()

    def _on_timer_timeout(self) -> None:
        self.state.read_text(self.input.toPlainText())
