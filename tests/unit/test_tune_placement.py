"""The placement frontier (a model bigger than its GPU): what the memory plan proposes and how the tune races it.

Models are real GGUF files (random weights, real shapes); devices are PlanDevices as llama.cpp lists them
(`--list-devices` "MiB free", free_includes_runtime), sized from each model's own plan so that it does not fit.
The runner tests use a scripted measurer (no GPU here; the real path ran on the lent H200:
benchmarks/sessions/2026-12-02-h200-placement/) that stores real runs in a real SQLite history."""


import pytest

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.tune import (
    Knob,
    Objective,
    Planner,
    TuneSpec,
    apply_values,
    clearly_ahead,
    frontier,
    is_out_of_memory,
    needs_placement,
    next_margin,
    propose_knobs,
    resolve_placement,
    tune_report_markdown,
)
from llm_tuner.core.tune.frontier import spread_blocks, strip_placement
from llm_tuner.core.tune.knobs import MAX_PLACEMENTS
from llm_tuner.core.tune.search import interacts
from llm_tuner.services.binaries import default_catalog
from llm_tuner.services.library import read_model
from llm_tuner.services.tune import TuneRunner
from llm_tuner.services.tune.placement import PlacementResolver
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe
from tests.support.tune_bench import Clock, ScriptedBench

HOST = PlanDevice("Host", "CPU", 24000, 20000)
KV = ("f16", "q8_0", "q4_0")


def _gpu(free_mib: int) -> PlanDevice:
    # as `--list-devices` reports a card: its free memory measured by a process that held its runtime
    return PlanDevice("CUDA0", "CUDA", 143155, free_mib, "NVIDIA H200", free_includes_runtime=True)


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = write_qwen3_dense(tmp_path_factory.mktemp("m") / "dense.gguf", n_layer=12, n_embd=1024, n_ff=3072,
                             n_head=8, n_head_kv=4, head_dim=64, n_ctx_train=8192)
    return str(path), read_model(str(path))


@pytest.fixture(scope="module")
def kv_heavy(tmp_path_factory):
    """12 layers whose memory is mostly K/V at -c 8192 (8 K/V heads of 128, 32 MiB a layer in f16) and whose
    weights are narrow (256 wide): the placement race's figures in MiB as a bigger model's, at a fraction of
    the compute of the llama-perplexity runs its K/V candidates cost (the tune checks each one's quality)."""
    path = write_qwen3_dense(tmp_path_factory.mktemp("m") / "kv-heavy.gguf", n_layer=12, n_embd=256, n_ff=768,
                             n_head=8, n_head_kv=8, head_dim=128, n_ctx_train=8192)
    return str(path), read_model(str(path))


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    path = write_qwen3_moe(tmp_path_factory.mktemp("m") / "moe.gguf", n_layer=8, n_embd=256, n_ff_exp=512,
                           n_expert=16, n_expert_used=2, n_ctx_train=8192)
    return str(path), read_model(str(path))


def _small_gpu(model, base, share: float) -> PlanDevice:
    """A card whose budget holds what stays on it with no layer (runtime, compute) plus `share` of what the layers
    add with every one of them on it (f16 K/V), as `--list-devices` would report its free memory."""
    def plan(ngl: str):
        return plan_memory(model, parse_server_args([*base, "-ngl", ngl, "--fit", "off"]), [_gpu(100000)], HOST)

    full, none = plan("99").device("CUDA0"), plan("0").device("CUDA0")
    extra = full.budget_mib - 100000  # the runtime the plan adds back to a listed free figure
    budget = none.resident_mib + share * (full.resident_mib - none.resident_mib)
    return _gpu(int(budget - extra))


