"""`llm-tuner agent` over loopback with a real sampler: its GPU samples reach another Telemetry (as Live's),
named by the worker; the token when bound beyond loopback; and the command stays headless (no Qt)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from llm_tuner.services.agent import PATH, AgentReader, AgentServer, agent_readers
from llm_tuner.services.telemetry.sampler import GpuReader, Telemetry
from tests.support.scripted_gpu import ScriptedNvml


@pytest.fixture
def agent():
    source = ScriptedNvml()
    server = AgentServer("127.0.0.1", 0, readers={"gpu:nvidia": GpuReader(source, "nvidia", labels={"nvidia:0": "CUDA0"})},
                         min_interval_s=0.0).start()
    yield server, source
    server.stop()


def test_live_telemetry_reads_a_workers_gpus_through_its_agent(agent):
    from llm_tuner.core.settings import RpcWorker

    server, source = agent
    assert server.token is None  # loopback: no token needed
    readers = agent_readers([RpcWorker(endpoint="10.0.0.2:50052", agent_url=server.url),
                             RpcWorker(endpoint="10.0.0.3:50052")])  # a worker without an agent: nothing to read
    assert list(readers) == ["gpu:agent:10.0.0.2:50052"]
    tel = Telemetry(readers, rates_s={"gpu": 0.05}).start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                len(tel.rings.get(d, ())) >= 3 for d in ("10.0.0.2:50052 CUDA0", "10.0.0.2:50052 nvidia:1")):
            time.sleep(0.05)
    finally:
        tel.stop()
    assert set(tel.rings) == {"10.0.0.2:50052 CUDA0", "10.0.0.2:50052 nvidia:1"}
    t, last = tel.rings["10.0.0.2:50052 nvidia:1"].last()
    assert last["util_pct"] == 51.0 and last["vram_total_mib"] == 143771.0 and last["temp_c"] == 41.0
    assert abs(t - time.time()) < 5 and source.calls >= 3


def test_a_token_is_required_when_set_and_generated_beyond_loopback(agent):
    locked = AgentServer("127.0.0.1", 0, token="s3cret", readers=agent[0].readers).start()
    try:
        with pytest.raises(PermissionError, match="token"):
            AgentReader(locked.url)()
        assert [s.device for s in AgentReader(locked.url, "s3cret", label="w")()] == ["w CUDA0", "w nvidia:1"]
        assert httpx.get(locked.url + "/other", headers={"Authorization": "Bearer s3cret"}).status_code == 404
    finally:
        locked.stop()
    open_bind = AgentServer("0.0.0.0", 0, readers={})
    try:
        assert open_bind.token and len(open_bind.token) >= 24
    finally:
        open_bind.stop()


def test_the_agent_command_is_headless_and_prints_where_it_listens():
    code = ("import sys; from llm_tuner.cli import main; import llm_tuner.services.agent; "
            "assert 'PySide6' not in sys.modules and 'pyqtgraph' not in sys.modules, 'Qt imported'; "
            "sys.exit(main(['agent', '--port', '0', '--json', '--token', 'tok']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        start = json.loads(line)
        assert start["event"] == "listening" and start["token"] == "tok"
        r = httpx.get(start["url"] + PATH, headers={"Authorization": "Bearer tok"}, timeout=10)
        assert r.status_code == 200 and set(r.json()) == {"host", "samples", "errors"}
    finally:
        proc.kill()
        proc.wait(10)
