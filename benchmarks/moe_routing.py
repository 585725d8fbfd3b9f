"""How a random-weight MoE (tests/support/random_gguf.py) routes a prompt: how many experts each ubatch uses.

Issue 42's lent-GPU session measured the random Qwen3-MoE's prefill at about half the speed model's prediction; the
model copies every expert of a host layer to the GPU per ubatch (llama.cpp copies only the experts the ubatch's
tokens route to: ggml_backend_sched_compute_splits, `used_ids`). If this model routed most tokens to a few experts,
the copies would be far fewer and a random MoE would be no fair test of them. This replays the model's forward pass
in numpy with the same weight distributions (matrices N(0, 0.02²) but those writing to the residual stream at
`--out-std`, norms ones, the router F32) and counts, per layer and ubatch, the distinct experts the tokens choose.

    python benchmarks/moe_routing.py [--layers 24] [--tokens 2048] [--ubatch 512] [--out-std 0.0002] [--out FILE]

Differences from llama.cpp, said: no RoPE (with random q and k the scores are random either way), float32 weights
(the session's were Q4_K_M: quantization noise does not move a top-4 choice of random logits systematically), the
prompt's token ids drawn from a Zipf law over the vocabulary (real text: a few frequent tokens, many rare ones)
instead of the shipped prompt texts.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# the lent-GPU session's MoE (benchmarks/sessions/2026-12-06-gpu-speed/driver.sh)
SHAPE = dict(n_embd=2048, n_head=16, n_head_kv=4, head_dim=128, n_expert=32, n_expert_used=4, n_ff_exp=768,
             n_vocab=32000)  # random_gguf's vocabulary (llama SPM)
STD = 0.02
OUT_STD = 0.0002  # the residual writers' (attn_output, ffn_down_exps): random_gguf's residual_std; --out-std


def rms_norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def attention(x: np.ndarray, rng: np.random.Generator, s: dict, out_std: float) -> np.ndarray:
    """Causal GQA attention of Qwen3 (q/k RMS norms, weights N(0, STD²)), without RoPE."""
    n, d = x.shape
    h, hkv, hd = s["n_head"], s["n_head_kv"], s["head_dim"]
    q = (x @ (rng.standard_normal((d, h * hd), np.float32) * STD)).reshape(n, h, hd)
    k = (x @ (rng.standard_normal((d, hkv * hd), np.float32) * STD)).reshape(n, hkv, hd)
    v = (x @ (rng.standard_normal((d, hkv * hd), np.float32) * STD)).reshape(n, hkv, hd)
    q, k = rms_norm(q), rms_norm(k)
    out = np.empty((n, h, hd), np.float32)
    mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
    for i in range(h):
        g = i // (h // hkv)
        sc = q[:, i, :] @ k[:, g, :].T / np.sqrt(hd) + mask
        sc = np.exp(sc - sc.max(axis=1, keepdims=True))
        out[:, i, :] = (sc / sc.sum(axis=1, keepdims=True)) @ v[:, g, :]
    return out.reshape(n, h * hd) @ (rng.standard_normal((h * hd, d), np.float32) * out_std)


def moe(x: np.ndarray, rng: np.random.Generator, s: dict, out_std: float) -> tuple[np.ndarray, np.ndarray]:
    """The routed FFN: (output, chosen experts per token (n, n_expert_used))."""
    n, d = x.shape
    e, k, f = s["n_expert"], s["n_expert_used"], s["n_ff_exp"]
    logits = x @ (rng.standard_normal((d, e), np.float32) * STD)
    top = np.argsort(-logits, axis=1)[:, :k]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    out = np.zeros_like(x)
    for j in range(e):
        gate = rng.standard_normal((d, f), np.float32) * STD
        up = rng.standard_normal((d, f), np.float32) * STD
        down = rng.standard_normal((f, d), np.float32) * out_std
        rows = np.nonzero((top == j).any(axis=1))[0]
        if rows.size == 0:
            continue
        xr = x[rows]
        a = xr @ gate
        hid = a / (1 + np.exp(-a)) * (xr @ up)
        w = p[rows, j] / p[rows][np.arange(rows.size)[:, None], top[rows]].sum(axis=1)  # top-k weights, normalised
        out[rows] += (hid @ down) * w[:, None]
    return out, top


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-std", type=float, default=OUT_STD, help="std of attn_output and ffn_down_exps (the "
                    "tensors that write to the residual stream; random_gguf's default; 0.02 before 2026-12-06)")
    ap.add_argument("--out", help="also write the table here")
    a = ap.parse_args(argv)
    s = SHAPE
    rng = np.random.default_rng(a.seed)
    ranks = np.arange(1, s["n_vocab"] + 1, dtype=np.float64)
    zipf = 1 / ranks ** 1.1
    ids = rng.choice(s["n_vocab"], size=a.tokens, p=zipf / zipf.sum())
    emb = {int(t): rng.standard_normal(s["n_embd"], np.float32) * STD for t in np.unique(ids)}
    x = np.stack([emb[int(t)] for t in ids])
    e, k = s["n_expert"], s["n_expert_used"]
    lines = [f"# Routing of the random MoE (tests/support/random_gguf.py weights): {a.tokens} prompt tokens "
             f"({len(emb)} distinct ids, Zipf 1.1), ubatch {a.ubatch}, {e} experts, {k} used, attn_output and "
             f"ffn_down_exps std {a.out_std:g}", "",
             "| layer | ubatch | experts used | tokens on the busiest expert | share of slots on the 4 busiest | "
             "if uniform: experts used |", "|---|---|---|---|---|---|"]
    t0 = time.time()
    expect_used = e * (1 - (1 - k / e) ** a.ubatch)
    for layer in range(a.layers):
        x = x + attention(rms_norm(x), rng, s, a.out_std)
        out, top = moe(rms_norm(x), rng, s, a.out_std)
        x = x + out
        for u in range(0, a.tokens, a.ubatch):
            counts = np.bincount(top[u:u + a.ubatch].ravel(), minlength=e)
            busiest = np.sort(counts)[::-1]
            lines.append(f"| {layer} | {u // a.ubatch} | {int((counts > 0).sum())} | {int(busiest[0])} of "
                         f"{min(a.ubatch, a.tokens - u)} | {busiest[:4].sum() / counts.sum():.0%} | "
                         f"{expect_used:.1f} |")
        print(lines[-1], f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
