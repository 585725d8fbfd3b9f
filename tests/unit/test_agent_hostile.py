"""Issue 25, group 5: the agent against hostile clients, on loopback, the real AgentServer and `llm-tuner agent`.

Bounds: a request must arrive whole within services.agent.REQUEST_TIMEOUT_S (10 s); the listen backlog is
LISTEN_BACKLOG (128); on loopback only loopback Host names are answered (DNS rebinding); the token comes from
$LLM_TUNER_AGENT_TOKEN or a file, never needing the command line (`ps`).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from llm_tuner.services import agent as agent_mod
from llm_tuner.services.agent import LISTEN_BACKLOG, PATH, REQUEST_TIMEOUT_S, TOKEN_ENV, AgentServer
from llm_tuner.services.settings_store import load_settings


@pytest.fixture
def agent():
    server = AgentServer("127.0.0.1", 0, readers={}, min_interval_s=0.0).start()
    yield server
    server.stop()


def test_a_request_whose_headers_never_finish_is_cut_off(capfd):
    # The bound is the agent's request_timeout_s (REQUEST_TIMEOUT_S, 10 s, in use); 2 s here proves the same cut.
    bound_s, step_s = 2.0, 0.25
    agent = AgentServer("127.0.0.1", 0, readers={}, min_interval_s=0.0, request_timeout_s=bound_s).start()
    socks = []
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", agent.port), timeout=30)
            s.sendall(b"GET /v1/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            socks.append(s)
        t0 = time.monotonic()
        for s in socks:  # keeps sending a byte now and then, so no single read waits long
            for _ in range(int((bound_s + 4) / step_s)):
                try:
                    s.sendall(b"a")
                except OSError:
                    break
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) if _readable(s) else False:
                    break
                time.sleep(step_s)
            else:
                pytest.fail("a request that never finished its headers was held beyond the bound")
        assert time.monotonic() - t0 < 3 * (bound_s + 4)
        r = httpx.get(agent.url + PATH, timeout=10)  # the agent still answers others
        assert r.status_code == 200
    finally:
        for s in socks:
            s.close()
        agent.stop()
    time.sleep(0.5)
    assert "Traceback" not in capfd.readouterr().err  # a client cut off is no error to print


def _readable(s: socket.socket) -> bool:
    import select

    return bool(select.select([s], [], [], 0)[0])


def test_the_listen_backlog_is_larger_than_socketservers_five(agent):
    assert agent._httpd.request_queue_size == LISTEN_BACKLOG >= 64
    assert agent.request_timeout_s == REQUEST_TIMEOUT_S  # the bound in use, shortened only by tests
    # a burst of connections none of which is served yet all get through the backlog
    socks = [socket.create_connection(("127.0.0.1", agent.port), timeout=5) for _ in range(40)]
    try:
        r = httpx.get(agent.url + PATH, timeout=10)
        assert r.status_code == 200
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("host,code", [("127.0.0.1", 200), ("localhost", 200), ("LOCALHOST.", 200),
                                       ("127.0.0.1:{port}", 200), ("[::1]:{port}", 200),
                                       ("evil.example.com", 403), ("evil.example.com:{port}", 403),
                                       ("127.0.0.1.evil.example", 403), ("", 403)])
def test_on_loopback_only_loopback_host_names_are_answered(agent, host, code):
    with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
        s.sendall(f"GET {PATH} HTTP/1.1\r\nHost: {host.format(port=agent.port)}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.split(b" ", 2)[1] == str(code).encode(), data[:200]
    if code == 403:
        assert b"samples" not in data


def _start_agent(*extra: str, env_token: str | None = None, tmp_path=None):
    import os

    env = {**os.environ}
    env.pop(TOKEN_ENV, None)
    if env_token:
        env[TOKEN_ENV] = env_token
    return subprocess.Popen([sys.executable, "-m", "llm_tuner", "agent", "--host", "127.0.0.2", "--port", "0", "--json",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("how", ["env", "file"])
def test_the_agent_token_comes_from_the_environment_or_a_file_not_the_command_line(tmp_path, how):
    secret = "tok-" + "x" * 30
    f = tmp_path / "token"
    f.write_text(secret + "\n")
    proc = _start_agent(*(["--token-file", str(f)] if how == "file" else []),
                        env_token=secret if how == "env" else None)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        start = json.loads(line)
        assert start["token"] == secret
        assert secret not in " ".join(psutil.Process(proc.pid).cmdline())
        ok = httpx.get(start["url"] + PATH, headers={"Authorization": f"Bearer {secret}"}, timeout=10)
        assert ok.status_code == 200
        assert httpx.get(start["url"] + PATH, timeout=10).status_code == 401
    finally:
        proc.kill()
        proc.wait(10)


def test_an_empty_token_file_is_one_clear_error(tmp_path):
    f = tmp_path / "empty"
    f.write_text("\n")
    proc = _start_agent("--token-file", str(f))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "Traceback" not in err and f"the token file {f} is empty" in err


def test_workers_add_takes_the_agent_token_from_the_environment_or_a_file(tmp_path, monkeypatch):
    from llm_tuner.cli import main

    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert main(["workers", "add", "10.0.0.2:50052", "--agent", "http://10.0.0.2:50100"]) == 0
    f = tmp_path / "t"
    f.write_text("from-file\n")
    assert main(["workers", "add", "10.0.0.3:50052", "--agent", "http://10.0.0.3:50100", "--agent-token-file",
                 str(f)]) == 0
    tokens = {w.endpoint: w.agent_token for w in load_settings().rpc_workers}
    assert tokens == {"10.0.0.2:50052": "from-env", "10.0.0.3:50052": "from-file"}
    assert agent_mod.read_token("given", None) == "given"  # the command line still works, and wins over $ENV
