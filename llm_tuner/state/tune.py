"""The Tune view's state: the base profile chosen (a saved one, the one being edited, the demo model) and
whether it still follows the Profile tab, the tunes Resume can continue, the knobs proposed for the base and
its candidates planned before a run, the running tune's progress and words, and its result (what "Save as new
profile version" saves, under which name).

TunePanel binds its widgets to a TuneState and runs the tune (qt.tune_session.TuneSession, a Qt job): the
panel tells the state what the job does (`started`, `progressed`, `succeeded`, ...). Every store read, the
knob proposal (the model's header, the binary's --help) and the candidates' plan go through the `Run` given
(callbacks.py); only the newest proposal and the newest plan are kept. Listeners get `notify(what, *details)`
with `what` one of: "choices" (the profiles or resumable tunes changed), "running" (a tune started or ended),
"status" (the line under the buttons, or the progress), "knobs_hint" (the line above the knobs), "knobs"
(knobs: a proposal for the base, to show), "candidates" (the candidates or their message changed), "result"
(a tune finished, or a new one cleared it), "saved" (saved, created: the result saved as a profile version),
"save_message" (the line under the result's buttons).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.settings import Settings
from llm_tuner.core.tune import (
    DEFAULT_MARGIN_MIB,
    OBJECTIVES,
    PLACEMENT_KNOB,
    Knob,
    Objective,
    TuneRecord,
    TuneResult,
    TuneSpec,
)
from llm_tuner.core.tune.model import NOT_MEASURED
from llm_tuner.core.tune.objectives import CLIENTS, FLOOR, WEIGHTS
from llm_tuner.services import bench as bench_service
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.tune import (
    PlacementResolver,
    SpeedOracle,
    default_knobs,
    make_plan_fn,
    preview_candidates,
    save_winner,
)
from llm_tuner.state.benchmarks import ProfileFacts
from llm_tuner.state.callbacks import JobProgress, Run, run_now
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.tunes import TuneRepository

log = logging.getLogger(__name__)

# The base profile choices besides saved profile names (the combo's data).
EDITED, DEMO = "\x00edited", "\x00demo"
RESUMABLE = ("interrupted", "cancelled", "failed")  # tune statuses Resume offers
READY = "Press Run to tune; every trial is kept in the Benchmarks History."
NO_BASE = "Choose a base profile: its candidates show here before you run the tune."
SpecFn = Callable[[], TuneSpec]  # builds the TuneSpec on the job's thread
NO_PROFILE = ProfileFacts()


@dataclass
class Choices:
    """What the Tune view offers: saved profile names and tunes that can be resumed."""

    profiles: list[str] = field(default_factory=list)
    resumable: list[TuneRecord] = field(default_factory=list)  # unfinished, or no candidate measured


def load_choices(engine: Any) -> Choices:
    """Saved profile names and the tunes Resume can continue (a job: SQL). Tunes left "running" by a process
    that is gone become "interrupted" first, as the History does with runs."""
    tunes = TuneRepository(engine)
    tunes.mark_interrupted()
    return Choices(
        ProfileRepository(engine).names(),
        [
            t
            for t in tunes.list_tunes()
            if t.status in RESUMABLE or (t.result is not None and t.result.verdict == NOT_MEASURED)
        ],
    )  # the budget ran out first


def base_target(
    engine: Any, choice: str, state_profile: Any, state_name: str | None, extra: str
) -> bench_service.ServerTarget:
    """The server the tune starts from: a saved profile's newest version, the profile edited in the
    Profile tab, or the demo model with default flags; `extra` llama-server flags appended (a job: SQL)."""
    if choice == EDITED:
        if state_profile is None:
            raise bench_service.BenchError(
                "No profile is being edited: choose a saved profile or the demo model."
            )
        target = bench_service.target_from_profile(state_profile, label=state_name or "unsaved profile")
    elif choice == DEMO:
        model = find_demo_model()
        if model is None:
            raise bench_service.BenchError(
                "The demo model is missing: run `python -m llm_tuner.services.demo_model`."
            )
        target = bench_service.demo_target(model)
    else:
        saved = ProfileRepository(engine).latest(choice)
        if saved is None:
            raise bench_service.BenchError(f"The profile {choice!r} is gone: choose another one.")
        target = bench_service.target_from_profile(saved)
    words = shlex.split(extra)
    if words:  # a flag given again replaces the profile's value (llama-server reads the last one anyway)
        keys = [f[0].key for w in words if (f := flags.lookup(w)) is not None]
        target.argv = [*flags.without(target.argv, *keys), *words] if keys else [*target.argv, *words]
    return target


def proposed_knobs(
    settings: Settings,
    engine: Any,
    target: bench_service.ServerTarget,
    objective: Objective,
    headroom_mib: int,
) -> list[Knob]:
    """The knobs worth trying for this base (services.tune.default_knobs: the model, the binary's --help, its
    devices, whether the base fits with the headroom; placements ranked by the speed model where it is
    calibrated); a job: it reads the model's header and runs the binary."""
    plan_fn = make_plan_fn(headroom_mib, binary=target.binary)
    knobs: list[Knob] = default_knobs(
        list(target.argv),
        dict(target.env),
        binary=target.binary,
        objective=objective,
        plan_fn=plan_fn,
        settings=settings,
        speed=_speed(target, objective, engine),
    )
    return knobs


