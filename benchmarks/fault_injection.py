"""Fault injection (issues 15 and 25): bad inputs, the app killed at logged states of a launch and a benchmark,
and hostile or unlucky conditions: a full disk, a lying server, hostile agent clients, terminal escapes in a
GGUF, shell injection through a profile, two processes on one history.

For every case it records what a user would lose or see:
  data lost       a database file changed or moved by a failed open; a finished request or repetition the
                  stream showed but the history lacks; a session or run left open after the next start; a row
                  stored before a full disk missing once space is back; a request a lying server sent not kept
  processes left  llama.cpp processes (children of the killed app) still alive 15 s after the kill
  tracebacks      "Traceback" in anything the app printed
  hangs           a case that did not end within its bound (given in the case's line)
Kills wait for a logged state (an event line of `run --json-lines`, a progress line of `bench`), never a sleep.
It also times `PRAGMA quick_check` (done at every open) on a large history file.
The full disk is a 1 MiB tmpfs (needs root: `mount -t tmpfs`); the lying server is tests/support/fake_llama.py on
loopback.

Run: .venv/bin/python benchmarks/fault_injection.py > benchmarks/results/fault_injection/fault_injection.txt  (a few minutes)
     --only-hostile: issue 25's cases only (no llama-server kills, no quick_check timing)
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_tuner.services.demo_model import find_demo_model  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402

CLI = [sys.executable, "-m", "llm_tuner"]
totals = {"cases": 0, "lost": 0, "left": 0, "tracebacks": 0, "hangs": 0, "failed": 0}


def record(name: str, *, lost: int = 0, left: int = 0, output: str = "", ok: bool = True, note: str = "",
           hang: bool = False) -> None:
    tb = output.count("Traceback")
    totals["cases"] += 1
    totals["lost"] += lost
    totals["left"] += left
    totals["tracebacks"] += tb
    totals["hangs"] += int(hang)
    totals["failed"] += 0 if ok else 1
    status = "ok  " if ok and not (lost or left or tb or hang) else "FAIL"
    print(f"{status} {name}: lost {lost}, left {left}, tracebacks {tb}, hang {'yes' if hang else 'no'}"
          + (f" · {note}" if note else ""), flush=True)


def env_for(data: Path) -> dict:
    return {**os.environ, "LLM_TUNER_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}


def cli(data: Path, *argv: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout,
                              env={**env_for(data), **(env or {})})
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(exc.cmd, 124, out, f"TIMEOUT after {timeout} s")


# -- bad databases ---------------------------------------------------------------------------------

def damaged_databases(tmp: Path) -> None:
    good = tmp / "good.sqlite"
    open_engine(good).dispose()

    def plain(p: Path) -> None:
        p.write_text("my notes\n" * 100)

    def garbage(p: Path) -> None:
        data = bytearray(good.read_bytes())
        data[4096:] = b"\x5a" * (len(data) - 4096)
        p.write_bytes(bytes(data))

    def newer(p: Path) -> None:
        p.write_bytes(good.read_bytes())
        con = sqlite3.connect(p)
        con.execute("UPDATE alembic_version SET version_num = '9999'")
        con.commit()
        con.close()

    for kind, make in (("plain text", plain), ("garbage pages", garbage), ("newer version", newer)):
        for argv in (["runs", "list"], ["profile", "list"], ["database", "check"], ["--smoke-test"]):
            data = Path(tempfile.mkdtemp(dir=tmp))
            db = data / "llm-tuner.sqlite"
            make(db)
            before = db.read_bytes()
            out = cli(data, *argv)
            lost = 0 if db.exists() and db.read_bytes() == before else 1
            record(f"database {kind}: {' '.join(argv)}", lost=lost, output=out.stderr + out.stdout,
                   ok=out.returncode == 4 and str(db) in out.stderr, note=f"exit {out.returncode}")


# -- file inputs -----------------------------------------------------------------------------------

def odd_files(tmp: Path) -> None:
    data = Path(tempfile.mkdtemp(dir=tmp))
    odd = tmp / "odd"
    odd.mkdir()
    os.mkfifo(odd / "pipe.gguf")
    (odd / "zero.gguf").symlink_to("/dev/zero")
    (odd / "folder.gguf").mkdir()
    cases = [(["models", "scan", "--no-cache", str(odd)], 0),
             (["estimate", "--devices", "Host=8192", "--", "-m", str(odd / "pipe.gguf")], 2)]
    cases += [(["model", "info", str(odd / n)], 2) for n in ("pipe.gguf", "zero.gguf", "folder.gguf")]
    for argv, code in cases:
        out = cli(data, *argv, timeout=30)
        record(f"file input: {' '.join(argv[:2])} {Path(argv[-1]).name}", output=out.stderr + out.stdout,
               ok=out.returncode == code, note=f"exit {out.returncode}")
    gib = 1 << 30
    big = tmp / "big-arch.gguf"
    with open(big, "wb") as f:
        key = b"general.architecture"
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                + struct.pack("<IQ", 8, gib))
        f.truncate(f.tell() + gib)
    empties = tmp / "empty-strings.gguf"
    with open(empties, "wb") as f:
        key = b"tokenizer.ggml.tokens"
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                + struct.pack("<IIQ", 9, 8, gib))
        f.truncate(f.tell() + 8 * gib)
    for path in (big, empties):
        t = time.monotonic()
        out = cli(data, "model", "info", "--json", str(path), timeout=60)
        said = json.loads(out.stdout).get("error") if out.stdout.strip() else None
        record(f"header: {path.name}", output=out.stderr + out.stdout, ok=out.returncode in (0, 1),
               note=f"{time.monotonic() - t:.1f} s incl. start; error: {said}")
        path.unlink()


# -- attach ----------------------------------------------------------------------------------------

def attach_dead(tmp: Path) -> None:
    from llm_tuner.services.launch import free_port

    data = Path(tempfile.mkdtemp(dir=tmp))
    t = time.monotonic()
    out = cli(data, "run", "--json-lines", "--no-samples", "--attach", f"http://127.0.0.1:{free_port()}", timeout=60)
    record("attach to a dead URL", output=out.stderr, ok=out.returncode == 1,
           note=f"exit {out.returncode} after {time.monotonic() - t:.1f} s")


# -- kills at logged states ------------------------------------------------------------------------

def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _tagged(tag: str) -> list[psutil.Process]:
    """Processes whose command line holds `tag` (the llama-server a case started, even one forked after the kill)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        if tag in (p.info["cmdline"] or []):
            out.append(p)
    return out


