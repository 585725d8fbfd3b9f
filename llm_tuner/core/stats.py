"""Statistics for benchmark results and A/B verdicts: medians, spread, percentiles, Welch intervals.

Why Welch and not a bootstrap: benchmark runs have 2-5 repetitions. A percentile bootstrap on n=3
samples is badly anti-conservative (it calls a difference "real" far more often than 5% of the time),
while Welch's t interval with Satterthwaite's degrees of freedom stays honest for small n: with two
repetitions per side the interval is wide and the verdict says "within noise", which is the truth.

The interval of a change is taken on the ratio B/A (Welch's interval of the difference of log values,
back-transformed): benchmark quantities are positive, a change of one is a factor, and on the log scale the
interval can never reach −100 % the way an additive interval divided by A's mean did ("−41 % [−104, +75] %"
for tokens per second). It is widened, when it has to be, to include the Δ shown beside it (a change of the
medians: an outlier moves the means the interval is built on, never the Δ), so the two never contradict.

A verdict of "better"/"worse" needs BOTH a 95% interval of the difference that excludes zero AND a
difference larger than a practical threshold (default 2%, `Settings.ab_threshold_pct`), so an A/A
comparison of the same settings does not come out "better" one time in three.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

BETTER, WORSE, NOISE = "better", "worse", "within noise"
# The practical A/B threshold (%): a smaller difference is "within noise" even when its interval excludes
# zero. Settings.ab_threshold_pct starts here; Compare, `runs compare` and a tune's final read the setting.
AB_THRESHOLD_PCT = 2.0
# "Within noise" is not "equal": a within-noise verdict whose 95 % interval still allows a change this large
# (either way; or the A/B threshold where that is larger), or that has no interval, is *inconclusive*, and says
# so (too few repetitions or starts to tell). Below it the two are the same as far as a user would care. 10 % is
# the size of change a user tunes for (a K/V type, a thread count, a split); not derived.
INCONCLUSIVE_PCT = 10.0
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Summary:
    """One metric's repetitions: n, median, quartiles (IQR), mean and sample standard deviation."""

    n: int
    median: float
    q1: float
    q3: float
    mean: float
    stdev: float | None  # None when n < 2
    min: float
    max: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3, "iqr": self.iqr,
                "mean": self.mean, "stdev": self.stdev, "min": self.min, "max": self.max}


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def percentile(values: Sequence[float | None], pct: float) -> float | None:
    """Percentile with linear interpolation between order statistics (numpy's default method)."""
    xs = _clean(values)
    return _percentile(xs, pct) if xs else None


