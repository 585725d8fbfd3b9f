"""Live plots for the Live panel: per-device telemetry, memory breakdown bars, request throughput.

Few plots (one per metric, one curve per device) on a shared time axis; data comes from ring buffers
and is pushed with setData only when a ring changed; clipToView + peak downsampling keep hours of
data cheap. The panel's single timer calls `refresh()` at most ~10 Hz and only for visible widgets.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from llm_tuner.services.telemetry.breakdown import MemorySegments

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
SEGMENT_COLOURS = {"weights": "#1f77b4", "KV cache": "#2ca02c", "compute": "#ff7f0e", "rest of server": "#9467bd",
                   "other processes": "#7f7f7f", "free": "#e8e8e8"}

# (title, unit, gpu field(s), host field(s)) - host fields are drawn when there is no GPU (CPU-only).
METRICS = (
    ("Utilisation", "%", ("util_pct",), ("cpu_pct", "server_cpu_pct")),
    ("Memory used", "MiB", ("vram_used_mib",), ("ram_used_mib", "server_rss_mib")),
    ("Temperature", "°C", ("temp_c",), ()),
    ("Power", "W", ("power_w",), ()),
    ("Clocks", "MHz", ("sm_clock_mhz", "mem_clock_mhz"), ()),
)


def _setup(plot: pg.PlotItem) -> None:
    plot.setClipToView(True)
    plot.setDownsampling(auto=True, mode="peak")
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setMenuEnabled(False)


class DevicePlots(QWidget):
    """Utilisation, memory, temperature, power and clocks: one plot each, a curve per device."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window_s = 600.0
        self.view = pg.GraphicsLayoutWidget()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.plots: dict[str, pg.PlotItem] = {}
        first = None
        for row, (title, unit, _g, _h) in enumerate(METRICS):
            axis = pg.DateAxisItem(orientation="bottom")
            plot = self.view.addPlot(row=row, col=0, axisItems={"bottom": axis})
            plot.setTitle(f"{title} ({unit})", size="9pt")
            _setup(plot)
            plot.addLegend(offset=(-5, 5), labelTextSize="8pt")
            if first is None:
                first = plot
            else:
                plot.setXLink(first)
            if row < len(METRICS) - 1:
                plot.getAxis("bottom").setStyle(showValues=False)
            self.plots[title] = plot
        self.throttle_curve = pg.PlotDataItem(pen=None, fillLevel=0, brush=pg.mkBrush(214, 39, 40, 50),
                                              stepMode="right", name="throttled")
        self.plots["Utilisation"].addItem(self.throttle_curve)
        self.curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        self._versions: dict[str, int] = {}
        self.redraws = 0

    def _curve(self, title: str, device: str, field: str, colour_index: int) -> pg.PlotDataItem:
        key = (device, field)
        curve = self.curves.get(key)
        if curve is None:
            dashed = field in ("mem_clock_mhz", "server_cpu_pct", "server_rss_mib")
            pen = pg.mkPen(PALETTE[colour_index % len(PALETTE)], width=1.5,
                           style=pg.QtCore.Qt.PenStyle.DashLine if dashed else pg.QtCore.Qt.PenStyle.SolidLine)
            label = device if field in ("util_pct", "vram_used_mib", "temp_c", "power_w", "sm_clock_mhz",
                                        "cpu_pct", "ram_used_mib") else f"{device} {field.replace('_', ' ')}"
            if device == "host":
                label = {"cpu_pct": "host CPU", "server_cpu_pct": "server CPU (100 = 1 core)",
                         "ram_used_mib": "host RAM used", "server_rss_mib": "server RSS"}.get(field, label)
            curve = self.plots[title].plot(pen=pen, name=label)
            curve.setClipToView(True)
            curve.setDownsampling(auto=True, method="peak")
            self.curves[key] = curve
        return curve

    def refresh(self, rings: dict, now: float | None = None) -> bool:
        """Push changed rings into curves. Returns True if anything was redrawn."""
        now = time.time() if now is None else now
        gpus = sorted(d for d in rings if d not in ("host", "server"))
        devices = gpus or (["host"] if "host" in rings else [])
        changed = False
        throttle_t = throttle_v = None
        for i, dev in enumerate(devices):
            ring = rings[dev]
            if self._versions.get(dev) == ring.version:
                continue
            self._versions[dev] = ring.version
            changed = True
            t, cols = ring.arrays(since_t=now - self.window_s if self.window_s else None)
            for title, _unit, gfields, hfields in METRICS:
                for f in (gfields if dev != "host" else hfields):
                    if f in cols:
                        self._curve(title, dev, f, i).setData(t, cols[f], connect="finite")
            if "throttled" in cols:
                v = np.nan_to_num(cols["throttled"]) * 100.0
                if throttle_t is None or len(t) > len(throttle_t):
                    throttle_t, throttle_v = t, v
                elif len(t) == len(throttle_t):
                    throttle_v = np.maximum(throttle_v, v)
        if throttle_t is not None and len(throttle_t) > 1:
            self.throttle_curve.setData(throttle_t, throttle_v)
        if changed:
            self.redraws += 1
            if self.window_s:
                self.plots["Utilisation"].setXRange(now - self.window_s, now, padding=0)
        return changed


