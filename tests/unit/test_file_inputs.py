"""Only regular files (links followed) are opened as models: a pipe named *.gguf hangs nothing, pipes,
devices and folders get a precise message, unreadable folders in a scan are reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_tuner.services.library import find_models, read_model


def _cli(*argv: str, timeout: float = 60, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "llm_tuner", *argv], capture_output=True, text=True,
                          timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **(env or {})})


def _cli_as_nobody(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """The CLI in a forked child that became `nobody`: (exit code, stdout, stderr). In-process, because nobody may
    not be able to read this checkout or its .venv (a clone under `mktemp -d` is 0700): the modules the command
    needs are imported first, by running it once as root on an empty folder."""
    import contextlib
    import io
    import tempfile

    from llm_tuner.cli import main

    with tempfile.TemporaryDirectory() as empty, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        main([*argv[:-1], empty])
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run the command, send what it printed
        code = 1
        try:
            os.close(read_end)
            os.environ.update(env)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
            os.write(write_end, json.dumps([code, out.getvalue(), err.getvalue()]).encode())
        finally:
            os._exit(0 if code is not None else 1)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    code, stdout, stderr = json.loads(data or b'[1, "", "the child sent nothing"]')
    return code, stdout, stderr


@pytest.fixture
def odd_folder(tmp_path: Path) -> Path:
    (tmp_path / "folder.gguf").mkdir()
    os.mkfifo(tmp_path / "pipe.gguf")
    (tmp_path / "zero.gguf").symlink_to("/dev/zero")
    return tmp_path


def test_scan_and_estimate_do_not_hang_on_a_pipe(odd_folder):
    scan = _cli("models", "scan", "--no-cache", "--json", str(odd_folder), timeout=30)
    assert scan.returncode == 0
    skipped = {Path(s["path"]).name: s["reason"] for s in json.loads(scan.stdout)["skipped"]}
    assert skipped == {"pipe.gguf": "is a named pipe (FIFO), not a model file",
                       "zero.gguf": "is a character device, not a model file"}
    est = _cli("estimate", "--devices", "Host=8192", "--", "-m", str(odd_folder / "pipe.gguf"), timeout=30)
    assert est.returncode == 2 and "is a named pipe (FIFO), not a model file" in est.stderr


@pytest.mark.parametrize("name, says", [("folder.gguf", "is a folder, not a model file"),
                                        ("pipe.gguf", "is a named pipe (FIFO), not a model file"),
                                        ("zero.gguf", "is a character device, not a model file"),
                                        ("missing.gguf", "no such file")])
def test_model_info_says_what_the_path_is(odd_folder, name, says):
    out = _cli("model", "info", str(odd_folder / name), timeout=30)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
    if name != "missing.gguf":
        assert "no such file" not in out.stderr
        assert says in read_model(odd_folder / name).error


def test_a_link_to_a_model_is_read_like_the_model(tmp_path, demo_model):
    link = tmp_path / "snapshots" / "model.gguf"  # as in the Hugging Face cache: a link into blobs/
    link.parent.mkdir()
    link.symlink_to(demo_model)
    assert read_model(link).error is None
    entries = find_models([tmp_path])
    assert len(entries) == 1 and entries[0].size_bytes == demo_model.stat().st_size


def test_an_unreadable_folder_is_reported():
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="llm-tuner-scan-"))  # outside pytest's 0700 folder: nobody can enter it
    os.chmod(top, 0o777)
    locked = top / "locked"
    locked.mkdir()
    os.chmod(locked, 0)
    try:
        if os.geteuid() == 0:  # root reads any folder: scan as nobody
            code, stdout, stderr = _cli_as_nobody(["models", "scan", "--no-cache", "--json", str(top)],
                                                  {"LLM_TUNER_DATA_DIR": str(top / "data")})
            assert code == 0, stderr
            skipped = json.loads(stdout)["skipped"]
            assert "skipped " + str(locked) in stderr
        else:
            skipped = []
            find_models([top], on_skipped=lambda p, r: skipped.append({"path": p, "reason": r}))
        assert skipped == [{"path": str(locked), "reason": "folder not read: Permission denied"}]
    finally:
        os.chmod(locked, 0o755)
        shutil.rmtree(top, ignore_errors=True)
