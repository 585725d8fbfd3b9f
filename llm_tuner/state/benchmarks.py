"""The Benchmarks view's state: the run form's values and rules (prompt and generation lengths, repetitions, a
sweep, what can run and why not), the running job's progress and words, the run shown (its notes, a sweep's
table) and, beside it, the speed part (bench.BenchSpeed: measured vs predicted, the refit). The History's
state (filters, the runs listed, open, delete) is `BenchHistory` (bench_history.py).

BenchPanel binds its widgets to a BenchmarksState and runs the job (qt.bench_session.BenchSession, a Qt job):
the panel tells the state what the job does (`started`, `progressed`, `succeeded`, ...). The profile it
benchmarks is the workspace's (`ProfileFacts`, given by the panel at each read). Listeners get `notify(what)`
with `what` one of: "running" (a job started or ended), "status" (the line under the buttons or the progress
changed), "refused" (Run was refused for the profile's advice errors, or no longer: the "Run anyway" button),
"run" (another run is shown: its table, notes, chart), "sweep" (a sweep's runs are shown, or hidden). A Run
asked while the workspace's profile store is still saving waits for it (`wait_for_profile_store`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_tuner.core.advice import Advice
from llm_tuner.core.bench_report import (
    llama_bench_gap,
    metric_label,
    metric_samples,
    pooled,
    run_summary,
    speculative_ab,
    speculative_lines,
)
from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services import bench as bench_service
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.preflight import refusal_text
from llm_tuner.state.bench import BenchSpeed
from llm_tuner.state.callbacks import JobProgress
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.profiles import ProfileRepository

READY = "Set the benchmark and press Run. Every run is kept in the History."
NO_DEMO = (
    "No profile yet and the demo model is missing: edit a profile in the Profile tab, or run "
    "`python -m llm_tuner.services.demo_model`."
)
SWEEP_NEEDS = "A sweep needs a flag, at least one value, and a server the app starts (not an attached URL)."
AB_NEEDS_START = "An A/B against no drafting restarts the server: not with an attached URL."
# what each action is called in the status line
ACTIONS = {
    "run": "Benchmark",
    "sweep": "Sweep",
    "spec_ab": "A/B vs no drafting",
    "router_all": "Every router model",
}


def parse_sweep_values(raw: str) -> list[str]:
    """Sweep values as typed: comma-separated, or ';'-separated when a value itself contains commas."""
    return [v.strip() for v in (raw.split(";") if ";" in raw else raw.split(",")) if v.strip()]


def run_notes(run: BenchRun) -> list[str]:
    """The lines under a run's summary: busy-machine warning, llama-bench gap, memory plan vs measured
    peak per device, speculative decoding's acceptance."""
    notes = [g["text"] for g in llama_bench_gap(run)]
    if run.llama_bench_skipped:
        notes.append("llama-bench lacks (not applied there): " + " ".join(run.llama_bench_skipped))
    if run.llama_bench_error:
        notes.append(f"llama-bench: {run.llama_bench_error}")
    summary = run_summary(run)
    pred, meas = run.memory_predicted_mib or {}, run.memory_measured_mib or {}
    mem = [
        f"{d}: plan {pred[d]:,.0f} MiB" + (f", measured peak {meas[d]:,.0f} MiB" if d in meas else "")
        for d in pred
    ] + [f"{d}: measured peak {v:,.0f} MiB" for d, v in meas.items() if d not in pred]
    if mem:
        notes.append("Memory — " + "; ".join(mem))
    if summary["busy_warning"]:
        notes.insert(0, "Warning: " + summary["busy_warning"])
    spec = summary["speculative"]
    if spec and spec["acceptance"] is not None:
        notes += speculative_lines(spec)
    return notes


@dataclass(frozen=True)
class ProfileFacts:
    """The workspace's profile as a benchmark reads it: the profile edited (None: none yet), its saved name,
    why it cannot run (a problem) and the advice errors that refuse a start."""

    profile: LaunchProfile | None = None
    name: str | None = None
    problem: str | None = None
    errors: Sequence[Advice] = ()


_SPEC = BenchSpec()  # the form starts at the spec's own defaults (one home)


