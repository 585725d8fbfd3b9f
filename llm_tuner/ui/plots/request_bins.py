"""Per-request series folded into a bounded number of bins, so a plot of 1k or 1M requests costs the same.

Each bin holds `size` consecutive requests: its first and last time, the lowest and highest value of each
series (peak decimation: outliers stay visible) and the rolling mean at its last request. While there are
fewer requests than bins each bin is one request (drawn exactly); when the bins are full, neighbours merge
in pairs and `size` doubles. Adding is O(1) amortised; `points()` is O(max_bins).
"""

from __future__ import annotations

from collections import deque

import numpy as np


class RequestBins:
    """Bins of consecutive requests for the named series (values may be NaN: not measured)."""

    def __init__(self, fields: tuple[str, ...], max_bins: int = 500, rolling: int = 10) -> None:
        self.fields = fields
        self.cap = max_bins - max_bins % 2  # even: full bins merge in pairs
        self.rolling = rolling
        self.clear()

    def clear(self) -> None:
        cap = self.cap
        self.size = 1  # requests per bin
        self.n = 0  # bins in use
        self.total = 0  # requests added
        self.t0, self.t1 = np.zeros(cap), np.zeros(cap)
        self.count = np.zeros(cap, dtype=np.int64)
        self.lo = {f: np.full(cap, np.nan) for f in self.fields}
        self.hi = {f: np.full(cap, np.nan) for f in self.fields}
        self.avg = {f: np.full(cap, np.nan) for f in self.fields}
        self._recent = {f: deque(maxlen=self.rolling) for f in self.fields}
        self.known = dict.fromkeys(self.fields, False)  # some request had a value for the series

    def add(self, t: float, values: dict[str, float]) -> None:
        """One request finished at `t` with `values` (a field missing or NaN: not measured)."""
        self.total += 1
        if self.n == 0 or self.count[self.n - 1] >= self.size:
            if self.n == self.cap:
                self._merge_pairs()
            b = self.n
            self.n += 1
            self.t0[b], self.count[b] = t, 0
            for f in self.fields:
                self.lo[f][b] = self.hi[f][b] = np.nan
        b = self.n - 1
        self.t1[b] = t
        self.count[b] += 1
        for f in self.fields:
            v = values.get(f)
            v = np.nan if v is None else float(v)
            recent = self._recent[f]
            recent.append(v)
            if v == v:
                self.known[f] = True
                lo, hi = self.lo[f][b], self.hi[f][b]
                self.lo[f][b] = v if not lo <= v else lo
                self.hi[f][b] = v if not hi >= v else hi
            vals = [x for x in recent if x == x]
            self.avg[f][b] = sum(vals) / len(vals) if vals else np.nan

    def _merge_pairs(self) -> None:
        n = self.n
        self.t0[: n // 2] = self.t0[0:n:2]
        self.t1[: n // 2] = self.t1[1:n:2]
        self.count[: n // 2] = self.count[0:n:2] + self.count[1:n:2]
        with np.errstate(invalid="ignore"):
            for f in self.fields:
                self.lo[f][: n // 2] = np.fmin(self.lo[f][0:n:2], self.lo[f][1:n:2])
                self.hi[f][: n // 2] = np.fmax(self.hi[f][0:n:2], self.hi[f][1:n:2])
                self.avg[f][: n // 2] = self.avg[f][1:n:2]
        self.n = n // 2
        self.size *= 2

    def points(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """The scatter of one series: a bin of one request is its point; a larger bin its low and high."""
        n = self.n
        t = np.column_stack([self.t0[:n], self.t1[:n]]).ravel()
        v = np.column_stack([self.lo[field][:n], self.hi[field][:n]]).ravel()
        keep = np.ones(2 * n, dtype=bool)
        keep[1::2] = self.count[:n] > 1
        keep &= np.isfinite(v)
        return t[keep], v[keep]

    def means(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """The rolling mean (of the last `rolling` known values) at each bin's last request."""
        return self.t1[: self.n].copy(), self.avg[field][: self.n].copy()
