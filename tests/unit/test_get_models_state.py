"""The Get models dialog's state without Qt (state/get_models.py): the search and the listing against the
tests' own hub (a real HTTP server, the real `huggingface_hub` client), each file's row before and after its
header and plan arrive (read over range requests from a real GGUF), the file chosen, the folder, and the
download's progress, end, cancel and failure in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.services.hub import DownloadCancelled, Hub, default_plan, read_remote_model
from llm_tuner.services.speed import SpeedBasis
from llm_tuner.state.get_models import CANCELLED, FILES_HINT, NO_HITS, GetModelsState
from llm_tuner.state.speed import SpeedModel
from tests.support.fake_hub import HubFile, HubRepo, HubServer, sha256_of
from tests.support.random_gguf import write_qwen3_dense

REPO = "someone/Tiny-GGUF"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_qwen3_dense(
        tmp_path_factory.mktemp("hub") / "tiny.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32
    )


@pytest.fixture
def hub(tiny, monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    server = HubServer()
    server.add(HubRepo(REPO, [HubFile("tiny-Q8_0.gguf", tiny, sha256_of(tiny), tiny.stat().st_size)]))
    server.start()
    yield server
    server.stop()


def _state(hub: HubServer, folders=("/models",)) -> tuple[GetModelsState, list[tuple]]:
    state = GetModelsState(SpeedModel(SpeedBasis), hub=Hub(hub.endpoint, None), folders=folders)
    heard: list[tuple] = []
    state.add_callback(lambda *event: heard.append(event))
    return state, heard


def test_search_and_listing_say_what_they_found(hub):
    state, heard = _state(hub)
    assert not state.search("   ") and heard == []  # an empty query asks nothing
    assert state.search("nothing-like-this")
    assert state.hits == () and state.status == NO_HITS and not state.searching
    state.search("tiny")
    assert [r.repo_id for r in state.hit_rows()] == [REPO] and state.status == "1 repository with GGUF files"
    assert state.files_line == FILES_HINT and state.selected_model() is None and not state.can_download

    state.list_repo(REPO)
    assert [m.name for m in state.models] == ["tiny-Q8_0.gguf"] and state.selected == 0
    assert "1 GGUF file." in state.files_line and state.can_download
    cells = state.row_cells(0)
    assert cells[0][0] == "tiny-Q8_0.gguf" and cells[3][0] == "sha256"
    assert cells[4][0] == "reading header…" and cells[6] == ("", "")  # nothing read yet

    info = read_remote_model(state.hub, state.models[0])
    heard.clear()
    state.header_read(0, info, default_plan(info, None))
    state.header_read(5, info, None)  # a row that is not listed (an older listing's reader): ignored
    assert heard == [("row", 0)]
    cells = state.row_cells(0)
    assert "Host" in cells[4][0] and cells[5][0] in ("yes", "?") and cells[6][0] == "…"  # the basis not read
    state.speed.load()  # the default costs (run_now): every row's speed again
    assert heard[-1] == ("speeds",) and "t/s" in state.row_cells(0)[6][0]


def test_a_repository_that_is_not_there_is_said_and_nothing_can_be_downloaded(hub):
    state, _heard = _state(hub)
    state.list_repo("nobody/nothing")
    assert "could not list" in state.files_line and "repository not found" in state.status
    assert state.models == () and not state.can_download


def test_the_download_goes_from_start_to_done_cancelled_or_failed(hub, tmp_path):
    state, heard = _state(hub, folders=(str(tmp_path / "a"),))
    assert state.start_download() is None  # nothing chosen
    state.choose_folder(str(tmp_path / "b"))
    state.choose_folder(str(tmp_path / "a"))
    assert state.folders == (str(tmp_path / "a"), str(tmp_path / "b")) and state.folder == str(tmp_path / "a")
    state.list_repo(REPO)
    model, folder = state.start_download()
    assert model.name == "tiny-Q8_0.gguf" and folder == tmp_path / "a"
    assert state.downloading and not state.can_download and state.start_download() is None  # one at a time
    assert state.progress == (0.0, "Starting tiny-Q8_0.gguf…")
    state.download_progressed(0.25, "Downloading 25 %")
    state.cancelling()
    state.download_failed(DownloadCancelled())
    assert state.progress == (0.25, "Cancelled: Download goes on from here") and state.status == CANCELLED
    assert state.can_download

    state.start_download()
    state.downloaded(folder / model.file_name)
    assert state.progress == (1.0, "tiny-Q8_0.gguf: done") and "listed in Models" in state.status
    heard.clear()
    state.start_download()
    state.download_failed(OSError(28, "No space left on device"))
    assert state.progress is None and "The download failed" in state.status and not state.downloading
    assert ("downloading", False) in heard
