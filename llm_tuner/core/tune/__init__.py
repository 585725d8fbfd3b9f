"""Tune: find the fastest settings that fit, measured on the real server (pure part).

The package, by seam: `objectives` (Objective and the one table of objective kinds, OBJECTIVES: label, metric,
score, what each uses; rep_scores, score), `model` (Knob, TuneSpec, Trial, TuneResult, TuneRecord), `search`
(argv of a choice of values, successive halving, coordinate descent: pure, the measuring is a callback),
`knob_table` (the one table of knobs, KNOBS: flags, interaction group, race order, quality check, memory relevance,
proposer; the built-in rows and proposers in `proposers`), `knobs` (propose_knobs, the CLI's --knob syntax),
`prune` (a race's candidates the speed model puts far behind its best prediction: not started), `frontier` (for a model bigger than its GPUs: the placements that
fit, per K/V type, ranked by the bytes a token reads from host memory), `final` (the final comparison's n,
starts, cost, noise and verdict comparisons), `report` (memory-bandwidth figure, Markdown report and its
files, JSON), `trial_plot` (the objective over trials: points for the view's chart, an SVG for the report).
The runner that measures is services/tune; the store is store/tunes. Import from the package.
"""

from __future__ import annotations

from llm_tuner.core.tune.final import (
    BaselineCost,
    FinalDesign,
    design_final,
    final_comparisons,
    final_cost,
    measured_in_starts,
    start_noise,
)
from llm_tuner.core.tune.frontier import (
    DEFAULT_MARGIN_MIB,
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
from llm_tuner.core.tune.model import TRIAL_STATUSES, Knob, Trial, TuneRecord, TuneResult, TuneSpec
from llm_tuner.core.tune.objectives import (
    OBJECTIVE_KINDS,
    OBJECTIVES,
    Objective,
    ObjectiveKind,
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
    "DEFAULT_MARGIN_MIB",
    "OBJECTIVES",
    "BaselineCost",
    "FinalDesign",
    "ObjectiveKind",
    "design_final",
    "final_comparisons",
    "final_cost",
    "measured_in_starts",
    "start_noise",
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
