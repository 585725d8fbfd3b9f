"""What a tune would try, before it starts: each knob's values as candidates (one value changed from the base) with
the memory plan's verdict and figures, placements resolved at the margin in force, and the speed model's prediction
(with the pruning a race from the base would make: core.tune.prune). No server is started. One list for
`llm-tuner tune --dry-run` and the Tune view's Candidates tab."""

from __future__ import annotations

import shlex
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llm_tuner.core.bench_report import argv_diff
from llm_tuner.core.tune import PLACEMENT_KNOB, Knob, apply_values, describe_placement
from llm_tuner.core.tune.prune import SpeedGuess, speed_prune
from llm_tuner.services.tune.checks import PlanFn
from llm_tuner.services.tune.placement import PlacementResolver
from llm_tuner.services.tune.speed import SpeedOracle


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
    predicted: dict[str, Any] | None = None  # the speed model's (core.tune.prune.SpeedGuess.to_json()); None: no prediction
    speed_pruned: str = ""  # why the speed model would not start it in a race from the base ("" : it would)

    @property
    def predicted_text(self) -> str:
        g = SpeedGuess.from_json(self.predicted)
        return g.text() if g is not None else "no prediction"

    @property
    def args_text(self) -> str:
        return shlex.join(self.args) if self.args else "(the base)"

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "value": self.value, "label": self.label, "fits": self.fits, "plan": self.plan,
                "argv": list(self.args), "gpus": [{"device": n, "resident_mib": r, "budget_mib": b}
                                                 for n, r, b in self.gpus] or None,
                "predicted": self.predicted, "speed_pruned": self.speed_pruned or None}


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
                       resolver: PlacementResolver | None, plan_fn: PlanFn, speed: SpeedOracle | None = None,
                       prune: bool = True) -> list[Candidate]:
    """Every knob value as a candidate with the plan's verdict and the speed model's prediction (see the module's
    docstring); `prune`: say which the speed model would not start (in a race from the base, the base kept)."""
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
            guess = speed.guess(cand, env) if speed is not None else None
            out.append(Candidate(knob.key, value, label, fits, why, _changes(base, cand), gpus,
                                 guess.to_json() if guess is not None else None))
    if speed is None or not prune:
        return out
    base_guess = speed.guess(apply_values(base, knobs, {}, env, resolve=resolve), env)
    for knob in knobs:
        mine = [i for i, c in enumerate(out) if c.knob == knob.key and c.fits]
        guesses: dict[Hashable, SpeedGuess | None] = {i: SpeedGuess.from_json(out[i].predicted) for i in mine}
        guesses["base"] = base_guess
        o = speed.objective
        what = o.row.what.format(clients=o.clients, min_gen_tps=o.min_gen_tps)
        for i, why in speed_prune(guesses, keep="base", what=what).items():
            if isinstance(i, int) and out[i].args:  # a value that is the base itself is never pruned
                out[i] = replace(out[i], speed_pruned=why)
    return out
