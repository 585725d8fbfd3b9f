"""What a measurement ran on, as a report names it: CPU, cores, RAM, OS, GPUs with their driver, RPC devices,
the llama.cpp build and its backends.

A run keeps it in its `devices` record (a JSON list, no schema change): the inventory's GPUs (GpuInfo as
JSON), its RPC devices (services.rpc.run_devices) and one entry of kind `HOST_KIND` for the machine itself
(services.telemetry.host.machine_record). `hardware_lines` renders that record as a Markdown block; run
reports, comparison reports and the tune report all call it, so they name the hardware alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

HOST_KIND = "host"  # the `kind` of the machine's own entry in a run's devices


def is_host(entry: Mapping[str, Any]) -> bool:
    return entry.get("kind") == HOST_KIND


def host_entry(cpu_model: str | None, cores_physical: int | None, cores_logical: int | None,
               memory_total_mib: int | None, os_name: str | None) -> dict[str, Any]:
    """The machine's entry of a run's devices (the caller reads the facts: core does no I/O)."""
    return {"name": "Host", "kind": HOST_KIND, "cpu_model": cpu_model, "cores_physical": cores_physical,
            "cores_logical": cores_logical, "memory_total_mib": memory_total_mib, "os": os_name}


def _gib(mib: object) -> str:
    return f"{mib / 1024:.1f} GiB" if isinstance(mib, int | float) and mib else "size unknown"


def _device_text(d: Mapping[str, Any]) -> str:
    """One GPU: its model, llama.cpp names, memory and driver, as far as known."""
    names = " + ".join(d.get("llama_names") or []) or str(d.get("name", "?"))
    head = f"{d['model']} ({names})" if d.get("model") else names
    extra = [x for x in (_gib(d["memory_total_mib"]) if d.get("memory_total_mib") else "",
                         f"driver {d['driver']}" if d.get("driver") else "",
                         f"not read: {d['error']}" if d.get("error") else "") if x]
    return head + (", " + ", ".join(extra) if extra else "")


def hardware_lines(devices: Iterable[Mapping[str, Any]], binary_version: str | None = None,
                   binary_backends: Sequence[str] = (), *, title: str = "## Hardware") -> list[str]:
    """The hardware block of a report (Markdown lines, a blank line last). What was not recorded says so (a
    run stored before the machine was recorded has no CPU or OS line to give)."""
    devices = [d for d in devices if isinstance(d, Mapping)]
    host = next((d for d in devices if is_host(d)), None)
    rpc = [d for d in devices if not is_host(d) and str(d.get("name", "")).startswith("RPC")]
    gpus = [d for d in devices if not is_host(d) and d not in rpc]
    lines = [title, ""] if title else []
    if host is not None:
        physical = f"{host['cores_physical']} cores" if host.get("cores_physical") else ""
        logical = f"{host['cores_logical']} threads" if host.get("cores_logical") else ""
        cores = ", ".join(x for x in (physical, logical) if x)
        cpu = host.get("cpu_model") or "model not known"
        lines.append(f"- CPU: {cpu}" + (f" ({cores})" if cores else ""))
        lines.append(f"- RAM: {_gib(host.get('memory_total_mib'))}")
        lines.append(f"- OS: {host.get('os') or 'not known'}")
    else:
        lines.append("- CPU, RAM, OS: not recorded with this run")
    lines.append("- GPUs: " + ("; ".join(_device_text(d) for d in gpus) if gpus else "none recorded"))
    if rpc:
        lines.append("- RPC devices: " + "; ".join(
            f"{d.get('name')} ({d.get('model') or d.get('endpoint') or '?'})"
            + (f" {_gib(d['memory_total_mib'])}" if d.get("memory_total_mib") else "") for d in rpc))
    lines.append(f"- llama.cpp: {binary_version or 'version not known'}"
                 + (f" · backends: {', '.join(binary_backends)}" if binary_backends else ""))
    return [*lines, ""]
