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


def _cli(*argv: str, user: str | None = None, timeout: float = 60, env: dict | None = None):
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user == "nobody" else []
    return subprocess.run([*pre, sys.executable, "-m", "llm_tuner", *argv], capture_output=True, text=True,
                          timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **(env or {})})


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
            out = _cli("models", "scan", "--no-cache", "--json", str(top), user="nobody",
                       env={"LLM_TUNER_DATA_DIR": str(top / "data")})
            assert out.returncode == 0, out.stderr
            skipped = json.loads(out.stdout)["skipped"]
            assert "skipped " + str(locked) in out.stderr
        else:
            skipped = []
            find_models([top], on_skipped=lambda p, r: skipped.append({"path": p, "reason": r}))
        assert skipped == [{"path": str(locked), "reason": "folder not read: Permission denied"}]
    finally:
        os.chmod(locked, 0o755)
        shutil.rmtree(top, ignore_errors=True)
