"""Paste a llama-server command line; see what was understood, what is unknown and what was removed.

The text is only tokenised (never run, never given to a shell). OK hands the ImportResult back to the caller.
Reading happens off the GUI thread, ~250 ms after the typing stops (a big paste cannot freeze the window);
text over core.cmdline.PASTE_LIMIT_CHARS is refused with a message instead of being read.
"""

from __future__ import annotations

import html

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

from llm_tuner.core.cmdline import (
    PASTE_LIMIT_CHARS,
    FlagCatalog,
    ImportResult,
    import_command,
    profile_to_argv,
    render_shell,
)
from llm_tuner.core.profile import nul_fields
from llm_tuner.qt.workers import BackgroundJob

DEBOUNCE_MS = 250


def _read(text: str, catalog: FlagCatalog | None) -> tuple[ImportResult, str]:
    """The import and its report (HTML): the work done off the GUI thread."""
    r = import_command(text, catalog)
    argv, env = profile_to_argv(r.profile)
    parts = [f"<b>Understood as</b><br><code>{html.escape(render_shell(argv, env, binary=r.profile.binary))}</code>"]
    if r.bad_values:
        parts.append("<b>Values llama-server refuses</b> (kept as written; fix them in the editor)<ul>"
                     + "".join(f"<li>{html.escape(b.removesuffix(': kept as written'))}</li>" for b in r.bad_values)
                     + "</ul>")
    if r.unknown:
        parts.append("<b>Not known to this llama-server</b> (kept as written, in order): "
                     f"<code>{html.escape(' '.join(r.unknown))}</code>")
    for rem in r.removed:
        parts.append(f"<b>Removed flag</b> <code>{html.escape(' '.join(rem.tokens))}</code>: use "
                     f"<code>{html.escape(rem.replacement)}</code> (kept as written; fix it in the editor)")
    notes = [n for n in r.notes if "was removed" not in n]
    if notes:
        parts.append("<b>Notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    return r, "<br><br>".join(parts)


class PasteCommandDialog(QDialog):
    read_finished = Signal()  # the report now describes the text as it is (or says why it was not read)

    def __init__(self, catalog: FlagCatalog | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Paste a llama-server command")
        self.resize(760, 520)
        self.catalog = catalog
        self.result: ImportResult | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Paste the command as you would type it (binary path, VAR=value, export "
                                "lines, backslash continuations are fine). It is read, never run."))
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText("llama-server -m model.gguf -c 32768 -ngl 99 -fa on -ctk q8_0 -ctv q8_0")
        # wrapped like a terminal, anywhere: the word-boundary search of the default wrap over one pasted
        # 256 KiB token held the GUI thread 5-14 s; this way it takes ~0.2 s
        self.input.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.input.textChanged.connect(self._on_input_text_changed)
        layout.addWidget(self.input, 2)
        self.report = QLabel("Nothing pasted yet.")
        self.report.setWordWrap(True)
        self.report.setTextFormat(Qt.TextFormat.RichText)
        self.report.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.report.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.report, 2)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

        self._generation = 0  # bumped at every edit: a reading of older text is dropped
        self._shown = 0  # the generation the report describes
        self._job: BackgroundJob | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._on_timer_timeout)

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)

    @property
    def busy(self) -> bool:
        """Text waits to be read (typing pause or reading in progress)."""
        return self._timer.isActive() or self._job is not None

    def _set_ok(self, enabled: bool) -> None:
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(enabled)

    def _on_input_text_changed(self) -> None:
        self._generation += 1
        self.result = None
        self._set_ok(False)  # Import waits for the reading of this text
        self._timer.start()

    def _on_timer_timeout(self) -> None:
        text = self.input.toPlainText()
        if not text.strip():
            self._show(None, "Nothing pasted yet.")
            return
        if len(text) > PASTE_LIMIT_CHARS:
            self._show(None, f"<b>Not read:</b> this is {len(text) // 1024} KiB of text, and a llama-server "
                       f"command line is a few KiB (the limit is {PASTE_LIMIT_CHARS // 1024} KiB). "
                       "Paste only the command.")
            return
        if self._job is not None:  # one reading at a time: the newest text is read when it ends
            return
        generation, catalog = self._generation, self.catalog
        job = BackgroundJob(lambda _ctl: _read(text, catalog), self, what="Reading the pasted command",
                            on_failed=lambda exc, g=generation: self._on_job_failed(g, exc))
        job.succeeded.connect(lambda res, g=generation: self._on_job_succeeded(g, *res))
        job.finished.connect(self._on_job_finished)
        self._job = job.start()

    def _on_job_succeeded(self, generation: int, result: ImportResult, report: str) -> None:
        if generation != self._generation:
            return
        bad = nul_fields(result.profile)
        if bad:
            self._show(None, f"<b>Not importable:</b> {html.escape(', '.join(bad))} holds a NUL byte (\\0), "
                       "which no program can take. Remove it from the text.")
            return
        # a wrong paste (no model, no flag): Import stays disabled, as `profile import` exits 2
        if result.problem:
            self._show(None, f"<b>Not importable:</b> {html.escape(result.problem)}.<br><br>{report}")
            return
        self._show(result, report)

    def _on_job_failed(self, generation: int, exc: BaseException) -> None:
        if generation == self._generation:
            self._show(None, f"<b>Could not read the text:</b> {html.escape(str(exc))}")

    def _on_job_finished(self) -> None:
        self._job = None
        if self._shown != self._generation and not self._timer.isActive():
            self._timer.start(0)  # the text changed while it was being read: read the newest

    def _show(self, result: ImportResult | None, report: str) -> None:
        self._shown = self._generation
        self.result = result
        self.report.setText(report)
        self._set_ok(result is not None)
        self.read_finished.emit()
