"""GGUF model metadata and tensor table from a streaming header reader.

Why our own reader: the `gguf` package's `GGUFReader` parses every vocabulary entry into numpy
arrays (about 15 s for a 262,144-token vocabulary); this reader walks the header once, keeps the
small key/values, and *skips* large arrays by their lengths (keeping only their item type and
length), so a header reads in well under 150 ms. It never reads tensor data.

Core does no I/O: `parse_header` takes a binary stream (anything with `read(n)`, and `seek`/`tell`
when it can skip) or a bytes-like object. `services.library.read_model(path)` opens files, finds the
parts of a split set and calls `model_info_from_headers`.

The constants (value types, ggml type sizes, file-type names, key names) come from the `gguf`
package, so this module follows llama.cpp's own tables. Anything malformed (bad magic, unsupported
version, absurd counts or string lengths, truncated data) raises `GGUFError` with a one-line reason;
no other exception escapes `parse_header`, and no allocation exceeds the bytes actually present.
"""

from __future__ import annotations

import io
import re
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, Keys, LlamaFileType
from gguf.constants import GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC
from pydantic import BaseModel, ConfigDict, Field

#: Bump when ModelInfo's content changes, so cached infos written by an older reader are re-read.
READER_VERSION = 1
#: Arrays with more elements than this are skipped (only item type and length are kept).
KEEP_ARRAY_MAX = 4096
#: llama.cpp's own limits (ggml/src/gguf.cpp: GGUF_MAX_STRING_LENGTH, GGUF_MAX_ARRAY_ELEMENTS).
MAX_STRING_LENGTH = 1024 * 1024 * 1024
MAX_ARRAY_ELEMENTS = 1024 * 1024 * 1024
#: ggml's GGML_MAX_DIMS.
MAX_DIMS = 4
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
#: llama_ftype values newer than the installed `gguf` package (include/llama.h).
_EXTRA_FTYPES: dict[int, str] = {41: "Q2_0"}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.")
_SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class GGUFError(Exception):
    """A file that is not a readable GGUF; the message is a one-line reason for the user."""


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
        skipped_arrays: key -> (item type, length) for arrays too large to keep.
        data_offset: where tensor data starts (header end padded to the alignment).
    """

    model_config = ConfigDict(frozen=True)

    version: int
    big_endian: bool = False
    kv: dict[str, Any]
    kv_types: dict[str, list[int]]
    skipped_arrays: dict[str, tuple[int, int]]
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

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
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
        """Skip `count` length-prefixed strings (the vocabulary) without decoding them."""
        unpack_from = u64.unpack_from
        done = 0
        while done < count:
            buf, pos, end = self._buf, self._pos, len(self._buf)
            stop = end - 8
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
            if done < count:
                (n,) = self.unpack(u64, what)
                if n > MAX_STRING_LENGTH:
                    raise GGUFError(f"absurd string length {n} in {what}")
                self.skip(n, what)
                done += 1


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
    if n_tensors < 0 or (remaining is not None and n_tensors > remaining // 32) or n_tensors > MAX_ARRAY_ELEMENTS:
        raise GGUFError(f"absurd tensor count {n_tensors}")
    if n_kv < 0 or (remaining is not None and n_kv > remaining // 13) or n_kv > MAX_ARRAY_ELEMENTS:
        raise GGUFError(f"absurd key/value count {n_kv}")

    def read_str(what: str) -> str:
        (n,) = cur.unpack(u64, what)
        if n > MAX_STRING_LENGTH:
            raise GGUFError(f"absurd string length {n} in {what}")
        return cur.take(n, what).decode("utf-8", errors="replace")

    kv: dict[str, Any] = {}
    kv_types: dict[str, list[int]] = {}
    skipped: dict[str, tuple[int, int]] = {}
    for i in range(n_kv):
        key = read_str(f"key #{i}")
        if key in kv_types:
            raise GGUFError(f"duplicate key {key!r}")
        (vtype,) = cur.unpack(u32, f"type of {key}")
        if vtype == GGUFValueType.STRING:
            kv[key] = read_str(key)
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
                    kv[key] = [read_str(key) for _ in range(n)]
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
        name = read_str(f"tensor #{i} name")
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
                      tensors=tuple(tensors), alignment=alignment, data_offset=data_offset,
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


# --------------------------------------------------------------------------------------------
# Model info
# --------------------------------------------------------------------------------------------


class ModelInfo(BaseModel):
    """What the model picker and the memory plan need about one model (a file or a split set).

    Values follow llama.cpp's reading of the keys (src/llama-model.cpp load_hparams):
    `head_count_kv` defaults to `head_count`; `key_length`/`value_length` default to
    `embedding_length / head_count`; per-layer arrays stay lists (a uniform array becomes its
    number). Counts absent from the file are 0 (`nextn_layers`, `expert_*`); other absent values
    are None. A file that cannot be read has `error` set and the identification fields only.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    files: list[str] = Field(default_factory=list)
    size_bytes: int = 0
    error: str | None = None
    is_projector: bool = False

    architecture: str | None = None
    name: str | None = None
    basename: str | None = None
    size_label: str | None = None
    file_type: str | None = None
    file_type_id: int | None = None
    file_type_guessed: bool = False
    n_params: int | None = None
    tensor_bytes: int | None = None
    block_count: int | None = None
    nextn_layers: int = 0
    context_length: int | None = None
    embedding_length: int | None = None
    feed_forward_length: int | list[int] | None = None
    head_count: int | list[int] | None = None
    head_count_kv: int | list[int] | None = None
    key_length: int | None = None
    value_length: int | None = None
    key_length_swa: int | None = None
    value_length_swa: int | None = None
    key_length_mla: int | None = None
    value_length_mla: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    expert_count: int = 0
    expert_used_count: int = 0
    expert_shared_count: int = 0
    expert_feed_forward_length: int | None = None
    leading_dense_block_count: int = 0
    sliding_window: int | None = None
    sliding_window_pattern: list[bool] | int | None = None
    shared_kv_layers: int | None = None
    rope_freq_base: float | None = None
    rope_dimension_count: int | None = None
    rope_scaling_type: str | None = None
    rope_scaling_factor: float | None = None
    ssm_conv_kernel: int | None = None
    ssm_inner_size: int | None = None
    ssm_state_size: int | None = None
    ssm_group_count: int | None = None
    ssm_time_step_rank: int | None = None
    full_attention_interval: int | None = None
    vocab_size: int | None = None
    tokenizer_model: str | None = None
    tokenizer_pre: str | None = None
    chat_template: bool = False
    split_count: int = 1
    n_tensors: int = 0
    tensors: tuple[TensorInfo, ...] = ()
    kv: dict[str, Any] = Field(default_factory=dict)
    skipped_arrays: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @property
    def n_layer(self) -> int | None:
        """Trunk layers (block_count minus MTP layers), as llama.cpp's hparams.n_layer."""
        return None if self.block_count is None else self.block_count - self.nextn_layers

    def per_layer(self, field: str) -> list | None:
        """A per-layer view of a scalar-or-list field (e.g. 'head_count_kv'), block_count long.

        A scalar is repeated; a list is returned as stored (llama.cpp requires block_count entries).
        """
        value = getattr(self, field)
        if value is None or self.block_count is None:
            return None
        return list(value) if isinstance(value, list) else [value] * self.block_count

    def display_name(self) -> str:
        if self.name:
            return self.name
        base = self.path.replace("\\", "/").rsplit("/", 1)[-1]
        return base[:-5] if base.endswith(".gguf") else base


