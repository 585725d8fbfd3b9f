"""The Tune view's inputs: the base profile, the objective, the constraints, the knobs and their candidate
values (those the app proposes, checkable and editable, plus custom knobs: any flag, typed values).

The form only reads and writes widgets; what the knobs are comes from `core.tune.propose_knobs` (through
qt/tune_session), what a TuneSpec means from core.tune.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core import flags
from llm_tuner.core.tune import OBJECTIVES, Knob, Objective, parse_knob
from llm_tuner.core.tune.knobs import ABSENT
from llm_tuner.core.tune.objectives import CLIENTS, FLOOR, WEIGHTS
from llm_tuner.qt.tune_models import knob_label
from llm_tuner.state.benchmarks import parse_sweep_values
from llm_tuner.state.tune import DEMO, EDITED, TuneInputs
from llm_tuner.state.tune_result import value_text

KNOB_ROLE = Qt.ItemDataRole.UserRole
CUSTOM_ROLE = Qt.ItemDataRole.UserRole + 1  # True on rows the user added
KNOB_ROWS = 6  # knob rows in sight at least (a 1366x768 laptop with the quick start included)


def spin(lo: int, hi: int, value: int, suffix: str = "", tip: str = "") -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setValue(value)
    s.setSuffix(suffix)
    s.setToolTip(tip)
    return s


def dspin(lo: float, hi: float, value: float, suffix: str = "", decimals: int = 1) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setRange(lo, hi)
    s.setDecimals(decimals)
    s.setValue(value)
    s.setSuffix(suffix)
    return s


def parse_values(text: str) -> tuple[str | None, ...]:
    """Candidate values as typed (comma-separated, ';' when a value holds commas): "default" leaves the flag
    out and "(on)" is a switch that is present, as the table writes them (state.tune_result.value_text)."""
    return tuple(None if v in ABSENT else ("" if v == "(on)" else v) for v in parse_sweep_values(text))


class TuneForm(QWidget):
    """Base profile + objective + constraints; `inputs()` (state.tune.TuneInputs) and `knobs()` build the
    spec. The knobs are `knobs_box`, a widget of its own the panel places beside the form (a table needs
    room, not a scroll)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._build_base())
        lay.addWidget(self._build_objective())
        lay.addWidget(self._build_constraints())
        lay.addStretch(1)
        self.knobs_box = self._build_knobs()

    # -- construction ------------------------------------------------------------------------
    def _build_base(self) -> QWidget:
        """One row, no frame: a 768 px screen needs the height for the objective and the knobs."""
        row = QWidget()
        h = QHBoxLayout(row)
        h.setContentsMargins(0, 0, 0, 4)
        self.base_combo = QComboBox()
        self.base_combo.setToolTip("The tune's baseline: a saved profile's newest version, the profile being "
                                   "edited, or the demo model")
        self.extra_edit = QLineEdit()
        self.extra_edit.setPlaceholderText("extra flags, e.g. -c 8192")
        self.extra_edit.setToolTip("Extra llama-server flags for the baseline")
        h.addWidget(QLabel("<b>Start from</b>"))
        h.addWidget(self.base_combo, 3)
        h.addWidget(self.extra_edit, 2)
        return row

    def _build_objective(self) -> QGroupBox:
        box = QGroupBox("Objective")
        f = QFormLayout(box)
        f.setContentsMargins(8, 4, 8, 4)
        self.objective_combo = QComboBox()
        for kind, row in OBJECTIVES.items():
            self.objective_combo.addItem(row.label, kind)
        self.objective_combo.currentIndexChanged.connect(self._on_objective_combo_changed)
        d = TuneInputs()  # the defaults
        self.prompt_spin = spin(1, 1_000_000, d.prompt_tokens, " tokens")
        self.gen_spin = spin(1, 32768, d.gen_tokens, " tokens")
        self.depth_spin = spin(0, 1_000_000, d.depth, " tokens", "context filled before the measured prompt")
        self.clients_spin = spin(1, 256, d.clients, "", "parallel clients (throughput and p99 latency)")
        self.min_gen_spin = dspin(0.0, 100_000.0, d.min_gen_tps, " t/s")
        self.gen_weight_spin = dspin(0.0, 1.0, d.gen_weight, "", 2)
        self.prefill_weight_spin = dspin(0.0, 1.0, d.prefill_weight, "", 2)
        weights = QHBoxLayout()
        weights.addWidget(QLabel("generation"))
        weights.addWidget(self.gen_weight_spin)
        weights.addWidget(QLabel("prefill"))
        weights.addWidget(self.prefill_weight_spin)
        self.weights_row = QWidget()
        self.weights_row.setLayout(weights)
        weights.setContentsMargins(0, 0, 0, 0)
        f.addRow("Optimise:", self.objective_combo)
        f.addRow("Prompt:", self.prompt_spin)
        f.addRow("Generated:", self.gen_spin)
        f.addRow("Depth:", self.depth_spin)
        f.addRow("Clients:", self.clients_spin)
        f.addRow("Min generation:", self.min_gen_spin)
        f.addRow("Weights:", self.weights_row)
        self._objective_form = f
        self._on_objective_combo_changed()
        return box

    def _build_constraints(self) -> QGroupBox:
        box = QGroupBox("Constraints and effort")
        f = QFormLayout(box)
        f.setContentsMargins(8, 4, 8, 4)
        d = TuneInputs()  # the defaults
        self.min_ctx_spin = spin(0, 10_000_000, d.min_ctx, " tokens", "0: no minimum")
        self.min_ctx_spin.setSpecialValueText("none")
        self.headroom_spin = spin(0, 1_000_000, d.headroom_mib, " MiB", "memory left free on every GPU; a "
                                  "placement that runs out of memory raises it")
        self.budget_spin = spin(10, 7 * 24 * 3600, d.budget_s, " s", "the tune's whole time, the final A/B "
                                "included")
        self.ppl_spin = dspin(0.0, 100.0, d.max_ppl_increase_pct, " %", 2)
        self.ppl_spin.setToolTip("the largest perplexity increase a K/V cache type may cost "
                                 "(llama-perplexity)")
        self.screen_reps_spin = spin(1, 50, d.screen_reps, "", "repetitions per candidate while racing")
        self.final_reps_spin = spin(1, 50, d.final_reps, "", "repetitions per side of the final interleaved "
                                    "A/B, at least (more when the racing saw a large spread; fixed before "
                                    "the final starts)")
        self.final_rounds_spin = spin(1, 20, d.final_rounds, "", "server starts per side the final's "
                                      "repetitions are spread over, A B A B …: more starts catch "
                                      "start-to-start differences, each costs a model load")
        f.addRow("Min context:", self.min_ctx_spin)
        f.addRow("Headroom per device:", self.headroom_spin)
        f.addRow("Time budget:", self.budget_spin)
        f.addRow("Max perplexity increase:", self.ppl_spin)
        f.addRow("Racing reps:", self.screen_reps_spin)
        f.addRow("Final reps per side:", self.final_reps_spin)
        f.addRow("Final starts per side:", self.final_rounds_spin)
        return box

    def _build_knobs(self) -> QGroupBox:
        box = QGroupBox("Knobs (checked ones are tried; edit the values, \"default\" leaves the flag out)")
        v = QVBoxLayout(box)
        v.setContentsMargins(8, 4, 8, 4)
        self.knob_table = QTableWidget(0, 3)
        self.knob_table.setHorizontalHeaderLabels(["Knob", "Values", "Why"])
        self.knob_table.verticalHeader().setVisible(False)
        header = self.knob_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        # room for a few values (a cell scrolls while edited); the reasons get the rest
        self.knob_table.setColumnWidth(1, 130)
        header.setStretchLastSection(True)
        # six rows stay in sight however short the window (1366x768 showed three); a reason wraps to two lines
        # in its row, the tooltip has it whole
        row = self.knob_table.verticalHeader().defaultSectionSize()
        self.knob_table.setMinimumHeight(header.sizeHint().height() + KNOB_ROWS * row
                                         + 2 * self.knob_table.frameWidth() + 2)
        self.knobs_hint = QLabel("Choose a base profile: the app proposes knobs from its model, the binary "
                                 "and the devices.")
        self.knobs_hint.setWordWrap(True)
        self.custom_flag_edit = QLineEdit()
        self.custom_flag_edit.setPlaceholderText("any flag, e.g. --poll")
        self.custom_values_edit = QLineEdit()
        self.custom_values_edit.setPlaceholderText("values, e.g. 0,50,100")
        self.add_knob_button = QPushButton("Add knob")
        self.add_knob_button.clicked.connect(self._on_add_knob_clicked)
        row = QHBoxLayout()
        row.addWidget(QLabel("Custom:"))
        row.addWidget(self.custom_flag_edit, 1)
        row.addWidget(self.custom_values_edit, 2)
        row.addWidget(self.add_knob_button)
        v.addWidget(self.knobs_hint)
        v.addWidget(self.knob_table, 1)
        v.addLayout(row)
        return box

    def _on_objective_combo_changed(self, *_args) -> None:
        uses = OBJECTIVES[self.objective_combo.currentData()].uses
        f = self._objective_form
        f.setRowVisible(self.clients_spin, CLIENTS in uses)
        f.setRowVisible(self.min_gen_spin, FLOOR in uses)
        f.setRowVisible(self.weights_row, WEIGHTS in uses)

    # -- base profile choices ----------------------------------------------------------------------
    def set_base_choices(self, names: list[str], has_edited: bool, prefer: str | None = None,
                         keep: bool = True) -> None:
        """Saved profiles, then the edited profile (when there is one), then the demo model. Chooses `prefer`
        (the profile the Profile tab shows) when listed, unless `keep` and something is chosen already."""
        shown = self.base_combo.currentData()
        current = (shown if keep else None) or prefer or shown
        self.base_combo.blockSignals(True)
        self.base_combo.clear()
        for name in names:
            self.base_combo.addItem(name, name)
        if has_edited:
            self.base_combo.addItem("the profile being edited (Profile tab)", EDITED)
        self.base_combo.addItem("demo model (default flags)", DEMO)
        idx = self.base_combo.findData(current)
        self.base_combo.setCurrentIndex(idx if idx >= 0 else 0)
        self.base_combo.blockSignals(False)
        if self.base_combo.currentData() != shown:
            self.base_combo.currentIndexChanged.emit(self.base_combo.currentIndex())

    # -- knobs ---------------------------------------------------------------------------------
    def set_proposed_knobs(self, knobs: list[Knob]) -> None:
        """Replace the proposed rows (custom rows stay); proposed knobs start checked."""
        custom = [(k, on) for r, (k, on) in enumerate(self._rows())
                  if self.knob_table.item(r, 0).data(CUSTOM_ROLE)]
        self.knob_table.setRowCount(0)
        for k in knobs:
            self._add_row(k, checked=True)
        for k, on in custom:
            self._add_row(k, checked=on, custom=True)
        self.knobs_hint.setText(f"{len(knobs)} knob(s) proposed for this profile." if knobs else
                                "No knob proposed for this profile: add a custom knob below.")

    def add_custom_knob(self, flag: str, values_text: str) -> Knob | None:
        """A knob the user types: a flag the app knows becomes its knob, any other flag a custom one (the
        CLI's `--knob` syntax, core.tune.parse_knob)."""
        flag = flag.strip()
        try:
            knob = parse_knob(f"{'' if flags.lookup(flag) else 'custom:'}{flag}={values_text.strip()}")
        except ValueError as exc:
            self.knobs_hint.setText(f"Not added: {exc}")
            return None
        self._add_row(knob, checked=True, custom=True)
        return knob

    def _on_add_knob_clicked(self) -> None:
        if self.add_custom_knob(self.custom_flag_edit.text(), self.custom_values_edit.text()) is not None:
            self.custom_flag_edit.clear()
            self.custom_values_edit.clear()

    def _add_row(self, knob: Knob, checked: bool, custom: bool = False) -> None:
        r = self.knob_table.rowCount()
        self.knob_table.insertRow(r)
        name = QTableWidgetItem(knob_label(knob))
        name.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable
                      | Qt.ItemFlag.ItemIsSelectable)
        name.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        name.setData(KNOB_ROLE, knob)
        name.setData(CUSTOM_ROLE, custom)
        sep = ";" if any(v and "," in v for v in knob.values) else ","
        values = QTableWidgetItem(sep.join(value_text(v) for v in knob.values))
        why = QTableWidgetItem(knob.reason)
        why.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
        why.setToolTip(knob.reason)
        for c, item in enumerate((name, values, why)):
            self.knob_table.setItem(r, c, item)

    def _rows(self) -> list[tuple[Knob, bool]]:
        """Every row's knob with the values as edited, and whether it is checked."""
        out = []
        for r in range(self.knob_table.rowCount()):
            item = self.knob_table.item(r, 0)
            knob: Knob = item.data(KNOB_ROLE)
            values = parse_values(self.knob_table.item(r, 1).text())
            checked = item.checkState() == Qt.CheckState.Checked
            out.append((knob.model_copy(update={"values": values}), checked))
        return out

    def knobs(self) -> tuple[Knob, ...]:
        """The checked knobs with at least one value, values as edited."""
        return tuple(k for k, on in self._rows() if on and k.values)

    # -- the spec's parts ---------------------------------------------------------------------------
    def inputs(self) -> TuneInputs:
        """The objective's and the constraints' widgets as typed (state.tune.TuneInputs)."""
        return TuneInputs(
            kind=self.objective_combo.currentData(), prompt_tokens=self.prompt_spin.value(),
            gen_tokens=self.gen_spin.value(), depth=self.depth_spin.value(),
            clients=self.clients_spin.value(),
            min_gen_tps=self.min_gen_spin.value(), gen_weight=self.gen_weight_spin.value(),
            prefill_weight=self.prefill_weight_spin.value(), min_ctx=self.min_ctx_spin.value(),
            headroom_mib=self.headroom_spin.value(), budget_s=self.budget_spin.value(),
            max_ppl_increase_pct=self.ppl_spin.value(), screen_reps=self.screen_reps_spin.value(),
            final_reps=self.final_reps_spin.value(), final_rounds=self.final_rounds_spin.value())

    def objective(self) -> Objective:
        return self.inputs().objective()

    def constraints(self) -> dict:
        """TuneSpec's keyword arguments besides the base, objective and knobs."""
        return self.inputs().constraints()
