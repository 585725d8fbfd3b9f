"""A router planned as a whole: which of its models can be loaded together on the user's devices.

llama-server in router mode (no -m) starts one instance (its own process) per model it is asked for and makes
no memory decision: it loads until a device is full, then the load fails. Each instance is planned here with
its own arguments on the whole devices (as llama.cpp's fit would place it loaded first); every instance is a
process of its own, so its buffers, its runtime overhead and, in host RAM, its prompt cache (`--cache-ram`,
what it may grow to while serving) add up. A set of models fits when, on every GPU, their sum leaves the
`-fitt` margin (the largest any of them asks for; 1024 MiB by default) and, in host RAM, their sum stays
within the host's budget. Mapped weights are page cache the kernel may evict (DeviceMemory.resident_mib), as
in a single plan.

Since every set fits on every device independently, "every set of k models fits" holds exactly when, on each
device, the k largest uses fit: that gives the safe `--models-max` without trying every set. The sets that fit
(the largest ones, each not inside another) are listed for up to MAX_LISTED models.

Pure: each model's ModelInfo (or why it could not be read) comes from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from llm_tuner.core.memory.args import ArgumentError, PlanDevice, parse_server_args
from llm_tuner.core.memory.constants import FIT_TARGET_MIB
from llm_tuner.core.memory.plan import DeviceMemory, MemoryPlan
from llm_tuner.core.memory.solve import plan_memory

HOST = "Host"
MAX_LISTED = 14  # models whose sets are enumerated (2**14 sets); beyond, only pairs and --models-max


@dataclass(frozen=True)
class ModelPlan:
    """One model of a router: its instance's arguments and memory plan (None, with `error`, when none)."""

    name: str
    argv: tuple[str, ...]
    plan: MemoryPlan | None = None
    error: str | None = None

    @property
    def use_mib(self) -> dict[str, float]:
        """What this instance takes per device: what must be resident; in host RAM its prompt cache too."""
        if self.plan is None:
            return {}
        return {d.name: _use(d) for d in self.plan.devices}


def _use(d: DeviceMemory) -> float:
    return d.resident_mib + (d.prompt_cache_mib if d.name == HOST else 0.0)


@dataclass(frozen=True)
class Shortfall:
    """A device a set of models overfills: what they need, what it has, the margin kept, and by how much."""

    device: str
    need_mib: float
    budget_mib: float
    margin_mib: int

    @property
    def short_mib(self) -> float:
        return self.need_mib - (self.budget_mib - self.margin_mib)

    def text(self) -> str:
        return (
            f"{self.device}: {self.need_mib:.0f} MiB needed, {self.budget_mib:.0f} MiB available"
            + (f" less the {self.margin_mib} MiB margin" if self.margin_mib else "")
            + f" ({self.short_mib:.0f} MiB short)"
        )


@dataclass(frozen=True)
class LoadCheck:
    """Whether a model fits beside the loaded ones, with the figures."""

    name: str
    loaded: tuple[str, ...]
    fits: bool | None  # None: the model has no plan
    shortfalls: tuple[Shortfall, ...] = ()
    reason: str = ""

    def text(self) -> str:
        beside = f" beside {', '.join(self.loaded)}" if self.loaded else ""
        if self.fits is None:
            return f"{self.name}: no memory plan ({self.reason})"
        if self.fits:
            return f"{self.name} fits{beside}."
        return f"{self.name} does not fit{beside}: " + "; ".join(s.text() for s in self.shortfalls)


