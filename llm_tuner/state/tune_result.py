"""The Tune view's words for what a tune found and what it would try: the verdict in one sentence, the lines
under the comparison (flags changed, quality, bandwidth), what the save button says, and the Candidates tab's
summary and rows (services.tune.preview's candidates). Plain functions over core and services models; the
views (ui/panels/tune_result.py, tune_candidates.py) only put them in widgets. `ShownResult`: the result the
Result tab shows, with what its report needs (the objective, the profile, the trials plotted) and its two
actions' rules: the save needs a profile name, the export writes the report's files (said in `message`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core.tune import Trial, TuneResult, tune_report_files
from llm_tuner.services.tune.preview import Candidate
from llm_tuner.state.callbacks import Declared, Observable

NO_RESULT = "Run a tune: its result shows here."
NAME_FIRST = "Type a profile name first."


def value_text(value: str | None) -> str:
    """A knob value as the views write it: "default" is the flag left out (llama.cpp's default, as the CLI's
    `--knob` writes it), "(on)" a switch that is present."""
    return "default" if value is None else (value or "(on)")


def verdict_text(result: TuneResult) -> str:
    """One plain sentence: what the tune found."""
    searched = tuple(result.searched_winner_argv or ())
    tried = [t for t in result.trials if t.knob is not None and t.status in ("measured", "final")]
    if result.verdict == "better":
        how = (
            "by far more than servers vary between starts (no fresh A/B was needed)"
            if result.on_screening
            else "beyond noise in a fresh interleaved A/B"
        )
        return f"The winner beats the baseline {how}: save it as a new profile version to keep it."
    if result.trials and not tried:
        return (
            "No candidate was measured within the budget: the baseline is kept. Resume the tune, or give it "
            "more time."
        )
    if not searched or searched == tuple(result.baseline_argv):
        return "No candidate beat the baseline while racing: the baseline is kept."
    if result.verdict == "worse":
        return "The racing winner lost the final A/B against the baseline: the baseline is kept."
    return "No change was better than noise in the final A/B: the baseline is kept."


def flag_lines(changed: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """TuneResult.changed_flags ({flag, a: baseline, b: winner}) as `flag: a → b` lines."""
    return [f"{c.get('flag')}: {value_text(c.get('a'))} → {value_text(c.get('b'))}" for c in changed or ()]


def _dict_lines(d: Mapping[str, Any] | None) -> list[str]:
    if not d:
        return []
    if "text" in d:
        return [str(d["text"])]
    return [f"{k}: {v}" for k, v in d.items()]


@dataclass(frozen=True)
class ResultWords:
    """A finished tune as the Result tab says it."""

    verdict: str
    table_title: str  # above the comparison table ('' when there is none)
    details: str  # the lines under it
    save_text: str
    save_tip: str


def result_words(result: TuneResult) -> ResultWords:
    """The verdict, the comparison's title, the details (the runner's note where it says more than the
    verdict, the flags changed, the quality cost, the bandwidth) and the save button's words."""
    table_title = (
        (
            (
                "Winner (B) against the baseline (A), their racing runs"
                if result.on_screening
                else "Winner (B) against the baseline (A), fresh interleaved repetitions"
            )
            + (f" ({result.final_n_note})" if result.final_n_note else "")
            + ":"
        )
        if result.comparisons
        else "No final A/B was run: the winner is the baseline."
    )
    # the runner's note only where it says more than the verdict above (cancelled, no time for the final, ...)
    said = bool(result.comparisons) or result.note.startswith("the search kept the baseline")
    lines = [f"{result.note[:1].upper()}{result.note[1:]}."] if result.note and not said else []
    changed = "; ".join(flag_lines(result.changed_flags))
    if result.verdict == "better":
        lines.append(f"Flags that changed: {changed or 'none'}")
    else:
        lines.append(
            f"The racing winner changed {changed}; not kept."
            if changed
            else "Flags that changed: none (the winner is the baseline)"
        )
    quality = _dict_lines(result.quality)
    lines.append("Quality: " + ("; ".join(quality) if quality else "no knob that changes results was tried"))
    bandwidth = _dict_lines(result.bandwidth)
    lines.append("Memory bandwidth: " + ("; ".join(bandwidth) if bandwidth else "unknown for these devices"))
    better = result.verdict == "better"
    return ResultWords(
        verdict_text(result),
        table_title,
        "\n".join(lines),
        # short: a 1366 px window keeps the models list's columns
        "Save as new profile version" if better else "Save the baseline",
        f"Save the {'winner' if better else 'baseline'}'s command as a new version of the profile named "
        "above",
    )


