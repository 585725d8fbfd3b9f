"""Samplers, ring buffers and readers. GPUs get a scripted source (no GPU on these machines);
the real NVML path is checked on a GPU by scripts/gpu-check."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from llm_tuner.services.telemetry.host import HostReader
from llm_tuner.services.telemetry.ring import SeriesRing
from llm_tuner.services.telemetry.sampler import (
    GpuReader,
    GpuSample,
    Sampler,
    Telemetry,
    TickSchedule,
    sample_to_json,
)
from llm_tuner.services.telemetry.server_metrics import ServerReader, SlotWatcher, parse_metrics
from tests.support.scripted_gpu import ScriptedNvml


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_tick_schedule_keeps_the_rate_whatever_each_read_costs():
    clock = FakeClock()
    schedule = TickSchedule(0.05, clock)
    due = []
    for read_s in (0.0, 0.01, 0.03, 0.049, 0.0):
        clock.t += read_s  # the read
        wait = schedule.wait_s()
        assert wait > 0
        clock.t += wait
        due.append(round(clock.t - schedule.start, 9))
    # Ticks at start + k*interval: a slow read shortens the wait instead of delaying every later tick.
    assert due == [0.05, 0.1, 0.15, 0.2, 0.25] and schedule.skipped == 0


def test_tick_schedule_skips_the_ticks_a_long_read_missed():
    clock = FakeClock()
    schedule = TickSchedule(0.05, clock)
    clock.t += 0.12  # one read overran two ticks (due at 0.05 and 0.10)
    wait = schedule.wait_s()
    assert wait == pytest.approx(0.03) and schedule.skipped == 2  # next at 0.15, not three bunched reads


def test_sampler_ticks_on_its_clock_and_stops_at_once_mid_interval():
    clock = FakeClock()
    got: list[float] = []
    s = Sampler("x", lambda: [clock()], 0.05, got.extend, clock=clock)
    for _ in range(3):
        s.tick()
        clock.t += 0.05
    assert got == [100.0, 100.05, 100.1] and s.ticks == 3

    long = Sampler("long", lambda: [1], 3600.0, got.extend).start()  # the next tick is an hour away
    assert long._thread.name == "llm-tuner:sampler-long"
    long.stop()
    assert not long.running  # stop wakes the wait, it does not sit out the interval


def test_a_failing_reader_is_reported_once_and_retried():
    errors: list[str] = []
    state = {"n": 0}

    def flaky():
        state["n"] += 1
        if state["n"] < 4:
            raise RuntimeError("driver hiccup")
        return [1]

    got: list = []
    s = Sampler("flaky", flaky, 0.01, got.extend, lambda name, msg: errors.append(msg))
    for _ in range(5):
        s.tick()
    assert errors == ["RuntimeError: driver hiccup"] and got == [1, 1]


def test_nvml_reader_samples_with_the_server_pid_and_marks_throttling():
    src = ScriptedNvml(2)
    reader = GpuReader(src, "nvidia", lambda: frozenset({1234}), throttle_mask=0x4 | 0x8)
    samples = reader()
    assert [s.device for s in samples] == ["nvidia:0", "nvidia:1"]
    assert src.pids_seen[-1] == frozenset({1234})
    assert samples[0].process_vram_mib == 900.0 and samples[0].vram_reserved_mib == 500.0
    assert samples[0].throttled is True  # SwPowerCap
    assert reader()[0].throttled is False  # only the idle bit set
    j = sample_to_json(samples[1])
    assert j["event"] == "sample" and j["source"] == "gpu" and j["device"] == "nvidia:1"
    assert {"util_pct", "vram_used_mib", "temp_c", "power_w", "sm_clock_mhz"} <= set(j)


def test_telemetry_fills_a_ring_per_device_and_summarises():
    batches: list = []
    tel = Telemetry({"gpu:nvidia": GpuReader(ScriptedNvml(2), "nvidia")}, rates_s={"gpu": 0.02},
                    on_samples=batches.append)
    (sampler,) = tel.samplers
    for _ in range(8):
        sampler.tick()
    assert set(tel.rings) == {"nvidia:0", "nvidia:1"}
    t, cols = tel.ring("nvidia:1").arrays()
    assert len(t) == 8 and np.all(np.diff(t) >= 0)
    assert np.all(cols["temp_c"] == 41.0)
    summary = tel.summary()
    assert summary["nvidia:0"]["vram_total_mib"]["max"] == 143771.0
    assert len(batches) == 8 and all(isinstance(s, GpuSample) for b in batches for s in b)

    tel.start()  # the threads feed the same rings until stopped
    deadline = time.monotonic() + 10
    while len(tel.ring("nvidia:1")) == 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    tel.stop()
    assert len(tel.ring("nvidia:1")) > 8 and not any(s.running for s in tel.samplers)


def test_ring_wraps_keeps_order_and_slices_by_time():
    ring = SeriesRing(["v"], capacity=100)
    for i in range(250):
        ring.append(float(i), {"v": i * 2})
    t, cols = ring.arrays()
    assert len(ring) == 100 and t[0] == 150 and t[-1] == 249 and cols["v"][-1] == 498
    t2, _ = ring.arrays(since_t=240)
    assert list(t2) == [float(x) for x in range(240, 250)]
    assert ring.last()[1]["v"] == 498


def test_ring_is_safe_with_a_writer_and_a_reader():
    ring = SeriesRing(["a", "b"], capacity=1000)
    stop = threading.Event()

    def write():
        i = 0
        while not stop.is_set():
            ring.append(float(i), {"a": i, "b": -i})
            i += 1

    w = threading.Thread(target=write)
    w.start()
    try:
        for _ in range(200):
            t, c = ring.arrays()
            assert np.all(c["a"] == -c["b"])
            assert np.all(np.diff(t) > 0)
    finally:
        stop.set()
        w.join()


def test_host_reader_sees_a_process():
    import os

    s = HostReader(lambda: os.getpid())()[0]
    assert s.server_rss_mib > 1 and s.ram_total_mib > s.ram_used_mib > 0


METRICS = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {p}
llamacpp:prompt_seconds_total {ps}
llamacpp:tokens_predicted_total {g}
llamacpp:tokens_predicted_seconds_total {gs}
llamacpp:prompt_tokens_cached_total 0
llamacpp:requests_processing 1
llamacpp:requests_deferred 0
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} 3
"""


