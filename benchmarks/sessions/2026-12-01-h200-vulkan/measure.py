"""On the lent H200 (CUDA + Vulkan + RPC build): record device lines, PCI ids, and measure each backend's memory
beyond llama.cpp's own buffers (the runtime overhead the plan adds per device).

For each configuration: NVML's used memory of the card before the server starts and after it is ready and has
answered one request; llama.cpp's buffers on that card (its "<dev> model/KV/compute buffer size" lines); overhead =
NVML delta − buffers. Logs go to $OUT/logs/ (each configuration's server log, -lv 4) for the app's tests.
Usage: python3 measure.py OUTDIR BIN_DIR MODEL [MODEL ...]
"""
import json
import os
import re
import subprocess
import sys
import time

import httpx
import pynvml

out, bindir, *models = sys.argv[1:]
os.makedirs(f"{out}/logs", exist_ok=True)
server = f"{bindir}/llama-server"
env = dict(os.environ, VK_DRIVER_FILES="/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json",
           CUDA_DEVICE_ORDER="PCI_BUS_ID")
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
pci = pynvml.nvmlDeviceGetPciInfo(h).busId
pci = pci.decode() if isinstance(pci, bytes) else pci
info = {"nvml_bus_id": pci, "nvml_name": pynvml.nvmlDeviceGetName(h),
        "nvml_total_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**20,
        "driver": pynvml.nvmlSystemGetDriverVersion()}
print(json.dumps(info))
lst = subprocess.run([server, "--list-devices"], env=env, capture_output=True, text=True, timeout=60)
open(f"{out}/logs/list-devices.txt", "w").write(lst.stdout + lst.stderr)
print(lst.stdout)


def used_mib() -> float:
    return pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20


BUF = re.compile(r"(\S+) (model|KV|compute|output|RS|recurrent|repack)\w* buffer size =\s+([\d.]+) MiB")


def buffers(text: str) -> dict:
    out: dict = {}
    for m in BUF.finditer(text):
        dev = m.group(1)
        out.setdefault(dev, {}).setdefault(m.group(2), 0.0)
        out[dev][m.group(2)] += float(m.group(3))
    return out


def run(name: str, model: str, args: list[str], port: int) -> dict:
    time.sleep(1.0)
    before = used_mib()
    log_path = f"{out}/logs/{name}.log"
    argv = [server, "-m", model, "--port", str(port), "-lv", "4", "-np", "1", *args]
    with open(log_path, "w") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        ready = False
        for _ in range(1200):
            if p.poll() is not None:
                break
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    ready = True
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        res = {"name": name, "model": os.path.basename(model), "args": args, "ready": ready}
        if ready:
            at_ready = used_mib()
            r = httpx.post(f"http://127.0.0.1:{port}/completion",
                           json={"prompt": "Hello " * 200, "n_predict": 32, "ignore_eos": True}, timeout=120)
            t = r.json().get("timings", {})
            time.sleep(0.5)
            after = used_mib()
            procs = [(x.pid, (x.usedGpuMemory or 0) / 2**20) for x in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
            res.update(before_mib=before, ready_delta_mib=at_ready - before, after_delta_mib=after - before,
                       nvml_procs=procs, prompt_tps=t.get("prompt_per_second"), gen_tps=t.get("predicted_per_second"))
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    text = open(log_path).read()
    b = buffers(text)
    res["buffers"] = b
    gpu = {d: sum(v.values()) for d, v in b.items() if d.startswith(("CUDA0", "Vulkan0")) and "Host" not in d}
    res["gpu_buffers_mib"] = gpu
    if res.get("after_delta_mib") is not None:
        res["overhead_mib"] = res["after_delta_mib"] - sum(gpu.values())
    res["device_lines"] = [ln.split(": ", 1)[-1] for ln in text.splitlines() if "using device" in ln or "skipping device" in ln]
    print(json.dumps(res), flush=True)
    return res


results = []
port = 18300
for model in models:
    tag = "f16" if "f16" in model else "q4km"
    for ctx in ("4096", "32768"):
        for name, args in (("cuda", ["-dev", "CUDA0"]), ("vulkan", ["-dev", "Vulkan0"]),
                           ("both-ts40-60", ["-dev", "CUDA0,Vulkan0", "-ts", "40,60"]), ("nodev", [])):
            if tag == "q4km" and ctx == "32768" and name in ("both-ts40-60", "nodev"):
                continue
            port += 1
            results.append(run(f"{tag}-c{ctx}-{name}", model, ["-ngl", "99", "-c", ctx, "-fa", "on", *args], port))
# -ngl 0 on a machine with a GPU: the compute buffer llama.cpp still puts on CUDA0 (issue 12 item 6)
port += 1
results.append(run("f16-c8192-ngl0-cuda", models[0], ["-ngl", "0", "-c", "8192", "-dev", "CUDA0"], port))
json.dump({"info": info, "results": results}, open(f"{out}/vulkan_overhead.json", "w"), indent=1)
