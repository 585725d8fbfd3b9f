"""Issue 25, group 4: a lying server (attach, `bench --url`, `run --attach` to something that answers garbage).

Each test runs the real CLI (a child process: what a user sees on stdout and stderr) or the real client against
tests/support/fake_llama.py, a local HTTP server of the test's own that lies in one way. Bounds checked: a whole
answer within the call's timeout (a trickle is cut at the deadline), at most client.MAX_BODY_BYTES per answer,
figures within core.session's MAX_* (negative, NaN, ±Inf, 1e300 refused); `--json-lines` is always JSON.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from llm_tuner.services.client import MAX_BODY_BYTES, BadAnswer, LlamaClient
from tests.support.fake_llama import FakeLlama, huge, json_route, raw, trickle

CLI = [sys.executable, "-m", "llm_tuner"]


def cli(*argv: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout)


def strict_json(line: str):
    def refuse(const):
        raise ValueError(f"not JSON: {const}")
    return json.loads(line, parse_constant=refuse)


def bench_url(url: str, *extra: str) -> subprocess.CompletedProcess:
    return cli("bench", "--json", "--url", url, "--prompt-tokens", "16", "--gen-tokens", "4", "--reps", "2",
               "--warmup", "0", *extra)


def db_runs(data_dir) -> list[tuple]:
    con = sqlite3.connect(data_dir / "llm-tuner.sqlite")
    try:
        return con.execute("SELECT id, status, error FROM bench_runs").fetchall()
    finally:
        con.close()


# -- bench --url: figures ---------------------------------------------------------------------------

@pytest.mark.parametrize("lie", [
    {"predicted_ms": -50.0, "predicted_per_second": -2560.0},  # the issue's -2,560 t/s
    {"predicted_n": 2**70, "prompt_n": 10**30},  # overflows SQLite's INTEGER
    {"prompt_ms": 1e300, "predicted_per_second": 1e308},
    {"prompt_n": "lots", "predicted_ms": [1, 2]},
])
def test_bench_url_refuses_implausible_timings_and_never_stores_a_complete_run(isolated_data_dir, lie):
    with FakeLlama(timings={**{"prompt_n": 16, "prompt_ms": 5.0, "predicted_n": 4, "predicted_ms": 9.0}, **lie}) as fake:
        out = bench_url(fake.url)
    assert "Traceback" not in out.stderr + out.stdout
    assert out.returncode == 1
    run = strict_json(out.stdout)
    assert run["status"] == "incomplete"  # every repetition a failed request that says why; none a measurement
    assert "2 request(s) failed: the server's timings are not plausible" in run["error"]
    assert [r[1] for r in db_runs(isolated_data_dir)] == ["incomplete"]


@pytest.mark.parametrize("route,said", [
    (json_route(["a", "list"]), "/tokenize"),
    (raw(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!"), "not JSON"),
    (raw(b"\x00\xff garbage, not HTTP\r\n\r\n"), "RemoteProtocolError"),
    (json_route({"tokens": [1, "two", 3.5]}), "token ids"),
    (huge(50 * 2**20), "MiB"),
])
def test_bench_url_says_what_is_wrong_with_a_garbage_answer(isolated_data_dir, route, said):
    with FakeLlama(routes={"/tokenize": route}) as fake:
        out = bench_url(fake.url)
    assert "Traceback" not in out.stderr + out.stdout
    assert out.returncode == 1
    run = strict_json(out.stdout)
    assert run["status"] == "failed" and said in run["error"]


def test_bench_url_garbage_stream_is_a_failed_request_not_a_traceback(isolated_data_dir):
    def stream(h, _body):
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {nope\n\ndata: [1,2]\n\n")
        h.close_connection = True
    with FakeLlama(routes={"/completion": stream}) as fake:
        out = bench_url(fake.url)
    assert "Traceback" not in out.stderr + out.stdout and out.returncode == 1
    run = strict_json(out.stdout)
    assert run["status"] == "incomplete" and "not JSON" in run["error"]


# -- the client's bounds ----------------------------------------------------------------------------

def test_huge_and_endless_bodies_are_cut_at_the_size_bound_without_the_memory():
    rss0 = psutil.Process().memory_info().rss
    with FakeLlama(routes={"/props": huge(50 * 2**20), "/slots": huge(0, endless=True),
                           "/metrics": raw(b"HTTP/1.1 200 OK\r\n\r\n" + b"y" * (MAX_BODY_BYTES + 10))}) as fake, \
            LlamaClient(fake.url, timeout=30) as client:
        for call in (client.props, client.slots, client.metrics_text):
            t0 = time.monotonic()
            with pytest.raises(BadAnswer, match="MiB"):
                call()
            assert time.monotonic() - t0 < 20
    assert psutil.Process().memory_info().rss - rss0 < 4 * MAX_BODY_BYTES  # not the 50 MB body, nor a growing one


@pytest.mark.parametrize("headers_too", [False, True])
def test_a_trickling_answer_ends_at_the_calls_deadline(headers_too):
    with FakeLlama(routes={"/health": trickle(b'{"status": "ok"}', 0.3, headers_too=headers_too),
                           "/props": trickle(b"{}", 0.3, forever=True)}) as fake, \
            LlamaClient(fake.url, timeout=1.0) as client:
        t0 = time.monotonic()
        h = client.health(timeout=1.0)  # every byte within the read timeout, the whole (4.8 s) far beyond it
        assert not h.ready and h.status_code is None and "within 1 s" in h.message
        with pytest.raises(Exception, match="in time|timed out"):
            client.props()
        assert time.monotonic() - t0 < 4.5  # two deadlines of 1 s, not the 4.8 s health answer, nor forever


def test_an_endless_streamed_event_is_cut():
    def stream(h, _body):
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {\"content\": \"")
        stop = h.server.stopping
        try:
            while not stop.is_set():
                h.wfile.write(b"a" * 65536)
        except OSError:
            pass
    with FakeLlama(routes={"/completion": stream}) as fake, LlamaClient(fake.url, timeout=30) as client:
        with pytest.raises(BadAnswer, match="streamed event longer"):
            list(client.completion_stream([1, 2], n_predict=4))


# -- attach ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("health", [trickle(b"", 1.0, forever=True), huge(50 * 2**20), huge(0, endless=True)],
                         ids=["trickles forever", "50 MB", "endless"])
def test_attach_to_a_health_that_trickles_forever_ends_as_unreachable(health):
    with FakeLlama(routes={"/health": health}) as fake:
        t0 = time.monotonic()
        out = cli("run", "--json-lines", "--no-samples", "--connect-timeout", "1", "--attach", fake.url, timeout=60)
    assert time.monotonic() - t0 < 30
    events = [strict_json(x) for x in out.stdout.splitlines()]
    assert out.returncode == 1 and events[-1]["event"] == "exited" and events[-1]["failure"] == "unreachable"
    assert "Traceback" not in out.stderr


def test_attach_json_lines_stay_json_and_requests_with_absurd_figures_are_kept(isolated_data_dir):
    first: list[float] = []

    def since_first_poll() -> float:
        first[:] = first or [time.monotonic()]
        return time.monotonic() - first[0]

    def slots():
        # one request seen running, then finished: busy for 2 s from 1 s after the first poll, so that every
        # poller of /slots (the sampler and the request watcher, 0.3 s apart) sees it whatever the load
        busy = 1.0 <= since_first_poll() < 3.0
        return [{"id": 0, "id_task": 7, "is_processing": busy, "n_prompt_tokens_processed": 10**30,
                 "next_token": [{"n_decoded": float("1e300"), "n_remain": -1}]}]

    def metrics():
        late = since_first_poll() >= 3.0
        return {"p": "1e300" if late else 0, "ps": "+Inf" if late else 0, "g": "NaN" if late else 0,
                "gs": "1e308" if late else 0}

    with FakeLlama(slots=slots, metrics=metrics) as fake:
        out = cli("run", "--json-lines", "--attach", fake.url, "--duration", "8", "--server-interval", "0.3",
                  "--host-interval", "5", "--gpu-interval", "5", timeout=60)
    assert "Traceback" not in out.stderr
    events = [strict_json(x) for x in out.stdout.splitlines()]  # raises on Infinity / NaN
    requests = [e for e in events if e["event"] == "request"]
    assert len(requests) == 1 and requests[0]["implausible"]
    assert requests[0]["prompt_ms"] is None
    con = sqlite3.connect(isolated_data_dir / "llm-tuner.sqlite")
    try:
        assert con.execute("SELECT count(*) FROM session_requests").fetchone()[0] == 1  # kept, not lost
    finally:
        con.close()


# -- issue 35 item 5: bad servers (held-out probes) --------------------------------------------------

def test_attach_to_a_server_whose_slots_are_not_json_says_it_without_a_traceback():
    with FakeLlama(routes={"/slots": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n<html>oops</")}) as fake:
        out = cli("run", "--json-lines", "--attach", fake.url, "--duration", "3", "--server-interval", "0.3",
                  "--host-interval", "5", "--gpu-interval", "5", timeout=60)
    assert "Traceback" not in out.stderr and 'File "' not in out.stderr, out.stderr
    assert "/slots" in out.stderr and "not JSON" in out.stderr  # said once, in words


def test_bench_url_to_a_health_that_never_finishes_says_so_within_seconds(isolated_data_dir):
    with FakeLlama(routes={"/health": trickle(b"", 1.0, forever=True)}) as fake:
        t0 = time.monotonic()
        out = bench_url(fake.url)
        took = time.monotonic() - t0
    assert "Traceback" not in out.stderr + out.stdout and out.returncode != 0
    assert took < 25, took  # was silent for over 30 s
    assert "/health" in out.stderr + out.stdout
