"""Run blocking work off the GUI thread with progress and cancel, results delivered as Signals.

    job = BackgroundJob(lambda ctl: scan(ctl.progress, ctl.cancelled), what="Scanning the model folders")
    job.succeeded.connect(self._on_scan_succeeded)
    job.start()

The function receives a `JobControl`; it calls `ctl.progress(fraction, text)` and checks
`ctl.cancelled()`. A job cannot be made without its failure path: `what` (required) names it in the user's
words, and an exception it raises goes to the app's error surface (qt.errors: logged once, listed, said in the
status bar). A view that shows the failure in its own place passes `on_failed` (it gets the exception object,
and the status bar stays quiet); `failed` is emitted either way, for a view that only needs to reset itself.

A job whose parent is deleted (its window closed) tells no one its outcome, and work that asks
`cancelled()` is told to stop (`JobControl.orphaned`); a job still queued runs all the same (a save must
land). Work on a pool thread that reports to a view uses `emit_later`, which drops the signal once the view
is gone.

Two pools of Python threads (concurrent.futures): short queries (a History load, a file's header) run on
`short_pool()`; long jobs (a benchmark, a folder scan, a llama.cpp check) start with `start(long=True)` on
`long_pool()`, so a short query never queues behind a benchmark that holds a thread for minutes. Not Qt's
QThreadPool: on CI a job queued there was left unstarted three times, every pool thread idle (the leak check's
stack dump), on Qt's global pool and on a pool of ours alike. A caller that needs Qt's ordering on its own
QThreadPool (the Profile tab's one-thread store pool) still passes it to `start`.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from llm_tuner.qt.errors import on_app_thread, report_failure

log = logging.getLogger(__name__)
LONG_POOL_THREADS = 4
_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _executor(name: str, threads: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:  # its threads are not "ours" to the tests' leak check: they wait for work, idle
            pool = _pools[name] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        return pool


def long_pool() -> ThreadPoolExecutor:
    """The pool of long jobs (benchmarks, scans, llama.cpp checks)."""
    return _executor("jobs-long", LONG_POOL_THREADS)


def short_pool() -> ThreadPoolExecutor:
    """The pool of short queries (SQL, a file's header, a binary's --help): at least 4 threads, so one slow
    query (a knob proposal runs the binary twice) does not hold the others up on a 2-core machine."""
    return _executor("jobs-short", max(4, os.cpu_count() or 1))


class _Relay(QObject):
    """Carries a job's signals (or any QObject's: `emit_later`) from the pool thread to the application's
    thread, where each is emitted only if the object still exists. Emitting the job's own signal from the pool
    thread raced with its deletion on the GUI thread (a job parented to a widget closed as the job ended): CI
    crashed there once, a segfault in the emit while the GUI thread was deleting widgets. Deleting and
    checking on one thread leaves no such window. The relay lives as long as the process."""

    post = Signal(object)  # (the object, the signal's name, its arguments)

    def __init__(self) -> None:
        super().__init__()
        self.post.connect(self._deliver)  # queued: the relay lives on the application's thread

    def _deliver(self, item: tuple[QObject, str, tuple[Any, ...]]) -> None:
        obj, name, args = item
        if shiboken6.isValid(obj):  # it (or its parent) was not deleted meanwhile
            getattr(obj, name).emit(*args)


_relay: _Relay | None = None
_relay_lock = threading.Lock()


def _ensure_relay() -> _Relay:
    """The relay, on the application's thread: made when the first job is made on the GUI thread, before any
    pool thread could ask for it."""
    global _relay
    with _relay_lock:
        if _relay is None:
            _relay = _Relay()
            on_app_thread(_relay)
        return _relay


def emit_later(obj: QObject, name: str, *args: Any) -> None:
    """Emit `obj`'s signal `name` on the application's thread, unless `obj` is deleted by then (see _Relay).
    Any thread may call it: a job's function reports through it to an object the user may close meanwhile."""
    _ensure_relay().post.emit((obj, name, args))


