"""The Compare view's state: what is compared (two runs, or two saved profiles' latest runs), the choices A
and B (the newest two by default), the practical threshold, and the comparison shown: the runs, each metric's
verdict (core.bench_report.compare_runs, held to how much server starts of one command line differ on this
machine: core.bench_starts), the verdict in words, and the rows of what differs (flags, build, driver).

ComparePanel binds its widgets to a CompareState. Every store read (the runs to choose from, the two runs and
their saved profile versions) goes through the `Run` given (callbacks.py): never SQL on the GUI thread.
Listeners get `notify(what)` with `what` one of: "choices" (the lists to choose from, the mode or the chosen
pair changed), "busy" (a comparison is loading, or no longer), "message" (the verdict line alone changed),
"comparison" (a new comparison: rows, verdict, differences, runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.bench_report import (
    compare_runs,
    inconclusive_line,
    metric_label,
    pooled,
    run_flag_diff,
    run_identity_diff,
    run_summary,
    speculative_lines,
    speculative_speedup,
)
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.bench_starts import (
    HISTORY_RUNS,
    compare_across_starts,
    same_settings,
    side_text,
    side_warnings,
)
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.stats import AB_THRESHOLD_PCT, BETTER, NOISE, WORSE, Comparison
from llm_tuner.services.bench import profile_versions
from llm_tuner.services.bench.builds import BuildsVerdict
from llm_tuner.state.callbacks import Observable, Run, run_now
from llm_tuner.store.runs import RunRepository

PICK = "Pick A and B, then Compare. Runs appear here after a benchmark."
NOTHING_YET = "Nothing to compare yet: benchmark two profiles in the Benchmarks tab."
NO_FINISHED_RUN = "One of the two has no finished run. Benchmark it first."
SAME_COMMAND = "(same command line)"
ABSENT = "(absent)"
CHOICES_LIMIT = 500  # the runs listed to choose from, newest first


@dataclass(frozen=True)
class Loaded:
    """A comparison as a load made it: the two sides (pooled), their saved profile versions, the comparisons
    held to start noise and the lines that say so, the runs each side pools (newest first)."""

    a: BenchRun
    b: BenchRun
    profile_a: LaunchProfile | None
    profile_b: LaunchProfile | None
    comparisons: list[Comparison]
    lines: list[str]
    side_a: list[BenchRun]
    side_b: list[BenchRun]


def _one(run: BenchRun | None) -> list[BenchRun]:
    return [] if run is None else [run]


@dataclass(frozen=True)
class Choice:
    """One entry of the A and B lists: its words and what it names (a run id, or a profile's name)."""

    text: str
    key: int | str


@dataclass(frozen=True)
class DiffRow:
    """One thing that differs between A and B: a flag, the build, the driver, the model file."""

    flag: str
    a: str
    b: str


def _cell(value: str | None) -> str:
    """A side of a difference as the table shows it: absent, a flag without a value ('on'), or the value."""
    return ABSENT if value is None else (value or "on")


class CompareState(Observable):
    """B against A: what to choose from, what is chosen, and the comparison shown."""

    def __init__(self, engine: Any, *, threshold_pct: float = AB_THRESHOLD_PCT, run: Run = run_now) -> None:
        super().__init__()
        self.engine = engine
        self.repo = RunRepository(engine)
        self.run = run
        self.threshold_pct = float(threshold_pct)  # smaller differences are "within noise" even when real
        self._by_profiles = False
        self._runs: list[BenchRun] = []
        self._labels: list[str] = []
        self._chosen: tuple[int | str | None, int | str | None] = (None, None)
        self._newest_seen: int | str | None = None
        self._busy = False
        self._message = PICK
        self._run_a: BenchRun | None = None
        self._run_b: BenchRun | None = None
        self._comparisons: list[Comparison] = []
        self._start_lines: list[str] = []  # what start-to-start variation did to the verdicts
        self._pooled: tuple[list[BenchRun], list[BenchRun]] = ([], [])  # the runs each side pools
        self._chart_names: tuple[str, ...] = ()
        self._diff: list[DiffRow] = []

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def by_profiles(self) -> bool:
        """Compare two saved profiles (their newest runs of one setting, pooled) instead of two runs."""
        return self._by_profiles

    @property
    def choices(self) -> tuple[Choice, ...]:
        """What A and B are chosen from, newest first: runs, or the profiles' names."""
        if self._by_profiles:
            return tuple(Choice(label, label) for label in self._labels)
        return tuple(Choice(_run_text(r), r.id) for r in self._runs if r.id is not None)

    @property
    def chosen(self) -> tuple[int | str | None, int | str | None]:
        """The keys of A (the baseline) and B."""
        return self._chosen

    @property
    def busy(self) -> bool:
        """The two sides are being read from the store (Compare waits)."""
        return self._busy

    @property
    def message(self) -> str:
        """The verdict in words, or what to do first."""
        return self._message

    @property
    def run_a(self) -> BenchRun | None:
        return self._run_a

    @property
    def run_b(self) -> BenchRun | None:
        return self._run_b

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        """Each metric of the two runs: B against A, with its verdict."""
        return tuple(self._comparisons)

    @property
    def diff(self) -> tuple[DiffRow, ...]:
        """What differs between A and B (one 'same command line' row when nothing does)."""
        return tuple(self._diff)

    # -- the choices -----------------------------------------------------------------------------------
    def refresh_choices(self) -> None:
        """Read the runs and profiles to choose from (through `run`)."""
        repo = self.repo
        self.run(
            lambda: (repo.list_runs(with_reps=False, limit=CHOICES_LIMIT), repo.labels(newest_first=True)),
            self._on_choices_read,
            lambda exc: self._say(f"Could not read the runs to compare: {exc}"),
        )

    def _on_choices_read(self, result: tuple[list[BenchRun], list[str]]) -> None:
        self._runs, self._labels = list(result[0]), list(result[1])
        self._keep_choice()

    def set_by_profiles(self, by_profiles: bool) -> None:
        if by_profiles != self._by_profiles:
            self._by_profiles = by_profiles
            self._keep_choice()

    def choose(self, a: int | str | None, b: int | str | None) -> None:
        """The user picked A and B (keys of `choices`)."""
        if (a, b) != self._chosen:
            self._chosen = (a, b)
            self.notify("choices")

    def _keep_choice(self) -> None:
        """After the lists changed: keep what was chosen where it is still listed; a new newest entry (a run
        just measured, a profile just saved) makes the pair the newest two; A and B never the same entry."""
        keys = [c.key for c in self.choices]
        a, b = (k if k in keys else None for k in self._chosen)
        newest = keys[0] if keys else None
        if newest != self._newest_seen:
            self._newest_seen = newest
            a, b = keys[min(1, len(keys) - 1)] if keys else None, newest
        elif a is None and keys:
            a = keys[0]
        if b is None and keys:
            b = keys[0]
        if len(keys) > 1 and a == b:
            a, b = keys[1], keys[0]  # the newest two: A the older one
        self._chosen = (a, b)
        self.notify("choices")

    # -- comparing -------------------------------------------------------------------------------------
    def compare(self) -> bool:
        """Compare the chosen pair (read through `run`); False, and said, when nothing is chosen. Two
        profiles: each one's newest run and its earlier runs of the same settings, pooled
        (core.bench_starts)."""
        a, b = self._chosen
        if a is None or b is None:
            self._say(NOTHING_YET)
            return False
        repo = self.repo
        if self._by_profiles:
            self._load(lambda: (same_settings(repo.list_runs(label=str(a), limit=20)),
                                same_settings(repo.list_runs(label=str(b), limit=20))))
        else:
            self._load(lambda: (_one(repo.get_run(int(a))), _one(repo.get_run(int(b)))))
        return True

    def compare_runs(self, a_id: int, b_id: int) -> None:
        """Two runs sent from elsewhere (the History's "Compare two"): by runs, those two."""
        self._by_profiles = False
        self._keep_choice()
        self.choose(a_id, b_id)
        repo = self.repo
        self._load(lambda: (_one(repo.get_run(a_id)), _one(repo.get_run(b_id))))

    def _load(self, get: Callable[[], tuple[list[BenchRun], list[BenchRun]]]) -> None:
        engine, repo, threshold = self.engine, self.repo, self.threshold_pct

        def work() -> Loaded | None:
            side_a, side_b = get()
            if not side_a or not side_b:
                return None
            pa, pb = profile_versions(engine, side_a[0].profile_version_id, side_b[0].profile_version_id)
            # how much starts of one command line differ here: the history's quiet runs
            a, b, comps, lines = compare_across_starts(side_a, side_b, repo.list_overview(limit=HISTORY_RUNS),
                                                       threshold)
            return Loaded(a, b, pa, pb, comps, lines, list(side_a), list(side_b))

        self._set_busy(True)
        self.run(work, self._on_loaded, self._on_load_failed)

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.notify("busy")

    def _on_load_failed(self, exc: BaseException) -> None:
        self._set_busy(False)
        self._say(f"Could not read the two runs to compare: {exc}")

    def _on_loaded(self, loaded: Loaded | None) -> None:
        self._set_busy(False)
        if loaded is None:
            self._say(NO_FINISHED_RUN)
            return
        self.show(loaded.a, loaded.b, loaded.profile_a, loaded.profile_b, judged=loaded)

    def _say(self, text: str) -> None:
        self._message = text
        self.notify("message")

    def show(
        self,
        a: BenchRun,
        b: BenchRun,
        profile_a: LaunchProfile | None = None,
        profile_b: LaunchProfile | None = None,
        *,
        headline: str = "",
        judged: Loaded | None = None,
        chart_names: tuple[str, ...] = (),
    ) -> None:
        """Compare run B with run A (their saved profile versions, when known, name the flags that differ).
        `judged`: the comparisons as a load made them (held to start noise, the runs each side pools); else
        they are made here from the two runs' repetitions alone."""
        self._run_a, self._run_b = a, b
        self._chart_names = chart_names  # the charts' names of A and B where the sides say it better (builds)
        if judged is None:
            self._comparisons, self._start_lines = compare_runs(a, b, self.threshold_pct), []
            self._pooled = ([], [])
        else:
            self._comparisons, self._start_lines = list(judged.comparisons), list(judged.lines)
            self._pooled = (judged.side_a, judged.side_b)
        self._message = "\n".join(x for x in (headline, self.verdict_text()) if x)
        diff = run_identity_diff(a, b) + run_flag_diff(a, b, profile_a, profile_b)
        self._diff = [DiffRow(d["flag"], _cell(d["a"]), _cell(d["b"])) for d in diff] or [
            DiffRow(SAME_COMMAND, "", "")
        ]
        self.notify("comparison")

    def show_builds(self, verdict: BuildsVerdict) -> None:
        """A build A/B's result: its pooled sides as A and B, its verdict first."""
        if verdict.a is None or verdict.b is None:
            self._say(verdict.text)
            return
        # its verdicts as the build A/B judged them (held to the start noise its rounds show)
        judged = Loaded(verdict.a, verdict.b, None, None, list(verdict.comparisons), [], [], [])
        sides = (("A", verdict.a), ("B", verdict.b))
        names = tuple(f"{side}: {f'build {r.build.short}' if r.build else r.binary_path or 'its build'} "
                      "(its rounds pooled)" for side, r in sides)
        self.show(verdict.a, verdict.b, headline=verdict.text, judged=judged, chart_names=names)

    @property
    def chart_sides(self) -> list[tuple[str, BenchRun]]:
        """A and B as the charts show them: a side that pools several runs as one run with every repetition
        (what its verdict read), named by its runs: ("A: runs 3, 7 · ub512", run)."""
        out = []
        for i, (side, run, runs) in enumerate((("A", self._run_a, self._pooled[0]),
                                                ("B", self._run_b, self._pooled[1]))):
            if run is None:
                continue
            runs = sorted(runs or [run], key=lambda r: r.id or 0)
            merged = pooled(runs) or run
            ids = ", ".join(str(r.id) for r in runs)
            name = f"{side}: run{'s' if len(runs) > 1 else ''} {ids} · {run.label}"
            out.append((self._chart_names[i] if i < len(self._chart_names) else name, merged))
        return out

    def verdict_text(self) -> str:
        """The comparison in words: the counts of each verdict, speculative figures, warnings, notes."""
        a, b, threshold = self._run_a, self._run_b, self.threshold_pct
        if a is None or b is None:
            return ""
        counts = {v: sum(1 for c in self._comparisons if c.verdict == v) for v in (BETTER, WORSE, NOISE)}
        unclear_cs = [c for c in self._comparisons if c.inconclusive]
        unclear = [metric_label(c.name) for c in unclear_cs]
        side_a, side_b = self._pooled[0] or [a], self._pooled[1] or [b]  # the runs each side pools
        noise = f"{counts[NOISE]} within noise" + (f" ({len(unclear)} of them inconclusive)" * bool(unclear))
        lines = [
            f"B = {side_text(b, side_b)} against A = {side_text(a, side_a)}: {counts[BETTER]} better,"
            f" {counts[WORSE]} worse, {noise} (95% CI must exclude 0 and |Δ| > {threshold:g}%)."
        ]
        no_interval = any(c.ci_low_pct is None for c in unclear_cs)
        if line := inconclusive_line(unclear, threshold, no_interval=no_interval):
            lines.append(line)
        lines += self._start_lines
        spd = speculative_speedup(b, a) or speculative_speedup(a, b)
        if spd and spd["measured_speedup"]:
            lines.append(spd["text"])
        for run in (a, b):
            sp = run_summary(run)["speculative"]
            if sp:
                lines.append(f"Run {run.id}: " + " ".join(speculative_lines(sp)))
        lines += [f"Warning: {w}" for w in side_warnings(side_a, side_b)]
        if a.spec.model_dump(exclude={"llama_bench"}) != b.spec.model_dump(exclude={"llama_bench"}):
            lines.append("Note: the two runs used different benchmark settings; only common metrics compare.")
        return "\n".join(lines)


def _run_text(run: BenchRun) -> str:
    when = run.started_at.strftime("%Y-%m-%d %H:%M") if run.started_at else ""
    return f"#{run.id} · {run.label} · {when} · {run.status}"


__all__ = ["Choice", "CompareState", "DiffRow"]
