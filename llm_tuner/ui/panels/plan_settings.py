"""The Plan panel's settings box (-c, -ngl, -ctk, -ctv, -np, -fa, -ub): the profile's values in controls.

A value a control cannot show (beyond a spin box's range, not among a list's choices) is left as it is in the
profile: the control's label gets a ⚠, its tooltip and the note under the box say why, and nothing is written
back until the user sets that control. Each control reports only itself (`control_changed`), so changing the
K cache never rewrites a context the context box could not show. The words and which controls are marked
are state.plan_controls'.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QSpinBox, QWidget

from llm_tuner.core import flags
from llm_tuner.core.memory import CTX_PAD, PlacementArgs
from llm_tuner.state.plan_controls import WARN_COLOUR, UnshownValues, beyond_range, control_tip, not_a_choice

CACHE_TYPES = ("f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


class PlanSettingsBox(QGroupBox):
    """The settings the Plan writes into the profile being edited; `show_args` fills them from
    PlacementArgs."""

    control_changed = Signal(str)  # the key ("ctx", "ngl", ...) of the control the user changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Settings (written into the profile being edited)", parent)
        form = QFormLayout(self)
        self.form = form
        self.ctx_spin = QSpinBox(minimum=0, maximum=10_000_000, singleStep=CTX_PAD, suffix=" tokens",
                                 specialValueText="trained context (-c 0)")
        self.ngl_spin = QSpinBox(minimum=-1, maximum=999, specialValueText="auto (all)")  # 99 stays 99
        self.ngl_spin.setValue(-1)
        self.ctk_combo = QComboBox()
        self.ctk_combo.addItems(CACHE_TYPES)
        self.ctv_combo = QComboBox()
        self.ctv_combo.addItems(CACHE_TYPES)
        self.np_spin = QSpinBox(minimum=0, maximum=256, specialValueText="auto (4, unified KV)")
        self.fa_combo = QComboBox()
        self.fa_combo.addItems(["auto", "on", "off"])
        self.ub_combo = QComboBox()
        self.ub_combo.addItems(["64", "128", "256", "512", "1024", "2048", "4096"])
        self.ub_combo.setCurrentText("512")
        # key -> (control, its label, the flag key in core.flags)
        self._controls: dict[str, tuple[QWidget, QLabel, str]] = {}
        for key, text, w, flag in (("ctx", "Context (-c)", self.ctx_spin, "ctx_size"),
                                   ("ngl", "GPU layers (-ngl)", self.ngl_spin, "gpu_layers"),
                                   ("ctk", "K cache (-ctk)", self.ctk_combo, "cache_type_k"),
                                   ("ctv", "V cache (-ctv)", self.ctv_combo, "cache_type_v"),
                                   ("np", "Parallel slots (-np)", self.np_spin, "parallel"),
                                   ("fa", "Flash attention (-fa)", self.fa_combo, "flash_attn"),
                                   ("ub", "Micro-batch (-ub)", self.ub_combo, "ubatch_size")):
            label = QLabel(text)
            form.addRow(label, w)
            self.watch(key, w, label, flag)
        self.values = UnshownValues()  # the controls that cannot show the profile's value, and why
        self._marked: dict[QWidget, tuple[str, str]] = {}  # marked controls -> (their tooltip, their label)
        self.controls_note = QLabel()  # which profile values the controls cannot show, and why
        self.controls_note.setWordWrap(True)
        self.controls_note.setStyleSheet(f"color: {WARN_COLOUR}")
        self.controls_note.hide()
        form.addRow(self.controls_note)
        self._syncing = False

    def watch(self, key: str, control: QWidget, label: QLabel, flag_key: str) -> None:
        """Take `control` (a spin box or a list) under this box's rules; it may live elsewhere (-fitt
        does)."""
        self._controls[key] = (control, label, flag_key)
        signal = control.valueChanged if isinstance(control, QSpinBox) else control.currentTextChanged
        signal.connect(lambda _v, k=key: self._on_control_changed(k))

    def label_of(self, key: str) -> QLabel:
        return self._controls[key][1]

    def show_args(self, a: PlacementArgs) -> None:
        """Show the profile's (effective) arguments; mark what a control cannot show. Emits nothing."""
        self._syncing = True
        self.values.clear()
        try:
            self._show("ctx", a.ctx or 0)
            self._show("ngl", -1 if a.ngl is None or a.ngl == -1 else a.ngl, {-2: "all"}.get(a.ngl))
            self._show("ctk", a.cache_type_k)
            self._show("ctv", a.cache_type_v)
            self._show("np", 0 if a.n_parallel in (-1, None) else a.n_parallel)
            self._show("fa", a.flash_attn)
            self._show("ub", str(a.n_ubatch))
            if a.fit_target_mib and "fitt" in self._controls:
                self._show("fitt", a.fit_target_mib[0])
        finally:
            self._syncing = False
        self._mark()

    def set_tooltip(self, key: str, tip: str) -> None:
        """A control's own tooltip (shown again once it no longer says why it cannot show a value)."""
        w = self._controls[key][0]
        if w in self._marked:
            self._marked[w] = (tip, self._marked[w][1])
        else:
            w.setToolTip(tip)

    def _show(self, key: str, value, written: str | None = None) -> None:
        """Set control `key` to `value`, or note why it cannot (`written`: the value as the flag reads)."""
        w, _label, flag_key = self._controls[key]
        flag = min(flags.names(flag_key), key=len)  # as the labels name it: -c, -ngl, ...
        if isinstance(w, QSpinBox):
            why = beyond_range(flag, value, w.minimum(), w.maximum(), written)
            if why is None:
                w.setValue(value)
        else:
            why = not_a_choice(flag, value, [w.itemText(i) for i in range(w.count())])
            if why is None:
                w.setCurrentIndex(w.findText(str(value)))
        self.values.note(key, why)

    def _mark(self) -> None:
        """Mark the controls that cannot show the profile's value (label ⚠, tooltip) and say so under the
        box."""
        for key, (w, label, _flag) in self._controls.items():
            why = self.values.why.get(key)
            if why:
                if w not in self._marked:
                    self._marked[w] = (w.toolTip(), label.text())
                    label.setText(f"⚠ {label.text()}")
                    label.setStyleSheet(f"color: {WARN_COLOUR}")
                w.setToolTip(control_tip(why))
            elif w in self._marked:
                tip, text = self._marked.pop(w)
                w.setToolTip(tip)
                label.setText(text)
                label.setStyleSheet("")
        self.controls_note.setText(self.values.text)
        self.controls_note.setVisible(bool(self.values.why))

    def _on_control_changed(self, key: str) -> None:
        if self._syncing:
            return
        if self.values.user_set(key):  # the user set it: the profile takes this value now
            self._mark()
        self.control_changed.emit(key)