@dataclass(frozen=True)
class BenchForm:
    """The Run tab's form as typed."""

    prompt_lengths: str = ",".join(map(str, _SPEC.prompt_tokens))  # comma-separated token counts
    gen_tokens: int = _SPEC.gen_tokens
    reps: int = _SPEC.reps
    warmup: int = _SPEC.warmup
    warm_cache: bool = _SPEC.warm_cache
    depth: int = _SPEC.depth
    clients: int = _SPEC.clients
    prompt_file: str = ""
    llama_bench: bool = False
    router_model: str = ""
    label: str = ""  # the run's name ("": the profile's)
    extra_flags: str = ""
    url: str = ""  # an attached server
    binary: str = ""  # another llama-server for this run
    sweep_flag: str = ""
    sweep_values: str = ""


@dataclass(frozen=True)
class Prepared:
    """An action ready to start: the spec, the target, the resolver of its saved version (for the job's
    thread) and, for a sweep, the flag and its values."""

    spec: BenchSpec
    target: bench_service.ServerTarget
    resolve: Callable[[], bench_service.ServerTarget]
    sweep_flag: str = ""
    sweep_values: tuple[str, ...] = ()


@dataclass
class SweepTable:
    """A sweep's runs as the view shows them: the values, the chart's series and the table's cells."""

    values: list[str] = field(default_factory=list)
    series: list[tuple[str, list[list[float]]]] = field(default_factory=list)  # gen t/s samples per value
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def sweep_table(runs: Sequence[BenchRun]) -> SweepTable:
    """Generation and prefill medians ± IQR against the swept value."""
    if not runs:
        return SweepTable()
    values = [r.sweep_value or str(r.id) for r in runs]
    samples = [run_summary(r)["metrics"] for r in runs]
    raw = [metric_samples(r) for r in runs]
    names = [n for n in raw[0] if n.startswith(("prefill_tps@", "gen_tps@"))]
    series = [
        (metric_label(n), [list(m[n].values) if n in m else [] for m in raw])
        for n in names
        if n.startswith("gen_tps@")
    ]
    rows = []
    for run, value, m in zip(runs, values, samples, strict=True):
        cells = [f"{value} ({run.status})"]
        for n in names:
            s = m.get(n)
            cells.append(
                "–" if not s or "median" not in s else f"{s['median']:.1f} (IQR {s['iqr']:.1f}, n={s['n']})"
            )
        rows.append(cells)
    return SweepTable(values, series, ["Value", *[metric_label(n) for n in names]], rows)


WAITING_FOR_SAVE = "Waiting for the profile save to finish…"
CANCELLED_BEFORE_START = "Cancelled before the benchmark started."


