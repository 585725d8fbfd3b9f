"""A remote GGUF's header read with HTTP range requests, as gguf-parser-go does: the model's metadata and
tensor table, so its memory plan is known before a byte of weights is downloaded.

`RangeFile` is a read-only, seekable file over a URL: the app's one header reader
(`core.gguf_info.parse_header`) reads it as it reads a local file, skipping large arrays by seeking.
A header is a few MiB (a 262,144-token vocabulary is read through; its scores are skipped);
`MAX_HEADER_BYTES` bounds what one header may make us fetch.
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO, cast

from huggingface_hub import get_session

from llm_tuner.core.gguf_info import GGUFError, ModelInfo, error_info, model_info_from_headers, parse_header
from llm_tuner.core.hub_files import RemoteModel
from llm_tuner.core.memory import MemoryPlan, PlacementArgs, host_device, plan_gpus, plan_memory
from llm_tuner.core.units import format_mib
from llm_tuner.services.hub.client import Hub, describe_error, locate

#: More than any real header (the largest vocabularies are ~10 MiB); a hostile one stops here.
MAX_HEADER_BYTES = 128 * 1024 * 1024
READ_TIMEOUT_S = 30.0


class RangeFile(io.RawIOBase):
    """`read(n)` at the current position is one `Range: bytes=a-b` request; `seek` costs nothing."""

    def __init__(self, url: str, size: int, headers: dict[str, str], *,
                 max_bytes: int = MAX_HEADER_BYTES) -> None:
        super().__init__()
        self.url, self.size = url, size
        self._headers = dict(headers)
        self._pos = 0
        self._max = max_bytes
        self.fetched_bytes = 0
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:  # SEEK_DATA/SEEK_HOLE: no holes to find over HTTP
            raise ValueError(f"unsupported whence {whence}")
        if pos < 0:
            raise ValueError("negative position")
        self._pos = pos
        return pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        if end <= self._pos:
            return b""
        want = end - self._pos
        if self.fetched_bytes + want > self._max:
            raise OSError(f"the header needs more than {self._max // (1024 * 1024)} MiB; not read over the "
                          "network")
        headers = {**self._headers, "Range": f"bytes={self._pos}-{end - 1}"}
        self.requests += 1
        with get_session().stream("GET", self.url, headers=headers, timeout=READ_TIMEOUT_S,
                                  follow_redirects=True) as r:
            if r.status_code != 206 and not (r.status_code == 200 and self._pos == 0 and want == self.size):
                if r.status_code == 200:
                    raise OSError("the server ignores range requests (it would send the whole file)")
                raise OSError(f"HTTP {r.status_code} reading bytes {self._pos}-{end - 1}")
            chunks, have = [], 0
            for chunk in r.iter_bytes():
                chunks.append(chunk)
                have += len(chunk)
                if have >= want:
                    break
        data = b"".join(chunks)[:want]
        if len(data) != want:
            raise OSError(f"short answer: {len(data)} of {want} bytes at offset {self._pos}")
        self._pos = end
        self.fetched_bytes += len(data)
        return data

    def readinto(self, b: Any) -> int:  # io.RawIOBase's protocol; the header reader calls read()
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def read_remote_model(hub: Hub, model: RemoteModel) -> ModelInfo:
    """The model's metadata and tensor table from its files' headers, over range requests. Never raises for a
    bad file or a failed request: the reason is in `ModelInfo.error`, as `services.library.read_model`
    does."""
    path = f"{model.repo_id}/{model.name}"
    files = [f"{model.repo_id}/{p.path}" for p in model.files]
    sizes = [p.size_bytes for p in model.files]
    if not model.complete:
        return error_info(path, files, sum(sizes), "the repository lacks parts of this split set")
    headers = []
    try:
        for part in model.files:
            where = locate(hub, model, part)
            size = where.size_bytes if where.size_bytes is not None else part.size_bytes
            with RangeFile(where.url, size, where.headers) as fh:
                try:
                    # a raw binary file (read, seek, tell), which is all the header reader uses of BinaryIO
                    headers.append(parse_header(cast(BinaryIO, fh), size=size))
                except GGUFError as exc:
                    raise GGUFError(f"{part.path}: {exc}" if len(model.files) > 1 else str(exc)) from None
        return model_info_from_headers(path, files, headers, sizes)
    except Exception as exc:  # noqa: BLE001 - one file's failure is that row's reason, not the listing's
        return error_info(path, files, sum(sizes), describe_error(exc, hub))


def default_plan(info: ModelInfo, inventory: Any) -> MemoryPlan:
    """The memory plan of `llama-server -m FILE` with llama.cpp's defaults (fit on) on the devices of
    `inventory` (core.devices.DeviceInventory; None: the host alone, size unknown): the one plan,
    core.memory."""
    cpu_flags = tuple(inventory.host.cpu_flags) if inventory is not None else ()
    return plan_memory(info, PlacementArgs(model=info.path), plan_gpus(inventory), host_device(inventory),
                       cpu_flags=cpu_flags)


def plan_text(plan: MemoryPlan) -> str:
    """'CUDA0 3.1 GiB · Host 812 MiB (235 MiB mmap) · 4,096 ctx': what each device holds (of it, weights the
    host maps from the file: page cache the kernel may evict), the context the plan ran with."""
    parts = [f"{d.name} {format_mib(d.total_mib)}"
             + (f" ({format_mib(d.mapped_mib)} mmap)" if d.mapped_mib >= 1 else "")
             for d in plan.devices if d.total_mib >= 1]
    return " · ".join(parts + [f"{plan.n_ctx:,} ctx"])