def split_parts(file_name: str) -> tuple[str, int, int] | None:
    """(prefix, 1-based index, count) for `<prefix>-00001-of-00003.gguf`, else None."""
    m = _SPLIT_RE.match(file_name)
    if not m:
        return None
    return m.group("prefix"), int(m.group("no")), int(m.group("count"))


def file_type_short_name(ftype: int | None) -> str | None:
    """'Q4_K_M' for LlamaFileType.MOSTLY_Q4_K_M (15), 'F32' for ALL_F32; None if unknown."""
    if ftype is None:
        return None
    try:
        name = LlamaFileType(ftype & ~LlamaFileType.GUESSED).name
    except ValueError:
        return _EXTRA_FTYPES.get(ftype & ~LlamaFileType.GUESSED, f"ftype {ftype}")
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _uniform(value: Any) -> Any:
    """A per-layer list whose entries are all equal becomes that number."""
    if isinstance(value, list) and value and all(v == value[0] for v in value):
        return value[0]
    return value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        ints = [v for v in value if isinstance(v, int)]
        return max(ints) if ints else None
    return None


def model_info_from_headers(path: str, files: Sequence[str], headers: Sequence[GGUFHeader],
                            file_sizes: Sequence[int]) -> ModelInfo:
    """Combine the headers of one model's files (one, or every part of a split set) into ModelInfo.

    The first header holds the metadata; tensors come from every part, in part order.
    """
    first = headers[0]
    kv = first.kv
    arch = kv.get("general.architecture") if isinstance(kv.get("general.architecture"), str) else None

    def get(template: str, default: Any = None) -> Any:
        if arch is None:
            return default
        return kv.get(template.format(arch=arch), default)

    tensors: list[TensorInfo] = []
    for idx, header in enumerate(headers):
        for t in header.tensors:
            tensors.append(t if idx == 0 else t.model_copy(update={"file_index": idx}))
    n_params = sum(t.n_elements for t in tensors)

    ftype_id = kv.get("general.file_type")
    guessed = False
    if not isinstance(ftype_id, int) or isinstance(ftype_id, bool):
        ftype_id = None
        counts = Counter(t.ggml_type for t in tensors)
        if counts:
            guessed = True
            top = counts.most_common(1)[0][0]
            short = next(t.type_name for t in tensors if t.ggml_type == top)
            file_type = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}.get(short, short)
        else:
            file_type = None
    else:
        file_type = file_type_short_name(ftype_id)

    embd = _as_int(get(Keys.LLM.EMBEDDING_LENGTH))
    head_count = _uniform(get(Keys.Attention.HEAD_COUNT))
    head_count_kv = _uniform(get(Keys.Attention.HEAD_COUNT_KV))
    if head_count_kv is None:
        head_count_kv = head_count
    n_head_max = _as_int(head_count)
    default_head_dim = embd // n_head_max if embd and n_head_max else None
    key_length = _as_int(get(Keys.Attention.KEY_LENGTH)) or default_head_dim
    value_length = _as_int(get(Keys.Attention.VALUE_LENGTH)) or default_head_dim
    swa_pattern = get(Keys.Attention.SLIDING_WINDOW_PATTERN)
    if isinstance(swa_pattern, list):
        swa_pattern = [bool(x) for x in swa_pattern]
    elif not isinstance(swa_pattern, int):
        swa_pattern = None

    vocab_size = _as_int(get(Keys.LLM.VOCAB_SIZE))
    tokens = "tokenizer.ggml.tokens"
    if vocab_size is None:
        if tokens in first.skipped_arrays:
            vocab_size = first.skipped_arrays[tokens][1]
        elif isinstance(kv.get(tokens), list):
            vocab_size = len(kv[tokens])

    rope_scaling = get(Keys.Rope.SCALING_TYPE)
    split_count = kv.get("split.count") if isinstance(kv.get("split.count"), int) else 1
    file_base = path.replace("\\", "/").rsplit("/", 1)[-1].lower()

    def num(template: str) -> int | None:
        return _as_int(get(template))

    def flt(template: str) -> float | None:
        v = get(template)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def text(key: str) -> str | None:
        v = kv.get(key)
        return v if isinstance(v, str) else None

    small_kv = {k: v for k, v in kv.items() if k != "tokenizer.chat_template" and not (
        isinstance(v, list) and len(v) > 512)}
    return ModelInfo(
        path=path, files=list(files), size_bytes=sum(file_sizes),
        is_projector=arch == "clip" or file_base.startswith("mmproj"),
        architecture=arch, name=text("general.name"), basename=text("general.basename"),
        size_label=text("general.size_label"), file_type=file_type, file_type_id=ftype_id,
        file_type_guessed=guessed, n_params=n_params, tensor_bytes=sum(t.n_bytes for t in tensors),
        block_count=num(Keys.LLM.BLOCK_COUNT), nextn_layers=num(Keys.LLM.NEXTN_PREDICT_LAYERS) or 0,
        context_length=num(Keys.LLM.CONTEXT_LENGTH), embedding_length=embd,
        feed_forward_length=_uniform(get(Keys.LLM.FEED_FORWARD_LENGTH)),
        head_count=head_count, head_count_kv=head_count_kv,
        key_length=key_length, value_length=value_length,
        key_length_swa=num(Keys.Attention.KEY_LENGTH_SWA), value_length_swa=num(Keys.Attention.VALUE_LENGTH_SWA),
        key_length_mla=num(Keys.Attention.KEY_LENGTH_MLA), value_length_mla=num(Keys.Attention.VALUE_LENGTH_MLA),
        kv_lora_rank=num(Keys.Attention.KV_LORA_RANK), q_lora_rank=num(Keys.Attention.Q_LORA_RANK),
        expert_count=num(Keys.LLM.EXPERT_COUNT) or 0, expert_used_count=num(Keys.LLM.EXPERT_USED_COUNT) or 0,
        expert_shared_count=num(Keys.LLM.EXPERT_SHARED_COUNT) or 0,
        expert_feed_forward_length=num(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH),
        leading_dense_block_count=num(Keys.LLM.LEADING_DENSE_BLOCK_COUNT) or 0,
        sliding_window=num(Keys.Attention.SLIDING_WINDOW), sliding_window_pattern=swa_pattern,
        shared_kv_layers=num(Keys.Attention.SHARED_KV_LAYERS),
        rope_freq_base=flt(Keys.Rope.FREQ_BASE), rope_dimension_count=num(Keys.Rope.DIMENSION_COUNT),
        rope_scaling_type=rope_scaling if isinstance(rope_scaling, str) else None,
        rope_scaling_factor=flt(Keys.Rope.SCALING_FACTOR),
        ssm_conv_kernel=num(Keys.SSM.CONV_KERNEL), ssm_inner_size=num(Keys.SSM.INNER_SIZE),
        ssm_state_size=num(Keys.SSM.STATE_SIZE), ssm_group_count=num(Keys.SSM.GROUP_COUNT),
        ssm_time_step_rank=num(Keys.SSM.TIME_STEP_RANK),
        full_attention_interval=num(Keys.LLM.FULL_ATTENTION_INTERVAL),
        vocab_size=vocab_size, tokenizer_model=text("tokenizer.ggml.model"),
        tokenizer_pre=text("tokenizer.ggml.pre"), chat_template=isinstance(kv.get("tokenizer.chat_template"), str),
        split_count=split_count, n_tensors=len(tensors), tensors=tuple(tensors), kv=small_kv,
        skipped_arrays=dict(first.skipped_arrays),
    )


def error_info(path: str, files: Sequence[str], size_bytes: int, reason: str) -> ModelInfo:
    """The ModelInfo of a file that could not be read: identification plus a one-line reason."""
    return ModelInfo(path=path, files=list(files), size_bytes=size_bytes, error=reason.splitlines()[0][:300])
