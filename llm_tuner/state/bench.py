"""The Benchmarks view's state, its speed part: after a run, what was measured beside what the speed model
predicted and generation's share of the roofline; then the run refines this machine's calibration (a refit
over the stored runs, kept in the store), so the next prediction (here, in the Plan, the Profile) rests on it
too.

The prediction is made with the basis as it was before the run (an honest check), the refit after. The work (a
model header, the store) goes through the `Run` given. Listeners get `notify("speed")` when the lines changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llm_tuner.core.bench_report import RunPrediction, speed_vs_prediction
from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.memory import plan_gpus
from llm_tuner.services.speed import SpeedBasis, predict_run, refit_from_runs
from llm_tuner.state.callbacks import Observable, Run, run_now
from llm_tuner.state.speed import SpeedModel, basis_text


class BenchSpeed(Observable):
    """Measured vs predicted for the run shown, and the calibration each finished run refines."""

    def __init__(self, speed: SpeedModel, engine: Any, *,
                 inventory: Callable[[], DeviceInventory | None] = lambda: None, run: Run = run_now) -> None:
        super().__init__()
        self.speed = speed
        self.engine = engine  # the store: the runs a refit reads, where it keeps the calibration
        self.inventory = inventory
        self.run = run
        self.run_id: int | None = None  # the run the lines are about
        self.lines: list[str] = []
        self.comparisons: list[dict[str, Any]] = []  # core.bench_report.speed_vs_prediction of the run
        self.basis_line = ""  # what the prediction was calibrated on
        self.refit_line = ""  # what the run did to the calibration

    def after_run(self, bench_run: Any) -> None:
        """A run just finished: predict it with the basis as it was, then refit the calibration over the
        stored runs (this one included) and keep it."""
        self._judge(bench_run, refine=bench_run.status == "complete")

    def show_run(self, bench_run: Any) -> None:
        """A run opened from the History: measured vs predicted with the basis in force now (no refit)."""
        self._judge(bench_run, refine=False)

    def _judge(self, bench_run: Any, *, refine: bool) -> None:
        self.run_id = bench_run.id
        speed, engine = self.speed, self.engine
        inv = self.inventory()
        gpus = plan_gpus(inv) if inv is not None else []
        cpu_flags = tuple(inv.host.cpu_flags) if inv is not None else ()

        def work() -> tuple[SpeedBasis, list[RunPrediction], tuple[SpeedBasis, str] | None]:
            basis = speed.basis or speed.loader()
            preds = predict_run(bench_run, basis, gpus, cpu_flags=cpu_flags)
            refit = (refit_from_runs(engine, basis, gpus=gpus, cpu_flags=cpu_flags, run_id=bench_run.id)
                     if refine else None)
            return basis, preds, refit

        run_id: int = bench_run.id

        def done(result: tuple[SpeedBasis, list[RunPrediction], tuple[SpeedBasis, str] | None]) -> None:
            self._on_judged(run_id, bench_run, *result)

        def failed(exc: BaseException) -> None:
            self._on_failed(run_id, exc)

        self.run(work, done, failed)

    def _on_judged(self, run_id: int, bench_run: Any, basis: SpeedBasis, preds: Sequence[RunPrediction],
                   refit: tuple[SpeedBasis, str] | None) -> None:
        if refit is not None:
            self.speed.set_basis(refit[0])
        if run_id != self.run_id:
            return  # another run is shown by now
        self.comparisons = speed_vs_prediction(bench_run, list(preds))
        self.lines = [f"Speed — {c['text']}" for c in self.comparisons]
        if not self.lines:
            self.lines = [f"Speed — run {run_id} could not be predicted (no model file, speculative "
                          "decoding, several clients or an attached server)"]
        self.basis_line = ("Predicted with " + basis_text(basis, preds[0].gen, hint=False)) if preds else ""
        self.refit_line = refit[1] if refit is not None else ""
        self.notify("speed")

    def _on_failed(self, run_id: int, exc: BaseException) -> None:
        if run_id == self.run_id:
            self.lines, self.comparisons, self.basis_line = [f"Speed — not predicted: {exc}"], [], ""
            self.refit_line = ""
            self.notify("speed")

    def text(self) -> str:
        """The lines the view shows under the run's notes."""
        return "\n".join([*self.lines, *(x for x in (self.basis_line, self.refit_line) if x)])


__all__ = ["BenchSpeed"]
