"""The memory plan against recorded llama.cpp buffers: the replay of a recorded `benchmarks/memory_accuracy.py
--cuda` result file (its devices, every configuration's buffer lines) with our current plan, and the targets
(TOLERANCE). One home for both users: the benchmark (live runs and `--replay`) and the CI test
(tests/unit/test_memory_cuda_replay.py, on the recordings in tests/data/memory/cuda/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from llm_tuner.core.buffer_devices import buffer_device, buffer_shares, is_row_split
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.services.library import read_model
from tests.support.random_gguf import write_gemma3, write_qwen3_dense, write_qwen3_moe
from tests.support.random_hybrid import write_qwen35

KINDS = ("model", "kv", "output", "compute")
SPLIT = "GPU rows"  # -sm row: one "CUDA_Split" buffer spread over the GPUs, compared as a whole


def device_of(buffer: str, gpu_names: set[str]) -> str:
    """llama.cpp buffer name -> our device name (core.buffer_devices; *_Split -> GPU rows, compared as a whole)."""
    if is_row_split(buffer):
        return SPLIT
    return buffer_device(buffer, sorted(gpu_names))


def measured_lines(lines: list[tuple[str, str, float]], gpu_names: set[str] | list[str]
                   ) -> dict[str, dict[str, float]]:
    """{device: {kind: MiB}} from (kind, buffer, MiB) lines.

    `-sm tensor` allocates one "Meta(CUDA0,CUDA1)" buffer per kind (ggml/src/ggml-backend-meta.cpp) whose
    logged size is one device's slice (the largest: ggml_backend_meta_buffer_type_get_alloc_size takes the
    max over the devices), so it counts on every GPU of the split (the log line may show it as "Meta()");
    core.buffer_devices.buffer_shares says so.
    """
    out: dict[str, dict[str, float]] = {}
    for kind, buffer, mib in lines:
        kind = "kv" if kind == "rs" else kind
        shares = [(SPLIT, mib)] if is_row_split(buffer) else buffer_shares(buffer, mib, sorted(gpu_names))
        for dev, share in shares:
            d = out.setdefault(dev, {k: 0.0 for k in KINDS})
            d[kind] += share
    return out


def within(est: float, real: float, pct: float, abs_mib: float) -> bool:
    return abs(est - real) <= max(abs_mib, pct / 100 * abs(real))


def make_models(folder: Path) -> dict[str, Path]:
    """The random-weight models of the matrix (fixed seeds: the recordings' shapes), written into `folder`."""
    models = {
        "dense": write_qwen3_dense(folder / "qwen3-dense-q4_0.gguf", n_layer=8, n_embd=1024, n_ff=2816, n_head=16,
                                   n_head_kv=4, head_dim=64, n_ctx_train=32768, weight_type="Q4_0",
                                   embd_type="Q8_0"),
        "moe": write_qwen3_moe(folder / "qwen3-moe-q4_0.gguf", n_layer=6, n_embd=512, n_ff=1024, n_ff_exp=256,
                               n_expert=16, n_expert_used=4, n_head=8, n_head_kv=2, head_dim=64,
                               n_ctx_train=16384, weight_type="Q4_0", embd_type="Q8_0"),
        "hybrid": write_qwen35(folder / "qwen35-hybrid-mtp-q8_0.gguf", n_layer=8, nextn=1, n_ctx_train=16384),
        "tied": write_qwen3_dense(folder / "qwen3-tied-q8_0.gguf", n_layer=4, n_embd=512, n_ff=1536, n_head=8,
                                  n_head_kv=8, head_dim=64, n_ctx_train=8192, weight_type="Q8_0",
                                  embd_type="Q4_0", tied_output=True),
        # Gemma 3 270M's shapes with 12 layers: SWA pattern 6 gives 2 full-attention layers (the demo model
        # cannot travel to the GPU machine)
        "gemma": write_gemma3(folder / "gemma3-swa-q8_0.gguf", n_layer=12),
    }
    return models


_GPU_RE = re.compile(r"(CUDA\d+|ROCm\d+|Vulkan\d+|MUSA\d+) (.*?) (\d+) MiB")
# the devices the recordings were planned with: NVML total of the H200 (143771 MiB), and what
# --list-devices showed per virtual device under GGML_CUDA_DEVICES=2 (71577 MiB)
RECORDED_CAPACITY_MIB = {"memory_accuracy_cuda_h200.txt": {"CUDA0": 143771}}


@dataclass
class Recorded:
    """One configuration of a recorded --cuda run: the model, the extra arguments, llama.cpp's buffers."""

    model: str
    extra: list[str]
    buffers: list[tuple[str, str, float]]


def parse_recorded(path: Path) -> tuple[list[PlanDevice], list[Recorded]]:
    """The GPUs (from the '# host:' line) and every configuration that loaded, from a recorded result file."""
    gpus: list[PlanDevice] = []
    rows: list[Recorded] = []
    cur: Recorded | None = None
    caps = RECORDED_CAPACITY_MIB.get(path.name, {})
    for line in path.read_text().splitlines():
        if line.startswith("# host:") and "GPUs:" in line:
            for name, desc, mib in _GPU_RE.findall(line.split("GPUs:", 1)[1]):
                gpus.append(PlanDevice(name, "CUDA", caps.get(name, int(mib)), None, desc))
        elif line.startswith("## ") and "[n_ctx" in line:
            head = line[3:].split("   [n_ctx", 1)[0].split()
            extra = [] if head[1:] == ["(defaults)"] else head[1:]
            cur = Recorded(head[0], extra, [])
            rows.append(cur)
        elif line.strip().startswith("llama.cpp buffers:") and cur is not None:
            for item in line.split(":", 1)[1].split():
                kind, rest = item.split(":", 1)
                buf, mib = rest.rsplit("=", 1)
                cur.buffers.append((kind, buf, float(mib)))
            cur = None
    return gpus, rows


def replay(path: Path, models: dict[str, Path], flags: tuple[str, ...] = ("avx2",)) -> list[dict]:
    """Our current estimate for every recorded configuration, beside the recorded llama.cpp buffers.

    Returns one dict per (configuration, device): model, extra, device, ours {kind: MiB}, real {kind: MiB}.
    Only configurations whose model is in `models` are planned (the demo model may be missing).
    """
    gpus, rows = parse_recorded(path)
    gpu_names = [g.name for g in gpus]
    infos = {k: read_model(v) for k, v in models.items()}
    out = []
    for rec in rows:
        if rec.model not in infos:
            continue
        argv = ["-m", str(models[rec.model]), "-fit", "off", *rec.extra]
        pargs = parse_server_args(argv)
        plan = plan_memory(infos[rec.model], pargs, gpus, PlanDevice("Host", "CPU", None), cpu_flags=flags)
        real = measured_lines(rec.buffers, gpu_names)
        for dev in [*gpu_names, "Host"]:
            ours = plan.device(dev)
            r = real.get(dev, {k: 0.0 for k in KINDS})
            o = {"model": ours.model_mib if ours else 0.0, "kv": ours.kv_mib if ours else 0.0,
                 "output": ours.output_mib if ours else 0.0, "compute": ours.compute_mib if ours else 0.0}
            if not any(o.values()) and not any(r.values()):
                continue
            out.append({"model": rec.model, "extra": rec.extra, "device": dev, "ours": o, "real": r})
    return out


# the targets (issue 4); compute gets an absolute floor of 8 MiB because these test models are tiny
# (10% of a 20 MiB buffer is 2 MiB, less than one n_embd x ubatch activation of them)
TOLERANCE = {"model": (1.0, 4.0), "kv": (1.0, 4.0), "output": (1.0, 1.0), "compute": (10.0, 8.0),
             "total": (2.0, 8.0)}


def check(row: dict) -> dict[str, bool]:
    """{kind: within target} for one replayed row (TOLERANCE)."""
    o, r = row["ours"], row["real"]
    res = {k: within(o[k], r[k], *TOLERANCE[k]) for k in KINDS}
    res["total"] = within(sum(o.values()), sum(r.values()), *TOLERANCE["total"])
    return res
