"""Small random-weight GGUF models the REAL llama-server loads, written with the `gguf` package.

    from tests.support.random_gguf import write_gemma3, write_qwen3_dense, write_qwen3_moe
    path = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=4, n_embd=256)

Tensor names, shapes and keys follow llama.cpp's `qwen3`, `qwen3moe` and `gemma3` architectures
(/work/llama-src/src/models/qwen3.cpp, qwen3moe.cpp, gemma3.cpp; key names in src/llama-arch.cpp), so the memory
maths can be checked against llama.cpp's own buffer sizes. The tokenizer is copied from
tests/data/vocab/ggml-vocab-llama-spm.gguf (llama.cpp's models/ folder; 32,000 SentencePiece tokens),
which CI has. Weights are small Gaussian values (std 0.02) so the model computes finite logits; inside
`with zero_weights():` they are zero bytes instead (the same file but for the weight values, seconds sooner:
for tests that read the header only, such as the memory plan's).

Types: `weight_type` for the 2-D/3-D matrices (attention, FFN, experts), `embd_type` for
token_embd, `output_type` for output.weight (`tied_output=True` leaves output.weight out: llama.cpp
then reuses token_embd). Quantised types are those gguf-py can quantise: F32, F16, BF16, Q8_0,
Q4_0, Q4_1, Q5_0, Q5_1. Norms are F32, as converters write them.

The same arguments write the same bytes (the weights come from `seed`): a process writes each model once and
copies it for the next call with the same arguments (a split set is written each time: its parts are named
after the path). Packing the 32,000-token vocabulary and quantising took 1-4 s a model, and fixtures such as the
fake hub's write the same one for every test.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, LlamaFileType
from gguf.quants import quant_shape_to_byte_shape, quantize

from llm_tuner.core.gguf_info import parse_header

VOCAB_FILE = Path(__file__).parents[1] / "data" / "vocab" / "ggml-vocab-llama-spm.gguf"

_FTYPE = {
    "F32": LlamaFileType.ALL_F32, "F16": LlamaFileType.MOSTLY_F16, "BF16": LlamaFileType.MOSTLY_BF16,
    "Q8_0": LlamaFileType.MOSTLY_Q8_0, "Q4_0": LlamaFileType.MOSTLY_Q4_0, "Q4_1": LlamaFileType.MOSTLY_Q4_1,
    "Q5_0": LlamaFileType.MOSTLY_Q5_0, "Q5_1": LlamaFileType.MOSTLY_Q5_1,
}

_vocab_cache: dict[str, tuple[dict, dict]] = {}
_zero_weights = False
_written: dict[tuple, Path] = {}  # (writer, its arguments, zero weights) -> this process's first copy


def _once_per_process(write: Callable[..., Path]) -> Callable[..., Path]:
    """`write(path, **kw)` once per distinct arguments; later calls copy that file to their path."""
    @functools.wraps(write)
    def wrapper(path: Path | str, **kw) -> Path:
        if kw.get("split_max_tensors"):
            return write(path, **kw)
        key = (write.__name__, tuple(sorted(kw.items())), _zero_weights)
        first = _written.get(key)
        if first is None or not first.exists():
            first = write(Path(_cache_dir()) / f"{len(_written)}.gguf", **kw)
            _written[key] = first
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(first, path)
        return Path(path)
    return wrapper


@functools.cache
def _cache_dir() -> str:
    folder = tempfile.mkdtemp(prefix="random-gguf-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


@contextmanager
def zero_weights() -> Iterator[None]:
    """Models written inside get zero bytes for their weights (norms stay ones): the same header, tensor types,
    sizes and offsets, without drawing and quantising millions of random values. Not for models a test runs."""
    global _zero_weights
    was, _zero_weights = _zero_weights, True
    try:
        yield
    finally:
        _zero_weights = was


def load_vocab(path: Path = VOCAB_FILE) -> tuple[dict, dict]:
    """(tokenizer key -> value, key -> value types) from a llama.cpp vocabulary GGUF."""
    key = str(path)
    if key not in _vocab_cache:
        with open(path, "rb") as fh:
            header = parse_header(fh, keep_array_max=10**7)
        kv = {k: v for k, v in header.kv.items() if k.startswith("tokenizer.")}
        types = {k: header.kv_types[k] for k in kv}
        _vocab_cache[key] = (kv, types)
    return _vocab_cache[key]


class _Model:
    def __init__(self, path: Path, arch: str, weight_type: str, seed: int, split_max_tensors: int = 0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.arch = arch
        self.writer = GGUFWriter(str(self.path), arch, split_max_tensors=split_max_tensors)
        self.rng = np.random.default_rng(seed)
        self.weight_type = weight_type

    def tensor(self, name: str, ne: tuple[int, ...], type_name: str | None = None, *, ones: bool = False,
               std: float = 0.02) -> None:
        """Add a tensor of ggml shape `ne` (ne0 first); numpy's shape is the reverse."""
        qtype = GGMLQuantizationType[type_name or self.weight_type]
        shape = tuple(reversed(ne))
        if _zero_weights and not ones:
            if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
                data = np.zeros(shape, np.float32 if qtype == GGMLQuantizationType.F32 else np.float16)
                self.writer.add_tensor(name, data)
            else:
                self.writer.add_tensor(name, np.zeros(quant_shape_to_byte_shape(shape, qtype), np.uint8),
                                       raw_dtype=qtype)
            return
        data = np.ones(shape, np.float32) if ones else (self.rng.standard_normal(shape, np.float32) * std)
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            self.writer.add_tensor(name, quantize(data, qtype))
        else:
            self.writer.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)

    def common_keys(self, *, name: str, n_layer: int, n_embd: int, n_head: int, n_head_kv: int,
                    head_dim: int, n_ctx_train: int, file_type: str) -> None:
        w, a = self.writer, self.arch
        w.add_name(name)
        w.add_type("model")
        w.add_file_type(int(_FTYPE[file_type]))
        w.add_quantization_version(2)
        w.add_uint32(f"{a}.block_count", n_layer)
        w.add_uint32(f"{a}.context_length", n_ctx_train)
        w.add_uint32(f"{a}.embedding_length", n_embd)
        w.add_uint32(f"{a}.attention.head_count", n_head)
        w.add_uint32(f"{a}.attention.head_count_kv", n_head_kv)
        w.add_uint32(f"{a}.attention.key_length", head_dim)
        w.add_uint32(f"{a}.attention.value_length", head_dim)
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
        w.add_float32(f"{a}.rope.freq_base", 1_000_000.0)
        kv, types = load_vocab()
        for key, value in kv.items():
            t = types[key]
            if t[0] == GGUFValueType.ARRAY:
                w.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=GGUFValueType(t[1]))
            else:
                w.add_key_value(key, value, GGUFValueType(t[0]))

    def embeddings_and_output(self, n_embd: int, embd_type: str, output_type: str | None, tied: bool,
                              embd_std: float = 0.02) -> int:
        n_vocab = len(load_vocab()[0]["tokenizer.ggml.tokens"])
        self.tensor("token_embd.weight", (n_embd, n_vocab), embd_type, std=embd_std)
        self.tensor("output_norm.weight", (n_embd,), "F32", ones=True)
        if not tied:
            self.tensor("output.weight", (n_embd, n_vocab), output_type or embd_type)
        return n_vocab

    def attention(self, i: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int,
                  out_std: float = 0.02) -> None:
        self.tensor(f"blk.{i}.attn_norm.weight", (n_embd,), "F32", ones=True)
        self.tensor(f"blk.{i}.attn_q.weight", (n_embd, head_dim * n_head))
        self.tensor(f"blk.{i}.attn_k.weight", (n_embd, head_dim * n_head_kv))
        self.tensor(f"blk.{i}.attn_v.weight", (n_embd, head_dim * n_head_kv))
        self.tensor(f"blk.{i}.attn_output.weight", (head_dim * n_head, n_embd), std=out_std)
        self.tensor(f"blk.{i}.attn_k_norm.weight", (head_dim,), "F32", ones=True)
        self.tensor(f"blk.{i}.attn_q_norm.weight", (head_dim,), "F32", ones=True)
        self.tensor(f"blk.{i}.ffn_norm.weight", (n_embd,), "F32", ones=True)

    def finish(self) -> Path:
        """Write the file(s); for a split set, return the first part (what llama-server is given)."""
        w = self.writer
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return w.format_shard_names(self.path)[0]


