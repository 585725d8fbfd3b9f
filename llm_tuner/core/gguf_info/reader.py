"""The streaming GGUF header reader: key/values and the tensor table, large arrays skipped."""

from __future__ import annotations

import errno
import io
import os
import re
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.constants import GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC
from pydantic import BaseModel, ConfigDict, Field

from llm_tuner.core.units import format_bytes, printable

#: Arrays with more elements than this are skipped (only item type and length are kept).
KEEP_ARRAY_MAX = 4096
#: llama.cpp's own limits (ggml/src/gguf.cpp: GGUF_MAX_STRING_LENGTH, GGUF_MAX_ARRAY_ELEMENTS).
MAX_STRING_LENGTH = 1024 * 1024 * 1024
MAX_ARRAY_ELEMENTS = 1024 * 1024 * 1024
#: ggml's GGML_MAX_DIMS, and GGML_MAX_NAME (a tensor name is shorter: gguf.cpp rejects longer ones).
MAX_DIMS = 4
MAX_TENSOR_NAME = 64
#: Strings longer than these are skipped, not read: their length is kept (`skipped_strings`, a key's
#: placeholder name), so a header llama.cpp accepts cannot make us allocate or decode a GiB.
KEEP_STRING_MAX = 4 * 1024 * 1024  # chat templates are tens of KiB
KEEP_KEY_MAX = 64 * 1024
KEEP_TOTAL_MAX = 64 * 1024 * 1024  # all kept strings of one header together
_CHUNK = 1 << 20

