"""The Get models dialog from the Models panel, against the tests' own hub (the real `huggingface_hub`
client, the real demo model): search, the plan of each file before any download, a download cancelled and
resumed, and the model listed and selected in Models."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.hub import partial_path
from llm_tuner.store.db import open_engine
from llm_tuner.ui.dialogs.get_models_dialog import FITS_COL, PLAN_COL
from llm_tuner.ui.panels.models_panel import ModelsPanel
from tests.support.fake_hub import DEMO_FILE, serve_demo, sha256_of

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def demo_sha(demo_model):
    return sha256_of(demo_model)


@pytest.fixture
def hub(demo_model, demo_sha, monkeypatch):
    server = serve_demo(demo_model, demo_sha, monkeypatch)
    yield server
    server.stop()


def test_search_plan_download_cancel_resume_and_the_model_in_models(qtbot, tmp_path, monkeypatch, hub, demo_model,
                                                                     demo_sha):
    monkeypatch.setenv("LLM_TUNER_DEMO_MODEL", str(tmp_path / "no-demo.gguf"))
    folder = tmp_path / "models"
    folder.mkdir()
    ctx = AppContext(settings=Settings(model_folders=[str(folder)]), engine=open_engine(tmp_path / "db.sqlite"))
    panel = ModelsPanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.scanner.running, timeout=30_000)
    assert panel.model.rows() == []

    qtbot.mouseClick(panel.get_models_button, Qt.MouseButton.LeftButton)
    dlg = panel.get_models_dialog
    assert dlg is not None and dlg.isVisible()
    assert hub.endpoint in dlg.hub_label.text()
    assert dlg.folder_combo.currentText() == str(folder)  # the first model folder by default

    dlg.search_edit.setText("gemma 3")  # no repository has "gemma 3" in its name
    qtbot.mouseClick(dlg.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "No repository" in dlg.status_label.text(), timeout=15_000)
    dlg.search_edit.setText("gemma")
    qtbot.mouseClick(dlg.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.repo_table.rowCount() == 1, timeout=15_000)
    assert dlg.repo_table.item(0, 0).text() == "ggml-demo/gemma-3-270m-it-GGUF"

    dlg.repo_table.setCurrentCell(0, 0)
    qtbot.waitUntil(lambda: dlg.file_table.rowCount() == 1, timeout=15_000)
    assert dlg.file_table.item(0, 0).text() == DEMO_FILE
    assert dlg.file_table.item(0, 2).text() == "241.4 MiB" and dlg.file_table.item(0, 3).text() == "sha256"
    plan_cell = lambda: dlg.file_table.item(0, PLAN_COL).text()  # noqa: E731
    qtbot.waitUntil(lambda: "Host" in plan_cell(), timeout=30_000)
    # the plan came from the header alone: range reads of a few MiB, nothing in the folder
    assert "ctx" in plan_cell() and dlg.file_table.item(0, 1).text() == "Q4_K_M"
    assert dlg.file_table.item(0, FITS_COL).text() in ("yes", "?")
    assert hub.served[demo_sha] < 12 * MIB
    assert all(r.headers.get("range") for r in hub.body_requests(demo_sha))
    assert list(folder.iterdir()) == []

    # download; the hub holds the body at 20 MiB until the test has pressed Cancel
    release = threading.Event()
    hub.hold_after = (demo_sha, 20 * MIB, release)
    assert dlg.download_button.isEnabled()
    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    # the bytes up to the hold (20 MiB of 241: past 7 %) are shown as they arrive, then Cancel
    qtbot.waitUntil(lambda: dlg.progress_bar.value() >= 70, timeout=30_000)
    assert "Downloading" in dlg.progress_bar.format() and not dlg.download_button.isEnabled()
    qtbot.mouseClick(dlg.cancel_button, Qt.MouseButton.LeftButton)
    release.set()
    qtbot.waitUntil(lambda: dlg.download_button.isEnabled(), timeout=30_000)
    assert "Cancelled" in dlg.status_label.text()
    kept = partial_path(folder / DEMO_FILE).stat().st_size
    assert kept >= 10 * MIB and not (folder / DEMO_FILE).exists()

    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    target = str(folder / DEMO_FILE)
    qtbot.waitUntil(lambda: panel.model.row_of(target) is not None and ctx.state.model_path is not None,
                    timeout=90_000)
    assert hub.body_requests(demo_sha)[-1].headers.get("range") == f"bytes={kept}-"
    assert "resumed at" in dlg.progress_bar.format() or dlg.progress_bar.format().endswith("done")
    assert Path(ctx.state.model_path) == Path(target) and "listed in Models" in dlg.status_label.text()
    qtbot.waitUntil(lambda: not panel.scanner.running, timeout=30_000)
    assert panel.summary_label.text().startswith("1 model")
    dlg.close()


def test_a_repository_that_is_not_there_is_said_in_plain_words(qtbot, tmp_path, hub):
    from llm_tuner.ui.dialogs.get_models_dialog import GetModelsDialog

    ctx = AppContext(settings=Settings(model_folders=[]), engine=open_engine(tmp_path / "db.sqlite"))
    dlg = GetModelsDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.list_repo("nobody/nothing")
    qtbot.waitUntil(lambda: "could not list" in dlg.files_label.text(), timeout=15_000)
    assert "repository not found" in dlg.status_label.text()
    assert dlg.file_table.rowCount() == 0 and not dlg.download_button.isEnabled()
    assert dlg.folder_combo.currentText().endswith("models")  # no model folder yet: the app's own


def test_a_download_into_a_new_folder_adds_that_folder_to_models(qtbot, tmp_path, monkeypatch, hub):
    from tests.support.fake_hub import HubFile, HubRepo
    from tests.support.random_gguf import write_qwen3_dense

    tiny = write_qwen3_dense(tmp_path / "src" / "tiny.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32)
    hub.add(HubRepo("someone/Tiny-GGUF", [HubFile("tiny-Q8_0.gguf", tiny, sha256_of(tiny), tiny.stat().st_size)]))
    monkeypatch.setenv("LLM_TUNER_DEMO_MODEL", str(tmp_path / "no-demo.gguf"))
    first = tmp_path / "models"
    first.mkdir()
    ctx = AppContext(settings=Settings(model_folders=[str(first)]), engine=open_engine(tmp_path / "db.sqlite"))
    panel = ModelsPanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.scanner.running, timeout=30_000)
    dlg = panel.open_get_models()
    dlg.list_repo("someone/Tiny-GGUF")
    qtbot.waitUntil(lambda: dlg.file_table.rowCount() == 1 and dlg.download_button.isEnabled(), timeout=15_000)
    other = tmp_path / "elsewhere"
    dlg.choose_folder(str(other))
    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    target = str(other / "tiny-Q8_0.gguf")
    qtbot.waitUntil(lambda: panel.model.row_of(target) is not None, timeout=30_000)
    assert ctx.settings.model_folders == [str(first), str(other)]
    qtbot.waitUntil(lambda: ctx.state.model_path is not None, timeout=30_000)
    assert str(ctx.state.model_path) == target
    qtbot.waitUntil(lambda: not panel.scanner.running, timeout=30_000)
    dlg.close()
