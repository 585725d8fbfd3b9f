"""BackgroundJob: progress and results on the GUI thread, in order; failures and cancel as signals; no job
without the words its failure is reported with."""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QThread

from llm_tuner.qt.workers import BackgroundJob


def test_progress_and_result_arrive_on_the_gui_thread_in_order(qtbot):
    seen = []
    gui = QThread.currentThread()

    def work(ctl):
        for i in range(3):
            ctl.progress(i / 3, f"step {i}")
        return threading.current_thread().name

    job = BackgroundJob(work, what="Counting")
    job.progressed.connect(lambda f, t: seen.append((t, QThread.currentThread() is gui)))
    job.succeeded.connect(lambda r: seen.append(("done", QThread.currentThread() is gui)))
    with qtbot.waitSignal(job.finished, timeout=5000):
        job.start()
    assert seen == [("step 0", True), ("step 1", True), ("step 2", True), ("done", True)]
    assert id(job) not in BackgroundJob._live and job not in BackgroundJob.live_jobs()


def test_failure_and_cancel_are_signals(qtbot):
    job = BackgroundJob(lambda ctl: 1 / 0, what="Dividing", on_failed=lambda _exc: None)
    with qtbot.waitSignal(job.failed, timeout=5000) as blocker:
        job.start()
    assert isinstance(blocker.args[0], ZeroDivisionError)

    started = threading.Event()

    def slow(ctl):
        started.set()
        while not ctl.cancelled():
            time.sleep(0.01)

    job = BackgroundJob(slow, what="Waiting")
    with qtbot.waitSignal(job.cancelled, timeout=5000):
        job.start()
        started.wait(5)
        job.cancel()


def test_a_job_that_ends_before_anyone_listens_still_says_it_finished(qtbot):
    """A started job may emit `finished` before a caller connects to it (a busy GUI thread); `is_finished` is set
    when the signal is delivered, so a caller that came late can still wait on it."""
    ended = threading.Event()
    job = BackgroundJob(lambda _ctl: ended.set(), what="a job that ends at once").start()
    assert ended.wait(30)  # the function has returned; its `finished` is queued for this thread
    assert not job.is_finished  # not delivered yet: this thread has not run its event loop
    qtbot.waitUntil(lambda: job.is_finished, timeout=30_000)


STRESS = """
import shiboken6
from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtWidgets import QApplication

app = QApplication([])
from llm_tuner.qt.workers import BackgroundJob

told = []
for _round in range(300):
    parents = [QObject() for _ in range(20)]
    for parent in parents:
        job = BackgroundJob(lambda _ctl: None, parent, what="a job of a view that closes")
        job.succeeded.connect(told.append)
        job.start()
    for parent in parents:  # deleted on this thread while the pool threads end their jobs
        shiboken6.delete(parent)
    QCoreApplication.processEvents()
while BackgroundJob.live_jobs():
    QCoreApplication.processEvents()
QCoreApplication.processEvents()
print("told", len(told))
"""


def test_jobs_whose_parent_is_deleted_as_they_end_tell_no_one_and_do_not_crash(tmp_path):
    """Views close while their jobs end (a test's teardown, a dialog closed mid-load): the GUI thread deletes the
    jobs with their parents while pool threads hand over their outcomes. Emitting the job's signal from the pool
    thread crashed in that race (CI once; this script segfaulted in 4 runs of 4 before the relay); its own
    process, so a crash fails this test instead of ending the run."""
    import os
    import subprocess
    import sys

    script = tmp_path / "stress.py"
    script.write_text(STRESS)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240,
                          cwd=os.getcwd())
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "told 0"  # a deleted job tells no one


def test_a_job_cannot_be_made_without_its_failure_path():
    import pytest

    with pytest.raises(TypeError):
        BackgroundJob(lambda _ctl: None)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="needs `what`"):
        BackgroundJob(lambda _ctl: None, what=" ")


