"""core.memory: llama.cpp's placement and sizing rules on synthetic model tables (no files, no server).

Sizes asserted here are computed by hand from llama.cpp's formulas (src/llama-kv-cache.cpp,
llama-model.cpp load_tensors, llama-context.cpp); the comparison with the real server is in
tests/integration/test_memory_vs_llamacpp.py and benchmarks/memory_accuracy.py.
"""

from __future__ import annotations

import pytest

from llm_tuner.core.gguf_info import ModelInfo, TensorInfo, classify_tensor
from llm_tuner.core.memory import (
    FFN_EXPS_REGEX,
    MIB,
    PlanDevice,
    args_from_profile,
    parse_server_args,
    place_tensors,
    plan_memory,
    preview_rule,
    repackable,
    row_size,
    rule_experts_blocks,
    rule_ffn_every_nth,
    solve,
)

AVX2 = ("fpu", "avx", "avx2", "fma")


def _t(name: str, shape: tuple[int, ...], type_name: str, offset: int) -> TensorInfo:
    block, size = {"F32": (1, 4), "F16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_K": (256, 144)}[type_name]
    n = 1
    for d in shape:
        n *= d
    layer, role = classify_tensor(name)
    ggml = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 8, "Q4_K": 12}[type_name]
    return TensorInfo(name=name, shape=shape, ggml_type=ggml, type_name=type_name, n_bytes=n // block * size,
                      offset=offset, layer=layer, role=role)


def make_model(*, n_layer=8, n_embd=1024, n_ff=2816, n_head=16, n_head_kv=4, head_dim=64, n_vocab=32000,
               wtype="Q4_0", tied=False, n_expert=0, n_ff_exp=256, nextn=0, arch="qwen3",
               sliding_window=None, head_count_kv=None, n_ctx_train=32768, swa_pattern=None) -> ModelInfo:
    tensors: list[TensorInfo] = []
    off = 0

    def add(name, shape, ty):
        nonlocal off
        t = _t(name, shape, ty, off)
        tensors.append(t)
        off += (t.n_bytes + 31) // 32 * 32

    add("token_embd.weight", (n_embd, n_vocab), "Q8_0")
    for il in range(n_layer + nextn):
        p = f"blk.{il}."
        add(p + "attn_norm.weight", (n_embd,), "F32")
        add(p + "attn_q.weight", (n_embd, n_head * head_dim), wtype)
        add(p + "attn_k.weight", (n_embd, n_head_kv * head_dim), wtype)
        add(p + "attn_v.weight", (n_embd, n_head_kv * head_dim), wtype)
        add(p + "attn_output.weight", (n_head * head_dim, n_embd), wtype)
        add(p + "ffn_norm.weight", (n_embd,), "F32")
        if n_expert:
            add(p + "ffn_gate_inp.weight", (n_embd, n_expert), "F32")
            add(p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), wtype)
            add(p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), wtype)
            add(p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), wtype)
        else:
            add(p + "ffn_gate.weight", (n_embd, n_ff), wtype)
            add(p + "ffn_up.weight", (n_embd, n_ff), wtype)
            add(p + "ffn_down.weight", (n_ff, n_embd), wtype)
    add("output_norm.weight", (n_embd,), "F32")
    if not tied:
        add("output.weight", (n_embd, n_vocab), "Q8_0")
    return ModelInfo(path="/x/model.gguf", architecture=arch, block_count=n_layer + nextn, nextn_layers=nextn,
                     context_length=n_ctx_train, embedding_length=n_embd, feed_forward_length=n_ff,
                     head_count=n_head, head_count_kv=head_count_kv if head_count_kv is not None else n_head_kv,
                     key_length=head_dim, value_length=head_dim, expert_count=n_expert,
                     expert_used_count=2 if n_expert else 0, sliding_window=sliding_window,
                     sliding_window_pattern=swa_pattern, vocab_size=n_vocab, tensors=tuple(tensors),
                     n_tensors=len(tensors))