def _left(procs: list[psutil.Process], tag: str, wait_s: float = 15.0) -> int:
    procs = list({p.pid: p for p in procs + _tagged(tag)}.values())
    _gone, alive = psutil.wait_procs(procs, timeout=wait_s)
    alive += [p for p in _tagged(tag) if p.pid not in {a.pid for a in alive}]
    for p in alive:  # count them, then clean up so later cases start clean
        try:
            p.kill()
        except psutil.Error:
            pass
    return len(alive)


def _sessions(data: Path) -> list[tuple]:
    con = sqlite3.connect(data / "llm-tuner.sqlite")
    try:
        return con.execute("SELECT s.id, s.ended_unix, s.exit_reason, (SELECT count(*) FROM session_requests r "
                           "WHERE r.session_id = s.id) FROM server_sessions s").fetchall()
    finally:
        con.close()


def kill_run(tmp: Path, model: Path, at: str, sig: signal.Signals) -> None:
    data = Path(tempfile.mkdtemp(dir=tmp))
    tag = f"fault-{os.getpid()}-{time.monotonic_ns()}"  # the server's alias: finds it among all processes
    proc = subprocess.Popen([*CLI, "run", "--json-lines", "--no-samples", "--", "-m", str(model), "-c", "512",
                             "-t", "2", "--alias", tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(data))
    seen_requests, reached, children = 0, False, []
    url = None
    for line in proc.stdout:
        ev = json.loads(line)
        url = ev.get("url") or url
        state = ev.get("state") or ev["event"]
        if ev["event"] == "request":
            seen_requests += 1
        if state == at or (at == "request" and ev["event"] == "request"):
            reached = True
        elif at == "request" and state == "ready" and url:
            import httpx

            httpx.post(f"{url}/completion", json={"prompt": "Hello", "n_predict": 4}, timeout=60)
        if reached:
            children = _descendants(proc.pid)
            proc.send_signal(sig)
            break
    rest, err = proc.communicate(timeout=60)
    left = _left(children, tag)
    # the next start closes what the killed one left open
    cli(data, "run", "--attach", "http://127.0.0.1:9", "--no-samples", timeout=60)
    rows = _sessions(data) if (data / "llm-tuner.sqlite").exists() else []
    stored = sum(r[3] for r in rows)
    open_rows = [r for r in rows if r[1] is None]
    lost = max(0, seen_requests - stored) + len(open_rows)
    record(f"run killed by {sig.name} at '{at}'", lost=lost, left=left, output=err, ok=reached,
           note=f"{len(children)} child process(es); {seen_requests} request(s) seen, {stored} stored; "
                f"reasons {[r[2] for r in rows if r[2] != 'detached']}")


def kill_bench(tmp: Path, model: Path, at: str, sig: signal.Signals) -> None:
    data = Path(tempfile.mkdtemp(dir=tmp))
    tag = f"fault-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen([*CLI, "bench", "--json", "--prompt-tokens", "64", "--gen-tokens", "8", "--reps", "3",
                             "--warmup", "0", "--", "-m", str(model), "-c", "512", "-t", "2", "--alias", tag],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(data))
    reached, children, err_lines = False, [], []
    for line in proc.stderr:
        err_lines.append(line)
        if at in line:
            reached = True
            children = _descendants(proc.pid)
            proc.send_signal(sig)
            break
    _out, err = proc.communicate(timeout=60)
    left = _left(children, tag)
    listed = cli(data, "runs", "list", "--json", timeout=60)  # the next start marks interrupted runs
    runs = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
    statuses = [r.get("status") for r in runs] if isinstance(runs, list) else []
    lost = sum(1 for s in statuses if s == "running")
    record(f"bench killed by {sig.name} at '{at.strip()}'", lost=lost, left=left,
           output="".join(err_lines) + err + listed.stderr, ok=reached, note=f"runs after restart: {statuses}")


