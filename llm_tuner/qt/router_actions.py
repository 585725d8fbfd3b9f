"""A router's Load and Unload off the GUI thread: services.router_watch's HTTP calls as background jobs whose
outcome comes back as one signal (Live's Models tab shows it in its own place)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.router_watch import load_model, unload_model


class RouterActions(QObject):
    """Load or unload one model of a router; `done` says (model, action, error or None) on the owner's thread."""

    done = Signal(str, str, object)

    def load(self, url: str, name: str, api_key: str | None = None) -> BackgroundJob:
        return self._start("load", name, lambda _ctl: load_model(url, name, api_key))

    def unload(self, url: str, name: str, api_key: str | None = None) -> BackgroundJob:
        return self._start("unload", name, lambda _ctl: unload_model(url, name, api_key))

    def _start(self, action: str, name: str, fn) -> BackgroundJob:
        job = BackgroundJob(fn, self, what=f"Asking the router to {action} {name}",
                            on_failed=lambda exc: self.done.emit(name, action, str(exc)))
        job.succeeded.connect(lambda _r: self.done.emit(name, action, None))
        return job.start()