def test_a_short_query_does_not_queue_behind_long_jobs(qtbot):
    from llm_tuner.qt.workers import LONG_POOL_THREADS, long_pool, short_pool

    release = threading.Event()
    busy = LONG_POOL_THREADS  # every thread of the long jobs' pool holds a benchmark
    long_jobs = [BackgroundJob(lambda _ctl: release.wait(30), what="A benchmark").start(long=True) for _ in range(busy)]
    try:
        short = BackgroundJob(lambda _ctl: "history", what="Loading the history")
        with qtbot.waitSignal(short.succeeded, timeout=5000) as blocker:
            short.start()
        assert blocker.args == ["history"]
        assert long_pool() is not short_pool()
        assert all(j in BackgroundJob.live_jobs() for j in long_jobs)  # still running
        queued = BackgroundJob(lambda _ctl: None, what="Another benchmark").start(long=True)
        assert queued in BackgroundJob.live_jobs()
        assert queued.describe().endswith("(Another benchmark; queued on its executor, its function never entered)")
    finally:
        release.set()
        qtbot.waitUntil(lambda: not set(BackgroundJob.live_jobs()) & {*long_jobs, short, queued}, timeout=10_000)
    assert queued.entered.startswith("jobs-long_") and queued.left
    assert "; done, its function entered on jobs-long_" in queued.describe() and queued.describe().endswith(", left)")


def _a_cycle_is_collected_by_the_timer(qtbot) -> None:
    """A garbage cycle made now is freed by the running GuiThreadCollector's timer (gc is disabled)."""
    import gc
    import weakref

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    keep = [Node() for _ in range(gc.get_threshold()[0] + 10)]  # allocations past generation 0's threshold
    qtbot.waitUntil(lambda: gone() is None, timeout=3000)
    assert keep


def test_cycles_are_collected_by_the_gui_thread_timer_only(qtbot):
    import gc

    from llm_tuner.qt.gui_gc import GuiThreadCollector

    collector = GuiThreadCollector(interval_ms=20)
    assert not gc.isenabled()
    _a_cycle_is_collected_by_the_timer(qtbot)
    collector.deleteLater()


def test_start_up_objects_are_frozen_and_later_cycles_still_collected(qtbot):
    """Issue 26: a full collection walked every object of the app (~90 ms of the GUI thread under a busy
    server); frozen after start-up, it walks only what was made since, and cycles made later are still freed."""
    import gc

    from llm_tuner.qt.gui_gc import GuiThreadCollector

    before = len(gc.get_objects())
    collector = GuiThreadCollector(interval_ms=20, freeze_after_ms=10)
    try:
        qtbot.waitUntil(lambda: collector.frozen, timeout=3000)
        assert gc.get_freeze_count() > 0 and len(gc.get_objects()) < before / 2  # out of the collector's walk
        _a_cycle_is_collected_by_the_timer(qtbot)
    finally:
        collector.deleteLater()
        gc.unfreeze()  # the other tests' objects back in the collector's sight


def test_a_job_deleted_with_its_parent_is_cancelled_and_tells_no_one(qtbot):
    """A view closed while its job runs: the job's function is told to stop (no one hears its outcome), and
    what it reports through `emit_later` to the closed view is dropped, not raised on the pool thread."""
    import shiboken6
    from PySide6.QtCore import QObject, Signal

    from llm_tuner.qt.workers import emit_later

    class View(QObject):
        said = Signal(str)

    view = View()
    heard: list[str] = []
    view.said.connect(heard.append)
    started, stop_seen, reported = threading.Event(), threading.Event(), threading.Event()

    def work(ctl) -> None:
        started.set()
        while not ctl.cancelled():
            time.sleep(0.01)
        stop_seen.set()
        emit_later(view, "said", "after the view was closed")  # would raise "Signal source has been deleted"
        reported.set()

    job = BackgroundJob(work, view, what="a job of a view that closes")
    job.start(long=True)
    assert started.wait(30)
    shiboken6.delete(view)
    assert stop_seen.wait(30)  # cancelled by the deletion: nothing else set it
    assert reported.wait(30)
    qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=30_000)
    qtbot.wait(50)  # the relay's queued deliveries
    assert heard == []


