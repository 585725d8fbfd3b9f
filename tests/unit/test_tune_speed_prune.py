"""The tune's pruning by the speed model: pure rules (core.tune.prune) and the runner storing pruned candidates with
their reason, never starting them, and every trial's prediction beside its measurement (a real SQLite history, a
scripted measurer: no server here)."""

from llm_tuner.core import flags
from llm_tuner.core.tune import Knob, Objective, TuneSpec, tune_report_markdown
from llm_tuner.core.tune.objectives import predicted_score
from llm_tuner.core.tune.prune import (
    SpeedGuess,
    per_token_cost,
    prune_margin,
    speed_prune,
    with_per_token_cost,
)
from llm_tuner.services.tune import SpeedOracle, TuneRunner
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository
from tests.support.tune_bench import Clock, ScriptedBench


def g(score, calibrated=True, error=0.1):
    return SpeedGuess(score, gen_tps=score, error=error, calibrated=calibrated, on="probe")


def test_a_candidate_far_behind_the_best_prediction_is_pruned_and_the_rest_are_not():
    out = speed_prune({"a": g(100.0), "b": g(75.0), "c": g(65.0), "inc": g(40.0)}, keep="inc")
    assert set(out) == {"c"}  # 35 % behind; b is 25 % behind (within 30 %); the incumbent always stays
    assert "35% behind" in out["c"] and "not started" in out["c"]
    # the model's measured error widens the margin beyond 30 %
    assert prune_margin(0.1) == 0.3 and prune_margin(0.4) == 0.4
    assert speed_prune({"a": g(100.0, error=0.4), "c": g(65.0, error=0.4)}) == {}


def test_the_servers_cost_per_token_narrows_the_gaps_between_fast_candidates():
    # measured 50 t/s where 60 were predicted: 1/50 - 1/60 s a token that the probe does not see
    cost = per_token_cost(60.0, 50.0)
    assert abs(cost - (1 / 50 - 1 / 60)) < 1e-12
    assert per_token_cost(60.0, 70.0) == 0.0 and per_token_cost(None, 50.0) == 0.0  # never widens a gap
    assert abs(with_per_token_cost(60.0, cost) - 50.0) < 1e-9
    # 40 vs 58 t/s is 31 % apart; with the cost added to both, 27 %: the fast one loses more to it
    fast, slow = with_per_token_cost(58.0, cost), with_per_token_cost(40.0, cost)
    assert abs(1 - 40 / 58 - 0.31) < 0.01 and 0.26 < 1 - slow / fast < 0.28


def test_a_prediction_on_default_costs_never_prunes_nor_is_pruned():
    assert speed_prune({"a": g(100.0), "c": g(10.0, calibrated=False)}) == {}
    assert speed_prune({"a": g(100.0, calibrated=False), "c": g(10.0)}) == {}
    assert speed_prune({"a": g(100.0), "c": SpeedGuess(None)}) == {}
    # a latency objective: the score is negated, "behind" still reads as slower
    ttft = Objective(kind="ttft")
    fast = predicted_score({"ttft_ms": 100.0}, ttft)
    slow = predicted_score({"ttft_ms": 200.0}, ttft)
    assert set(speed_prune({"fast": g(fast), "slow": g(slow)})) == {"slow"}
    assert predicted_score({"gen_tps": 5.0}, Objective(kind="throughput", clients=4)) is None


class TableOracle(SpeedOracle):
    """The tune's speed oracle with predictions by -t from a table (what a calibrated speed model says) in place
    of core.speed's: its cache and the server's per-token cost are the real ones."""

    def __init__(self, predicted: dict[str | None, float], calibrated: bool = True):
        super().__init__(Objective(prompt_tokens=16, gen_tokens=8), None)
        self.predicted, self.calibrated = predicted, calibrated

    def _guess(self, argv):
        p = self.predicted[flags.value_of(list(argv), "threads")]
        return SpeedGuess(p, gen_tps=p, error=0.173, calibrated=self.calibrated, on="probe of a + b")


def _tune(tmp_path, oracle, prune=True, baseline=50.0):
    engine = open_engine(tmp_path / "h.sqlite")
    clock = Clock()
    real = {None: baseline, "1": 20.0, "2": 52.0, "4": 60.0, "8": 58.0}
    bench = ScriptedBench(RunRepository(engine), clock, lambda argv: real[flags.value_of(list(argv), "threads")])
    spec = TuneSpec(base_argv=("-m", "m.gguf"), objective=Objective(prompt_tokens=16, gen_tokens=8),
                    knobs=(Knob(key="t", flag="threads", values=("1", "2", "4", "8")),), budget_s=3600,
                    screen_reps=2, final_reps=2, final_rounds=2, warmup=0, prune_by_speed=prune)
    runner = TuneRunner(TuneRepository(engine), bench_runner=bench, clock=clock, plan_fn=lambda a, e: (True, ""),
                        speed=oracle)
    return runner.run(spec), bench


def test_the_runner_stores_pruned_candidates_with_the_reason_and_never_starts_them(tmp_path):
    oracle = TableOracle({None: 48.0, "1": 18.0, "2": 40.0, "4": 58.0, "8": 57.0})
    result, bench = _tune(tmp_path, oracle)
    pruned = [t for t in result.trials if t.status == "pruned"]
    # -t 1 (69 % behind -t 4's prediction) and -t 2 (31 % behind) are beyond max(30 %, the 17 % error); the
    # baseline ran faster than predicted (50 vs 48 t/s), so no server cost narrows the gaps
    assert sorted(t.values["t"] for t in pruned) == ["1", "2"]
    assert all("speed model" in t.reason and t.predicted and t.predicted["calibrated"] for t in pruned)
    started_threads = {flags.value_of(list(a), "threads") for a in bench.started}
    assert not {"1", "2"} & started_threads
    # every trial carries its prediction; measured ones beside their measurement
    measured = [t for t in result.trials if t.status in ("measured", "final")]
    assert measured and all(t.predicted and t.predicted["gen_tps"] for t in measured)
    report = tune_report_markdown(result, objective="generation t/s")
    assert "predicted" in report and "speed model" in report
    # stored and read back with the prediction
    again = TuneRepository(open_engine(tmp_path / "h.sqlite")).list_trials(result.tune_id)
    assert all(t.predicted for t in again)