# -- issue 25: hostile and unlucky conditions ------------------------------------------------------

def _one_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    return lines[-1][:110] if lines else ""


def _not_json_lines(text: str) -> int:
    def refuse(const):
        raise ValueError(const)
    bad = 0
    for line in text.splitlines():
        try:
            json.loads(line, parse_constant=refuse)
        except ValueError:
            bad += 1
    return bad


def disk_full(tmp: Path) -> None:
    """Group 3: the data folder on a 1 MiB tmpfs, filled to the last block."""
    from tests.support.fake_llama import FakeLlama

    mnt = tmp / "tiny-fs"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if made.returncode:
        print(f"skip disk full: cannot mount a tmpfs here ({made.stderr.strip()})")
        return
    try:
        cli(mnt, "profile", "import", "--name", "kept", "--", "-m", "/m/a.gguf")
        with open(mnt / "filler", "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        with FakeLlama() as fake:
            for argv in (["profile", "import", "--name", "new", "--", "-m", "/m/b.gguf"],
                         ["bench", "--json", "--url", fake.url, "--prompt-tokens", "16", "--gen-tokens", "2",
                          "--reps", "1", "--warmup", "0"], ["runs", "list"]):
                t = time.monotonic()
                out = cli(mnt, *argv, timeout=60)
                lines = out.stderr.strip().splitlines()
                record(f"disk full: {' '.join(argv[:2])}", output=out.stderr + out.stdout,
                       ok=out.returncode in (0, 4) and (out.returncode == 0 or (len(lines) == 1 and "is full" in lines[0])),
                       hang=out.returncode == 124, note=f"exit {out.returncode} in {time.monotonic() - t:.1f} s "
                       f"(bound 60 s); {_one_line(out)}")
        (mnt / "filler").unlink()
        listed = cli(mnt, "profile", "list", "--json")
        names = [p["name"] for p in json.loads(listed.stdout or '{"profiles": []}')["profiles"]]
        record("disk full: rows stored before, once space is back", lost=0 if "kept" in names else 1,
               output=listed.stderr, note=f"profiles {names}")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def lying_server(tmp: Path) -> None:
    """Group 4: bench --url and run --attach against tests/support/fake_llama.py lying one way each."""
    import resource

    from llm_tuner.services.client import MAX_BODY_BYTES, SHORT_CALL_S
    from tests.support.fake_llama import FakeLlama, huge, json_route, raw, trickle

    base = {"prompt_n": 16, "prompt_ms": 5.0, "predicted_n": 2, "predicted_ms": 9.0}
    cases = [("negative timings (-2,560 t/s)", {"timings": {**base, "predicted_ms": -50.0,
                                                           "predicted_per_second": -2560.0}}),
             ("huge numbers (2**70 tokens)", {"timings": {**base, "predicted_n": 2**70, "prompt_n": 10**30}}),
             ("Infinity-sized figures (1e308)", {"timings": {**base, "prompt_ms": 1e300, "predicted_per_second": 1e308}}),
             ("garbage /tokenize (not JSON)", {"routes": {"/tokenize": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 9"
                                                                           b"\r\n\r\nnot json!")}}),
             ("garbage /tokenize (a list)", {"routes": {"/tokenize": json_route(["a"])}}),
             ("not HTTP at all", {"routes": {"/tokenize": raw(b"\x00\xff garbage\r\n\r\n")}}),
             ("50 MB body", {"routes": {"/tokenize": huge(50 * 2**20)}}),
             ("endless body", {"routes": {"/tokenize": huge(0, endless=True)}})]
    for name, kw in cases:
        data = Path(tempfile.mkdtemp(dir=tmp))
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.monotonic()
        with FakeLlama(**kw) as fake:
            out = cli(data, "bench", "--json", "--url", fake.url, "--prompt-tokens", "16", "--gen-tokens", "2",
                      "--reps", "2", "--warmup", "0", timeout=120)
        took = time.monotonic() - t
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        try:
            run = json.loads(out.stdout)
        except ValueError:
            run = {}
        record(f"lying server, bench --url: {name}", output=out.stderr + out.stdout,
               ok=out.returncode == 1 and run.get("status") in ("failed", "incomplete"), hang=out.returncode == 124,
               note=f"exit {out.returncode} in {took:.1f} s (bound 120 s); status {run.get('status')}; "
                    f"peak RSS of a child so far {max(before, peak) / 1024:.0f} MiB (body bound "
                    f"{MAX_BODY_BYTES // 2**20} MiB); {str(run.get('error'))[:80]}")

    data = Path(tempfile.mkdtemp(dir=tmp))
    t = time.monotonic()
    with FakeLlama(routes={"/health": trickle(b"", 1.0, forever=True)}) as fake:
        out = cli(data, "run", "--json-lines", "--no-samples", "--attach", fake.url, timeout=60)
    ev = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")][-1:] or [{}]
    record("lying server, attach: /health trickles a byte a second forever", output=out.stderr,
           ok=out.returncode == 1 and ev[0].get("failure") == "unreachable", hang=out.returncode == 124,
           note=f"ended in {time.monotonic() - t:.1f} s (bound 60 s; each /health whole within 2 s, "
                f"other calls {SHORT_CALL_S:g} s); {ev[0].get('failure')}")

    polls = {"n": 0}

    def slots():
        polls["n"] += 1
        return [{"id": 0, "id_task": 7, "is_processing": 3 <= polls["n"] <= 4, "n_prompt_tokens_processed": 10**30}]

    def metrics():
        late = polls["n"] >= 5
        return {"p": "1e300" if late else 0, "ps": "+Inf" if late else 0, "g": "NaN" if late else 0,
                "gs": "1e308" if late else 0}

    data = Path(tempfile.mkdtemp(dir=tmp))
    with FakeLlama(slots=slots, metrics=metrics) as fake:
        out = cli(data, "run", "--json-lines", "--attach", fake.url, "--duration", "6", "--server-interval", "0.3",
                  timeout=60)
    seen = sum(1 for x in out.stdout.splitlines() if '"event": "request"' in x)
    stored = sum(r[3] for r in _sessions(data)) if (data / "llm-tuner.sqlite").exists() else 0
    bad = _not_json_lines(out.stdout)
    record("lying server, attach: +Inf/NaN/1e300 in /metrics and /slots", lost=max(0, 1 - stored),
           output=out.stderr, ok=bad == 0 and seen == 1, hang=out.returncode == 124,
           note=f"{bad} line(s) of --json-lines not JSON; {seen} request(s) shown, {stored} stored")