def test_a_folder_scan_of_a_closed_window_ends_quietly(qtbot, tmp_path, monkeypatch):
    """CI raised "Signal source has been deleted" at a test's teardown: a window's folder scan ended after the
    window (and its LibraryScan) was deleted. Now the scan stops and emits nothing."""
    import shiboken6

    from llm_tuner.qt import model_table

    entered, release = threading.Event(), threading.Event()
    real_find = model_table.find_models

    def slow_find(roots, **kw):  # the real listing, once the test has closed the scan's owner
        entered.set()
        release.wait(30)
        return real_find(roots, **kw)

    monkeypatch.setattr(model_table, "find_models", slow_find)
    (tmp_path / "broken.gguf").write_bytes(b"not a gguf")
    scanner = model_table.LibraryScan(None)
    told: list[object] = []
    for signal in (scanner.entries_listed, scanner.model_read, scanner.finished):
        signal.connect(told.append)
    scanner.start([tmp_path])
    assert entered.wait(30)
    shiboken6.delete(scanner)
    release.set()
    qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=30_000)
    qtbot.wait(50)
    assert told == []  # and pytest-qt saw no exception in the event loop


def test_a_finished_job_without_a_parent_is_freed(qtbot):
    """A parentless job (the start-up probe, a CLI helper) is collected once it has finished: the slot that
    orphans a job holds only its events, not the job (a slot holding the job kept a cycle through the C++
    connection that the collector cannot see)."""
    import gc
    import weakref

    ref = weakref.ref(BackgroundJob(lambda _c: None, what="a parentless job").start())
    qtbot.waitUntil(lambda: ref() is None or ref().is_finished, timeout=30_000)  # kept alive until `finished`
    gc.collect()
    assert ref() is None
    gc.collect()
    assert ref() is None


def test_a_job_queued_when_its_window_closes_still_runs(qtbot):
    """A save clicked as the window closes is queued behind other work when the window's widgets are deleted:
    it still runs (its outcome goes nowhere), while work that asks `cancelled()` is told to stop."""
    import shiboken6
    from PySide6.QtCore import QObject

    from llm_tuner.qt.workers import LONG_POOL_THREADS

    release = threading.Event()
    holders = [BackgroundJob(lambda _c: release.wait(30), what="a long job holding a thread").start(long=True)
               for _ in range(LONG_POOL_THREADS)]
    view = QObject()
    saved, told_to_stop = threading.Event(), []

    def save(ctl) -> None:
        told_to_stop.append(ctl.cancelled())
        saved.set()

    BackgroundJob(save, view, what="saving the profile").start(long=True)
    shiboken6.delete(view)
    release.set()
    assert saved.wait(30)
    assert told_to_stop == [True]
    qtbot.waitUntil(lambda: all(h.is_finished for h in holders) and not BackgroundJob.live_jobs(), timeout=30_000)


def test_a_finished_job_with_a_parent_is_deleted_not_kept_by_its_owner(qtbot):
    """A session or a scan lives as long as the window and starts a job per run: each is deleted once it has
    said `finished` (its slots ran first), so they do not pile up under the owner."""
    from PySide6.QtCore import QObject

    owner = QObject()
    heard: list[str] = []
    for i in range(3):
        job = BackgroundJob(lambda _c, i=i: i, owner, what="a run of a long-lived session")
        job.succeeded.connect(lambda r: heard.append(f"succeeded {r}"))
        job.finished.connect(lambda: heard.append("finished"))
        job.start()
        qtbot.waitUntil(lambda j=job: j.is_finished, timeout=30_000)
    qtbot.waitUntil(lambda: not owner.findChildren(BackgroundJob), timeout=30_000)
    assert heard == ["succeeded 0", "finished", "succeeded 1", "finished", "succeeded 2", "finished"]
