"""`llm-tuner agent` on a real GPU (run on the lent H200; output in agent-h200.txt).

Starts the agent command bound beyond loopback (it must print a token), checks that a request without the token
is refused, then reads the agent with Live's reader (services.agent.AgentReader) through a real Telemetry for a
few seconds and prints what the rings hold: the GPU's NVML samples named `<worker> CUDA0`/`nvidia:0`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

from llm_tuner.services.agent import PATH, AgentReader
from llm_tuner.services.telemetry.sampler import Telemetry

code = "import sys; from llm_tuner.cli import main; sys.exit(main(['agent', '--host', '0.0.0.0', '--port', '0', '--json']))"
proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
try:
    start = json.loads(proc.stdout.readline())
    print("agent start line:", {**start, "token": f"<{len(start['token'] or '')} chars>"})
    assert start["token"], "bound beyond loopback without a token"
    try:
        urllib.request.urlopen(start["url"] + PATH, timeout=5)
        print("UNEXPECTED: answered without the token")
    except urllib.error.HTTPError as exc:
        print("without the token:", exc.code)
    tel = Telemetry({"gpu:agent:worker": AgentReader(start["url"], start["token"], label="10.0.0.2:50052")},
                    rates_s={"gpu": 0.25}).start()
    time.sleep(3)
    tel.stop()
    for dev, ring in sorted(tel.rings.items()):
        t, last = ring.last()
        print(f"ring {dev!r}: {len(ring)} samples; last: " + ", ".join(
            f"{k}={last[k]:.0f}" for k in ("util_pct", "vram_used_mib", "vram_total_mib", "temp_c", "power_w")
            if last.get(k) == last.get(k) and last.get(k) is not None))
    print("errors:", tel.errors)
finally:
    proc.kill()
    proc.wait(10)
