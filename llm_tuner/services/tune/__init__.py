"""Tune: the search of core.tune measured by the benchmark engine, every trial stored (store/tunes).

The package, by seam: `runner` (TuneRunner: search, final comparison, resume), `checks` (the
memory plan's pruning, perplexity and --temp 0 output checks, the bandwidth figure), `propose` (default
knobs for a base), `placement` (the placement frontier on this machine's devices, the margin learned), `preview`
(each candidate's memory verdict before a tune starts: `tune --dry-run`, the Tune view), `speed` (each candidate's
predicted speed and the race's pruning by it), `save` (the winner as a profile version). Import from the package.
"""

from __future__ import annotations

from llm_tuner.services.tune.checks import PlanFn, make_plan_fn, plan_fit
from llm_tuner.services.tune.placement import PlacementResolver
from llm_tuner.services.tune.preview import Candidate, preview_candidates
from llm_tuner.services.tune.propose import default_knobs
from llm_tuner.services.tune.runner import TuneRunner
from llm_tuner.services.tune.save import save_winner, winner_profile
from llm_tuner.services.tune.speed import SpeedOracle, calibration_for

__all__ = ["Candidate", "PlacementResolver", "PlanFn", "TuneRunner", "default_knobs", "make_plan_fn", "plan_fit",
           "preview_candidates", "save_winner", "winner_profile", "SpeedOracle", "calibration_for"]
