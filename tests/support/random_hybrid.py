"""A small random-weight llama.cpp `qwen35` model (gated delta net + full attention every 4th layer, MTP head).

The Qwen 3.5/3.6 family the field notes are about: KV cache only on the full-attention layers, a
recurrent state (R, S) on the others, an MTP (nextn) block after the trunk. Tensor names and shapes
follow /work/llama-src/src/models/qwen35.cpp (load_arch_tensors); keys src/llama-arch.cpp. Built on
tests/support/random_gguf.py's writer helper.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.random_gguf import _Model


def write_qwen35(path: Path | str, *, n_layer: int = 8, nextn: int = 1, n_embd: int = 512, n_ff: int = 1536,
                 n_head: int = 8, n_head_kv: int = 2, head_dim: int = 64, d_conv: int = 4, d_state: int = 64,
                 n_group: int = 4, n_v_heads: int = 8, interval: int = 4, n_ctx_train: int = 16384,
                 weight_type: str = "Q8_0", seed: int = 0) -> Path:
    m = _Model(Path(path), "qwen35", weight_type, seed)
    a = "qwen35"
    m.common_keys(name="Random Qwen3.5 hybrid", n_layer=n_layer + nextn, n_embd=n_embd, n_head=n_head,
                  n_head_kv=n_head_kv, head_dim=head_dim, n_ctx_train=n_ctx_train, file_type=weight_type)
    w = m.writer
    d_inner = d_state * n_v_heads
    w.add_uint32(f"{a}.feed_forward_length", n_ff)
    w.add_uint32(f"{a}.nextn_predict_layers", nextn)
    w.add_uint32(f"{a}.full_attention_interval", interval)
    w.add_uint32(f"{a}.ssm.conv_kernel", d_conv)
    w.add_uint32(f"{a}.ssm.inner_size", d_inner)
    w.add_uint32(f"{a}.ssm.state_size", d_state)
    w.add_uint32(f"{a}.ssm.time_step_rank", n_v_heads)
    w.add_uint32(f"{a}.ssm.group_count", n_group)
    w.add_uint32(f"{a}.rope.dimension_count", head_dim)
    w.add_array(f"{a}.rope.dimension_sections", [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16, 0])
    m.embeddings_and_output(n_embd, weight_type, None, False)
    key_dim = d_state * n_group
    conv_dim = 2 * key_dim + d_inner

    def attention(i: int) -> None:
        m.tensor(f"blk.{i}.attn_q.weight", (n_embd, head_dim * n_head * 2))
        m.tensor(f"blk.{i}.attn_k.weight", (n_embd, head_dim * n_head_kv))
        m.tensor(f"blk.{i}.attn_v.weight", (n_embd, head_dim * n_head_kv))
        m.tensor(f"blk.{i}.attn_output.weight", (head_dim * n_head, n_embd))
        m.tensor(f"blk.{i}.attn_q_norm.weight", (head_dim,), "F32", ones=True)
        m.tensor(f"blk.{i}.attn_k_norm.weight", (head_dim,), "F32", ones=True)

    def ffn(i: int) -> None:
        m.tensor(f"blk.{i}.ffn_gate.weight", (n_embd, n_ff))
        m.tensor(f"blk.{i}.ffn_down.weight", (n_ff, n_embd))
        m.tensor(f"blk.{i}.ffn_up.weight", (n_embd, n_ff))

    for i in range(n_layer):
        m.tensor(f"blk.{i}.attn_norm.weight", (n_embd,), "F32", ones=True)
        m.tensor(f"blk.{i}.post_attention_norm.weight", (n_embd,), "F32", ones=True)
        if (i + 1) % interval == 0:
            attention(i)
        else:
            m.tensor(f"blk.{i}.attn_qkv.weight", (n_embd, conv_dim))
            m.tensor(f"blk.{i}.attn_gate.weight", (n_embd, d_inner))
            m.tensor(f"blk.{i}.ssm_conv1d.weight", (d_conv, conv_dim), "F32")
            m.tensor(f"blk.{i}.ssm_dt.bias", (n_v_heads,), "F32")
            m.tensor(f"blk.{i}.ssm_a", (n_v_heads,), "F32")
            m.tensor(f"blk.{i}.ssm_beta.weight", (n_embd, n_v_heads), "F32")
            m.tensor(f"blk.{i}.ssm_alpha.weight", (n_embd, n_v_heads), "F32")
            m.tensor(f"blk.{i}.ssm_norm.weight", (d_state,), "F32", ones=True)
            m.tensor(f"blk.{i}.ssm_out.weight", (d_inner, n_embd))
        ffn(i)
    for i in range(n_layer, n_layer + nextn):
        m.tensor(f"blk.{i}.attn_norm.weight", (n_embd,), "F32", ones=True)
        m.tensor(f"blk.{i}.post_attention_norm.weight", (n_embd,), "F32", ones=True)
        attention(i)
        ffn(i)
        m.tensor(f"blk.{i}.nextn.eh_proj.weight", (2 * n_embd, n_embd))
        m.tensor(f"blk.{i}.nextn.enorm.weight", (n_embd,), "F32", ones=True)
        m.tensor(f"blk.{i}.nextn.hnorm.weight", (n_embd,), "F32", ones=True)
        m.tensor(f"blk.{i}.nextn.shared_head_norm.weight", (n_embd,), "F32", ones=True)
    return m.finish()
