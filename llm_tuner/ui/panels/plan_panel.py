"""Plan panel: what fits where before launch (weights / KV / compute per device), edited live.

The plan (core.memory.plan_memory) is pure and takes a few ms, so it is recomputed on every change.
Reading the model header and the "Check with llama.cpp" run happen in BackgroundJobs.
When a profile is being edited (AppState.profile) the panel reads it and writes its changes back
with AppState.set_profile; without one, its own controls hold the settings.
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

from llm_tuner.core import flags
from llm_tuner.core.cmdline import effective_profile
from llm_tuner.core.devices import backend_of
from llm_tuner.core.memory import (
    FIT_TARGET_MIB,
    Calibration,
    MemoryPlan,
    PlacementArgs,
    PlanDevice,
    args_from_profile,
    listed_device,
    overrides_as_profile,
    placement_argv,
    plan_gpus,
    plan_memory,
    solve,
)
from llm_tuner.core.profile import OverrideRule
from llm_tuner.core.rpc import default_device_order
from llm_tuner.core.units import format_mib
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import worker_devices
from llm_tuner.ui.panels.plan_check import LlamaCheckBox
from llm_tuner.ui.panels.plan_overrides import OverrideBuilderBox
from llm_tuner.ui.panels.plan_settings import PlanSettingsBox
from llm_tuner.ui.plots.memory_bars import MemoryBarsWidget, SplitBarWidget
from llm_tuner.ui.wheel_guard import guard_wheel

BACKENDS = ("CUDA", "ROCm", "Vulkan", "Metal", "SYCL", "MUSA")


class PlanPanel(QWidget):
    """Memory per device for the selected model and profile, with a fit solver and an override builder."""

    TWO_COLUMNS_FROM_PX = 1000  # below this the four boxes stack in one column

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._no_model_reason: str | None = None  # why there is no plan, when it is not 'nothing chosen'
        self.ctx = ctx
        self.model = None  # core.gguf_info.ModelInfo
        self.draft_model = None  # the profile's -md draft (ModelInfo), planned beside the model
        self.args = PlacementArgs()
        self.plan: MemoryPlan | None = None
        self.planned: list[PlanDevice] = []
        self.rpc_devices: list = []  # the profile's RPC workers' devices (core.devices.LlamaDevice), once read
        self.rpc_error: str | None = None
        self._rpc_for: tuple[str, ...] = ()  # the endpoints rpc_devices belong to
        self._syncing = False
        self._jobs: list[BackgroundJob] = []
        # compute calibration learnt from "Check with llama.cpp", per model path (measured / estimated)
        self._calibrations: dict[str, Calibration] = {}
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._recompute)
        self._build()
        guard_wheel(self)  # the page scrolls under the wheel; values change only in a clicked field
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)  # a method: disconnected with the panel
        if ctx.state.profile is not None:
            self._on_state_profile_changed(ctx.state.profile)
        if ctx.state.model_path:
            self._on_state_model_selected(ctx.state.model_path)
        self._show_empty()

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
        lay.addWidget(self.bars)
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        lay.addWidget(self.summary_label)
        self.warnings_label = QLabel()
        self.warnings_label.setWordWrap(True)
        self.warnings_label.setStyleSheet("color: #b15d00")
        lay.addWidget(self.warnings_label)

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
        obox = OverrideBuilderBox(self)
        self.ot_box = obox
        for name in ("ot_mode", "ot_a", "ot_b", "ot_regex", "ot_preview_label", "ot_matches", "ot_add_button",
                     "ot_clear_button", "ot_rules_label"):
            setattr(self, name, getattr(obox, name))
        grid.addWidget(obox, 1, 0)

        # check with llama.cpp (its own box; the comparison is core.memory_check)
        cbox = LlamaCheckBox(self)
        cbox.calibration_learnt.connect(self._on_check_calibration_learnt)
        self.check_button, self.check_label, self.check_table = cbox.check_button, cbox.check_label, cbox.check_table
        grid.addWidget(cbox, 1, 1)
        self._boxes = (box, dbox, obox, cbox)
        self._columns = 2
        lay.addStretch(1)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        columns = 2 if event.size().width() >= self.TWO_COLUMNS_FROM_PX else 1
        if columns != self._columns:  # a narrow window (1366 px with the Models dock): one column, no sideways scroll
            self._columns = columns
            for i, b in enumerate(self._boxes):
                self._grid.removeWidget(b)
                self._grid.addWidget(b, *((i // 2, i % 2) if columns == 2 else (i, 0)))

    # -- state ---------------------------------------------------------------------------------------
    def _show_empty(self) -> None:
        if self.model is None:
            self.model_label.setText(self._no_model_reason or (
                "No model selected. Choose one in the Models view, or open a GGUF file here, to see what fits "
                "on each device."))
            self.bars.set_devices(())
            self.summary_label.clear()
            self.warnings_label.clear()
            self.solve_label.clear()
            self.ot_box.refresh()  # no tensors of a previous model

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.ctx.state.select_model(Path(path))

    def _on_state_model_selected(self, path) -> None:
        if not path:
            self.model = None
            self._show_empty()
            return
        self.load_model(Path(path))

    def load_model(self, path: Path) -> None:
        """Read the model header off the GUI thread, then plan."""
        self.model_label.setText(f"Reading {path.name} …")
        job = BackgroundJob(lambda _c: read_model(path), self)
        job.succeeded.connect(self._on_model_read)
        job.failed.connect(lambda exc: self.model_label.setText(f"Could not read {path.name}: {exc}"))
        self._jobs.append(job)
        job.finished.connect(lambda: self._jobs.remove(job) if job in self._jobs else None)
        job.start()

    def _load_draft(self, path: str | None) -> None:
        """Read the profile's draft model (-md) off the GUI thread; the plan counts it once read."""
        if not path:
            self.draft_model = None
            return
        if self.draft_model is not None and str(self.draft_model.path) == str(Path(path).expanduser()):
            return

        self.draft_model = None
        job = BackgroundJob(lambda _c: read_model(Path(path).expanduser()), self)
        job.succeeded.connect(self._on_draft_read)
        self._jobs.append(job)
        job.finished.connect(lambda: self._jobs.remove(job) if job in self._jobs else None)
        job.start()

    def _on_draft_read(self, info) -> None:
        if info.error or str(info.path) != str(Path(self.args.draft_model or "").expanduser()):
            return  # unreadable, or the profile has another draft by now (the plan warns about neither)
        self.draft_model = info
        self._schedule()

    def _on_model_read(self, info) -> None:
        if info.error:
            self.model_label.setText(f"{Path(info.path).name}: {info.error}. Choose another file.")
            return
        self.set_model(info)

    def set_model(self, info) -> None:
        self.model = info
        self._no_model_reason = None
        self.solve_label.clear()  # "Select a model first." or an answer about the previous model
        self.check_table.setRowCount(0)
        self._syncing = True
        self.settings_box.set_tooltip("ngl", f"{(info.block_count or 0) + 1} or more = every layer of this model on GPUs")
        self.ctx_spin.setMaximum(max(self.ctx_spin.maximum(), (info.context_length or 0) * 4))
        self.ot_box.set_block_count(info.block_count or 1)
        self._syncing = False
        label = info.display_name()
        self.model_label.setText(f"<b>{label}</b> — {info.architecture}, {info.file_type or ''}, "
                                 f"{info.block_count} blocks, trained context {info.context_length}, "
                                 f"{format_mib(info.size_bytes / 1048576)}")
        self._schedule()

    def _on_state_profile_changed(self, profile) -> None:
        if profile is None or self._syncing:
            return
        self.args = args_from_profile(profile)  # its effective arguments: LLAMA_ARG_* count, as for the server
        self._sync_controls()
        self._load_draft(self.args.draft_model)
        self._read_rpc_devices(tuple(effective_profile(profile).rpc))
        model_path = self.args.model
        if model_path and (self.model is None or str(self.model.path) != str(model_path)):
            if Path(model_path).expanduser().is_file():
                self.load_model(Path(model_path).expanduser())
            else:  # never a plan for another model than the profile's
                self.model = None
                self.plan = None
                self._no_model_reason = (f"The profile's model file {model_path} does not exist. Pick the model "
                                         "in the Models list, or correct the path in the Profile tab.")
                self._show_empty()
                return
        self._schedule()

    def _sync_controls(self) -> None:
        """Show the profile's values in the controls (a value one cannot show is kept and said: plan_settings)."""
        self._syncing = True
        try:
            self.settings_box.show_args(self.args)
        finally:
            self._syncing = False

    def _on_control_changed(self, key: str) -> None:
        """One control was changed by the user: its flag (only it) goes into the args and the profile."""
        if self._syncing:
            return
        if key == "fitt":
            self._on_margin_changed(self.margin_spin.value())
            return
        if key == "ctx":
            ctx = self.ctx_spin.value()
            args = {"ctx": ctx if ctx > 0 else (0 if self.args.ctx is not None else None)}
            changes = {"ctx_size": ctx if ctx > 0 else None}
        elif key == "ngl":
            ngl = self.ngl_spin.value()
            args, changes = {"ngl": None if ngl < 0 else ngl}, {"gpu_layers": None if ngl < 0 else ngl}
        elif key in ("ctk", "ctv"):
            text = (self.ctk_combo if key == "ctk" else self.ctv_combo).currentText()
            field = "cache_type_k" if key == "ctk" else "cache_type_v"
            args, changes = {field: text}, {field: self._or_none(text, "f16")}
        elif key == "np":
            np_ = self.np_spin.value()
            args, changes = {"n_parallel": -1 if np_ == 0 else np_}, {"parallel": None if np_ == 0 else np_}
        elif key == "fa":
            text = self.fa_combo.currentText()
            args, changes = {"flash_attn": text}, {"flash_attn": self._or_none(text, "auto")}
        else:
            ub = int(self.ub_combo.currentText())
            args, changes = {"n_ubatch": ub}, {"ubatch_size": self._or_none(ub, 512)}
        self.args = self.args.with_(**args)
        self._write_profile(**changes)
        self._schedule()

    @staticmethod
    def _or_none(value, default):
        return None if value == default else value

    def _write_profile(self, **changes) -> None:
        """Write changes into the profile being edited (if there is one) and tell the other panels."""
        profile = self.ctx.state.profile
        if profile is None:
            return
        self._syncing = True
        try:
            self.ctx.state.set_profile(profile.model_copy(update=changes))
        finally:
            self._syncing = False

    def _on_margin_changed(self, value: int) -> None:
        self.args = self.args.with_(fit_target_mib=(value,))
        self._write_profile(fit_target_mib=(value,) if value != FIT_TARGET_MIB else ())
        self._schedule()

    # -- devices -------------------------------------------------------------------------------------
    def gpus(self) -> list[PlanDevice]:
        """The devices llama.cpp would use without -dev, in its order: the RPC workers' first, then local ones."""
        inv = self.ctx.state.inventory
        out = [d for d in plan_gpus(inv) if d.backend != "RPC"]  # each with its card's pool: CUDA0 and Vulkan0 share one
        out += [listed_device(d) for d in self.rpc_devices]
        names = {d.name for d in out}
        out.extend(d for d in self.planned if d.name not in names)
        return default_device_order(out)

    def _read_rpc_devices(self, endpoints: tuple[str, ...]) -> None:
        """Ask llama-server for the profile's RPC workers' devices (off the GUI thread) when --rpc changed."""
        if endpoints == self._rpc_for:
            return
        self._rpc_for, self.rpc_devices, self.rpc_error = endpoints, [], None
        if not endpoints:
            return

        settings = self.ctx.settings
        job = BackgroundJob(lambda _c: worker_devices(list(endpoints), settings, timeout_s=15), self)
        job.succeeded.connect(lambda devs, e=endpoints: self._on_rpc_read(e, list(devs), None))
        job.failed.connect(lambda exc, e=endpoints: self._on_rpc_read(e, [], str(exc)))
        self._jobs.append(job)
        job.finished.connect(lambda: self._jobs.remove(job) if job in self._jobs else None)
        job.start()

    def _on_rpc_read(self, endpoints: tuple[str, ...], devices: list, error: str | None) -> None:
        if endpoints == self._rpc_for:  # else the profile has other workers by now
            self.rpc_devices, self.rpc_error = devices, error
            self._schedule()

    def host(self) -> PlanDevice:
        inv = self.ctx.state.inventory
        if inv is not None and inv.host.memory_total_mib:
            return PlanDevice("Host", "CPU", inv.host.memory_total_mib, inv.host.memory_available_mib,
                              inv.host.cpu_model or "")
        return PlanDevice("Host", "CPU", None)

    def cpu_flags(self) -> tuple[str, ...]:
        inv = self.ctx.state.inventory
        return tuple(inv.host.cpu_flags) if inv is not None else ()

    def add_planned_device(self, name: str, backend: str, mib: int) -> None:
        backend = backend or backend_of(name)
        self.planned = [d for d in self.planned if d.name != name]
        self.planned.append(PlanDevice(name, backend, mib, None, "planned", True))
        self._schedule()

    def _on_add_planned_clicked(self) -> None:
        backend = self.planned_backend.currentText()
        prefix = {"Metal": "MTL"}.get(backend, backend)
        name = self.planned_name.text().strip()
        if not name:
            used = {d.name for d in self.gpus()}
            i = 0
            while f"{prefix}{i}" in used:
                i += 1
            name = f"{prefix}{i}"
        self.add_planned_device(name, backend, self.planned_mib.value())
        self.planned_name.clear()

    def _on_use_workers_clicked(self) -> None:
        endpoints = tuple(w.endpoint for w in self.ctx.settings.rpc_workers)
        self._write_profile(rpc=endpoints)
        self._read_rpc_devices(endpoints)

    def unknown_devices(self) -> list[str]:
        """The plan's devices without a size (named by -dev, not on this machine nor planned)."""
        p = self.plan
        return [d.name for d in p.devices if d.name != "Host" and d.capacity_mib is None] if p is not None else []

    def _update_unknown_button(self) -> None:
        names = self.unknown_devices()
        self.add_unknown_button.setVisible(bool(names))
        if names:
            self.add_unknown_button.setText(f"Add {', '.join(names)} as planned device{'s' if len(names) > 1 else ''} "
                                            f"({format_mib(self.planned_mib.value())}{' each' if len(names) > 1 else ''})")

    def _on_add_unknown_clicked(self) -> None:
        for name in self.unknown_devices():
            self.add_planned_device(name, backend_of(name), self.planned_mib.value())

    def _on_clear_planned_clicked(self) -> None:
        self.planned = []
        self._schedule()

    def _on_split_edited(self, shares) -> None:
        ts = tuple(round(float(s)) for s in shares)
        self.args = self.args.with_(tensor_split=tuple(float(x) for x in ts))
        self._write_profile(tensor_split=tuple(float(x) for x in ts))
        self._schedule()

    # -- solver --------------------------------------------------------------------------------------
    def _on_solve_clicked(self, goal: str) -> None:
        if self.model is None:
            self.solve_label.setText("Select a model first.")
            return
        gpus = self.gpus()
        targets = {d.name: self.margin_spin.value() for d in gpus}
        targets["Host"] = 0
        ans = solve(self.model, self.args, gpus, self.host(), goal=goal, targets_mib=targets,
                    cpu_flags=self.cpu_flags())
        self.solve_label.setText(ans.reason)
        if ans.args is None:
            return
        if goal == "context":
            self.args = self.args.with_(ctx=ans.value)
            self._write_profile(ctx_size=ans.value)
        elif goal == "layers":
            # the whole placement (-ngl and, for MoE, --n-cpu-moe) goes into the profile: it is what launches
            self.args = self.args.with_(ngl=ans.args.ngl, overrides=ans.args.overrides)
            self._write_profile(gpu_layers=ans.args.ngl)
            self._write_overrides()
        else:
            self.args = self.args.with_(tensor_split=ans.args.tensor_split)
            self._write_profile(tensor_split=ans.args.tensor_split)
        self._sync_controls()
        self._schedule()

    # -- override rules ---------------------------------------------------------------------------------
    def current_rule(self) -> str:
        return self.ot_box.current_rule()

    def set_overrides(self, overrides: tuple[tuple[str, str], ...]) -> None:
        """Replace the tensor overrides (the builder's Add / Remove all) and write them into the profile."""
        self.args = self.args.with_(overrides=tuple(overrides))
        self._write_overrides()
        self.ot_box.refresh()
        self._schedule()

    def _write_overrides(self) -> None:
        profile = self.ctx.state.profile
        if profile is None:
            return

        cpu_moe, n_cpu_moe, rest = overrides_as_profile(self.args.overrides)
        self._write_profile(override_tensor=tuple(OverrideRule(pattern=p, buffer=b) for p, b in rest),
                            cpu_moe=cpu_moe, n_cpu_moe=n_cpu_moe)

    # -- check with llama.cpp -------------------------------------------------------------------------------
    def check_argv(self) -> list[str]:
        """llama-server arguments for the current settings (what the check runs), -fit off."""
        argv = placement_argv(self.args.with_(model=str(self.model.path), fit=True))
        rpc = flags.argv_for("rpc", ",".join(self._rpc_for)) if self._rpc_for else []  # before -dev
        return [*rpc, *argv, *flags.argv_for("fit", "off"), *flags.argv_for("threads", "2")]

    def calibration(self, model_path: str) -> Calibration | None:
        """The compute calibration learnt for a model by a llama.cpp check (None: not checked)."""
        return self._calibrations.get(model_path)

    def _on_check_calibration_learnt(self, model_path: str, calibration: Calibration) -> None:
        self._calibrations[model_path] = calibration
        self._schedule()

    # -- plan ------------------------------------------------------------------------------------------
    def _on_state_inventory_detected(self, _inventory) -> None:
        self._schedule()

    def _schedule(self) -> None:
        self._timer.start()

    def recompute_now(self) -> MemoryPlan | None:
        self._recompute()
        return self.plan

    def _recompute(self) -> None:
        if self.model is None:
            self._show_empty()
            return
        gpus = self.gpus()
        cal = self._calibrations.get(str(self.model.path))
        draft = self.draft_model if self.args.draft_model else None
        self.plan = plan_memory(self.model, self.args, gpus, self.host(), cpu_flags=self.cpu_flags(),
                                calibration=cal, draft_model=draft)
        p = self.plan
        host = p.device("Host")
        holders = [d.name for d in p.devices if d.name != "Host" and d.model_mib > 0]  # GPUs, RPC devices (CPUs too)
        self.bars.set_devices(p.devices)
        self.summary_label.setText(
            f"n_ctx {p.n_ctx} ({p.n_seq_max} slot{'s' if p.n_seq_max > 1 else ''}, "
            f"{'unified' if p.kv_unified else 'per-slot'} KV), flash attention {'on' if p.flash_attn else 'off'}, "
            f"{p.n_gpu_layers}/{p.n_layers_total} layers offloaded"
            + (f" (to {', '.join(holders)}). " if holders and p.n_gpu_layers else ". ")
            + (f"Draft model {Path(str(draft.path)).name} included. " if draft is not None else
               ("Draft model not read yet. " if self.args.draft_model else ""))
            + self._verdict(p)
            + (f" Host: {format_mib(host.resident_mib)} must stay resident; {format_mib(host.mapped_mib)} of "
               f"weights are mapped from the file (-lm {self.args.load_mode}: the page cache may evict them, "
               "-lm mmap+mlock would pin them)." if host is not None and host.mapped_mib else "")
            + (" Compute calibrated from a llama.cpp check (" + ", ".join(
                f"{b} ×{v:.2f}" for b, v in cal.compute_scale.items()) + ")." if cal and cal.compute_scale else ""))
        self.warnings_label.setText("\n".join(f"⚠ {w}" for w in p.warnings))
        names = [d.name for d in p.devices if d.name != "Host"]
        self.devices_label.setText(
            "Devices: " + (", ".join(f"{d.name} ({format_mib(d.capacity_mib)}{', planned' if d.hypothetical else ''})"
                                     for d in p.devices if d.name != "Host") or "none (CPU only)")
            + f"; host RAM {format_mib(self.host().capacity_mib)} total, {format_mib(self.host().free_mib)} free"
            + (f". RPC workers: {self.rpc_error}" if self.rpc_error else "")
            + "".join(f". {d.name} is the worker {d.description}" for d in self.rpc_devices))
        multi = len(names) > 1
        self.split_bar.setVisible(multi)
        self.split_label.setVisible(multi)
        self.solve_split_button.setEnabled(multi)
        if multi:
            ts = list(self.args.tensor_split[:len(names)])
            if len(ts) < len(names) or not any(ts):
                ts = [float(d.layers) for d in p.devices if d.name != "Host"]
            self.split_bar.set_split(names, ts)
        self._update_unknown_button()
        self.ot_box.refresh()  # the preview depends on the devices and the rules set: never stale

    def _verdict(self, p: MemoryPlan) -> str:
        """'Fits.', 'Does NOT fit.', or why there is no verdict (a device's size is unknown: MemoryPlan.fits)."""
        if p.fits is not None:
            return "Fits." if p.fits else "Does NOT fit."
        unknown = self.unknown_devices()
        host = p.device("Host")
        return "No fit verdict: " + "; ".join(
            ([f"the size of {', '.join(unknown)} is unknown (not on this machine): add "
              f"{'them' if len(unknown) > 1 else 'it'} as planned (below) to see whether it fits"] if unknown else [])
            + (["this machine's memory is not read yet"] if host is not None and host.budget_mib is None else [])) + "."
