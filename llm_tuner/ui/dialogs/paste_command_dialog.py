"""Paste a llama-server command line; see what was understood, what is unknown and what was removed.

The text is only tokenised (shlex), never run. OK hands the ImportResult back to the caller.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.cmdline import FlagCatalog, ImportResult, import_command, profile_to_argv, render_shell


class PasteCommandDialog(QDialog):
    def __init__(self, catalog: FlagCatalog | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Paste a llama-server command")
        self.resize(760, 520)
        self.catalog = catalog
        self.result: ImportResult | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Paste the command as you would type it (binary path, VAR=value, export lines, "
                                "backslash continuations are fine). It is read, never run."))
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText("llama-server -m model.gguf -c 32768 -ngl 99 -fa on -ctk q8_0 -ctv q8_0")
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

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)

    def _on_input_text_changed(self) -> None:
        text = self.input.toPlainText()
        if not text.strip():
            self.result = None
            self.report.setText("Nothing pasted yet.")
            self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
            return
        self.result = r = import_command(text, self.catalog)
        argv, env = profile_to_argv(r.profile)
        parts = [f"<b>Understood as</b><br><code>{html.escape(render_shell(argv, env))}</code>"]
        if r.unknown:
            parts.append("<b>Not known to this llama-server</b> (kept as written, in order): "
                         f"<code>{html.escape(' '.join(r.unknown))}</code>")
        for rem in r.removed:
            parts.append(f"<b>Removed flag</b> <code>{html.escape(' '.join(rem.tokens))}</code>: use "
                         f"<code>{html.escape(rem.replacement)}</code> (kept as written; fix it in the editor)")
        notes = [n for n in r.notes if "was removed" not in n]
        if notes:
            parts.append("<b>Notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
        self.report.setText("<br><br>".join(parts))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(True)
