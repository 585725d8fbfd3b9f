"""Start llama-server with a model and args, answer 40 short requests from 4 clients, print the rate, stop it."""
import subprocess
import sys
import threading
import time

import httpx

server, model, port, *extra = sys.argv[1:]
argv = [server, "-m", model, "-np", "4", "-c", "4096", "--port", port, *extra]
log = open(f"/tmp/m/smoke-{port}.log", "w")
p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
url = f"http://127.0.0.1:{port}"
ok = False
for _ in range(600):
    if p.poll() is not None:
        break
    try:
        if httpx.get(url + "/health", timeout=1).status_code == 200:
            ok = True
            break
    except httpx.HTTPError:
        pass
    time.sleep(0.1)
if ok:
    done = []
    def client():
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(10):
                r = c.post("/completion", json={"prompt": "Hello!", "n_predict": 8})
                done.append(r.status_code)
    t0 = time.monotonic()
    ts = [threading.Thread(target=client) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    dt = time.monotonic() - t0
    alive = p.poll() is None
    print(f"{' '.join(argv[3:])}: {done.count(200)}/40 answered in {dt:.2f} s ({40 / dt:.1f} req/s), alive {alive}")
    ok = alive and done.count(200) == 40
p.terminate()
try:
    p.wait(20)
except subprocess.TimeoutExpired:
    p.kill()
log.close()
text = open(f"/tmp/m/smoke-{port}.log").read().splitlines()
print("\n".join(line for line in text if any(k in line for k in ("CUDA", "CPU_REPACK", "AMX", "system_info", "offloaded",
                                                                    "model buffer", "error", "Illegal")))[:3000])
if not ok:
    print("\n".join(text[-25:]))
sys.exit(0 if ok else 1)
