"""The objective over the trials, as data (`trial_points`, drawn by the Tune view's chart) and as a
self-contained SVG (`trial_plot_svg`, the report's figure: the CLI and the view's export write the same file).

Measured trials are dots on a line of the best score so far; the baseline's score is a dashed line; pruned
trials (never launched) are grey crosses and failed ones red triangles, both just below the lowest score (they
have none); flagged trials (busy machine, throttling) are hollow; the winner kept by the final is a green square.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from llm_tuner.core.tune.model import Trial

MEASURED, FINAL, PRUNED, FAILED = "#2e86de", "#27ae60", "#7f8c8d", "#c0392b"
KINDS = ("measured", "flagged", "final", "pruned", "failed")
TITLE = "Objective over trials (pruned ×, failed ▲)"


@dataclass
class TrialPoints:
    """What the plot draws: points by kind as (trial number, y), the best-so-far line, the baseline's score."""

    kinds: dict[str, list[tuple[int, float]]] = field(default_factory=lambda: {k: [] for k in KINDS})
    best_line: list[tuple[int, float]] = field(default_factory=list)
    baseline: float | None = None


def trial_points(trials: list[Trial]) -> TrialPoints:
    out = TrialPoints()
    scores = [t.score for t in trials if t.score is not None]
    span = (max(scores) - min(scores)) if scores else 0.0
    floor = (min(scores) - 0.05 * (span or abs(min(scores)) or 1.0)) if scores else 0.0  # below every score
    best = None
    for i, t in enumerate(trials, start=1):
        if t.status in ("pruned", "failed"):
            out.kinds[t.status].append((i, floor))
            continue
        if t.score is None:
            continue
        kind = "final" if t.status == "final" else ("flagged" if t.flagged else "measured")
        out.kinds[kind].append((i, t.score))
        best = t.score if best is None else max(best, t.score)
        out.best_line.append((i, best))
    out.baseline = next((t.score for t in trials if t.knob is None and t.score is not None), None)
    return out


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = (lo // step) * step
    out, v = [], start
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            out.append(round(v, 10))
        v += step
    return out or [lo]


def _marker(kind: str, cx: float, cy: float) -> str:
    """One trial's mark as SVG: a dot (hollow when flagged), a green square (the final's winner), a grey cross
    (pruned), a red triangle (failed)."""
    if kind in ("measured", "flagged"):
        fill = MEASURED if kind == "measured" else "white"
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}" stroke="{MEASURED}" stroke-width="1.5"/>'
    if kind == "final":
        return f'<rect x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10" fill="{FINAL}"/>'
    if kind == "pruned":
        return (f'<path d="M{cx - 5:.1f},{cy - 5:.1f} L{cx + 5:.1f},{cy + 5:.1f} M{cx - 5:.1f},{cy + 5:.1f} '
                f'L{cx + 5:.1f},{cy - 5:.1f}" stroke="{PRUNED}" stroke-width="2"/>')
    return f'<path d="M{cx:.1f},{cy - 6:.1f} L{cx + 6:.1f},{cy + 5:.1f} L{cx - 6:.1f},{cy + 5:.1f} Z" fill="{FAILED}"/>'


def trial_plot_svg(trials: list[Trial], y_label: str = "score", *, width: int = 720, height: int = 410) -> str:
    """The plot as an SVG document (black on white, system sans-serif font), its legend under the axis."""
    pts = trial_points(trials)
    ys = [y for kind in pts.kinds.values() for _, y in kind] + ([pts.baseline] if pts.baseline is not None else [])
    n = max(1, len(trials))
    lo, hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    pad = 0.08 * ((hi - lo) or abs(hi) or 1.0)
    lo, hi = lo - pad, hi + pad
    left, right, top, bottom = 70, 20, 40, 84
    pw, ph = width - left - right, height - top - bottom

    def x(i: float) -> float:
        return left + (i - 0.5) / n * pw

    def y(v: float) -> float:
        return top + (hi - v) / (hi - lo) * ph

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{escape(TITLE)}</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>']
    for v in _ticks(lo, hi):
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    step = max(1, n // 10)
    for i in range(1, n + 1, step):
        o.append(f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="middle">{i}</text>')
    o.append(f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle">trial</text>')
    o.append(f'<text transform="translate(16 {top + ph / 2}) rotate(-90)" text-anchor="middle">'
             f'{escape(y_label)}</text>')
    if pts.baseline is not None:
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(pts.baseline):.1f}" y2="{y(pts.baseline):.1f}" '
                 f'stroke="{FINAL}" stroke-dasharray="6 4"/>')
    if pts.best_line:
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts.best_line)
        o.append(f'<polyline points="{path}" fill="none" stroke="{MEASURED}" stroke-dasharray="2 3"/>')
    for kind, points in pts.kinds.items():
        o += [_marker(kind, x(i), y(v)) for i, v in points]
    items: list[tuple[str, str | tuple[str, str]]] = [
        (f"{kind} ({len(points)})", kind) for kind, points in pts.kinds.items() if points]
    items += [("baseline", (FINAL, "6 4")), ("best so far", (MEASURED, "2 3"))]
    lx: float = left  # the legend under the axis: each mark as drawn, wrapped to a second row
    ly = height - 30
    for label, mark in items:
        w = 30 + 6.5 * len(label)
        if lx + w > width - right:
            lx, ly = left, ly + 18
        if isinstance(mark, str):
            o.append(_marker(mark, lx + 6, ly - 4))
        else:
            o.append(f'<line x1="{lx - 4}" x2="{lx + 14}" y1="{ly - 4}" y2="{ly - 4}" stroke="{mark[0]}" '
                     f'stroke-dasharray="{mark[1]}"/>')
        o.append(f'<text x="{lx + 18}" y="{ly}">{escape(label)}</text>')
        lx += w
    o.append("</svg>")
    return "\n".join(o)
