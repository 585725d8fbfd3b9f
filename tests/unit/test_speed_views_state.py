"""The predicted speed in the views' Qt-free state: PlanState's prediction, curve and the solver's answers ranked
by it, the words every view uses (state.speed), and a benchmark run that refines the calibration. Real GGUF
files (the demo model, tests/support/random_gguf), real SQLite files, no Qt."""

from __future__ import annotations

from llm_tuner.core.devices import DeviceInventory, HostInfo, LlamaDevice
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.speed import SpeedCalibration
from llm_tuner.services.speed import SpeedBasis
from llm_tuner.state.plan import PlanState
from llm_tuner.state.speed import SpeedModel, basis_text, speed_figures, speed_line

HOST = HostInfo(memory_total_mib=65536, memory_available_mib=60000, cpu_flags=("avx", "avx2", "fma", "f16c"))
GPU = DeviceInventory(host=HOST, llama_devices=(LlamaDevice(name="CUDA0", description="NVIDIA GeForce RTX 4090",
                                                             memory_total_mib=16384, memory_free_mib=15000),))
CALIBRATED = SpeedBasis(SpeedCalibration({"read:CUDA0": 1 / 800.0, "fixed:gpu": 0.0008}, {"CUDA0": 950.0},
                                         "b1234-abc", "550.54", "probe of demo.gguf", 0.08, (8,)),
                        7, "b1234-abc", "550.54", 8)


def _plan_state(inventory, basis: SpeedBasis | None = None) -> PlanState:
    speed = SpeedModel(lambda: basis or SpeedBasis())
    st = PlanState(inventory=lambda: inventory, speed=speed)
    speed.load()
    return st


def test_the_plan_predicts_prefill_generation_and_ttft_with_its_basis(demo_model):
    st = _plan_state(GPU)
    events: list[str] = []
    st.add_callback(lambda what, *_d: events.append(what))
    st.use_profile(LaunchProfile(model=str(demo_model), gpu_layers=3, threads=8))
    st.recompute()
    pr = st.prediction()
    assert pr is not None and pr.gen_tps and pr.prefill_tps and pr.ttft_ms and pr.threads == 8  # -t counts
    assert "t/s gen" in speed_figures(pr) and "prefill" in speed_figures(pr) and "TTFT" in speed_figures(pr)
    assert basis_text(st.speed.basis, pr).startswith("default costs, wider error (±35%)")
    st.speed.load()  # a new basis (after a probe or a refit) is an input of the view
    assert events.count("inputs") >= 2


def test_the_curve_falls_with_depth_and_the_solver_answers_are_ranked_by_speed(demo_model):
    st = _plan_state(GPU)
    st.use_profile(LaunchProfile(model=str(demo_model), gpu_layers=3))
    st.recompute()
    curve = st.speed_curve()
    assert len(curve) > 8 and curve[0][0] == 0 and curve[-1][0] == st.plan.n_ctx
    assert curve[-1][1] < curve[0][1]  # a deeper cache is read for every token
    opts = st.speed_options()
    assert [o.label for o in opts][:2] == ["Most GPU layers", "as set now"]  # every layer on the GPU is faster
    assert opts[0].args_text.startswith("--n-gpu-layers ") and opts[0].prediction.gen_tps > opts[1].prediction.gen_tps
    gens = [o.prediction.gen_tps for o in opts]
    assert gens == sorted(gens, reverse=True)
    assert st.solve("layers")  # the button applies the ranked answer
    st.recompute()
    assert st.prediction().gen_tps == opts[0].prediction.gen_tps


def test_cpu_only_has_no_gpu_answers_and_a_calibrated_basis_says_what_it_rests_on(demo_model):
    st = _plan_state(DeviceInventory(host=HOST), CALIBRATED)
    st.use_profile(LaunchProfile(model=str(demo_model)))
    st.recompute()
    assert [o.goal for o in st.speed_options()] == [""]  # no GPU: nothing to move
    gpu = _plan_state(GPU, CALIBRATED)
    gpu.use_profile(LaunchProfile(model=str(demo_model), threads=8))
    gpu.recompute()
    pr = gpu.prediction()
    text = basis_text(gpu.speed.basis, pr)
    assert text.startswith("calibrated on probe of demo.gguf (build b1234-abc, driver 550.54, 8 threads)")
    assert pr.roofline_tps is not None and pr.gen_tps < pr.roofline_tps


