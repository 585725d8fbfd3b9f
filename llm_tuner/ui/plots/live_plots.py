"""Live plots for the Live panel: per-device telemetry, request throughput (memory by owner: live_memory.py).

Few plots (one per metric, one curve per device) on a shared time axis; data comes from ring buffers
and is pushed with setData only when a ring changed; clipToView + peak downsampling keep hours of
data cheap. The panel's single timer calls `refresh()` at ~10 Hz and only for visible widgets; the device
plots draw one frame a second (every changed plot and the time axis together: one paint), the request plots at
most one a second. The request plots draw from a bounded set of bins (request_bins.py): a refresh costs the
same at 1k or 1M requests.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from llm_tuner.ui.plots.request_bins import RequestBins

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

# (title, unit, gpu field(s), host field(s)) - host fields are drawn when there is no GPU (CPU-only).
METRICS = (
    ("Utilisation", "%", ("util_pct",), ("cpu_pct", "server_cpu_pct")),
    ("Memory used", "MiB", ("vram_used_mib",), ("ram_used_mib", "server_rss_mib")),
    ("Temperature", "°C", ("temp_c",), ()),
    ("Power", "W", ("power_w",), ()),
    ("Clocks", "MHz", ("sm_clock_mhz", "mem_clock_mhz"), ()),
)


def decimate(t: np.ndarray, cols: dict[str, np.ndarray], max_points: int) -> tuple[np.ndarray, dict]:
    """Peak decimation: min and max of each bin, so spikes survive and a curve has <= max_points points.

    Cheaper than letting pyqtgraph draw tens of thousands of segments (drawing dominates paint time).
    """
    n = len(t)
    if n <= max_points:
        return t, cols
    bins = max_points // 2
    size = n // bins
    start = n - bins * size  # keep the newest samples whole
    tb = t[start:].reshape(bins, size)
    t_out = np.repeat(tb[:, 0], 2)
    t_out[1::2] = tb[:, -1]
    out = {}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        for f, c in cols.items():
            cb = c[start:].reshape(bins, size)
            lo, hi = np.nanmin(cb, axis=1), np.nanmax(cb, axis=1)
            v = np.empty(2 * bins)
            v[0::2], v[1::2] = lo, hi
            out[f] = v
    return t_out, out


def _setup(plot: pg.PlotItem, own_decimation: bool = False) -> None:
    if not own_decimation:
        plot.setClipToView(True)
        plot.setDownsampling(auto=True, mode="peak")
    # No grid: pyqtgraph draws grid lines as part of the axes, and the axes repaint whenever the
    # time window scrolls; with five plots that was most of the paint time (benchmarks/ui_lag.py).
    plot.setMenuEnabled(False)


def fitted_y(cur: tuple[float, float] | None, lo: float, hi: float) -> tuple[float, float] | None:
    """A y range for values in [lo, hi] with a margin, or None when `cur` still fits them well (kept: a range
    that moves repaints the axes and every point)."""
    span = max(hi - lo, abs(hi) * 0.05, 1.0)
    lo, hi = lo - 0.08 * span, hi + 0.08 * span
    if cur is None or lo < cur[0] or hi > cur[1] or (cur[1] - cur[0]) > 3 * (hi - lo):
        return lo, hi
    return None


MIN_REQUEST_SPAN_S = 60.0  # the request plots' narrowest time window
MIN_CURVES_PX = 122  # the least height of a Live plot's curves (its ViewBox), title and axes not counted
TITLE_PX = 20  # a plot's title row (9 pt text; pyqtgraph's own row is 30 px)
TIME_AXIS_PX = 40  # the lowest plot's time axis: ticks and its label
COLUMN_PX = 26  # the column's margins and the spacing between its plots


def _title(plot: pg.PlotItem, text: str) -> None:
    plot.setTitle(text, size="9pt")
    plot.titleLabel.setMaximumHeight(TITLE_PX)
    plot.layout.setRowFixedHeight(0, TITLE_PX)


def _scrolling(view: QWidget) -> QScrollArea:
    """`view` in a vertical scroll area (its minimum height decides when it scrolls)."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(view)
    return scroll