def gpu(name="CUDA0", mib=24576, free=None):
    return PlanDevice(name, name.rstrip("0123456789").replace("HIP", "ROCm"), mib, free)


HOST = PlanDevice("Host", "CPU", 65536, 60000)


# -- argument parsing -------------------------------------------------------------------------------


def test_parse_server_args_aliases_and_defaults():
    a = parse_server_args("llama-server -m m.gguf --ctx-size=8192 --n-gpu-layers 20 -ts 3/1 --cache_type_k q8_0 "
                          "-ctv q8_0 -fa on -np 2 --no-kv-offload -ub 256 --cpu-moe -ot 'blk\\.1\\.=CPU,x=CUDA1' "
                          "--fit off -fitt 512,256 -dev CUDA0,CUDA1 -t 8 --temp 0.7 --mlock")
    assert a.model == "m.gguf" and a.ctx == 8192 and a.ngl == 20
    assert a.tensor_split == (3.0, 1.0) and a.cache_type_k == "q8_0" and a.cache_type_v == "q8_0"
    assert a.flash_attn == "on" and a.n_parallel == 2 and not a.unified and a.no_kv_offload
    assert a.n_ubatch == 256 and not a.fit and a.fit_target_mib == (512, 256)
    assert a.devices == ("CUDA0", "CUDA1")
    # command-line order: --cpu-moe came before -ot
    assert a.overrides == ((FFN_EXPS_REGEX, "CPU"), ("blk\\.1\\.", "CPU"), ("x", "CUDA1"))
    assert "--mlock" in a.unknown
    d = parse_server_args(["-m", "m.gguf"])
    assert d.ctx is None and d.ngl is None and d.n_seq_max == 4 and d.unified and d.fit
    assert parse_server_args(["-m", "m", "-ngl", "all"]).ngl == -2
    assert parse_server_args(["-m", "m", "-dev", "none"]).devices == ()
    ncmoe = parse_server_args(["-m", "m", "-ncmoe", "2"]).overrides
    assert ncmoe == ((rf"blk\.0{FFN_EXPS_REGEX}", "CPU"), (rf"blk\.1{FFN_EXPS_REGEX}", "CPU"))


def test_args_from_profile():
    from llm_tuner.core.profile import LaunchProfile, OverrideRule

    p = LaunchProfile(model="m.gguf", ctx_size=4096, gpu_layers="all", cache_type_k="q8_0", parallel=1,
                      override_tensor=(OverrideRule(pattern="ffn=CPU".split("=")[0], buffer="CPU"),), cpu_moe=True,
                      kv_offload=False, fit=False, extra_args=("--swa-full",))
    a = args_from_profile(p)
    assert a.ctx == 4096 and a.ngl == -2 and a.cache_type_k == "q8_0" and a.n_seq_max == 1
    assert a.overrides[0] == ("ffn", "CPU") and a.overrides[1] == (FFN_EXPS_REGEX, "CPU")
    assert a.no_kv_offload and not a.fit and a.swa_full


# -- placement ----------------------------------------------------------------------------------------


def test_ngl_puts_the_last_layers_and_output_on_gpu():
    m = make_model(n_layer=8)
    places = {p.name: p for p in place_tensors(m, parse_server_args("-m x -ngl 3"), [gpu()], AVX2)}
    # ngl 3 of n_layer+1 = 9: the output layer and blocks 6, 7
    assert places["output.weight"].device == "CUDA0"
    assert places["blk.7.ffn_up.weight"].device == "CUDA0" and places["blk.6.attn_q.weight"].device == "CUDA0"
    assert places["blk.5.ffn_up.weight"].device == "Host"
    assert places["token_embd.weight"].device == "Host"  # the input layer always stays on the CPU
    # a GPU in use: CPU weights prefer the GPU's host buffer, which mmap turns into the mapping
    assert places["blk.0.ffn_up.weight"].buffer == "CPU_Mapped"
    nommap = {p.name: p for p in place_tensors(m, parse_server_args("-m x -ngl 3 -lm none"), [gpu()], AVX2)}
    assert nommap["blk.0.ffn_up.weight"].buffer == "CUDA_Host"
    one = {p.name: p for p in place_tensors(m, parse_server_args("-m x -ngl 1"), [gpu()], AVX2)}
    assert one["output.weight"].device == "CUDA0" and one["blk.7.ffn_up.weight"].device == "Host"


