"""RequestTableModel: the Live panel's per-request table (one row per finished request).

A bounded ring of the newest `max_rows` requests (the store keeps every one); rows arrive in batches
(`extend`, at most four times a second from the panel), so a busy server costs one insert per batch, not one
per request.

`data()` is called for every role of every cell in view on each repaint (Qt's delegate asks ~7 roles a cell:
~2,000 calls a paint), so it compares roles as plain ints (a PySide enum comparison costs ~1 µs: most of a
repaint's 14 ms) and formats a row's texts once, when first painted (`_texts`, a small cache), not per paint.
"""

from __future__ import annotations

import time
from collections import deque

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

from llm_tuner.core.session import RequestRecord
from llm_tuner.services.chat import draft_text


def extend_ring(model, ring: deque, items: list, max_rows: int) -> None:
    """Append a batch to a list model backed by a ring of at most `max_rows`: one removal of the oldest rows
    (when full) and one insert, with Qt's row signals, so a view does the least work per batch."""
    items = items[-max_rows:]
    drop = len(ring) + len(items) - max_rows
    if drop > 0:
        model.beginRemoveRows(QModelIndex(), 0, drop - 1)
        for _ in range(drop):
            ring.popleft()
        model.endRemoveRows()
    n = len(ring)
    model.beginInsertRows(QModelIndex(), n, n + len(items) - 1)
    ring.extend(items)
    model.endInsertRows()


COLUMNS = (
    ("Time", None),
    ("Slot", "slot"),
    ("Prompt tokens (new)", "prompt_n"),
    ("Cached tokens", "cache_n"),
    ("Prompt t/s", "prompt_per_second"),
    ("Generated tokens", "predicted_n"),
    ("Generation t/s", "predicted_per_second"),
    ("Draft accepted", None),
    ("TTFT ms", "ttft_ms"),
    ("Latency ms", "latency_ms"),
    ("Model", "model"),  # a router's model; the view shows the column only when a request names one
)
MODEL_COLUMN = len(COLUMNS) - 1


# Qt.ItemDataRole values as ints (see the module doc)
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole)
_USER = int(Qt.ItemDataRole.UserRole)
_ROLES = frozenset((_DISPLAY, _TOOLTIP, _ALIGN, _USER))
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_TEXT_CACHE_ROWS = 500  # rows whose texts are kept (several screens; cleared when full: bounded memory)
APPROXIMATE_TIP = ("Approximate (≈): seen through /slots and /metrics between two polls (no log), not the server's "
                   "own timings. Token counts may be those of the last poll while the request ran, and requests "
                   "that finished in one interval share the times. Give the server's log for exact figures.")


def _fmt(value) -> str:
    if value is None or value != value:  # unknown (None) or not measured (NaN)
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _cell(rec: RequestRecord, title: str, key: str | None) -> str:
    if title == "Time":
        return time.strftime("%H:%M:%S", time.localtime(rec.time_unix)) + (" ≈" if rec.approximate else "")
    if title == "Draft accepted":
        return draft_text(rec)
    if key == "model":
        return rec.model or "—"
    text = _fmt(getattr(rec, key))
    # attached without a log: every figure is inferred between two polls, so each says so, not only Time
    return f"≈{text}" if rec.approximate and key not in (None, "slot") and text != "—" else text


class RequestTableModel(QAbstractTableModel):
    def __init__(self, parent=None, max_rows: int = 10_000) -> None:
        super().__init__(parent)
        self.max_rows = max_rows
        self.records: deque[RequestRecord] = deque(maxlen=max_rows)
        self.total = 0  # requests appended since the last reset (more than the rows once the ring is full)
        self._text_cache: dict[int, tuple[RequestRecord, tuple[str, ...]]] = {}
        # whether a request shown named its model (a router's): the Model column shows
        self.names_models = False

    def rowCount(self, parent=None) -> int:  # noqa: N802 - Qt override
        return 0 if parent is not None and parent.isValid() else len(self.records)

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return 0 if parent is not None and parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=_DISPLAY):  # noqa: N802
        if int(role) == _DISPLAY and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section][0]
        return None

    def data(self, index, role=_DISPLAY):
        role = int(role)
        if role not in _ROLES:
            return None
        row = index.row()
        if row < 0:  # not a valid index
            return None
        if role == _DISPLAY:
            return self._texts(self.records[row])[index.column()]
        if role == _ALIGN:
            return _RIGHT if index.column() > 0 else None
        if role == _TOOLTIP:
            return APPROXIMATE_TIP if self.records[row].approximate else None
        return self.records[row]  # UserRole

    def _texts(self, rec: RequestRecord) -> tuple[str, ...]:
        """The row's cell texts, made once (records never change)."""
        hit = self._text_cache.get(id(rec))
        if hit is not None and hit[0] is rec:
            return hit[1]
        if len(self._text_cache) >= _TEXT_CACHE_ROWS:
            self._text_cache.clear()
        texts = tuple(_cell(rec, title, key) for title, key in COLUMNS)
        self._text_cache[id(rec)] = (rec, texts)
        return texts

    def append(self, rec: RequestRecord) -> None:
        self.extend([rec])

    def extend(self, recs: list[RequestRecord]) -> None:
        """Add a batch of rows at the end: one insert (and at most one removal of the oldest rows)."""
        if not recs:
            return
        self.total += len(recs)
        self.names_models = self.names_models or any(r.model for r in recs)
        extend_ring(self, self.records, recs, self.max_rows)

    def reset(self, records=None, total: int | None = None) -> None:
        """Show `records` (the newest `max_rows` of them); `total` is how many the session had in all."""
        self.beginResetModel()
        self._text_cache.clear()
        recs = list(records or [])
        self.records = deque(recs[-self.max_rows:], maxlen=self.max_rows)
        self.total = len(recs) if total is None else total
        self.names_models = any(r.model for r in self.records)
        self.endResetModel()
