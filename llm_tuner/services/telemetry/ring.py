"""Fixed-size ring buffers of telemetry samples, as columns the plots can draw without copying much.

A writer (a sampler thread) appends; readers (the GUI's redraw timer, the CLI) take ordered copies of
the columns. Memory is fixed at creation: an hour at 10 Hz is 36,000 rows per series.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class SeriesRing:
    """Columns of float64 (NaN = unknown) plus a time column, in a circular buffer."""

    def __init__(self, fields: Sequence[str], capacity: int = 36_000) -> None:
        self.fields = tuple(fields)
        self.capacity = int(capacity)
        self._t = np.full(self.capacity, np.nan)
        self._cols = {f: np.full(self.capacity, np.nan) for f in self.fields}
        self._n = 0  # total appended
        self._lock = threading.Lock()
        self.version = 0  # bumps on every append: readers redraw only when it changed

    def __len__(self) -> int:
        return min(self._n, self.capacity)

    def append(self, t: float, values: Mapping[str, Any]) -> None:
        with self._lock:
            i = self._n % self.capacity
            self._t[i] = t
            for f, col in self._cols.items():
                v = values.get(f)
                col[i] = np.nan if v is None else float(v)
            self._n += 1
            self.version += 1

    def extend(self, t: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Bulk append (used to pre-fill an hour of history in benchmarks and tests)."""
        for k in range(len(t)):
            self.append(float(t[k]), {f: values[f][k] for f in values})

    def arrays(self, since_t: float | None = None,
               fields: Sequence[str] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Ordered copies (oldest first) of the time column and the fields (all by default), from
        `since_t`."""
        with self._lock:
            n = len(self)
            # The buffer holds two time-ordered runs: [head:] then [:head] once it has wrapped.
            head = self._n % self.capacity if self._n > self.capacity else 0
            runs = [(head, n)] if head == 0 else [(head, self.capacity), (0, head)]
            if since_t is not None and n:
                kept = []
                for a, b in runs:
                    seg = self._t[a:b]
                    if seg.size and seg[-1] >= since_t:
                        kept.append((a + int(np.searchsorted(seg, since_t)), b))
                runs = kept
            wanted = self._cols if fields is None else {f: self._cols[f] for f in fields if f in self._cols}

            def take(col: np.ndarray) -> np.ndarray:
                if not runs:
                    return col[:0].copy()
                if len(runs) == 1:
                    return col[runs[0][0]:runs[0][1]].copy()
                return np.concatenate([col[a:b] for a, b in runs])

            return take(self._t), {f: take(c) for f, c in wanted.items()}

    def last(self) -> tuple[float, dict[str, float]] | None:
        with self._lock:
            if not self._n:
                return None
            i = (self._n - 1) % self.capacity
            return float(self._t[i]), {f: float(c[i]) for f, c in self._cols.items()}

    def summary(self) -> dict[str, dict[str, float]]:
        """min / mean / max of each field over the buffer (NaNs ignored); for the session record."""
        _t, cols = self.arrays()
        out = {}
        for f, c in cols.items():
            c = c[~np.isnan(c)]
            if c.size:
                out[f] = {"min": float(c.min()), "mean": float(c.mean()), "max": float(c.max())}
        return out
