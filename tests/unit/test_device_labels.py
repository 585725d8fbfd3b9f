"""GPU telemetry carries llama.cpp's device names (CUDA0) wherever the inventory maps the card.

No GPU here: NVML readings come from a scripted source; the llama.cpp side is the real `--list-devices`
output of the CUDA build on an H200 (benchmarks/sessions/2026-11-29-h200/cuda-list-devices.txt, copied in
tests/data/binary/llama-server-list-devices-cuda-h200.txt) and the NVML inventory that run reported.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from llm_tuner.core.bench_report import metric_samples
from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.devices import DeviceInventory, GpuInfo, map_llama_devices, parse_list_devices
from llm_tuner.services import bench
from llm_tuner.services.telemetry import inventory
from llm_tuner.services.telemetry.sampler import GpuReader, Telemetry, sample_to_json
from tests.support.scripted_gpu import ScriptedNvml

LIST_DEVICES = Path(__file__).parents[1] / "data" / "binary" / "llama-server-list-devices-cuda-h200.txt"


def _nvml_gpus(n: int) -> list[GpuInfo]:
    """What telemetry.nvml.nvidia_gpus returned on the H200 (devices.json), plus more cards if asked."""
    return [GpuInfo(name=f"nvidia:{i}", backend="CUDA", vendor="nvidia", index=i, model="NVIDIA H200",
                    pci_bus_id=f"00000000:00:0{6 + i}.0", memory_total_mib=143771, memory_free_mib=143155)
            for i in range(n)]


def _inventory(n_gpus: int = 1) -> DeviceInventory:
    llama = parse_list_devices(LIST_DEVICES.read_text())
    return DeviceInventory(devices=tuple(map_llama_devices(_nvml_gpus(n_gpus), llama)), llama_devices=tuple(llama))


def test_the_recorded_cuda_device_list_maps_the_nvml_card_to_cuda0():
    inv = _inventory()
    assert [(g.name, g.llama_names, g.index) for g in inv.devices] == [("CUDA0", ("CUDA0",), 0)]
    assert inventory.sample_labels(inv) == {"nvidia:0": "CUDA0"}
    assert inventory.sample_labels(None) == {}


def test_scripted_nvml_samples_are_labelled_cuda0_in_samples_rings_and_json():
    labels = inventory.sample_labels(_inventory())
    samples = GpuReader(ScriptedNvml(1), "nvidia", labels=labels)()
    assert [s.device for s in samples] == ["CUDA0"]
    assert sample_to_json(samples[0])["device"] == "CUDA0"  # what `llm-tuner run --json-lines` prints

    got = []
    tel = Telemetry({"gpu:nvidia": GpuReader(ScriptedNvml(1), "nvidia", labels=labels)}, rates_s={"gpu": 0.02},
                    on_samples=got.extend).start()
    time.sleep(0.15)
    tel.stop()
    assert set(tel.rings) == {"CUDA0"}  # the Live panel's plots and memory bars are keyed by the rings
    assert {s.device for s in got} == {"CUDA0"}


def test_a_card_the_device_list_does_not_name_keeps_its_vendor_name():
    # Two NVML cards, one CUDA device (e.g. CUDA_VISIBLE_DEVICES=0): the second is not llama.cpp's.
    labels = inventory.sample_labels(_inventory(2))
    assert labels == {"nvidia:0": "CUDA0"}
    assert [s.device for s in GpuReader(ScriptedNvml(2), "nvidia", labels=labels)()] == ["CUDA0", "nvidia:1"]
    assert [s.device for s in GpuReader(ScriptedNvml(2), "nvidia")()] == ["nvidia:0", "nvidia:1"]


def test_labels_given_as_a_callable_are_resolved_once_on_the_sampler_thread():
    calls: list[str] = []

    def resolve():
        calls.append(threading.current_thread().name)
        return {"nvidia:0": "CUDA0"}

    tel = Telemetry({"gpu:nvidia": GpuReader(ScriptedNvml(1), "nvidia", labels=resolve)}, rates_s={"gpu": 0.02})
    assert calls == []  # building the readers (on the GUI thread) runs nothing
    tel.start()
    time.sleep(0.12)
    tel.stop()
    assert calls == ["llm-tuner:sampler-gpu:nvidia"] and set(tel.rings) == {"CUDA0"}


def test_a_failing_label_lookup_keeps_vendor_names():
    def broken():
        raise OSError("llama-server vanished")

    assert [s.device for s in GpuReader(ScriptedNvml(1), "nvidia", labels=broken)()] == ["nvidia:0"]


def test_gpu_labels_prefer_the_apps_latest_inventory(monkeypatch):
    monkeypatch.setattr(inventory, "_latest", _inventory())
    assert inventory.gpu_labels("/nonexistent/llama-server") == {"nvidia:0": "CUDA0"}


def test_gpu_labels_without_gpus_run_nothing_and_name_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(inventory, "_latest", None)
    monkeypatch.setattr(inventory, "_labels_by_binary", {})
    monkeypatch.setattr(inventory, "nvidia_gpus", lambda: ([], "no driver"))
    monkeypatch.setattr(inventory, "amd_gpus", lambda: ([], "no driver"))
    assert inventory.gpu_labels(tmp_path / "llama-server") == {}


def test_bench_peaks_are_keyed_by_the_llama_cpp_name():
    labels = inventory.sample_labels(_inventory())
    tracker = bench.PeakTracker(bench._GpuSources([("nvidia", ScriptedNvml(1))], labels=labels), interval_s=0.02)
    with tracker:
        time.sleep(0.1)
    (peak,) = tracker.peaks()
    assert peak.device == "CUDA0" and peak.vram_used_mib is not None and peak.vram_used_mib > 1000
    run = BenchRun(reps=(Repetition(prompt_tokens=64, peaks=(peak,)),))
    names = set(metric_samples(run))
    assert {"peak_vram_mib:CUDA0", "peak_power_w:CUDA0", "peak_temp_c:CUDA0"} <= names
    assert not any("nvidia:0" in n for n in names)


def test_bench_peaks_without_a_mapping_keep_vendor_names():
    tracker = bench.PeakTracker(bench._GpuSources([("nvidia", ScriptedNvml(1))]), interval_s=0.02)
    with tracker:
        time.sleep(0.05)
    assert [p.device for p in tracker.peaks()] == ["nvidia:0"]



class _OneNvmlGpu(ScriptedNvml):
    """Stands in for telemetry.nvml.NvmlSource on a machine with one NVIDIA GPU."""

    reason = None
    count = 1

    def __init__(self) -> None:
        super().__init__(1)


def test_a_watched_server_names_its_gpu_samples_from_the_apps_inventory(monkeypatch):
    # The Live panel's bridge and `llm-tuner run` build WatchedServer without GPU readers: the default
    # readers take their names from the latest inventory (the app probes it at start).
    from llm_tuner.services.attach import AttachedSession
    from llm_tuner.services.telemetry import nvml
    from llm_tuner.services.watch import WatchedServer

    monkeypatch.setattr(nvml, "NvmlSource", _OneNvmlGpu)
    monkeypatch.setattr(inventory, "_latest", _inventory())
    watched = WatchedServer(AttachedSession("http://127.0.0.1:9", lambda ev: None))
    read = {s.name: s.read for s in watched.telemetry.samplers}["gpu:nvidia"]
    assert [s.device for s in read()] == ["CUDA0"]


def test_without_an_inventory_the_launched_binarys_device_list_names_the_gpus(monkeypatch, tmp_path):
    # `llm-tuner run` has no app inventory: the binary it launches is asked (--list-devices), once.
    from llm_tuner.services import binaries

    asked: list[Path] = []

    def list_devices(path):
        asked.append(path)
        return parse_list_devices(LIST_DEVICES.read_text())

    monkeypatch.setattr(inventory, "_latest", None)
    monkeypatch.setattr(inventory, "_labels_by_binary", {})
    monkeypatch.setattr(inventory, "nvidia_gpus", lambda: (_nvml_gpus(1), None))
    monkeypatch.setattr(binaries, "list_devices", list_devices)
    binary = tmp_path / "llama-server"
    assert inventory.gpu_labels(binary) == {"nvidia:0": "CUDA0"}
    assert inventory.gpu_labels(binary) == {"nvidia:0": "CUDA0"}
    assert asked == [binary]
