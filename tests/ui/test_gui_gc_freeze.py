"""Issue 26: a full collection walked every object of the app (~90 ms of the GUI thread under a busy server);
frozen after start-up, it walks only what was made since, and cycles made later are still collected."""

from __future__ import annotations

import gc
import weakref


def test_start_up_objects_are_frozen_and_later_cycles_still_collected(qtbot):
    from llm_tuner.qt.gui_gc import GuiThreadCollector

    class Node:
        pass

    before = len(gc.get_objects())
    collector = GuiThreadCollector(interval_ms=20, freeze_after_ms=10)
    try:
        qtbot.waitUntil(lambda: collector.frozen, timeout=3000)
        assert gc.get_freeze_count() > 0 and len(gc.get_objects()) < before / 2  # out of the collector's walk
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        keep = [Node() for _ in range(gc.get_threshold()[0] + 10)]  # allocations past generation 0's threshold
        qtbot.waitUntil(lambda: gone() is None, timeout=3000)
        assert keep
    finally:
        collector.deleteLater()
        gc.unfreeze()  # the other tests' objects back in the collector's sight