def _speed(target: bench_service.ServerTarget, objective: Objective, engine: Any) -> SpeedOracle | None:
    """The speed model of a base on this machine (None when it cannot be set up: the views show no
    prediction)."""
    try:
        oracle: SpeedOracle = SpeedOracle.for_tune(
            list(target.argv), dict(target.env), objective, engine=engine, binary=target.binary
        )
        return oracle
    except Exception as exc:  # noqa: BLE001 - the plan's verdicts still show
        log.info("no speed predictions for the candidates: %s", exc)
        return None


def candidate_preview(
    target: bench_service.ServerTarget,
    knobs: Sequence[Knob],
    headroom_mib: int,
    objective: Objective | None = None,
    engine: Any = None,
) -> list[Any]:
    """Each knob value as a candidate with the memory plan's verdict and the speed model's prediction (the
    history's calibration of this build), placements resolved at the headroom (services.tune.preview, the list
    `tune --dry-run` prints); a job: it reads the model and lists the devices."""
    resolver = None
    if any(k.flag == PLACEMENT_KNOB for k in knobs):
        resolver = PlacementResolver(
            list(target.argv), dict(target.env), binary=target.binary, margin_mib=headroom_mib
        )
    plan_fn = make_plan_fn(headroom_mib, binary=target.binary)
    speed = _speed(target, objective, engine) if objective is not None else None
    cands: list[Any] = preview_candidates(
        list(target.argv), dict(target.env), list(knobs), resolver, plan_fn, speed
    )
    return cands


def save_result_profile(engine: Any, name: str, result: TuneResult, catalog: Any = None) -> tuple[Any, bool]:
    """Save what the tune keeps (its winner: the baseline unless it won the final A/B) as the newest version
    of profile `name`, with the tune's stored spec (services.tune.save_winner); a job: SQL. Returns (the
    version, whether it is new): the store returns the newest version instead when that holds these settings
    already."""
    record = TuneRepository(engine).get(result.tune_id) if result.tune_id is not None else None
    if record is None or record.spec is None:
        raise ValueError(f"tune {result.tune_id} is not in the store any more")
    before = ProfileRepository(engine).latest(name)
    saved = save_winner(engine, name, result, record.spec, catalog)
    return saved, before is None or saved.version_id != before.version_id


