"""Headers llama.cpp accepts but that would stall a naive reader: read in bounded time and memory, and the
odd values reported as what they are; a truncated header says that it is truncated."""

from __future__ import annotations

import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

from gguf import GGUFValueType

from llm_tuner.core.gguf_info import parse_header
from llm_tuner.services.library import read_model

GIB = 1 << 30


def _string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def _sparse_gguf(path: Path, kvs: bytes, n_kv: int, tail_bytes: int) -> Path:
    """magic, version 3, 0 tensors, `n_kv` key/values whose bytes are `kvs` followed by `tail_bytes` zero bytes
    (a hole in a sparse file: nothing is written)."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + kvs)
        f.truncate(f.tell() + tail_bytes)
    return path


def test_a_gib_long_architecture_is_reported_as_such_without_reading_it(tmp_path):
    kvs = _string(b"general.architecture") + struct.pack("<IQ", GGUFValueType.STRING, GIB)
    path = _sparse_gguf(tmp_path / "big-arch.gguf", kvs, 1, GIB)
    tracemalloc.start()
    try:
        info = read_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.error == "general.architecture is a string of 1.00 GiB, not an architecture llama.cpp knows"
    assert peak < 64 * 2**20  # it took 2.15 GB


def test_a_gib_long_key_is_not_built_into_a_key_name(tmp_path):
    kvs = struct.pack("<Q", GIB)
    path = _sparse_gguf(tmp_path / "big-key.gguf", kvs, 1, GIB)
    with open(path, "r+b") as f:  # the value after the key: a uint32
        f.seek(0, 2)
        f.write(struct.pack("<II", GGUFValueType.UINT32, 7))
    with open(path, "rb") as f:
        header = parse_header(f)
    assert header.kv == {"<key #0: string of 1.00 GiB>": 7}


def test_an_array_of_two_to_the_30_empty_strings_is_skipped_quickly(tmp_path):
    kvs = _string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", GGUFValueType.ARRAY, GGUFValueType.STRING, GIB)
    path = _sparse_gguf(tmp_path / "empty-strings.gguf", kvs, 1, 8 * GIB)  # 2^30 zero lengths
    code = ("import sys, resource; from llm_tuner.core.gguf_info import parse_header;"
            f"h = parse_header(open({str(path)!r}, 'rb'));"
            "print(h.skipped_arrays['tokenizer.ggml.tokens'][1], resource.getrusage(resource.RUSAGE_SELF).ru_utime)")
    # a hang guard, not a rate: string by string this took over 20 s of CPU
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    count, _cpu_s = out.stdout.split()
    assert int(count) == GIB


def test_a_truncated_header_says_truncated_not_absurd(tmp_path, demo_model):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(demo_model.read_bytes()[:4096])
    info = read_model(cut)
    assert "absurd" not in info.error
    assert info.error.startswith("truncated file: the header declares")
    assert "236 tensors" in info.error
