"""A router's Load and Unload off the GUI thread: services.router_watch's HTTP calls as background jobs whose
outcome comes back as one signal (Live's Models tab shows it in its own place)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.router_watch import load_model, unload_model

LOAD_WAIT_S = 1800.0  # how long a Load follows the model's state (a large model from a slow disk: minutes)


class RouterActions(QObject):
    """Load or unload one model of a router. `done` says (model, action, error or None) on the owner's thread;
    `loaded` (model, seconds) when a Load saw its model loaded (its load time, measured to a tenth of a
    second)."""

    done = Signal(str, str, object)
    loaded = Signal(str, float)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs: list[BackgroundJob] = []

    def load(self, url: str, name: str, api_key: str | None = None) -> BackgroundJob:
        return self._start(
            "load",
            name,
            lambda ctl: load_model(url, name, api_key, wait_s=LOAD_WAIT_S, cancelled=ctl.cancelled),
        )

    def unload(self, url: str, name: str, api_key: str | None = None) -> BackgroundJob:
        return self._start("unload", name, lambda _ctl: unload_model(url, name, api_key))

    def cancel(self) -> None:
        """Stop following loads (the server is going, or the view is)."""
        for job in self.jobs:
            job.cancel()

    def _start(self, action: str, name: str, fn) -> BackgroundJob:
        job = BackgroundJob(
            fn,
            self,
            what=f"Asking the router to {action} {name}",
            on_failed=lambda exc: self.done.emit(name, action, str(exc)),
        )
        job.succeeded.connect(lambda seconds: self._on_job_succeeded(name, action, seconds))
        job.finished.connect(lambda: self.jobs.remove(job) if job in self.jobs else None)
        self.jobs.append(job)
        return job.start(long=action == "load")

    def _on_job_succeeded(self, name: str, action: str, seconds) -> None:
        if seconds is not None:
            self.loaded.emit(name, float(seconds))
        self.done.emit(name, action, None)
