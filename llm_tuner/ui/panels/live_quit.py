"""Quitting while servers run: every stop runs on its own thread at once (in parallel), and the GUI thread
only waits in an event loop under a small dialog that names what is still stopping (Vorta's stop at quit,
superqt's `await_workers`). The GUI thread makes no store, process-wait or HTTP call meanwhile: it looks at
Events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QEventLoop, Qt, QTimer
from PySide6.QtWidgets import QDialog, QLabel, QVBoxLayout, QWidget

# how often the dialog looks at what is left (the close follows the slowest exit by at most this)
POLL_MS = 50


class StoppingDialog(QDialog):
    """"Stopping: server 1 (port 8080), server 2 (port 8081)…": what quitting still waits for."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("stopping_dialog")
        self.setWindowTitle("llm-tuner: quitting")
        self.setWindowModality(Qt.WindowModality.ApplicationModal)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setMinimumWidth(360)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)

    def show_left(self, names: Sequence[str]) -> None:
        self.label.setText("Stopping before quitting:\n" + "\n".join(f"• {n}" for n in names))


def in_thread(fn: Callable[[], object], name: str) -> threading.Event:
    """Run `fn` on a daemon thread named `name`; the Event is set when it returned (or raised: the thread's
    exception goes to threading.excepthook, the app's error surface)."""
    done = threading.Event()

    def run() -> None:
        try:
            fn()
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def await_stops(stops: Sequence[tuple[str, threading.Event]], *, timeout_s: float,
                parent: QWidget | None = None) -> list[str]:
    """Wait until every stop's Event is set, or `timeout_s`, in a local event loop (the GUI thread keeps
    painting) with the dialog naming those still stopping. Returns the names that had not stopped by then."""
    pending = [(name, ev) for name, ev in stops if not ev.is_set()]
    if not pending:
        return []
    dialog = StoppingDialog(parent)
    loop = QEventLoop()
    deadline = time.monotonic() + timeout_s

    def left() -> list[str]:
        return [name for name, ev in pending if not ev.is_set()]

    def look() -> None:
        names = left()
        if not names or time.monotonic() >= deadline:
            loop.quit()
        elif dialog.label.text().count("•") != len(names):
            dialog.show_left(names)

    timer = QTimer()
    timer.setInterval(POLL_MS)
    timer.timeout.connect(look)
    dialog.show_left(left())
    dialog.show()
    timer.start()
    loop.exec()
    timer.stop()
    dialog.hide()
    dialog.deleteLater()
    return left()
