"""Fault injection (issue 15): bad inputs, and the app killed at logged states of a launch and a benchmark.

For every case it records what a user would lose or see:
  data lost       a database file changed or moved by a failed open; a finished request or repetition the
                  stream showed but the history lacks; a session or run left open after the next start
  processes left  llama.cpp processes (children of the killed app) still alive 15 s after the kill
  tracebacks      "Traceback" in anything the app printed
Kills wait for a logged state (an event line of `run --json-lines`, a progress line of `bench`), never a sleep.
It also times `PRAGMA quick_check` (done at every open) on a large history file.

Run: .venv/bin/python benchmarks/fault_injection.py > benchmarks/results/fault_injection.txt  (a few minutes)
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
totals = {"cases": 0, "lost": 0, "left": 0, "tracebacks": 0, "failed": 0}


def record(name: str, *, lost: int = 0, left: int = 0, output: str = "", ok: bool = True, note: str = "") -> None:
    tb = output.count("Traceback")
    totals["cases"] += 1
    totals["lost"] += lost
    totals["left"] += left
    totals["tracebacks"] += tb
    totals["failed"] += 0 if ok else 1
    status = "ok  " if ok and not (lost or left or tb) else "FAIL"
    print(f"{status} {name}: lost {lost}, left {left}, tracebacks {tb}" + (f" · {note}" if note else ""), flush=True)


def env_for(data: Path) -> dict:
    return {**os.environ, "LLM_TUNER_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}


def cli(data: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout, env=env_for(data))
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, exc.stdout or "", f"TIMEOUT after {timeout} s")


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
    from llm_tuner.services.server import free_port

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
    model = find_demo_model()
    if model is None:
        print("the demo model is missing (make demo-model)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} · {platform.machine()} · {os.cpu_count()} CPUs · "
          f"Python {platform.python_version()}")
    print("# command: .venv/bin/python benchmarks/fault_injection.py")
    with tempfile.TemporaryDirectory(prefix="llm-tuner-faults-") as tmp_s:
        tmp = Path(tmp_s)
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
        quick_check_cost(tmp)
    print(f"\ncases tried: {totals['cases']} · data lost: {totals['lost']} · processes left: {totals['left']} · "
          f"tracebacks shown: {totals['tracebacks']} · cases not as expected: {totals['failed']} · "
          f"{time.monotonic() - t0:.0f} s")
    return 0 if not (totals["lost"] or totals["left"] or totals["tracebacks"] or totals["failed"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
