"""Download a model's files into a models folder: progress, cancel, resume, checksum.

The bytes come through the library's public HTTP client (`huggingface_hub.get_session`, its errors through
`hf_raise_for_status`); a connection dropped midway is resumed here with a range request (`_fetch`: up to
`ATTEMPTS` tries without a new byte, as the library's own download does). The library's `http_get` did this
before; it is not part of the library's public face (`huggingface_hub.file_download`, not exported), so it
could change under us in any release. Across calls: each file grows as `<name>.part` beside its final name,
with `<name>.part.json` saying which version of the file it is (the hub's ETag), so a download cancelled, or
cut by a crash or a closed laptop, goes on from where it stopped the next time (a changed file on the hub
starts over). When the repository gives a sha256 (the hub does for every LFS file) the finished file is
checked against it before it takes its name; a mismatch is removed, never listed. Only complete, checked files
ever carry a `.gguf` name, so the library never lists half a model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import httpx2
from huggingface_hub import get_session, hf_raise_for_status

from llm_tuner.core.hub_files import RemoteFile, RemoteModel
from llm_tuner.core.units import format_bytes
from llm_tuner.services.hub.client import Hub, locate
from llm_tuner.services.paths import data_dir

log = logging.getLogger(__name__)

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_HASH_CHUNK = 8 * 1024 * 1024
_DOWNLOAD_CHUNK = 1024 * 1024
#: Tries at one file in a row without a new byte (a dropped connection is tried again from where it stopped).
ATTEMPTS = 5
#: How long the hub or its CDN may stay silent before a read is an error (then tried again; seconds).
READ_TIMEOUT_S = 30.0


class DownloadCancelled(Exception):
    """The user cancelled; what was downloaded is kept for the next try."""


class ChecksumError(Exception):
    """The downloaded bytes are not the file the repository describes (removed)."""


class NotEnoughSpace(OSError):
    """The models folder's disk has less free space than the download needs (checked before a byte is
    written)."""


@dataclass(frozen=True)
class DownloadProgress:
    """Where a download is: bytes of the whole model (every part), and what it is doing now."""

    done_bytes: int
    total_bytes: int
    file_name: str
    phase: str  # 'download' | 'verify'
    resumed_from: int = 0  # bytes of this file already there when it (re)started

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0

    def text(self) -> str:
        what = "Checking" if self.phase == "verify" else "Downloading"
        resumed = f", resumed at {format_bytes(self.resumed_from)}" if self.resumed_from else ""
        done, total = format_bytes(self.done_bytes), format_bytes(self.total_bytes)
        return f"{what} {self.file_name}: {done} of {total}{resumed}"


def partial_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def _sidecar(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part.json")


def download_folder(settings: _Settings) -> Path:
    """Where a download goes unless told: the first of the settings' model folders, else `models` in the data
    folder (core.settings.Settings)."""
    return Path(settings.model_folders[0]).expanduser() if settings.model_folders else data_dir() / "models"


def destination(model: RemoteModel, folder: Path | str) -> Path:
    """Where the model's first file lands: the folder, the repository's file name (its sub-folders
    dropped)."""
    return Path(folder).expanduser() / model.file_name


class _Settings(Protocol):
    model_folders: list[str]


def download_model(hub: Hub, model: RemoteModel, folder: Path | str, *,
                   progress: Callable[[DownloadProgress], None] | None = None,
                   cancelled: Callable[[], bool] = lambda: False) -> Path:
    """Download every file of `model` into `folder`; return the first file's path (what `-m` takes).

    Raises:
        DownloadCancelled: `cancelled()` turned true; the partial file stays for the next call.
        ChecksumError: a file's sha256 is not the repository's (the bad file is removed).
        NotEnoughSpace: the folder's disk lacks room for what is left to download (nothing is written).
        FileExistsError: a different file already has that name in the folder.
        OSError, huggingface_hub errors: the network or the disk, with the library's message.
    """
    if not model.complete:
        raise ValueError("the repository lacks parts of this split set")
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    _check_space(folder, missing_bytes(model, folder), model.file_name)
    report = progress or (lambda _p: None)
    total = model.size_bytes
    done_before = 0
    for part in model.files:
        dest = folder / part.path.rsplit("/", 1)[-1]
        _download_part(hub, model, part, dest, done_before, total, report, cancelled)
        done_before += part.size_bytes
    return destination(model, folder)


def missing_bytes(model: RemoteModel, folder: Path | str) -> int:
    """What is left to download of `model` into `folder`: its parts' sizes less the files already there (whole
    or as a `.part` to resume). A file there of another size counts whole (it is refused at its turn)."""
    folder = Path(folder).expanduser()
    left = 0
    for part in model.files:
        dest = folder / part.path.rsplit("/", 1)[-1]
        partial = partial_path(dest)
        if dest.is_file() and dest.stat().st_size == part.size_bytes:
            continue
        have = partial.stat().st_size if partial.is_file() else 0
        left += part.size_bytes - have if have <= part.size_bytes else part.size_bytes
    return left


def _check_space(folder: Path, needed: int, name: str) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise NotEnoughSpace(f"not enough free space in {folder}: {name} needs {format_bytes(needed)} more, "
                             f"{format_bytes(free)} is free. Free space there, or choose another folder")


def _download_part(hub: Hub, model: RemoteModel, part: RemoteFile, dest: Path, done_before: int, total: int,
                   report: Callable[[DownloadProgress], None], cancelled: Callable[[], bool]) -> None:
    name = dest.name

    def on_hashed(n: int) -> None:
        report(DownloadProgress(done_before + n, total, name, "verify"))

    # downloaded before (another part's failure, or the same model again): keep it if it is this
    if dest.exists():
        if dest.stat().st_size == part.size_bytes and (part.sha256 is None or
                                                       _sha256(dest, on_hashed, cancelled) == part.sha256):
            on_hashed(part.size_bytes)
            return
        raise FileExistsError(f"{dest} already exists and is another file: remove it or choose another "
                              "folder")
    where = locate(hub, model, part)
    size = where.size_bytes if where.size_bytes is not None else part.size_bytes
    expected_sha = part.sha256 or (where.etag if where.etag and _SHA256_RE.match(where.etag) else None)
    part_file, sidecar = partial_path(dest), _sidecar(dest)
    state = {"repo": model.repo_id, "file": part.path, "etag": where.etag, "size": size}
    resume = 0
    if part_file.exists():
        try:
            same = json.loads(sidecar.read_text()) == state
        except (OSError, ValueError):
            same = False
        resume = part_file.stat().st_size if same else 0
        if resume > size:
            resume = 0
    _check_space(dest.parent, size - resume, name)
    sidecar.write_text(json.dumps(state))
    if resume:
        log.info("resuming %s at %d of %d bytes", name, resume, size)

    def on_written(position: int) -> None:
        report(DownloadProgress(done_before + position, total, name, "download", resume))

    with open(part_file, "r+b" if resume else "wb") as fh:
        fh.seek(resume)
        fh.truncate()
        report(DownloadProgress(done_before + resume, total, name, "download", resume))
        if resume < size:
            _fetch(where.url, where.headers, fh, resume, size, on_written, cancelled)
        fh.flush()
        os.fsync(fh.fileno())
    if expected_sha is not None:
        digest = _sha256(part_file, on_hashed, cancelled)
        if digest != expected_sha:
            part_file.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
            raise ChecksumError(f"{name}: the downloaded file's sha256 ({digest[:12]}…) is not the "
                                f"repository's ({expected_sha[:12]}…); it was removed. Download it again.")
    os.replace(part_file, dest)
    sidecar.unlink(missing_ok=True)


def _fetch(url: str, headers: dict[str, str], fh: BinaryIO, position: int, size: int,
           on_written: Callable[[int], None], cancelled: Callable[[], bool]) -> None:
    """Write the bytes of `url` from `position` to `size` into `fh` (at `position`). A connection that drops
    or stalls is asked again from the byte it stopped at; `ATTEMPTS` tries in a row without a new byte give up
    with the last error. A server that ignores the range sends the whole file: it is written from the
    start."""
    failures = 0
    while position < size:
        ask = dict(headers)
        if position:
            ask["Range"] = f"bytes={position}-"
        before = position
        try:
            with get_session().stream("GET", url, headers=ask, timeout=READ_TIMEOUT_S,
                                      follow_redirects=True) as response:
                hf_raise_for_status(response)
                if position and response.status_code != 206:  # the range was ignored: the whole file comes
                    position = 0
                    fh.seek(0)
                    fh.truncate()
                    on_written(0)
                for chunk in response.iter_bytes(_DOWNLOAD_CHUNK):
                    fh.write(chunk)
                    position += len(chunk)
                    on_written(position)
                    if cancelled():
                        raise DownloadCancelled()
        except httpx2.TransportError as exc:  # dropped, reset, timed out: below, tried again or given up
            failures = 0 if position > before else failures + 1
            if failures >= ATTEMPTS:
                raise
            log.warning("download of %s interrupted at %d of %d bytes (%s); trying again",
                        url, position, size, exc)
            if position == before:
                time.sleep(1.0)
            continue
        if position == before:  # the server ended the body without a byte and without an error
            failures += 1
            if failures >= ATTEMPTS:
                raise OSError(f"the server stopped sending at byte {position} of {size}")
    if position != size:
        raise OSError(f"the server sent {position} bytes, the file has {size}: download it again")


def _sha256(path: Path, on_hashed: Callable[[int], None], cancelled: Callable[[], bool]) -> str:
    h = hashlib.sha256()
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            h.update(chunk)
            done += len(chunk)
            on_hashed(done)
            if cancelled():
                raise DownloadCancelled()
    return h.hexdigest()