class FakeClient:
    def __init__(self):
        self.m = dict(p=0, ps=0, g=0, gs=0)
        self.slots_json = [{"id": 0, "is_processing": False, "id_task": None}]

    def metrics_text(self):
        return METRICS.format(**self.m)

    def slots(self):
        return self.slots_json


def test_metrics_counters_become_rates():
    assert parse_metrics(METRICS.format(p=5, ps=1, g=2, gs=3))["tokens_predicted_total"] == 2
    c = FakeClient()
    r = ServerReader(c)
    assert r()[0].predicted_tokens_per_s is None  # no previous scrape yet
    c.m = dict(p=100, ps=0.5, g=60, gs=1.5)
    s = r()[0]
    assert s.prompt_tokens_per_s == pytest.approx(200.0) and s.predicted_tokens_per_s == pytest.approx(40.0)
    assert s.requests_processing == 1


def test_slot_watcher_infers_a_finished_request_from_slots_and_metric_deltas():
    w = SlotWatcher()
    m0 = parse_metrics(METRICS.format(p=0, ps=0, g=0, gs=0))
    assert w.update([{"id": 0, "is_processing": False, "id_task": None}], m0) == []
    busy = {"id": 0, "is_processing": True, "id_task": 7, "n_prompt_tokens_processed": 12,
            "n_prompt_tokens_cache": 3, "next_token": [{"n_decoded": 5}]}
    assert w.update([busy], parse_metrics(METRICS.format(p=12, ps=0.1, g=5, gs=0.1))) == []
    idle = {**busy, "is_processing": False, "next_token": [{"n_decoded": 20}]}
    (req,) = w.update([idle], parse_metrics(METRICS.format(p=12, ps=0.1, g=20, gs=0.4)))
    assert (req.slot, req.task, req.prompt_n, req.predicted_n) == (0, 7, 12, 20)
    assert req.prompt_ms == pytest.approx(100.0) and req.predicted_ms == pytest.approx(400.0)


