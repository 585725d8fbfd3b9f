"""The predicted speed as the views show it: what a prediction rests on (`SpeedModel`: the stored calibration
of the build and driver in use, loaded once through `run`, off the GUI thread) and the words every view uses
for a prediction and its basis, so Plan, Get models, Profile and Benchmarks say the same thing the same way.

The arithmetic is core.speed (traffic, predict) through services.speed.SpeedBasis; this module only words it.
Listeners get `notify("basis")` when the basis was (re)loaded or refined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.cmdline import profile_to_argv
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.speed import Prediction
from llm_tuner.core.speed.predict import PROBE_ONLY_NOTE, format_ttft
from llm_tuner.core.units import first_line
from llm_tuner.services.speed import SpeedBasis, plan_traffic_of, threads_of
from llm_tuner.state.callbacks import Observable, Run, run_now

CURVE_POINTS = 16  # points of the speed-versus-context curve
DEFAULT_PROMPT = 512  # prompt tokens of the prefill and TTFT a view shows (estimate --speed's default)
NOT_YET = "speed: reading this machine's calibration …"


class SpeedModel(Observable):
    """The basis of this machine's predictions, loaded with `load()` through `run` (a store read, NVML, the
    binary's build: slow enough to keep off the GUI thread)."""

    def __init__(self, loader: Callable[[], SpeedBasis], *, run: Run = run_now) -> None:
        super().__init__()
        self.loader = loader
        self.run = run
        self.basis: SpeedBasis | None = None
        self.error: str | None = None
        self._loading = False

    def load(self) -> None:
        """Read the basis (again: after a probe or a refit, or when the binary changed)."""
        if self._loading:
            return
        self._loading = True
        self.run(self.loader, self._on_loaded, self._on_failed)

    def _on_loaded(self, basis: SpeedBasis) -> None:
        self._loading = False
        self.set_basis(basis)

    def _on_failed(self, exc: BaseException) -> None:
        self._loading = False
        self.error = first_line(exc)
        # defaults, and why: a prediction with a wider error beats none, but not one blamed on a build that
        # was calibrated (the store could not be read: locked by another program, damaged)
        self.set_basis(SpeedBasis(problem=self.error))

    def set_basis(self, basis: SpeedBasis) -> None:
        self.basis = basis
        self.notify("basis")

    def predict(self, model: Any, plan: Any, *, depth: int = 0, prompt: int = DEFAULT_PROMPT,
                argv: Sequence[str] = (), gpus: Sequence[PlanDevice] | None = None) -> Prediction | None:
        """The prediction of `plan` for `model` (None: no basis yet, or a model the speed model cannot read);
        the host's threads from `argv`'s -t, else llama.cpp's default; `gpus` with their descriptions
        (peaks)."""
        if self.basis is None or model is None or plan is None:
            return None
        return self.basis.predict(model, plan, depth=depth, prompt=prompt,
                                  threads=threads_of(list(argv), self.basis.threads), gpus=gpus)

    def curve(self, model: Any, plan: Any, *, argv: Sequence[str] = (), points: int = CURVE_POINTS,
              gpus: Sequence[PlanDevice] | None = None) -> list[tuple[int, float]]:
        """Generation t/s against the depth already in the cache, from 0 to a slot's context:
        [(depth, t/s)]."""
        if self.basis is None or model is None or plan is None:
            return []
        t = plan_traffic_of(model, plan)
        if t is None:
            return []
        top = max(1, plan.n_ctx // (1 if plan.kv_unified else max(1, plan.n_seq_max)))
        threads = threads_of(list(argv), self.basis.threads)
        out = []
        for i in range(points):
            depth = round(top * i / max(1, points - 1))
            pr = self.basis.predict_traffic(t, plan, depth=depth, prompt=1, threads=threads, gpus=gpus)
            if pr.gen_tps is not None:
                out.append((depth, pr.gen_tps))
        return out


def basis_text(basis: SpeedBasis | None, pred: Prediction | None = None, *, hint: bool = True) -> str:
    """What the prediction is calibrated on: 'calibrated on probe of a.gguf + 3 stored runs (build b1234-ab12,
    driver 550.54, 16 threads) ±12 %', or 'default costs, wider error (±35 %): this build is not calibrated …'
    (`hint`: with how to calibrate it)."""
    if basis is None:
        return NOT_YET
    err = pred.error if pred is not None else None
    threads = pred.threads if pred is not None else basis.threads
    cal = basis.calibration
    if basis.calibrated and cal is not None:
        where = ", ".join(x for x in (f"build {basis.build}" if basis.build else "",
                                      f"driver {basis.driver}" if basis.driver else "",
                                      f"{threads} threads") if x)
        defaults = pred is not None and "default" in pred.calibrated_on
        probe_only = pred is not None and PROBE_ONLY_NOTE in pred.notes
        return (f"calibrated on {cal.source or 'measurements'} ({where})"
                + (", some costs default" if defaults else "")
                + (f", ±{err:.0%}" if err is not None else "")
                + (" (llama-bench alone: the server may be slower here; a benchmark run refines it)"
                   if probe_only else ""))
    wider = f" (±{err:.0%})" if err is not None else ""
    if basis.problem:  # said with or without the hint: whatever the store holds, it was not read
        return (f"default costs, wider error{wider}: this machine's calibration could not be read "
                f"({basis.problem}); Help ▸ Errors has the details")
    why = ("no llama-server build known" if not basis.build else
           "this build is not calibrated: run a benchmark, or `llm-tuner estimate --speed --calibrate`")
    return f"default costs, wider error{wider}" + (f": {why}" if hint else "")


def speed_figures(pred: Prediction | None) -> str:
    """'≈ 38 t/s gen, 900 t/s prefill, TTFT 0.57 s' (what a view shows first), or why there is no figure."""
    if pred is None:
        return "speed: not predicted"
    if pred.gen_tps is None:
        if not pred.unknown:  # every cost of this model is 0 (an old calibration fitted from too few runs)
            return "speed unknown: the calibration gives this model no time: calibrate again"
        return f"speed unknown: no rate for {', '.join(pred.unknown)}"
    parts = [f"≈ {_tps(pred.gen_tps)} t/s gen"]
    if pred.prefill_tps is not None:
        parts.append(f"{_tps(pred.prefill_tps)} t/s prefill")
    if pred.ttft_ms is not None:
        parts.append(f"TTFT {format_ttft(pred.ttft_ms)}")
    return ", ".join(parts)


def speed_line(pred: Prediction | None, basis: SpeedBasis | None) -> str:
    """One line: the figures, then what they are calibrated on (the Profile's line under the command)."""
    if basis is None:
        return NOT_YET
    return f"{speed_figures(pred)} — {basis_text(basis, pred)}"


def roofline_text(pred: Prediction | None) -> str:
    """'roofline 61 t/s: what these devices' peak read rates allow' ('' when a peak is unknown)."""
    if pred is None or pred.roofline_tps is None:
        return ""
    return f"roofline {_tps(pred.roofline_tps)} t/s (what these devices' peak read rates allow)"


def _tps(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def profile_argv(profile: LaunchProfile | None) -> list[str]:
    """A profile's effective argv (its LLAMA_ARG_* variables counted), for its thread count; [] without
    one."""
    if profile is None:
        return []
    argv, env = profile_to_argv(profile)
    return flags.effective_argv(argv, env)


__all__ = ["SpeedModel", "basis_text", "profile_argv", "roofline_text", "speed_figures", "speed_line"]
