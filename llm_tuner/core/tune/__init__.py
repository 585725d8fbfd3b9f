"""Tune: find the fastest settings that fit, measured on the real server (pure part).

The package, by seam: `model` (Knob, Objective, TuneSpec, Trial, TuneResult, TuneRecord, score), `search`
(argv of a choice of values, successive halving, coordinate descent: pure, the measuring is a callback),
`knobs` (propose_knobs, the CLI's --knob syntax), `frontier` (for a model bigger than its GPUs: the placements that
fit, per K/V type, ranked by the bytes a token reads from host memory), `report` (memory-bandwidth figure, Markdown report and its
files, JSON), `trial_plot` (the objective over trials: points for the view's chart, an SVG for the report).
The runner that measures is services/tune; the store is store/tunes. Import from the package.
"""

from __future__ import annotations

from llm_tuner.core.tune.frontier import (
    Placement,
    Planner,
    describe_placement,
    frontier,
    is_out_of_memory,
    needs_placement,
    next_margin,
    resolve_placement,
)
from llm_tuner.core.tune.knobs import KV_PAIR, PLACEMENT_KNOB, parse_knob, propose_knobs
from llm_tuner.core.tune.model import (
    OBJECTIVE_KINDS,
    TRIAL_STATUSES,
    Knob,
    Objective,
    Trial,
    TuneRecord,
    TuneResult,
    TuneSpec,
    objective_metric,
    rep_scores,
    score,
)
from llm_tuner.core.tune.report import (
    bandwidth_figure,
    result_json,
    trial_json,
    tune_report_files,
    tune_report_markdown,
)
from llm_tuner.core.tune.search import (
    apply_values,
    clearly_ahead,
    coordinate_descent,
    current_value,
    order_knobs,
    successive_halving,
    values_key,
)
from llm_tuner.core.tune.trial_plot import trial_plot_svg, trial_points

__all__ = [
    "KV_PAIR",
    "PLACEMENT_KNOB",
    "Placement",
    "Planner",
    "describe_placement",
    "frontier",
    "is_out_of_memory",
    "needs_placement",
    "next_margin",
    "resolve_placement",
    "OBJECTIVE_KINDS",
    "TRIAL_STATUSES",
    "Knob",
    "Objective",
    "Trial",
    "TuneRecord",
    "TuneResult",
    "TuneSpec",
    "apply_values",
    "bandwidth_figure",
    "clearly_ahead",
    "coordinate_descent",
    "current_value",
    "objective_metric",
    "order_knobs",
    "parse_knob",
    "propose_knobs",
    "rep_scores",
    "result_json",
    "score",
    "successive_halving",
    "trial_json",
    "trial_plot_svg",
    "trial_points",
    "tune_report_files",
    "tune_report_markdown",
    "values_key",
]
