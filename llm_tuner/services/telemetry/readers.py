"""This machine's GPU readers: one per vendor library present (NVML, AMD), for a watched server and the
agent."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from llm_tuner.services.telemetry import amd, nvml
from llm_tuner.services.telemetry.sampler import GpuReader


def default_gpu_readers(pids: Callable[[], frozenset[int]],
                        labels: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
                        ) -> tuple[dict[str, GpuReader], list[str]]:
    """GPU readers for the vendors present here, and notes for those that are not.

    `labels` names the samples ({"nvidia:0": "CUDA0"} or a callable giving it; see GpuReader). The sources are
    looked up in their modules at each call, so a test's scripted library takes their place.
    """
    readers: dict[str, GpuReader] = {}
    notes: list[str] = []
    nv = nvml.NvmlSource()
    if nv.count:
        readers["gpu:nvidia"] = GpuReader(nv, "nvidia", pids, nvml.THROTTLE_MASK, labels=labels)
    elif nv.reason:
        notes.append(nv.reason)
    radeon = amd.AmdSource()
    if radeon.count:
        readers["gpu:amd"] = GpuReader(radeon, "amd", labels=labels)
    elif radeon.reason:
        notes.append(radeon.reason)
    return readers, notes
