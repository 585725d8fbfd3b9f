"""Table models of the Tune view (QtCore only): the trials of a tune, the knobs to try.

Same roles as bench_models (SORT_ROLE, COLOR_ROLE), so `ui/panels/bench_tables.make_table` sorts and paints
them.
"""

from __future__ import annotations

from llm_tuner.core import flags
from llm_tuner.core.bench_report import metric_label, verdict_cell
from llm_tuner.core.stats import BETTER, WORSE
from llm_tuner.core.tune import Trial
from llm_tuner.core.tune.prune import SpeedGuess, trial_prediction
from llm_tuner.qt.bench_models import _num, _Table
from llm_tuner.state.tune_result import value_text

STATUS_COLORS = {"measured": "#1e8449", "final": "#1e6fa8", "pruned": "#7f8c8d", "failed": "#c0392b"}
FLAGGED_COLOR = "#b9770e"


def knob_label(knob) -> str:
    """A knob as the user reads it: its flag's long spelling ("--ubatch-size"), pairs joined ("--cache-type-k
    +
    --cache-type-v"), a custom flag as typed."""
    out = []
    for part in knob.flag.split("+"):
        try:
            out.append(flags.flag(part).flag)
        except KeyError:
            out.append(part)
    return " + ".join(out)


def values_text(values: dict[str, str | None]) -> str:
    """A trial's knob values, `key=value` in the order the tune set them."""
    return ", ".join(f"{k}={value_text(v)}" for k, v in values.items())


def trial_text(trial: Trial, baseline: dict[str, str | None] | None = None) -> str:
    """What a trial tried: "baseline" for the tune's first (its `knob` is None), else the values that differ
    from the baseline's (all of them when the baseline is not known)."""
    if trial.knob is None:
        return "baseline"
    base = baseline or {}
    changed = {k: v for k, v in trial.values.items() if k not in base or base[k] != v}
    return values_text(changed if baseline is not None else trial.values) or "as the baseline"


def status_text(trial: Trial) -> str:
    return f"{trial.status} (flagged)" if trial.flagged else trial.status


class TrialTableModel(_Table):
    """One row per trial, in the order they ran; a trial that comes again (flagged, re-measured, made final)
    replaces its row."""

    HEADERS = ("#", "Values", "Status", "Score", "Predicted", "vs predicted", "Run", "Reason")

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._trials: dict[object, Trial] = {}

    def clear(self) -> None:
        self.set_trials([])

    def trials(self) -> list[Trial]:
        return list(self._trials.values())

    def set_trials(self, trials: list[Trial]) -> None:
        self._trials = {}
        self.add_trials(trials)

    def add_trials(self, trials: list[Trial]) -> None:
        """Add new trials and replace the rows of those already shown (keyed by trial id)."""
        for t in trials:
            self._trials[t.id if t.id is not None else ("new", len(self._trials))] = t
        baseline = next((t.values for t in self._trials.values() if t.knob is None), None)
        self.beginResetModel()
        self._rows = []
        for i, t in enumerate(self._trials.values(), start=1):
            reason = "; ".join(x for x in (t.reason, f"flagged: {t.flagged}" if t.flagged else None) if x)
            pred, vs = trial_prediction(t.predicted, t.score)
            guess = SpeedGuess.from_json(t.predicted)
            texts = [str(i), trial_text(t, baseline), status_text(t), _num(t.score, 2), pred, vs,
                     str(t.run_id) if t.run_id is not None else "–", reason]
            sorts = [i, texts[1], t.status, t.score if t.score is not None else float("-inf"),
                     guess.score if guess is not None and guess.score is not None else float("-inf"), vs,
                     t.run_id if t.run_id is not None else -1, reason]
            self._rows.append((texts, sorts, t))
        self.endResetModel()

    def _color(self, row: int, col: int):
        t: Trial = self._rows[row][2]
        if col == 2:
            return FLAGGED_COLOR if t.flagged else STATUS_COLORS.get(t.status)
        return None

    def _tooltip(self, row: int, col: int):
        t: Trial = self._rows[row][2]
        guess = SpeedGuess.from_json(t.predicted)
        return (values_text(t.values) + "\nllama-server " + " ".join(flags.mask_argv(t.argv))
                + (f"\npredicted {guess.text()}; calibrated on {guess.on}" if guess is not None else "")
                + (f"\n{t.reason}" if t.reason else ""))


class TuneComparisonModel(_Table):
    """The final A/B per metric from a TuneResult's comparison dicts (core.stats.Comparison.to_json): the
    baseline is A, the winner B."""

    HEADERS = ("Metric", "Baseline", "Winner", "n per side", "Δ %", "95% CI of Δ", "Verdict")

    def set_comparisons(self, comparisons: list[dict]) -> None:
        self.beginResetModel()
        self._rows = []
        for c in comparisons:
            a, b = c.get("a") or {}, c.get("b") or {}
            lo, hi, delta = c.get("ci_low_pct"), c.get("ci_high_pct"), c.get("delta_pct")
            unit = f" {c['unit']}" if c.get("unit") else ""
            texts = [metric_label(c.get("name", "")), _num(a.get("median"), 2) + unit, _num(b.get("median"), 2) + unit,
                     f"{a.get('n', 0)} / {b.get('n', 0)}", "–" if delta is None else f"{delta:+.1f}",
                     "–" if lo is None or hi is None else f"[{lo:+.1f}, {hi:+.1f}] %", verdict_cell(c)]
            sorts = [texts[0], a.get("median") or 0.0, b.get("median") or 0.0, a.get("n", 0),
                     delta if delta is not None else 0.0, lo if lo is not None else 0.0, texts[6]]
            self._rows.append((texts, sorts, c))
        self.endResetModel()

    def _color(self, row: int, col: int):
        if col == 6:
            return {BETTER: "#1e8449", WORSE: "#c0392b"}.get(self._rows[row][2].get("verdict"))
        return None

    def _tooltip(self, row: int, col: int):
        c = self._rows[row][2]
        direction = "higher is better" if c.get("higher_is_better", True) else "lower is better"
        return f"{metric_label(c.get('name', ''))}: {direction}. {c.get('note') or ''}".strip()

    def verdicts(self) -> dict[str, str | None]:
        return {r[2].get("name"): r[2].get("verdict") for r in self._rows}
