"""The Plan panel's "Override tensors (-ot)" box: builds a rule, previews which tensors it matches and the MiB
it moves off each device (core.memory.preview_rule), and adds it to the Plan's arguments.

The preview depends on the model, the devices and the rules already set (the Plan's state, state/plan.py), so
the panel refreshes it on every recompute (a change of devices or rules re-reads it), not only when the rule
is edited.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.memory import preview_rule, rule_experts_blocks, rule_ffn_every_nth
from llm_tuner.state.plan import PlanState


class OverrideBuilderBox(QGroupBox):
    """Reads the Plan's state (model, arguments, devices, CPU flags); changes its rules through
    `state.set_overrides`."""

    def __init__(self, state: PlanState, parent: QWidget | None = None) -> None:
        super().__init__("Override tensors (-ot)", parent)
        self.state = state
        self._syncing = False
        ol = QVBoxLayout(self)
        orow = QHBoxLayout()
        self.ot_mode = QComboBox()
        self.ot_mode.addItems(["FFN of every Nth block to CPU", "Experts of blocks a–b to CPU", "Custom regex"])
        self.ot_a = QSpinBox(minimum=0, maximum=999, value=3)
        self.ot_b = QSpinBox(minimum=0, maximum=999, value=0)
        self.ot_regex = QLineEdit(placeholderText=r"blk\.(0|1)\.ffn_.*=CPU")
        orow.addWidget(self.ot_mode)
        orow.addWidget(QLabel("N / a"))
        orow.addWidget(self.ot_a)
        orow.addWidget(QLabel("start / b"))
        orow.addWidget(self.ot_b)
        ol.addLayout(orow)
        ol.addWidget(self.ot_regex)
        self.ot_preview_label = QLabel()
        self.ot_preview_label.setWordWrap(True)
        ol.addWidget(self.ot_preview_label)
        self.ot_matches = QListWidget()
        self.ot_matches.setMaximumHeight(110)
        ol.addWidget(self.ot_matches)
        brow = QHBoxLayout()
        self.ot_add_button = QPushButton("Add rule")
        self.ot_add_button.clicked.connect(self._on_add_clicked)
        self.ot_clear_button = QPushButton("Remove all rules")
        self.ot_clear_button.clicked.connect(self._on_clear_clicked)
        brow.addWidget(self.ot_add_button)
        brow.addWidget(self.ot_clear_button)
        ol.addLayout(brow)
        self.ot_rules_label = QLabel()
        self.ot_rules_label.setWordWrap(True)
        self.ot_rules_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        ol.addWidget(self.ot_rules_label)
        for w in (self.ot_a, self.ot_b):
            w.valueChanged.connect(self.refresh)
        self.ot_mode.currentIndexChanged.connect(self.refresh)
        self.ot_regex.textChanged.connect(self._on_regex_changed)

    def set_block_count(self, n_blocks: int) -> None:
        self.ot_b.setMaximum(max(0, n_blocks - 1))
        self.ot_a.setMaximum(max(1, n_blocks))

    def current_rule(self) -> str:
        mode = self.ot_mode.currentIndex()
        model = self.state.model
        n_layer = (model.n_layer if model is not None else None) or 0
        if mode == 0:
            return rule_ffn_every_nth(self.ot_a.value() or 1, self.ot_b.value(), n_layer)
        if mode == 1:
            a, b = sorted((self.ot_a.value(), self.ot_b.value()))
            return rule_experts_blocks(a, b)
        return self.ot_regex.text().strip()

    def _on_regex_changed(self, _text: str) -> None:
        if not self._syncing:
            self.refresh()

    def refresh(self, *_a) -> None:
        """Recompute the preview for the current rule, model, devices and rules already set."""
        st = self.state
        self.ot_regex.setEnabled(self.ot_mode.currentIndex() == 2)
        self.ot_rules_label.setText(
            "Rules: " + (", ".join(f"{a}={b}" for a, b in st.args.overrides) if st.args.overrides else "none"))
        if st.model is None:
            self.ot_preview_label.setText("Select a model to preview which tensors a rule moves.")
            self.ot_matches.clear()
            return
        rule = self.current_rule()
        if self.ot_mode.currentIndex() != 2:
            self._syncing = True
            self.ot_regex.setText(rule)
            self._syncing = False
        prev = preview_rule(st.model, st.args, rule, st.gpus(), st.cpu_flags())
        self.ot_matches.clear()
        if prev.error:
            self.ot_preview_label.setText(prev.error)
            return
        self.ot_matches.addItems(list(prev.matched[:300]))
        self.ot_preview_label.setText(f"{rule}\nmatches {len(prev.matched)} tensors; {prev.text()}")

    def _on_add_clicked(self) -> None:
        rule = self.current_rule()
        if "=" not in rule:
            self.ot_preview_label.setText("A rule is <regex>=<buffer>, e.g. blk\\.1\\.ffn_.*=CPU")
            return
        pat, buf = rule.rsplit("=", 1)
        self.state.set_overrides((*self.state.args.overrides, (pat, buf)))

    def _on_clear_clicked(self) -> None:
        self.state.set_overrides(())