def test_a_request_that_started_and_ended_between_two_polls_is_counted_only_by_metrics():
    """llama-server resets an idle slot's n_decoded and n_prompt_tokens_processed to 0 (checked on the real server:
    64 tokens in 37 ms, between two polls, read as 0 generated, a CI failure): without /metrics the counts are
    unknown, not 0; with it, the counter deltas count the request."""
    idle = {"id": 0, "is_processing": False, "id_task": 1, "n_prompt_tokens": 71, "n_prompt_tokens_processed": 0,
            "n_prompt_tokens_cache": 0, "next_token": [{"n_decoded": 0, "n_remain": -1}]}
    w = SlotWatcher()
    assert w.update([{"id": 0, "is_processing": False}], {}) == []
    (req,) = w.update([idle], {})
    assert (req.task, req.prompt_n, req.predicted_n, req.cache_n) == (1, None, None, None)

    w = SlotWatcher()
    assert w.update([{"id": 0, "is_processing": False}], parse_metrics(METRICS.format(p=0, ps=0, g=0, gs=0))) == []
    (req,) = w.update([idle], parse_metrics(METRICS.format(p=8, ps=0.01, g=64, gs=0.03)))
    assert (req.prompt_n, req.predicted_n) == (8, 64)


def test_a_request_seen_busy_only_before_its_prompt_was_processed_is_counted_from_its_prompt():
    """The real server's first busy /slots entry (recorded): n_prompt_tokens is the whole prompt (8) while
    n_prompt_tokens_processed is still 0; the idle slot holds prompt + generated - 1 (8 + 300 - 1). Counting the
    prompt as processed + cached (0) read 308 generated for 300."""
    busy = {"id": 0, "id_task": 1, "is_processing": True, "n_prompt_tokens": 8, "n_prompt_tokens_processed": 0,
            "n_prompt_tokens_cache": 0, "next_token": [{"n_decoded": 0, "n_remain": 300}]}
    idle = {"id": 0, "id_task": 1, "is_processing": False, "n_prompt_tokens": 307, "n_prompt_tokens_processed": 0,
            "n_prompt_tokens_cache": 0, "next_token": [{"n_decoded": 0, "n_remain": -1}]}
    w = SlotWatcher()
    assert w.update([{"id": 0, "is_processing": False}], {}) == []
    assert w.update([busy], {}) == []
    (req,) = w.update([idle], {})
    assert req.predicted_n == 300


def test_attach_reports_ready_only_after_the_first_slots_and_metrics_poll():
    """A client that sends a request the moment it sees "ready" must find the counters' baseline taken,
    or its record gets no /metrics deltas (a flake seen in CI: predicted_n 0 instead of 8)."""
    from llm_tuner.services.attach import AttachedSession
    from llm_tuner.services.client import Health
    from llm_tuner.services.supervised import ServerState, StateChanged

    calls: list[str] = []

    class ScriptedClient:
        def __init__(self, url, timeout=5.0):
            pass

        def health(self, timeout=2.0):
            calls.append("health")
            return Health(200, True, "ok")

        def slots(self):
            calls.append("slots")
            return [{"id": 0, "is_processing": False, "id_task": None}]

        def metrics_text(self):
            calls.append("metrics")
            return METRICS.format(p=0, ps=0, g=0, gs=0)

        def close(self):
            pass

    ready = threading.Event()

    def on_event(ev):
        if isinstance(ev, StateChanged) and ev.state == ServerState.READY:
            calls.append("READY")
            ready.set()

    s = AttachedSession("http://127.0.0.1:1", on_event, poll_s=0.01, client_factory=ScriptedClient)
    s.start()
    assert ready.wait(5)
    s.stop()
    first_ready = calls.index("READY")
    assert "slots" in calls[:first_ready] and "metrics" in calls[:first_ready]