class MemoryBars(QWidget):
    """Stacked horizontal bars per device: weights, KV, compute, rest of server, other processes, free."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = pg.PlotWidget()
        self.view.setMenuEnabled(False)
        self.view.setTitle("Memory by owner (MiB, against capacity)", size="9pt")
        self.view.addLegend(offset=(-5, 5), labelTextSize="8pt")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self._items: list = []
        self.last: list[MemorySegments] = []
        self.setMinimumHeight(120)

    def set_segments(self, segments: list[MemorySegments]) -> None:
        if segments == self.last:
            return
        self.last = list(segments)
        for item in self._items:
            self.view.removeItem(item)
        self._items.clear()
        if self.view.plotItem.legend is not None:
            self.view.plotItem.legend.clear()
        names = [s.device for s in segments]
        left = np.zeros(len(segments))
        for name in SEGMENT_COLOURS:
            widths = np.array([dict(s.stacked()).get(name, 0.0) for s in segments])
            if not widths.any():
                continue
            bar = pg.BarGraphItem(x0=left, y=np.arange(len(segments)), height=0.6, width=widths,
                                  brush=SEGMENT_COLOURS[name], name=name)
            self.view.addItem(bar)
            self._items.append(bar)
            if self.view.plotItem.legend is not None:
                self.view.plotItem.legend.addItem(bar, name)
            left = left + widths
        ticks = [(i, n) for i, n in enumerate(names)]
        self.view.getAxis("left").setTicks([ticks])


class ThroughputPlots(QWidget):
    """Per request: prompt and generation t/s (points) with a rolling average; draft acceptance."""

    def __init__(self, parent: QWidget | None = None, rolling: int = 10) -> None:
        super().__init__(parent)
        self.rolling = rolling
        self.view = pg.GraphicsLayoutWidget()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.rate_plot = self.view.addPlot(row=0, col=0, axisItems={"bottom": pg.DateAxisItem()})
        self.rate_plot.setTitle("Throughput per request (tokens/s)", size="9pt")
        _setup(self.rate_plot)
        self.rate_plot.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.draft_plot = self.view.addPlot(row=1, col=0, axisItems={"bottom": pg.DateAxisItem()})
        self.draft_plot.setTitle("Draft acceptance (%)", size="9pt")
        _setup(self.draft_plot)
        self.draft_plot.setXLink(self.rate_plot)
        self.draft_plot.setYRange(0, 100)
        self.prompt_pts = self.rate_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#1f77b4",
                                              name="prompt t/s")
        self.gen_pts = self.rate_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#ff7f0e",
                                           name="generation t/s")
        self.gen_avg = self.rate_plot.plot(pen=pg.mkPen("#ff7f0e", width=2), name=f"generation, mean of {rolling}")
        self.draft_pts = self.draft_plot.plot(pen=None, symbol="o", symbolSize=5, symbolBrush="#2ca02c")
        self._data: deque = deque(maxlen=100_000)
        self._dirty = False

    def add(self, rec) -> None:
        self._data.append(rec)
        self._dirty = True

    def clear(self) -> None:
        self._data.clear()
        self._dirty = True

    def refresh(self) -> bool:
        if not self._dirty:
            return False
        self._dirty = False
        recs = list(self._data)
        t = np.array([r.time_unix for r in recs], dtype=float)
        pp = np.array([r.prompt_per_second if r.prompt_per_second is not None else np.nan for r in recs], dtype=float)
        tg = np.array([r.predicted_per_second if r.predicted_per_second is not None else np.nan for r in recs],
                      dtype=float)
        self.prompt_pts.setData(t, pp)
        self.gen_pts.setData(t, tg)
        if len(tg):
            s = np.convolve(np.nan_to_num(tg), np.ones(self.rolling), "full")[: len(tg)]
            n = np.convolve((~np.isnan(tg)).astype(float), np.ones(self.rolling), "full")[: len(tg)]
            self.gen_avg.setData(t, np.where(n > 0, s / np.maximum(n, 1), np.nan), connect="finite")
        else:
            self.gen_avg.setData([], [])
        d = [(r.time_unix, 100 * r.draft_acceptance) for r in recs if r.draft_acceptance is not None]
        self.draft_pts.setData([x for x, _ in d], [y for _, y in d])
        return True
