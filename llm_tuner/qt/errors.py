"""The app's one error surface: every failure the user should hear of ends here, and is logged once.

What reports here: a background job that raised (qt.workers.BackgroundJob cannot be made without saying what
it does, so its failure always has words), the threads that start and stop servers (qt.server_bridge), and
every exception nobody caught (`sys.excepthook`, `threading.excepthook`, installed by `install_hooks`).

`report` logs the failure once with its traceback, keeps it in a bounded list the user can open again (the
main window's Errors list, with "Copy details"), and emits `reported` (queued to the GUI thread). The main
window says what happened and what to do in the status bar, and opens a dialog only when the user must act (a
full disk). A view that shows a failure in its own place (the Chat's error line, the Plan check's label)
reports it with `shown=True`: logged and listed, not said a second time in the status bar.

napari's notification manager and superqt's WorkerBase were the models. QtCore only: the window draws it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QObject, Signal

from llm_tuner.core.units import first_line
from llm_tuner.services.settings_store import DataFolderUnusable
from llm_tuner.store.db import StorageFullError

log = logging.getLogger(__name__)

KEEP = 200  # the newest failures the Errors list keeps (the log keeps every one)
DEFAULT_ADVICE = "Try again; if it happens again, open Help ▸ Errors, copy the details and report them."


@dataclass(frozen=True)
class Failure:
    """One failure as the user reads it: what was being done, what went wrong, what to do; the traceback for
    "Copy details"."""

    what: str  # what was being done, in the user's words: "Loading the benchmark history"
    message: str  # the exception in one line
    advice: str  # what to do about it
    details: str  # the traceback (or the exception alone)
    time_unix: float
    shown: bool = False  # the view said it already, in its own place
    needs_action: bool = False  # the user must act (free disk space): a dialog, not only the status bar

    def summary(self) -> str:
        """The status bar's line: what failed, why, and what to do."""
        return f"{self.what} failed: {self.message}. {self.advice}"

    def details_text(self) -> str:
        """What "Copy details" copies: when, the summary and the traceback."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time_unix))
        return f"{when} {self.summary()}\n{self.details}".rstrip() + "\n"


def advice_for(exc: BaseException) -> tuple[str, bool]:
    """What to do about `exc`, and whether the user must act before going on (a dialog)."""
    if isinstance(exc, DataFolderUnusable):  # the history is not where the user keeps it: a dialog
        return ("Connect the drive that holds it and restart, or choose another folder in File ▸ "
                "Settings."), True
    if isinstance(exc, StorageFullError) or (isinstance(exc, OSError) and exc.errno == 28):
        return "Free some disk space (the history database's folder is in Settings), then try again.", True
    text = str(exc).lower()
    # sqlite3's, or SQLAlchemy's wrapping of it
    if "database is locked" in text or "database is busy" in text:
        return ("Another program may hold the history database (a benchmark or tune in another window): "
                "wait for it, then try again."), False
    if isinstance(exc, PermissionError):
        return "Check that you may read and write that file or folder, then try again.", False
    return DEFAULT_ADVICE, False


def _one_line(exc: BaseException) -> str:
    """The first line of the message; after the exception's type for a library's or Python's (the type says
    what kind of failure), without it for ours (their words are written for the user)."""
    line = first_line(exc)
    if not str(exc).strip() or type(exc).__module__.startswith("llm_tuner."):
        return line
    return f"{type(exc).__name__}: {line}"


class ErrorCenter(QObject):
    """The failures so far (newest last, at most KEEP) and a signal for each new one."""

    reported = Signal(object)  # Failure
    cleared = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lock = threading.Lock()
        self._failures: deque[Failure] = deque(maxlen=KEEP)

    def report(self, what: str, exc: BaseException, *, advice: str | None = None, shown: bool = False,
               tb=None) -> Failure:
        """Keep, log (once, with the traceback) and announce a failure; any thread may call it."""
        default_advice, needs_action = advice_for(exc)
        trace = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
        failure = Failure(what=what, message=_one_line(exc), advice=advice or default_advice, details=trace,
                          time_unix=time.time(), shown=shown, needs_action=needs_action)
        log.error("%s failed: %s\n%s", what, failure.message, trace.rstrip())  # logged before it is listed
        with self._lock:
            self._failures.append(failure)
        try:
            self.reported.emit(failure)
        except RuntimeError:  # the application is going away (its C++ side deleted): the log has it
            pass
        return failure

    def failures(self) -> list[Failure]:
        with self._lock:
            return list(self._failures)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
        self.cleared.emit()


_center: ErrorCenter | None = None
_center_lock = threading.Lock()


def on_app_thread(obj: QObject) -> None:
    """Move a process-lifetime QObject just made to the application's thread (where its queued slots run),
    if an application exists and it is not there already."""
    app = QCoreApplication.instance()
    if app is not None and obj.thread() is not app.thread():
        obj.moveToThread(app.thread())


def error_center() -> ErrorCenter:
    """The app's one ErrorCenter (made on first use; it lives on the application's thread)."""
    global _center
    with _center_lock:
        if _center is None:
            _center = ErrorCenter()
            on_app_thread(_center)
        return _center


def report_failure(what: str, exc: BaseException, **kw) -> Failure:
    """`error_center().report(...)`: the one way a failure reaches the user."""
    return error_center().report(what, exc, **kw)


def install_hooks(*, fatal: bool = False) -> None:
    """Uncaught exceptions of the GUI thread (`sys.excepthook`) and of any other thread
    (`threading.excepthook`) go to the error center. `fatal` (a smoke test: nobody can read a status bar)
    writes them to stderr and ends the process with exit code 3."""
    def on_uncaught(exc_type, exc, tb, where: str) -> None:
        if exc is None or isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return
        report_failure(where, exc, tb=tb)
        if fatal:
            sys.stderr.write("".join(traceback.format_exception(exc_type, exc, tb)))
            sys.stderr.flush()
            os._exit(3)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "a background thread"
        on_uncaught(args.exc_type, args.exc_value, args.exc_traceback, f"A background task ({name})")

    sys.excepthook = lambda t, e, tb: on_uncaught(t, e, tb, "An action")
    threading.excepthook = thread_hook
    error_center()
