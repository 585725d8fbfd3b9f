"""The one scripted NVIDIA source (NvmlSource.read's readings) for machines without a GPU: the real path is
checked on a GPU by scripts/gpu-check."""

from __future__ import annotations

from llm_tuner.services.telemetry.nvml import NvmlReading

SW_POWER_CAP, IDLE = 0x4, 0x1  # NVML clocks-throttle-reason bits the readings alternate between


class ScriptedNvml:
    """Replays readings as NvmlSource.read(watch_pids) returns them, for two (or `n`) GPUs.

    GPU i: utilisation 50+i %, 143771 MiB with 500 MiB reserved, 40+i °C (or `temps`, a script of GPU 0's
    temperatures per read: a card heating under load or cooling after it); VRAM use and power rise by one with
    each read; the throttle reasons alternate between SwPowerCap (odd reads) and idle; the watched processes'
    VRAM is 900 MiB when pids are given. `calls` counts reads and `pids_seen` keeps the pids each read got.
    """

    def __init__(self, n: int = 2, *, temps: list[float] | None = None, sm_clocks: list[float] | None = None) -> None:
        self.n = n
        self.temps = temps  # GPU 0's temperature at each read (GPU i: + i; the last repeats); None: 40 °C
        self.sm_clocks = sm_clocks  # the SM clock at each read (the last repeats); None: 1980 MHz
        self.throttle_mask = SW_POWER_CAP  # what services.bench.meters counts as "throttled", as NvmlSource's
        self.calls = 0
        self.pids_seen: list[frozenset[int]] = []

    def read(self, watch_pids: frozenset[int] = frozenset()) -> list[NvmlReading]:
        self.calls += 1
        self.pids_seen.append(watch_pids)
        k = self.calls
        temp = self.temps[min(k, len(self.temps)) - 1] if self.temps else 40.0
        sm = self.sm_clocks[min(k, len(self.sm_clocks)) - 1] if self.sm_clocks else 1980.0
        return [NvmlReading(index=i, util_pct=50.0 + i, mem_util_pct=5.0, vram_used_mib=1000.0 + k,
                            vram_total_mib=143771.0, vram_reserved_mib=500.0, temp_c=temp + i, power_w=120.0 + k,
                            power_limit_w=700.0, sm_clock_mhz=sm, mem_clock_mhz=3201.0,
                            throttle_reasons=SW_POWER_CAP if k % 2 else IDLE,
                            process_vram_mib=900.0 if watch_pids else None)
                for i in range(self.n)]