def test_tensor_split_proportions_over_devices():
    m = make_model(n_layer=8)
    devs = [gpu("CUDA0"), gpu("CUDA1")]
    places = place_tensors(m, parse_server_args("-m x -ngl 99 -ts 3,1"), devs, AVX2)
    layer_dev = {p.layer: p.device for p in places if p.layer is not None}
    # 9 layers, split points 0.75/1.0: layer il goes to the first device whose point > il/9
    assert [layer_dev[i] for i in range(8)] == ["CUDA0"] * 7 + ["CUDA1"]
    assert next(p.device for p in places if p.name == "output.weight") == "CUDA1"
    only1 = place_tensors(m, parse_server_args("-m x -ngl 99 -sm none -mg 1"), devs, AVX2)
    assert {p.device for p in only1 if p.layer is not None} == {"CUDA1"}


def test_override_rules_first_match_wins_and_cpu_moe():
    m = make_model(n_layer=4, n_expert=8)
    a = parse_server_args(["-m", "x", "-ngl", "99", "-ot", r"blk\.1\.ffn_up_exps=CUDA0,blk\.1\.=CPU", "--cpu-moe"])
    places = {p.name: p for p in place_tensors(m, a, [gpu()], AVX2)}
    assert places["blk.1.ffn_up_exps.weight"].device == "CUDA0"   # first rule
    assert places["blk.1.ffn_down_exps.weight"].device == "Host"  # second rule
    assert places["blk.1.attn_q.weight"].device == "Host"
    assert places["blk.2.ffn_gate_exps.weight"].device == "Host"  # --cpu-moe
    assert places["blk.2.ffn_gate_inp.weight"].device == "CUDA0"  # the router is not an expert tensor
    assert places["blk.2.attn_q.weight"].device == "CUDA0"


def test_cpu_repack_depends_on_cpu_features():
    assert repackable("Q4_0", (1024, 2816), frozenset({"avx2"}))
    assert not repackable("Q4_0", (1024, 2817), frozenset({"avx2"}))  # rows not a multiple of 8
    assert not repackable("Q8_0", (1024, 2816), frozenset({"avx2"}))  # x86 has no Q8_0 repack
    assert repackable("Q8_0", (1024, 2816), frozenset({"neon", "dotprod"}))
    assert not repackable("Q4_0", (1024, 2816), frozenset())
    m = make_model(n_layer=2)
    plan = plan_memory(m, parse_server_args("-m x -c 4096"), [], HOST, cpu_flags=AVX2)
    h = plan.device("Host")
    q4 = sum(t.n_bytes for t in m.tensors if t.type_name == "Q4_0") / MIB
    assert h.buffers["CPU_REPACK"] == pytest.approx(q4, abs=0.01)
    plain = plan_memory(m, parse_server_args("-m x -c 4096"), [], HOST, cpu_flags=())
    assert "CPU_REPACK" not in plain.device("Host").buffers
    # repacked tensors sit inside the file, so the mapping still spans the whole data: both count
    assert h.model_mib == pytest.approx(plain.device("Host").model_mib + q4, abs=0.1)


def test_tied_output_is_duplicated_on_the_output_device():
    m = make_model(n_layer=4, tied=True)
    emb = next(t for t in m.tensors if t.name == "token_embd.weight")
    plan = plan_memory(m, parse_server_args("-m x -ngl 99 -c 4096"), [gpu()], HOST, cpu_flags=AVX2)
    assert plan.device("CUDA0").model_mib > emb.n_bytes / MIB
    assert plan.device("Host").model_mib >= emb.n_bytes / MIB


# -- KV cache ----------------------------------------------------------------------------------------


