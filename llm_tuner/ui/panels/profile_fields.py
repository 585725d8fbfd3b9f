"""The Profile panel's field editors: one widget per modelled flag (a drop-down, a check box or a text
field), its placeholder and its tooltip (the chosen binary's own --help text); and the profile's program row
(which llama-server it runs, and the Confirm that lets a program that came with the profile run)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core import profile as prof
from llm_tuner.core.cmdline import FieldFlag, FlagCatalog, field_tokens, help_tooltip, parse_field_value
from llm_tuner.core.profile import LaunchProfile

_CHOICES = {
    "cache_type_k": prof.CACHE_TYPES, "cache_type_v": prof.CACHE_TYPES,
    "draft_cache_type_k": prof.CACHE_TYPES, "draft_cache_type_v": prof.CACHE_TYPES,
    "flash_attn": prof.FLASH_ATTN_VALUES, "split_mode": prof.SPLIT_MODES, "load_mode": prof.LOAD_MODES,
    "reasoning_format": prof.REASONING_FORMATS, "reasoning": prof.ON_OFF_AUTO,
}
_DEFAULT = "(default)"


def connect_edited(w: QWidget, slot) -> None:
    """Call `slot` when the user changes a field's value (a line edit's own edits only: text set by code is
    not an edit)."""
    if isinstance(w, QCheckBox):
        w.toggled.connect(slot)
    elif isinstance(w, QComboBox):
        w.currentTextChanged.connect(slot)
    elif isinstance(w, QPlainTextEdit):
        w.textChanged.connect(slot)
    else:
        w.textEdited.connect(slot)


class _FieldEditor:
    """One widget bound to one profile field: reads a value (raising ValueError) and shows one."""

    def __init__(self, ff: FieldFlag) -> None:
        self.ff = ff
        self.help_tip = ""  # the binary's --help text for the flag; an error message goes above it
        k = ff.kind
        if k == "switch":
            self.widget = QCheckBox()
        elif k in ("toggle", "onoff"):
            self.widget = QComboBox()
            self.widget.addItems([_DEFAULT, "on", "off"])
        elif ff.field in _CHOICES:
            self.widget = QComboBox()
            self.widget.setEditable(True)  # forks accept values this build does not list
            self.widget.addItems([_DEFAULT, *_CHOICES[ff.field]])
        elif k == "overrides":
            self.widget = QPlainTextEdit()
            self.widget.setPlaceholderText("one rule per line: PATTERN=BUFFER, e.g. "
                                           "blk\\.(0|3|6)\\.ffn_.*=CPU")
            self.widget.setFixedHeight(64)
        else:
            self.widget = QLineEdit()
            if k == "secret":
                self.widget.setEchoMode(QLineEdit.EchoMode.Password)
            self.widget.setPlaceholderText(_placeholder(ff))
        self.widget.setObjectName(f"field_{ff.field}")

    def connect(self, slot) -> None:
        connect_edited(self.widget, slot)

    def text(self) -> str:
        w = self.widget
        if isinstance(w, QComboBox):
            t = w.currentText().strip()
            return "" if t == _DEFAULT else t
        if isinstance(w, QPlainTextEdit):
            return ",".join(line.strip() for line in w.toPlainText().splitlines() if line.strip())
        return w.text().strip() if isinstance(w, QLineEdit) else ""

    def value(self):
        k = self.ff.kind
        if isinstance(self.widget, QCheckBox):
            return self.widget.isChecked()
        t = self.text()
        if k in ("toggle", "onoff"):
            return None if not t else t == "on"
        if not t:
            return () if k in ("list", "append", "floats", "ints", "overrides") else None
        return parse_field_value(self.ff, t, None)

    def show(self, profile: LaunchProfile) -> None:
        v = getattr(profile, self.ff.field)
        w = self.widget
        w.blockSignals(True)
        try:
            if isinstance(w, QCheckBox):
                w.setChecked(bool(v))
            elif self.ff.kind in ("toggle", "onoff"):
                w.setCurrentText(_DEFAULT if v is None else ("on" if v else "off"))
            elif isinstance(w, QComboBox):
                w.setCurrentText(_DEFAULT if v is None else str(v))
            elif isinstance(w, QPlainTextEdit):
                w.setPlainText("\n".join(str(r) for r in v))
            else:
                if self.ff.kind == "secret":
                    text = "" if v is None else v.get_secret_value()
                else:
                    toks = field_tokens(profile, self.ff)
                    text = toks[1] if len(toks) > 1 else ""
                w.setText(text)
            self.mark_invalid(None)
        finally:
            w.blockSignals(False)

    def mark_invalid(self, message: str | None) -> None:
        self.widget.setStyleSheet("border: 1px solid #c62828;" if message else "")
        self.widget.setToolTip(f"{message}\n\n{self.help_tip}" if message else self.help_tip)


def _placeholder(ff: FieldFlag) -> str:
    return {"int": "default", "float": "default", "layers": "auto, all or a number", "list": "comma-separated",
            "append": "comma-separated", "floats": "e.g. 3,1", "ints": "MiB per device, e.g. 1024,2048",
            "secret": "none (anyone who can reach the port may use it)"}.get(ff.kind, "default")


def _tooltip(ff: FieldFlag, catalog: FlagCatalog | None) -> str:
    spec = catalog.lookup(ff.flag) if catalog is not None else None
    names = ", ".join([*ff.names, *ff.neg])
    if spec is None:
        return f"{names}\n(not listed by this llama-server's --help)"
    return help_tooltip(spec)


class ProgramRow(QWidget):
    """The profile's own program (`binary`): the file its launches, checks and benchmarks run, and whether it
    may.

    A path that came with the profile (a pasted command's `./build/bin/llama-server`, a shared file's
    `binary`) runs only once confirmed here (or picked with Choose…, or `--trust-binary` in the CLI): nothing
    runs it before, not even `--help`. The panel decides the state (services.binaries.is_trusted).
    """

    # str | None: the file picked with Choose…, or None (use the configured one)
    program_chosen = Signal(object)
    program_confirmed = Signal(str)  # the user confirmed that this program may run

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._path: str | None = None
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        h = QHBoxLayout()
        self.path_edit = QLineEdit()
        self.path_edit.setObjectName("program_path")
        self.path_edit.setReadOnly(True)
        self.path_edit.setPlaceholderText("the configured llama-server (Settings)")
        h.addWidget(self.path_edit, 1)
        self.choose_button = QPushButton("Choose…")
        self.choose_button.setToolTip("Pick the llama-server (or fork) this profile runs; picking it confirms it")
        self.choose_button.clicked.connect(self._on_choose_clicked)
        h.addWidget(self.choose_button)
        self.clear_button = QPushButton("Use configured")
        self.clear_button.setToolTip("Run the llama-server set in Settings (or the built-in one) instead")
        self.clear_button.clicked.connect(lambda: self.program_chosen.emit(None))
        h.addWidget(self.clear_button)
        v.addLayout(h)
        self.status = QLabel("")
        self.status.setObjectName("program_status")
        self.status.setWordWrap(True)
        v.addWidget(self.status)
        self.confirm_button = QPushButton("Confirm: let this program run")
        self.confirm_button.setObjectName("program_confirm")
        self.confirm_button.clicked.connect(lambda: self.program_confirmed.emit(self._path or ""))
        v.addWidget(self.confirm_button)
        self.show_state(None, "none")

    def show_state(self, path: str | None, state: str, error: str | None = None) -> None:
        """`state`: "none" (no own program), "trusted", "untrusted", "missing" or "relative" (a path relative
        to a folder the app does not know); `error` from a failed Confirm or Choose."""
        self._path = path
        self.path_edit.setText(path or "")
        self.path_edit.setToolTip(path or "")
        self.clear_button.setEnabled(path is not None)
        untrusted = state == "untrusted"
        self.confirm_button.setVisible(untrusted)
        if untrusted:
            self.confirm_button.setToolTip(f"Lets {path} run for this profile: its --help for the flag check, "
                                           "launches (Live tab, llm-tuner run) and benchmarks (Benchmarks tab, "
                                           "llm-tuner bench). Confirm only if you know what this file is.")
        text, colour = {
            "none": ("", ""),
            "trusted": ("Confirmed: this profile's launches (Live tab, llm-tuner run), benchmarks and checks "
                        "run this program.", ""),
            "untrusted": (f"Not confirmed: {path} came with the profile (a pasted command or a shared file). "
                          "Nothing runs it, not even --help, until you confirm it.", "#c62828"),
            "missing": (f"{path} does not exist on this machine: choose the llama-server file, or use the "
                        "configured one.", "#c62828"),
            "relative": (f"{path} is relative to the folder the command ran in: choose that llama-server "
                         "file (Choose…), or use the configured one. Nothing runs it until then.", "#c62828"),
        }[state]
        if error:
            text, colour = error, "#c62828"
        self.status.setText(text)
        self.status.setVisible(bool(text))
        self.status.setStyleSheet(f"color: {colour}" if colour else "")

    def _on_choose_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose the llama-server this profile runs", self._path or "")
        if path:
            self.program_chosen.emit(path)
