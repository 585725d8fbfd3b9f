"""Every child dies with the app: the real CLI (`python -m llm_tuner`) is killed with SIGKILL while its child
runs (a model load for `estimate --check`, llama-bench for `bench --llama-bench`, llama-perplexity for a tune's
K/V check), and no child may remain: every process under the CLI at the moment of the kill (read from /proc,
each known by pid and start time) must be gone. The child is stopped (SIGSTOP) first, so it cannot end on its own:
only the parent-death signal can take it along. Ctrl-C during a model load stops the load too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.server, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")]

ROOT = Path(__file__).resolve().parents[2]


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time in clock ticks) of a process, from /proc/PID/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": the name may hold spaces and ')'
    return fields[0], int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _descendants(root: int) -> dict[int, int]:
    """{pid: start time} of every process under `root`, any depth, read from /proc."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            children.setdefault(st[1], []).append(int(name))
            starts[int(name)] = st[2]
    found: dict[int, int] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in starts and pid not in found:
            found[pid] = starts[pid]
            todo.extend(children.get(pid, ()))
    return found


def _running(pid: int, start: int) -> bool:
    """The same process (pid and start time: a reused pid is another one) still exists and is no zombie."""
    st = _stat(pid)
    return st is not None and st[2] == start and st[0] not in ("Z", "X")


def _find_child(parent: int, program: str, needle: str | None, timeout: float,
                skip: frozenset[int] = frozenset()) -> tuple[int, int] | None:
    """(pid, start time) of a process under `parent` running `program` with `needle` in its arguments, not one of
    `skip` (servers that were there before: the session's shared llama-server is a child of the test process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _stat(parent) is None:
            return None
        for pid, start in _descendants(parent).items():
            cmd = _cmdline(pid)
            if (pid not in skip and cmd and Path(cmd[0]).name == program
                    and (needle is None or any(needle in c for c in cmd))):
                return pid, start
        time.sleep(0.02)
    return None


def _left(procs: dict[int, int], timeout: float) -> dict[int, list[str]]:
    """Of `procs`, those still running after `timeout` s, with their command lines."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid: _cmdline(pid) for pid, start in procs.items() if _running(pid, start)}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _kill_cli_during(tmp_path, program: str, cli_args: list[str], *, needle: str | None = None,
                     timeout: float = 120.0) -> None:
    err = tmp_path / "cli-stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(err, "w") as err_f:
        cli = subprocess.Popen([sys.executable, "-m", "llm_tuner", *cli_args], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_f)
    tree: dict[int, int] = {}
    try:
        child = _find_child(cli.pid, program, needle, timeout)
        assert child is not None, f"{program} never ran:\n{err.read_text()[-3000:]}"
        os.kill(child[0], signal.SIGSTOP)  # it would stay forever unless something kills it
        tree = _descendants(cli.pid)  # every child of the app at this moment (a tune's server too), not only it
        assert child[0] in tree
        cli.send_signal(signal.SIGKILL)
        cli.wait(10)
        left = _left(tree, 10)
        assert not left, f"the killed CLI left {len(left)} of its {len(tree)} children running: {left}"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(10)
        for pid, start in tree.items():
            if _running(pid, start):
                os.kill(pid, signal.SIGKILL)


def test_kill_9_during_estimate_check_leaves_no_model_load(tmp_path, demo_model):
    _kill_cli_during(tmp_path, "llama-server",
                     ["estimate", "--check", "--", "-m", str(demo_model), "-c", "512", "-t", "1"],
                     needle=str(demo_model))


def test_kill_9_during_llama_bench_leaves_no_llama_bench(tmp_path, demo_model):
    _kill_cli_during(tmp_path, "llama-bench",
                     ["bench", "--llama-bench", "--reps", "1", "--warmup", "0", "--prompt-tokens", "32",
                      "--gen-tokens", "4", "--", "-m", str(demo_model), "-c", "512", "-t", "1"])


def test_kill_9_during_a_tunes_perplexity_check_leaves_no_llama_perplexity(tmp_path, tiny_model):
    # The tiny model: the tune's benchmarks before the check are quick, and llama-perplexity is stopped once found
    # (it lives for its model load and its chunks at least). The other tests keep the demo model: their child is a
    # model load or a 4-token llama-bench, found within the demo model's 2 s load; the tiny one's could end first.
    _kill_cli_during(tmp_path, "llama-perplexity",
                     ["tune", "--knob", "cache_type_k=q8_0", "--budget", "300", "--screen-reps", "1",
                      "--warmup", "0", "--prompt-tokens", "32", "--gen-tokens", "4", "--",
                      "-m", str(tiny_model), "-c", "512", "-t", "1"], timeout=240)


def test_ctrl_c_during_a_model_load_stops_it(server_binary, demo_model, ctrl_c_raises):
    """KeyboardInterrupt in the thread that waits (the CLI's Ctrl-C) stops the server at once, while the app
    (and so the parent-death signal's thread) lives on."""
    from llm_tuner.services.binaries import measure_server_memory

    found: list[tuple[int, int]] = []
    main = threading.main_thread().ident

    before = frozenset(_descendants(os.getpid()))

    def interrupt_when_started() -> None:
        kid = _find_child(os.getpid(), "llama-server", str(demo_model), 60, skip=before)
        if kid is not None:
            found.append(kid)
        signal.pthread_kill(main, signal.SIGINT)  # a terminal's Ctrl-C

    t = threading.Thread(target=interrupt_when_started)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            measure_server_memory(server_binary, ["-m", str(demo_model), "-c", "512", "-t", "1"], timeout=60)
    finally:
        t.join(70)
    assert found, "the model load never started"
    assert not _left(dict(found), 0.5), "Ctrl-C left the model load running"