def test_kv_cache_size_unified_and_per_slot_and_types():
    m = make_model(n_layer=8, n_head_kv=4, head_dim=64)
    a = parse_server_args("-m x -c 4000 -ngl 99")
    plan = plan_memory(m, a, [gpu()], HOST, cpu_flags=AVX2)
    # n_ctx padded to 4096; K and V rows 4*64 f16 = 512 B; 8 layers
    assert plan.n_ctx == 4096 and plan.kv_unified and plan.n_seq_max == 4
    assert plan.device("CUDA0").kv_mib == pytest.approx(8 * 2 * 512 * 4096 / MIB)
    # -np 3 without unified KV: n_ctx_seq = pad(4096/3, 256) = 1536, three streams
    p3 = plan_memory(m, parse_server_args("-m x -c 4096 -np 3 -ngl 99"), [gpu()], HOST)
    assert p3.n_ctx_seq == 1536 and p3.n_ctx == 4608
    assert p3.device("CUDA0").kv_mib == pytest.approx(8 * 2 * 512 * 1536 * 3 / MIB)
    q8 = plan_memory(m, parse_server_args("-m x -c 4096 -ctk q8_0 -ctv q8_0 -ngl 99"), [gpu()], HOST)
    assert q8.device("CUDA0").kv_mib == pytest.approx(8 * 2 * row_size("q8_0", 256) * 4096 / MIB)
    nkvo = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 99 -nkvo"), [gpu()], HOST)
    assert nkvo.device("CUDA0").kv_mib == 0 and nkvo.device("Host").kv_mib == pytest.approx(32.0)


def test_kv_follows_the_layer_device_and_mtp_layers_are_left_out():
    m = make_model(n_layer=8, nextn=1)
    plan = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 4"), [gpu()], HOST)
    per_layer = 2 * 512 * 4096 / MIB
    # ngl 4 of 10 (9 blocks + output): output + blocks 6,7,8 -> block 8 is MTP, not in the main KV
    assert plan.device("CUDA0").kv_mib == pytest.approx(2 * per_layer)
    assert plan.device("Host").kv_mib == pytest.approx(6 * per_layer)
    assert any("MTP" in w for w in plan.warnings)
    mtp = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 4 --spec-type draft-mtp"), [gpu()], HOST)
    assert mtp.device("CUDA0").kv_mib == pytest.approx(3 * per_layer)  # the MTP context's KV


def test_swa_cells_and_swa_full_and_v_padding_without_fa():
    m = make_model(n_layer=12, arch="gemma3", sliding_window=512)
    a = parse_server_args("-m x -c 32768")
    plan = plan_memory(m, a, [], HOST)
    caches = dict((c[0], (c[1], c[2])) for c in plan.kv_cells)
    # gemma3 pattern 6: layers 5 and 11 are global; SWA cells = pad(512*4 + 512, 256) = 2560
    assert caches == {"base": (32768, 2), "swa": (2560, 10)}
    full = plan_memory(m, parse_server_args("-m x -c 32768 --swa-full"), [], HOST)
    assert dict((c[0], c[1]) for c in full.kv_cells)["swa"] == 32768
    np1 = plan_memory(m, parse_server_args("-m x -c 32768 -np 1"), [], HOST)
    assert dict((c[0], c[1]) for c in np1.kv_cells)["swa"] == 1024
    # per-layer KV heads: without flash attention V rows are padded to the largest layer
    var = make_model(n_layer=2, head_count_kv=[2, 8])
    fa = plan_memory(var, parse_server_args("-m x -c 1024 -fa on"), [], HOST).device("Host").kv_mib
    nofa = plan_memory(var, parse_server_args("-m x -c 1024 -fa off"), [], HOST).device("Host").kv_mib
    assert fa == pytest.approx((2 * 64 * 2 + 8 * 64 * 2) * 2 * 1024 / MIB)
    assert nofa == pytest.approx((2 * 64 * 2 + 8 * 64 * 2 + 8 * 64 * 2 * 2) * 1024 / MIB)


# -- compute, output, fit, solver -----------------------------------------------------------------------


