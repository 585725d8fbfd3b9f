"""KV cache, output buffer and compute buffer sizes per device."""

from __future__ import annotations

import re

from llm_tuner.core.memory.args import PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import _C_ATTN_NOFA, _C_FFN, _C_FFN_RESIDUAL, _RS_ROLLBACK, CTX_PAD, MIB
from llm_tuner.core.memory.model_view import _ModelView, _pad, row_size
from llm_tuner.core.memory.placement import TensorPlacement

# ------------------------------------------------------------------------------------------------
# KV cache, output, compute
# ------------------------------------------------------------------------------------------------


def _n_ctx(view: _ModelView, args: PlacementArgs) -> tuple[int, int]:
    """(n_ctx, n_ctx_seq) as llama_context computes them (llama-context.cpp:292-307).

    With fit on and the context unset (or -c 0) and KV not unified, fit first sets n_ctx to the trained
    context times the number of streams (common/fit.cpp "context size unset and KV cache not unified").
    """
    n_seq = args.n_seq_max
    if args.ctx:
        n_ctx = args.ctx
    elif args.fit and not args.unified:
        n_ctx = view.n_ctx_train * n_seq
    else:
        n_ctx = view.n_ctx_train
    n_ctx = _pad(n_ctx, CTX_PAD)
    if args.unified:
        return n_ctx, n_ctx
    n_ctx_seq = _pad(n_ctx // n_seq, CTX_PAD)
    return n_ctx_seq * n_seq, n_ctx_seq


def _flash_attn(view: _ModelView, args: PlacementArgs, devs: list[PlanDevice]) -> bool:
    if args.flash_attn == "on":
        return True
    if args.flash_attn == "off":
        return False
    # auto: enabled when every device that runs attention supports it (CPU, CUDA, Metal, Vulkan do)
    return True


def _tensor_shares(args: PlacementArgs, layer_dev: list[str]) -> dict[str, float]:
    """-sm tensor: the share of each GPU (by -ts, else even) of every tensor-parallel layer."""
    gpus = list(dict.fromkeys(d for d in layer_dev if d != "Host"))
    if len(gpus) < 2:
        return {}
    ts = [float(x) for x in args.tensor_split[:len(gpus)]]
    if len(ts) < len(gpus) or not any(ts):
        ts = [1.0] * len(gpus)
    total = sum(ts)
    return {g: t / total for g, t in zip(gpus, ts, strict=False)}


def _kv(view: _ModelView, args: PlacementArgs, layer_dev: list[str], fa: bool, *, mtp_ctx: bool = False,
        type_k: str | None = None, type_v: str | None = None
        ) -> tuple[dict[str, float], list[tuple[str, int, int]], int, int, int]:
    """KV MiB per device, (cache, cells, layers) list, base cells, swa cells, largest host layer (bytes)."""
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_seq = args.n_seq_max
    n_stream = 1 if args.unified else n_seq
    kv_size = n_ctx_seq
    n_ubatch = min(args.n_ubatch, args.n_batch, n_ctx)
    swa_cells = _pad(min(kv_size, view.n_swa * (n_seq if args.unified else 1) + n_ubatch), CTX_PAD)
    if args.swa_full:
        swa_cells = kv_size
    tk = (type_k or args.cache_type_k).upper()
    tv = (type_v or args.cache_type_v).upper()
    v_trans = not fa
    attn_layers = [il for il in range(view.n_layer_all) if not view.recurrent[il]]
    v_max = max((view.v_len[il] * view.n_head_kv[il] for il in attn_layers), default=0)
    out: dict[str, float] = {}
    host_layer_max = 0
    tensor_shares = _tensor_shares(args, layer_dev) if args.split_mode == "tensor" else {}
    count = {"base": 0, "swa": 0}
    use_filter = view.n_nextn > 0 and view.n_layer > 0
    for il in attn_layers:
        if use_filter and (il >= view.n_layer) != mtp_ctx:
            continue
        if not use_filter and mtp_ctx:
            continue
        swa = view.is_swa[il]
        cells = swa_cells if swa else kv_size
        nk = view.k_len[il] * view.n_head_kv[il]
        nv = v_max if v_trans else view.v_len[il] * view.n_head_kv[il]
        b = row_size(tk, nk) * cells * n_stream
        if not view.is_mla:
            b += row_size(tv, nv) * cells * n_stream
        dev = "Host" if args.no_kv_offload else layer_dev[il]
        if tensor_shares and dev != "Host":
            # -sm tensor: every layer's heads (and so its KV) are spread over the devices by -ts
            for name, share in tensor_shares.items():
                out[name] = out.get(name, 0.0) + b * share / MIB
        else:
            out[dev] = out.get(dev, 0.0) + b / MIB
        if dev == "Host":
            host_layer_max = max(host_layer_max, b)
        count["swa" if swa else "base"] += 1
    caches = []
    if count["base"]:
        caches.append(("base", kv_size, count["base"]))
    if count["swa"]:
        caches.append(("swa", swa_cells, count["swa"]))
    # recurrent state (Mamba / hybrid): F32 R and S per layer, rows = n_seq
    rs_layers = [il for il in range(view.n_layer_all) if view.recurrent[il]]
    if rs_layers and (view.n_embd_r or view.n_embd_s) and not mtp_ctx:
        # F32 R and S rows per sequence, times (1 + n_rs_seq) when a draft needs partial rollback
        n_rs_seq = 0
        if view.arch in _RS_ROLLBACK and any(t in ("draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark")
                                             for t in args.spec_types):
            n_rs_seq = args.draft_n_max
        rows = max(1, n_seq) * (1 + n_rs_seq)
        for il in rs_layers:
            if il >= view.n_layer:
                continue
            dev = "Host" if args.no_kv_offload else layer_dev[il]
            out[dev] = out.get(dev, 0.0) + (view.n_embd_r + view.n_embd_s) * 4 * rows / MIB
    return out, caches, kv_size, swa_cells, host_layer_max


def _n_outputs_max(args: PlacementArgs) -> int:
    """server_output_limits: min(n_batch, n_parallel * (1 + n_draft))."""
    if args.embeddings:
        return args.n_batch
    n_draft = 0
    for s in args.spec_types:
        if s.startswith("draft-"):
            n_draft = max(n_draft, args.draft_n_max)
        elif s in ("ngram-simple", "ngram-map-k", "ngram-map-k4v"):
            n_draft = max(n_draft, args.ngram_size_m)
        elif s == "ngram-mod":
            n_draft = max(n_draft, 64)
    return max(1, min(args.n_batch, args.n_seq_max * (1 + n_draft)))


def _compute(view: _ModelView, args: PlacementArgs, layer_dev: list[str], placements: list[TensorPlacement],
             fa: bool, kv_cells: int, swa_cells: int, devs: list[PlanDevice],
             kv_host_layer: int = 0, pp: bool | None = None) -> dict[str, float]:
    """Compute buffer MiB per device: analytic worst-case graph (see module docstring). `pp` forces pipeline
    parallelism on or off (None: llama.cpp's own rule, `pipeline_parallel_on`), to say what it changes."""
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_batch = min(args.n_batch, n_ctx)
    T = min(n_ctx, min(args.n_ubatch, n_batch))  # noqa: N806
    O = min(T, _n_outputs_max(args))  # noqa: N806, E741
    E, F = view.n_embd, view.n_ff  # noqa: N806
    mask_b = 2 if fa else 4
    n_stream = 1 if args.unified else args.n_seq_max
    base_kv = kv_cells * n_stream if n_stream > 1 else kv_cells
    # masks: [n_kv, T/n_stream, 1, n_stream] per distinct cache
    has_base = any(not s and not r for s, r in zip(view.is_swa, view.recurrent, strict=False))
    has_swa = any(view.is_swa)
    mask = 0
    if has_base:
        mask += kv_cells * T * mask_b
    if has_swa:
        mask += swa_cells * T * mask_b
    del base_kv
    hq = max(h * k for h, k in zip(view.n_head, view.k_len, strict=False)) if view.n_head else E
    hkv = max((h * k for h, k in zip(view.n_head_kv, view.k_len, strict=False)), default=0)
    heads = max(view.n_head) if view.n_head else 1
    if view.n_expert and view.n_ff_exp:
        ffn = (_C_FFN_RESIDUAL * E + _C_FFN * view.n_expert_used * view.n_ff_exp + 3 * view.n_expert) * T * 4
        if view.n_ff and any(t.name.endswith("ffn_up_shexp.weight") for t in view.tensors):
            ffn += 2 * view.n_ff * T * 4
    else:
        ffn = (_C_FFN_RESIDUAL * E + _C_FFN * F) * T * 4
    if fa:
        attn: float = (2 * E + 3 * hq + 2 * hkv) * T * 4
    else:
        a, b, c = _C_ATTN_NOFA
        n_kv_max = kv_cells if has_base else swa_cells
        attn = heads * n_kv_max * T * 4 + (a * E + b * hq + c * hkv) * T * 4
    layer_peak = max(ffn, attn)
    out_peak = view.n_vocab * O * 4 + 5 * E * T * 4  # logits + final norm/residual rows (fitted)
    inputs = T * 4 * 3 + O * 4
    per_dev: dict[str, float] = {}
    layer_devs = set(layer_dev[:-1])
    for dev in layer_devs:
        peak = layer_peak
        if layer_dev[-1] == dev:
            peak = max(peak, out_peak)
        per_dev[dev] = (mask + peak + inputs) / MIB
    if layer_dev[-1] not in per_dev:
        per_dev[layer_dev[-1]] = (out_peak + inputs) / MIB
    gpu_devs = [d.name for d in devs if d.backend != "CPU"]
    if gpu_devs:
        per_dev.update(_compute_gpu(view, args, layer_dev, placements, devs, gpu_devs, fa, T, mask, inputs,
                                    ffn, attn, out_peak, kv_cells, swa_cells, pp))
    return per_dev


# the scheduler keeps this many copies of every graph input when pipeline parallelism is on
# (ggml/src/ggml-backend.cpp:912 GGML_SCHED_MAX_COPIES, used by ggml_backend_sched_new(..., parallel=true))
_SCHED_MAX_COPIES = 4
# a GPU takes over an op whose weight is in host memory when the op's batch is at least this big
# (ggml-cuda.cu ggml_backend_cuda_device_offload_op: op_offload_min_batch_size, default 32)
_OP_OFFLOAD_MIN_BATCH = 32
# backends whose flash-attention op allocates F16 copies of quantized K/V in its own output
# (ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size -> fattn.cu
# ggml_cuda_flash_attn_ext_get_alloc_size)
_FA_F16_COPY_BACKENDS = {"CUDA", "ROCm", "MUSA"}
# architectures without the mixed token/embedding input path (llama-arch.cpp llm_arch_supports_mixed_batch)
# the big FFN matmul weights of a layer (dense and expert): where they are decides which GPU runs the FFN
_FFN_W_RE = re.compile(r"\.ffn_(up|down|gate|gate_up)(_exps|_chexps)?\.weight$")
_NO_MIXED_BATCH = {"cogvlm", "deepseek4", "granite-switch", "eagle3", "dflash", "gemma4-assistant"}


def pipeline_parallel_on(args: PlacementArgs, layer_dev: list[str], devs: list[PlanDevice]) -> bool:
    """llama-context.cpp:432-437: several devices, every layer and the output offloaded, layer split, KV
    offloaded and no tensor overrides (--cpu-moe / --n-cpu-moe are overrides too)."""
    return (len(devs) > 1 and layer_dev.count("Host") == 0 and args.split_mode == "layer"
            and not args.no_kv_offload and not args.overrides)


def _compute_gpu(view: _ModelView, args: PlacementArgs, layer_dev: list[str], placements: list[TensorPlacement],
                 devs: list[PlanDevice], gpu_devs: list[str], fa: bool, T: int, mask: float,  # noqa: N803
                 inputs: float, ffn: float, attn: float, out_peak: float, kv_cells: int, swa_cells: int,
                 pp_forced: bool | None = None) -> dict[str, float]:
    """Compute buffers (MiB) of a build with GPUs: the GPUs' buffers and the host one (CUDA_Host).

    The rules, from the scheduler (ggml/src/ggml-backend.cpp) and the graph (src/llama-graph.cpp):
    - every graph input (tokens, positions, the KQ mask(s), the embedding inputs) is assigned to the CPU
      backend, so it lives in the host compute buffer (ggml_backend_sched_backend_id_from_cur: "graph
      input" -> last backend); with pipeline parallelism each input is kept in GGML_SCHED_MAX_COPIES copies.
    - build_inp_embd (llama-graph.cpp:2413-2490) makes two embedding paths when the architecture
      supports mixed batches: inputs inp_embd and inp_mixed_embd (n_embd x T, F32) and two get_rows of
      token_embd (which is always on the CPU): the host buffer holds all four; the GPU with the first
      layer receives copies of all four (times the copies under pipeline parallelism).
    - the KQ mask is F16 with flash attention, else F32 (build_attn_inp_kq_mask), [n_kv, T] per cache;
      each GPU that runs attention gets its own copy.
    - a GPU holding later layers only receives the residual stream (n_embd x T) from the previous one.
    - K/V of layers whose cache is in host memory (partial -ngl, -nkvo) are copied whole into the GPU
      that runs their attention (split inputs), for a batch of >= 32 tokens (op offload).
    - CUDA flash attention with the MMA/tile kernels (any prompt batch) allocates F16 copies of K and V
      beside its output when they are not F16 (quantized or copied-from-host F32), so the attention peak
      holds q, the output, the residual and those copies (fattn.cu:722-756, fattn-common.cuh:53-82).
    """
    E = view.n_embd  # noqa: N806
    r = E * T * 4  # one n_embd x T F32 activation
    n_paths = 1 if view.arch in _NO_MIXED_BATCH else 2
    pp = pipeline_parallel_on(args, layer_dev, devs) if pp_forced is None else pp_forced
    n_copies = _SCHED_MAX_COPIES if pp else 1
    backend = {d.name: d.backend for d in devs}
    # op offload needs a backend with offload_op: ggml-rpc has none (ggml-rpc.cpp ".offload_op = NULL"), so an
    # RPC device never takes over host weights; the first device that can does
    offloaders = [d for d in gpu_devs if backend.get(d) != "RPC"]
    offload = args.op_offload and T >= _OP_OFFLOAD_MIN_BATCH and bool(offloaders)
    # per-layer K and V row bytes (per cell) and where each layer's cache is
    attn_layers = [il for il in range(view.n_layer) if not view.recurrent[il]]
    tk = args.cache_type_k.upper()
    tv = args.cache_type_v.upper()
    hq_out = max((view.n_head[il] * view.v_len[il] for il in attn_layers), default=E)
    gpu_set = set(gpu_devs)
    # the GPU with the first offloaded layer receives the embeddings and runs the attention of host layers
    # next to it (the scheduler expands GPU assignments up the graph); the first GPU backend is the one that
    # takes over host weights (ggml_backend_sched_backend_id_from_cur tries backends in order)
    offload_gpu = offloaders[0] if offloaders else gpu_devs[0]
    first_gpu = next((d for d in layer_dev[:-1] if d in gpu_set), None)
    runners = list(dict.fromkeys(d for d in layer_dev if d in gpu_set))
    if not runners and offload and "Host" in layer_dev[:-1]:
        # -ngl 0 with a GPU: op offload still runs every big-batch matmul of the host layers on the first GPU
        # (ggml_backend_sched_backend_id_from_cur), and the scheduler's expansion passes give it the ops
        # around them, so that GPU gets a compute buffer holding one layer's activations, the mask and the
        # K/V copies; each offloaded weight starts its own split ("by starting a new split, the memory of the
        # previously offloaded weights can be reused", ggml-backend.cpp ggml_backend_sched_split_graph), so
        # one weight copy at a time sits beside activations the FFN term already counts generously
        first_gpu = offload_gpu
        runners = [offload_gpu]
        only_offload = True
    else:
        only_offload = False
    out: dict[str, float] = {}
    for dev in runners:
        be = backend.get(dev, "CUDA")
        # attention peak per layer run on this GPU: layers of this GPU, plus host layers it takes over
        fa_extra = 0.0
        for il in attn_layers:
            on_host_kv = args.no_kv_offload or layer_dev[il] == "Host"
            runs_here = layer_dev[il] == dev or (layer_dev[il] == "Host" and offload and dev == first_gpu) or (
                args.no_kv_offload and layer_dev[il] == dev)
            if not runs_here:
                continue
            cells = swa_cells if view.is_swa[il] else kv_cells
            n_stream = 1 if args.unified else args.n_seq_max
            nk = view.k_len[il] * view.n_head_kv[il] * cells * n_stream
            nv = (0 if view.is_mla else view.v_len[il] * view.n_head_kv[il]) * cells * n_stream
            extra = 0.0
            if on_host_kv and (offload or layer_dev[il] != "Host"):
                extra += row_size(tk, nk) + row_size(tv, nv)  # the copies of K and V
            if fa and be in _FA_F16_COPY_BACKENDS and T > 2:
                extra += (nk * 2 if tk != "F16" else 0) + (nv * 2 if tv != "F16" else 0)
            fa_extra = max(fa_extra, extra)
        if fa:
            attn_dev = max(attn, (2 * E + 2 * hq_out) * T * 4 + fa_extra) if fa_extra else attn
        else:
            attn_dev = attn + fa_extra
        # the last layer runs its FFN on the output rows only (the graphs get_rows(inp_out_ids) after its
        # attention, e.g. src/models/qwen3.cpp "il == n_layer - 1 && inp_out_ids"): a GPU whose only layer is
        # the last one has no full-batch FFN
        own = [il for il in range(view.n_layer) if layer_dev[il] == dev]
        only_last = bool(own) and own == [view.n_layer - 1] and _n_outputs_max(args) < T
        # FFN weights of its layers all in host memory (--cpu-moe, -ot ffn=CPU): with op offload the first GPU
        # backend runs those FFN matmuls, not this one
        own_set = set(own)
        ffn_w = [p for p in placements if p.layer in own_set and _FFN_W_RE.search(p.name)]
        ffn_elsewhere = (dev != offload_gpu and offload and bool(ffn_w)
                         and all(p.device == "Host" for p in ffn_w))
        peak = attn_dev if (only_last or ffn_elsewhere) else max(ffn, attn_dev)
        if layer_dev[-1] == dev:
            peak = max(peak, out_peak)
        # weights of host layers this GPU takes over (largest one, copied in its own split)
        if dev == offload_gpu and offload and not only_offload:
            cpu_w = [p.n_bytes for p in placements
                     if p.device == "Host" and p.layer is not None and p.buffer != "CPU_REPACK"]
            if cpu_w:
                peak = max(peak, ffn + max(cpu_w))
        recv = mask * n_copies
        if pp:
            # under pipeline parallelism every split input is kept in n_copies copies, never reused
            # (ggml-backend.cpp pass 5: tensor_copy marked input+output when n_copies > 1); one copy of the
            # embedding inputs is already in the single-GPU peak above
            recv += (n_copies - 1) * (2 * n_paths * r if dev == first_gpu else r)
        out[dev] = (recv + peak + inputs) / MIB
    if layer_dev[-1] in gpu_set and layer_dev[-1] not in out:
        out[layer_dev[-1]] = (out_peak + inputs) / MIB
    # host buffer: every graph input (times the copies) + the get_rows of the embedding paths; host layers
    # only compute here when their batch is too small for op offload
    host = n_copies * (mask + n_paths * r + inputs) + n_paths * r
    host_layers = [il for il in range(view.n_layer_all) if layer_dev[il] == "Host"]
    if host_layers and not offload:
        host = max(host, mask + max(ffn, attn) + inputs + n_paths * r)
    out["Host"] = host / MIB
    return out


def _compute_mtp(view: _ModelView, args: PlacementArgs, fa: bool, kv_cells: int) -> float:
    """Compute bytes of an MTP context: mask + one attention block (+ logits for one row per sequence)."""
    n_ctx, _ = _n_ctx(view, args)
    T = min(n_ctx, args.n_ubatch, args.n_batch)  # noqa: N806
    E = view.n_embd  # noqa: N806
    il = view.n_layer if view.n_layer < view.n_layer_all else view.n_layer_all - 1
    hq = view.n_head[il] * view.k_len[il]
    hkv = view.n_head_kv[il] * view.k_len[il]
    if fa:
        peak: float = kv_cells * T * 2 + (2 * E + 3 * hq + 2 * hkv) * T * 4
    else:
        a, b, c = _C_ATTN_NOFA
        peak = kv_cells * T * 4 + view.n_head[il] * kv_cells * T * 4 + (a * E + b * hq + c * hkv) * T * 4
    return peak + view.n_vocab * args.n_seq_max * 4
