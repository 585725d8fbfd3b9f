"""core.stats: summaries, Welch intervals and verdicts that do not cry wolf."""

import random

import pytest

from llm_tuner.core.stats import (
    BETTER,
    NOISE,
    WORSE,
    compare,
    percentile,
    speculative_bound,
    summarize,
    t_quantile,
)


def test_summary_and_percentiles_match_numpy_linear_method():
    xs = [10.0, 12.0, 11.0, 13.0, 100.0]
    s = summarize(xs)
    assert (s.n, s.median, s.q1, s.q3, s.min, s.max) == (5, 12.0, 11.0, 13.0, 10.0, 100.0)
    assert percentile(xs, 95) == pytest.approx(82.6)
    assert summarize([]) is None
    assert summarize([5.0]).stdev is None


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (10, 2.2281), (30, 2.0423), (1000, 1.9623)])
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_clear_gain_is_better_for_speed_and_worse_for_latency():
    a, b = [100.0, 101.0, 99.0, 100.5], [110.0, 111.0, 109.5, 110.5]
    speed = compare("gen_tps", a, b, higher_is_better=True)
    assert speed.verdict == BETTER
    assert speed.delta_pct == pytest.approx(10.0, abs=0.5)
    assert 0 < speed.ci_low_pct < speed.delta_pct < speed.ci_high_pct
    assert compare("ttft_ms", a, b, higher_is_better=False).verdict == WORSE


def test_real_but_tiny_difference_is_within_noise_below_threshold():
    a, b = [100.0, 100.1, 99.9, 100.0], [101.0, 101.1, 100.9, 101.0]  # +1%, CI excludes zero
    c = compare("gen_tps", a, b, higher_is_better=True, threshold_pct=2.0)
    assert c.ci_low_pct > 0 and c.verdict == NOISE and "threshold" in c.note


def test_one_repetition_gives_no_interval_and_no_claim():
    c = compare("gen_tps", [100.0], [150.0], higher_is_better=True)
    assert c.verdict == NOISE and c.ci_low_pct is None


def test_within_noise_tells_equal_from_cannot_tell():
    """"Within noise" with an interval of ±1 % shows the two equal for a user's purposes; with two noisy
    repetitions a side the interval allows ±30 % and the verdict says it cannot tell (inconclusive), in the
    table's words, the note and the JSON. One repetition has no interval: inconclusive too."""
    from llm_tuner.core.stats import INCONCLUSIVE

    tight = compare("gen_tps", [100.0, 100.5, 99.5, 100.2], [100.3, 99.8, 100.6, 100.1], higher_is_better=True)
    assert tight.verdict == NOISE and not tight.inconclusive
    assert tight.verdict_label == NOISE
    wide = compare("gen_tps", [100.0, 80.0], [95.0, 110.0], higher_is_better=True)
    assert wide.verdict == NOISE and wide.inconclusive and wide.verdict_label == INCONCLUSIVE
    assert "inconclusive" in wide.note and "more repetitions" in wide.note
    # a threshold of 15 %: a change measured at +12 % [+11, +13] is below what the user counts, and shown so
    small = compare("gen_tps", [100.0, 100.2, 99.8], [112.0, 112.3, 111.7], higher_is_better=True,
                    threshold_pct=15.0)
    assert small.verdict == NOISE and not small.inconclusive and "inconclusive" not in small.note
    assert wide.to_json()["inconclusive"] is True and tight.to_json()["inconclusive"] is False
    assert compare("gen_tps", [100.0], [101.0], higher_is_better=True).inconclusive
    gain = compare("gen_tps", [100.0, 101.0, 99.0, 100.5], [110.0, 111.0, 109.5, 110.5], higher_is_better=True)
    assert not gain.inconclusive and gain.verdict_label == BETTER


@pytest.mark.parametrize("n", [2, 3, 5])
def test_aa_false_positive_rate_is_low(n):
    """200 A/A comparisons of samples from one distribution (3% CV, as on a busy machine):
    fewer than 10% may be called better or worse."""
    rng = random.Random(42)
    hits = 0
    for _ in range(200):
        a = [rng.gauss(100, 3) for _ in range(n)]
        b = [rng.gauss(100, 3) for _ in range(n)]
        hits += compare("gen_tps", a, b, higher_is_better=True).verdict != NOISE
    assert hits / 200 < 0.10, hits


def test_speculative_bound_matches_field_notes():
    assert speculative_bound(0.73, 3) == pytest.approx(2.652, abs=1e-3)
    assert speculative_bound(0.0, 3) == 1.0


# Recorded-like samples of issue 22: a run with one slow repetition (generation t/s), and a TTFT baseline with
# one cold start. The old interval (Welch of the difference of means / mean A) read "−41 % [−141, +61] %" and
# "TTFT −61 % [−176, +29] %": below −100 % for a positive quantity, and the second not even centred on Δ.
GEN_A, GEN_B = [40.1, 41.0, 39.5], [23.5, 40.8, 8.0]
TTFT_A, TTFT_B = [300.0, 320.0, 310.0, 900.0], [120.0, 130.0, 125.0, 115.0]


@pytest.mark.parametrize(("a", "b", "hib"), [(GEN_A, GEN_B, True), (TTFT_A, TTFT_B, False)])
def test_interval_of_a_positive_quantity_stays_above_minus_100_and_holds_delta(a, b, hib):
    from llm_tuner.core.stats import welch_ci

    old_low = 100.0 * welch_ci(a, b)[0] / (sum(a) / len(a))
    assert old_low < -100  # what the old interval showed
    c = compare("m", a, b, higher_is_better=hib)
    assert -100 < c.ci_low_pct <= c.delta_pct <= c.ci_high_pct


def test_ratio_interval_is_symmetric_as_a_factor_and_handles_non_positive_values():
    from llm_tuner.core.stats import ratio_ci_pct

    lo, hi = ratio_ci_pct([100.0, 110.0, 90.0], [50.0, 55.0, 45.0])
    assert (1 + lo / 100) * (1 + hi / 100) == pytest.approx(0.25, rel=1e-2)  # centred on ×0.5 as a factor
    assert ratio_ci_pct([0.0, 1.0], [1.0, 2.0]) is not None  # zeros: the additive interval, still an answer
    assert ratio_ci_pct([1.0], [1.0, 2.0]) is None
    lo, hi = ratio_ci_pct([10.0, 10.1], [10.0, 10.1], delta_pct=50.0)
    assert hi == 50.0  # widened to hold the Δ shown
