"""Plan panel: what fits where before launch (weights / KV / compute per device), edited live.

What the panel plans for (model, arguments, devices, calibrations) and what each change writes into the profile
being edited is llm_tuner.state.plan.PlanState, Qt-free; this panel binds its widgets to it, publishes the
profile it changes with AppState.set_profile, and runs its slow reads (a model header, RPC workers' devices) and
the "Check with llama.cpp" run as BackgroundJobs. The plan (core.memory.plan_memory) is pure and takes a few ms,
so it is recomputed on every change (once per event loop turn).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.memory import FIT_TARGET_MIB, MemoryPlan
from llm_tuner.core.units import format_mib
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.speed import load_basis
from llm_tuner.state.plan import PlanState
from llm_tuner.state.speed import SpeedModel
from llm_tuner.ui.panels.plan_check import LlamaCheckBox
from llm_tuner.ui.panels.plan_overrides import OverrideBuilderBox
from llm_tuner.ui.panels.plan_settings import PlanSettingsBox
from llm_tuner.ui.panels.plan_speed import PlanSpeedBox
from llm_tuner.ui.panels.router_plan import RouterPlanBox
from llm_tuner.ui.plots.memory_bars import MemoryBarsWidget, SplitBarWidget
from llm_tuner.ui.wheel_guard import guard_wheel

BACKENDS = ("CUDA", "ROCm", "Vulkan", "Metal", "SYCL", "MUSA")


class PlanPanel(QWidget):
    """Memory per device for the selected model and profile, with a fit solver and an override builder."""

    TWO_COLUMNS_FROM_PX = 1000  # below this the four boxes stack in one column

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        # what this view plans for and writes into the profile: the state its widgets bind to
        speed = SpeedModel(lambda: load_basis(ctx.engine), run=self._run)  # the store: off the GUI thread
        self.plan_state = PlanState(inventory=lambda: ctx.state.inventory, settings=lambda: ctx.settings,
                                    run=self._run, speed=speed)
        self._syncing = False  # the controls are being set from the state: their changes are not the user's
        self._timer = QTimer(self, singleShot=True, interval=0)  # one recompute for the changes of one event
        self._timer.timeout.connect(self._recompute)
        self._build()
        guard_wheel(self)  # the page scrolls under the wheel; values change only in a clicked field
        self.plan_state.add_callback(self._on_plan_state_changed)
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)  # a method: disconnected with the panel
        ctx.state.bench_runs_changed.connect(self._on_state_bench_runs_changed)  # a run may refine the calibration
        if ctx.state.profile is not None:
            self.plan_state.use_profile(ctx.state.profile)
        if ctx.state.model_path:
            self.plan_state.select_model(ctx.state.model_path)
        self._show_empty()
        speed.load()

    def _run(self, work, done, failed) -> None:
        """PlanState's slow reads (a model header, RPC workers' devices) as a BackgroundJob of this panel."""
        job = BackgroundJob(lambda _c: work(), self, what="Reading the model for the plan", on_failed=failed)
        job.succeeded.connect(done)
        job.start()

    def _on_plan_state_changed(self, what: str, *details) -> None:
        st = self.plan_state
        if what == "model":
            if st.model is not None:
                self._show_model(st.model)
            self.model_label.setText(st.model_line())
            self.solve_label.clear()  # "Select a model first." or an answer about the previous model
            self.check_table.setRowCount(0)
            self._show_empty()
        elif what == "note":
            self.model_label.setText(st.model_line())
        elif what == "args":
            self._sync_controls()
        elif what == "inputs":
            self._schedule()
        elif what == "overrides":
            self.ot_box.refresh()
        elif what == "profile":
            self.ctx.state.set_profile(details[0])

    # -- layout --------------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QVBoxLayout(self)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        outer.addWidget(scroll)
        body = QWidget()
        scroll.setWidget(body)
        lay = QVBoxLayout(body)

        head = QHBoxLayout()
        self.model_label = QLabel()
        self.model_label.setWordWrap(True)
        head.addWidget(self.model_label, 1)
        self.open_button = QPushButton("Open GGUF…")
        self.open_button.clicked.connect(self._on_open_clicked)
        head.addWidget(self.open_button)
        lay.addLayout(head)

        self.bars = MemoryBarsWidget()
        self.speed_box = PlanSpeedBox(self.plan_state)  # beside the bars: prefill, generation, TTFT, the curve
        memory = QVBoxLayout()  # the bars and what they say, left of the speed
        memory.setContentsMargins(0, 0, 0, 0)
        memory.addWidget(self.bars)
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        memory.addWidget(self.summary_label)
        self.pipeline_label = QLabel()  # pipeline parallelism on several devices: on/off, why, its memory
        self.pipeline_label.setWordWrap(True)
        memory.addWidget(self.pipeline_label)
        self.warnings_label = QLabel()
        self.warnings_label.setWordWrap(True)
        self.warnings_label.setStyleSheet("color: #b15d00")
        memory.addWidget(self.warnings_label)
        memory.addStretch(1)
        top = QHBoxLayout()
        top.addLayout(memory, 2)
        top.addWidget(self.speed_box, 1)
        lay.addLayout(top)

        grid = QGridLayout()
        lay.addLayout(grid)
        self._grid = grid

        # settings (plan_settings: the profile's values in controls; one it cannot show is kept and said)
        box = PlanSettingsBox()
        self.settings_box = box
        for name in ("ctx_spin", "ngl_spin", "ctk_combo", "ctv_combo", "np_spin", "fa_combo", "ub_combo",
                     "controls_note"):
            setattr(self, name, getattr(box, name))
        box.control_changed.connect(self._on_control_changed)
        grid.addWidget(box, 0, 0)

        # devices and fit
        dbox = QGroupBox("Devices and fit")
        dl = QVBoxLayout(dbox)
        self.devices_label = QLabel()
        self.devices_label.setWordWrap(True)
        dl.addWidget(self.devices_label)
        addrow = QHBoxLayout()
        self.planned_name = QLineEdit(placeholderText="name, e.g. Vulkan1")
        self.planned_backend = QComboBox()
        self.planned_backend.addItems(BACKENDS)
        self.planned_mib = QSpinBox(minimum=256, maximum=2_000_000, value=24576, singleStep=1024, suffix=" MiB")
        self.add_planned_button = QPushButton("Add planned device")
        self.add_planned_button.clicked.connect(self._on_add_planned_clicked)
        self.clear_planned_button = QPushButton("Clear planned")
        self.clear_planned_button.clicked.connect(self._on_clear_planned_clicked)
        for w in (self.planned_name, self.planned_backend, self.planned_mib):
            addrow.addWidget(w)
        dl.addLayout(addrow)
        addrow2 = QHBoxLayout()
        addrow2.addWidget(self.add_planned_button)
        addrow2.addWidget(self.clear_planned_button)
        self.use_workers_button = QPushButton("Use Settings' workers (--rpc)")
        self.use_workers_button.setToolTip("Write the RPC workers listed in Settings into the profile's --rpc: their "
                                           "devices (RPC0, RPC1, ...) join the plan, first, as llama.cpp orders them")
        self.use_workers_button.clicked.connect(self._on_use_workers_clicked)
        addrow2.addWidget(self.use_workers_button)
        addrow2.addStretch(1)
        dl.addLayout(addrow2)
        # devices the profile names (-dev) that this machine does not have: no size, so no fit verdict
        self.add_unknown_button = QPushButton()
        self.add_unknown_button.setToolTip("Plan the devices the profile names but this machine does not have, "
                                           "with the size set above (as 'Add planned device' does)")
        self.add_unknown_button.clicked.connect(self._on_add_unknown_clicked)
        self.add_unknown_button.hide()
        self.planned_mib.valueChanged.connect(self._update_unknown_button)
        dl.addWidget(self.add_unknown_button)
        self.split_bar = SplitBarWidget()
        self.split_bar.split_edited.connect(self._on_split_edited)
        self.split_label = QLabel("Tensor split (-ts): drag a boundary to move layers between devices")
        dl.addWidget(self.split_label)
        dl.addWidget(self.split_bar)
        frow = QHBoxLayout()
        self.margin_label = QLabel("Keep free per device (-fitt)")
        frow.addWidget(self.margin_label)
        self.margin_spin = QSpinBox(minimum=0, maximum=65536, value=FIT_TARGET_MIB, singleStep=128, suffix=" MiB")
        box.watch("fitt", self.margin_spin, self.margin_label, "fit_target_mib")
        frow.addWidget(self.margin_spin)
        dl.addLayout(frow)
        srow = QHBoxLayout()
        self.solve_ctx_button = QPushButton("Largest context that fits")
        self.solve_layers_button = QPushButton("Most GPU layers")
        self.solve_split_button = QPushButton("Balance split")
        self.solve_ctx_button.clicked.connect(lambda: self._on_solve_clicked("context"))
        self.solve_layers_button.clicked.connect(lambda: self._on_solve_clicked("layers"))
        self.solve_split_button.clicked.connect(lambda: self._on_solve_clicked("split"))
        for w in (self.solve_ctx_button, self.solve_layers_button, self.solve_split_button):
            srow.addWidget(w)
        dl.addLayout(srow)
        self.solve_label = QLabel()
        self.solve_label.setWordWrap(True)
        dl.addWidget(self.solve_label)
        grid.addWidget(dbox, 0, 1)

        # override builder (its own box; the preview is core.memory.preview_rule)
        obox = OverrideBuilderBox(self.plan_state, self)
        self.ot_box = obox
        for name in ("ot_mode", "ot_a", "ot_b", "ot_regex", "ot_preview_label", "ot_matches", "ot_add_button",
                     "ot_clear_button", "ot_rules_label"):
            setattr(self, name, getattr(obox, name))
        grid.addWidget(obox, 1, 0)

        # check with llama.cpp (its own box; the comparison is core.memory_check)
        cbox = LlamaCheckBox(self.plan_state, lambda: self.ctx.settings, self)
        self.check_button, self.check_label, self.check_table = cbox.check_button, cbox.check_label, cbox.check_table
        grid.addWidget(cbox, 1, 1)
        self._boxes = (box, dbox, obox, cbox)
        self._columns = 2
        self.router_box = RouterPlanBox(self.plan_state, self, engine=self.ctx.engine)  # a router: models together
        lay.addWidget(self.router_box)
        lay.addStretch(1)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        columns = 2 if event.size().width() >= self.TWO_COLUMNS_FROM_PX else 1
        if columns != self._columns:  # a narrow window (1366 px with the Models dock): one column, no sideways scroll
            self._columns = columns
            for i, b in enumerate(self._boxes):
                self._grid.removeWidget(b)
                self._grid.addWidget(b, *((i // 2, i % 2) if columns == 2 else (i, 0)))

    # -- binding ---------------------------------------------------------------------------------------
    def _show_empty(self) -> None:
        if self.plan_state.model is None or self.plan_state.args_error:
            self.model_label.setText(self.plan_state.model_line())
            self.bars.set_devices(())
            self.summary_label.clear()
            self.pipeline_label.clear()
            self.pipeline_label.hide()
            self.warnings_label.clear()
            self.solve_label.clear()
            self.speed_box.refresh()
            self.ot_box.refresh()  # no tensors of a previous model

    def _show_model(self, info) -> None:
        """The controls' ranges for this model (its layers, its trained context)."""
        self._syncing = True
        self.settings_box.set_tooltip("ngl", f"{(info.block_count or 0) + 1} or more = every layer of this model on GPUs")
        self.ctx_spin.setMaximum(max(self.ctx_spin.maximum(), (info.context_length or 0) * 4))
        self.ot_box.set_block_count(info.block_count or 1)
        self._syncing = False

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.ctx.state.select_model(Path(path))

    def _on_state_model_selected(self, path) -> None:
        self.plan_state.select_model(path)

    def _on_state_profile_changed(self, profile) -> None:
        self.plan_state.use_profile(profile)

    def _sync_controls(self) -> None:
        """Show the state's values in the controls (a value one cannot show is kept and said: plan_settings)."""
        self._syncing = True
        try:
            args = self.plan_state.args
            self.settings_box.show_args(args)
            if not args.fit_target_mib:  # no -fitt: the margin in force is the default one
                self.margin_spin.setValue(self.plan_state.margin_mib)
        finally:
            self._syncing = False

    def _on_control_changed(self, key: str) -> None:
        """One control was changed by the user: PlanState writes its flag (only it) into the args and profile."""
        if self._syncing:
            return
        value = {"ctx": self.ctx_spin.value, "ngl": self.ngl_spin.value, "ctk": self.ctk_combo.currentText,
                 "ctv": self.ctv_combo.currentText, "np": self.np_spin.value, "fa": self.fa_combo.currentText,
                 "ub": self.ub_combo.currentText, "fitt": self.margin_spin.value}[key]()
        self.plan_state.set_value(key, value)

    # -- devices -------------------------------------------------------------------------------------
    def _on_add_planned_clicked(self) -> None:
        backend = self.planned_backend.currentText()
        name = self.planned_name.text().strip() or self.plan_state.next_device_name(backend)
        self.plan_state.add_planned_device(name, backend, self.planned_mib.value())
        self.planned_name.clear()

    def _on_use_workers_clicked(self) -> None:
        self.plan_state.use_workers(tuple(w.endpoint for w in self.ctx.settings.rpc_workers))

    def _update_unknown_button(self) -> None:
        names = self.plan_state.unknown_devices()
        self.add_unknown_button.setVisible(bool(names))
        if names:
            self.add_unknown_button.setText(f"Add {', '.join(names)} as planned device{'s' if len(names) > 1 else ''} "
                                            f"({format_mib(self.planned_mib.value())}{' each' if len(names) > 1 else ''})")

    def _on_add_unknown_clicked(self) -> None:
        self.plan_state.plan_unknown_devices(self.planned_mib.value())

    def _on_clear_planned_clicked(self) -> None:
        self.plan_state.clear_planned()

    def _on_split_edited(self, shares) -> None:
        self.plan_state.set_split(shares)

    def _on_solve_clicked(self, goal: str) -> None:
        self.solve_label.setText(self.plan_state.solve(goal))

    # -- plan ------------------------------------------------------------------------------------------
    def _on_state_inventory_detected(self, _inventory) -> None:
        self._schedule()

    def _on_state_bench_runs_changed(self) -> None:
        self.plan_state.speed.load()

    def _schedule(self) -> None:
        self._timer.start()

    def recompute_now(self) -> MemoryPlan | None:
        self._recompute()
        return self.plan_state.plan

    def _recompute(self) -> None:
        st = self.plan_state
        p = st.recompute()
        if p is None:
            self._show_empty()
            return
        self.bars.set_devices(p.devices)
        self.summary_label.setText(st.summary())
        self.pipeline_label.setText(st.pipeline_line())
        self.pipeline_label.setVisible(bool(st.pipeline_line()))
        self.warnings_label.setText("\n".join(f"⚠ {w}" for w in p.warnings))
        self.devices_label.setText(st.devices_line())
        split = st.split()
        self.split_bar.setVisible(split is not None)
        self.split_label.setVisible(split is not None)
        self.solve_split_button.setEnabled(split is not None)
        if split is not None:
            self.split_bar.set_split(*split)
        self._update_unknown_button()
        self.speed_box.refresh()
        self.ot_box.refresh()  # the preview depends on the devices and the rules set: never stale