def _percentile(values: list[float], pct: float) -> float:
    """`percentile` of values that are there (at least one)."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * pct / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float | None]) -> float | None:
    return percentile(values, 50.0)


def summarize(values: Sequence[float | None]) -> Summary | None:
    """Summary of the non-missing values; None when there are none."""
    xs = _clean(values)
    if not xs:
        return None
    n = len(xs)
    mean = sum(xs) / n
    stdev = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    return Summary(n, _percentile(xs, 50), _percentile(xs, 25), _percentile(xs, 75), mean, stdev, min(xs), max(xs))


# -- Student t quantile (no scipy): regularized incomplete beta by continued fraction ----------------

def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(c) > 1e-300 else 1e300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(c) > 1e-300 else 1e300
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with (possibly fractional) df."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t (bisection on t_cdf; exact to ~1e-9)."""
    if not 0.0 < p < 1.0:
        raise ValueError(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    hi = 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    return _bisect(lambda t: t_cdf(t, df), p, 0.0, hi, 1e-10)


def _bisect(f: Callable[[float], float], target: float, lo: float, hi: float, tol: float) -> float:
    """x in [lo, hi] with f(x) = target, for f increasing there (bisection to within tol)."""
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < tol:
            break
    return (lo + hi) / 2.0


def welch_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Welch's interval for mean(b) - mean(a); None when either side has fewer than 2 values."""
    sa, sb = summarize(a), summarize(b)
    if sa is None or sb is None or sa.stdev is None or sb.stdev is None:  # a stdev needs 2+ values
        return None
    va, vb = sa.stdev**2 / sa.n, sb.stdev**2 / sb.n
    diff = sb.mean - sa.mean
    se = math.sqrt(va + vb)
    if se == 0.0:
        return (diff, diff)
    df = (va + vb) ** 2 / ((va**2 / (sa.n - 1) if va else 0.0) + (vb**2 / (sb.n - 1) if vb else 0.0))
    t = t_quantile(0.5 + confidence / 2.0, df)
    return (diff - t * se, diff + t * se)


@dataclass(frozen=True)
class Comparison:
    """B against A for one metric. Percentages are relative to A; the verdict is direction-aware."""

    name: str
    unit: str
    higher_is_better: bool
    a: Summary | None
    b: Summary | None
    delta_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    verdict: str | None  # better / worse / within noise; None when a side has no data
    note: str = ""
    threshold_pct: float = AB_THRESHOLD_PCT  # the practical threshold the verdict was made with

    @property
    def inconclusive(self) -> bool:
        """Within noise, but the interval allows a change the user would care about (or there is none): the
        data cannot tell the two apart, which is not the same as showing them equal (`inconclusive`)."""
        return self.verdict == NOISE and self.delta_pct is not None and inconclusive(
            self.ci_low_pct, self.ci_high_pct, self.threshold_pct)

    @property
    def verdict_label(self) -> str:
        """The verdict as a table shows it: "inconclusive" for a within-noise verdict that cannot tell."""
        return INCONCLUSIVE if self.inconclusive else (self.verdict or "no data")

    def to_json(self) -> dict[str, Any]:
        def side(s: Summary | None) -> dict[str, Any] | None:
            return None if s is None else {"median": s.median, "n": s.n, "iqr": s.iqr, "stdev": s.stdev,
                                           "mean": s.mean}

        return {"name": self.name, "unit": self.unit, "higher_is_better": self.higher_is_better,
                "a": side(self.a), "b": side(self.b), "delta_pct": self.delta_pct,
                "ci_low_pct": self.ci_low_pct, "ci_high_pct": self.ci_high_pct,
                "verdict": self.verdict, "inconclusive": self.inconclusive, "note": self.note,
                "threshold_pct": self.threshold_pct}


def inconclusive(lo: float | None, hi: float | None, threshold_pct: float = AB_THRESHOLD_PCT) -> bool:
    """Whether a within-noise interval [lo, hi] % (None: none, one repetition a side) cannot tell: it still
    allows a change of INCONCLUSIVE_PCT, or of the threshold where that is larger, either way."""
    if lo is None or hi is None:
        return True
    return max(-lo, hi) >= max(INCONCLUSIVE_PCT, threshold_pct)


def ratio_ci_pct(a: Sequence[float | None], b: Sequence[float | None], delta_pct: float | None = None,
                 confidence: float = 0.95) -> tuple[float, float] | None:
    """The interval of the relative change B/A − 1, in %, that every view shows beside Δ (Compare, a tune's
    final, reports): Welch's interval on the logs of positive values, back-transformed, so it stays above
    −100 % and is symmetric as a factor (×0.8 … ×1.25). Values that are not all positive fall back to Welch's
    interval of the difference of means divided by A's mean. The interval is widened to include `delta_pct`
    (the Δ shown, from the medians) when given. None when a side has fewer than 2 values (or A's mean is
    0)."""
    xa, xb = _clean(a), _clean(b)
    if len(xa) < 2 or len(xb) < 2:
        return None
    if min(xa) > 0 and min(xb) > 0:
        ci = welch_ci([math.log(x) for x in xa], [math.log(x) for x in xb], confidence)
        if ci is None:
            return None
        lo, hi = (100.0 * math.expm1(ci[0]), 100.0 * math.expm1(ci[1]))
    else:
        mean_a = sum(xa) / len(xa)
        ci = welch_ci(xa, xb, confidence)
        if ci is None or mean_a == 0:
            return None
        lo, hi = 100.0 * ci[0] / abs(mean_a), 100.0 * ci[1] / abs(mean_a)
    if delta_pct is not None:
        lo, hi = min(lo, delta_pct), max(hi, delta_pct)
    return lo, hi


def compare(name: str, a: Sequence[float | None], b: Sequence[float | None], *, higher_is_better: bool,
            threshold_pct: float = AB_THRESHOLD_PCT, unit: str = "", confidence: float = 0.95) -> Comparison:
    """Compare samples B against A.

    Δ% = (median B − median A) / median A. The 95% interval is `ratio_ci_pct` (on the ratio B/A, containing
    Δ). "better"/"worse" need the interval to exclude zero on the side of Δ and |Δ| > `threshold_pct`;
    otherwise "within noise".
    """
    xa, xb = _clean(a), _clean(b)
    sa, sb = summarize(xa), summarize(xb)
    if sa is None or sb is None:
        return Comparison(name, unit, higher_is_better, sa, sb, None, None, None, None, "no data on one side",
                          threshold_pct)
    if sa.median == 0 or sa.mean == 0:
        return Comparison(name, unit, higher_is_better, sa, sb, None, None, None, NOISE,
                          "A is zero: no relative change", threshold_pct)
    delta = 100.0 * (sb.median - sa.median) / abs(sa.median)
    ci = ratio_ci_pct(xa, xb, delta, confidence)
    if ci is None:
        return Comparison(name, unit, higher_is_better, sa, sb, delta, None, None, NOISE,
                          "fewer than 2 repetitions on a side: no confidence interval, so inconclusive",
                          threshold_pct)
    lo, hi = ci
    excludes_zero = (lo > 0 and delta > 0) or (hi < 0 and delta < 0)
    if excludes_zero and abs(delta) > threshold_pct:
        verdict = BETTER if (delta > 0) == higher_is_better else WORSE
        note = ""
    else:
        verdict = NOISE
        note = ("interval includes zero" if not excludes_zero
                else f"|Δ| {abs(delta):.1f}% is below the {threshold_pct:g}% threshold")
        if inconclusive(lo, hi, threshold_pct):
            note += (f"; inconclusive: the interval still allows a change of up to {max(-lo, hi):.0f} %, so these "
                     "are not shown equal either (more repetitions narrow it)")
    return Comparison(name, unit, higher_is_better, sa, sb, delta, lo, hi, verdict, note, threshold_pct)


def speculative_bound(alpha: float, k: int) -> float:
    """Tokens per verification step under the constant-α model (field notes, docs/field-reports.md):
    every draft position accepted with the same probability α, independently, draft depth k:
    1 + α + α² + … + α^k. Used to predict other depths k from a fitted α, never fed llama.cpp's
    overall accepted/drafted ratio (that ratio is not a per-position acceptance)."""
    return sum(alpha**i for i in range(k + 1))


def acceptance_by_position(accepted_per_pos: Sequence[float], drafts: float) -> list[float]:
    """Per-position acceptance α_1, α_2, … from llama.cpp's counters.

    `accepted_per_pos[p]` is `spec_decode_num_accepted_tokens_per_pos_total{position="p"}` (0-based:
    position 0 is the first drafted token; a draft accepted up to position p counts once at 0..p),
    `drafts` is `spec_decode_num_drafts_total` (verification steps). So α_1 = count[0] / drafts and
    α_i = count[i-1] / count[i-2]: the chance position i is accepted given i-1 were. The list stops
    where the previous count is 0 (nothing left to accept). With variable-length (n-gram) drafts, α_i
    also folds in drafts shorter than i."""
    out: list[float] = []
    prev = float(drafts)
    for count in accepted_per_pos:
        if prev <= 0:
            break
        out.append(float(count) / prev)
        prev = float(count)
    while out and out[-1] == 0.0:
        out.pop()
    return out


def tokens_per_step(alphas: Sequence[float]) -> float:
    """Mean tokens per verification step, 1 + Σ_i Π_{j≤i} α_j (the target's own token plus the accepted
    drafts); from acceptance_by_position it equals llama.cpp's `mean len` = 1 + accepted / steps."""
    total, prod = 1.0, 1.0
    for a in alphas:
        prod *= a
        total += prod
    return total


def fit_constant_alpha(mean_tokens_per_step: float, k: int) -> float | None:
    """The constant α whose model 1 + α + … + α^k gives the measured tokens per step at depth k
    (bisection; the model is increasing in α). None when k < 1 or the figure is outside [1, k+1]."""
    if k < 1 or not 1.0 <= mean_tokens_per_step <= k + 1 + 1e-9:
        return None
    return _bisect(lambda a: speculative_bound(a, k), mean_tokens_per_step, 0.0, 1.0, 1e-15)


def pooled_cv(groups: Sequence[Sequence[float]]) -> float | None:
    """The spread of repeated measurements of one setting, pooled over settings: √(mean CV²) over the groups
    with 2+ samples and a non-zero mean; None when there is none."""
    cvs = []
    for g in groups:
        s = summarize(_clean(g))
        if s is not None and s.stdev is not None and s.mean:  # 2+ samples
            cvs.append((s.stdev / abs(s.mean)) ** 2)
    return math.sqrt(sum(cvs) / len(cvs)) if cvs else None


def reps_to_detect(cv: float | None, gain: float | None, threshold_pct: float, minimum: int, maximum: int) -> int:
    """Repetitions per side for a two-sample comparison to call a real gain (95% interval, 80% power):
    n = 2 ((1.96 + 0.84) CV / effect)² + 1, the effect being the screened gain shrunk to 70% (a screen's best
    reads high: it was picked as the best of several) and at least the threshold. Clamped to [minimum,
    maximum]; `minimum` when the spread or the gain is unknown."""
    if not cv or not gain or gain <= 0:
        return minimum
    effect = max(threshold_pct / 100.0, 0.7 * gain)
    n = math.ceil(2 * ((1.96 + 0.84) * cv / effect) ** 2) + 1
    return max(minimum, min(maximum, n))
