"""The model library: find GGUF files under the user's folders and read their headers.

`read_model(path)` opens a file (every part of a split set) and returns `core.gguf_info.ModelInfo`,
never raising for a bad file: a corrupt, truncated or hostile GGUF comes back with `error` set to a
one-line reason. `scan(roots, ...)` walks several roots, groups split sets into one model, keeps
projectors (mmproj) apart, and reads headers with progress and cancel, using the store's cache keyed
by (path, size, mtime_ns) so an unchanged library rescans in a fraction of a second.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from llm_tuner.core.gguf_info import (
    GGUFError,
    GGUFHeader,
    ModelInfo,
    error_info,
    model_info_from_headers,
    parse_header,
    split_parts,
)
from llm_tuner.core.units import format_bytes

log = logging.getLogger(__name__)

__all__ = ["GGUFError", "ModelEntry", "ModelInfo", "find_models", "not_a_file_reason", "read_header", "read_model",
           "scan"]


def not_a_file_reason(mode: int) -> str | None:
    """Why a path whose (link-followed) mode is `mode` cannot be a model file; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return f"is {what}, not a model file"
    return "is not a regular file"


def read_header(path: Path | str) -> GGUFHeader:
    """Parse one file's header. Raises GGUFError (with an OSError's reason when it cannot be opened).

    Only regular files are read (symlinks followed, so Hugging Face cache links work): the file is opened
    non-blocking and checked on the open descriptor, so a pipe named *.gguf cannot hang the caller in open()
    or read(), and /dev/zero cannot feed it forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise GGUFError(f"cannot read file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        reason = not_a_file_reason(st.st_mode)
        if reason is not None:
            raise GGUFError(reason)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            fd = -1  # owned by fh now
            return parse_header(fh, size=st.st_size)
    except OSError as exc:
        raise GGUFError(f"cannot read file: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)


def split_set_files(path: Path) -> list[Path]:
    """Every part of the split set whose first part is `path` (just [path] for a single file)."""
    parts = split_parts(path.name)
    if parts is None:
        return [path]
    prefix, _no, count = parts
    return [path.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def read_model(path: Path | str) -> ModelInfo:
    """Read a model's metadata and tensor table (header only; no tensor data).

    For a split set, give the first part (`*-00001-of-0000N.gguf`): every part's tensors are read and
    grouped into one model. Never raises for a bad file; the reason is in `ModelInfo.error`.
    """
    path = Path(path)
    files = split_set_files(path)
    sizes: list[int] = []
    for f in files:
        where = f"split part {f.name}" if len(files) > 1 else "the file"
        try:
            st = f.stat()
        except OSError as exc:
            reason = "does not exist" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
            return error_info(str(path), [str(x) for x in files], sum(sizes), f"{where} {reason}")
        not_file = not_a_file_reason(st.st_mode)
        if not_file is not None:
            return error_info(str(path), [str(x) for x in files], sum(sizes), f"{where} {not_file}")
        sizes.append(st.st_size)
    parts = split_parts(path.name)
    if parts is not None and parts[1] != 1:
        return error_info(str(path), [str(path)], sizes[0] if sizes else 0,
                          "not the first part of a split set (open the -00001- file)")
    headers: list[GGUFHeader] = []
    try:
        for f in files:
            try:
                headers.append(read_header(f))
            except GGUFError as exc:
                where = f"{f.name}: " if len(files) > 1 else ""
                raise GGUFError(f"{where}{exc}") from None
        first = headers[0]
        arch_len = first.skipped_strings.get("general.architecture")
        if arch_len is not None:
            raise GGUFError(f"general.architecture is a string of {format_bytes(arch_len)}, "
                            "not an architecture llama.cpp knows")
        declared = first.kv.get("split.count")
        if len(files) > 1 and isinstance(declared, int) and declared != len(files):
            raise GGUFError(f"split.count is {declared} but the name says {len(files)} parts")
        declared_tensors = first.kv.get("split.tensors.count")
        n_tensors = sum(len(h.tensors) for h in headers)
        if len(files) > 1 and isinstance(declared_tensors, int) and declared_tensors != n_tensors:
            raise GGUFError(f"split.tensors.count is {declared_tensors} but the parts hold {n_tensors} tensors")
        return model_info_from_headers(str(path), [str(f) for f in files], headers, sizes)
    except GGUFError as exc:
        return error_info(str(path), [str(f) for f in files], sum(sizes), str(exc))
    except Exception as exc:  # a bad file must never break the library (logged)
        log.exception("unexpected error reading %s", path)
        return error_info(str(path), [str(f) for f in files], sum(sizes), f"unexpected error: {exc}")


# --------------------------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEntry:
    """A model found on disk, before its header is read: what the list shows at once."""

    path: str
    files: tuple[str, ...]
    size_bytes: int
    mtime_ns: int
    is_projector: bool
    # other paths of the same file (a symlink, a hard link), listed once as `path`
    also_at: tuple[str, ...] = ()

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)


def _is_projector_name(name: str) -> bool:
    return name.lower().startswith("mmproj")


def find_models(roots: Iterable[Path | str], *, cancelled: Callable[[], bool] = lambda: False,
                on_skipped: Callable[[str, str], None] | None = None) -> list[ModelEntry]:
    """Walk `roots` recursively for *.gguf; a split set is one entry (its first part), other parts are
    skipped; a root may also be a single file. Sorted by path. Links to one file are one entry that names
    the other paths (`also_at`).

    Only regular files (after following links) become entries; what is passed over and why (an unreadable
    folder, a pipe or device named *.gguf, a broken link) is reported to `on_skipped(path, reason)`.
    """
    skipped = on_skipped or (lambda _p, _r: None)

    def walk_error(exc: OSError) -> None:
        skipped(exc.filename or "?", f"folder not read: {exc.strerror or exc}")

    seen: set[str] = set()
    found: dict[str, os.stat_result] = {}
    for root in roots:
        root = Path(root).expanduser()
        try:
            st = root.stat()
        except OSError as exc:
            if os.path.lexists(root):  # a missing root is the caller's to report
                skipped(str(root), f"cannot read: {exc.strerror or exc}")
            continue
        if not stat.S_ISDIR(st.st_mode):
            reason = not_a_file_reason(st.st_mode)
            if reason is None:
                found[str(root.resolve())] = st
            else:
                skipped(str(root), reason)
            continue
        for dirpath, dirnames, filenames in os.walk(root, onerror=walk_error, followlinks=True):
            if cancelled():
                return []
            real = os.path.realpath(dirpath)
            if real in seen:
                dirnames[:] = []
                continue
            seen.add(real)
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for fn in filenames:
                if fn.lower().endswith(".gguf"):
                    full = os.path.join(real, fn)
                    try:
                        st = os.stat(full)
                    except OSError as exc:
                        skipped(full, f"cannot read: {exc.strerror or exc}")
                        continue
                    reason = not_a_file_reason(st.st_mode)
                    if reason is None:
                        found[full] = st
                    else:
                        skipped(full, reason)
    found, aliases = _one_path_per_file(found)
    entries: list[ModelEntry] = []
    for full, st in sorted(found.items()):
        name = os.path.basename(full)
        parts = split_parts(name)
        if parts is not None:
            if parts[1] != 1:
                continue
            files = [str(p) for p in split_set_files(Path(full))]
            size = 0
            mtime = st.st_mtime_ns
            for f in files:
                other = found.get(f)
                if other is None:
                    try:
                        other = os.stat(f)
                    except OSError:
                        continue
                size += other.st_size
                mtime = max(mtime, other.st_mtime_ns)
            entries.append(ModelEntry(full, tuple(files), size, mtime, _is_projector_name(name),
                                      aliases.get(full, ())))
        else:
            entries.append(ModelEntry(full, (full,), st.st_size, st.st_mtime_ns, _is_projector_name(name),
                                      aliases.get(full, ())))
    return entries


def _one_path_per_file(found: dict[str, os.stat_result]) -> tuple[dict[str, os.stat_result],
                                                                     dict[str, tuple[str, ...]]]:
    """Links to the same file (a symlink beside its target, a hard link) are one model: keep the real path,
    else the first name. Returns the kept paths and, per kept path, its other paths."""
    by_file: dict[tuple[int, int], str] = {}
    names: dict[tuple[int, int], list[str]] = {}
    for full, st in sorted(found.items()):
        key = (st.st_dev, st.st_ino)
        names.setdefault(key, []).append(full)
        kept = by_file.get(key)
        if kept is None or (os.path.islink(kept) and not os.path.islink(full)):
            by_file[key] = full
    aliases = {kept: tuple(n for n in names[key] if n != kept) for key, kept in by_file.items() if len(names[key]) > 1}
    return {full: found[full] for full in by_file.values()}, aliases


class _Cache(Protocol):
    """What scan needs from the store (store.model_cache.ModelCacheRepo satisfies it)."""

    def get_many(self, keys: Sequence[tuple[str, int, int]]) -> dict[str, ModelInfo]: ...  # pragma: no cover

    def put_many(self, items: Sequence[tuple[str, int, int, ModelInfo]]) -> None: ...  # pragma: no cover


def scan(entries: Sequence[ModelEntry], *, cache: _Cache | None = None,
         progress: Callable[[float, str], None] | None = None,
         cancelled: Callable[[], bool] = lambda: False,
         on_model: Callable[[ModelInfo], None] | None = None) -> list[ModelInfo]:
    """Read every entry's header (cache first), in entry order.

    Args:
        entries: from `find_models` (the list a UI shows at once).
        cache: the store's model cache; hits are keyed by (path, size, mtime_ns) of the entry.
        progress: called with (fraction 0..1, text) as models are read.
        cancelled: checked between files; when it turns true the models read so far are returned.
        on_model: called with each ModelInfo as soon as it is known.
    """
    keys = [(e.path, e.size_bytes, e.mtime_ns) for e in entries]
    cached = cache.get_many(keys) if cache is not None else {}
    out: list[ModelInfo] = []
    fresh: list[tuple[str, int, int, ModelInfo]] = []
    total = max(1, len(entries))
    last_flush = time.monotonic()
    for i, entry in enumerate(entries):
        if cancelled():
            break
        info = cached.get(entry.path)
        if info is None:
            if progress:
                progress(i / total, f"Reading {entry.file_name} ({i + 1}/{len(entries)})")
            info = read_model(entry.path)
            fresh.append((entry.path, entry.size_bytes, entry.mtime_ns, info))
            if cache is not None and time.monotonic() - last_flush > 2.0:
                cache.put_many(fresh)
                fresh, last_flush = [], time.monotonic()
        out.append(info)
        if on_model:
            on_model(info)
    if cache is not None and fresh:
        cache.put_many(fresh)
    if progress:
        progress(1.0, f"{len(out)} models")
    return out