def test_the_frontier_keeps_the_margin_puts_the_most_on_the_gpu_and_ranks_by_host_reads(dense):
    path, model = dense
    base = ["-m", path, "-c", "8192"]
    gpu = _small_gpu(model, base, 0.7)
    planner = Planner(model, [gpu], HOST)
    assert needs_placement(planner, base)
    margin = 64
    out = frontier(planner, base, KV, margin)
    fitting = [p for p in out if p.fits]
    assert {p.value.split(":")[0] for p in fitting} == set(KV)
    assert [p.host_read_mib for p in fitting] == sorted(p.host_read_mib for p in fitting)
    for p in fitting:  # planned again from the whole command line: every GPU keeps the margin
        argv = [*strip_placement(base), *p.argv]
        plan = plan_memory(model, parse_server_args(argv), [gpu], HOST)
        assert plan.device("CUDA0").headroom_mib >= margin
        assert flags.value_of(argv, "cache_type_k") == flags.value_of(argv, "cache_type_v")  # matched pair
    # K/V frees memory for weights: a smaller type never puts fewer layers on the GPU
    layers = {p.value: p.gpu_layers for p in fitting if p.value.endswith(":layers")}
    assert layers["q4_0:layers"] >= layers["q8_0:layers"] >= layers["f16:layers"]
    assert layers["q4_0:layers"] > layers["f16:layers"]
    # the most that fits: one more layer would not keep the margin
    p = resolve_placement(planner, base, "q8_0:layers", margin)
    more = [*strip_placement(base), *flags.without(list(p.argv), "gpu_layers"), "-ngl", str(p.gpu_layers + 1)]
    assert plan_memory(model, parse_server_args(more), [gpu], HOST).device("CUDA0").headroom_mib < margin


def test_ffn_blocks_are_spread_evenly_and_as_few_as_fit(dense):
    assert spread_blocks(4, 12) == [0, 3, 6, 9] and spread_blocks(12, 36)[:3] == [0, 3, 6]
    assert spread_blocks(0, 12) == [] and spread_blocks(5, 3) == [0, 1, 2]
    path, model = dense
    base = ["-m", path, "-c", "8192", "-ctk", "q8_0", "-ctv", "q8_0", "-ngl", "5"]  # its own placement replaced
    planner = Planner(model, [_small_gpu(model, base[:4], 0.8)], HOST)
    p = resolve_placement(planner, base, "q4_0:ffn", 64)
    assert p.fits and flags.value_of(p.argv, "cache_type_k") == "q4_0"
    rule = flags.value_of(p.argv, "override_tensor")
    n = len(rule.split("(")[1].split(")")[0].split("|"))
    assert rule == rf"blk\.({'|'.join(str(b) for b in spread_blocks(n, 12))})\.ffn_.*=CPU"
    assert flags.value_of(p.argv, "gpu_layers") == "13"  # every layer (12 blocks + output) on the GPU
    argv = apply_values(base, [Knob(key="placement", flag="placement", values=(None, "q4_0:ffn"))],
                        {"placement": "q4_0:ffn"}, resolve=lambda v: p.argv)
    assert flags.value_of(argv, "cache_type_k") == "q4_0" and argv.count("-ngl") + argv.count("--n-gpu-layers") == 1
    fewer = [*strip_placement(base), *p.argv[:-1], rf"blk\.({'|'.join(map(str, spread_blocks(n - 1, 12)))})\.ffn_.*=CPU"]
    assert not planner.fits(fewer, 64)


def test_moe_experts_of_the_first_blocks_go_to_the_cpu(moe):
    path, model = moe
    base = ["-m", path, "-c", "8192"]
    planner = Planner(model, [_small_gpu(model, base, 0.75)], HOST)
    out = [p for p in frontier(planner, base, ("f16", "q8_0"), 32) if p.fits]
    experts = next(p for p in out if p.value.endswith(":experts"))
    n = int(flags.value_of(experts.argv, "n_cpu_moe"))
    assert n >= 1 and experts.gpu_layers == experts.n_layers  # every layer on the GPU, experts of n blocks off it
    assert not planner.fits([*strip_placement(base), *flags.without(list(experts.argv), "n_cpu_moe"),
                             "--n-cpu-moe", str(n - 1)], 32)


