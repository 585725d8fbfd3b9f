"""Every child dies with the app: the real CLI (`python -m llm_tuner`) is killed with SIGKILL while its child
runs (a model load for `estimate --check`, llama-bench for `bench --llama-bench`, llama-perplexity for a tune's
K/V check), and no child may remain. The child is stopped (SIGSTOP) first, so it cannot end on its own: only
the parent-death signal can take it along. Ctrl-C during a model load stops the load too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.server, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")]

ROOT = Path(__file__).resolve().parents[2]


def _find_child(parent: int, program: str, needle: str | None, timeout: float,
                skip: frozenset[int] = frozenset()) -> psutil.Process | None:
    """A child (any depth) of `parent` running `program` with `needle` in its arguments, not one of `skip` (servers
    that were there before: the session's shared llama-server is a child of the test process too)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = psutil.Process(parent).children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        for kid in kids:
            try:
                cmd = kid.cmdline()
            except psutil.Error:
                continue
            if (kid.pid not in skip and cmd and Path(cmd[0]).name == program
                    and (needle is None or any(needle in c for c in cmd))):
                return kid
        time.sleep(0.02)
    return None


def _gone(proc: psutil.Process, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _kill_cli_during(tmp_path, program: str, cli_args: list[str], *, needle: str | None = None,
                     timeout: float = 120.0) -> None:
    err = tmp_path / "cli-stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(err, "w") as err_f:
        cli = subprocess.Popen([sys.executable, "-m", "llm_tuner", *cli_args], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_f)
    child = None
    try:
        child = _find_child(cli.pid, program, needle, timeout)
        assert child is not None, f"{program} never ran:\n{err.read_text()[-3000:]}"
        child.suspend()  # SIGSTOP: it would stay forever unless something kills it
        cli.send_signal(signal.SIGKILL)
        cli.wait(10)
        assert _gone(child, 10), f"{program} (pid {child.pid}) outlived the killed CLI"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(10)
        if child is not None and not _gone(child, 0):
            child.kill()


def test_kill_9_during_estimate_check_leaves_no_model_load(tmp_path, demo_model):
    _kill_cli_during(tmp_path, "llama-server",
                     ["estimate", "--check", "--", "-m", str(demo_model), "-c", "512", "-t", "1"],
                     needle=str(demo_model))


def test_kill_9_during_llama_bench_leaves_no_llama_bench(tmp_path, demo_model):
    _kill_cli_during(tmp_path, "llama-bench",
                     ["bench", "--llama-bench", "--reps", "1", "--warmup", "0", "--prompt-tokens", "32",
                      "--gen-tokens", "4", "--", "-m", str(demo_model), "-c", "512", "-t", "1"])


def test_kill_9_during_a_tunes_perplexity_check_leaves_no_llama_perplexity(tmp_path, demo_model):
    _kill_cli_during(tmp_path, "llama-perplexity",
                     ["tune", "--knob", "cache_type_k=q8_0", "--budget", "300", "--screen-reps", "1",
                      "--warmup", "0", "--prompt-tokens", "32", "--gen-tokens", "4", "--",
                      "-m", str(demo_model), "-c", "512", "-t", "1"], timeout=240)


def test_ctrl_c_during_a_model_load_stops_it(server_binary, demo_model):
    """KeyboardInterrupt in the thread that waits (the CLI's Ctrl-C) stops the server at once, while the app
    (and so the parent-death signal's thread) lives on."""
    from llm_tuner.services.binaries import measure_server_memory

    found: list[psutil.Process] = []
    main = threading.main_thread().ident

    before = frozenset(p.pid for p in psutil.Process().children(recursive=True))

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
    assert _gone(found[0], 0.5), "Ctrl-C left the model load running"