@dataclass(frozen=True)
class RouterPlan:
    """Every model's plan, the devices' budgets and margins, and what follows for loading them together."""

    models: tuple[ModelPlan, ...]
    budgets_mib: dict[str, float | None]
    margins_mib: dict[str, int]
    fitting_sets: tuple[tuple[str, ...], ...] = ()  # the largest sets that fit (none inside another)
    sets_listed: bool = True  # False: too many models to list every set
    pairs_not_fitting: tuple[tuple[str, str, tuple[Shortfall, ...]], ...] = ()
    alone_not_fitting: tuple[str, ...] = ()
    models_max: int | None = None  # the largest k with every k models fitting together; None: not even one
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def model(self, name: str) -> ModelPlan | None:
        return next((m for m in self.models if m.name == name), None)

    @property
    def planned(self) -> tuple[ModelPlan, ...]:
        return tuple(m for m in self.models if m.plan is not None)

    def shortfalls(self, names: Sequence[str]) -> tuple[Shortfall, ...]:
        """The devices that the named models, loaded together, overfill (empty: they fit)."""
        uses = [self.model(n).use_mib for n in names if self.model(n) is not None]  # type: ignore[union-attr]
        out = []
        for dev, budget in self.budgets_mib.items():
            if budget is None:
                continue
            need = sum(u.get(dev, 0.0) for u in uses)
            margin = self.margins_mib.get(dev, 0)
            if need > budget - margin:
                out.append(Shortfall(dev, need, budget, margin))
        return tuple(out)

    def check_load(self, name: str, loaded: Sequence[str]) -> LoadCheck:
        """Whether `name` fits beside the `loaded` models (those without a plan are not counted, and said)."""
        m = self.model(name)
        beside = tuple(n for n in loaded if n != name)
        if m is None or m.plan is None:
            return LoadCheck(
                name, beside, None, reason=m.error if m is not None and m.error else "not planned"
            )
        short = self.shortfalls((*beside, name))
        return LoadCheck(name, beside, not short, short)

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "models": [
                {
                    "name": m.name,
                    "argv": list(m.argv),
                    "error": m.error,
                    "use_mib": {k: r(v) for k, v in m.use_mib.items()},
                    "n_ctx": m.plan.n_ctx if m.plan else None,
                    "warnings": list(m.plan.warnings) if m.plan else [],
                }
                for m in self.models
            ],
            "devices": [
                {"name": d, "budget_mib": r(b), "margin_mib": self.margins_mib.get(d, 0)}
                for d, b in self.budgets_mib.items()
            ],
            "fitting_sets": [list(s) for s in self.fitting_sets] if self.sets_listed else None,
            "pairs_not_fitting": [
                {"models": [a, b], "short": [s.text() for s in sh]} for a, b, sh in self.pairs_not_fitting
            ],
            "alone_not_fitting": list(self.alone_not_fitting),
            "models_max": self.models_max,
            "warnings": list(self.warnings),
        }

    def text_lines(self) -> list[str]:
        """The plan in words: a table of each model's use per device, then sets, pairs, --models-max."""
        devs = list(self.budgets_mib)
        width = max([5, *(len(m.name) for m in self.models)])
        out = [f"{'model':{width}} " + " ".join(f"{d:>10}" for d in devs)]
        for m in self.models:
            if m.plan is None:
                out.append(f"{m.name:{width}} no plan: {m.error}")
                continue
            u = m.use_mib
            out.append(f"{m.name:{width}} " + " ".join(f"{u.get(d, 0.0):10.0f}" for d in devs))
        out.append(
            f"{'budget':{width}} "
            + " ".join(f"{'?' if b is None else f'{b:.0f}':>10}" for b in self.budgets_mib.values())
        )
        out.append(f"{'margin':{width}} " + " ".join(f"{self.margins_mib.get(d, 0):10d}" for d in devs))
        if self.sets_listed:
            sets = [("{" + ", ".join(s) + "}") for s in self.fitting_sets]
            out.append("Sets that fit together: " + (", ".join(sets) if sets else "none"))
        if self.alone_not_fitting:
            out.append("Do not fit even alone: " + ", ".join(self.alone_not_fitting))
        for a, b, sh in self.pairs_not_fitting:
            out.append(f"Do not fit together: {a} + {b} ({'; '.join(s.text() for s in sh)})")
        n = len(self.planned)
        if self.models_max is None:
            out.append("No --models-max is safe: a model does not fit even alone.")
        elif self.models_max >= n:
            out.append(f"Every model fits at once: --models-max {n} (or more) is safe.")
        else:
            out.append(
                f"Safe --models-max: {self.models_max} (every set of {self.models_max} fits; "
                f"some set of {self.models_max + 1} does not)."
            )
        out += [f"warning: {w}" for w in self.warnings]
        return out