_SCALAR_FMT = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h", GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?", GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
}
_SCALAR_SIZE = {t: struct.calcsize("<" + f) for t, f in _SCALAR_FMT.items()}
#: ggml types newer than the installed `gguf` package (name, block size, bytes per block), from the
#: llama.cpp tree we test (ggml/src/ggml.c type_traits, ggml-common.h); used only when gguf lacks them.
_EXTRA_TYPES: dict[int, tuple[str, int, int]] = {42: ("Q2_0", 64, 2 + 64 // 4)}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


class GGUFError(Exception):
    """A file that is not a readable GGUF; the message is a one-line reason for the user (the file's own bytes
    in it, a key's name, shown with their control characters escaped: never a second line)."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


# --------------------------------------------------------------------------------------------
# The raw header
# --------------------------------------------------------------------------------------------


class TensorInfo(BaseModel):
    """One tensor of the tensor table (no data).

    Attributes:
        shape: ggml order (ne0 first: the row length), as the file stores it.
        n_bytes: ggml_nbytes, from the `gguf` package's GGML_QUANT_SIZES.
        offset: absolute byte offset of the tensor's data in its file.
        file_index: which file of a split set holds it (0 for single files).
        layer: N of `blk.N.`, None for tensors outside the blocks.
        role: 'attention', 'ffn', 'experts' (the tensors `--cpu-moe` moves: *_exps/*_chexps),
            'embeddings', 'output', 'norm' or 'other'.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    type_name: str
    n_bytes: int
    offset: int
    file_index: int = 0
    layer: int | None = None
    role: str = "other"

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class GGUFHeader(BaseModel):
    """Everything in one GGUF file's header, large arrays summarised.

    Attributes:
        kv: key -> value for scalars, strings and arrays of at most KEEP_ARRAY_MAX elements
            (arrays as lists; strings decoded as UTF-8 with replacement).
        kv_types: key -> [value type] or [ARRAY, item type], like GGUFReader's field types.
        skipped_arrays: key -> (item type, length) for arrays too large to keep (or holding a string too
            long to keep).
        skipped_strings: key -> length in bytes of a string value too long to keep (not in `kv`).
        data_offset: where tensor data starts (header end padded to the alignment).
    """

    model_config = ConfigDict(frozen=True)

    version: int
    big_endian: bool = False
    kv: dict[str, Any]
    kv_types: dict[str, list[int]]
    skipped_arrays: dict[str, tuple[int, int]]
    skipped_strings: dict[str, int] = Field(default_factory=dict)
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int
    file_size: int | None


class _Cursor:
    """Buffered reads over a stream, with bounds checks against the file size."""

    def __init__(self, stream: Any, size: int | None) -> None:
        self._read: Callable[[int], bytes] = stream.read
        self._seek = None
        base = 0
        try:
            if stream.seekable():
                base = stream.tell()
                if size is None:
                    size = stream.seek(0, io.SEEK_END) - base
                    stream.seek(base)
                self._seek = stream.seek
        except (AttributeError, OSError, ValueError):
            self._seek = None
        self._start = base  # absolute position of the header start in the stream
        self._base = 0  # header-relative position of _buf[0]
        self._buf = b""
        self._pos = 0
        self.size = size

    def tell(self) -> int:
        return self._base + self._pos

    def _need(self, n: int, what: str) -> None:
        if n < 0:
            raise GGUFError(f"negative length for {what}")
        if self.size is not None and self.tell() + n > self.size:
            raise GGUFError(f"truncated file: {what} needs {n} bytes at offset {self.tell()}, "
                            f"file has {self.size}")

    def _fill(self, n: int, what: str) -> None:
        avail = len(self._buf) - self._pos
        if avail >= n:
            return
        self._need(n, what)
        parts = [self._buf[self._pos:]]
        self._base += self._pos
        self._pos = 0
        have = avail
        while have < n:
            try:
                # bounded reads: FileIO.read(n) allocates n bytes up front, even near EOF
                chunk = self._read(min(max(n - have, _CHUNK), 16 * _CHUNK))
            except (OSError, ValueError) as exc:
                raise GGUFError(f"read error: {exc}") from None
            if not chunk:
                raise GGUFError(f"truncated file: {what} at offset {self.tell() + have} runs past the end")
            parts.append(bytes(chunk))
            have += len(chunk)
        self._buf = b"".join(parts)

    def take(self, n: int, what: str) -> bytes:
        self._fill(n, what)
        out = self._buf[self._pos:self._pos + n]
        self._pos += n
        return out

    def unpack(self, fmt: struct.Struct, what: str) -> tuple[Any, ...]:
        self._fill(fmt.size, what)
        out = fmt.unpack_from(self._buf, self._pos)
        self._pos += fmt.size
        return out

    def skip(self, n: int, what: str) -> None:
        avail = len(self._buf) - self._pos
        if n <= avail:
            self._pos += n
            return
        self._need(n, what)
        target = self.tell() + n
        if self._seek is not None:
            try:
                self._seek(self._start + target)
            except (OSError, ValueError) as exc:
                raise GGUFError(f"seek error: {exc}") from None
            self._buf, self._pos, self._base = b"", 0, target
            return
        remaining = n - avail
        self._base += len(self._buf)
        self._buf, self._pos = b"", 0
        while remaining > 0:
            try:
                chunk = self._read(min(remaining, _CHUNK))
            except (OSError, ValueError) as exc:
                raise GGUFError(f"read error: {exc}") from None
            if not chunk:
                raise GGUFError(f"truncated file: {what} runs past the end")
            remaining -= len(chunk)
            self._base += len(chunk)

    def skip_strings(self, count: int, u64: struct.Struct, what: str) -> None:
        """Skip `count` length-prefixed strings (the vocabulary) without decoding them.

        A run of identical strings (2^30 empty ones) is skipped by comparing bytes, not string by string.
        """
        unpack_from = u64.unpack_from
        done = 0
        while done < count:
            buf, pos, end = self._buf, self._pos, len(self._buf)
            stop = end - 8
            while pos <= stop and done < count:  # each call skips at least half of a run in the buffer
                k = self._skip_repeats(count - done, unpack_from(buf, pos)[0])
                if not k:
                    break
                done, pos = done + k, self._pos
            if done >= count:
                break
            start_done = done
            # hot loop (262,144 iterations for a large vocabulary): strings wholly inside the buffer;
            # anything else (a string crossing the buffer end, an absurd length) takes the slow path
            for i in range(count - done):
                if pos > stop:
                    done = start_done + i
                    break
                nxt = pos + 8 + unpack_from(buf, pos)[0]
                if nxt > end:
                    done = start_done + i
                    break
                pos = nxt
            else:
                done = count
            self._pos = pos
            if done < count and pos > stop:  # fewer than 8 bytes left in the buffer
                done += self._skip_hole(count - done)
            if done < count:
                (n,) = self.unpack(u64, what)
                if n > MAX_STRING_LENGTH:
                    raise GGUFError(f"absurd string length {n} in {what}")
                self.skip(n, what)
                done += 1


    def _skip_hole(self, left: int) -> int:
        """At the end of the buffer: skip up to `left` empty strings that lie in a hole of a sparse file (read
        as zeros: length 0), found with SEEK_DATA without reading them; return how many (0 where
        unsupported)."""
        seek_data = getattr(os, "SEEK_DATA", None)
        if self._seek is None or seek_data is None:
            return 0
        here = self._start + self.tell()
        try:
            data: int = self._seek(here, seek_data)
        except OSError as exc:  # ENXIO: no data after `here`, a hole to the end; anything else: not supported
            if exc.errno != errno.ENXIO or self.size is None:
                return 0
            data = self._start + self.size
        except ValueError:
            return 0
        try:
            k = min(left, max(0, data - here) // 8)
            self._seek(here + 8 * k)
        except (OSError, ValueError) as exc:
            raise GGUFError(f"seek error: {exc}") from None
        self._base, self._buf, self._pos = self.tell() + 8 * k, b"", 0
        return k

    def _skip_repeats(self, left: int, length: int) -> int:
        """Skip the longest run (up to `left`) of copies of the whole string record at the cursor that lies
        in the buffer, by doubling byte comparisons; return how many were skipped (0 if fewer than 2)."""
        buf, pos = self._buf, self._pos
        unit = 8 + length
        if left < 2 or unit > 64 or pos + 2 * unit > len(buf) or buf[pos:pos + unit] != buf[pos + unit:pos + 2 * unit]:
            return 0
        k = 2
        while 2 * k <= left and pos + 2 * k * unit <= len(buf) and \
                buf[pos:pos + k * unit] == buf[pos + k * unit:pos + 2 * k * unit]:
            k *= 2
        self._pos = pos + k * unit
        return k


def parse_header(source: BinaryIO | bytes | bytearray | memoryview, *, size: int | None = None,
                 keep_array_max: int = KEEP_ARRAY_MAX) -> GGUFHeader:
    """Parse one GGUF file's header from a binary stream or bytes.

    Args:
        source: an open binary stream positioned at the file start (seekable streams skip large
            arrays without reading them), or the file's bytes.
        size: the file size in bytes if known (a seekable stream's size is found by itself);
            it bounds every length so a hostile header cannot make us allocate or wait.
        keep_array_max: arrays longer than this are summarised in `skipped_arrays`.

    Raises:
        GGUFError: bad magic, unsupported version, absurd counts or lengths, truncation.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    try:
        return _parse(_Cursor(source, size), keep_array_max)
    except GGUFError:
        raise
    except (struct.error, UnicodeError, OverflowError, MemoryError, ValueError) as exc:
        raise GGUFError(f"malformed header: {exc}") from None


def _parse(cur: _Cursor, keep_array_max: int) -> GGUFHeader:
    (magic,) = cur.unpack(struct.Struct("<I"), "magic")
    if magic != GGUF_MAGIC:
        raise GGUFError("not a GGUF file (bad magic)")
    raw_version = cur.take(4, "version")
    version = struct.unpack("<I", raw_version)[0]
    big = False
    if version & 0xFFFF == 0 and version != 0:
        big, version = True, struct.unpack(">I", raw_version)[0]
    if version == 1:
        raise GGUFError("GGUF version 1 is no longer supported (convert the model again)")
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version}")
    e = ">" if big else "<"
    u32, u64 = struct.Struct(e + "I"), struct.Struct(e + "Q")
    i64 = struct.Struct(e + "q")
    (n_tensors,) = cur.unpack(i64, "tensor count")
    (n_kv,) = cur.unpack(i64, "key/value count")
    remaining = (cur.size - cur.tell()) if cur.size is not None else None
    # a key/value needs >= 8+4+1 bytes, a tensor info >= 8+4+8+4+8: counts beyond that are absurd
    if n_tensors < 0 or n_tensors > MAX_ARRAY_ELEMENTS:
        raise GGUFError(f"absurd tensor count {n_tensors}")
    if n_kv < 0 or n_kv > MAX_ARRAY_ELEMENTS:
        raise GGUFError(f"absurd key/value count {n_kv}")
    if remaining is not None and n_tensors * 32 + n_kv * 13 > remaining:
        raise GGUFError(f"truncated file: the header declares {n_kv} keys and {n_tensors} tensors, which "
                        f"need at least {format_bytes(n_tensors * 32 + n_kv * 13)}; the file has "
                        f"{format_bytes(remaining)} left after offset {cur.tell()}")
    kept_total = [0]

    def read_str(what: str, keep_max: int = KEEP_STRING_MAX) -> str | int:
        """The string, or its length in bytes (an int) when it is too long to keep: skipped, not read."""
        n = int(cur.unpack(u64, what)[0])
        if n > MAX_STRING_LENGTH:
            raise GGUFError(f"absurd string length {n} in {what}")
        if n > keep_max or (keep_max == KEEP_STRING_MAX and kept_total[0] + n > KEEP_TOTAL_MAX):
            cur.skip(n, what)
            return n
        kept_total[0] += n
        return cur.take(n, what).decode("utf-8", errors="replace")

    kv: dict[str, Any] = {}
    kv_types: dict[str, list[int]] = {}
    skipped: dict[str, tuple[int, int]] = {}
    long_strings: dict[str, int] = {}
    for i in range(n_kv):
        key = read_str(f"key #{i}", KEEP_KEY_MAX)
        if isinstance(key, int):  # reported as what it is, never built into a name
            key = f"<key #{i}: string of {format_bytes(key)}>"
        if key in kv_types:
            raise GGUFError(f"duplicate key {key[:200]!r}")
        (vtype,) = cur.unpack(u32, f"type of {key}")
        if vtype == GGUFValueType.STRING:
            value = read_str(key)
            if isinstance(value, int):
                long_strings[key] = value
            else:
                kv[key] = value
            kv_types[key] = [vtype]
        elif vtype in _SCALAR_FMT:
            (kv[key],) = cur.unpack(struct.Struct(e + _SCALAR_FMT[GGUFValueType(vtype)]), key)
            kv_types[key] = [vtype]
        elif vtype == GGUFValueType.ARRAY:
            (itype,) = cur.unpack(u32, f"item type of {key}")
            (n,) = cur.unpack(u64, f"length of {key}")
            if n > MAX_ARRAY_ELEMENTS:
                raise GGUFError(f"absurd array length {n} in {key}")
            kv_types[key] = [vtype, itype]
            if itype == GGUFValueType.STRING:
                if cur.size is not None and n * 8 > cur.size - cur.tell():
                    raise GGUFError(f"truncated file: array {key} of {n} strings runs past the end")
                if n <= keep_array_max:
                    items = [read_str(key) for _ in range(n)]
                    if any(isinstance(x, int) for x in items):
                        skipped[key] = (itype, n)
                    else:
                        kv[key] = items
                else:
                    cur.skip_strings(n, u64, key)
                    skipped[key] = (itype, n)
            elif itype in _SCALAR_FMT:
                code = _SCALAR_FMT[GGUFValueType(itype)]
                nbytes = n * _SCALAR_SIZE[GGUFValueType(itype)]
                if n <= keep_array_max:
                    kv[key] = list(struct.unpack(f"{e}{n}{code}", cur.take(nbytes, key)))
                else:
                    cur.skip(nbytes, key)
                    skipped[key] = (itype, n)
            else:
                raise GGUFError(f"unsupported array item type {itype} in {key}")
        else:
            raise GGUFError(f"unknown value type {vtype} for key {key}")

    alignment = GGUF_DEFAULT_ALIGNMENT
    if "general.alignment" in kv:
        if kv_types["general.alignment"] != [GGUFValueType.UINT32]:
            raise GGUFError("general.alignment is not a uint32")
        alignment = kv["general.alignment"]
        if alignment == 0 or alignment & (alignment - 1):
            raise GGUFError(f"alignment {alignment} is not a power of 2")

    raw: list[tuple[str, tuple[int, ...], int, int, int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = read_str(f"tensor #{i} name", MAX_TENSOR_NAME - 1)
        if isinstance(name, int):
            raise GGUFError(f"tensor #{i}: name of {format_bytes(name)} (llama.cpp allows "
                            f"{MAX_TENSOR_NAME - 1} bytes)")
        if name in names:
            raise GGUFError(f"duplicate tensor {name!r}")
        names.add(name)
        (n_dims,) = cur.unpack(u32, f"dims of {name}")
        if n_dims > MAX_DIMS:
            raise GGUFError(f"tensor {name} has {n_dims} dimensions (max {MAX_DIMS})")
        shape = struct.unpack(f"{e}{n_dims}q", cur.take(8 * n_dims, f"shape of {name}"))
        if any(d < 0 for d in shape):
            raise GGUFError(f"tensor {name} has a negative dimension {shape}")
        (ttype,) = cur.unpack(u32, f"type of {name}")
        (offset,) = cur.unpack(u64, f"offset of {name}")
        raw.append((name, tuple(shape), ttype, offset, i))

    data_offset = cur.tell()
    data_offset += (-data_offset) % alignment  # as GGUFReader (llama.cpp pads only when there are tensors)
    tensors = []
    data_end = 0
    for name, shape, ttype, offset, _i in raw:
        try:
            qtype = GGMLQuantizationType(ttype)
            block, type_size = GGML_QUANT_SIZES[qtype]
            type_name = qtype.name
        except (ValueError, KeyError):
            if ttype not in _EXTRA_TYPES:
                raise GGUFError(f"tensor {name} has unknown ggml type {ttype}") from None
            type_name, block, type_size = _EXTRA_TYPES[ttype]
        n_el = 1
        for d in shape:
            n_el *= d
        if n_el >= 1 << 63:
            raise GGUFError(f"tensor {name} is absurdly large {shape}")
        if shape and shape[0] % block:
            raise GGUFError(f"tensor {name}: row length {shape[0]} is not a multiple of block size {block}")
        if offset % alignment:
            raise GGUFError(f"tensor {name}: offset {offset} is not a multiple of the alignment {alignment}")
        n_bytes = n_el // block * type_size
        data_end = max(data_end, data_offset + offset + n_bytes)
        layer, role = classify_tensor(name)
        tensors.append(TensorInfo(name=name, shape=shape, ggml_type=ttype, type_name=type_name,
                                  n_bytes=n_bytes, offset=data_offset + offset, layer=layer, role=role))
    if cur.size is not None and data_end > cur.size:
        raise GGUFError(f"truncated file: tensor data ends at byte {data_end}, the file has {cur.size}")
    return GGUFHeader(version=version, big_endian=big, kv=kv, kv_types=kv_types, skipped_arrays=skipped,
                      skipped_strings=long_strings, tensors=tuple(tensors), alignment=alignment, data_offset=data_offset,
                      file_size=cur.size)


def classify_tensor(name: str) -> tuple[int | None, str]:
    """(layer, role) of a tensor name, from llama.cpp's naming (src/llama-arch.cpp LLM_TENSOR_NAMES).

    'experts' are exactly the tensors `--cpu-moe` moves (`\\.ffn_(up|down|gate|gate_up)_(ch|)exps`);
    the router (`ffn_gate_inp`) and shared experts (`*_shexp`) count as 'ffn'.
    """
    m = _LAYER_RE.match(name)
    layer = int(m.group(1)) if m else None
    base = name[m.end():] if m else name
    stem = base.rsplit(".", 1)[0] if base.endswith((".weight", ".bias", ".scale")) else base
    if "norm" in stem:
        role = "norm"
    elif re.search(r"ffn_\w*_(ch)?exps", stem):
        role = "experts"
    elif stem.startswith(("ffn", "ffn_")):
        role = "ffn"
    elif stem.startswith(("attn", "attn_")) or stem.startswith(("wq", "wk", "wv", "wo")):
        role = "attention"
    elif layer is None and stem in ("token_embd", "pos_embd", "token_types", "per_layer_token_embd",
                                    "tok_embeddings"):
        role = "embeddings"
    elif layer is None and stem in ("output", "lm_head"):
        role = "output"
    else:
        role = "other"
    return layer, role
