"""Speculative-decoding figures from llama.cpp's own counters (recorded real /metrics, tests/data/logs/README.md).

α_i = accepted at position i-1 ÷ accepted at position i-2 (÷ verification steps for i = 1); the mean tokens
per step 1 + Σ Π α_j must equal llama.cpp's own `mean len` (1 + accepted / steps, printed in the log).
"""

import json
import re

import pytest

from llm_tuner.core.bench_report import (
    draft_counter_deltas,
    draft_counters,
    report_markdown,
    run_identity_diff,
    run_summary,
    speculative_from_counters,
    speculative_speedup,
)
from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.server_endpoints import parse_metrics
from llm_tuner.core.stats import (
    acceptance_by_position,
    fit_constant_alpha,
    speculative_bound,
    tokens_per_step,
)
from tests.conftest import DATA

LOGS = DATA / "logs"
_MEAN_LEN = re.compile(r"mean len =\s*([\d.]+)")


def _recorded(name: str):
    metrics = parse_metrics((LOGS / f"{name}.metrics.txt").read_text())
    mean_lens = [float(m.group(1)) for m in _MEAN_LEN.finditer((LOGS / f"{name}.log").read_text())]
    cmd = json.loads((LOGS / f"{name}.cmd.json").read_text())
    return metrics, mean_lens, cmd


def test_alpha_by_position_arithmetic():
    # 10 steps; position 0 accepted 8 times, position 1 six, position 2 three
    alphas = acceptance_by_position([8, 6, 3, 0], 10)
    assert alphas == pytest.approx([0.8, 0.75, 0.5])
    assert tokens_per_step(alphas) == pytest.approx(1 + (8 + 6 + 3) / 10)
    assert acceptance_by_position([0, 0], 5) == [] and tokens_per_step([]) == 1.0
    alpha = fit_constant_alpha(speculative_bound(0.73, 3), 3)
    assert alpha == pytest.approx(0.73, abs=1e-6)
    assert fit_constant_alpha(5.0, 3) is None  # more than k + 1 tokens per step cannot come from depth 3


@pytest.mark.parametrize("name", ["endpoints_spec_ngram", "endpoints_spec_draft"])
def test_recorded_metrics_give_llamacpps_mean_length(name):
    metrics, mean_lens, cmd = _recorded(name)
    steps, per_pos = draft_counters(metrics)
    fig = speculative_from_counters(steps, per_pos, None)
    # the whole server's counters cover both requests: compare with their pooled mean length
    accepted = sum(t["draft_n_accepted"] for t in cmd["timings"])
    assert fig["tokens_per_step"] == pytest.approx(1 + accepted / steps, rel=1e-9)
    assert fig["tokens_per_step"] == pytest.approx(sum(mean_lens) / len(mean_lens), rel=0.02)
    assert all(0 <= a <= 1 for a in fig["alpha_by_position"])


def test_self_draft_run_shows_alphas_ceiling_and_other_depths():
    """A run built from the recorded self-draft request (k = 4): the figures the issue found wrong."""
    metrics, mean_lens, cmd = _recorded("endpoints_spec_draft")
    steps, per_pos = draft_counter_deltas({}, metrics)
    assert (steps, per_pos) == (31, (17, 9, 5, 1))
    (t,) = cmd["timings"]
    rep = Repetition(prompt_tokens=16, predicted_n=t["predicted_n"], predicted_per_second=30.0, draft_n=t["draft_n"],
                     draft_n_accepted=t["draft_n_accepted"], draft_steps=steps, draft_accepted_per_pos=per_pos)
    run = BenchRun(id=2, label="self-draft", status="complete", reps=(rep,), server_argv=tuple(cmd["argv"][1:]))
    sp = run_summary(run)["speculative"]
    assert sp["draft_depth_k"] == 4
    assert sp["alpha_by_position"] == pytest.approx([17 / 31, 9 / 17, 5 / 9, 1 / 5])
    assert sp["tokens_per_step"] == pytest.approx(mean_lens[0], abs=0.005)  # llama.cpp's "mean len = 2.03"
    # the ceiling is never below what was measured; the old "bound" from the overall ratio was
    # 1 + 0.26 + 0.26² + … = 1.36 < 2.03
    assert sp["speedup_ceiling"] == pytest.approx(1 + 32 / 31) and sp["acceptance"] == pytest.approx(32 / 121)
    pred = sp["predicted_tokens_per_step"]
    assert pred["4"] == pytest.approx(sp["tokens_per_step"], rel=1e-6)  # fitted at the run's own depth
    assert pred["1"] < pred["2"] < pred["4"] < pred["8"] <= 9
    md = report_markdown(run)
    assert "α1 = 55%" in md and "speed-up ceiling 2.03×" in md and "k=8:" in md
    base = BenchRun(id=1, label="none", status="complete", server_argv=("--spec-type", "none"),
                    reps=(Repetition(prompt_tokens=16, predicted_n=64, predicted_per_second=20.0),),
                    binary_version="version: 1 (old)")
    spd = speculative_speedup(run, base)
    assert spd["measured_speedup"] == pytest.approx(1.5) and spd["speedup_ceiling"] == sp["speedup_ceiling"]
    assert "1.50×" in spd["text"] and "ceiling 2.03×" in spd["text"]
    assert speculative_speedup(run, run) is None  # the baseline must not draft
    assert {"flag": "llama-server version", "a": "version: 1 (old)", "b": None} in run_identity_diff(base, run)
