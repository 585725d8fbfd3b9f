"""Fuzzing the header reader: truncations, bit flips, absurd counts and string lengths only ever give
GGUFError (a one-line reason), never another exception, a huge allocation or a hang."""

from __future__ import annotations

import io
import struct
import tracemalloc

import numpy as np
import pytest
from gguf import GGUFWriter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_tuner.core.gguf_info import GGUFError, parse_header


def _small_gguf(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "small.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_name("fuzz")
    w.add_uint32("llama.block_count", 2)
    w.add_array("llama.attention.head_count_kv", [2, 1])
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(40)])
    w.add_array("tokenizer.ggml.scores", [float(i) for i in range(40)])
    w.add_string("tokenizer.chat_template", "{{ x }}")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 32), np.float16))
    w.add_tensor("blk.1.ffn_up.weight", np.zeros((3, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> bytes:
    return _small_gguf(tmp_path_factory)


class _NoSeek:
    """A pipe-like stream: read(n) only (the reader must skip by reading, and still stop)."""

    def __init__(self, data: bytes) -> None:
        self.read = io.BytesIO(data).read


def _parse_both_ways(data: bytes) -> None:
    outcomes = []
    for source in (data, _NoSeek(data)):
        try:
            # keep_array_max small so skipping (not only keeping) is fuzzed too
            outcomes.append(parse_header(source, keep_array_max=8))
        except GGUFError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg
            outcomes.append(None)
    # with a known size and without, the same verdict (a pipe learns the end by reading)
    if outcomes[0] is not None:
        assert outcomes[1] is not None and outcomes[1].tensors == outcomes[0].tensors


FUZZ = settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_the_valid_file_parses(valid):
    header = parse_header(valid, keep_array_max=8)
    assert [t.name for t in header.tensors] == ["token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight"]
    assert header.skipped_arrays["tokenizer.ggml.tokens"][1] == 40


@FUZZ
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_truncation_anywhere_is_a_reason(valid, cut):
    cut = cut % len(valid)
    with pytest.raises(GGUFError):
        parse_header(valid[:cut])


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips_never_crash(valid, flips):
    data = bytearray(valid)
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    _parse_both_ways(bytes(data))


@FUZZ
@given(pos=st.integers(0, 10_000), value=st.one_of(
    st.sampled_from([2**63 - 1, 2**64 - 1, 2**62, 2**40, 2**32 - 1, 2**31, 10**9, 0]),
    st.integers(0, 2**64 - 1)))
def test_absurd_lengths_and_counts_never_allocate_or_hang(valid, pos, value):
    data = bytearray(valid)
    pos = pos % (len(data) - 8)
    data[pos:pos + 8] = struct.pack("<Q", value)
    tracemalloc.start()
    try:
        _parse_both_ways(bytes(data))
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"peak allocation {peak} bytes for a {len(data)}-byte file"


@FUZZ
@given(junk=st.binary(min_size=0, max_size=512))
def test_random_bytes_after_a_valid_magic(junk):
    _parse_both_ways(b"GGUF" + struct.pack("<I", 3) + junk)
