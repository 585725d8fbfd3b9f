"""The Profile panel's field editors: one widget per modelled flag (a drop-down, a check box or a text
field), its placeholder and its tooltip (the chosen binary's own --help text)."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QPlainTextEdit

from llm_tuner.core import profile as prof
from llm_tuner.core.cmdline import FieldFlag, FlagCatalog, field_tokens, parse_field_value
from llm_tuner.core.profile import LaunchProfile

_CHOICES = {
    "cache_type_k": prof.CACHE_TYPES, "cache_type_v": prof.CACHE_TYPES,
    "draft_cache_type_k": prof.CACHE_TYPES, "draft_cache_type_v": prof.CACHE_TYPES,
    "flash_attn": prof.FLASH_ATTN_VALUES, "split_mode": prof.SPLIT_MODES, "load_mode": prof.LOAD_MODES,
    "reasoning_format": prof.REASONING_FORMATS, "reasoning": prof.ON_OFF_AUTO,
}
_DEFAULT = "(default)"


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
            self.widget.setPlaceholderText("one rule per line: PATTERN=BUFFER, e.g. blk\\.(0|3|6)\\.ffn_.*=CPU")
            self.widget.setFixedHeight(64)
        else:
            self.widget = QLineEdit()
            if k == "secret":
                self.widget.setEchoMode(QLineEdit.EchoMode.Password)
            self.widget.setPlaceholderText(_placeholder(ff))
        self.widget.setObjectName(f"field_{ff.field}")

    def connect(self, slot) -> None:
        w = self.widget
        if isinstance(w, QCheckBox):
            w.toggled.connect(slot)
        elif isinstance(w, QComboBox):
            w.currentTextChanged.connect(slot)
        elif isinstance(w, QPlainTextEdit):
            w.textChanged.connect(slot)
        else:
            w.textEdited.connect(slot)

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
    lines = [", ".join(spec.names) + (f" {spec.value}" if spec.value else ""), "", spec.help]
    if spec.env:
        lines.append(f"env: {spec.env}")
    return "\n".join(lines)