@dataclass(frozen=True)
class TuneInputs:
    """The Tune form's objective and constraints as typed; `objective()` and `constraints()` are what the
    TuneSpec takes (the rows an objective's kind does not use stay at their defaults: OBJECTIVES' `uses`)."""

    kind: str = "gen_tps"
    prompt_tokens: int = 512
    gen_tokens: int = 64
    depth: int = 0
    clients: int = 1
    min_gen_tps: float = 10.0
    gen_weight: float = 0.5
    prefill_weight: float = 0.5
    min_ctx: int = 0  # 0: no minimum
    headroom_mib: int = DEFAULT_MARGIN_MIB
    budget_s: int = 600
    max_ppl_increase_pct: float = 1.0
    screen_reps: int = 2
    final_reps: int = 5
    final_rounds: int = 2

    def objective(self) -> Objective:
        uses = OBJECTIVES[self.kind].uses
        weights = (
            {"gen_tps": self.gen_weight, "prefill_tps": self.prefill_weight} if WEIGHTS in uses else None
        )
        return Objective(
            kind=self.kind,
            prompt_tokens=self.prompt_tokens,
            gen_tokens=self.gen_tokens,
            depth=self.depth,
            clients=self.clients if CLIENTS in uses else 1,
            min_gen_tps=self.min_gen_tps if FLOOR in uses else None,
            weights=weights,
        )

    def constraints(self) -> dict[str, Any]:
        """TuneSpec's keyword arguments besides the base, objective and knobs."""
        return {
            "min_ctx": self.min_ctx or None,
            "headroom_mib": self.headroom_mib,
            "budget_s": self.budget_s,
            "max_ppl_increase_pct": self.max_ppl_increase_pct,
            "final_reps": self.final_reps,
            "final_rounds": self.final_rounds,
            "screen_reps": self.screen_reps,
        }


@dataclass(frozen=True)
class Base:
    """The base as the form has it: the choice (a saved name, EDITED or DEMO) and the extra flags."""

    choice: str | None
    extra: str = ""