def test_no_placement_knob_when_the_model_fits_and_a_joint_one_when_it_does_not(dense):
    path, model = dense
    base = ["-m", path, "-c", "8192"]
    gen = Objective(kind="gen_tps")
    big = Planner(model, [_gpu(100000)], HOST)
    assert not needs_placement(big, base)
    fits = {k.key for k in propose_knobs(model, default_catalog(), [_gpu(100000)], base, objective=gen,
                                         cpu_threads=16)}
    assert "placement" not in fits and "kv" in fits and "t" not in fits
    small = Planner(model, [_small_gpu(model, base, 0.7)], HOST)
    placements = frontier(small, base, KV, 64)
    knobs = propose_knobs(model, default_catalog(), small.gpus, base, objective=gen, cpu_threads=16,
                          placement=placements)
    keys = [k.key for k in knobs]
    assert keys[0] == "placement" and "kv" not in keys and "ngl" not in keys and "ot" not in keys
    placement = knobs[0]
    assert placement.values[0] is None and list(placement.values[1:]) == [p.value for p in placements if p.fits][:MAX_PLACEMENTS]
    assert placement.ranked  # near ties go to the plan's order
    t = next(k for k in knobs if k.key == "t")
    assert t.values == ("8", "16")  # from the physical cores: llama.cpp's default and half of it
    assert "b" not in keys and "ub" not in keys and "tb" not in keys  # generation: batches do not matter
    prefill = {k.key for k in propose_knobs(model, default_catalog(), small.gpus, base,
                                            objective=Objective(kind="prefill_tps"), cpu_threads=16,
                                            placement=placements)}
    assert {"b", "ub", "tb"} <= prefill


def test_placement_is_decided_apart_from_threads_but_with_memory_knobs():
    p = Knob(key="placement", flag="placement", values=(None, "q8_0:ffn"))
    assert not interacts(p, Knob(key="t", flag="threads", values=("8",)))
    assert interacts(p, Knob(key="ub", flag="ubatch_size", values=("256",)))
    with pytest.raises(ValueError, match="resolver"):
        apply_values(["-m", "m"], [p], {"placement": "q8_0:ffn"})
    assert apply_values(["-m", "m", "-ctk", "q8_0"], [p], {"placement": None}) == ["-m", "m", "-ctk", "q8_0"]


def test_out_of_memory_is_recognized_in_llama_cpp_words_and_raises_the_margin():
    # as llama.cpp's CUDA backend logs them (a load, and a graph at the first request)
    assert is_out_of_memory("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 812.00 MiB on device 0: "
                            "cudaMalloc failed: out of memory")
    assert is_out_of_memory("llama_init_from_model: failed to allocate compute buffers")
    assert is_out_of_memory("CUDA error: out of memory\n  current device: 0")
    assert not is_out_of_memory("llama-server did not become ready (error loading model vocabulary)")
    assert next_margin(128) == 256 and next_margin(2048) == 4096 and next_margin(4096) == 4096


def test_a_lead_far_beyond_the_noise_between_starts_is_clearly_ahead():
    assert clearly_ahead([60.0, 62.0], [31.0, 33.0])
    assert not clearly_ahead([60.0, 40.0], [31.0, 45.0])  # overlapping samples
    assert not clearly_ahead([36.0, 37.0], [33.0, 34.0])  # +9 %: within what starts differ by on a GPU
    assert not clearly_ahead([60.0], [30.0])  # one sample each says nothing about the spread


class PlacedBench(ScriptedBench):
    """A measurer for a small GPU: a run's server runs out of memory when its plan leaves CUDA0 less than
    `needs_free_mib` (as a real one does at its first request), else generates faster the fewer MiB each token
    reads from host memory (1000 / (`fixed` + MiB) t/s)."""

    def __init__(self, repo, planner: Planner, needs_free_mib: float, clock, fixed: float = 10.0):
        def fail(argv):
            least, _ = planner.headroom(argv)
            if least is not None and least < needs_free_mib:
                return ("llama-server exited with code -6 during the first request",
                        ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 96.00 MiB on device 0: "
                         "cudaMalloc failed: out of memory", "CUDA error: out of memory"))
            return None
        super().__init__(repo, clock, lambda argv: 1000.0 / (fixed + planner.host_read_mib(argv)), fail)
        self.planner, self.needs = planner, needs_free_mib