def test_compute_grows_with_ubatch_and_without_flash_attention():
    m = make_model()
    c = {ub: plan_memory(m, parse_server_args(f"-m x -c 8192 -ub {ub}"), [], HOST).device("Host").compute_mib
         for ub in (128, 512, 2048)}
    assert c[128] < c[512] < c[2048]
    off = plan_memory(m, parse_server_args("-m x -c 8192 -fa off"), [], HOST).device("Host").compute_mib
    assert off > c[512] + 16 * 8192 * 512 * 4 / MIB * 0.9  # the KQ matrix: heads * n_kv * n_tokens f32
    out = plan_memory(m, parse_server_args("-m x -c 8192 -np 2"), [], HOST).device("Host").output_mib
    assert out == pytest.approx(32000 * 2 * 4 / MIB)


def test_fit_shrinks_context_only_when_not_given():
    m = make_model(n_ctx_train=131072)
    small = [gpu("CUDA0", 1200, 1200)]
    auto = plan_memory(m, parse_server_args("-m x -ngl 99 -fitt 256"), small, HOST)
    assert auto.n_ctx < 131072 and auto.device("CUDA0").fits
    assert any("fit: context reduced" in w for w in auto.warnings)
    given = plan_memory(m, parse_server_args("-m x -ngl 99 -c 131072"), small, HOST)
    assert given.n_ctx == 131072 and given.device("CUDA0").fits is False
    assert any("CUDA0: needs" in w for w in given.warnings)
    off = plan_memory(m, parse_server_args("-m x -fit off"), small, HOST)
    assert off.n_ctx == 131072


def test_fit_places_layers_when_user_did_not():
    m = make_model(n_layer=32, n_ctx_train=4096)
    tiny = [gpu("CUDA0", 900, 900)]  # the CUDA runtime takes 600 of it (RUNTIME_OVERHEAD_MIB)
    plan = plan_memory(m, parse_server_args("-m x -c 4096 -fitt 64"), tiny, HOST)
    assert 0 < plan.n_gpu_layers < 33
    assert any("layers placed on GPUs" in w for w in plan.warnings)
    user = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 99 -fitt 64"), tiny, HOST)
    assert user.n_gpu_layers == 33 and any("not placed by fit" in w for w in user.warnings)


def test_solver_largest_context_and_layers_with_reason():
    m = make_model(n_ctx_train=131072)
    devs = [gpu("CUDA0", 1500, 1500)]
    ans = solve(m, parse_server_args("-m x -ngl 99"), devs, HOST, goal="context", targets_mib={"CUDA0": 256})
    assert ans.value % 256 == 0 and 4096 < ans.value < 131072
    assert ans.plan.device("CUDA0").total_mib <= 1500 - 256
    bigger = plan_memory(m, parse_server_args(f"-m x -ngl 99 -fit off -c {ans.value + 256}"), devs, HOST)
    assert bigger.device("CUDA0").total_mib > 1500 - 256
    assert "CUDA0 is the limit" in ans.reason
    lay = solve(m, parse_server_args("-m x -c 131072"), [gpu("CUDA0", 1200, 1200)], HOST, goal="layers",
                targets_mib={"CUDA0": 0})
    assert lay.args is not None and 0 < lay.value < 9 and "one more layer does not fit" in lay.reason
    moe = make_model(n_layer=8, n_expert=32, n_ff_exp=512)
    ans = solve(moe, parse_server_args("-m x -c 4096"), [gpu("CUDA0", 820, 820)], HOST, goal="layers",
                targets_mib={"CUDA0": 0})
    assert "--n-cpu-moe" in ans.reason
    split = solve(m, parse_server_args("-m x -c 8192 -ngl 99"), [gpu("CUDA0", 16384, 16000),
                                                             gpu("Vulkan1", 24576, 24000)], HOST, goal="split")
    assert split.value[0] < split.value[1]


