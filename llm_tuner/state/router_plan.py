"""The Plan tab's router box as plain state: a router profile's models (no -m; --models-dir /
--models-preset) planned together, its presets file written and read.

Shown (`shown`) while the profile edited in the Plan is a router: each model's use per device (its own
arguments, as the router gives them: services.router_presets), the sets that fit together, the pairs that
do not, the safe --models-max (core.memory.plan_router), on the Plan's devices (detected and planned).
Reading the models' headers goes through the `Run` given (the box's BackgroundJob, `run_now` in tests);
an answer to an older question is dropped. `write_presets` saves a --models-preset file: a model with a
saved profile of its name takes that profile's arguments, one without the fit solver's placement (what all
share goes to [*]); `open_presets` reads one and saves each model's section as a profile of its name.

Declared properties (said once per change): "shown", "table" (the headers and rows of the per-device
table), "lines" (the plan's words below it: sets, pairs, --models-max), "summary" (the line above, or what
a read or a write said). `jobs.doing` names the work handed to `run` last, in the user's words (the view's job
takes it as its `what`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.advice import is_router
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.memory.router import RouterPlan
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.router_presets import plan_profile, presets_for_router, profiles_in, write_presets
from llm_tuner.state.callbacks import Declared, Jobs, Observable, Run, run_now
from llm_tuner.state.plan import PlanState
from llm_tuner.store.profiles import ProfileRepository

PLANNED = (
    "{n} model(s), each planned with its own arguments on these devices; a set fits when together they leave "
    "each GPU its -fitt margin and stay within host RAM (each instance's --cache-ram counted)."
)
PRESETS_HEADER = "written by llm-tuner's Plan tab"


@dataclass(frozen=True)
class RouterTable:
    """The box's table: a column per device, a row per model, then the devices' "available" and "margin"."""

    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def router_table(plan: RouterPlan) -> RouterTable:
    """Each model's use per device (MiB; its error where it has no plan), then what each device has and
    keeps."""
    devs = list(plan.budgets_mib)
    rows: list[tuple[str, ...]] = []
    for m in plan.models:
        use = m.use_mib
        rows.append(
            (m.name, *[(f"{use.get(d, 0.0):.0f}" if m.plan is not None else (m.error or "—")) for d in devs])
        )
    for label, values in (
        ("available", [plan.budgets_mib[d] for d in devs]),
        ("margin", [plan.margins_mib.get(d, 0) for d in devs]),
    ):
        rows.append((label, *["?" if v is None else f"{v:.0f}" for v in values]))
    return RouterTable(("Model", *[f"{d} (MiB)" for d in devs]), tuple(rows))


def plan_lines(plan: RouterPlan) -> str:
    """The plan's words below the table (the sets, the pairs, --models-max): its text without the table."""
    return "\n".join(plan.text_lines()[len(plan.models) + 3 :])


class RouterPlanState(Observable):
    """A router profile's models planned as a whole, as the Plan tab's router box shows them."""

    shown = Declared[bool](False, topic="shown")
    table = Declared[RouterTable](RouterTable(), topic="table")
    lines = Declared[str]("", topic="lines")
    summary = Declared[str]("", topic="summary")

    def __init__(
        self, plan_state: PlanState, *, profiles: ProfileRepository | None = None, run: Run = run_now
    ) -> None:
        super().__init__()
        self.plan_state = plan_state
        # the saved profiles (a presets file's models are saved there; None: read only)
        self.profiles = profiles
        self.jobs = Jobs(run)  # the reads and writes, with their words
        self.named: dict[str, list[str]] = {}  # each model's instance arguments, as last planned
        self.plan: RouterPlan | None = None
        self.opened: dict[str, LaunchProfile] = {}  # the profiles of the last presets file opened
        self._asked = 0
        # the profile and devices last planned
        self._key: tuple[str, tuple[PlanDevice, ...], PlanDevice] | None = None
        plan_state.add_callback(self._on_plan_state_changed)

    def _on_plan_state_changed(self, what: str, *_details: Any) -> None:
        if what in ("inputs", "args", "note", "profile"):
            self.refresh()

    # -- the plan ----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Plan the edited profile's router models again (through `run`), or hide for a plain profile. A
        control of the single-model plan that leaves the profile and the devices as they were asks nothing."""
        profile = self.plan_state.profile
        if profile is None or not is_router(profile):
            self.shown = False
            return
        self.shown = True
        st = self.plan_state
        gpus, host, cpu = st.gpus(), st.host(), st.cpu_flags()
        key = (profile.model_dump_json(), tuple(gpus), host)
        if key == self._key:
            return
        self._key = key
        self._asked += 1
        asked = self._asked
        self.jobs(
            "Planning the router's models",
            lambda: plan_profile(profile, gpus, host, cpu),
            lambda result: self._planned(asked, result),
            lambda exc: self._plan_failed(asked, exc),
        )

    def _plan_failed(self, asked: int, exc: BaseException) -> None:
        if asked == self._asked:
            self.summary = f"The router's models could not be read: {exc}"
            self.table, self.lines = RouterTable(), ""

    def _planned(self, asked: int, result: tuple[dict[str, list[str]], RouterPlan]) -> None:
        if asked != self._asked:
            return  # a newer question is on its way
        self.named, self.plan = result
        self.show_plan(self.plan)

    def show_plan(self, plan: RouterPlan) -> None:
        self.table = router_table(plan)
        self.summary = PLANNED.format(n=len(plan.models))
        self.lines = plan_lines(plan)

    # -- the presets file --------------------------------------------------------------------------------
    @property
    def can_write(self) -> bool:
        """A plan to write: the router's models were read."""
        return bool(self.named)

    def write_presets(self, path: str) -> None:
        """Write the router's presets file (through `run`: it reads saved profiles and headers)."""
        named, repo, st = dict(self.named), self.profiles, self.plan_state
        gpus: Sequence[PlanDevice] = st.gpus()
        host = st.host()

        def work() -> list[str]:
            saved = {n: p.profile for n in named if repo is not None and (p := repo.latest(n)) is not None}
            write_presets(path, presets_for_router(named, saved, gpus, host), PRESETS_HEADER)
            return sorted(saved)

        def done(saved: list[str]) -> None:
            self.summary = f"Presets written to {path}" + (
                f" (from the saved profiles {', '.join(saved)})." if saved else "."
            )

        self.jobs(
            f"Writing the presets file {path}",
            work,
            done,
            lambda exc: self._say(f"{path} was not written: {exc}"),
        )

    def open_presets(self, path: str) -> None:
        """Read a presets file as profiles, each saved under its section's name (through `run`)."""
        repo = self.profiles

        def work() -> dict[str, LaunchProfile]:
            profiles = profiles_in(path)
            for name, profile in profiles.items():
                if repo is not None:
                    repo.save(name, profile, note=f"from the presets file {path}")
            return profiles

        def done(profiles: dict[str, LaunchProfile]) -> None:
            self.opened = profiles
            kept = "saved as profiles" if repo is not None else "read"
            self.summary = f"{path}: {len(profiles)} model(s) {kept}: {', '.join(profiles)}."

        self.jobs(
            f"Reading the presets file {path}",
            work,
            done,
            lambda exc: self._say(f"{path} could not be read: {exc}"),
        )

    def _say(self, text: str) -> None:
        self.summary = text