FRAME_S = 1.0  # the device plots' curves change at most this often: a pixel or two of ten minutes
# the device plots' time axis reaches this share of the window past the newest sample (then it moves)
X_LEAD = 0.05


def _time_label(plot: pg.PlotItem) -> None:
    """Name the clock-time axis (DateAxisItem: local wall-clock time) so its ticks read as times."""
    axis = plot.getAxis("bottom")
    axis.setLabel("local time (h:min:s)", **{"font-size": "8pt", "color": axis.textPen().color().name()})


def _show_plots(plots: list[pg.PlotItem], shown: list[bool]) -> int:
    """Show some plots of a column (a hidden plot gives its height to the others); the plots are x-linked and
    share one named time axis, on the lowest one shown (ticks on each would cost a laptop 26 px a plot).
    Returns the column's least height: each plot keeps MIN_CURVES_PX for its curves, so a short window scrolls
    the column rather than crushing five plots into 45 px each (a 1366x768 laptop did)."""
    last = max(i for i, on in enumerate(shown) if on)
    total = COLUMN_PX
    for i, (plot, on) in enumerate(zip(plots, shown, strict=True)):
        plot.setVisible(on)
        if i == last:
            plot.showAxis("bottom")
            _time_label(plot)
        else:
            plot.getAxis("bottom").showLabel(False)
            plot.hideAxis("bottom")
        least = MIN_CURVES_PX + TITLE_PX + (TIME_AXIS_PX if i == last else 0) if on else 0
        plot.setMinimumHeight(least)
        total += least
    return total