class JobControl:
    """Handed to the job function: report progress, ask whether the user cancelled."""

    def __init__(self, job: BackgroundJob) -> None:
        self._job = job
        self._cancel = threading.Event()
        self._orphaned = threading.Event()  # set with the cancel event when the job's parent is deleted

    def progress(self, fraction: float | None, text: str = "") -> None:
        emit_later(self._job, "progressed", -1.0 if fraction is None else float(fraction), text)

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        return self._cancel

    @property
    def orphaned(self) -> bool:
        """The job's parent was deleted (its window closed): no one hears its outcome, so work that asks
        `cancelled()` is told to stop (a scan, a download, a header reader, a runner's server). A job still
        queued runs all the same: a write the user asked for (a save as the window closes) must land."""
        return self._orphaned.is_set()


def _orphan(cancel: threading.Event, orphaned: threading.Event) -> None:
    """A job's `destroyed` slot: holds its two events only (a slot that held the job or its control kept a
    cycle through the C++ connection that Python's collector cannot see, and every parentless job leaked)."""
    orphaned.set()
    cancel.set()


def _run(job: BackgroundJob) -> None:
    """A job's function on a pool thread; its outcome as the job's signals (queued to its thread)."""
    job.entered, job.entered_at = threading.current_thread().name, time.monotonic()
    try:
        result = job._fn(job.control)
    except BaseException as exc:  # noqa: BLE001 - reported, and delivered to the GUI thread as a signal
        if job.control.orphaned:  # its window is gone: the log keeps it (a save that failed as the app quit)
            log.warning("%s failed after its window closed: %s", job.what, exc)
        elif not job.control.cancelled():  # a cancelled job's way out is no failure
            report_failure(job.what, exc, shown=job.shown_in_place)
        emit_later(job, "failed", exc)
    else:
        if job.control.cancelled():
            emit_later(job, "cancelled")
        else:
            emit_later(job, "succeeded", result)
    finally:
        job.left = True
        BackgroundJob._running.pop(id(job), None)
        emit_later(job, "finished")


class _Runnable(QRunnable):
    """A job on a QThreadPool a caller gives (the Profile tab's one-thread store pool)."""

    def __init__(self, job: BackgroundJob) -> None:
        super().__init__()
        self._job = job
        self.setAutoDelete(True)

    def run(self) -> None:  # Qt override
        _run(self._job)


