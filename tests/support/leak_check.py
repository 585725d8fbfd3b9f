"""The tests' leak check (used by the autouse `no_leaks` fixture in tests/conftest.py), after napari's
`dangling_qthreads`, `dangling_qthread_pool` and `dangling_qtimers`.

A test leaks when, after its teardown (widgets closed by pytest-qt, cycles collected) and a grace period
for work that is already stopping, any of these is still alive:
- a Python thread our code started: named with the services' prefix (`llm-tuner:`), or running a function
  of the `llm_tuner` package (threads started by the test itself or by libraries are not ours);
- a BackgroundJob (queued or running, on any pool);
- a QTimer that code in `llm_tuner` started and that is still active (app-lifetime timers, those owned by the
  QApplication, excepted);
- a top-level widget that is still shown, or one of our classes that was never deleted.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import weakref
from pathlib import Path

import pytest

PACKAGE_DIR = str(Path(__file__).resolve().parents[2] / "llm_tuner")
THREAD_PREFIX = "llm-tuner"  # services name their threads "llm-tuner:..." (see services/telemetry/sampler.py)
# Threads that live as long as the process by design, with why.
APP_LIFETIME_THREADS = {
    "llm-tuner-spawner": "services.process._Spawner: one thread performs every Popen, so that the children's "
                         "PR_SET_PDEATHSIG (tied to the spawning thread) fires only when the app exits",
}
# How long a test's own threads and background jobs may take to end after it (the check stops waiting as soon as
# they have): a server asked to stop gets SIGINT, then SIGTERM after a few seconds; a view's job started by the
# test's last action (the Tune tab's knob proposal runs the binary twice) took over 10 s beside a busy core and a
# llama.cpp build. A job that never ends still fails, after this.
GRACE_S = 60.0


def _thread_is_ours(t: threading.Thread) -> bool:
    if t.name in APP_LIFETIME_THREADS:
        return False
    if t.name.startswith(THREAD_PREFIX):
        return True
    target = getattr(t, "_target", None)  # set while the thread runs (threading deletes it at the end)
    module = getattr(target, "__module__", None) or ""
    return module == "llm_tuner" or module.startswith("llm_tuner.")


def _our_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads of ours alive now that were not before. Compared as Thread objects, not idents: a thread that
    ends during the test frees its ident for the next one started (CI once missed a sampler thread so)."""
    return [t for t in threading.enumerate() if t.is_alive() and t not in before and _thread_is_ours(t)]


def _describe_thread(t: threading.Thread) -> str:
    target = getattr(t, "_target", None)
    where = f" running {target.__module__}.{getattr(target, '__qualname__', target)}" if target else ""
    return f"thread {t.name!r}{where}"


def _live_jobs() -> list:
    workers = sys.modules.get("llm_tuner.qt.workers")
    return workers.BackgroundJob.live_jobs() if workers is not None else []


def _qt_modules():
    """QtCore and QtWidgets once the test process has imported them (a pure unit test does not)."""
    core = sys.modules.get("PySide6.QtCore")
    widgets = sys.modules.get("PySide6.QtWidgets")
    return core, widgets


def _process_events(core) -> None:
    if core is None or core.QCoreApplication.instance() is None:
        return
    core.QCoreApplication.processEvents()
    core.QCoreApplication.sendPostedEvents(None, core.QEvent.Type.DeferredDelete)


def _owned_by_app(obj, app) -> bool:
    try:
        while obj is not None:
            if obj is app:
                return True
            obj = obj.parent()
    except RuntimeError:  # deleted on the way up
        return False
    return False


class _TimerWatch:
    """Wraps QTimer.start for one test: remembers the timers that code in `llm_tuner` started, and where."""

    def __init__(self, monkeypatch, core) -> None:
        self.started: list[tuple[weakref.ref, str]] = []
        original = core.QTimer.start
        watch = self

        def start(timer, *args, **kwargs):
            stack = traceback.extract_stack(limit=12)[:-1]
            ours = [f for f in stack if f.filename.startswith(PACKAGE_DIR)]
            if ours:
                f = ours[-1]
                watch.started.append((weakref.ref(timer), f"{Path(f.filename).name}:{f.lineno} {f.name}()"))
            return original(timer, *args, **kwargs)

        monkeypatch.setattr(core.QTimer, "start", start)

    def active(self, app) -> list:
        out = []
        for ref, where in self.started:
            timer = ref()
            try:
                if timer is not None and timer.isActive() and not _owned_by_app(timer, app):
                    out.append((timer, where))
            except RuntimeError:  # its C++ object was deleted with its parent: not a leak
                pass
        return out


