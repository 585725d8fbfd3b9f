"""The Compare tab's "vs another build" row as plain state: the saved profiles to choose from, the A/B of one
profile on its own llama-server (A) and on another build (B), its words, and the re-tune it offers.

`ab_work` refuses (says why, gives None) until a saved profile and another llama-server are chosen, else gives
the work the row's BenchSession runs (services.bench.builds: interleaved A B A B, heat-gated on GPUs, pooled
and compared with the settings' practical threshold); the session's outcome comes back here (`started`,
`progressed`, `show_verdict`, `failed`, `finished`). When the profile is slower on B by more than the noise,
`retune` names the profile and the build, and `ask_retune` asks the Tune tab through the workspace.

Declared properties (said once per change): "names" (the saved profiles, read through `run`), "running",
"status" (the row's line; `status_tip` its full text), "retune" ((profile, build) offered, or None).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.core.bench_starts import HISTORY_RUNS
from llm_tuner.core.settings import Settings
from llm_tuner.services import binaries
from llm_tuner.services.bench import BenchRunner, target_from_profile
from llm_tuner.services.bench.builds import BuildsVerdict, builds_ab, builds_verdict
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.profiles import ProfileRepository

# What a build A/B from the window measures: short, like the Benchmarks tab's default
BUILDS_SPEC = BenchSpec(prompt_tokens=(512,), gen_tokens=128, reps=3, warmup=1)
CHOOSE_FIRST = "Choose a saved profile and another llama-server first."
STATUS_CHARS = 200  # the row's line; the whole verdict is its tooltip (and the panel's, below the row)

# the row's BenchSession runs it: (runner, progress, cancelled) -> the verdict
ABWork = Callable[[BenchRunner, Callable[..., Any], Callable[[], bool]], BuildsVerdict]


class BuildsAB(Observable):
    """One saved profile measured on two llama-server builds, as the Compare tab's row shows it."""

    names = Declared[tuple[str, ...]]((), topic="names")
    running = Declared[bool](False, topic="running")
    status = Declared[str]("", topic="status")
    retune = Declared[tuple[str, str] | None](None, topic="retune")

    def __init__(
        self,
        profiles: ProfileRepository,
        workspace: Workspace,
        *,
        settings: Callable[[], Settings] = Settings,
        run: Run = run_now,
    ) -> None:
        super().__init__()
        self.profiles = profiles
        self.workspace = workspace
        self.settings = settings
        self.run = run
        self.status_tip = ""
        self.pending: tuple[str, str] = ("", "")  # the profile and build of the A/B running
        workspace.add_callback(self._workspace_said)  # a profile saved later is listed at once

    def _workspace_said(self, what: str, *_details: object) -> None:
        if what == "profile_names":
            self.names = tuple(self.workspace.profile_names)

    def load_names(self) -> None:
        """Read the saved profiles' names (through `run`)."""
        repo = self.profiles
        self.run(
            repo.names,
            self._names_read,
            lambda exc: setattr(self, "status", f"The saved profiles could not be read: {exc}"),
        )

    def _names_read(self, names: list[str]) -> None:
        self.names = tuple(names)

    def ab_work(self, name: str, other: str, rounds: int, spec: BenchSpec = BUILDS_SPEC) -> ABWork | None:
        """The A/B of profile `name` against the build at `other` (the user chose it: that confirms it may
        run), or None with the reason said when either is missing."""
        other = other.strip()
        if not name or not other:
            self.status = CHOOSE_FIRST
            return None
        repo, settings = self.profiles, self.settings()

        def work(
            runner: BenchRunner, progress: Callable[..., Any], cancelled: Callable[[], bool]
        ) -> BuildsVerdict:
            saved = repo.latest(name)
            if saved is None:
                raise ValueError(f"no saved profile named {name!r}")
            binaries.check_executable(Path(other))
            runner.settings = binaries.trust_binary(other, settings, save=False)
            group_id, runs = builds_ab(
                runner,
                target_from_profile(saved),
                spec,
                other,
                rounds=rounds,
                progress=progress,
                cancelled=cancelled,
            )
            return builds_verdict(runs, group_id, settings.ab_threshold_pct,
                                  runner.repo.list_overview(limit=HISTORY_RUNS))

        return work

    def started(self, name: str, other: str) -> None:
        """The session took the A/B of `ab_work(name, other, ...)`."""
        self.pending = (name, other.strip())
        self.status_tip = ""
        self.running = True
        self.retune = None
        self.status = "starting…"

    def progressed(self, text: str) -> None:
        self.status = text[:160]

    def succeeded(self, verdict: BuildsVerdict) -> None:
        self.show_verdict(verdict, *self.pending)

    def failed(self, exc: BaseException) -> None:
        self.status = f"The build A/B failed: {exc}"

    def finished(self) -> None:
        self.running = False

    def show_verdict(self, verdict: BuildsVerdict, name: str, other: str) -> None:
        """The A/B of profile `name` against the build at `other`; a re-tune for that build is offered when
        the profile is slower there by more than the noise."""
        self.status_tip = verdict.text
        self.status = "done: " + verdict.text[:STATUS_CHARS]
        self.retune = (name, other) if verdict.b_slower and name and other else None

    @property
    def retune_tip(self) -> str:
        if self.retune is None:
            return ""
        name, other = self.retune
        return (
            f"{name} is slower on this build by more than the noise: the settings tuned before may no "
            f"longer be best. Opens the Tune tab with {name} as the base, run by {other}."
        )

    def ask_retune(self) -> None:
        """Ask the Tune tab (through the workspace) for a tune of the profile run by build B."""
        if self.retune is not None:
            self.workspace.request_tune(*self.retune)
