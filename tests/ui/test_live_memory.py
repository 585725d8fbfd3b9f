"""Issue 22 item 20: Live's memory by owner with RPC workers: one labelled row per device, each bar scaled to
what that device holds (a 4 GiB worker beside a 24 GiB host is not a sliver on the host's scale)."""

from __future__ import annotations

from PySide6.QtGui import QColor

from llm_tuner.services.telemetry.breakdown import MemorySegments
from llm_tuner.ui.plots.live_memory import SEGMENT_COLOURS, MemoryBars, row_text

HOST = MemorySegments("host", 500.0, 100.0, 50.0, 300.0, 6000.0, 17626.0, 24576.0)
RPC0 = MemorySegments("RPC0 (127.0.0.1:50052)", 3000.0, 100.0, 60.0, None, 200.0, 4832.0, 8192.0)
RPC1 = MemorySegments("RPC1 (127.0.0.1:50053)", 3000.0, 100.0, 60.0, None, 0.0, 936.0, 4096.0)


def test_each_device_has_its_own_labelled_row_scaled_to_it(qtbot):
    bars = MemoryBars()  # Live's Devices tab holds it below the plots, in a splitter (which keeps its minimum)
    qtbot.addWidget(bars)
    bars.resize(900, 90)
    bars.show()
    bars.set_segments([HOST, RPC0, RPC1])
    qtbot.waitUntil(lambda: bars.rows.height() > 0 and bars.rows.width() > 100)
    rows = bars.rows.rows()
    assert [r[0].device for r in rows] == ["host", "RPC0 (127.0.0.1:50052)", "RPC1 (127.0.0.1:50053)"]
    for (_s, label, bar, _scale), (_s2, label2, _bar2, _scale2) in zip(rows, rows[1:], strict=False):
        assert label.bottom() <= bar.top() and bar.bottom() < label2.top()  # label, its bar, then the next row
    assert [r[3] for r in rows] == [24576.0, 8192.0, 4096.0]  # each against its own capacity
    assert row_text(RPC1) == "RPC1 (127.0.0.1:50053) — 3.09 GiB used of 4.00 GiB"
    # all three in sight, not squeezed into one row
    assert bars.minimumHeight() >= bars.legend.sizeHint().height() + 3 * bars.rows.row_px()
    # what a user sees: RPC1's weights fill 73 % of its bar (on the host's 24 GiB scale they were 12 %)
    image = bars.rows.grab().toImage()
    _s, _label, bar, _scale = rows[2]
    at = image.pixelColor(int(bar.x() + 0.6 * bar.width()), int(bar.center().y()))
    assert at.name() == QColor(SEGMENT_COLOURS["weights"]).name()