class TuneState(JobProgress):
    """What the Tune view tunes, how the tune goes, and what it found."""

    def __init__(
        self,
        engine: Any,
        *,
        profile: ProfileFacts = NO_PROFILE,
        settings: Callable[[], Settings] = Settings,
        run: Run = run_now,
    ) -> None:
        super().__init__(READY)
        self.engine = engine
        self.settings = settings
        self.run = run
        self._choices = Choices()
        self._seen_profile = (profile.name, profile.profile is not None)  # the Profile tab's, as last seen
        self.user_chose_base = False  # until then the base follows the profile the Profile tab shows
        # a llama-server the tune runs instead of the base's own (Compare's "Re-tune for this build")
        self.binary: str | None = None
        self.requested_base: str | None = None  # asked from outside, chosen once listed
        self._proposal_seq = 0
        self._candidates_seq = 0
        self._base: tuple[tuple[Base, ProfileFacts], bench_service.ServerTarget] | None = None
        self._candidates: list[Any] = []
        self._candidates_message = NO_BASE
        self._result: TuneResult | None = None
        self.save_name = ""  # the profile name "Save as new profile version" suggests for the running tune
        self.objective_text = ""  # the running tune's objective, for the report

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def profiles(self) -> tuple[str, ...]:
        """The saved profiles a tune can start from."""
        return tuple(self._choices.profiles)

    @property
    def resumable(self) -> tuple[TuneRecord, ...]:
        return tuple(self._choices.resumable)

    @property
    def base_target(self) -> bench_service.ServerTarget | None:
        """The base resolved by the newest proposal (None: none yet)."""
        return self._base[1] if self._base is not None else None

    @property
    def candidates(self) -> tuple[Any, ...]:
        """The knobs' values planned against the devices (services.tune.preview's candidates)."""
        return tuple(self._candidates)

    @property
    def candidates_message(self) -> str:
        """What the Candidates tab says instead of the candidates ('' once they are shown)."""
        return self._candidates_message

    @property
    def result(self) -> TuneResult | None:
        """The finished tune's result (None: none yet, or a new tune runs)."""
        return self._result

    # -- choices ---------------------------------------------------------------------------------------
    def reload_choices(self) -> None:
        """Saved profiles for the base, interrupted tunes for Resume (through `run`)."""
        engine = self.engine
        self.run(lambda: load_choices(engine), self._on_choices, self._on_choices_failed)

    def _on_choices(self, choices: Choices) -> None:
        self._choices = choices
        self.notify("choices")

    def _on_choices_failed(self, exc: BaseException) -> None:
        self.say(f"Could not read the saved profiles and tunes: {exc}")

    @staticmethod
    def preferred_base(facts: ProfileFacts) -> str | None:
        """The base that follows the Profile tab: its saved profile, else the one being edited."""
        return facts.name or (EDITED if facts.profile is not None else None)

    @staticmethod
    def resumable_text(tune: TuneRecord) -> str:
        why = "no candidate measured" if tune.status == "complete" else tune.status
        return f"tune #{tune.number or tune.id} {tune.label} ({why}, {tune.n_trials} trials)"

    def profile_changed(self, facts: ProfileFacts, base: Base) -> str:
        """The Profile tab's profile changed: "reload" (another name, or one being edited now: the choices
        change), "propose" (edits to the base being edited: its knobs again, once the edits pause) or ""."""
        seen = (facts.name, facts.profile is not None)
        if seen != self._seen_profile:
            self._seen_profile = seen
            self.reload_choices()
            return "reload"
        return "propose" if base.choice == EDITED else ""

    # -- the knobs and candidates ------------------------------------------------------------------------
    def propose(self, base: Base, facts: ProfileFacts, objective: Objective, headroom_mib: int) -> None:
        """Resolve the base and propose its knobs (through `run`: SQL and the model's header); the newest
        proposal's knobs go to listeners ("knobs")."""
        choice = base.choice
        if choice is None:
            return
        self._proposal_seq += 1
        seq, engine, settings = self._proposal_seq, self.engine, self.settings()

        def work() -> tuple[bench_service.ServerTarget, list[Knob]]:
            target = self.target_for(choice, facts, base.extra)
            return target, proposed_knobs(settings, engine, target, objective, headroom_mib)

        def done(loaded: tuple[bench_service.ServerTarget, list[Knob]]) -> None:
            if seq == self._proposal_seq:
                self._base = ((base, facts), loaded[0])
                self.notify("knobs", loaded[1])

        def failed(exc: BaseException) -> None:
            if seq == self._proposal_seq:
                self.notify("knobs_hint", f"No knobs proposed: {exc}")

        self.notify("knobs_hint", "Proposing knobs…")
        self.run(work, done, failed)

    def plan_candidates(self, knobs: Sequence[Knob], headroom_mib: int, objective: Objective) -> None:
        """The knobs as the form has them now, each value planned against the devices (through `run`)."""
        target = self.base_target
        if target is None:
            self._set_candidates([], NO_BASE)
            return
        engine = self.engine
        self._candidates_seq += 1
        seq = self._candidates_seq
        self._set_candidates(self._candidates, "Planning the candidates…")

        def done(cands: list[Any]) -> None:
            if seq == self._candidates_seq:
                self._set_candidates(cands, "")

        def failed(exc: BaseException) -> None:
            if seq == self._candidates_seq:
                self._set_candidates([], f"The candidates could not be planned: {exc}")

        knobs = tuple(knobs)
        self.run(lambda: candidate_preview(target, knobs, headroom_mib, objective, engine), done, failed)

    def _set_candidates(self, cands: list[Any], message: str) -> None:
        self._candidates, self._candidates_message = list(cands), message
        self.notify("candidates")

    def retune_for_build(self, profile_name: str, binary: str) -> None:
        """Re-tune `profile_name` as the base, run by `binary` (Compare found it slower under that build): the
        base stays chosen; the choices are reloaded so the panel selects it ("choices")."""
        self.binary = binary or None
        self.user_chose_base = True
        self.requested_base = profile_name
        self.say(f"Re-tuning {profile_name} for the build {binary}: check the knobs, then Run tune.")
        self.reload_choices()

    def target_for(
        self, choice: str, facts: ProfileFacts | None = None, extra: str = ""
    ) -> bench_service.ServerTarget:
        """The base `choice` as a tune of it runs (`base_target`: SQL, a job), by the build a re-tune asked
        for (`binary`) where there is one."""
        profile, name = (facts.profile, facts.name) if facts is not None else (None, None)
        target = base_target(self.engine, choice, profile, name, extra)
        if self.binary:
            target.binary = self.binary
        return target

    # -- running ---------------------------------------------------------------------------------------
    def spec_builder(
        self,
        base: Base,
        facts: ProfileFacts,
        objective: Objective,
        knobs: Sequence[Knob],
        constraints: dict[str, Any],
    ) -> SpecFn:
        """A function for the job's thread that builds the TuneSpec (ValueError: what the form lacks)."""
        choice = base.choice
        if choice is None:
            raise ValueError("choose a base profile first")
        if not knobs:
            raise ValueError("check at least one knob (or add a custom one)")
        knobs = tuple(knobs)

        def build() -> TuneSpec:
            target = self.target_for(choice, facts, base.extra)
            return TuneSpec(
                base_argv=tuple(target.argv),
                base_env=dict(target.env),
                binary=target.binary,
                label=target.label,
                profile_version_id=target.profile_version_id,
                objective=objective,
                knobs=knobs,
                **constraints,
            )

        return build

    def prepare_run(
        self,
        base: Base,
        facts: ProfileFacts,
        objective: Objective,
        knobs: Sequence[Knob],
        constraints: dict[str, Any],
    ) -> SpecFn | None:
        """Run's spec builder, or None with why not in the status line. The base then stays chosen; the
        result will be saved as a new version of the saved profile tuned, else as a new profile."""
        try:
            build = self.spec_builder(base, facts, objective, knobs, constraints)
        except ValueError as exc:
            self.say(f"Cannot start: {exc}.")
            return None
        self.user_chose_base = True  # the base of a tune stays chosen; the Profile tab no longer moves it
        self.objective_text = objective.describe()
        resolved = self.base_target
        choice = base.choice or ""
        self.save_name = (
            choice
            if choice not in (EDITED, DEMO)
            else (f"{facts.name or (resolved.label if resolved else 'profile')} tuned")
        )
        return build

    def prepare_resume(self, tune: TuneRecord | None, budget_s: float) -> SpecFn | None:
        """Resume's spec (the stored one with a new budget for what is left), or None (said when the tune
        has no stored spec)."""
        if tune is None:
            return None
        if tune.spec is None:
            self.say(f"Tune #{tune.number or tune.id} has no stored spec: it cannot be resumed.")
            return None
        spec = tune.spec.model_copy(update={"budget_s": float(budget_s)})
        self.save_name = spec.label  # a saved profile's tune is labelled with its name
        self.objective_text = spec.objective.describe()
        return lambda: spec

    def started(self, what: str) -> None:
        self._result = None
        self.notify("result")
        self.begin(what)

    def not_started(self, what: str) -> None:
        self.say(f"{what} not started: a tune is running.")

    def cancelling(self) -> None:
        self.say("Cancelling after the current request… (trials are kept: Resume continues)")

    def succeeded(self, result: TuneResult, n_trials: int) -> None:
        """The tune finished; `n_trials`: the trials the view holds."""
        self._result = result
        self.notify("result")
        self.stopped_at(
            f"Tune #{result.tune_number or result.tune_id} finished: {result.verdict}. "
            f"{n_trials} trial(s) kept in the History.",
            cancelled=False,
            fraction=1.0,
        )

    def failed(self, exc: BaseException) -> None:
        self.say(f"The tune failed: {exc}. Its trials are kept; check the log, then Resume or Run again.")

    def cancelled(self) -> None:
        self.stopped_at("Cancelled. The trials are kept: Resume continues this tune.")

    def finished(self) -> None:
        self.set_running(False)
        self.reload_choices()

    # -- the result's actions --------------------------------------------------------------------------
    def save_result(self, name: str, catalog: Any = None) -> bool:
        """Save the result as a version of profile `name` (through `run`); False with no result."""
        result, engine = self._result, self.engine
        if result is None:
            return False

        def done(answer: tuple[Any, bool]) -> None:
            saved, created = answer
            if created:
                self.notify("save_message", f"Saved {saved.name} version {saved.version}.")
                self.notify("saved", saved, created)
                self.reload_choices()
            else:
                self.notify(
                    "save_message",
                    f"{saved.name} version {saved.version} has these settings already: no new version.",
                )

        self.run(
            lambda: save_result_profile(engine, name, result, catalog),
            done,
            lambda exc: self.notify("save_message", f"Could not save: {exc}"),
        )
        return True


__all__ = [
    "DEMO",
    "EDITED",
    "Base",
    "Choices",
    "TuneState",
    "base_target",
    "candidate_preview",
    "load_choices",
    "proposed_knobs",
    "save_result_profile",
]