class DevicePlots(QWidget):
    """Utilisation, memory, temperature, power and clocks: one plot each, a curve per device."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window_s = 600.0
        self.max_points = 800  # per curve: about the plot's width in pixels, min/max per bin
        self.view = pg.GraphicsLayoutWidget()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(_scrolling(self.view))
        self.plots: dict[str, pg.PlotItem] = {}
        first = None
        for row, (title, unit, _g, _h) in enumerate(METRICS):
            axis = pg.DateAxisItem(orientation="bottom")
            plot = self.view.addPlot(row=row, col=0, axisItems={"bottom": axis})
            _title(plot, f"{title} ({unit})")
            _setup(plot, own_decimation=True)
            plot.disableAutoRange()
            plot.getAxis("left").setWidth(64)  # same width on every plot so the time axes line up
            plot.addLegend(offset=(5, 5), labelTextSize="8pt")  # top-left: the newest data is on the right
            if first is None:
                first = plot
            else:
                plot.setXLink(first)
            self.plots[title] = plot
        # Shaded where a GPU reports throttling; added with the first GPU (no "throttled" legend on a CPU).
        self.throttle_curve = pg.PlotDataItem(pen=None, fillLevel=0, brush=pg.mkBrush(214, 39, 40, 50),
                                              stepMode="right", name="throttled")
        self.curves: dict[tuple[str, str], pg.PlotCurveItem] = {}
        self.device_labels: dict[str, str] = {}  # ring name -> legend name ("CUDA0" -> "CUDA0 + Vulkan0")
        self._versions: dict[tuple[str, str], int] = {}
        self.frame_s = FRAME_S
        self._drawn_at = -np.inf
        self._x_range: tuple[float, float] | None = None
        # until the first sample: the last window_s of clock time, not 0..1 s of 1970
        self._scroll_x(time.time())
        self._y_ranges: dict[str, tuple[float, float]] = {}
        self.redraws = 0
        self.gpu_plots_shown = True
        self.show_gpu_plots(False)  # until a GPU is detected (or sends samples)

    def show_gpu_plots(self, shown: bool) -> None:
        """Temperature, power and clocks come only from GPUs: hidden on a machine without one, rather than
        three empty plots."""
        if shown == self.gpu_plots_shown:
            return
        self.gpu_plots_shown = shown
        visible = [shown or bool(host_fields) for _t, _u, _g, host_fields in METRICS]
        # each keeps its height: they scroll
        self.view.setMinimumHeight(_show_plots(list(self.plots.values()), visible))

    def set_device_labels(self, labels: dict[str, str]) -> None:
        """Legend names per device ring: one physical GPU is one set of curves, named with all its llama.cpp
        names ('CUDA0 + Vulkan0'). Curves already drawn are made again under the new names."""
        if labels == self.device_labels:
            return
        self.device_labels = dict(labels)
        for (device, field), curve in list(self.curves.items()):
            for plot in self.plots.values():
                if curve in plot.listDataItems():
                    plot.removeItem(curve)
            del self.curves[(device, field)]
        self._versions.clear()

    def _curve(self, title: str, device: str, field: str, colour_index: int) -> pg.PlotCurveItem:
        key = (device, field)
        curve = self.curves.get(key)
        if curve is None:
            dashed = field in ("mem_clock_mhz", "server_cpu_pct", "server_rss_mib")
            pen = pg.mkPen(PALETTE[colour_index % len(PALETTE)], width=1,  # width 1: Qt's fast cosmetic path
                           style=pg.QtCore.Qt.PenStyle.DashLine if dashed else pg.QtCore.Qt.PenStyle.SolidLine)
            shown = self.device_labels.get(device, device)
            label = {"mem_clock_mhz": f"{shown} memory", "sm_clock_mhz": f"{shown} SM"}.get(field, shown)
            if device == "host":
                label = {"cpu_pct": "host CPU", "server_cpu_pct": "server CPU (100 = 1 core)",
                         "ram_used_mib": "host RAM used", "server_rss_mib": "server RSS"}.get(field, label)
            # A bare curve: clipping to the window and peak downsampling are done before setData
            # (ring.arrays(since_t) + decimate), and a PlotDataItem's own bookkeeping made its setData ten
            # times as costly.
            curve = pg.PlotCurveItem(pen=pen, name=label)
            self.plots[title].addItem(curve)
            self.curves[key] = curve
        return curve

    def refresh(self, rings: dict, now: float | None = None, *, force: bool = False) -> bool:
        """Push changed rings into the curves and move the time axis, in one frame at most every `frame_s`
        (`force`: now, whatever the interval); returns True if anything was redrawn.

        One frame for all plots: each plot that changes costs a repaint of the view, and moving the shared
        time axis repaints every plot anyway. Updated one metric a tick (staggered), the plots cost a paint
        per plot per sample on top of the axis' paint: on a watched, idle server that was most of the app's
        CPU (the GUI thread 6.3 % of a core, issue 26, benchmarks/results/live_load/live_load_profile.txt)."""
        now = time.time() if now is None else now
        if not force and now - self._drawn_at < self.frame_s:
            return False
        gpus = sorted(d for d in rings if d not in ("host", "server"))
        devices = gpus or (["host"] if "host" in rings else [])
        if gpus:
            self.show_gpu_plots(True)
        self._scroll_x(now)
        changed = False
        for title, _unit, gfields, hfields in METRICS:
            changed = self._refresh_metric(rings, devices, title, gfields, hfields, now) or changed
        if changed:
            self.redraws += 1
            self._drawn_at = now
        return changed

    def set_window(self, seconds: float) -> None:
        """Show the last `seconds` of samples: every curve is drawn again over the new window."""
        self.window_s = seconds
        self._versions.clear()
        self._x_range = None

    def _scroll_x(self, now: float) -> None:
        """Move the shared time axis once the newest samples reach its right end: it then shows the last
        window_s and X_LEAD of the window ahead. A move repaints every plot with its axes (ticks, labels):
        moved a pixel every second, that was most of what an idle watched server cost the app (issue 26)."""
        if not self.window_s or (self._x_range is not None and now + 1.0 <= self._x_range[1]):
            return
        self._x_range = (now - self.window_s, now + max(1.0, X_LEAD * self.window_s))
        self.plots["Utilisation"].setXRange(*self._x_range, padding=0)

    def _refresh_metric(self, rings: dict, devices: list[str], title: str, gfields, hfields, now: float) -> bool:
        """One metric's plot: a curve per device and field from the rings that changed since it was drawn."""
        changed = False
        throttle_t = throttle_v = None
        y_lo, y_hi = np.inf, -np.inf
        for i, dev in enumerate(devices):
            ring = rings[dev]
            flds = list(gfields if dev != "host" else hfields)
            if not flds or self._versions.get((title, dev)) == ring.version:
                continue
            self._versions[(title, dev)] = ring.version
            if title == "Utilisation" and dev != "host":
                flds.append("throttled")
            since = self._x_range[0] if self.window_s and self._x_range else None  # from the axis' left end
            t, cols = ring.arrays(since_t=since, fields=flds)
            t, cols = decimate(t, cols, self.max_points)
            changed = True
            for f in flds:
                if f == "throttled":
                    continue
                y = cols[f]
                finite = np.isfinite(y)
                if finite.all():  # the common case: the fast path, no per-point gap handling
                    self._curve(title, dev, f, i).setData(t, y, connect="all", skipFiniteCheck=True)
                else:
                    self._curve(title, dev, f, i).setData(t, y, connect="finite")
                if finite.any():
                    y_lo, y_hi = min(y_lo, float(np.nanmin(cols[f]))), max(y_hi, float(np.nanmax(cols[f])))
            if "throttled" in cols:
                v = np.nan_to_num(cols["throttled"]) * 100.0
                if throttle_t is None or len(t) > len(throttle_t):
                    throttle_t, throttle_v = t, v
                elif len(t) == len(throttle_t):
                    throttle_v = np.maximum(throttle_v, v)
        if throttle_t is not None and len(throttle_t) > 1:
            if self.throttle_curve.scene() is None:
                self.plots["Utilisation"].addItem(self.throttle_curve)
            self.throttle_curve.setData(throttle_t, throttle_v)
        if np.isfinite(y_lo):
            self._fit_y(title, y_lo, y_hi)
        return changed

    def _fit_y(self, title: str, lo: float, hi: float) -> None:
        """Our own y range (autoRange recomputed bounds on every setData of every curve: too slow)."""
        if title == "Utilisation":
            lo, hi = 0.0, 100.0
        new = fitted_y(self._y_ranges.get(title), lo, hi)
        if new is not None:
            self._y_ranges[title] = new
            self.plots[title].setYRange(*new, padding=0)


