"""The Live panel's GUI-thread cost per request, and the paints behind it (issue 26), without a server.

    QT_QPA_PLATFORM=offscreen RATE=40 [SECONDS=10] [PAINTS=0] .venv/bin/python benchmarks/live_paint_cost.py TAB INTERVAL_MS [nofollow]

The panel in a main window with the log docked below (as live_load.py shows it), one tab shown (0 Devices,
1 Throughput, 2 Requests), fed RATE finished requests a second (7 log lines each) in batches every INTERVAL_MS,
as the bridge hands them over. After 2 s of warm-up, for SECONDS (10): the GUI thread's CPU (time.thread_time, so
other users of a busy machine do not count) and the paint events per widget (PAINTS=0: not counted; the counting
filter sees every event and costs CPU of its own). Run once with RATE=0 for the fixed cost;
(CPU at RATE - CPU at 0) / RATE is the GUI time per request. Results: benchmarks/results/live_load/live_load_profile.txt.
"""

import collections
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from live_load import _show_window  # noqa: E402
from PySide6.QtCore import QEvent, QObject, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from llm_tuner.core.session import RequestRecord  # noqa: E402
from llm_tuner.core.settings import Settings  # noqa: E402
from llm_tuner.qt.context import AppContext  # noqa: E402
from llm_tuner.services.logparse import LogLine  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.ui.panels.live_panel import LivePanel  # noqa: E402


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Paint:
            parent = obj.parent()
            self.counts[f"{type(obj).__name__}<{type(parent).__name__ if parent else ''}"] += 1
        return False


def main() -> int:
    tab, interval = int(sys.argv[1]), int(sys.argv[2])
    rate = float(os.environ.get("RATE", "40"))
    app = QApplication([])
    tmp = tempfile.TemporaryDirectory()
    panel = LivePanel(AppContext(settings=Settings(), engine=open_engine(Path(tmp.name) / "db.sqlite")))
    window = _show_window(panel)  # noqa: F841 - kept alive for the run
    paints = PaintCounter()
    if os.environ.get("PAINTS", "1") != "0":
        app.installEventFilter(paints)
    seconds = float(os.environ.get("SECONDS", "10"))
    panel.tabs.setCurrentIndex(tab)
    if len(sys.argv) > 3 and sys.argv[3] == "nofollow":
        panel.log_console.follow.setChecked(False)
    st = {"i": 0, "t0": time.monotonic()}

    def feed() -> None:
        lines = []
        for _ in range(int((time.monotonic() - st["t0"]) * rate) - st["i"]):
            i = st["i"] = st["i"] + 1
            panel._on_bridge_request_finished(panel.slot, RequestRecord(
                time_unix=time.time(), slot=i % 4, task=i, cache_n=0, prompt_n=5, prompt_ms=12.3,
                prompt_per_second=400.0, predicted_n=4, predicted_ms=60.0, predicted_per_second=50.0, ttft_ms=14.0,
                latency_ms=80.0))
            lines += [LogLine("info", f"slot print_timing: id {i % 4} | task {i} | line {k}") for k in range(7)]
        if lines:
            panel._on_bridge_log_lines_received(panel.slot, lines)

    timer = QTimer()
    timer.timeout.connect(feed)
    timer.start(interval)
    QTimer.singleShot(2000, lambda: (paints.counts.clear(), st.update(c0=time.thread_time())))
    QTimer.singleShot(int(1000 * (2 + seconds)), app.quit)
    app.exec()
    gui = 100 * (time.thread_time() - st["c0"]) / seconds
    print(f"tab {tab} interval {interval} rate {rate:.0f}/s gui cpu {gui:.2f}% paints per {seconds:.0f} s "
          f"{sorted(paints.counts.items(), key=lambda x: -x[1])[:8]}")
    panel.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