def test_hypothetical_devices_and_json_shape():
    m = make_model()
    plan = plan_memory(m, parse_server_args("-m x -c 32768 -ngl 99 -dev CUDA0,Vulkan1 -ts 40,60"),
                       [gpu("CUDA0", 16384), PlanDevice("Vulkan1", "Vulkan", 24576, hypothetical=True)], HOST)
    js = plan.to_json()
    assert [d["name"] for d in js["devices"]] == ["CUDA0", "Vulkan1", "Host"]
    for d in js["devices"]:
        assert set(d) >= {"name", "model_mib", "kv_mib", "compute_mib", "output_mib", "overhead_mib", "total_mib",
                          "capacity_mib", "fits"}
    assert plan.device("Vulkan1").model_mib > plan.device("CUDA0").model_mib


def test_override_builder_preview():
    m = make_model(n_layer=6)
    rule = rule_ffn_every_nth(3, 0, 6)
    assert rule == r"blk\.(0|3)\.ffn_.*=CPU"
    prev = preview_rule(m, parse_server_args("-m x -ngl 99"), rule, [gpu()], AVX2)
    assert len(prev.matched) == 2 * 4  # ffn_norm, gate, up, down of blocks 0 and 3
    ffn = sum(t.n_bytes for t in m.tensors if t.name.startswith(("blk.0.ffn", "blk.3.ffn"))) / MIB
    assert prev.moved_mib == pytest.approx(ffn)
    assert rule_experts_blocks(2, 4) == r"blk\.(2|3|4)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"
    assert preview_rule(m, parse_server_args("-m x"), "blk\\.(=CPU").error


def test_fit_multiplies_unset_context_by_streams_and_fits_host_ram():
    m = make_model(n_layer=2, n_ctx_train=8192)
    # fit on, -c unset, -np 2 without unified KV: fit asks for the trained context per sequence
    assert plan_memory(m, parse_server_args("-m x -np 2"), [], HOST).n_ctx == 16384
    assert plan_memory(m, parse_server_args("-m x -np 2 -fit off"), [], HOST).n_ctx == 8192
    assert plan_memory(m, parse_server_args("-m x -np 2 -c 8192"), [], HOST).n_ctx == 8192
    # CPU only: fit shrinks an unset context to fit total RAM minus the margin
    big = make_model(n_layer=8, n_ctx_train=1_048_576)
    small_ram = PlanDevice("Host", "CPU", 4096, 3000)
    p = plan_memory(big, parse_server_args("-m x -fitt 512"), [], small_ram)
    assert p.n_ctx < 1_048_576 and any("host memory" in w for w in p.warnings)
    h = p.device("Host")
    assert h.total_mib - h.overhead_mib - h.prompt_cache_mib <= 4096 - 512  # fit does not count the prompt cache


def test_partial_offload_copies_the_largest_cpu_weight_to_the_gpu():
    m = make_model(n_layer=8)
    full = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 99"), [gpu()], HOST)
    part = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 4"), [gpu()], HOST)
    biggest = max(t.n_bytes for t in m.tensors if t.name.startswith("blk.")) / MIB
    assert part.device("CUDA0").compute_mib >= full.device("CUDA0").compute_mib + biggest * 0.99
    small_batch = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 4 -ub 16"), [gpu()], HOST)
    assert small_batch.device("CUDA0").compute_mib < biggest  # below 32 tokens nothing is offloaded


def test_placement_argv_round_trips():
    from llm_tuner.core.memory import placement_argv

    a = parse_server_args(["-m", "m.gguf", "-c", "8192", "-ngl", "20", "-ts", "3,1", "-ot", r"blk\.1\.=CPU",
                           "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-np", "2", "-kvu", "--swa-full", "-nkvo",
                           "-ub", "256", "-fitt", "512", "-fit", "off", "-dev", "CUDA0,CUDA1"])
    assert parse_server_args(placement_argv(a)) == a
    fp = placement_argv(a, for_fit_params=True)
    assert "-kvu" not in fp and "-fit" not in fp and "-fitt" in fp