def hostile_agent_clients(tmp: Path) -> None:
    """Group 5: the real agent (`llm-tuner agent`) against slow, many and rebinding clients."""
    import socket

    from llm_tuner.services.agent import LISTEN_BACKLOG, REQUEST_TIMEOUT_S, TOKEN_ENV

    data = Path(tempfile.mkdtemp(dir=tmp))
    secret = "agent-secret-" + "x" * 20
    proc = subprocess.Popen([*CLI, "agent", "--port", "0", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**env_for(data), TOKEN_ENV: secret})
    try:
        start = json.loads(proc.stdout.readline())
        host, port = "127.0.0.1", int(start["url"].rsplit(":", 1)[1])
        in_ps = secret in " ".join(psutil.Process(proc.pid).cmdline())
        record("agent: token from $LLM_TUNER_AGENT_TOKEN, not in `ps`", ok=not in_ps and start["token"] == secret,
               note=f"token in the command line: {in_ps}")
        slow = []
        for _ in range(20):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(b"GET /v1/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(s)
        t = time.monotonic()
        closed = 0
        for s in slow:
            s.settimeout(max(0.1, REQUEST_TIMEOUT_S + 10 - (time.monotonic() - t)))
            try:
                s.recv(1)  # b"": closed by the agent
                closed += 1
            except ConnectionResetError:
                closed += 1
            except (TimeoutError, OSError):
                pass
        took = time.monotonic() - t
        record("agent: 20 requests whose headers never finish", ok=closed == 20, hang=closed < 20,
               note=f"{closed}/20 cut off within {took:.1f} s (bound {REQUEST_TIMEOUT_S:g} s + 10)")
        burst = [socket.create_connection((host, port), timeout=5) for _ in range(60)]
        r = _agent_get(host, port, "127.0.0.1", secret)
        record(f"agent: a burst of 60 idle connections (backlog {LISTEN_BACKLOG})", ok=r.startswith(b"HTTP/1.0 200"),
               note=f"answer after the burst: {r[:15]!r}")
        for s in slow + burst:
            s.close()
        r = _agent_get(host, port, "attacker.example:" + str(port), secret)
        record("agent: DNS rebinding (Host: attacker.example)", ok=r.startswith(b"HTTP/1.0 403"),
               note=f"answer {r[:15]!r}")
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        record("agent: what it printed", output=err)


def _agent_get(host: str, port: int, host_header: str, token: str) -> bytes:
    import socket

    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET /v1/gpus HTTP/1.1\r\nHost: {host_header}\r\nAuthorization: Bearer {token}\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def terminal_and_shell(tmp: Path) -> None:
    """Groups 6 and 7: a GGUF whose general.name holds escape sequences; a profile whose variable name is code."""
    from tests.support.random_gguf import write_qwen3_dense

    data = Path(tempfile.mkdtemp(dir=tmp))
    models = tmp / "evil-models"
    write_qwen3_dense(models / "evil.gguf", n_layer=1, n_embd=64, n_ff=64, n_head=1, n_head_kv=1, head_dim=64,
                      name="x\x1b]0;pwned\x07\x1b[2J\x1bc\r\u202e")
    for argv in (["model", "info", str(models / "evil.gguf")], ["models", "scan", "--no-cache", str(models)]):
        out = cli(data, *argv)
        raw_controls = sum((out.stdout + out.stderr).count(c) for c in ("\x1b", "\x07", "\r", "\u202e"))
        record(f"terminal escapes: {' '.join(argv[:2])}", output=out.stderr, ok=out.returncode == 0 and not raw_controls,
               note=f"{raw_controls} raw control character(s) printed")
    mark = tmp / "INJECTED"
    prof = tmp / "evil-profile.json"
    prof.write_text(json.dumps({"model": "/m/x.gguf", "env": {f"A=1 $(touch {mark}) B": "v"}}))
    for argv in (["bench", "--profile", str(prof)], ["profile", "command", str(prof)]):
        out = cli(data, *argv)
        if out.returncode == 0 and out.stdout.strip():
            subprocess.run(["sh", "-c", out.stdout.strip().splitlines()[-1].replace("llama-server", "true", 1)],
                           cwd=tmp, capture_output=True, timeout=30)
        record(f"shell injection: {' '.join(argv[:2])} with a variable named `A=1 $(touch X) B`",
               output=out.stderr + out.stdout, ok=not mark.exists() and out.returncode == 2,
               note=f"exit {out.returncode}; ran: {mark.exists()}; {_one_line(out)}")


def two_processes(tmp: Path) -> None:
    """Group 8: a run deleted by another process while measured; a resume of a tune another process runs."""
    from llm_tuner.core.tune import Knob, Objective, TuneSpec
    from llm_tuner.store.base import process_started_unix
    from llm_tuner.store.runs import BenchGroupRow
    from llm_tuner.store.tunes import TuneRepository
    from tests.support.fake_llama import GOOD_TIMINGS, FakeLlama, send

    data = Path(tempfile.mkdtemp(dir=tmp))
    deleted = []

    def completion(h, body):
        if (body or {}).get("stream") and not deleted:
            runs = json.loads(cli(data, "runs", "list", "--json").stdout)
            deleted.append(cli(data, "runs", "delete", str(runs[0]["run_id"])).returncode)
        events = [{"content": "x", "tokens": [5], "stop": False}, {"content": "", "stop": True, "timings": GOOD_TIMINGS}]
        send(h, 200, "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode(), "text/event-stream")

    with FakeLlama(routes={"/completion": completion}) as fake:
        out = cli(data, "bench", "--json", "--url", fake.url, "--prompt-tokens", "16", "--gen-tokens", "2",
                  "--reps", "3", "--warmup", "0")
    run = json.loads(out.stdout) if out.stdout.strip() else {}
    record("two processes: the run a bench measures deleted by `runs delete`", output=out.stderr + out.stdout,
           ok=deleted == [0] and run.get("status") == "failed", note=f"status {run.get('status')}; "
           f"{str(run.get('error'))[:90]}")

    engine = open_engine(data / "llm-tuner.sqlite")
    spec = TuneSpec(base_argv=("-m", "/m/x.gguf"), label="t", objective=Objective(kind="gen_tps", prompt_tokens=16),
                    knobs=(Knob(key="ub", flag="ubatch_size", values=("64",)),), budget_s=60)
    tid = TuneRepository(engine).create(spec)
    other = subprocess.Popen(["sleep", "60"])
    try:
        from llm_tuner.store.db import session_scope

        with session_scope(engine) as s:
            row = s.get(BenchGroupRow, tid)
            row.owner_pid, row.owner_started_unix = other.pid, process_started_unix(other.pid)
        out = cli(data, "tune", "--resume", str(tid), "--json-lines")
        record("two processes: tune --resume N while N runs in another live process", output=out.stderr,
               ok=out.returncode == 2 and "running in another process" in out.stderr, note=_one_line(out))
        with session_scope(engine) as s:  # the same pid, another start time: a reused pid, no owner
            s.get(BenchGroupRow, tid).owner_started_unix = process_started_unix(other.pid) - 3600
        listed = cli(data, "tunes", "list", "--json")
        status = [t["status"] for t in json.loads(listed.stdout or "[]")]
        record("two processes: a tune whose owner pid was reused", output=listed.stderr,
               ok=status == ["interrupted"], note=f"status {status}")
    finally:
        other.kill()
        other.wait(10)
        engine.dispose()


def hostile(tmp: Path) -> None:
    disk_full(tmp)
    lying_server(tmp)
    hostile_agent_clients(tmp)
    terminal_and_shell(tmp)
    two_processes(tmp)


# -- quick_check on a large file -------------------------------------------------------------------

def quick_check_cost(tmp: Path) -> None:
    path = tmp / "big.sqlite"
    open_engine(path).dispose()
    con = sqlite3.connect(path)
    con.execute("INSERT INTO server_sessions (mode, started_unix, argv_json, telemetry_json) "
                "VALUES ('launch', 0, '[]', '{}')")
    rows = ((1, float(i), i % 4, i, 10, 1.5, 100.0, 20, 3.0, 50.0, 0) for i in range(1_500_000))
    con.executemany("INSERT INTO session_requests (session_id, time_unix, slot, task, prompt_n, prompt_ms, "
                    "prompt_per_second, predicted_n, predicted_ms, predicted_per_second, approximate) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    con.commit()
    con.close()
    size_mib = path.stat().st_size / 2**20
    stamp = path.with_name(path.name + ".checked")
    checked, unchanged = [], []
    for _ in range(3):
        stamp.unlink(missing_ok=True)  # changed since the last check: quick_check runs
        t = time.perf_counter()
        open_engine(path).dispose()
        checked.append(time.perf_counter() - t)
        t = time.perf_counter()  # unchanged since: skipped
        open_engine(path).dispose()
        unchanged.append(time.perf_counter() - t)
    print(f"open with PRAGMA quick_check, {size_mib:.0f} MiB history (1.5 M request rows): "
          f"{min(checked) * 1000:.0f}-{max(checked) * 1000:.0f} ms after a change; "
          f"{min(unchanged) * 1000:.0f}-{max(unchanged) * 1000:.0f} ms when unchanged since its last check")


def main() -> int:
    only_hostile = "--only-hostile" in sys.argv
    model = find_demo_model()
    if model is None and not only_hostile:
        print("the demo model is missing (make demo-model)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} · {platform.machine()} · {os.cpu_count()} CPUs · "
          f"Python {platform.python_version()}")
    print("# command: .venv/bin/python benchmarks/fault_injection.py" + (" --only-hostile" if only_hostile else ""))
    with tempfile.TemporaryDirectory(prefix="llm-tuner-faults-") as tmp_s:
        tmp = Path(tmp_s)
        if not only_hostile:
            damaged_databases(tmp)
            odd_files(tmp)
            attach_dead(tmp)
            for at in ("plan", "starting", "loading", "ready", "request"):
                kill_run(tmp, model, at, signal.SIGKILL)
            for at in ("starting", "ready"):
                kill_run(tmp, model, at, signal.SIGHUP)
            for at in ("starting llama-server", "repetition 1/3", "repetition 3/3"):
                kill_bench(tmp, model, at, signal.SIGKILL)
            kill_bench(tmp, model, "repetition 2/3", signal.SIGHUP)
        hostile(tmp)
        if not only_hostile:
            quick_check_cost(tmp)
    print(f"\ncases tried: {totals['cases']} · data lost: {totals['lost']} · processes left: {totals['left']} · "
          f"tracebacks shown: {totals['tracebacks']} · hangs: {totals['hangs']} · cases not as expected: "
          f"{totals['failed']} · {time.monotonic() - t0:.0f} s")
    bad = totals["lost"] or totals["left"] or totals["tracebacks"] or totals["hangs"] or totals["failed"]
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