def test_a_baseline_slower_than_predicted_teaches_the_tune_the_servers_cost_before_it_prunes(tmp_path):
    # predicted 60 t/s, measured 50: 3.3 ms a token the model did not see; -t 2 (40 vs the baseline's 60, 33 %
    # behind) is 29 % behind with that cost on both, so it is started; -t 1 (66 % behind with it) is still pruned
    oracle = TableOracle({None: 60.0, "1": 18.0, "2": 40.0, "4": 58.0, "8": 57.0})
    result, bench = _tune(tmp_path, oracle, baseline=50.0)
    assert sorted(t.values["t"] for t in result.trials if t.status == "pruned") == ["1"]
    assert "2" in {flags.value_of(list(a), "threads") for a in bench.started}
    assert abs(oracle.server_cost_s - (1 / 50 - 1 / 60)) < 2e-4  # the scripted bench's repetitions wobble
    two = next(t for t in result.trials if t.values.get("t") == "2")
    assert "ms a token on the server (from the baseline)" in two.predicted["on"]
    assert two.predicted["gen_tps"] < 40.0  # the prediction it was started on carries the cost


def test_without_a_calibration_or_with_pruning_off_every_candidate_is_started(tmp_path):
    preds = {None: 48.0, "1": 18.0, "2": 40.0, "4": 58.0, "8": 57.0}
    for i, (oracle, prune) in enumerate(((TableOracle(preds, calibrated=False), True), (TableOracle(preds), False))):
        d = tmp_path / str(i)
        d.mkdir()
        result, bench = _tune(d, oracle, prune)
        assert not [t for t in result.trials if t.status == "pruned"]
        assert {"1", "2"} <= {flags.value_of(list(a), "threads") for a in bench.started}


def test_moe_experts_of_the_last_blocks_are_ranked_beside_the_first_and_raced_where_prefill_counts(tmp_path):
    from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
    from llm_tuner.core.tune import Planner, frontier, propose_knobs
    from llm_tuner.core.tune.prune import rank_by_prediction
    from llm_tuner.services.binaries import default_catalog
    from llm_tuner.services.library import read_model
    from tests.support.random_gguf import write_qwen3_moe, zero_weights

    with zero_weights():
        path = write_qwen3_moe(tmp_path / "moe.gguf", n_layer=8, n_embd=256, n_ff_exp=512, n_expert=16,
                               n_expert_used=2, n_ctx_train=8192)
    model = read_model(str(path))
    base = ["-m", str(path), "-c", "4096"]
    host = PlanDevice("Host", "CPU", 24000, 20000)

    def gpu(free):
        return PlanDevice("CUDA0", "CUDA", 143155, free, "NVIDIA H200", free_includes_runtime=True)

    full = plan_memory(model, parse_server_args([*base, "-ngl", "99", "--fit", "off"]), [gpu(100000)], host)
    none = plan_memory(model, parse_server_args([*base, "-ngl", "0", "--fit", "off"]), [gpu(100000)], host)
    extra = full.device("CUDA0").budget_mib - 100000
    budget = none.device("CUDA0").resident_mib + 0.7 * (full.device("CUDA0").resident_mib
                                                        - none.device("CUDA0").resident_mib)
    small = Planner(model, [gpu(int(budget - extra))], host)
    places = frontier(small, base, ("q8_0",), 32)
    by = {p.value: p for p in places if p.fits}
    first, last = by["q8_0:experts"], by["q8_0:experts_last"]
    assert abs(first.host_read_mib - last.host_read_mib) < 0.5  # the plan cannot tell them apart
    assert "--override-tensor" in last.argv and "blk\\.(7" not in last.argv[-1] and "|7)" in last.argv[-1]
    values = [p.value for p in places if p.fits]
    assert values.index("q8_0:experts_last") == values.index("q8_0:experts") + 1  # ranked beside the first
    gen = propose_knobs(model, default_catalog(), small.gpus, base, objective=Objective(kind="gen_tps"),
                        cpu_threads=8, placement=places)
    pre = propose_knobs(model, default_catalog(), small.gpus, base, objective=Objective(kind="prefill_tps"),
                        cpu_threads=8, placement=places)
    assert "q8_0:experts_last" not in gen[0].values and "q8_0:experts_last" in pre[0].values
    # weights in host memory: prompt batches copy them to the GPU per ubatch, so larger ubatches are raced
    ub = next(k for k in pre if k.key == "ub")
    assert "4096" in ub.values and "ubatch" in ub.reason
    # ranked by prediction where every one is calibrated; equal predictions keep the frontier's order
    g = [SpeedGuess(10.0, calibrated=True), SpeedGuess(10.0, calibrated=True), SpeedGuess(30.0, calibrated=True)]
    assert rank_by_prediction(["a", "b", "c"], g) == ["c", "a", "b"]
    assert rank_by_prediction(["a", "b", "c"], [*g[:2], SpeedGuess(30.0)]) == ["a", "b", "c"]
