"""What a tune would try, before it starts: each knob's values as candidates (one value changed from the base) with
the memory plan's verdict and figures, placements resolved at the margin in force. No server is started. One list
for `llm-tuner tune --dry-run` and the Tune view's Candidates tab."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from llm_tuner.core.bench_report import argv_diff
from llm_tuner.core.tune import PLACEMENT_KNOB, Knob, apply_values, describe_placement
from llm_tuner.services.tune.checks import PlanFn
from llm_tuner.services.tune.placement import PlacementResolver


@dataclass(frozen=True)
class Candidate:
    """One value of one knob: the arguments it adds or changes, whether it fits and the plan's figures."""

    knob: str
    value: str | None
    label: str
    fits: bool
    plan: str
    args: tuple[str, ...]  # what the candidate changes (the base's arguments left out); () is the base itself
    gpus: tuple[tuple[str, float, float], ...] = ()  # placements: (device, resident MiB, budget MiB)

    @property
    def args_text(self) -> str:
        return shlex.join(self.args) if self.args else "(the base)"

    def to_json(self) -> dict:
        return {"knob": self.knob, "value": self.value, "label": self.label, "fits": self.fits, "plan": self.plan,
                "argv": list(self.args), "gpus": [{"device": n, "resident_mib": r, "budget_mib": b}
                                                 for n, r, b in self.gpus] or None}


def _changes(base: list[str], cand: list[str]) -> tuple[str, ...]:
    """What a candidate's command line sets that the base's does not (a flag the candidate leaves out: `-flag` with
    no value is never written, so it reads "(flag absent)")."""
    if cand[:len(base)] == base:
        return tuple(cand[len(base):])
    out: list[str] = []
    for d in argv_diff(base, cand):
        if d["b"] is None:
            out.append(f"(no {d['flag']})")
        elif d["b"] == "":
            out.append(d["flag"])
        else:
            out += [d["flag"], str(d["b"])]
    return tuple(out)


def preview_candidates(base_argv: Sequence[str], env: dict[str, str], knobs: Sequence[Knob],
                       resolver: PlacementResolver | None, plan_fn: PlanFn) -> list[Candidate]:
    """Every knob value as a candidate with the plan's verdict (see the module's docstring)."""
    base = list(base_argv)
    resolve = resolver.fragment if resolver is not None else None
    out: list[Candidate] = []
    for knob in knobs:
        for value in knob.values:
            if knob.flag == PLACEMENT_KNOB and value is not None and resolver is not None:
                p = resolver.placement(value)
                cand = apply_values(base, knobs, {knob.key: value}, env, resolve=resolve)
                fits, why, label, gpus = p.fits, p.reason, describe_placement(value), p.gpu_use_mib
            else:
                cand = apply_values(base, knobs, {knob.key: value}, env, resolve=resolve)
                fits, why = plan_fn(list(cand), dict(env))
                label, gpus = ("default (flag absent)" if value is None else value), ()
            out.append(Candidate(knob.key, value, label, fits, why, _changes(base, cand), gpus))
    return out
