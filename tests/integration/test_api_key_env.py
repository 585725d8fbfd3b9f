"""An API key reaches llama-server through its environment (LLAMA_API_KEY), never its argv.

A process's argv is readable by every user (`ps`, /proc/PID/cmdline); its environment only by its
owner. The real server must still enforce the key; the history, the log and the copied command line
must not show it.
"""

from __future__ import annotations

import threading
import time

import httpx
import psutil

from llm_tuner.core.flags import MASK, secrets_to_env
from llm_tuner.services.bench import ServerTarget, _client_key
from llm_tuner.services.launch import plan_launch
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import ServerState, StateChanged
from llm_tuner.services.telemetry.sampler import ServerSample
from llm_tuner.services.watch import WatchedServer
from llm_tuner.store.db import open_engine
from llm_tuner.store.sessions import SessionRepository

KEY = "sk-test-4f9c2e7d1b"


def test_secret_flags_become_environment_variables():
    rest, env = secrets_to_env(["-m", "m.gguf", "--api-key", "a,b", "-c", "512", "--api-key=c", "-hft", "hf_x"], {})
    assert rest == ["-m", "m.gguf", "-c", "512"]
    assert env == {"LLAMA_API_KEY": "a,b,c", "HF_TOKEN": "hf_x"}
    args, env = secrets_to_env(["--api-key", "b", "--port", "1"], {"LLAMA_API_KEY": "a,b", "PATH": "/bin"})
    assert (args, env["LLAMA_API_KEY"]) == (["--port", "1"], "a,b")
    # an empty key is no key: nothing is set
    assert secrets_to_env(["--api-key", ""], {}) == ([], {})


def test_the_plan_keeps_the_key_out_of_argv_and_masks_it_in_the_copied_line():
    plan = plan_launch("/opt/llama-server", ["-m", "m.gguf", "--api-key", KEY, "--port", "9000"], base_env={},
                       catalog=None)
    assert KEY not in " ".join(plan.argv) and "--api-key" not in plan.argv
    assert plan.env["LLAMA_API_KEY"] == KEY and plan.api_key == KEY
    assert plan.command_line() == f"/opt/llama-server -m m.gguf --api-key '{MASK}' --port 9000"
    assert f"--api-key {KEY}" in plan.command_line(mask_secrets=False)
    # a key the profile sets as a variable is used by the client too, and masked in the line
    env_plan = plan_launch("s", ["--port", "1"], {"LLAMA_API_KEY": KEY}, base_env={})
    assert env_plan.api_key == KEY and KEY not in env_plan.command_line()


def test_benchmark_requests_carry_the_key_the_launch_gives_the_server():
    target = ServerTarget(argv=["-m", "m.gguf", "--api-key", KEY], env={"LLAMA_API_KEY": "other", "X": "1"})
    assert _client_key(target) == "other"  # the first key the server will accept
    assert _client_key(ServerTarget(argv=["--api-key", KEY])) == KEY


def _ready(e) -> bool:
    return isinstance(e, StateChanged) and e.state == ServerState.READY


def test_real_server_enforces_a_key_given_through_the_environment(server_binary, tiny_model, tmp_path):
    from llm_tuner.services.binaries import SERVER, probe

    catalog = probe(SERVER, with_devices=False).catalog
    plan = plan_launch(server_binary, ["-m", str(tiny_model), "-c", "512", "-np", "1", "-t", "2", "--api-key", KEY],
                       catalog=catalog)
    repo = SessionRepository(open_engine(tmp_path / "db.sqlite"))
    ready = threading.Event()
    events: list = []

    def on_event(ev) -> None:
        events.append(ev)
        if _ready(ev):
            ready.set()

    samples: list = []
    watched = WatchedServer(ServerSession(plan, on_event), repo=repo, on_event=on_event, gpu_readers={},
                            rates_s={"host": 0.5, "server": 0.3}, on_samples=samples.extend)
    watched.start()
    try:
        assert ready.wait(120), [str(e) for e in events][-5:]
        proc = psutil.Process(watched.session.pid)
        cmdline = proc.cmdline()
        assert KEY not in " ".join(cmdline) and "--api-key" not in cmdline
        assert proc.environ().get("LLAMA_API_KEY") == KEY  # readable by its owner only
        with httpx.Client(base_url=plan.url, timeout=30) as http:
            assert http.get("/props").status_code == 401
            assert http.get("/props", headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert http.get("/props", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
            assert http.get("/health").status_code == 200  # public: the app's health poll needs no key
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(isinstance(s, ServerSample) for s in samples):
            time.sleep(0.1)
    finally:
        watched.stop()
    # the app's own /metrics reader sent the key (else the sampler would have reported 401s)
    assert any(isinstance(s, ServerSample) and s.slots_total == 1 for s in samples)
    assert "server" not in watched.telemetry.errors
    stored = repo.history()[0]
    assert "--api-key" not in stored.argv and KEY not in " ".join(stored.argv)
    assert not any(KEY in line for line in watched.session.lines)


def test_an_inherited_key_locks_the_server_and_the_app_uses_it():
    plan = plan_launch("s", ["--port", "1"], base_env={"LLAMA_API_KEY": KEY, "PATH": "/bin"})
    assert plan.api_key == KEY and KEY not in plan.command_line()