class BenchmarksState(JobProgress):
    """What the Run tab benchmarks, how it is going, and the run shown."""

    def __init__(
        self,
        engine: Any,
        speed: BenchSpeed | None = None,
        *,
        demo_model: Callable[[], Path | None] = find_demo_model,
        workspace: Workspace | None = None,
    ) -> None:
        super().__init__(READY)
        self.engine = engine
        self.speed = speed  # measured vs predicted of the run shown (state.bench)
        self._demo_model = demo_model
        self.workspace = workspace  # its profile store's busy flag: a Run waits for a save to land
        self._waiting_for: Callable[[], None] | None = None  # the action waiting for the store to settle
        if workspace is not None:
            workspace.add_callback(self._on_workspace_changed)
        self.form = BenchForm()
        self._refused = False
        self._last_run: BenchRun | None = None
        self._notes: list[str] = []
        self._sweep: list[BenchRun] = []

    # -- a profile saved just before Run ------------------------------------------------------------------
    # The Profile view saves on a worker thread of its own: a Run waits for the store to settle, so the
    # run points at that saved version.
    def wait_for_profile_store(self, action: Callable[[], None]) -> bool:
        """True when the profile store is still saving: `action` runs again once it has settled."""
        if self.workspace is None or not self.workspace.profile_store_busy:
            return False
        self._waiting_for = action
        self.set_running(True)
        self.say(WAITING_FOR_SAVE)
        return True

    @property
    def waiting(self) -> bool:
        return self._waiting_for is not None

    def _on_workspace_changed(self, what: str, *_details: Any) -> None:
        ws = self.workspace
        if what != "profile_store" or ws is None or ws.profile_store_busy or self._waiting_for is None:
            return
        action, self._waiting_for = self._waiting_for, None
        self.set_running(False)
        action()

    def close(self) -> None:
        """The view goes: stop following the workspace (a Run still waiting is dropped)."""
        self._waiting_for = None
        if self.workspace is not None:
            self.workspace.remove_callback(self._on_workspace_changed)

    def cancel_wait(self) -> bool:
        """Cancel a Run still waiting for the profile store (True: there was one)."""
        if self._waiting_for is None:
            return False
        self._waiting_for = None
        self.set_running(False)
        self.say(CANCELLED_BEFORE_START)
        return True

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def refused(self) -> bool:
        """The last Run was refused for the profile's advice errors ("Run anyway" is offered)."""
        return self._refused

    @property
    def last_run(self) -> BenchRun | None:
        """The run shown."""
        return self._last_run

    @property
    def notes(self) -> tuple[str, ...]:
        """The lines under the run shown (run_notes; an A/B's measured speed-up)."""
        return tuple(self._notes)

    @property
    def sweep_runs(self) -> tuple[BenchRun, ...]:
        """The sweep (or group) of the run shown; () hides the sweep box."""
        return tuple(self._sweep)

    # -- the form --------------------------------------------------------------------------------------
    def set_form(self, **values: Any) -> None:
        """The widgets' values (BenchForm's fields)."""
        self.form = replace(self.form, **values)

    def spec(self) -> BenchSpec:
        """The benchmark as the form says (ValueError: a length that is not a number, a bad value)."""
        f = self.form
        lengths = tuple(int(x) for x in f.prompt_lengths.replace(" ", "").split(",") if x)
        return BenchSpec(
            prompt_tokens=lengths,
            gen_tokens=f.gen_tokens,
            reps=f.reps,
            warmup=f.warmup,
            warm_cache=f.warm_cache,
            depth=f.depth,
            clients=f.clients,
            prompt_file=f.prompt_file.strip() or None,
            llama_bench=f.llama_bench,
            model=f.router_model.strip() or None,
        )

    def target(self, facts: ProfileFacts, *, force: bool = False) -> bench_service.ServerTarget:
        """What Run benchmarks: an attached URL, the workspace's profile, else the demo model (BenchError:
        why none can run). No SQL: the saved version is found on the job's thread (`version_resolver`)."""
        f = self.form
        url, label = f.url.strip(), f.label.strip()
        if url:
            self._set_refused(False)
            return bench_service.ServerTarget(attached_url=url, label=label or url)
        profile = facts.profile
        if profile is not None and facts.problem:
            raise bench_service.BenchError(facts.problem)
        errors = list(facts.errors) if profile is not None and not force else []
        self._set_refused(bool(errors))
        if errors:  # what would fail is not started only to read "ConnectError"
            raise bench_service.BenchError(refusal_text(errors, "Run anyway"))
        if profile is not None:
            target = bench_service.target_from_profile(
                profile, label=label or facts.name or "unsaved profile"
            )
        else:
            model = self._demo_model()
            if model is None:
                raise bench_service.BenchError(NO_DEMO)
            target = bench_service.demo_target(model)
            if label:
                target.label = label
        if f.binary.strip():
            target.binary = f.binary.strip()
        extra = shlex.split(f.extra_flags)
        if extra:
            target.argv = list(target.argv) + extra
            if not label:
                target.label = f"{target.label} {' '.join(extra)}"
        return target

    def version_resolver(
        self, target: bench_service.ServerTarget, facts: ProfileFacts
    ) -> Callable[[], bench_service.ServerTarget]:
        """A function for the job's thread that points `target` at the saved version of the edited profile,
        or marks its label "(unsaved edits)" when the editor differs from the newest saved version."""
        profile, name = facts.profile, facts.name
        if target.attached_url or profile is None or not name:
            return lambda: target
        engine, named_by_profile = self.engine, not self.form.label.strip()

        def resolve() -> bench_service.ServerTarget:
            saved = ProfileRepository(engine).latest(name)
            if saved is not None and saved.profile == profile:
                target.profile_version_id = saved.version_id
            elif named_by_profile and target.label.startswith(name):
                target.label = f"{name} (unsaved edits){target.label[len(name) :]}"
            return target

        return resolve

    def prepare(self, action: str, facts: ProfileFacts, *, force: bool = False) -> Prepared | None:
        """An action of the Run tab ("run", "sweep", "spec_ab", "router_all") ready to start, or None with
        why not in the status line."""
        try:
            spec, target = self.spec(), self.target(facts, force=force)
        except (ValueError, bench_service.BenchError) as exc:
            text = str(exc).splitlines()[-1] if "validation error" in str(exc) else str(exc)
            self.say(f"Cannot start: {text}")
            return None
        resolve = self.version_resolver(target, facts)
        if action == "sweep":
            flag, values = self.form.sweep_flag.strip(), parse_sweep_values(self.form.sweep_values)
            if not flag or not values or target.attached_url:
                self.say(SWEEP_NEEDS)
                return None
            return Prepared(spec, target, resolve, flag, tuple(values))
        if action == "spec_ab" and target.attached_url:
            self.say(AB_NEEDS_START)
            return None
        return Prepared(spec, target, resolve)

    def target_line(self, facts: ProfileFacts) -> str:
        """What Run benchmarks, in words (the "Server:" line); the profile's name comes first."""
        if facts.profile is not None:
            return f"{facts.name or 'the unsaved profile'}, as edited in the Profile tab"
        model = self._demo_model()
        return (
            f"demo model {model.name} with default flags (no profile edited yet)"
            if model
            else "no profile and no demo model: edit a profile first"
        )

    @staticmethod
    def rerun_target(run: BenchRun) -> bench_service.ServerTarget:
        """A stored run's command line and label, to run again with its spec."""
        return bench_service.ServerTarget(
            argv=list(run.server_argv),
            env=dict(run.server_env),
            label=run.label,
            attached_url=run.attached_url,
            profile_version_id=run.profile_version_id,
            binary=run.binary_path,
        )

    # -- the job ---------------------------------------------------------------------------------------
    def started(self, what: str) -> None:
        self.begin(what)

    def not_started(self, what: str) -> None:
        self.say(f"{what} not started: a benchmark is running; cancel it or let it finish.")

    def succeeded(self, result: BenchRun | list[BenchRun]) -> None:
        """The job's result: a run, or a list (a sweep, an A/B, a router's models): show it and say so."""
        runs = result if isinstance(result, list) else [result]
        if isinstance(result, list):
            self.show_sweep(runs)
        if not runs:
            return
        ab = speculative_ab(runs) if isinstance(result, list) else None
        drafted = pooled([r for r in runs if r.sweep_value != "none"]) if ab else None
        self.show_run(
            drafted or runs[-1],
            finished=True,
            extra_notes=[ab["text"]] if ab else [],
        )
        bad = [r for r in runs if r.status != "complete"]
        if bad:
            self.say(f"Run {bad[0].id} {bad[0].status}: {bad[0].error or ''}")
        else:
            self.say(
                f"Run{'s' if len(runs) > 1 else ''} {', '.join(str(r.id) for r in runs)} complete. "
                "Compare runs in the Compare tab."
            )

    def failed(self, exc: BaseException) -> None:
        self.say(f"The benchmark failed: {exc}. Check the flags and the log, then try again.")

    def cancelled(self) -> None:
        self.stopped_at("Cancelled. Finished repetitions are kept in the History.")

    def _set_refused(self, refused: bool) -> None:
        if refused != self._refused:
            self._refused = refused
            self.notify("refused")

    # -- the run shown ---------------------------------------------------------------------------------
    def show_run(self, run: BenchRun, *, finished: bool = False, extra_notes: Sequence[str] = ()) -> None:
        """A run's results; `finished`: it just ran here (its speed refines the calibration)."""
        self._last_run = run
        self._notes = [*run_notes(run), *extra_notes]
        self.notify("run")
        if self.speed is not None:
            (self.speed.after_run if finished else self.speed.show_run)(run)

    def show_sweep(self, runs: Sequence[BenchRun]) -> None:
        """A sweep's runs (one per value), or () to hide the sweep."""
        self._sweep = list(runs)
        self.notify("sweep")

    def sweep_table(self) -> SweepTable:
        return sweep_table(self._sweep)

    def speed_text(self) -> str:
        """Measured vs predicted for the run shown ('' before it is known, or for another run)."""
        st, run = self.speed, self._last_run
        if st is None or run is None or st.run_id != run.id:
            return ""
        return st.text()


__all__ = [
    "BenchForm",
    "BenchmarksState",
    "Prepared",
    "ProfileFacts",
    "SweepTable",
    "parse_sweep_values",
    "run_notes",
    "sweep_table",
]