class BackgroundJob(QObject):
    """One unit of background work, made on the GUI thread. Its signals are emitted there (through _Relay),
    and not at all once it is deleted (with its parent)."""

    progressed = Signal(float, str)
    succeeded = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    finished = Signal()

    # Keyed by id(): a wrapper whose C++ object is gone cannot be hashed reliably.
    _live: dict[int, BackgroundJob] = {}  # keeps Python wrappers alive until `finished` is delivered
    _running: dict[int, BackgroundJob] = {}  # queued or running: the function has not returned yet
    _serials = itertools.count(1)

    def __init__(self, fn: Callable[[JobControl], Any], parent: QObject | None = None, *, what: str,
                 on_failed: Callable[[BaseException], Any] | None = None) -> None:
        """`what`: the job in the user's words ("Loading the benchmark history"), what its failure says;
        `on_failed`: the view shows the failure itself (connected to `failed`; the status bar stays quiet)."""
        super().__init__(parent)
        if not what.strip():
            raise ValueError("a background job needs `what`: the words its failure is reported with")
        self._fn = fn
        self.what = what
        self.shown_in_place = on_failed is not None
        if on_failed is not None:
            self.failed.connect(on_failed)
        self.control = JobControl(self)
        _ensure_relay()  # here, on the GUI thread, before a pool thread needs it
        self.is_finished = False  # `finished` was delivered here: a caller that connects late can still ask
        self.entered = ""  # the thread that called its function ("": not called yet)
        self.entered_at = 0.0  # when (time.monotonic()): one long job told from a chain of short ones
        self.serial = next(BackgroundJob._serials)  # unlike id(), never reused by a later job
        self.made_at = time.monotonic()  # a leak report tells a job queued long from one made late
        self.left = False  # its function's outcome was handled (`_run`'s finally)
        self._future: Future[None] | None = None  # on our pools: what the executor says of it
        self.finished.connect(self._on_self_finished)
        # A parent deleted before `finished` arrives takes this object with it: stop keeping the wrapper, and
        # tell the work no one hears its outcome (JobControl.orphaned).
        self.destroyed.connect(functools.partial(BackgroundJob._live.pop, id(self), None))
        self.destroyed.connect(functools.partial(_orphan, self.control.cancel_event, self.control._orphaned))

    def start(self, pool: QThreadPool | None = None, *, long: bool = False) -> BackgroundJob:
        """Queue the job on `pool`, else on `long_pool()` when `long`, else on `short_pool()`."""
        BackgroundJob._live[id(self)] = BackgroundJob._running[id(self)] = self
        try:
            if pool is not None:
                pool.start(_Runnable(self))
            else:
                self._future = (long_pool() if long else short_pool()).submit(_run, self)
        except BaseException:
            BackgroundJob._running.pop(id(self), None)  # not queued: nothing will ever end it
            BackgroundJob._live.pop(id(self), None)
            raise
        return self

    @classmethod
    def live_jobs(cls) -> list[BackgroundJob]:
        """Jobs whose function is queued or running (for shutdown and the tests' leak check). A job its
        executor reports done is not one, whatever the bookkeeping says (CI once listed a job here with every
        pool thread idle and nothing queued: see `describe`)."""
        out = []
        for job in list(cls._running.values()):
            if job._future is not None and job._future.done():
                cls._running.pop(id(job), None)
            else:
                out.append(job)
        return out

    def describe(self) -> str:
        """The job's function as `module.qualname`, its `what` and where it stands (a leak report's line)."""
        fn = self._fn
        f = self._future
        where = ("on a caller's QThreadPool" if f is None else "running" if f.running()
                 else "done" if f.done() else "queued on its executor")
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        left = ", left" if self.left else ", not left"
        since = f" {time.monotonic() - self.entered_at:.1f} s ago" if self.entered else ""
        entered = f"entered on {self.entered}{since}{left}" if self.entered else "never entered"
        made = f"made {time.monotonic() - self.made_at:.1f} s ago"
        return f"{name} #{self.serial}, {made} ({self.what}; {where}, its function {entered})"

    def cancel(self) -> None:
        self.control.cancel_event.set()

    def _on_self_finished(self) -> None:
        self.is_finished = True
        BackgroundJob._live.pop(id(self), None)
        if self.parent() is not None:  # done: a long-lived owner (a session, the scan) would keep one per run
            self.deleteLater()  # after this emission's other slots; its Python attributes stay readable


def state_run(parent: QObject, what: str) -> Callable[[Callable[[], Any], Callable[[Any], None],
                                                       Callable[[BaseException], None]], None]:
    """A Qt-free state's `Run` (llm_tuner.state.callbacks) as BackgroundJobs of `parent`: the work off the GUI
    thread, its answer or failure back on it. `what`: the work in the user's words. A failure is the view's to
    say (its state's `failed`) when `parent` is on screen as the job starts; a view in a tab the user is not
    looking at leaves it to the status bar too."""

    def run(
        work: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[BaseException], None]
    ) -> None:
        # the view was closed: no one to answer (a signal of the app's state can still reach a Qt-free state
        # whose view is gone)
        if not shiboken6.isValid(parent):
            return
        job = BackgroundJob(lambda _c: work(), parent, what=what, on_failed=failed)
        job.shown_in_place = bool(parent.property("visible"))  # Q_PROPERTY; None for a QObject
        job.succeeded.connect(done)
        job.start()

    return run
