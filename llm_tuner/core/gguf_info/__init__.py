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

The package, by seam: `reader` (GGUFError, TensorInfo, GGUFHeader, parse_header, classify_tensor) and
`model_info` (ModelInfo, model_info_from_headers, split parts, file-type names). Import from the package:
every public name is here.
"""

from __future__ import annotations

from llm_tuner.core.gguf_info.model_info import (
    READER_VERSION,
    ModelInfo,
    error_info,
    file_type_short_name,
    model_info_from_headers,
    split_parts,
)
from llm_tuner.core.gguf_info.reader import (
    KEEP_ARRAY_MAX,
    MAX_ARRAY_ELEMENTS,
    MAX_DIMS,
    MAX_STRING_LENGTH,
    GGUFError,
    GGUFHeader,
    TensorInfo,
    classify_tensor,
    parse_header,
)

__all__ = [
    "GGUFError",
    "GGUFHeader",
    "KEEP_ARRAY_MAX",
    "MAX_ARRAY_ELEMENTS",
    "MAX_DIMS",
    "MAX_STRING_LENGTH",
    "ModelInfo",
    "READER_VERSION",
    "TensorInfo",
    "classify_tensor",
    "error_info",
    "file_type_short_name",
    "model_info_from_headers",
    "parse_header",
    "split_parts",
]