def _new_top_levels(widgets, before: set[int]) -> list:
    app = widgets.QApplication.instance()
    if app is None:
        return []
    out = []
    for w in widgets.QApplication.topLevelWidgets():
        if id(w) in before:
            continue
        if w.isVisible() or type(w).__module__.startswith("llm_tuner"):
            out.append(w)
    return out


def watch(monkeypatch, grace_s: float = GRACE_S):
    """Generator for the fixture: snapshot, yield to the test, then check, clean up and fail on a leak."""
    core, widgets = _qt_modules()
    if core is None:
        from PySide6 import QtCore as core  # noqa: N813 - the timer watch needs the class now

    threads_before = set(threading.enumerate())
    jobs_before = set(map(id, _live_jobs()))
    timers = _TimerWatch(monkeypatch, core)
    widgets = sys.modules.get("PySide6.QtWidgets")
    tops_before = set()
    held = []  # the wrappers stay alive while the check runs: a freed one's id() could be a new widget's
    if widgets is not None and widgets.QApplication.instance() is not None:
        held = list(widgets.QApplication.topLevelWidgets())
        tops_before = {id(w) for w in held}

    yield

    widgets = sys.modules.get("PySide6.QtWidgets")
    app = core.QCoreApplication.instance()

    def leaks():
        found = [_describe_thread(t) for t in _our_threads(threads_before)]
        found += [f"background job {j.describe()}" for j in _live_jobs() if id(j) not in jobs_before]
        found += [f"active QTimer started at {where}" for _t, where in timers.active(app)]
        if widgets is not None:
            found += [f"top-level widget {type(w).__name__} {w.windowTitle()!r}"
                      + (" (shown)" if w.isVisible() else " (not deleted)")
                      for w in _new_top_levels(widgets, tops_before)]
        return found

    _process_events(core)
    found = leaks()
    deadline = time.monotonic() + grace_s
    seen: dict[int, str] = {}  # every job live during the grace: one long job, or a chain of short ones?
    while found and time.monotonic() < deadline:
        # Timers and widgets do not go away by waiting: only threads and jobs get the grace period.
        new_jobs = [j for j in _live_jobs() if id(j) not in jobs_before]
        seen.update((j.serial, j.what) for j in new_jobs)  # a serial: id() is reused by the next job
        if not _our_threads(threads_before) and not new_jobs:
            break
        time.sleep(0.02)
        _process_events(core)
        found = leaks()
    if not found:
        return
    if len(seen) > 1:
        found.append(f"({len(seen)} jobs were live during the {grace_s:.0f}-s grace: "
                     f"{', '.join(sorted(set(seen.values())))})")
    stacks = _thread_stacks() if any(f.startswith(("thread", "background job")) for f in found) else ""
    # Clean up what leaked so the next test starts clean, then fail this one.
    for timer, _where in timers.active(app):
        timer.stop()
    for job in _live_jobs():
        if id(job) not in jobs_before:
            job.cancel()
    if widgets is not None:
        for w in _new_top_levels(widgets, tops_before):
            w.close()
            w.deleteLater()
        _process_events(core)
    pytest.fail("the test left these alive:\n  " + "\n  ".join(found) + stacks, pytrace=False)


def _thread_stacks() -> str:
    """Where every thread is now, this one included (a job queued or stuck past the grace: which line it waits
    on, or what holds the pool's threads), innermost frames last."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            frame = frame.f_back  # this thread too (a job its executor says runs may be below us), less this call
        lines = traceback.format_stack(frame, limit=12)
        out.append(f"\n--- thread {names.get(ident, ident)!r}:\n" + "".join(lines).rstrip())
    return "\n\nThe other threads now:" + "".join(out) if out else ""
