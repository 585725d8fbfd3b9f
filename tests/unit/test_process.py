"""services.process, the one spawner: short runs stop their child on timeout, cancel and Ctrl-C
(KeyboardInterrupt in the waiting thread), with real child processes (shell scripts that write their pid)."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from llm_tuner.services import binaries, process
from llm_tuner.services.binaries import BinaryError

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX scripts and process groups")


def _sleeper(tmp_path):
    """A program that writes its pid and sleeps (exec: the pid stays the sleeper's)."""
    pid_file = tmp_path / "pid"
    script = tmp_path / "sleeper"
    script.write_text(f"#!/bin/sh\necho $$ > '{pid_file}'\nexec sleep 60\n")
    script.chmod(0o755)
    return script, pid_file


def _pid(pid_file, timeout=10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.02)
    raise AssertionError("the child never started")


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _kill(pid_file) -> None:
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), 9)
        except (ProcessLookupError, ValueError):
            pass


def ctrl_c_when(ready) -> threading.Thread:
    """A thread that sends SIGINT to the main thread (as a terminal's Ctrl-C does) once `ready()` is true."""
    main = threading.main_thread().ident

    def run() -> None:
        deadline = time.monotonic() + 60
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_ctrl_c_during_a_short_run_stops_the_child(tmp_path, ctrl_c_raises):
    script, pid_file = _sleeper(tmp_path)
    t = ctrl_c_when(pid_file.exists)
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            binaries.run_short([str(script)], timeout=60)
        assert time.monotonic() - t0 < 10
        t.join(10)
        assert _gone(_pid(pid_file), 0.5), "Ctrl-C left the short run's child running"
    finally:
        _kill(pid_file)


def test_ctrl_c_during_a_polite_stop_kills_the_child_at_once(tmp_path, ctrl_c_raises):
    """A child that ignores SIGINT, stopped with a long SIGINT grace: a Ctrl-C while the stop waits ends it now
    (SIGKILL) instead of leaving it running (the model-load Ctrl-C test once found the server alive after)."""
    pid_file = tmp_path / "pid"
    script = tmp_path / "stubborn"
    script.write_text(f"#!/bin/sh\ntrap '' INT\necho $$ > '{pid_file}'\nwhile :; do sleep 0.1; done\n")
    script.chmod(0o755)
    child = process.spawn([str(script)])
    try:
        pid = _pid(pid_file)
        t0 = time.monotonic()
        t = ctrl_c_when(lambda: time.monotonic() > t0 + 1.0)  # the stop below is waiting out its SIGINT grace
        with pytest.raises(KeyboardInterrupt):
            child.stop(sigint_s=30.0, sigterm_s=30.0, sigkill_s=5.0)
        t.join(10)
        assert time.monotonic() - t0 < 10
        assert _gone(pid, 0.5) and child.poll() is not None, "Ctrl-C during the stop left the child running"
    finally:
        _kill(pid_file)
        child.stop(0.1, 0.1, 1.0)
        list(child.lines())  # read to its end: the pipe closed


def test_ctrl_c_while_the_spawner_starts_a_child_ends_that_child(tmp_path, ctrl_c_raises):
    """Interrupted while the spawner thread starts a child, the caller never holds it: it must not live on."""
    import subprocess

    script, pid_file = _sleeper(tmp_path)
    started: list[subprocess.Popen] = []

    def slow_start() -> subprocess.Popen:
        time.sleep(1.0)  # the Ctrl-C comes while this spawn is under way
        started.append(subprocess.Popen([str(script)], start_new_session=True))
        return started[0]

    t0 = time.monotonic()
    t = ctrl_c_when(lambda: time.monotonic() > t0 + 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            process._spawner.run(slow_start)
        t.join(10)
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:  # the spawn finishes on the spawner thread
            time.sleep(0.02)
        # ended (perhaps before its first line ran: no pid file then), not left running
        assert started and _gone(started[0].pid, 5.0), "Ctrl-C during a spawn left its child running"
    finally:
        _kill(pid_file)
        for p in started:
            if p.poll() is None:
                p.kill()
            p.wait(5)


def test_cancel_stops_the_child_and_says_so(tmp_path):
    script, pid_file = _sleeper(tmp_path)
    try:
        with pytest.raises(BinaryError, match="cancelled"):
            binaries.run_short([str(script)], timeout=60, cancel_check=pid_file.exists)
        assert _gone(_pid(pid_file), 0.5)
    finally:
        _kill(pid_file)


def test_timeout_stops_the_child(tmp_path):
    script, pid_file = _sleeper(tmp_path)
    try:
        t0 = time.monotonic()
        with pytest.raises(BinaryError, match="did not finish within"):
            binaries.run_short([str(script)], timeout=1.0)
        assert time.monotonic() - t0 < 5
        assert _gone(_pid(pid_file), 0.5)
    finally:
        _kill(pid_file)


def test_a_short_run_child_has_its_own_group_and_the_parent_death_signal(tmp_path):
    """Read from the child itself: its process group is its own pid, and /proc says PDEATHSIG is set
    (prctl PR_GET_PDEATHSIG through Python in the child)."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    code = ("import ctypes, os; libc = ctypes.CDLL('libc.so.6'); s = ctypes.c_int(); libc.prctl(2, ctypes.byref(s)); "
            "print(os.getpgrp() == os.getpid(), s.value)")
    done = process.run([sys.executable, "-c", code], timeout=30)
    assert done.stdout.split() == ["True", "9"], done


def test_output_of_a_short_run_is_captured_apart(tmp_path):
    script = tmp_path / "talk"
    script.write_text("#!/bin/sh\necho out\necho err >&2\nexit 3\n")
    script.chmod(0o755)
    run = binaries.run_short([str(script)], timeout=10)
    assert (run.returncode, run.stdout, run.stderr) == (3, "out\n", "err\n")
