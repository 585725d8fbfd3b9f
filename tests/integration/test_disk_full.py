"""Issue 25, group 3: the data folder on a full disk. Every command says so in one line (what, where, what to do),
exits 4, shows no traceback, and loses nothing stored before; the store raises the same one-line
store.db.StorageFullError that the window shows (its job's `failed` message is `str(exc)`).

The disk is real: a 1 MiB tmpfs mounted by the test (tests/support/tiny_disk.py; root, as the test machines
run), filled with a file until ENOSPC; where mounting is not permitted the tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llm_tuner.store.db import StorageFullError, open_engine
from tests.support.fake_llama import FakeLlama
from tests.support.tiny_disk import fill, tiny_disk

CLI = [sys.executable, "-m", "llm_tuner"]


@pytest.fixture
def full_data_dir(tmp_path, monkeypatch):
    """A data folder on a 1 MiB file system; `fill()` takes all its space, `free()` gives it back."""
    with tiny_disk(tmp_path, "1m") as mnt:
        monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(mnt))

        class Disk:
            path = mnt

            @staticmethod
            def fill() -> None:
                fill(mnt)

            @staticmethod
            def free() -> None:
                (mnt / "filler").unlink(missing_ok=True)

        yield Disk


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120)


def one_clear_line(out: subprocess.CompletedProcess, where) -> None:
    assert out.returncode == 4, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "is full" in lines[0] and str(where) in lines[0] and "free space" in lines[0]


def test_profile_import_and_bench_on_a_full_disk_say_it_in_one_line_and_lose_nothing(full_data_dir):
    assert cli("profile", "import", "--name", "kept", "--", "-m", "/m/one.gguf", "-c", "1024").returncode in (0, 1)
    full_data_dir.fill()
    db = full_data_dir.path / "llm-tuner.sqlite"

    one_clear_line(cli("profile", "import", "--name", "lost", "--", "-m", "/m/two.gguf", "-c", "2048"), db)
    with FakeLlama() as fake:
        one_clear_line(cli("bench", "--json", "--url", fake.url, "--prompt-tokens", "16", "--gen-tokens", "2",
                           "--reps", "1", "--warmup", "0"), db)

    listed = cli("profile", "list", "--json")  # SQLite cannot even make its WAL index (-shm) to read: said so too
    if listed.returncode:
        one_clear_line(listed, db)
    else:
        assert [p["name"] for p in json.loads(listed.stdout)["profiles"]] == ["kept"]
    full_data_dir.free()
    assert cli("profile", "import", "--name", "later", "--", "-m", "/m/three.gguf").returncode in (0, 1)
    names = [p["name"] for p in json.loads(cli("profile", "list", "--json").stdout)["profiles"]]
    assert sorted(names) == ["kept", "later"]


def test_the_store_raises_one_line_the_window_can_show(full_data_dir):
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.store.profiles import ProfileRepository

    path = full_data_dir.path / "llm-tuner.sqlite"
    engine = open_engine(path)
    try:
        repo = ProfileRepository(engine)
        repo.save("before", LaunchProfile(model="/m/a.gguf"))
        full_data_dir.fill()
        with pytest.raises(StorageFullError) as info:
            for i in range(50):  # the first page that does not fit
                repo.save(f"p{i}", LaunchProfile(model=f"/m/{i}.gguf", extra_args=("x" * 8000,)))
        assert "\n" not in str(info.value) and str(path) in str(info.value)
        assert repo.latest("before") is not None
    finally:
        engine.dispose()
    assert os.path.exists(path)