@_once_per_process
def write_qwen3_dense(path: Path | str, *, n_layer: int = 4, n_embd: int = 256, n_ff: int = 512,
                      n_head: int = 4, n_head_kv: int = 2, head_dim: int = 64, n_ctx_train: int = 4096,
                      weight_type: str = "Q8_0", embd_type: str = "Q8_0", output_type: str | None = None,
                      tied_output: bool = False, name: str = "Random Qwen3 dense", seed: int = 0,
                      split_max_tensors: int = 0, confident: bool = False) -> Path:
    """Write a random-weight llama.cpp `qwen3` model (dense FFN) and return its path.

    Row lengths (n_embd, n_ff, head_dim * heads) must be multiples of 32 for quantised types.
    `split_max_tensors > 0` writes a split set `<stem>-0000i-of-0000N.gguf` (as gguf-split does)
    and returns its first part.
    `confident=True` makes a model that repeats its input's last token with a wide logit margin: token
    embeddings 2,500× larger (std 50) dominate what the layers add to the residual stream, and the output is
    tied to them, so the next token's logit is |e|·|h| against random dot products of the others. Greedy
    output then does not turn on rounding (other kernels, batch shapes, K/V types give the same tokens), and
    any such model, of any depth, drafts for another with every token accepted: speculative decoding with a
    known acceptance, for throughput (not quality).
    """
    m = _Model(Path(path), "qwen3", weight_type, seed, split_max_tensors)
    m.common_keys(name=name, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                  head_dim=head_dim, n_ctx_train=n_ctx_train, file_type=weight_type)
    m.writer.add_uint32("qwen3.feed_forward_length", n_ff)
    m.embeddings_and_output(n_embd, embd_type, output_type, tied_output or confident,
                            embd_std=50.0 if confident else 0.02)
    for i in range(n_layer):
        m.attention(i, n_embd, n_head, n_head_kv, head_dim)
        m.tensor(f"blk.{i}.ffn_gate.weight", (n_embd, n_ff))
        m.tensor(f"blk.{i}.ffn_down.weight", (n_ff, n_embd))
        m.tensor(f"blk.{i}.ffn_up.weight", (n_embd, n_ff))
    return m.finish()


