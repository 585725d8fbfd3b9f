"""The Models view's state: the model folders scanned, what the last scan found (files listed at once, headers
as they are read, paths it could not use), the summary line under the list, which model to select after a
listing, and the details of a model as the view shows them.

ModelsPanel binds its widgets to a ModelsState and runs the scan (qt.model_table.LibraryScan, a Qt job); the
panel's table shows the same rows. Listeners get `notify(what)` with `what` one of: "folders" (the folders
changed: scan again), "summary" (the summary line changed).
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.units import format_bytes, format_params
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.library import ModelEntry
from llm_tuner.state.callbacks import Observable

MISSING_FOLDER = "folder not found"
NOTHING_SELECTED = "<p>Select a model to see its details.</p>"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class ModelsState(Observable):
    """The model library the Models view lists: its folders, the last scan's findings and the summary."""

    def __init__(self, folders: Iterable[str] = (), *,
                 demo_model: Callable[[], Path | None] = find_demo_model) -> None:
        super().__init__()
        self._folders: tuple[str, ...] = tuple(folders)
        self._demo_model = demo_model
        self._entries: dict[str, ModelEntry] = {}
        self._infos: dict[str, ModelInfo] = {}
        self._skipped: list[tuple[str, str]] = []
        self._cancelled = False
        self._select_after_scan: str | None = None  # a downloaded model, selected once the listing has it

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def folders(self) -> tuple[str, ...]:
        """The user's model folders (Settings' `model_folders`), as typed there."""
        return self._folders

    @property
    def skipped_paths(self) -> tuple[tuple[str, str], ...]:
        """Paths the last scan could not use (a folder gone, an unreadable one, a broken link), and why."""
        return tuple(self._skipped)

    @property
    def entries(self) -> tuple[ModelEntry, ...]:
        """The files the last scan listed, in its order."""
        return tuple(self._entries.values())

    @property
    def cancelled(self) -> bool:
        """The last scan was cancelled before every header was read."""
        return self._cancelled

    def info(self, path: str) -> ModelInfo | None:
        """The header of a listed file once read (None: not yet)."""
        return self._infos.get(path)

    # -- folders ---------------------------------------------------------------------------------------
    def set_folders(self, folders: Iterable[str]) -> bool:
        """The settings' folders changed (or not): True, and "folders" told, when the list is another."""
        new = tuple(folders)
        if new == self._folders:
            return False
        self._folders = new
        self.notify("folders")
        return True

    def with_folder(self, folder: str) -> list[str] | None:
        """The folders with `folder` added (to save in the settings); None when it is listed already."""
        folder = str(Path(folder).expanduser())
        return None if folder in self._folders else [*self._folders, folder]

    def roots(self) -> list[Path]:
        """What a scan searches: the user's model folders, plus the demo model when installed."""
        roots = [Path(f).expanduser() for f in self._folders]
        demo = self._demo_model()
        if demo is not None:
            roots.append(demo)
        return roots

    # -- a scan ----------------------------------------------------------------------------------------
    def begin_scan(self) -> list[Path]:
        """A scan starts: the roots it searches. A folder in Settings that is gone (an unplugged drive, a
        renamed folder) is said among the skipped paths, not silently empty."""
        self._skipped = [(f, MISSING_FOLDER) for f in self._folders
                         if not os.path.lexists(Path(f).expanduser())]
        self._cancelled = False
        self.notify("summary")
        return self.roots()

    def listed(self, entries: Sequence[ModelEntry]) -> None:
        """The scan listed its files (names and sizes, before any header); headers read before are kept."""
        self._entries = {e.path: e for e in entries}
        self._infos = {p: i for p, i in self._infos.items() if p in self._entries}
        self.notify("summary")

    def read(self, info: ModelInfo) -> None:
        """One file's header was read (or could not be: `info.error`)."""
        self._infos[info.path] = info
        self.notify("summary")

    def skipped(self, path: str, reason: str) -> None:
        self._skipped.append((path, reason))
        self.notify("summary")

    def finished(self, cancelled: bool) -> None:
        self._cancelled = cancelled
        self.notify("summary")

    # -- selection -------------------------------------------------------------------------------------
    def downloaded(self, path: str, folder: str) -> bool:
        """A model was downloaded into `folder`: it is selected once listed. True when the folder is one of
        ours (scan again), False when it must be added to the settings first (`with_folder`)."""
        self._select_after_scan = os.path.realpath(path)
        return str(Path(folder).expanduser()) in self._folders

    def to_select(self, current: str | None, chosen: str | None) -> list[str]:
        """After a listing, the paths to select, the first listed one wins: a model just downloaded, else the
        row selected before, else the app's chosen model (`chosen`, when nothing was selected here)."""
        pending, self._select_after_scan = self._select_after_scan, None
        if not self._entries:
            return []
        first = [p for p in (pending, current) if p]
        return first if current else [*first, *([chosen] if chosen else [])]

    @staticmethod
    def publishes(info: ModelInfo | None) -> bool:
        """Whether selecting a row chooses its model for the app: not a file that cannot be read, nor a
        projector (mmproj: it goes with a main model). A row whose header is not read yet does."""
        return info is None or (info.error is None and not info.is_projector)

    # -- what the view says ----------------------------------------------------------------------------
    def summary(self) -> tuple[str, str]:
        """The line under the list and its tooltip: models, their size, unreadable files, headers left unread
        by a cancel, paths skipped (the tooltip names them and why)."""
        infos = [self._infos.get(p) for p in self._entries]
        bad = sum(1 for i in infos if i is not None and i.error)
        good = [e for e in self._entries.values() if not ((i := self._infos.get(e.path)) and i.error)]
        text = f"{_plural(len(good), 'model')} · {format_bytes(sum(e.size_bytes for e in good))}"
        pending = sum(1 for i in infos if i is None)
        if bad:
            text += f" · {_plural(bad, 'unreadable file')}"
        if pending and self._cancelled:
            text += f" · {pending} not read (cancelled; Rescan to finish)"
        if self._skipped:
            text += f" · {_plural(len(self._skipped), 'path')} skipped (hover for why)"
        return text, "\n".join(f"{p}: {why}" for p, why in self._skipped[:50])


