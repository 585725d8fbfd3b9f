"""Get models off the GUI thread: each listed model's header read over range requests and planned, and a
download with progress (at most ~10 updates a second) and cancel.

`RemotePlans.model_read(generation, index, ModelInfo, MemoryPlan | None)` arrives on the GUI thread for each
model of the last `start()`; results of an older listing carry an older generation and are dropped by the
receiver. A download is a plain `BackgroundJob` on the long pool: `progressed(fraction, text)`,
`succeeded(path)`, and `failed(exc)`, where a `DownloadCancelled` is the user's cancel (the partial file is
kept for the next try).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from llm_tuner.core.hub_files import RemoteModel
from llm_tuner.qt.workers import BackgroundJob, JobControl, emit_later
from llm_tuner.services.hub import DownloadProgress, Hub, default_plan, download_model, read_remote_model

PROGRESS_INTERVAL_S = 0.1


class RemotePlans(QObject):
    """Headers and plans of a repository's models, one after another on the long pool."""

    model_read = Signal(int, int, object, object)  # generation, index, ModelInfo, MemoryPlan | None

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.generation = 0
        self._job: BackgroundJob | None = None

    def start(self, hub: Hub, models: Sequence[RemoteModel], inventory: Any) -> int:
        """Read `models` (the previous reading is cancelled); returns this reading's generation."""
        self.cancel()
        self.generation += 1
        gen, models = self.generation, tuple(models)

        def run(ctl: JobControl) -> None:
            for i, model in enumerate(models):
                if ctl.cancelled():
                    return
                info = read_remote_model(hub, model)
                plan = None
                if info.error is None and not info.is_projector:
                    try:
                        plan = default_plan(info, inventory)
                    except Exception as exc:  # noqa: BLE001 - a header the plan cannot use is that row's reason
                        info = info.model_copy(update={"error": f"no memory plan: {exc}"})
                emit_later(self, "model_read", gen, i, info, plan)  # nothing, once the dialog is gone

        self._job = BackgroundJob(run, self, what="Reading the models' headers from the hub")
        self._job.start(long=True)
        return gen

    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None


def download_job(hub: Hub, model: RemoteModel, folder: Path, parent: QObject | None = None, *,
                 on_failed: Callable[[BaseException], Any]) -> BackgroundJob:
    """A download of `model` into `folder` as a job (not started; start it with `long=True`); `on_failed` says
    a failure where the download shows."""

    def run(ctl: JobControl) -> Path:
        last: list[Any] = [0.0, "", 0.0]  # when, phase, fraction of the last update sent

        def progress(p: DownloadProgress) -> None:
            # a step of a percent goes at once: the bytes before a stall (a slow CDN) are shown, not held back
            now = time.monotonic()
            if (now - last[0] >= PROGRESS_INTERVAL_S or p.phase != last[1] or p.done_bytes >= p.total_bytes
                    or p.fraction - last[2] >= 0.01):
                last[:] = [now, p.phase, p.fraction]
                ctl.progress(p.fraction, p.text())

        return download_model(hub, model, folder, progress=progress, cancelled=ctl.cancelled)

    return BackgroundJob(run, parent, what=f"Downloading {model.file_name}", on_failed=on_failed)
