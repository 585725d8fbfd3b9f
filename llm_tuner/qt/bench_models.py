"""Table models for benchmark runs, run summaries and A/B comparisons (QtCore only).

Sorting uses SORT_ROLE (the raw value) so numbers and dates sort as numbers and dates; COLOR_ROLE
holds a text colour as '#rrggbb' (the ui side turns it into a brush: qt/ stays free of QtGui).
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, Qt

from llm_tuner.core.bench_report import metric_label, run_summary
from llm_tuner.core.bench_spec import BenchRun, RunGroup
from llm_tuner.core.stats import BETTER, WORSE, Comparison

SORT_ROLE = Qt.ItemDataRole.UserRole
RUN_ROLE = Qt.ItemDataRole.UserRole + 1
COLOR_ROLE = Qt.ItemDataRole.UserRole + 2


def _num(v, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def group_label(group: RunGroup | None) -> str:
    """How the History names a run's group: "tune #7" (every trial of one tune), "sweep #3 (-ub)"."""
    if group is None:
        return ""
    what = f"{group.kind} #{group.number or group.id}"  # numbered among its kind: the first tune is tune #1
    return f"{what} ({group.param})" if group.param and group.kind != "tune" else what


class _Table(QAbstractTableModel):
    HEADERS: tuple[str, ...] = ()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[tuple[list, list, object]] = []  # (display texts, sort values, payload)

    def rowCount(self, parent=None) -> int:  # noqa: N802 - Qt override
        return 0 if parent is not None and parent.isValid() else len(self._rows)

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return 0 if parent is not None and parent.isValid() else len(self.HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        texts, sorts, payload = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return texts[index.column()]
        if role == SORT_ROLE:
            return sorts[index.column()]
        if role == RUN_ROLE:
            return payload
        if role == COLOR_ROLE:
            return self._color(index.row(), index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(index.row(), index.column())
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(sorts[index.column()], (int, float)):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _color(self, row: int, col: int):
        return None

    def _tooltip(self, row: int, col: int):
        return None

    def payload(self, row: int):
        return self._rows[row][2]

    def column_texts(self, col: int) -> list[str]:
        return [r[0][col] for r in self._rows]


class RunTableModel(_Table):
    """History: one row per stored run."""

    HEADERS = ("Run", "Started", "Profile", "Model", "Build", "Status", "Spec", "Prefill t/s", "Gen t/s", "Reps",
               "Group")

    def set_runs(self, runs: list[BenchRun], groups: dict[int, RunGroup] | None = None) -> None:
        """`groups` (by id) name the group a run belongs to: "tune #7", "sweep #3 (-ub)"."""
        groups = groups or {}
        self.beginResetModel()
        self._rows = []
        for r in runs:
            s = run_summary(r)["metrics"]
            pre = [m["median"] for k, m in s.items() if k.startswith("prefill_tps@") and "median" in m]
            gen = [m["median"] for k, m in s.items() if k.startswith("gen_tps@") and "median" in m]
            started = r.started_at.strftime("%Y-%m-%d %H:%M:%S") if r.started_at else ""
            build = r.build.short if r.build else (r.binary_version or "?")  # the file's hash: "build 0" for all
            texts = [str(r.id), started, r.label, r.model_name, build, r.status, r.spec.describe(),
                     " / ".join(_num(x) for x in pre) or "–", " / ".join(_num(x) for x in gen) or "–",
                     str(len(r.reps)), group_label(groups.get(r.group_id)) if r.group_id is not None else ""]
            sorts = [r.id, started, r.label, r.model_name, build, r.status, r.spec.describe(),
                     pre[0] if pre else -1.0, gen[0] if gen else -1.0, len(r.reps), (r.group_id or 0, texts[-1])]
            self._rows.append((texts, sorts, r))
        self.endResetModel()

    def _color(self, row: int, col: int):
        if col == 5:
            status = self._rows[row][2].status
            return {"complete": "#1e8449", "failed": "#c0392b", "incomplete": "#b9770e",
                    "cancelled": "#7f8c8d"}.get(status)
        return None

    def _tooltip(self, row: int, col: int):
        r: BenchRun = self._rows[row][2]
        return (f"llama-server {' '.join(r.server_argv)}" + (f"\n{r.build.describe()}" if r.build else "")
                + "".join(f"\n{n}" for n in r.notes) + (f"\n{r.error}" if r.error else ""))


class SummaryTableModel(_Table):
    """One run's metrics (readable names with their units): median, IQR, stdev, n."""

    HEADERS = ("Metric", "Median", "IQR", "Stdev", "n")

    def set_run(self, run: BenchRun | None) -> None:
        self.beginResetModel()
        self._rows = []
        if run is not None:
            for name, m in run_summary(run)["metrics"].items():
                label = metric_label(name)
                texts = [label, _num(m.get("median"), 2), _num(m.get("iqr"), 2), _num(m.get("stdev"), 2),
                         str(m.get("n", 0))]
                self._rows.append((texts, [label, m.get("median") or 0.0, m.get("iqr") or 0.0,
                                           m.get("stdev") or 0.0, m.get("n", 0)], name))
        self.endResetModel()

    def _tooltip(self, row: int, col: int):
        return self._rows[row][0][0]  # the whole metric name, where the column elides it


class ComparisonTableModel(_Table):
    """A/B: per metric A and B (median, spread, n), Δ%, 95% CI and the verdict."""

    HEADERS = ("Metric", "A median", "A IQR", "A n", "B median", "B IQR", "B n", "Δ %", "95% CI of Δ", "Verdict")

    def set_comparisons(self, comparisons: list[Comparison]) -> None:
        self.beginResetModel()
        self._rows = []
        for c in comparisons:
            a, b = c.a, c.b
            ci = "–" if c.ci_low_pct is None else f"[{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}] %"
            texts = [metric_label(c.name), _num(a and a.median, 2), _num(a and a.iqr, 2), str(a.n if a else 0),
                     _num(b and b.median, 2), _num(b and b.iqr, 2), str(b.n if b else 0),
                     "–" if c.delta_pct is None else f"{c.delta_pct:+.1f}", ci, c.verdict_label]
            sorts = [texts[0], a.median if a else 0.0, a.iqr if a else 0.0, a.n if a else 0, b.median if b else 0.0,
                     b.iqr if b else 0.0, b.n if b else 0, c.delta_pct if c.delta_pct is not None else 0.0,
                     c.ci_low_pct if c.ci_low_pct is not None else 0.0, c.verdict_label]
            self._rows.append((texts, sorts, c))
        self.endResetModel()

    def _color(self, row: int, col: int):
        if col == 9:
            verdict = self._rows[row][2].verdict
            return {BETTER: "#1e8449", WORSE: "#c0392b"}.get(verdict)
        return None

    def _tooltip(self, row: int, col: int):
        c: Comparison = self._rows[row][2]
        direction = "higher is better" if c.higher_is_better else "lower is better"
        return f"{metric_label(c.name)}: {direction}. {c.note}".strip()

    def verdicts(self) -> dict[str, str | None]:
        return {r[2].name: r[2].verdict for r in self._rows}
