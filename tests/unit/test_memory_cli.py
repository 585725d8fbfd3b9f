"""`llm-tuner estimate --json` output contract (issue 4), on planned devices and the real demo model."""

from __future__ import annotations

import json
import subprocess
import sys


def _estimate(*args):
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "estimate", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_estimate_json_keys_and_planned_devices(demo_model):
    js = _estimate("--json", "--devices", "CUDA0=16384,Vulkan1=24576", "--", "-m", str(demo_model), "-ngl", "99",
                   "-ts", "40,60", "-c", "32768", "-ctk", "q8_0", "-ctv", "q8_0")
    assert set(js) >= {"devices", "warnings"}
    names = [d["name"] for d in js["devices"]]
    assert names == ["CUDA0", "Vulkan1", "Host"]
    for d in js["devices"]:
        assert set(d) >= {"name", "model_mib", "kv_mib", "compute_mib", "output_mib", "overhead_mib", "total_mib",
                          "capacity_mib", "fits"}
    cuda, vk, host = js["devices"]
    assert cuda["capacity_mib"] == 16384 and vk["capacity_mib"] == 24576 and cuda["fits"] is True
    assert vk["model_mib"] > cuda["model_mib"] > 0  # 60 % of the layers and the output layer
    assert host["model_mib"] >= 170  # token embeddings stay on the CPU
    # the KV cache of 18 layers at q8_0 is split with the layers
    assert cuda["kv_mib"] + vk["kv_mib"] + host["kv_mib"] > 0


def test_estimate_defaults_are_llamacpp_defaults(demo_model):
    js = _estimate("--json", "--devices", "Host=8192", "--", "-m", str(demo_model))
    assert js["n_ctx"] == 32768 and js["n_parallel"] == 4 and js["kv_unified"] is True
    assert [d["name"] for d in js["devices"]] == ["Host"] and js["devices"][0]["capacity_mib"] == 8192


def test_estimate_says_what_is_wrong(demo_model):
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "estimate", "--json", "--", "-c", "4096"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "-m MODEL.gguf" in out.stderr
