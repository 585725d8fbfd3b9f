"""Python's cycle collector, run on the GUI thread only.

The collector runs in whichever thread happens to allocate. When it frees a cycle holding Qt objects in a
background job's thread, their C++ destructors run there, outside the GUI thread; this deadlocked (seen in
the tests: a job thread in `QObject::~QObject` waiting for the GIL while the GUI thread waited for Qt's
connection lock). So automatic collection is switched off and a timer collects on the GUI thread, as
pyqtgraph recommends (`pyqtgraph.util.garbage_collector`). Reference counting, which frees almost
everything, is unaffected.

A full collection walks every tracked object: ~150,000 once the window is built (Qt wrappers, pyqtgraph,
modules), ~90 ms of the GUI thread every ~100 s under a busy server (the Live panel's worst lags, issue 26).
With `freeze_after_ms` the objects alive that long after start-up (the window, its panels, the modules: they
live as long as the app) are moved out of the collector's sight once (`gc.freeze`); later collections walk
only what was made since.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


class GuiThreadCollector(QObject):
    """Install once, from the GUI thread, before any background job starts."""

    def __init__(self, interval_ms: int = 1000, parent: QObject | None = None, *,
                 freeze_after_ms: int | None = None) -> None:
        super().__init__(parent)
        self._threshold = gc.get_threshold()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(interval_ms)
        self.frozen = False
        if freeze_after_ms is not None:
            QTimer.singleShot(freeze_after_ms, self, self.freeze)

    def freeze(self) -> None:
        """Collect once, then keep what is left (the app's start-up objects) out of later collections."""
        if not self.frozen:
            self.frozen = True
            gc.collect()
            gc.freeze()

    def collect(self) -> None:
        """Collect the generations whose allocation counts passed Python's own thresholds."""
        counts = gc.get_count()
        generation = -1
        for g in range(3):
            if counts[g] > self._threshold[g]:
                generation = g
            else:
                break
        if generation >= 0:
            gc.collect(generation)