@_once_per_process
def write_qwen3_moe(path: Path | str, *, n_layer: int = 4, n_embd: int = 256, n_ff: int = 512,
                    n_ff_exp: int = 128, n_expert: int = 8, n_expert_used: int = 2, n_head: int = 4,
                    n_head_kv: int = 2, head_dim: int = 64, n_ctx_train: int = 4096,
                    weight_type: str = "Q8_0", embd_type: str = "Q8_0", output_type: str | None = None,
                    tied_output: bool = False, name: str = "Random Qwen3 MoE", seed: int = 0,
                    split_max_tensors: int = 0, residual_std: float = 0.0002) -> Path:
    """Write a random-weight llama.cpp `qwen3moe` model (router + merged expert tensors per layer).

    Expert tensors are `blk.N.ffn_{gate,up,down}_exps.weight` with ne = (n_embd, n_ff_exp, n_expert)
    (down: (n_ff_exp, n_embd, n_expert)), the names `--cpu-moe` and `-ot exps=CPU` match.

    `residual_std` is the std of the tensors that write to the residual stream (attn_output, ffn_down_exps).
    At the other weights' 0.02 the layers' outputs, shared by neighbouring tokens, outgrow the token embeddings
    and the router sends a prompt's tokens to a few experts: a 512-token ubatch used 9.6 of 32 experts (5-8 in
    most layers) where real routing uses nearly all, so llama.cpp copied ~30 % of the host experts per ubatch to
    a GPU (benchmarks/moe_routing.py; the lent GPU's MoE prefill, issue 42). At 0.0002 the embeddings lead and
    31.9 of 32 are used: prompt speed then pays what a real MoE pays. Sizes and kernels do not change.
    """
    m = _Model(Path(path), "qwen3moe", weight_type, seed, split_max_tensors)
    m.common_keys(name=name, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                  head_dim=head_dim, n_ctx_train=n_ctx_train, file_type=weight_type)
    w = m.writer
    w.add_uint32("qwen3moe.feed_forward_length", n_ff)
    w.add_uint32("qwen3moe.expert_feed_forward_length", n_ff_exp)
    w.add_uint32("qwen3moe.expert_count", n_expert)
    w.add_uint32("qwen3moe.expert_used_count", n_expert_used)
    m.embeddings_and_output(n_embd, embd_type, output_type, tied_output)
    for i in range(n_layer):
        m.attention(i, n_embd, n_head, n_head_kv, head_dim, out_std=residual_std)
        m.tensor(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "F32")
        m.tensor(f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert))
        m.tensor(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), std=residual_std)
        m.tensor(f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert))
    return m.finish()


@_once_per_process
def write_gemma3(path: Path | str, *, n_layer: int = 12, n_embd: int = 640, n_ff: int = 2048, n_head: int = 4,
                 n_head_kv: int = 1, head_dim: int = 256, n_ctx_train: int = 32768, sliding_window: int = 512,
                 weight_type: str = "Q8_0", embd_type: str = "Q8_0", name: str = "Random Gemma 3",
                 seed: int = 0) -> Path:
    """Write a random-weight llama.cpp `gemma3` model (sliding-window attention) and return its path.

    Same tensor names, shapes and keys as Gemma 3 270M (src/models/gemma3.cpp): per layer q/k norms,
    post_attention_norm and post_ffw_norm; output tied to token_embd (no output.weight); no final logit
    softcapping key. `gemma3.attention.sliding_window` > 0 turns on SWA with llama.cpp's default pattern
    of 6 (every 6th layer full attention), so 12 layers give 2 full-attention layers; 0 turns SWA off.
    """
    m = _Model(Path(path), "gemma3", weight_type, seed)
    m.common_keys(name=name, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                  head_dim=head_dim, n_ctx_train=n_ctx_train, file_type=weight_type)
    m.writer.add_uint32("gemma3.feed_forward_length", n_ff)
    m.writer.add_uint32("gemma3.attention.sliding_window", sliding_window)
    m.embeddings_and_output(n_embd, embd_type, None, tied=True)
    for i in range(n_layer):
        m.attention(i, n_embd, n_head, n_head_kv, head_dim)
        m.tensor(f"blk.{i}.post_attention_norm.weight", (n_embd,), "F32", ones=True)
        m.tensor(f"blk.{i}.ffn_gate.weight", (n_embd, n_ff))
        m.tensor(f"blk.{i}.ffn_down.weight", (n_ff, n_embd))
        m.tensor(f"blk.{i}.ffn_up.weight", (n_embd, n_ff))
        m.tensor(f"blk.{i}.post_ffw_norm.weight", (n_embd,), "F32", ones=True)
    return m.finish()
