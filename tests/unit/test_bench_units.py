"""Pure parts of the benchmark: llama-bench translation and parsing, argv edits, reports."""

from llm_tuner.core.bench_report import argv_diff, compare_runs, llama_bench_gap, report_markdown, run_summary
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition
from llm_tuner.services.bench import parse_llama_bench_json, set_flag, translate_to_llama_bench
from tests.conftest import DATA


def test_translation_uses_bench_separators_and_lists_what_bench_lacks():
    server = ["-m", "/m/q.gguf", "-c", "262144", "-ngl", "999", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0",
              "--spec-type", "draft-mtp,ngram-map-k4v", "--spec-draft-n-max", "3", "-dev", "CUDA0,Vulkan2",
              "-ts", "40,60", "--jinja", "-ot", r"blk\.(0|3)\.ffn_.*=CPU,blk\.5\.ffn_up.*=CUDA0", "--port", "8080"]
    argv, lacking = translate_to_llama_bench(server, BenchSpec(prompt_tokens=(512, 4096), gen_tokens=128, reps=3))
    joined = " ".join(argv)
    assert "-ts 40/60" in joined and "-dev CUDA0/Vulkan2" in joined
    assert r"-ot blk\.(0|3)\.ffn_.*=CPU;blk\.5\.ffn_up.*=CUDA0" in joined
    assert "-p 512,4096 -n 128 -r 3 -o json" in joined
    assert "-ngl 999" in joined and "-ctk q8_0" in joined and "-fa on" in joined
    assert "-c 262144" in lacking and "--spec-type draft-mtp,ngram-map-k4v" in lacking
    assert "--spec-draft-n-max 3" in lacking
    assert not any(x.startswith(("--jinja", "--port")) for x in lacking)


def test_parse_recorded_llama_bench_json():
    results = parse_llama_bench_json((DATA / "bench" / "llama-bench-demo.json").read_text())
    assert [(r.test, round(r.avg_ts)) for r in results] == [("pp64", 620), ("tg16", 66)]
    assert len(results[0].samples_ts) == 2


def test_set_flag_replaces_aliases_and_argv_diff():
    argv = ["-m", "x.gguf", "-ub", "512", "-t", "2"]
    new = set_flag(argv, "--ubatch-size", "2048")  # every spelling of the flag is replaced
    assert new == ["-m", "x.gguf", "-t", "2", "--ubatch-size", "2048"]
    assert set_flag(["-ngl", "-1"], "-ngl", "99") == ["-ngl", "99"]
    assert set_flag(["-tbq", "4", "-c", "8"], "-tbq", "3") == ["-c", "8", "-tbq", "3"]  # a fork's flag
    # one flag however it is spelled, named by its long spelling
    assert argv_diff(["-m", "x", "-ub", "512", "--jinja"], ["--model", "x", "--ubatch-size", "2048"]) == [
        {"flag": "--ubatch-size", "a": "512", "b": "2048"}, {"flag": "--jinja", "a": "", "b": None}]


def _run(gen, label="A", **kw):
    reps = tuple(Repetition(seq=i, prompt_tokens=64, prompt_n=64, prompt_per_second=500.0 + i, predicted_n=16,
                            predicted_per_second=g, ttft_ms=100.0 + i, latency_ms=300.0 + i, **kw)
                 for i, g in enumerate(gen))
    return BenchRun(id=1, label=label, reps=reps, status="complete", server_argv=("-m", "x.gguf"))


def test_compare_runs_and_report():
    a, b = _run([60.0, 60.5, 59.5]), _run([70.0, 70.2, 69.8], label="B")
    by_name = {c.name: c for c in compare_runs(a, b)}
    assert by_name["gen_tps@64"].verdict == "better"
    assert by_name["prefill_tps@64"].verdict == "within noise"
    md = report_markdown(a, [("Generation", "gen.png")])
    assert "| Generation @ 64 tok (t/s) |" in md and "![Generation](gen.png)" in md
    assert "gen_tps@" not in md and "None" not in md  # a report for people: readable names, no reprs


def test_metric_labels_are_readable_with_units():
    from llm_tuner.core.bench_report import metric_label, metric_samples

    assert metric_label("ttft_ms@128") == "Time to first token @ 128 tok (ms)"
    assert metric_label("prefill_tps@128") == "Prefill @ 128 tok (t/s)"
    assert metric_label("gen_tps@4096") == "Generation @ 4096 tok (t/s)"
    assert metric_label("latency_ms@128") == "Latency @ 128 tok (ms)"
    assert metric_label("peak_ram_mib:Host") == "Peak memory: Host (MiB)"
    assert metric_label("peak_vram_mib:CUDA0") == "Peak VRAM: CUDA0 (MiB)"
    assert metric_label("peak_temp_c:nvidia:0") == "Peak temperature: nvidia:0 (°C)"
    assert metric_label("energy_per_token_j") == "Energy per token (J/token)"
    assert metric_label("something_new@1") == "something_new@1"
    for name, m in metric_samples(_run([60.0, 61.0])).items():  # the unit in the label is the metric's unit
        assert metric_label(name).endswith(f"({m.unit})")


def test_speculative_summary_and_llama_bench_gap():
    from llm_tuner.core.bench_spec import LlamaBenchResult

    run = _run([80.0, 82.0], draft_n=30, draft_n_accepted=21, draft_steps=10)
    run = run.model_copy(update={"llama_bench": (LlamaBenchResult(n_prompt=0, n_gen=16, avg_ts=100.0),),
                                 "server_argv": ("--spec-draft-n-max", "2")})
    spec = run_summary(run)["speculative"]
    assert spec["acceptance"] == 0.7 and spec["mean_accepted_len"] == 1 + 42 / 20 and spec["draft_depth_k"] == 2
    assert spec["tokens_per_step"] is None  # no per-position counters recorded: no per-position figures
    gap = llama_bench_gap(run)[0]
    assert gap["text"] == "generation 16 tokens: llama-bench 100.0 t/s, llama-server 81.0 t/s, gap -19.0%"


class ScriptedGpu:
    """A scripted GPU source (no GPU on these machines): VRAM and power rise with each reading."""

    def __init__(self):
        self.n = 0

    def read(self):
        self.n += 1
        return [{"device": "nvidia:0", "vram_used_mib": 1000.0 + self.n, "power_w": 100.0, "temp_c": 50.0 + self.n % 3}]


def test_peak_tracker_keeps_maxima_and_integrates_energy():
    import pytest

    from llm_tuner.services.bench import PeakTracker

    now = {"t": 50.0}
    src = ScriptedGpu()
    tracker = PeakTracker(src, interval_s=0.1, clock=lambda: now["t"])
    for _ in range(4):  # readings 0.1 s apart on the tracker's clock
        tracker.sample()
        now["t"] += 0.1
    (peak,) = tracker.peaks()
    assert peak.device == "nvidia:0" and peak.vram_used_mib == 1000.0 + src.n and peak.temp_c == 52.0
    assert peak.energy_j == pytest.approx(30.0)  # 100 W over the 0.3 s between the first and last reading

    with tracker:  # on its own thread: it samples until the block ends, and once more at the end
        pass
    assert src.n > 4
