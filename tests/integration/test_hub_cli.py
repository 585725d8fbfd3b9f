"""`llm-tuner models search|files|plan|download` as a script uses them, against the tests' own hub on loopback
(tests/support/fake_hub.py, the real `huggingface_hub` client) serving the real demo model: JSON answers, the
plan from the header alone, a download cancelled with Ctrl-C (exit 130) and resumed by the same command, a
checksum mismatch (exit 3), a disk too small (exit 5, on a real tmpfs), the token never printed, and bad input as
one line with exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from llm_tuner.cli import main
from llm_tuner.services.hub import partial_path
from llm_tuner.services.settings_store import load_settings
from tests.integration.test_hub_download import MIB, demo_sha, hub  # noqa: F401 - the fixtures
from tests.support.fake_hub import DEMO_FILE, DEMO_REPO, HubFile, sha256_of
from tests.support.random_gguf import write_qwen3_dense
from tests.support.tiny_disk import fill, tiny_disk

TINY_REPO = "someone/Tiny-Qwen3-GGUF"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(err: str, *words: str) -> None:
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("llm-tuner: error:")]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]


def test_search_and_files_answer_in_json_and_text(hub, capsys, demo_model):
    code, out, _ = run(capsys, "models", "search", "GGUF", "--json")
    data = json.loads(out)
    assert code == 0 and data["endpoint"] == hub.endpoint
    assert [r["repo"] for r in data["repositories"]] == [DEMO_REPO, TINY_REPO]  # most downloaded first
    code, out, _ = run(capsys, "models", "files", DEMO_REPO, "--json")
    (model,) = json.loads(out)["models"]
    assert code == 0 and (model["name"], model["quant"], model["size_bytes"]) == (
        DEMO_FILE, "Q4_K_M", demo_model.stat().st_size)
    assert model["files"][0]["sha256"] == sha256_of(demo_model) and model["complete"]
    code, out, _ = run(capsys, "models", "files", TINY_REPO)
    assert code == 0 and out.startswith("Q8_0/tiny-Q8_0.gguf  Q8_0  ")
    code, out, _ = run(capsys, "models", "search", "no-such-words")
    assert code == 0 and "no repository" in out


def test_plan_reads_only_the_header_and_plans_on_the_devices_given(hub, capsys, demo_sha):
    code, out, _ = run(capsys, "models", "plan", DEMO_REPO, DEMO_FILE, "--json", "--devices", "CUDA0=4096,Host=65536")
    data = json.loads(out)
    assert code == 0 and data["info"]["architecture"] == "gemma3"
    assert [d["name"] for d in data["plan"]["devices"]] == ["CUDA0", "Host"]
    assert data["fits"] is True and data["plan"]["devices"][0]["model_mib"] > 100  # every layer on the GPU
    speed = data["predicted_speed"]  # a planned GPU of unknown bandwidth: said, never guessed
    assert speed["gen_tps"] is None and speed["unknown_devices"] == ["CUDA0"]
    assert hub.served[demo_sha] < 12 * MIB  # a few MiB of a 241 MiB file
    code, out, _ = run(capsys, "models", "plan", DEMO_REPO, DEMO_FILE, "--devices", "CUDA0=64")
    assert code == 0 and "does NOT fit" in out and out.strip().endswith("Does NOT fit.")


def test_a_download_cancelled_with_ctrl_c_keeps_its_part_and_the_same_command_resumes_it(
        hub, capsys, demo_model, demo_sha, tmp_path):
    folder = tmp_path / "models"
    release = threading.Event()
    hub.hold_after = (demo_sha, 30 * MIB, release)

    def written() -> int:
        part = partial_path(folder / DEMO_FILE)
        return part.stat().st_size if part.exists() else 0

    def press_ctrl_c() -> None:  # as a user does once the download is under way (30 MiB on the disk)
        while written() < 30 * MIB:
            if release.wait(0.05):
                return
        os.kill(os.getpid(), signal.SIGINT)
        release.set()

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        code, out, err = run(capsys, "models", "download", DEMO_REPO, DEMO_FILE, "--to", str(folder))
    finally:
        release.set()
        presser.join(10)
    assert code == 130, err
    assert "cancelled" in err and "Traceback" not in err and out == ""
    assert "Downloading gemma-3-270m-it-Q4_K_M.gguf" in err  # progress on stderr
    kept = partial_path(folder / DEMO_FILE).stat().st_size
    assert kept >= 30 * MIB and not (folder / DEMO_FILE).exists()

    code, out, err = run(capsys, "models", "download", DEMO_REPO, DEMO_FILE, "--to", str(folder), "--json")
    data = json.loads(out)
    assert code == 0, err
    assert hub.body_requests(demo_sha)[-1].headers.get("range") == f"bytes={kept}-"
    assert data["resumed_from"] == kept and data["sha256_checked"] and "resumed at" in err
    assert data["path"] == str(folder / DEMO_FILE) and sha256_of(folder / DEMO_FILE) == demo_sha
    assert str(folder) in load_settings().model_folders and data["folder_added"]  # the window lists it


def test_a_file_whose_sha256_is_not_the_repositorys_exits_3_and_is_removed(hub, capsys, tmp_path):
    repo = hub.repos[TINY_REPO]
    good = repo.files[0]
    other = write_qwen3_dense(tmp_path / "src" / "other.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32, seed=7)
    repo.files[0] = HubFile(good.path, other, good.sha256, good.size)  # the CDN serves other bytes
    folder = tmp_path / "models"
    code, out, err = run(capsys, "models", "download", TINY_REPO, "tiny-Q8_0.gguf", "--to", str(folder))
    assert code == 3 and out == ""
    one_line_error(err, "sha256", "removed")
    assert list(folder.iterdir()) == []


def test_a_disk_too_small_exits_5_before_a_byte_is_written(hub, capsys, demo_sha, tmp_path):
    with tiny_disk(tmp_path, "8m") as small:
        code, out, err = run(capsys, "models", "download", DEMO_REPO, DEMO_FILE, "--to", str(small))
        assert code == 5 and out == ""
        one_line_error(err, "not enough free space", str(small))
        assert list(small.iterdir()) == []
    assert not hub.body_requests(demo_sha)


def test_a_disk_that_fills_up_midway_exits_5_and_keeps_what_came(hub, capsys, tmp_path):
    """Room at the start (the check passes), none by the middle: another program filled the disk."""
    tiny = hub.repos[TINY_REPO].files[0]
    release = threading.Event()
    hub.hold_after = (tiny.sha256, 1 * MIB, release)
    with tiny_disk(tmp_path, "8m") as small:
        def fill_then_go_on() -> None:
            while hub.served.get(tiny.sha256, 0) < 1 * MIB and not release.wait(0.05):
                pass
            fill(small)
            release.set()

        filler = threading.Thread(target=fill_then_go_on)
        filler.start()
        try:
            code, out, err = run(capsys, "models", "download", TINY_REPO, "tiny-Q8_0.gguf", "--to", str(small))
        finally:
            release.set()
            filler.join(10)
        assert code == 5 and out == ""
        one_line_error(err, "is full", str(small), "free space")
        assert not (small / "tiny-Q8_0.gguf").exists()


def test_the_token_is_sent_to_the_hub_and_never_printed(hub, capsys, tmp_path, monkeypatch):
    secret = "hf_SecretTokenForTheTests0123456789"
    monkeypatch.setenv("HF_TOKEN", secret)
    outputs = [run(capsys, "models", "search", "tiny", "--json"),
               run(capsys, "models", "files", TINY_REPO),
               run(capsys, "models", "download", TINY_REPO, "tiny-Q8_0.gguf", "--to", str(tmp_path / "m"), "--json"),
               run(capsys, "models", "files", "nobody/nothing")]
    assert [code for code, _, _ in outputs] == [0, 0, 0, 2]
    assert not any(secret in out + err for _, out, err in outputs)
    assert any(r.headers.get("authorization") == f"Bearer {secret}" for r in hub.requests)


@pytest.mark.parametrize(("argv", "code", "words"), [
    (["models", "files", "nobody/nothing"], 2, ["repository not found"]),
    (["models", "files", "not a repo name"], 2, ["not a repository name"]),
    (["models", "plan", DEMO_REPO, "missing.gguf"], 2, ["has no GGUF model 'missing.gguf'", DEMO_FILE]),
    (["models", "download", DEMO_REPO, "missing.gguf"], 2, ["llm-tuner models files"]),
    (["models", "search", "  "], 2, ["give words to search for"]),
])
def test_bad_input_is_one_line_and_exit_2(hub, capsys, argv, code, words):
    got, out, err = run(capsys, *argv)
    assert got == code and out == ""
    one_line_error(err, *words)


def test_a_hub_that_does_not_answer_is_one_line_and_exit_1(capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    code, out, err = run(capsys, "models", "search", "qwen")
    assert code == 1 and out == ""
    one_line_error(err, "cannot reach http://127.0.0.1:9")
