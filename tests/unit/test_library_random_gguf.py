"""The random-weight test models (tests/support/random_gguf.py) are real llama.cpp models: the real
llama-server loads them and completes; our reader agrees with GGUFReader on them, split sets included."""

from __future__ import annotations

import pytest
from gguf import GGUFReader

from llm_tuner.services.library import read_model
from tests.conftest import start_server
from tests.support.random_gguf import write_gemma3, write_qwen3_dense, write_qwen3_moe
from tests.unit.test_gguf_info import assert_agrees_with_gguf_reader


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("random_models")
    return {
        "dense": write_qwen3_dense(d / "dense.gguf", n_layer=3),
        "moe": write_qwen3_moe(d / "moe.gguf", n_layer=3, tied_output=True),
        "split": write_qwen3_moe(d / "split.gguf", n_layer=3, split_max_tensors=15, weight_type="Q4_0"),
        "gemma": write_gemma3(d / "gemma.gguf", n_layer=7, n_embd=256, n_ff=512, head_dim=64, sliding_window=128),
    }


def test_the_real_llama_server_loads_and_completes_each(models, server_binary):
    for kind, path in models.items():
        running = start_server(server_binary, path, ctx=512)
        try:
            out = running.client.completion("Hello", n_predict=3)
            assert out["tokens_predicted"] == 3, kind
        finally:
            running.client.close()
            running.process.stop()


def test_reader_agrees_with_gguf_reader_on_random_models(models, monkeypatch):
    assert_agrees_with_gguf_reader(models["dense"], monkeypatch)
    assert_agrees_with_gguf_reader(models["moe"], monkeypatch)


def test_model_facts(models):
    dense, moe = read_model(models["dense"]), read_model(models["moe"])
    assert (dense.architecture, dense.file_type, dense.block_count, dense.expert_count) == ("qwen3", "Q8_0", 3, 0)
    assert dense.head_count == 4 and dense.head_count_kv == 2 and dense.key_length == 64
    assert dense.vocab_size == 32000 and dense.tokenizer_model == "llama"
    assert (moe.architecture, moe.expert_count, moe.expert_used_count) == ("qwen3moe", 8, 2)
    assert not any(t.name == "output.weight" for t in moe.tensors)  # tied: llama.cpp reuses token_embd
    experts = [t for t in moe.tensors if t.role == "experts"]
    assert len(experts) == 3 * 3 and all(t.shape[2] == 8 for t in experts)


def test_gemma3_has_the_real_models_layout(models):
    gemma = read_model(models["gemma"])
    assert (gemma.architecture, gemma.block_count, gemma.sliding_window) == ("gemma3", 7, 128)
    assert gemma.head_count == 4 and gemma.head_count_kv == 1 and gemma.key_length == 64
    names = {t.name for t in gemma.tensors}
    assert "output.weight" not in names  # tied, as in Gemma 3 270M
    assert {"blk.6.post_attention_norm.weight", "blk.6.post_ffw_norm.weight", "blk.6.attn_q_norm.weight"} <= names


def test_a_split_set_reads_as_one_model(models):
    first = models["split"]
    assert first.name.endswith("-00001-of-00003.gguf")
    info = read_model(first)
    assert info.error is None and info.split_count == 3 and len(info.files) == 3
    assert info.size_bytes == sum(f.stat().st_size for f in first.parent.glob("split-0000*-of-00003.gguf"))
    ref = [t for i, f in enumerate(sorted(first.parent.glob("split-*.gguf")))
           for t in ((i, x) for x in GGUFReader(f).tensors)]
    assert [(t.file_index, t.name, t.offset, t.n_bytes) for t in info.tensors] == [
        (i, t.name, int(t.data_offset), int(t.n_bytes)) for i, t in ref]
    # a later part alone is not a model: the user is told to open the first part
    second = read_model(first.with_name("split-00002-of-00003.gguf"))
    assert second.error and "first part" in second.error
    # a missing part is named
    first.with_name("split-00003-of-00003.gguf").unlink()
    broken = read_model(first)
    assert broken.error and "split-00003-of-00003.gguf" in broken.error
