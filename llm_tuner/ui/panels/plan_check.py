"""The Plan panel's "Check with llama.cpp" box: runs the real server once for the Plan's settings and
shows its buffers beside the estimate. What it runs, the comparison and the calibration it teaches are
PlanState's (state/plan.py, over core.memory_check); this box only starts the run (a BackgroundJob) and fills
its widgets.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.settings import Settings
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.binaries import SERVER, locate, measure_server_memory
from llm_tuner.state.plan import PlanState


class LlamaCheckBox(QGroupBox):
    """Reads the Plan's state (its model, arguments and plan); hands the run's log back to it to learn
    from."""

    def __init__(self, state: PlanState, settings: Callable[[], Settings],
                 parent: QWidget | None = None) -> None:
        super().__init__("Check with llama.cpp", parent)
        self.state = state
        self.settings = settings
        self._job: BackgroundJob | None = None
        cl = QVBoxLayout(self)
        crow = QHBoxLayout()
        self.check_button = QPushButton("Check with llama.cpp")
        self.check_button.setToolTip("Starts the real llama-server once (-lv 4 -fit off), reads what it "
                                     "allocates, stops it")
        self.check_button.clicked.connect(self._on_check_clicked)
        self.check_cancel_button = QPushButton("Cancel")
        self.check_cancel_button.setEnabled(False)
        self.check_cancel_button.clicked.connect(self._on_cancel_clicked)
        crow.addWidget(self.check_button)
        crow.addWidget(self.check_cancel_button)
        cl.addLayout(crow)
        self.check_label = QLabel("Runs the real server once and shows its buffers beside this estimate.")
        self.check_label.setWordWrap(True)
        cl.addWidget(self.check_label)
        self.check_table = QTableWidget(0, 5)
        self.check_table.setHorizontalHeaderLabels(["Device", "Kind", "Estimate", "llama.cpp", "Difference"])
        self.check_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.check_table.verticalHeader().setVisible(False)
        cl.addWidget(self.check_table)

    def _on_check_clicked(self) -> None:
        if self.state.model is None:
            self.check_label.setText("Select a model first.")
            return

        loc = locate(SERVER, self.settings())
        if loc is None:
            self.check_label.setText("llama-server not found: set its path in Settings.")
            return
        argv = self.state.check_argv()
        self.check_label.setText("Starting llama-server to read its buffers …")
        self.check_button.setEnabled(False)
        self.check_cancel_button.setEnabled(True)
        job = BackgroundJob(lambda c: measure_server_memory(loc.path, argv, cancel_check=c.cancelled), self,
                            what="Checking the plan with llama-server",
                            on_failed=lambda exc: self.check_label.setText(f"The check failed: {exc}"))
        job.succeeded.connect(self._on_job_succeeded)
        job.finished.connect(self._on_job_finished)
        self._job = job
        job.start(long=True)  # a llama-server run: never in front of short queries

    def _on_cancel_clicked(self) -> None:
        if self._job is not None:
            self._job.cancel()

    def _on_job_finished(self) -> None:
        self._job = None
        self.check_button.setEnabled(True)
        self.check_cancel_button.setEnabled(False)

    def _on_job_succeeded(self, run) -> None:
        if not run.loaded:
            tail = (run.log.strip().splitlines() or ["(no output)"])[-1]
            self.check_label.setText(f"llama-server did not load: {tail[:300]}")
            return
        rows = self.state.learn_from_check(run.log)  # and this model's compute calibration
        self.check_table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            est = "—" if r.estimate_mib is None else f"{r.estimate_mib:.1f} MiB"
            for j, text in enumerate((r.device, r.label, est, f"{r.measured_mib:.1f} MiB", r.diff_text())):
                self.check_table.setItem(i, j, QTableWidgetItem(text))
        self.check_label.setText(f"llama.cpp allocated these buffers ({run.seconds:.1f} s, -fit off). "
                                 "Compute estimates for this model are now calibrated from it.")
