"""Get models with the real `huggingface_hub` client against the tests' own hub on loopback (tests/support/
fake_hub.py) serving the real demo model: search, the memory plan from the header alone (range requests,
before any download), a download cut midway and resumed, a cancelled one resumed later, the sha256 check,
the token sent to the hub and nowhere else, and the file in the library."""

from __future__ import annotations

import logging

import pytest

from llm_tuner.core.gguf_info import GGUFError, parse_header, split_parts
from llm_tuner.services.hub import (
    ChecksumError,
    DownloadCancelled,
    Hub,
    RangeFile,
    default_plan,
    describe_error,
    download_model,
    list_gguf_models,
    locate,
    partial_path,
    read_remote_model,
    search_models,
)
from llm_tuner.services.library import find_models, read_model, scan
from tests.support.fake_hub import DEMO_FILE, DEMO_REPO, HubFile, HubRepo, serve_demo, sha256_of
from tests.support.random_gguf import write_qwen3_dense

REPO, DEMO_NAME = DEMO_REPO, DEMO_FILE
MIB = 1024 * 1024


@pytest.fixture(scope="session")
def demo_sha(demo_model):
    return sha256_of(demo_model)


@pytest.fixture
def hub(demo_model, demo_sha, tmp_path, monkeypatch):
    tiny = write_qwen3_dense(tmp_path / "src" / "tiny.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32)
    server = serve_demo(demo_model, demo_sha, monkeypatch)
    server.add(HubRepo("someone/Tiny-Qwen3-GGUF", [HubFile("Q8_0/tiny-Q8_0.gguf", tiny, sha256_of(tiny),
                                                            tiny.stat().st_size)], downloads=5))
    yield server
    server.stop()


def test_search_lists_repositories_and_their_gguf_models_with_size_quant_and_sha256(hub, demo_model, demo_sha):
    h = Hub.from_env()
    assert h.endpoint == hub.endpoint
    assert [r.repo_id for r in search_models(h, "gemma")] == [REPO]
    assert [r.repo_id for r in search_models(h, "GGUF")] == [REPO, "someone/Tiny-Qwen3-GGUF"]  # most downloaded first
    assert search_models(h, "  ") == []
    models = list_gguf_models(h, REPO)
    assert [(m.name, m.size_bytes, m.quant, m.files[0].sha256) for m in models] == [
        (DEMO_NAME, demo_model.stat().st_size, "Q4_K_M", demo_sha)]
    assert models[0].revision == "0123456789abcdef0123456789abcdef01234567"  # pinned to the listed commit
    assert [(m.name, m.quant) for m in list_gguf_models(h, "someone/Tiny-Qwen3-GGUF")] == [
        ("Q8_0/tiny-Q8_0.gguf", "Q8_0")]
    searched = [r.path for r in hub.requests if r.path.startswith("/api/")]
    assert "/api/models" in searched and f"/api/models/{REPO}/tree/{models[0].revision}" in searched


def test_memory_plan_from_the_header_alone_over_range_requests(hub, demo_model, demo_sha, tmp_path):
    h = Hub.from_env()
    (model,) = list_gguf_models(h, REPO)
    remote = read_remote_model(h, model)
    local = read_model(demo_model)
    assert remote.error is None
    assert (remote.architecture, remote.n_tensors, remote.n_params, remote.file_type) == (
        local.architecture, local.n_tensors, local.n_params, local.file_type)
    # only the header was fetched, in ranges: a few MiB of a 241 MiB file
    bodies = hub.body_requests(demo_sha)
    assert bodies and all(r.headers.get("range", "").startswith("bytes=") for r in bodies)
    fetched = hub.served[demo_sha]
    assert fetched < 12 * MIB < demo_model.stat().st_size / 10, fetched
    # the plan of the remote header is the plan of the same file on disk: one reader, one plan
    plan, same = default_plan(remote, None), default_plan(local, None)
    assert [(d.name, round(d.total_mib, 1)) for d in plan.devices] == [
        (d.name, round(d.total_mib, 1)) for d in same.devices]
    assert plan.device("Host").model_mib > 100
    assert not list(tmp_path.glob("**/*.gguf.part"))


def test_a_download_cut_midway_resumes_with_a_range_request_and_lands_in_the_library(hub, demo_model, demo_sha,
                                                                                       tmp_path):
    h = Hub.from_env()
    (model,) = list_gguf_models(h, REPO)
    hub.drop_once_after[demo_sha] = 50 * MIB
    seen = []
    folder = tmp_path / "models"
    path = download_model(h, model, folder, progress=seen.append)
    assert path == folder / DEMO_NAME and path.stat().st_size == demo_model.stat().st_size
    ranges = [r.headers.get("range") for r in hub.body_requests(demo_sha)]
    assert ranges == [None, f"bytes={50 * MIB}-"], ranges
    assert hub.served[demo_sha] == demo_model.stat().st_size  # not a byte twice
    done = [p.done_bytes for p in seen if p.phase == "download"]
    assert done == sorted(done) and done[-1] == model.size_bytes
    assert seen[-1].phase == "verify" and seen[-1].done_bytes == model.size_bytes
    assert sha256_of(path) == demo_sha
    assert not partial_path(path).exists() and not list(folder.glob("*.json"))
    (entry,) = find_models([folder])
    (info,) = scan([entry])
    assert info.error is None and info.architecture == "gemma3"


def test_a_cancelled_download_goes_on_from_where_it_stopped(hub, demo_model, demo_sha, tmp_path):
    h = Hub.from_env()
    (model,) = list_gguf_models(h, REPO)
    folder = tmp_path / "models"
    got = []
    with pytest.raises(DownloadCancelled):
        download_model(h, model, folder, progress=lambda p: got.append(p.done_bytes),
                       cancelled=lambda: bool(got) and got[-1] >= 30 * MIB)
    part = partial_path(folder / DEMO_NAME)
    kept = part.stat().st_size
    assert kept >= 30 * MIB and not (folder / DEMO_NAME).exists()
    assert find_models([folder]) == []  # half a model is never listed
    resumed = []
    path = download_model(h, model, folder, progress=resumed.append)
    assert hub.body_requests(demo_sha)[-1].headers.get("range") == f"bytes={kept}-"
    assert resumed[0].resumed_from == kept and "resumed at" in resumed[0].text()
    assert sha256_of(path) == demo_sha
    # a second call finds the file there and checked: nothing is fetched
    before = hub.served[demo_sha]
    assert download_model(h, model, folder) == path and hub.served[demo_sha] == before


def test_a_file_whose_sha256_is_not_the_repositorys_is_removed(hub, tmp_path):
    repo = hub.repos["someone/Tiny-Qwen3-GGUF"]
    good = repo.files[0]
    other = write_qwen3_dense(tmp_path / "src" / "other.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32, seed=7)
    assert other.stat().st_size == good.size and sha256_of(other) != good.sha256
    # the listing gives the good file's sha256; its CDN blob holds other bytes (same size)
    repo.files[0] = HubFile(good.path, other, good.sha256, good.size)
    h = Hub.from_env()
    (model,) = list_gguf_models(h, repo.repo_id)
    folder = tmp_path / "models"
    with pytest.raises(ChecksumError, match="sha256"):
        download_model(h, model, folder)
    assert list(folder.iterdir()) == []


def test_the_token_goes_to_the_hub_only_and_is_never_logged(hub, tmp_path, monkeypatch, caplog):
    secret = "hf_SecretTokenForTheTests0123456789"
    monkeypatch.setenv("HF_TOKEN", secret)
    h = Hub.from_env()
    assert secret not in repr(h)
    caplog.set_level(logging.DEBUG)
    (model,) = list_gguf_models(h, "someone/Tiny-Qwen3-GGUF")
    assert read_remote_model(h, model).error is None
    download_model(h, model, tmp_path / "models")
    to_hub = [r for r in hub.requests if r.port != int(hub.cdn.rsplit(":", 1)[1])]
    to_cdn = [r for r in hub.requests if r.port == int(hub.cdn.rsplit(":", 1)[1])]
    assert to_hub and all(r.headers.get("authorization") == f"Bearer {secret}" for r in to_hub)
    assert to_cdn and not any("authorization" in r.headers for r in to_cdn)
    assert secret not in caplog.text


def test_split_sets_are_one_model_and_download_whole(hub, tmp_path):
    src = tmp_path / "split"
    write_qwen3_dense(src / "tiny.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32, split_max_tensors=8)
    parts = sorted(p for p in src.iterdir() if split_parts(p.name))
    assert len(parts) > 1
    hub.add(HubRepo("someone/split-GGUF", [HubFile(p.name, p, sha256_of(p), p.stat().st_size) for p in parts]))
    h = Hub.from_env()
    (model,) = list_gguf_models(h, "someone/split-GGUF")
    assert len(model.files) == len(parts) and model.complete
    info = read_remote_model(h, model)
    assert info.error is None and info.split_count == len(parts)
    path = download_model(h, model, tmp_path / "models")
    assert read_model(path).n_tensors == info.n_tensors


def test_errors_say_what_went_wrong_and_what_to_do(hub, tmp_path):
    h = Hub.from_env()
    with pytest.raises(Exception) as raised:
        list_gguf_models(h, "nobody/nothing")
    assert describe_error(raised.value, h) == "repository not found (a private one needs HF_TOKEN)"
    (model,) = list_gguf_models(h, REPO)
    hub.repos[REPO].files[0].path = "renamed.gguf"  # the file went away after the listing
    info = read_remote_model(h, model)
    assert info.error and "404" in info.error and "\n" not in info.error
    with pytest.raises(Exception, match="404"):
        download_model(h, model, tmp_path / "models")
    assert not (tmp_path / "models" / DEMO_NAME).exists()


def test_a_header_read_over_the_network_is_bounded(hub, demo_model, demo_sha):
    h = Hub.from_env()
    (model,) = list_gguf_models(h, REPO)
    where = locate(h, model, model.files[0])
    assert where.url.startswith(hub.cdn) and "authorization" not in {k.lower() for k in where.headers}
    with RangeFile(where.url, where.size_bytes, where.headers, max_bytes=2 * MIB) as fh, \
            pytest.raises(GGUFError, match="more than 2 MiB"):
        parse_header(fh, size=where.size_bytes)  # the vocabulary alone is more than 2 MiB
    assert hub.served[demo_sha] <= 2 * MIB
    with RangeFile(where.url, where.size_bytes, where.headers) as fh:
        header = parse_header(fh, size=where.size_bytes)
        assert fh.requests < 20 and fh.fetched_bytes < 12 * MIB
    assert len(header.tensors) == read_model(demo_model).n_tensors
