"""The Plan tab's router box: a router profile's models (no -m; --models-dir / --models-preset) planned
together.

Shown while the edited profile is a router: each model's use per device (its own arguments, as the router
gives them: services.router_presets), the sets that fit together, the pairs that do not, the safe --models-max
(core.memory.plan_router), on the Plan's devices (detected and planned). Reading the models' headers runs as a
background job; this box only shows the answer. "Write presets…" saves a --models-preset file: a model with a
saved profile of its name takes that profile's arguments, one without the fit solver's placement (what all
share goes to [*]); "Open presets…" reads one and saves each model's section as a profile of its name.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.advice import is_router
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.router_presets import plan_profile, presets_for_router, profiles_in, write_presets
from llm_tuner.store.profiles import ProfileRepository


class RouterPlanBox(QGroupBox):
    """A router's models planned as a whole (hidden for a profile with a model of its own)."""

    def __init__(self, plan_state, parent: QWidget | None = None, *, engine=None) -> None:
        super().__init__("Router: its models together", parent)
        self.setObjectName("router_plan")
        self.plan_state = plan_state
        self.repo = ProfileRepository(engine) if engine is not None else None  # the saved profiles
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("router_plan_table")
        self.table.verticalHeader().setVisible(False)
        self.lines = QLabel("")
        self.lines.setObjectName("router_plan_lines")
        self.lines.setWordWrap(True)
        self.write_button = QPushButton("Write presets…")
        self.write_button.setToolTip(
            "Save these models' arguments as a --models-preset file (shared ones in [*])"
        )
        self.write_button.clicked.connect(self._on_write_button_clicked)
        self.open_button = QPushButton("Open presets…")
        self.open_button.setToolTip("Read a --models-preset file: each model's section as a profile")
        self.open_button.clicked.connect(self._on_open_button_clicked)
        row = QHBoxLayout()
        row.addWidget(self.write_button)
        row.addWidget(self.open_button)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.table)
        lay.addWidget(self.lines)
        lay.addLayout(row)
        self.named: dict[str, list[str]] = {}
        self.plan = None
        self.opened: dict = {}  # the profiles of the last presets file opened (name -> LaunchProfile)
        self._asked = 0
        self._key: tuple | None = None  # the profile and devices last planned
        plan_state.add_callback(self._on_plan_state_changed)
        self.setVisible(False)

    def _on_plan_state_changed(self, what: str, *_details) -> None:
        if what in ("inputs", "args", "note", "profile"):
            self.refresh()

    def refresh(self) -> None:
        """Plan the edited profile's router models again (a background job), or hide for a plain profile."""
        profile = self.plan_state.profile
        if profile is None or not is_router(profile):
            self.setVisible(False)
            return
        self.setVisible(True)
        st = self.plan_state
        gpus, host, cpu = st.gpus(), st.host(), st.cpu_flags()
        key = (profile.model_dump_json(), tuple(gpus), host)
        if key == self._key:
            return  # a control of the single-model plan moved: the router's models are as they were
        self._key = key
        self._asked += 1
        asked = self._asked
        job = BackgroundJob(
            lambda _c: plan_profile(profile, gpus, host, cpu),
            self,
            what="Planning the router's models",
            on_failed=lambda exc: self._on_failed(asked, exc),
        )
        job.succeeded.connect(lambda result: self._on_planned(asked, result))
        job.start()

    def _on_failed(self, asked: int, exc: BaseException) -> None:
        if asked == self._asked:
            self.summary.setText(f"The router's models could not be read: {exc}")
            self.table.setRowCount(0)
            self.lines.clear()

    def _on_planned(self, asked: int, result) -> None:
        if asked != self._asked:
            return  # a newer question is on its way
        self.named, self.plan = result
        self.show_plan(self.plan)

    def show_plan(self, plan) -> None:
        devs = list(plan.budgets_mib)
        self.table.setColumnCount(1 + len(devs))
        self.table.setHorizontalHeaderLabels(["Model", *[f"{d} (MiB)" for d in devs]])
        self.table.setRowCount(len(plan.models) + 2)
        for r, m in enumerate(plan.models):
            use = m.use_mib
            cells = [
                m.name,
                *[(f"{use.get(d, 0.0):.0f}" if m.plan is not None else (m.error or "—")) for d in devs],
            ]
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        n = len(plan.models)
        for r, (label, values) in enumerate(
            (
                ("available", [plan.budgets_mib[d] for d in devs]),
                ("margin", [plan.margins_mib.get(d, 0) for d in devs]),
            ),
            n,
        ):
            self.table.setItem(r, 0, QTableWidgetItem(label))
            for c, v in enumerate(values, 1):
                self.table.setItem(r, c, QTableWidgetItem("?" if v is None else f"{v:.0f}"))
        self.table.resizeColumnsToContents()
        self.summary.setText(
            f"{n} model(s), each planned with its own arguments on these devices; a set fits "
            "when together they leave each GPU its -fitt margin and stay within host RAM "
            "(each instance's --cache-ram counted)."
        )
        self.lines.setText("\n".join(line for line in plan.text_lines()[len(plan.models) + 3 :]))

    def _on_write_button_clicked(self) -> None:
        if not self.named:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Write a presets file", "models.ini", "Presets (*.ini)")
        if path:
            self.write_presets(path)

    def write_presets(self, path: str) -> BackgroundJob:
        """Write the router's presets file (a background job: it reads saved profiles and headers)."""
        named, repo, st = dict(self.named), self.repo, self.plan_state
        gpus, host = st.gpus(), st.host()

        def work(_ctl):
            saved = {n: p.profile for n in named if repo is not None and (p := repo.latest(n)) is not None}
            write_presets(
                path, presets_for_router(named, saved, gpus, host), "written by llm-tuner's Plan tab"
            )
            return sorted(saved)

        job = BackgroundJob(
            work,
            self,
            what=f"Writing the presets file {path}",
            on_failed=lambda exc: self.summary.setText(f"{path} was not written: {exc}"),
        )
        job.succeeded.connect(
            lambda saved: self.summary.setText(
                f"Presets written to {path}"
                + (f" (from the saved profiles {', '.join(saved)})." if saved else ".")
            )
        )
        return job.start()

    def _on_open_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a presets file", "", "Presets (*.ini);;All files (*)"
        )
        if path:
            self.open_presets(path)

    def open_presets(self, path: str) -> BackgroundJob:
        """Read a presets file as profiles, each saved under its section's name (off the GUI thread)."""
        repo = self.repo

        def work(_ctl):
            profiles = profiles_in(path)
            for name, profile in profiles.items() if repo is not None else ():
                repo.save(name, profile, note=f"from the presets file {path}")
            return profiles

        def done(profiles) -> None:
            self.opened = profiles
            kept = "saved as profiles" if repo is not None else "read"
            self.summary.setText(f"{path}: {len(profiles)} model(s) {kept}: {', '.join(profiles)}.")

        job = BackgroundJob(
            work,
            self,
            what=f"Reading the presets file {path}",
            on_failed=lambda exc: self.summary.setText(f"{path} could not be read: {exc}"),
        )
        job.succeeded.connect(done)
        return job.start()