def test_qwen35_hybrid_kv_only_on_full_attention_layers_and_recurrent_state():
    base = make_model(n_layer=8, nextn=1, arch="qwen35", n_head_kv=4, head_dim=64)
    m = base.model_copy(update={"full_attention_interval": 4, "ssm_conv_kernel": 4, "ssm_inner_size": 1024,
                                "ssm_state_size": 128, "ssm_group_count": 16})
    plan = plan_memory(m, parse_server_args("-m x -c 4096 -np 1"), [], HOST)
    kv_layer = 2 * 512 * 4096 / MIB  # K + V rows of 4 heads x 64 f16
    n_r = 3 * (1024 + 2 * 16 * 128)  # (d_conv - 1) * (d_inner + 2 n_group d_state)
    n_s = 128 * 1024
    rs_layer = (n_r + n_s) * 4 / MIB  # F32, one sequence
    # layers 3 and 7 attend; 0-2 and 4-6 are gated delta net; block 8 is the MTP head
    assert plan.kv_cells == (("base", 4096, 2),)
    assert plan.device("Host").kv_mib == pytest.approx(2 * kv_layer + 6 * rs_layer)
    mtp = plan_memory(m, parse_server_args("-m x -c 4096 -np 1 --spec-type draft-mtp --spec-draft-n-max 3"), [],
                      HOST)
    # partial rollback keeps 1 + n_draft rows per sequence; the MTP context adds block 8's KV
    assert mtp.device("Host").kv_mib == pytest.approx(3 * kv_layer + 6 * rs_layer * 4)


def test_row_and_tensor_split_warnings_and_shares():
    m = make_model(n_layer=8)
    devs = [gpu("CUDA0"), gpu("CUDA1")]
    row = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 99 -sm row -ts 1,1"), devs, HOST)
    assert any("does not support split buffers" in w for w in row.warnings)
    t = plan_memory(m, parse_server_args("-m x -c 4096 -ngl 99 -sm tensor -ts 3,1 -fa on"), devs, HOST)
    kv0, kv1 = t.device("CUDA0").kv_mib, t.device("CUDA1").kv_mib
    assert kv0 == pytest.approx(3 * kv1) and kv0 + kv1 == pytest.approx(32.0)
    assert any("-sm tensor" in w for w in t.warnings)


def test_mla_cache_holds_k_only():
    m = make_model(n_layer=4, n_head_kv=1, head_dim=64).model_copy(update={
        "key_length": 576, "value_length": 512, "key_length_mla": 192, "value_length_mla": 128,
        "kv_lora_rank": 512, "head_count_kv": 1})
    plan = plan_memory(m, parse_server_args("-m x -c 4096 -np 1"), [], HOST)
    assert plan.device("Host").kv_mib == pytest.approx(4 * 576 * 2 * 4096 / MIB)


def test_vulkan_overhead_is_measured_on_nvidia_and_said_to_be_a_default_elsewhere():
    """Issue 12 item 10: NVIDIA's Vulkan driver took 581..597 MiB beyond llama.cpp's buffers on the H200
    (benchmarks/sessions/2026-12-01-h200-vulkan); other drivers keep the public default, and the plan says which it used."""
    m = make_model(n_layer=8)
    args = parse_server_args("-m x -ngl 99 -c 4096")
    nv = plan_memory(m, args, [PlanDevice("Vulkan0", "Vulkan", 143771, 143000, "NVIDIA H200")], HOST)
    amd = plan_memory(m, args, [PlanDevice("Vulkan0", "Vulkan", 24560, 24000, "AMD Radeon RX 7900 XTX (RADV NAVI31)")],
                      HOST)
    assert nv.device("Vulkan0").overhead_mib == 590
    assert amd.device("Vulkan0").overhead_mib == 180
    assert any("measured on NVIDIA's Vulkan driver" in w for w in nv.warnings)
    assert any("AMD's may differ" in w for w in amd.warnings)
    cuda = plan_memory(m, args, [PlanDevice("CUDA0", "CUDA", 143771, 143000, "NVIDIA H200")], HOST)
    assert not any("Vulkan" in w for w in cuda.warnings)