def candidates_summary(cands: Sequence[Candidate]) -> str:
    """The line above the Candidates table: how many, how many pruned (memory, speed), what the speed rests
    on, and why placements are raced when the model does not fit its GPUs."""
    if not cands:
        return "No knob is checked."
    pruned = sum(1 for c in cands if not c.fits)
    slow = sum(1 for c in cands if c.fits and c.speed_pruned)
    text = f"{len(cands)} candidates, {pruned} pruned by the memory plan (never started)."
    if slow:
        text += (
            f" {slow} predicted far behind the best of their knob (beyond the speed model's error, at least "
            "20 %): not started."
        )
    calibrated = next((c.predicted for c in cands if c.predicted), None)
    if calibrated is not None:
        text += (
            f" Speed calibrated on {calibrated.get('on')}."
            if calibrated.get("calibrated")
            else " Speed: no calibration of this build (default costs; nothing is pruned by speed)."
        )
    if any(c.knob == "placement" and c.value is not None for c in cands):
        text += (
            " The model does not fit the GPUs: the placement knob races the placements that fit, "
            "with their K/V types, fewest bytes read from host memory first."
        )
    return text


def candidate_cells(c: Candidate) -> tuple[tuple[str, ...], str, bool]:
    """A candidate's row (knob, value, plan verdict, prediction, memory, arguments), its tooltip, and whether
    it is shown muted (it would not be started)."""
    status = "pruned" if not c.fits else "pruned (speed)" if c.speed_pruned else "fits"
    predicted = c.predicted_text if c.predicted else "–"
    tip = "\n".join(x for x in (c.args_text, c.plan, c.speed_pruned) if x)
    return (c.knob, c.label, status, predicted, c.plan, c.args_text), tip, not c.fits or bool(c.speed_pruned)


__all__ = [
    "ResultWords",
    "candidate_cells",
    "candidates_summary",
    "flag_lines",
    "result_words",
    "value_text",
    "verdict_text",
]


class ShownResult(Observable):
    """The finished tune the Result tab shows (None: none yet), what its report is headed with and plots,
    and the words its actions leave (`message`, declared: said once per change)."""

    message = Declared[str]("", topic="message")

    def __init__(self) -> None:
        super().__init__()
        self.result: TuneResult | None = None
        self.objective = ""
        self.label = ""  # the profile tuned: the name suggested for the new version, and the report's label
        self.y_label = "score"
        self.trials: list[Trial] = []

    def show(self, result: TuneResult | None, profile_name: str = "", trials: Sequence[Trial] | None = None,
             y_label: str = "score", objective: str = "") -> None:
        self.result = result
        self.objective, self.label, self.y_label = objective, profile_name, y_label
        self.trials = list(trials if trials is not None else (result.trials if result else []))
        self.message = ""

    def save_name(self, name: str) -> str | None:
        """The profile name a save goes to, or None with the reason said."""
        name = name.strip()
        if not name:
            self.message = NAME_FIRST
            return None
        return name

    @property
    def stem(self) -> str:
        result = self.result
        return f"tune-{result.tune_number or result.tune_id}" if result is not None else ""

    def export(self, folder: Path) -> Path | None:
        """Write `tune-<id>.md` with its trial plot `tune-<id>-trials.svg` beside it
        (core.tune.tune_report_files, the files `llm-tuner tune --report` writes); None (said) when there is
        no result or it failed."""
        result = self.result
        if result is None:
            return None
        folder = Path(folder)
        files = tune_report_files(result, self.stem, objective=self.objective, label=self.label,
                                  y_label=self.y_label, trials=self.trials)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (folder / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.message = f"The report could not be written: {exc}"
            return None
        path = folder / f"{self.stem}.md"
        self.message = f"Exported: {path}"
        return path