def test_without_a_basis_the_line_says_it_is_being_read_and_a_failed_read_falls_back_to_defaults(demo_model):
    assert speed_line(None, None).startswith("speed: reading")

    def broken() -> SpeedBasis:
        raise OSError("database is locked")

    m = SpeedModel(broken)
    m.load()
    assert m.basis == SpeedBasis(problem="database is locked") and m.error == "database is locked"
    assert not m.basis.calibrated  # default costs, and the words say why (not "this build is not calibrated")
    assert basis_text(m.basis, hint=False) == ("default costs, wider error: this machine's calibration could not "
                                               "be read (database is locked); Help ▸ Errors has the details")


def _bench_run(model, other_cpu_pct: float = 0.0):
    from llm_tuner.core.bench_spec import BenchRun, Repetition

    reps = tuple(Repetition(seq=i, prompt_tokens=512, prompt_n=512, prompt_per_second=900.0 + i, predicted_n=32,
                            predicted_per_second=40.0 + i, ttft_ms=600.0, latency_ms=1400.0,
                            other_cpu_pct=other_cpu_pct) for i in range(3))
    return BenchRun(id=7, label="A", reps=reps, status="complete", server_argv=("-m", str(model), "-t", "8"))


def test_a_run_is_measured_beside_its_prediction_and_a_busy_run_teaches_the_calibration_nothing(demo_model):
    from llm_tuner.core.bench_report import speed_vs_prediction
    from llm_tuner.services.speed import predict_run, run_measurements

    run = _bench_run(demo_model)
    [p] = predict_run(run, CALIBRATED)
    assert p.prompt_tokens == 512 and p.gen.threads == 8 and p.gen.depth == 512 + 16  # half-way through its tokens
    [c] = speed_vs_prediction(run, [p])
    assert c["gen_tps"] == 41.0 and c["prefill_tps"] == 901.0
    below = 100 * (p.gen.gen_tps - 41.0) / p.gen.gen_tps
    assert c["text"].startswith(f"prompt 512: gen 41.0 t/s; predicted {p.gen.gen_tps:.1f} t/s (measured "
                                f"{below:.0f} % below it)")
    assert "prefill 901 t/s, predicted" in c["text"]
    ms, skipped = run_measurements([run, _bench_run(demo_model, other_cpu_pct=60.0)], default_threads=4,
                                   quiet_only=True)  # the refit after each benchmark
    assert {m.label.split(" prompt")[0] for m in ms} == {"run 7"}
    assert skipped == ["run 7: other processes were busy or a GPU throttled while it measured"]
    assert predict_run(_bench_run(demo_model, other_cpu_pct=60.0), CALIBRATED)  # predicted all the same


def test_a_split_placement_on_the_probe_alone_says_a_benchmark_run_refines_it(demo_model):
    """llama-server ran split placements 25-35 % slower than the llama-bench probe predicted on the lent H100:
    the Plan's basis line says so (and the wider error) until a server run has refined the calibration."""
    from dataclasses import replace

    costs = {**CALIBRATED.calibration.costs, "read:Host@8": 1 / 40, "fixed:cpu@8": 0.001,
             "attn_gen:Host:f16/f16@8": 0.02, "compute:Host@8": 1 / 800, "link": 0.1, "pfixed:gpu": 0.004,
             "pfixed:cpu@8": 0.01, "compute:CUDA0": 1 / 40000, "attn_gen:CUDA0:f16/f16": 0.001,
             "attn_prefill:Host:f16/f16@8": 1 / 500}
    probe = replace(CALIBRATED, calibration=replace(CALIBRATED.calibration, costs=costs))
    for basis, said in ((probe, True), (replace(probe, calibration=replace(probe.calibration, server_runs=3)), False)):
        st = _plan_state(GPU, basis)
        st.use_profile(LaunchProfile(model=str(demo_model), gpu_layers=3, threads=8))
        st.recompute()
        text = basis_text(st.speed.basis, st.prediction())
        assert ("llama-bench alone: the server may be slower here" in text) is said, text
        assert ("±30%" in text) is said, text
