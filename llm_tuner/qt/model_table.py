"""Table models and the scan bridge for the model library (QtCore only).

`LibraryScan` runs services.library off the GUI thread: the file list first (names and sizes, so the
table fills at once), then each header (cache first) as it is read, with progress and cancel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from sqlalchemy import Engine

from llm_tuner.core.gguf_info import ModelInfo, TensorInfo
from llm_tuner.core.units import format_bytes, format_params
from llm_tuner.qt.workers import BackgroundJob, emit_later
from llm_tuner.services.library import ModelEntry, find_models, scan
from llm_tuner.store.model_cache import ModelCacheRepo

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
PATH_ROLE = Qt.ItemDataRole.UserRole + 2
ERROR_ROLE = Qt.ItemDataRole.UserRole + 3  # True for a file that could not be read (the view colours it)
_Index = QModelIndex | QPersistentModelIndex
_NUM_RE = re.compile(r"\d+")


@dataclass
class ModelRow:
    entry: ModelEntry
    info: ModelInfo | None = None

    @property
    def name(self) -> str:
        if self.info is not None and self.info.error is None:
            return self.info.display_name()
        return self.entry.file_name

    @property
    def status(self) -> str:
        if self.info is None:
            return "reading…"
        if self.info.error:
            return f"error: {self.info.error}"
        return "projector" if self.info.is_projector else "ok"


class _ColumnsTableModel(QAbstractTableModel):
    """A flat table of `_items()` with fixed column titles `COLUMNS`."""

    COLUMNS: tuple[str, ...] = ()

    def _items(self):
        raise NotImplementedError

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self._items())

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section]
        return None


class ModelTableModel(_ColumnsTableModel):
    """One row per model (a split set is one row). Metadata columns fill in as headers are read."""

    COLUMNS = ("Name", "Arch", "Params", "Quant", "Size", "Layers", "Ctx", "Experts", "MTP", "Status")

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[ModelRow] = []
        self._by_path: dict[str, int] = {}

    # -- content ------------------------------------------------------------------------------
    def set_entries(self, entries: list[ModelEntry]) -> None:
        """Replace the list (keeping infos already known for unchanged paths)."""
        old = {r.entry.path: r for r in self._rows}
        self.beginResetModel()
        self._rows = []
        for e in entries:
            prev = old.get(e.path)
            keep = prev is not None and (prev.entry.size_bytes, prev.entry.mtime_ns) == (e.size_bytes, e.mtime_ns)
            self._rows.append(ModelRow(e, prev.info if keep else None))
        self._by_path = {r.entry.path: i for i, r in enumerate(self._rows)}
        self.endResetModel()

    def update_info(self, info: ModelInfo) -> None:
        row = self._by_path.get(info.path)
        if row is None:
            return
        self._rows[row].info = info
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.COLUMNS) - 1))

    def row_at(self, row: int) -> ModelRow | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, path: str) -> int | None:
        return self._by_path.get(path)

    def rows(self) -> list[ModelRow]:
        return list(self._rows)

    # -- Qt model -----------------------------------------------------------------------------
    def _items(self):
        return self._rows

    def _values(self, r: ModelRow, col: int) -> tuple[str, object]:
        """(display text, sort key) of one cell."""
        i = r.info if (r.info is not None and r.info.error is None) else None
        match col:
            case 0:
                links = len(r.entry.also_at)
                return (r.name + (f"  (+{links} link{'s' if links > 1 else ''})" if links else "")), r.name.lower()
            case 1:
                return (i.architecture or "", i.architecture or "") if i else ("", "")
            case 2:
                n = i.n_params if i else None
                return format_params(n), n or 0
            case 3:
                q = (i.file_type or "") if i else ""
                return q, q
            case 4:
                return format_bytes(r.entry.size_bytes), r.entry.size_bytes
            case 5:
                n = i.block_count if i else None
                return ("" if n is None else str(n)), n or 0
            case 6:
                n = i.context_length if i else None
                return ("" if n is None else f"{n:,}"), n or 0
            case 7:
                if not i or not i.expert_count:
                    return "", 0
                return f"{i.expert_used_count}/{i.expert_count}", i.expert_count
            case 8:
                n = i.nextn_layers if i else 0
                return (str(n) if n else ""), n
            case _:
                return r.status, r.status
        return "", ""

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._values(r, col)[0]
        if role == SORT_ROLE:
            return self._values(r, col)[1]
        if role == PATH_ROLE:
            return r.entry.path
        if role == Qt.ItemDataRole.ToolTipRole:
            if r.info is not None and r.info.error:
                return f"{r.entry.path}\n{r.info.error}"
            return r.entry.path + also_at_text(r.entry) if col == 0 else None
        if role == ERROR_ROLE:
            return bool(r.info is not None and r.info.error)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (2, 4, 5, 6, 7, 8):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def also_at_text(entry: ModelEntry) -> str:
    """The other paths of a model's file (symlinks, hard links), listed once: said under its path."""
    return ("\nAlso at (links to the same file): " + ", ".join(entry.also_at)) if entry.also_at else ""