class PlacedTune:
    """A tune of the placement knob on a small planned card (70 % of what the layers need), measured by PlacedBench."""

    def __init__(self, dense, tmp_path, kv: tuple[str, ...], n: int, needs_free_mib: float, final_reps: int,
                 fixed: float = 10.0):
        path, model = dense
        self.base = ("-m", path, "-c", "8192")
        self.gpu = _small_gpu(model, list(self.base), 0.7)
        self.resolver = PlacementResolver(self.base, {}, gpus=[self.gpu], host=HOST, margin_mib=32)
        values = tuple(p.value for p in self.resolver.frontier(kv) if p.fits)[:n]
        knob = Knob(key="placement", flag="placement", values=(None, *values))
        self.engine = open_engine(tmp_path / "h.sqlite")
        self.clock = Clock()
        self.bench = PlacedBench(RunRepository(self.engine), self.resolver.planner, needs_free_mib, self.clock, fixed)
        self.spec = TuneSpec(base_argv=self.base, objective=Objective(prompt_tokens=16, gen_tokens=8), knobs=(knob,),
                             budget_s=600, screen_reps=2, final_reps=final_reps, final_rounds=2, warmup=0,
                             headroom_mib=32)

    def runner(self, resolver=None) -> TuneRunner:
        return TuneRunner(TuneRepository(self.engine), bench_runner=self.bench, resolver=resolver or self.resolver,
                          clock=self.clock, plan_fn=lambda a, e: (True, ""))


@pytest.mark.server
def test_a_placement_that_runs_out_of_memory_raises_the_margin_for_the_rest(kv_heavy, tmp_path):
    tune = PlacedTune(kv_heavy, tmp_path, ("f16", "q4_0"), 3, needs_free_mib=100, final_reps=2)
    resolver = tune.resolver
    result = tune.runner().run(tune.spec)
    trials = result.trials
    failed = [t for t in trials if t.status == "failed"]
    assert failed and "margin raised to 128 MiB" in failed[0].reason and "out of memory" in failed[0].reason
    assert resolver.margin_mib == 128
    # the same choice again at the new margin, measured; every later placement keeps the new margin
    retried = [t for t in trials if t.values == failed[0].values and t.status in ("measured", "final")]
    assert retried and retried[0].seq == failed[0].seq + 1
    for t in trials:
        if t.status in ("measured", "final") and t.values.get("placement"):
            assert resolver.planner.headroom(t.argv)[0] >= 100
    assert result.verdict == "better" and result.winner_argv != result.baseline_argv
    # resumed, the margin is learned again from the stored trials
    again = PlacementResolver(tune.base, {}, gpus=[tune.gpu], host=HOST, margin_mib=32)
    tune.runner(again).run(resume_tune_id=result.tune_id)
    assert again.margin_mib == 128


@pytest.mark.server
def test_a_clear_winner_is_called_in_one_start_per_side_and_no_candidate_run_is_said(kv_heavy, tmp_path):
    # the baseline reads 67 MiB a token from host memory, the candidate none: +35 %, clearly ahead but not decisive
    t = PlacedTune(kv_heavy, tmp_path, ("q4_0",), 1, needs_free_mib=0, final_reps=4, fixed=190.0)
    engine, clock, bench, spec = t.engine, t.clock, t.bench, t.spec
    result = t.runner().run(spec)
    finals = [r for r in RunRepository(engine).list_runs(group_id=result.tune_id)
              if (r.sweep_value or "").startswith("final")]
    assert result.verdict == "better" and len(finals) == 2 and all(len(r.reps) == 4 for r in finals)
    assert "one start per side" in result.final_n_note
    report = tune_report_markdown(result, objective="generation t/s")
    assert "## Hardware" in report and "CPU, RAM, OS: not recorded with this run" in report  # a scripted run
    # a budget the baseline uses up: "not measured", with the candidates left, never "within noise"
    clock.t = 0.0
    tight = spec.model_copy(update={"budget_s": 5})
    result = t.runner().run(tight)
    assert result.verdict == "not measured" and "1 candidate left untried" in result.note
    assert result.winner_argv == result.baseline_argv
    # offered for Resume, which continues with a new budget and does not measure the baseline again
    from llm_tuner.state.tune import load_choices

    assert result.tune_id in [t.id for t in load_choices(engine).resumable]
    starts = len(bench.started)
    resumed = t.runner().run(spec, resume_tune_id=result.tune_id)
    assert resumed.verdict == "better" and bench.started[starts] != resumed.baseline_argv

