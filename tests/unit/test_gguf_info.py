"""Our streaming GGUF header reader agrees with the `gguf` package's GGUFReader, field by field and
tensor by tensor, on real files (the demo model; a real llama.cpp vocabulary file)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType, gguf_reader

from llm_tuner.core.gguf_info import (
    GGUFError,
    classify_tensor,
    file_type_short_name,
    parse_header,
    split_parts,
)
from llm_tuner.services.library import read_header, read_model

VOCAB = Path(__file__).parents[1] / "data" / "vocab" / "ggml-vocab-llama-spm.gguf"
_PSEUDO = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


class _NumpyWithPlainMemmap:
    """numpy, except that `memmap` hands back a plain ndarray view of the mapped file. GGUFReader slices
    its memmap once or twice per vocabulary entry, and every np.memmap slice runs Python hooks
    (__getitem__, __array_finalize__): over the same bytes, a plain view halves the reference parse."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def memmap(path, mode="r"):
        return np.memmap(path, mode=mode).view(np.ndarray)


def reference_reader(path: Path, monkeypatch: pytest.MonkeyPatch) -> GGUFReader:
    with monkeypatch.context() as m:
        m.setattr(gguf_reader, "np", _NumpyWithPlainMemmap())
        return GGUFReader(path)


def assert_agrees_with_gguf_reader(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = reference_reader(path, monkeypatch)
    ours = read_header(path)
    ref_fields = {k: f for k, f in ref.fields.items() if k not in _PSEUDO}
    assert list(ours.kv_types) == list(ref_fields), "same keys in the same order"
    for key, field in ref_fields.items():
        assert ours.kv_types[key] == [int(t) for t in field.types], key
        if key in ours.skipped_arrays:
            item_type, length = ours.skipped_arrays[key]
            assert field.types[0] == GGUFValueType.ARRAY and item_type == field.types[-1]
            assert length == len(field.data), key
        else:
            value = ours.kv[key]
            expected = field.contents()
            if isinstance(expected, list):
                assert len(value) == len(expected) and all(map(_same, value, expected)), key
            else:
                assert _same(value, expected), key
    assert ours.alignment == ref.alignment
    assert ours.data_offset == ref.data_offset
    assert len(ours.tensors) == len(ref.tensors)
    info = read_model(path)
    assert info.error is None
    for mine, theirs in zip(info.tensors, ref.tensors, strict=True):
        assert mine.name == theirs.name
        assert list(mine.shape) == [int(x) for x in theirs.shape]
        assert mine.ggml_type == int(theirs.tensor_type)
        assert mine.type_name == theirs.tensor_type.name
        assert mine.n_bytes == int(theirs.n_bytes)
        assert mine.n_elements == int(theirs.n_elements)
        assert mine.offset == int(theirs.data_offset)
    assert info.n_params == sum(int(t.n_elements) for t in ref.tensors)


@pytest.fixture(scope="session")
def demo_info(demo_model):
    return read_model(demo_model)


def test_agrees_with_gguf_reader_on_the_demo_model(demo_model, monkeypatch):
    # GGUFReader parses all 262,144 vocabulary entries: ~7 s, so this runs once.
    assert_agrees_with_gguf_reader(demo_model, monkeypatch)


def test_agrees_with_gguf_reader_on_a_real_vocab_file(monkeypatch):
    assert_agrees_with_gguf_reader(VOCAB, monkeypatch)


def test_demo_model_facts_a_user_sees(demo_info):
    m = demo_info
    assert (m.architecture, m.name, m.size_label, m.file_type) == ("gemma3", "Gemma 3 270m", "270M", "Q4_K_M")
    assert m.block_count == 18 and m.nextn_layers == 0 and m.expert_count == 0
    assert m.context_length == 32768 and m.embedding_length == 640
    assert m.head_count == 4 and m.head_count_kv == 1 and m.key_length == 256 and m.value_length == 256
    assert m.sliding_window == 512 and m.vocab_size == 262144 and m.tokenizer_model == "llama"
    assert m.size_bytes == Path(m.path).stat().st_size and m.split_count == 1
    assert 260e6 < m.n_params < 275e6
    roles = {t.role for t in m.tensors}
    assert {"attention", "ffn", "embeddings", "norm"} <= roles
    emb = next(t for t in m.tensors if t.name == "token_embd.weight")
    assert emb.shape == (640, 262144) and emb.role == "embeddings" and emb.layer is None
    assert all(t.layer is not None for t in m.tensors if t.name.startswith("blk."))
    # big arrays are summarised, not kept
    assert m.skipped_arrays["tokenizer.ggml.tokens"] == (int(GGUFValueType.STRING), 262144)
    assert "tokenizer.ggml.tokens" not in m.kv


def test_model_info_round_trips_through_json(demo_info):
    again = type(demo_info).model_validate_json(demo_info.model_dump_json())
    assert again == demo_info


def test_stream_without_seek_reads_the_same_as_a_file(demo_model):
    class ReadOnly:
        def __init__(self, fh):
            self.read = fh.read

    with open(demo_model, "rb") as fh:
        header = parse_header(ReadOnly(fh), size=demo_model.stat().st_size)
    assert header == read_header(demo_model)


@pytest.mark.parametrize(("name", "layer", "role"), [
    ("token_embd.weight", None, "embeddings"),
    ("output.weight", None, "output"),
    ("output_norm.weight", None, "norm"),
    ("blk.3.attn_q.weight", 3, "attention"),
    ("blk.3.attn_k_norm.weight", 3, "norm"),
    ("blk.12.ffn_up.weight", 12, "ffn"),
    ("blk.12.ffn_gate_inp.weight", 12, "ffn"),
    ("blk.12.ffn_down_shexp.weight", 12, "ffn"),
    ("blk.12.ffn_gate_exps.weight", 12, "experts"),
    ("blk.12.ffn_gate_up_exps.weight", 12, "experts"),
    ("blk.12.ffn_down_chexps.weight", 12, "experts"),
    ("blk.0.ssm_conv1d.weight", 0, "other"),
])
def test_tensor_roles(name, layer, role):
    assert classify_tensor(name) == (layer, role)


def test_names_and_file_types():
    assert split_parts("Qwen3-235B-Q4_K_M-00001-of-00003.gguf") == ("Qwen3-235B-Q4_K_M", 1, 3)
    assert split_parts("model.gguf") is None
    assert file_type_short_name(15) == "Q4_K_M"
    assert file_type_short_name(0) == "F32"
    assert file_type_short_name(None) is None


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "truncated"),
    (b"GGML" + b"\0" * 40, "bad magic"),
    (b"GGUF" + (1).to_bytes(4, "little") + b"\0" * 16, "version 1"),
    (b"GGUF" + (7).to_bytes(4, "little") + b"\0" * 16, "unsupported GGUF version 7"),
    (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (10**15).to_bytes(8, "little"),
     "absurd key/value count"),
    (b"GGUF" + (3).to_bytes(4, "little") + (2**62).to_bytes(8, "little") + (0).to_bytes(8, "little"),
     "absurd tensor count"),
    (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
     + (2**40).to_bytes(8, "little") + b"x" * 64, "absurd string length"),
    (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
     + (2**29).to_bytes(8, "little") + b"x" * 64, "truncated"),
])
def test_hostile_headers_give_a_one_line_reason(data, reason):
    with pytest.raises(GGUFError) as err:
        parse_header(data)
    assert reason in str(err.value) and "\n" not in str(err.value)