def reading_html(file_name: str) -> str:
    """The details while a file's header is read."""
    return f"<p><b>{html.escape(file_name)}</b></p><p>Reading header…</p>"


def details_html(info: ModelInfo) -> str:
    """A model's details as the view shows them (rich text): what it is, its shape, its files; or why it
    cannot be read and what to do."""
    esc = html.escape
    files = "".join(f"<br><code>{esc(f)}</code>" for f in info.files)
    if info.error:
        return (f"<p><b>{esc(Path(info.path).name)}</b></p>"
                f"<p style='color:#c0392b'>Cannot read this file: {esc(info.error)}</p>"
                "<p>It may be incomplete (still downloading?) or not a GGUF model. Download it again, "
                "or remove it from the folder.</p>"
                f"<p>Files:{files}</p>")

    def row(label: str, value: Any) -> str:
        if value is None or value == "" or value == []:
            return ""
        return f"<tr><td><b>{esc(label)}</b></td><td>{esc(str(value))}</td></tr>"

    experts = (f"{info.expert_used_count} of {info.expert_count}"
               + (f" (+{info.expert_shared_count} shared)" if info.expert_shared_count else "")
               if info.expert_count else "none (dense)")
    layers = f"{info.block_count}" + (f" (incl. {info.nextn_layers} MTP)" if info.nextn_layers else "")
    kind = "Projector (mmproj) — use it with a main model's --mmproj" if info.is_projector else None
    swa = None
    if info.sliding_window:
        pattern = info.sliding_window_pattern
        swa = f"{info.sliding_window:,} tokens" + (f", pattern {pattern}" if pattern is not None else "")
    quant = info.file_type + (" (guessed)" if info.file_type_guessed else "") if info.file_type else None
    rows = "".join([
        row("Kind", kind),
        row("Architecture", info.architecture), row("Size label", info.size_label),
        row("Quantisation", quant),
        row("Parameters", format_params(info.n_params)), row("File size", format_bytes(info.size_bytes)),
        row("Layers", layers),
        row("Trained context", f"{info.context_length:,} tokens" if info.context_length else None),
        row("Embedding", info.embedding_length), row("FFN", info.feed_forward_length),
        row("Heads", info.head_count), row("KV heads", info.head_count_kv),
        row("Head dims (K/V)", f"{info.key_length}/{info.value_length}" if info.key_length else None),
        row("MLA KV rank", info.kv_lora_rank), row("Experts", experts if info.architecture else None),
        row("Sliding window", swa),
        row("Vocabulary", f"{info.vocab_size:,} ({info.tokenizer_model})" if info.vocab_size else None),
        row("Chat template", "yes" if info.chat_template else "no"),
        row("Split", f"{info.split_count} files" if info.split_count > 1 else None),
        row("Tensors", info.n_tensors),
    ])
    return (f"<p><b>{esc(info.display_name())}</b></p><table cellspacing='4'>{rows}</table>"
            f"<p>Files:{files}</p>")


__all__ = ["MISSING_FOLDER", "NOTHING_SELECTED", "ModelsState", "details_html", "reading_html"]