class TensorTableModel(_ColumnsTableModel):
    """The tensor table of one model: name, shape, type, MiB, layer, role."""

    COLUMNS = ("Name", "Shape", "Type", "MiB", "Layer", "Role")

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._tensors: tuple[TensorInfo, ...] = ()

    def set_tensors(self, tensors: tuple[TensorInfo, ...]) -> None:
        self.beginResetModel()
        self._tensors = tuple(tensors)
        self.endResetModel()

    def _items(self):
        return self._tensors

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        t = self._tensors[index.row()]
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, SORT_ROLE):
            display = role == Qt.ItemDataRole.DisplayRole
            match col:
                case 0:  # natural order: blk.2 before blk.10
                    return t.name if display else _NUM_RE.sub(lambda m: m.group().zfill(8), t.name)
                case 1:
                    return " × ".join(map(str, t.shape)) if display else t.n_elements
                case 2:
                    return t.type_name
                case 3:
                    return f"{t.n_bytes / 2**20:.2f}" if display else t.n_bytes
                case 4:
                    return ("" if t.layer is None else str(t.layer)) if display else (-1 if t.layer is None else t.layer)
                case 5:
                    return t.role
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class LibraryScan(QObject):
    """Scan roots off the GUI thread. Signals arrive on the GUI thread (queued).

    Signals:
        entries_listed(list[ModelEntry]): the files found (the list a user sees at once).
        model_read(ModelInfo): one header read (or taken from the cache).
        skipped(str, str): a path that was not scanned, and why.
        progressed(float, str): fraction and text.
        finished(bool): True when cancelled.
    """

    entries_listed = Signal(object)
    model_read = Signal(object)
    # a path the scan could not use (unreadable folder, not a file, broken link), why
    skipped = Signal(str, str)
    progressed = Signal(float, str)
    finished = Signal(bool)

    def __init__(self, engine: Engine | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._job: BackgroundJob | None = None

    @property
    def running(self) -> bool:
        return self._job is not None

    def start(self, roots: list[Path | str]) -> None:
        """Start a scan (cancelling one that runs)."""
        self.cancel()
        engine = self._engine

        # Reported through emit_later, and the job is this object's child: a window closed while the scan runs
        # deletes this object, and nothing is emitted on it afterwards (CI once raised "Signal source has been
        # deleted" at a test's teardown, from a scan that ended after its window).
        def work(ctl) -> None:
            ctl.progress(None, "Looking for .gguf files…")
            entries = find_models(roots, cancelled=ctl.cancelled,
                                  on_skipped=lambda path, why: emit_later(self, "skipped", path, why))
            if ctl.cancelled():
                return
            emit_later(self, "entries_listed", entries)
            cache = None
            if engine is not None:
                cache = ModelCacheRepo(engine)
            scan(entries, cache=cache, progress=ctl.progress, cancelled=ctl.cancelled,
                 on_model=lambda info: emit_later(self, "model_read", info))

        job = BackgroundJob(work, self, what="Scanning the model folders")
        job.progressed.connect(self.progressed)
        job.finished.connect(lambda j=job: self._on_job_finished(j))
        self._job = job
        job.start(long=True)  # a folder scan can take minutes: the long-job pool

    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()

    def _on_job_finished(self, job: BackgroundJob) -> None:
        cancelled = job.control.cancelled()
        if self._job is job:
            self._job = None
        self.finished.emit(cancelled)