def _write(path, arch: str, build, *, big_endian: bool = False):
    import numpy as np
    from gguf import GGUFEndian, GGUFWriter

    w = GGUFWriter(str(path), arch, endianess=GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE)
    build(w)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_per_layer_arrays_mtp_swa_pattern_and_absent_values(tmp_path):
    def build(w):
        w.add_uint32("hyb.block_count", 4)
        w.add_uint32("hyb.embedding_length", 256)
        w.add_uint32("hyb.nextn_predict_layers", 1)
        w.add_array("hyb.attention.head_count", [8, 8, 8, 8])
        w.add_array("hyb.attention.head_count_kv", [2, 0, 2, 4])
        w.add_array("hyb.attention.sliding_window_pattern", [True, True, False, True])
        w.add_uint32("hyb.attention.sliding_window", 128)
        w.add_string("tokenizer.chat_template", "{{ messages }}")

    info = read_model(_write(tmp_path / "hyb.gguf", "hyb", build))
    assert info.error is None
    assert info.head_count == 8  # uniform list -> its number
    assert info.head_count_kv == [2, 0, 2, 4]  # per layer stays a list
    assert info.per_layer("head_count_kv") == [2, 0, 2, 4] and info.per_layer("head_count") == [8] * 4
    assert info.key_length == 32 and info.value_length == 32  # llama.cpp default n_embd / n_head
    assert info.nextn_layers == 1 and info.n_layer == 3
    assert info.sliding_window_pattern == [True, True, False, True] and info.sliding_window == 128
    assert info.chat_template and info.expert_count == 0 and info.context_length is None
    assert info.file_type == "F32" and info.file_type_guessed  # no general.file_type: guessed like llama.cpp


def test_big_endian_files_read_the_same(tmp_path, monkeypatch):
    def build(w):
        w.add_uint32("llama.block_count", 1)
        w.add_array("llama.attention.head_count_kv", [3])
        w.add_float32("llama.rope.freq_base", 10000.0)

    path = _write(tmp_path / "be.gguf", "llama", build, big_endian=True)
    header = read_header(path)
    assert header.big_endian
    assert header.kv["llama.block_count"] == 1 and header.kv["llama.rope.freq_base"] == 10000.0
    assert_agrees_with_gguf_reader(path, monkeypatch)


def test_a_type_newer_than_the_gguf_package_is_sized_from_llama_cpp(tmp_path):
    import struct

    def build(w):
        w.add_uint32("llama.block_count", 1)

    path = _write(tmp_path / "q2.gguf", "llama", build)
    data = bytearray(path.read_bytes())
    # the one tensor: name, n_dims=2, ne=(32, 4), type F32 -> Q2_0 (42) with ne0 = 64 (one block per row)
    name = b"blk.0.attn_q.weight"
    at = data.index(name) + len(name)
    struct.pack_into("<IqqI", data, at, 2, 64, 4, 42)
    path.write_bytes(bytes(data))
    t = read_header(path).tensors[0]
    assert (t.type_name, t.shape, t.n_bytes) == ("Q2_0", (64, 4), 4 * 18)
