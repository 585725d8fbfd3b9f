"""The Get models dialog's state and rules, Qt-free: the search and its hits, the repository listed and its
GGUF files, each file's header and memory plan (read before any download) and predicted speed on this
machine's devices, the file chosen, the folder it goes to, and the download's progress, end and failure.

The search and the listing go through the `Run` given (the dialog's BackgroundJobs, `run_now` in tests); the
header reads and the download stay the dialog's Qt jobs (`qt.hub_jobs`: progress and cancel), which hand
their results here (`header_read`, `download_progressed`, `downloaded`, `download_failed`).

Declared properties (said once per change): "hits", "searching", "status" (the line under everything,
HTML), "files_line" (above the files), "models" (the files listed: every row again), "selected", "folders"
(the folder list or the one chosen), "downloading", "progress" (fraction and words; None: hidden). Besides:
"row" (index) when a file's header and plan arrived, "speeds" when every row's speed should be shown again
(the basis arrived or changed).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.hub_files import RemoteModel
from llm_tuner.core.memory import MemoryPlan, plan_gpus
from llm_tuner.core.speed import Prediction
from llm_tuner.core.units import format_bytes, format_params
from llm_tuner.services.hub import (
    DownloadCancelled,
    Hub,
    RepoHit,
    describe_error,
    list_gguf_models,
    plan_text,
    search_models,
)
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now
from llm_tuner.state.speed import NOT_YET, SpeedModel, basis_text, roofline_text, speed_figures

SPEED_COLUMN = "Predicted speed (this machine)"
HEADER_PENDING = "…"
FILES_HINT = "Choose a repository to see its GGUF files."
NO_HITS = "No repository with GGUF files matches. Try fewer words."
CANCELLED = "Cancelled. What was downloaded is kept; Download goes on from there."

# a cell: (text, tooltip)
Cell = tuple[str, str]


@dataclass(frozen=True)
class HitRow:
    """One repository found: its cells (repository, downloads, likes, updated) and the repository's tip."""

    repo_id: str
    tip: str
    downloads: str
    likes: str
    updated: str


def hit_row(hit: RepoHit) -> HitRow:
    return HitRow(
        hit.repo_id,
        "gated: ask for access on the hub, set HF_TOKEN" if hit.gated else "",
        f"{hit.downloads:,}" if hit.downloads is not None else "—",
        f"{hit.likes:,}" if hit.likes is not None else "—",
        hit.last_modified or "—",
    )