class ThroughputPlots(QWidget):
    """Per request: prompt and generation t/s (points) with a rolling average; draft acceptance."""

    def __init__(self, parent: QWidget | None = None, rolling: int = 10, max_bins: int = 500) -> None:
        super().__init__(parent)
        self.rolling = rolling
        self.view = pg.GraphicsLayoutWidget()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(_scrolling(self.view))

        def make(row: int, title: str) -> pg.PlotItem:
            plot = self.view.addPlot(row=row, col=0, axisItems={"bottom": pg.DateAxisItem()})
            _title(plot, title)
            _setup(plot)
            plot.getAxis("left").setWidth(64)
            # At least a minute across: a few requests (or one) otherwise zoom the clock axis to
            # fractions of a second ("32.000", no hours or minutes).
            plot.setLimits(minXRange=MIN_REQUEST_SPAN_S)
            plot.addLegend(offset=(5, 5), labelTextSize="8pt")
            plot.disableAutoRange()  # ranges fitted here, with headroom (_fit_ranges)
            return plot

        # Prompt and generation rates differ by 10-100x: one plot each, so both stay readable.
        self.prompt_plot = make(0, "Prompt processing per request (tokens/s)")
        self.rate_plot = make(1, "Generation per request (tokens/s)")
        self.draft_plot = make(2, "Draft acceptance per request (%)")
        self.prompt_plot.setXLink(self.rate_plot)
        self.draft_plot.setXLink(self.rate_plot)
        self.draft_plot.setYRange(0, 100)
        self.draft_plot_shown: bool | None = None
        self._show_draft_plot(False)  # until a request drafted tokens (speculative decoding: -md, --draft-*)
        self.prompt_pts = self.prompt_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#1f77b4",
                                                name="prompt t/s")
        self.prompt_avg = self.prompt_plot.plot(pen=pg.mkPen("#1f77b4", width=2), name=f"mean of last {rolling}")
        self.gen_pts = self.rate_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#ff7f0e",
                                           name="generation t/s")
        self.gen_avg = self.rate_plot.plot(pen=pg.mkPen("#ff7f0e", width=2), name=f"mean of last {rolling}")
        self.draft_pts = self.draft_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#2ca02c",
                                              name="accepted / drafted")
        self.bins = RequestBins(("prompt", "gen", "draft"), max_bins=max_bins, rolling=rolling)
        self._dirty = False
        self._x_range: tuple[float, float] | None = None
        self._y_ranges: dict[str, tuple[float, float]] = {}
        # Redrawing these plots (symbols, axes, legends) costs ~20 ms: at 10 Hz under a busy server that was a
        # quarter of a core and 30 ms of lag; at 2 Hz still most of the Throughput tab's CPU (issue 26).
        # Points of requests read as well once a second.
        self.min_interval_s = 1.0
        self._drawn_at = -np.inf

    def add(self, rec) -> None:
        """O(1): the request goes into the bins; the curves change at the next refresh (tab shown)."""
        acc = rec.draft_acceptance
        self.bins.add(rec.time_unix, {"prompt": rec.prompt_per_second, "gen": rec.predicted_per_second,
                                      "draft": None if acc is None else 100.0 * acc})
        self._dirty = True

    def extend(self, recs) -> None:
        for rec in recs:
            self.add(rec)

    def clear(self) -> None:
        self.bins.clear()
        self._x_range, self._y_ranges = None, {}
        self._dirty = True

    def refresh(self, now: float | None = None) -> bool:
        """Redraw from the bins (at most 2 x max_bins points a curve) if requests came since the last redraw
        and it was at least `min_interval_s` ago (`now`: a monotonic clock, injectable for tests)."""
        now = time.monotonic() if now is None else now
        if not self._dirty or now - self._drawn_at < self.min_interval_s:
            return False
        self._dirty, self._drawn_at = False, now
        b = self.bins
        self.prompt_pts.setData(*b.points("prompt"))
        self.gen_pts.setData(*b.points("gen"))
        self.prompt_avg.setData(*b.means("prompt"), connect="finite")
        self.gen_avg.setData(*b.means("gen"), connect="finite")
        self.draft_pts.setData(*b.points("draft"))
        self._show_draft_plot(b.known["draft"])
        self._fit_ranges()
        return True

    def _fit_ranges(self) -> None:
        """Our own ranges, moved only when the points leave them: the time axis reaches a quarter of the span
        past the newest request. With pyqtgraph's autoRange every redraw moved the axes a little, and the
        whole view (axes, ticks, every point) repainted: ~22 ms a redraw, ~5 ms with the ranges kept (issue
        26)."""
        b = self.bins
        n = b.n
        if n == 0:
            return
        t_lo, t_hi = float(b.t0[0]), float(b.t1[n - 1])
        x = self._x_range
        if x is None or t_hi > x[1] or t_lo < x[0]:
            span = max(t_hi - t_lo, MIN_REQUEST_SPAN_S)
            self._x_range = (t_lo - 0.02 * span, t_hi + 0.25 * span)
            self.rate_plot.setXRange(*self._x_range, padding=0)  # the other two are linked to it
        for plot, field in ((self.prompt_plot, "prompt"), (self.rate_plot, "gen")):
            if not b.known[field]:
                continue
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", category=RuntimeWarning)
                lo, hi = float(np.nanmin(b.lo[field][:n])), float(np.nanmax(b.hi[field][:n]))
            if not (np.isfinite(lo) and np.isfinite(hi)):
                continue
            new = fitted_y(self._y_ranges.get(field), lo, hi)
            if new is not None:
                self._y_ranges[field] = new
                plot.setYRange(*new, padding=0)

    def _show_draft_plot(self, shown: bool) -> None:
        """The draft acceptance plot only while some request drafted tokens: without a draft model it stays
        empty."""
        if shown == self.draft_plot_shown:
            return
        self.draft_plot_shown = shown
        self.view.setMinimumHeight(_show_plots([self.prompt_plot, self.rate_plot, self.draft_plot], [True, True, shown]))