def _margins(plans: Sequence[ModelPlan], devices: Sequence[str]) -> dict[str, int]:
    """Per GPU the largest -fitt margin any instance keeps (one value: every device); none in host RAM."""
    out: dict[str, int] = {}
    for m in plans:
        if m.plan is None:
            continue
        gpus = [d.name for d in m.plan.devices if d.name != HOST]
        targets = list(m.plan.args.fit_target_mib) or [FIT_TARGET_MIB]
        for i, name in enumerate(gpus):
            t = targets[i] if i < len(targets) else targets[-1]
            out[name] = max(out.get(name, 0), t)
    return {d: out.get(d, 0) for d in devices}


def plan_router(
    named_argv: Mapping[str, Sequence[str]],
    models: Mapping[str, Any],
    gpus: Sequence[PlanDevice] = (),
    host: PlanDevice | None = None,
    *,
    cpu_flags: tuple[str, ...] | frozenset[str] = (),
    margin_mib: int | None = None,
) -> RouterPlan:
    """Plan a router's models: `named_argv` each model's instance arguments (name -> argv with its -m),
    `models` name -> ModelInfo (or a str: why it could not be read). `margin_mib` replaces the instances' own
    -fitt on every GPU."""
    host = host or PlanDevice(HOST, "CPU", None)
    plans: list[ModelPlan] = []
    for name, argv in named_argv.items():
        info = models.get(name)
        if info is None or isinstance(info, str):
            plans.append(ModelPlan(name, tuple(argv), error=info or "no model file"))
            continue
        try:
            pargs = parse_server_args(list(argv))
        except ArgumentError as exc:
            plans.append(ModelPlan(name, tuple(argv), error=str(exc)))
            continue
        plans.append(
            ModelPlan(name, tuple(argv), plan_memory(info, pargs, list(gpus), host, cpu_flags=cpu_flags))
        )
    budgets: dict[str, float | None] = {}
    for m in plans:
        for d in m.plan.devices if m.plan is not None else ():
            budgets.setdefault(d.name, d.budget_mib)
    budgets = {d: budgets[d] for d in sorted(budgets, key=lambda n: (n == HOST, n))}
    margins = _margins(plans, list(budgets))
    if margin_mib is not None:
        margins = {d: (0 if d == HOST else margin_mib) for d in budgets}
    base = RouterPlan(tuple(plans), budgets, margins)
    return _conclude(base)


def _conclude(rp: RouterPlan) -> RouterPlan:
    names = [m.name for m in rp.planned]
    alone = tuple(n for n in names if rp.shortfalls((n,)))
    pairs = tuple(
        (a, b, sh)
        for a, b in combinations(names, 2)
        if a not in alone and b not in alone and (sh := rp.shortfalls((a, b)))
    )
    models_max = 0
    uses = [m.use_mib for m in rp.planned]
    for k in range(1, len(names) + 1):
        ok = True
        for dev, budget in rp.budgets_mib.items():
            worst = sorted((u.get(dev, 0.0) for u in uses), reverse=True)[:k]  # the k largest on this device
            if budget is not None and sum(worst) > budget - rp.margins_mib.get(dev, 0):
                ok = False
        if not ok:
            break
        models_max = k
    listed = len(names) <= MAX_LISTED
    sets: list[tuple[str, ...]] = []
    if listed:
        fitting = [
            s for k in range(len(names), 0, -1) for s in combinations(names, k) if not rp.shortfalls(s)
        ]
        for s in fitting:  # largest first: keep a set only when no kept set holds it
            if not any(set(s) <= set(t) for t in sets):
                sets.append(s)
    warnings = list(rp.warnings)
    if not listed:
        warnings.append(f"{len(names)} models: the sets that fit are not listed (more than {MAX_LISTED})")
    unplanned = [m.name for m in rp.models if m.plan is None]
    if unplanned:
        warnings.append("not counted (no plan): " + ", ".join(unplanned))
    return RouterPlan(
        rp.models,
        rp.budgets_mib,
        rp.margins_mib,
        tuple(sets),
        listed,
        pairs,
        alone,
        models_max if models_max else None,
        tuple(warnings),
    )
