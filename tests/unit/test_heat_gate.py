"""Heat in benchmarks, with the scripted NVML double: each repetition's temperature at its start, clocks and
throttle reasons; the A/B's cool-down gate (waits, gives up at its limit, says so); Compare's heat warning."""

from __future__ import annotations

from llm_tuner.core.bench_spec import BenchRun, DevicePeak, Repetition
from llm_tuner.core.heat import heat_warning, side_heat
from llm_tuner.services.bench import PeakTracker, _GpuSources
from llm_tuner.services.bench.heat import CoolDown
from tests.support.scripted_gpu import IDLE, SW_POWER_CAP, ScriptedNvml


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_each_repetition_records_start_temperature_clocks_and_throttle_reasons():
    src = ScriptedNvml(1, temps=[50.0, 55.0, 61.0], sm_clocks=[1980.0, 1700.0, 1500.0])
    tracker = PeakTracker(_GpuSources([("nvidia", src)]), clock=FakeClock())
    for _ in range(3):
        tracker.sample()
    (peak,) = tracker.peaks()
    assert peak.device == "nvidia:0"
    assert peak.temp_start_c == 50.0 and peak.temp_c == 61.0
    assert peak.sm_clock_mhz == 1700.0  # the median of the request's readings
    assert peak.mem_clock_mhz == 3201.0
    assert peak.throttle_reasons == SW_POWER_CAP | IDLE  # every reason seen during the request
    assert peak.throttled is True  # SwPowerCap is in the source's mask


def test_the_gate_waits_until_the_gpu_is_back_near_where_the_ab_began_and_says_how_long():
    clock = FakeClock()
    # start 40 °C; after the first run the card is at 52, then cools 2 °C per poll
    src = ScriptedNvml(1, temps=[40.0, 40.0, 52.0, 50.0, 48.0, 46.0, 44.0, 42.0])
    gate = CoolDown.for_telemetry(_GpuSources([("nvidia", src)]), within_c=3.0, limit_s=120.0, poll_s=5.0,
                                  clock=clock, sleep=clock.sleep)
    assert gate is not None
    assert gate.begin() == {"nvidia:0": 40.0}
    seen = []
    note = gate.wait(progress=seen.append)
    assert clock.t == 25.0  # 52, 50, 48, 46, 44 are above 43: five polls of 5 s, then 42
    assert note is not None and "waited 25 s" in note and "within 3 °C" in note and "nvidia:0 40 °C" in note
    assert seen and "nvidia:0 52 °C (started at 40 °C)" in seen[0]


def test_the_gate_gives_up_at_its_limit_and_the_note_says_the_run_started_hotter():
    clock = FakeClock()
    src = ScriptedNvml(1, temps=[40.0, 70.0])  # begin() reads 40, then the card stays at 70
    gate = CoolDown(_GpuSources([("nvidia", src)]), within_c=5.0, limit_s=30.0, poll_s=10.0, clock=clock,
                    sleep=clock.sleep)
    gate.begin()
    note = gate.wait()
    assert clock.t == 30.0
    assert "gave up after 30 s" in note and "nvidia:0 70 °C" in note and "started hotter" in note


def test_no_gpu_temperatures_no_gate():
    class NoTemps:
        def read(self):
            return [{"device": "CUDA0", "vram_used_mib": 10.0}]

    assert CoolDown.for_telemetry(None) is None
    assert CoolDown.for_telemetry(NoTemps()) is None


def _run(run_id: int, temp: float, sm: float, throttled: bool = False) -> BenchRun:
    reps = tuple(Repetition(prompt_tokens=64, predicted_per_second=50.0 + i, seq=i,
                            peaks=(DevicePeak(device="Host", vram_used_mib=100.0),
                                   DevicePeak(device="CUDA0", temp_c=temp, sm_clock_mhz=sm, mem_clock_mhz=3201.0,
                                              throttled=throttled)))
                 for i in range(3))
    return BenchRun(id=run_id, reps=reps)


def test_compare_flags_sides_that_ran_at_different_temperatures_or_clocks():
    cool, hot = _run(1, 45.0, 1980.0), _run(2, 78.0, 1600.0, throttled=True)
    assert side_heat([hot]).temp_c == 78.0 and side_heat([hot]).throttled_reps == 3
    warning = heat_warning([cool], [hot])
    assert warning is not None
    assert "45 °C (A) vs 78 °C (B)" in warning and "SM clock 1980 MHz (A) vs 1600 MHz (B)" in warning
    assert "throttled in 3/3 repetitions of B only" in warning
    assert heat_warning([cool], [_run(3, 47.0, 1970.0)]) is None  # within 5 °C and 5 %: the same state
    assert heat_warning([BenchRun(id=4)], [BenchRun(id=5)]) is None  # nothing measured: nothing said
