"""The plan beside what llama.cpp really allocated ("Check with llama.cpp", `llm-tuner estimate --check`).

One real `llama-server -lv 4 -fit off` run is parsed by core.memory_log; its buffers are put on devices
by core.buffer_devices and compared, per device and kind, with the plan (core.memory). The measured
compute buffers also calibrate the plan's compute estimate per backend for that model (weights and KV
are exact already). Pure: the Plan panel and the CLI only show the result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.buffer_devices import buffer_shares, known_devices
from llm_tuner.core.memory import Calibration, MemoryPlan
from llm_tuner.core.memory_log import MemoryLog

KINDS = ("model", "kv", "compute", "output")  # the plan's parts; recurrent state (rs) counts as kv
PLAN_ATTR = {"model": "model_mib", "kv": "kv_mib", "compute": "compute_mib", "output": "output_mib"}
KIND_LABEL = {"model": "weights", "kv": "KV cache", "compute": "compute", "output": "output"}


@dataclass(frozen=True)
class CheckRow:
    """One device and kind: the plan's estimate (None: the plan has no such device) and llama.cpp's MiB."""

    device: str
    kind: str  # model, kv, compute, output
    estimate_mib: float | None
    measured_mib: float

    @property
    def label(self) -> str:
        return KIND_LABEL[self.kind]

    @property
    def diff_mib(self) -> float | None:
        return None if self.estimate_mib is None else self.estimate_mib - self.measured_mib

    @property
    def diff_pct(self) -> float | None:
        if self.estimate_mib is None:
            return None
        return (self.estimate_mib / self.measured_mib - 1) * 100 if self.measured_mib else 0.0

    def diff_text(self) -> str:
        """'+1.5 MiB (+0.6%)'; an exact match reads '0.0 MiB (0.0%)', never '-0.0'; '' without an estimate."""
        if self.diff_mib is None or self.diff_pct is None:
            return ""
        mib, pct = round(self.diff_mib, 1) + 0.0, round(self.diff_pct, 1) + 0.0
        if mib == 0 and pct == 0:
            return "0.0 MiB (0.0%)"
        return f"{mib:+.1f} MiB ({pct:+.1f}%)"


def measured_parts(log: MemoryLog, devices: Iterable[object] = ()) -> dict[tuple[str, str], float]:
    """{(device, kind): MiB} of every buffer the run allocated (all models and contexts), `Host` for host
    memory; `devices`: the llama.cpp devices planned for (names, RPC endpoints)."""
    known = known_devices(devices)
    out: dict[tuple[str, str], float] = {}
    for b in log.buffers:
        kind = "kv" if b.kind == "rs" else b.kind
        for dev, mib in buffer_shares(b.buffer, b.mib, known):
            out[(dev, kind)] = out.get((dev, kind), 0.0) + mib
    return out


def _plan_devices(plan: MemoryPlan | None, devices: Iterable[object] | None) -> list[object]:
    listed = list(devices or ())
    names = {getattr(d, "name", d) for d in listed}
    listed += [d.name for d in (plan.devices if plan else ()) if d.name not in names and d.name != "Host"]
    return listed


def compare(log: MemoryLog, plan: MemoryPlan | None, devices: Iterable[object] | None = None) -> list[CheckRow]:
    """The check table: one row per device and kind llama.cpp allocated, sorted by device then kind."""
    real = measured_parts(log, _plan_devices(plan, devices))
    rows = []
    for (dev, kind), mib in sorted(real.items()):
        ours = plan.device(dev) if plan else None
        rows.append(CheckRow(dev, kind, getattr(ours, PLAN_ATTR[kind]) if ours is not None else None, mib))
    return rows


def calibrate(plan: MemoryPlan | None, rows: Iterable[CheckRow], old: Calibration | None = None) -> Calibration:
    """The compute ratio (measured / uncalibrated estimate) per backend, from a check of `plan`.

    `plan` was made with `old`, so its compute figures are divided by the old ratio first; backends
    the check did not measure keep their old ratio.
    """
    old = old or Calibration()
    measured = {r.device: r.measured_mib for r in rows if r.kind == "compute"}
    scale = dict(old.compute_scale)
    for d in (plan.devices if plan else ()):
        mib = measured.get(d.name)
        backend = "CPU" if d.name == "Host" else d.backend
        if mib and d.compute_mib > 0:
            raw = d.compute_mib / old.compute_scale.get(backend, 1.0)
            scale[backend] = mib / raw
    return Calibration(compute_scale=scale, overhead_mib=dict(old.overhead_mib))


def check_json(log: MemoryLog, plan: MemoryPlan | None, devices: Iterable[object] | None = None) -> list[dict[str, Any]]:
    """Per device: llama.cpp's MiB per plan attribute (model_mib, kv_mib, ...) and the plan's difference."""
    per: dict[str, dict[str, float]] = {}
    for (dev, kind), mib in measured_parts(log, _plan_devices(plan, devices)).items():
        row = per.setdefault(dev, dict.fromkeys(PLAN_ATTR.values(), 0.0))
        row[PLAN_ATTR[kind]] += mib
    out = []
    for name, row in per.items():
        ours = plan.device(name) if plan else None
        entry: dict[str, Any] = {"name": name, **{k: round(v, 2) for k, v in row.items()}}
        if ours is not None:
            entry["diff_mib"] = {k: round(getattr(ours, k) - v, 2) for k, v in row.items()}
        out.append(entry)
    return out