class GetModelsState(Observable):
    """What the Get models dialog shows and the rules of its search, listing and download."""

    hits = Declared[tuple[RepoHit, ...]]((), topic="hits")
    searching = Declared[bool](False, topic="searching")
    status = Declared[str]("", topic="status")
    files_line = Declared[str](FILES_HINT, topic="files_line")
    models = Declared[tuple[RemoteModel, ...]]((), topic="models")
    selected = Declared[int](-1, topic="selected")  # the file's row (-1: none)
    folders = Declared[tuple[str, ...]]((), topic="folders")
    folder = Declared[str]("", topic="folders")  # where a download goes
    downloading = Declared[bool](False, topic="downloading")
    progress = Declared[tuple[float, str] | None](None, topic="progress")

    def __init__(
        self,
        speed: SpeedModel,
        inventory: Callable[[], DeviceInventory | None] = lambda: None,
        *,
        hub: Hub | None = None,
        folders: Sequence[str] = (),
        run: Run = run_now,
    ) -> None:
        super().__init__()
        self.speed = speed
        self.inventory = inventory
        self.hub = hub if hub is not None else Hub.from_env()
        self.run = run
        self.repo: str | None = None  # the repository listed (or being listed)
        self.infos: dict[int, ModelInfo] = {}  # each file's header, by row, as read
        self.plans: dict[int, MemoryPlan | None] = {}  # its plan (None: a projector)
        for folder in folders:
            self.choose_folder(folder)
        if folders:
            self.folder = folders[0]
        speed.add_callback(lambda *_a: self.notify("speeds"))

    # -- search ------------------------------------------------------------------------------------------
    def search(self, query: str) -> bool:
        """Search the hub for repositories with GGUF files (through `run`); False for an empty query."""
        query = query.strip()
        if not query:
            return False
        self.status = f"Searching for “{html.escape(query)}”…"
        self.searching = True
        hub = self.hub
        self.run(lambda: search_models(hub, query), self._on_searched,
                 lambda exc: self._failed("The search failed", exc))
        return True

    def _on_searched(self, hits: Sequence[RepoHit]) -> None:
        self.searching = False
        self.hits = tuple(hits)
        n = len(hits)
        self.status = f"{n} repositor{'y' if n == 1 else 'ies'} with GGUF files" if hits else NO_HITS

    def hit_rows(self) -> list[HitRow]:
        return [hit_row(h) for h in self.hits]

    # -- a repository's files ----------------------------------------------------------------------------
    def list_repo(self, repo_id: str) -> None:
        """List `repo_id`'s GGUF models (through `run`); the dialog then reads each one's header."""
        self.repo = repo_id
        self.infos, self.plans = {}, {}
        self.models = ()
        self.selected = -1
        self.files_line = f"Listing <b>{html.escape(repo_id)}</b>…"
        hub = self.hub
        self.run(lambda: list_gguf_models(hub, repo_id), lambda models: self._on_listed(repo_id, models),
                 lambda exc: self._on_list_failed(repo_id, exc))

    def _on_list_failed(self, repo_id: str, exc: BaseException) -> None:
        if repo_id == self.repo:  # else another repository is listed by now
            self.files_line = f"<b>{html.escape(repo_id)}</b>: could not list its files."
            self._failed("Listing failed", exc)

    def _on_listed(self, repo_id: str, models: Sequence[RemoteModel]) -> None:
        if repo_id != self.repo:
            return
        n, name = len(models), html.escape(repo_id)
        self.files_line = (
            f"<b>{name}</b>: {n} GGUF file{'' if n == 1 else 's'}. Each plan is read from the file's header "
            "alone (a few MiB, with range requests): nothing is downloaded until you press Download."
            if models else f"<b>{name}</b> has no GGUF files.")
        self.models = tuple(models)
        self.selected = 0 if models else -1

    def header_read(self, index: int, info: ModelInfo, plan: MemoryPlan | None) -> None:
        """A file's header and its plan arrived (the dialog's reader): its row is said again."""
        if 0 <= index < len(self.models):
            self.infos[index], self.plans[index] = info, plan
            self.notify("row", index)

    def row_cells(self, index: int) -> list[Cell]:
        """The file's row: file, quant, size, checksum, memory plan, fits, predicted speed (text, tooltip)."""
        m = self.models[index]
        info, plan = self.infos.get(index), self.plans.get(index)
        quant = (info.file_type, "from the file's header") if info is not None and info.file_type else (
            m.quant or "—", "")
        cells: list[Cell] = [
            (m.name + ("" if m.complete else " (parts missing)"), "\n".join(f.path for f in m.files)),
            quant,
            (format_bytes(m.size_bytes), ""),
            ("sha256", "The download is checked against the repository's sha256") if m.has_checksums
            else ("none", "The repository gives no checksum"),
        ]
        if info is None:
            cells += [("reading header…", ""), ("", "")]
        elif info.error:
            cells += [(f"header not read: {info.error}", info.error), ("?", "")]
        elif plan is None:
            cells += [("projector: planned with its main model (--mmproj)", ""), ("", "")]
        else:
            tip = "\n".join([f"{info.display_name()}: {info.architecture}, {format_params(info.n_params)} "
                             "parameters", *plan.warnings])
            fits = {True: "yes", False: "no", None: "?"}[plan.fits]
            cells += [(plan_text(plan), tip),
                      (fits, "" if plan.fits is not None else "This machine's memory is not known yet")]
        return [*cells, self.speed_cell(info, plan) if info is not None else ("", "")]

    def select(self, index: int) -> None:
        self.selected = index if 0 <= index < len(self.models) else -1

    def selected_model(self) -> RemoteModel | None:
        return self.models[self.selected] if 0 <= self.selected < len(self.models) else None

    # -- the download --------------------------------------------------------------------------------------
    def choose_folder(self, folder: str) -> None:
        """Download into `folder` (listed if new)."""
        if folder not in self.folders:
            self.folders = (*self.folders, folder)
        self.folder = folder

    @property
    def can_download(self) -> bool:
        model = self.selected_model()
        return model is not None and model.complete and not self.downloading

    def start_download(self) -> tuple[RemoteModel, Path] | None:
        """What to download where (the dialog runs the job), or None: nothing chosen, or one is going."""
        model = self.selected_model()
        if model is None or self.downloading:
            return None
        self.downloading = True
        self.progress = (0.0, f"Starting {model.file_name}…")
        self.status = ""
        return model, Path(self.folder).expanduser()

    def download_progressed(self, fraction: float, text: str) -> None:
        self.progress = (max(0.0, fraction), text)

    def cancelling(self) -> None:
        if self.downloading:
            self.progress = (self.progress[0] if self.progress else 0.0, "Cancelling…")

    def downloaded(self, path: Path) -> None:
        self.downloading = False
        self.progress = (1.0, f"{path.name}: done")
        self.status = f"Saved <code>{html.escape(str(path))}</code>; it is listed in Models."

    def download_failed(self, exc: BaseException) -> None:
        """Cancelled: what was downloaded is kept (Download goes on from there); else the failure in words."""
        self.downloading = False
        if isinstance(exc, DownloadCancelled):
            kept = self.progress[0] if self.progress else 0.0
            self.progress = (kept, "Cancelled: Download goes on from here")
            self.status = CANCELLED
            return
        self.progress = None
        self._failed("The download failed", exc)

    def _failed(self, what: str, exc: BaseException) -> None:
        self.searching = False
        why = describe_error(exc, self.hub)
        self.status = f"<span style='color:#c0392b'>{html.escape(what)}: {html.escape(why)}</span>"

    # -- the predicted speed -------------------------------------------------------------------------------
    def prediction(self, info: Any, plan: Any) -> Prediction | None:
        """The file's predicted speed with llama-server's defaults on this machine (None: not predictable)."""
        if info is None or plan is None or info.error:
            return None
        inv = self.inventory()
        return self.speed.predict(info, plan, gpus=plan_gpus(inv) if inv is not None else None)

    def basis_line(self) -> str:
        """Under the table: what every predicted speed rests on."""
        return ("Predicted speed: one request, a 512-token prompt, generation at an empty cache, with "
                + basis_text(self.speed.basis)) if self.speed.basis is not None else NOT_YET

    def speed_cell(self, info: Any, plan: Any) -> Cell:
        """(cell text, tooltip) of a file's predicted speed: '≈ 41 t/s gen, 900 t/s prefill' and what it is
        calibrated on; '…' while the header or the basis is read, '—' for a file with no plan (a
        projector)."""
        if info is None:
            return HEADER_PENDING, ""
        if plan is None or info.error:
            return "—", ""
        if self.speed.basis is None:
            return HEADER_PENDING, NOT_YET
        pr = self.prediction(info, plan)
        text = speed_figures(pr).split(", TTFT")[0]  # the table is narrow: TTFT in the tooltip
        tip = "\n".join(x for x in (speed_figures(pr), roofline_text(pr), basis_text(self.speed.basis, pr),
                                    "One request, a 512-token prompt, generation at an empty cache, "
                                    "llama-server's defaults (the memory plan's settings)") if x)
        return text, tip


__all__ = ["SPEED_COLUMN", "GetModelsState", "HitRow"]
