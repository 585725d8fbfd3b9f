"""A scripted NVIDIA source (NvmlSource.read's readings) for machines without a GPU: the real path is checked on
a GPU by scripts/gpu-check."""

from __future__ import annotations

from llm_tuner.services.telemetry.nvml import NvmlReading


class ScriptedNvml:
    """Two (or `n`) GPUs: utilisation 50+i %, 143771 MiB, VRAM use growing by 1 MiB per read, 40+i °C."""

    def __init__(self, n: int = 2) -> None:
        self.n = n
        self.calls = 0

    def read(self, watch_pids=frozenset()):
        self.calls += 1
        return [NvmlReading(i, 50.0 + i, 5.0, 1000.0 + self.calls, 143771.0, 500.0, 40.0 + i, 300.0, 700.0, 1980.0,
                            3201.0, 0, None) for i in range(self.n)]
