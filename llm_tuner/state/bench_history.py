"""The Benchmarks History's state: the filters, the runs listed (with their groups: "tune #7", "sweep #3"),
the profiles and builds to filter by, the hint above the table, and what its actions do (open a run with its
sweep, delete runs, send two to Compare, re-run one, read runs to export).

Every store read and write goes through the `Run` given (callbacks.py): never SQL on the GUI thread. Loads may
finish out of order: only the newest one's rows are kept (an older one finishing last showed a deleted run
again). RunHistoryTab binds its widgets to a BenchHistory. Listeners get `notify(what, *details)` with `what`
one of: "runs" (the rows, the profiles or builds to filter by changed), "hint" (the line above the table),
"opened" (run, its group's runs: a run to show), "deleted" (runs were deleted: the other views reload),
"export" (runs read whole, to write).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llm_tuner.core.bench_spec import BenchRun, RunGroup
from llm_tuner.core.build import BuildStamp
from llm_tuner.state.callbacks import Observable, Run, run_now
from llm_tuner.store.runs import RunRepository

NO_RUNS = (
    "No runs yet. Set a benchmark in the Run tab and press Run; every run appears here, also after a restart."
)
SELECT_RERUN = "Select a run to re-run it with the same command line and benchmark."
SELECT_DELETE = "Select the run(s) to delete."
SELECT_TWO = "Select exactly two runs (Ctrl+click) to compare them."
SELECT_EXPORT = "Select the run(s) to export."


@dataclass(frozen=True)
class HistoryFilters:
    """What the History lists: a model (its path contains), a profile (a run's label), a binary version, a
    day and a build (its key); None is "all"."""

    model: str | None = None
    label: str | None = None
    binary: str | None = None
    since: datetime | None = None
    build: str | None = None


Loaded = tuple[int, list[BenchRun], list[str], dict[int, RunGroup | None], list[BuildStamp]]


class BenchHistory(Observable):
    """Every stored run, filtered; what the History's buttons do."""

    def __init__(self, engine: Any, *, run: Run = run_now) -> None:
        super().__init__()
        self.repo = RunRepository(engine)
        self.run = run
        self.filters = HistoryFilters()
        self._seq = 0
        self._after_load = ""  # what the next loaded list says instead of nothing (a run found gone)
        self._runs: list[BenchRun] = []
        self._groups: dict[int, RunGroup | None] = {}
        self._labels: list[str] = []
        self._builds: list[BuildStamp] = []
        self._hint = ""

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def runs(self) -> tuple[BenchRun, ...]:
        """The runs listed (light repetitions: `open` reads a whole one)."""
        return tuple(self._runs)

    @property
    def groups(self) -> dict[int, RunGroup | None]:
        """The groups of the runs listed, by id (a tune, a sweep)."""
        return dict(self._groups)

    @property
    def labels(self) -> tuple[str, ...]:
        """The profiles (run labels) to filter by."""
        return tuple(self._labels)

    @property
    def builds(self) -> tuple[BuildStamp, ...]:
        """The builds runs recorded, the newest run's first."""
        return tuple(self._builds)

    @property
    def hint(self) -> str:
        return self._hint

    def complete_runs(self) -> tuple[tuple[int, str], ...]:
        """The listed runs that completed, as (id, label), the newest first (what the quick start counts)."""
        done = [(r.id, r.label) for r in self._runs if r.status == "complete" and r.id is not None]
        return tuple(sorted(done, reverse=True))

    def build_choices(self) -> list[tuple[str, str, str]]:
        """The build filter's entries after "all builds": (text, key, tooltip)."""
        return [
            (f"build {b.short}" + (f" · {b.driver_text}" if b.driver_text else ""), b.key, b.describe())
            for b in self._builds
        ]

    # -- loading ---------------------------------------------------------------------------------------
    def mark_interrupted_then_refresh(self) -> None:
        """Runs left "running" by a process that died become "incomplete"; then the list loads."""
        repo = self.repo
        self.run(repo.mark_interrupted, lambda _count: self.refresh(), self._on_failed)

    def refresh(self, filters: HistoryFilters | None = None) -> None:
        """Reload the list (with `filters`, else the ones in force)."""
        if filters is not None:
            self.filters = filters
        f, repo = self.filters, self.repo
        self._seq += 1
        seq = self._seq

        def load() -> Loaded:
            runs = repo.list_overview(
                model=f.model, label=f.label, binary=f.binary, since=f.since, build=f.build
            )
            groups = {
                gid: repo.get_group(gid) for gid in {r.group_id for r in runs if r.group_id is not None}
            }
            return seq, runs, repo.labels(), groups, repo.builds()

        self.run(load, self._on_loaded, self._on_failed)

    def _on_loaded(self, loaded: Loaded) -> None:
        seq, runs, labels, groups, builds = loaded
        if seq != self._seq:
            return  # a newer load is on its way
        self._runs, self._labels, self._groups, self._builds = list(runs), list(labels), groups, list(builds)
        self.notify("runs")
        self._say(self._after_load or ("" if runs else NO_RUNS))
        self._after_load = ""

    def _on_failed(self, exc: BaseException) -> None:
        self._say(f"Could not read the benchmark history: {exc}")

    def _say(self, text: str) -> None:
        self._hint = text
        self.notify("hint")

    # -- actions ---------------------------------------------------------------------------------------
    def open(self, run_id: int) -> None:
        """Read a run whole, with its group's runs (a sweep), then "opened"."""
        repo = self.repo

        def load() -> tuple[BenchRun | None, list[BenchRun]]:
            run = repo.get_run(run_id)
            group = [] if run is None or run.group_id is None else repo.list_runs(group_id=run.group_id)
            return run, sorted(group, key=lambda r: r.id or 0)

        def done(loaded: tuple[BenchRun | None, list[BenchRun]]) -> None:
            if loaded[0] is None:  # deleted since the list was read (another window, the CLI)
                self._after_load = (f"Run #{run_id} is no longer in the history (deleted elsewhere?): "
                                    "the list was read again.")
                self.refresh()
                return
            self.notify("opened", loaded[0], loaded[1])

        self.run(load, done, lambda exc: self._say(f"Could not open run #{run_id}: {exc}"))

    def rerun(self, selected: Sequence[BenchRun]) -> BenchRun | None:
        """The run to run again (the first selected), or None with what to do."""
        if not selected:
            self._say(SELECT_RERUN)
            return None
        return selected[0]

    def confirm_delete(self, selected: Sequence[BenchRun]) -> str | None:
        """The question to ask before deleting the selected runs, or None (and said) when none is."""
        if not selected:
            self._say(SELECT_DELETE)
            return None
        return f"Delete run(s) {_ids(selected)} and their repetitions? This cannot be undone."

    def delete(self, selected: Sequence[BenchRun]) -> None:
        """Delete the runs (off the GUI thread: a big run's repetitions take a while), then "deleted"."""
        repo, ids = self.repo, [r.id for r in selected if r.id is not None]
        words = _ids(selected)
        self._say(f"Deleting run(s) {words}…")

        def done(_result: object) -> None:
            self._say("")
            self.notify("deleted")

        def work() -> int:
            for i in ids:
                repo.delete_run(i)
            return len(ids)

        self.run(
            work,
            done,
            lambda exc: self._say(f"Could not delete run(s) {words}: {exc}"),
        )

    def compare_pair(self, selected: Sequence[BenchRun]) -> tuple[int, int] | None:
        """The two selected runs as A (the older) and B, or None with what to do."""
        ids = sorted(r.id for r in selected if r.id is not None)
        if len(selected) != 2 or len(ids) != 2:
            self._say(SELECT_TWO)
            return None
        return ids[0], ids[1]

    def read_for_export(self, selected: Sequence[BenchRun]) -> bool:
        """Read the selected runs whole (then "export" with them); False, and said, with none selected."""
        if not selected:
            self._say(SELECT_EXPORT)
            return False
        repo, ids = self.repo, [r.id for r in selected if r.id is not None]

        def load() -> list[BenchRun]:
            return [r for r in map(repo.get_run, ids) if r is not None]

        self.run(
            load,
            lambda runs: self.notify("export", runs),
            lambda exc: self._say(f"Could not read the runs to export: {exc}"),
        )
        return True

    def exported(self, paths: Sequence[object]) -> None:
        self._say("Exported: " + ", ".join(str(p) for p in paths))


def _ids(runs: Sequence[BenchRun]) -> str:
    return ", ".join(str(r.id) for r in runs)


__all__ = ["BenchHistory", "HistoryFilters"]
