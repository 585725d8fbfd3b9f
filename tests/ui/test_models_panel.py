"""The Models panel on real files: the list appears, metadata fills in off the GUI thread, bad files
get a reason, search/sort work, selecting publishes the model, Add folder saves and rescans."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.settings_store import load_settings
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.models_panel import ModelsPanel
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe


@pytest.fixture(scope="module")
def small_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models_src")
    return (write_qwen3_dense(d / "dense.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32),
            write_qwen3_moe(d / "moe.gguf", n_layer=2, n_embd=64, n_ff=128, n_ff_exp=64, head_dim=32))


@pytest.fixture
def folder(tmp_path, small_models):
    d = tmp_path / "models"
    (d / "sub").mkdir(parents=True)
    shutil.copy(small_models[0], d / "dense-q8.gguf")
    shutil.copy(small_models[1], d / "sub" / "moe-q8.gguf")
    (d / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    return d


def _panel(qtbot, tmp_path, folders, monkeypatch, demo: Path | None = None):
    monkeypatch.setenv("LLM_TUNER_DEMO_MODEL", str(demo or tmp_path / "no-demo.gguf"))
    ctx = AppContext(settings=Settings(model_folders=[str(f) for f in folders]),
                     engine=open_engine(tmp_path / "db.sqlite"))
    panel = ModelsPanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.scanner.running, timeout=30_000)
    return ctx, panel


def _cells(panel, column):
    m = panel.proxy
    return [m.index(r, column).data() for r in range(m.rowCount())]


def test_list_fills_in_with_metadata_and_bad_files_get_a_reason(qtbot, tmp_path, folder, monkeypatch):
    _ctx, panel = _panel(qtbot, tmp_path, [folder], monkeypatch)
    assert panel.list_stack.currentWidget() is panel.table
    names = _cells(panel, 0)
    assert sorted(names) == ["Random Qwen3 MoE", "Random Qwen3 dense", "broken.gguf"]
    status = dict(zip(names, _cells(panel, 9), strict=True))
    assert status["Random Qwen3 dense"] == "ok"
    assert status["broken.gguf"].startswith("error: ") and "\n" not in status["broken.gguf"]
    arch = dict(zip(names, _cells(panel, 1), strict=True))
    assert arch == {"Random Qwen3 dense": "qwen3", "Random Qwen3 MoE": "qwen3moe", "broken.gguf": ""}
    experts = dict(zip(names, _cells(panel, 7), strict=True))
    assert experts["Random Qwen3 MoE"] == "2/8"
    assert "2 models" in panel.summary_label.text() and "1 unreadable file" in panel.summary_label.text()
    assert not panel.progress_row.isVisible()


def test_search_sort_and_select(qtbot, tmp_path, folder, monkeypatch):
    ctx, panel = _panel(qtbot, tmp_path, [folder], monkeypatch)
    panel.search_edit.setText("moe")
    assert _cells(panel, 0) == ["Random Qwen3 MoE"]
    panel.search_edit.clear()
    panel.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)  # size
    sizes = [panel.proxy.index(r, 4).data(Qt.ItemDataRole.UserRole + 1) for r in range(panel.proxy.rowCount())]
    assert sizes == sorted(sizes, reverse=True)

    with qtbot.waitSignal(ctx.state.model_selected) as sig:
        assert panel.select_path(str(folder / "sub" / "moe-q8.gguf"))
    assert sig.args[0] == folder / "sub" / "moe-q8.gguf"
    assert "qwen3moe" in panel.details.toPlainText() and "2 of 8" in panel.details.toPlainText()
    n_tensors = panel.tensor_proxy.rowCount()
    assert n_tensors > 10
    panel.tensor_search.setText("exps")
    roles = {panel.tensor_proxy.index(r, 5).data() for r in range(panel.tensor_proxy.rowCount())}
    assert roles == {"experts"}

    # a broken file shows its reason and what to do, and is not published as the model
    with qtbot.assertNotEmitted(ctx.state.model_selected):
        panel.select_path(str(folder / "broken.gguf"))
    assert "Cannot read this file" in panel.details.toPlainText()


def test_empty_state_then_add_folder_saves_settings_and_rescans(qtbot, tmp_path, folder, monkeypatch):
    ctx, panel = _panel(qtbot, tmp_path, [], monkeypatch)
    assert panel.list_stack.currentWidget() is panel.empty_label
    assert "Add folder" in panel.empty_label.text()
    panel.add_folder(str(folder))
    qtbot.waitUntil(lambda: not panel.scanner.running and panel.proxy.rowCount() == 3, timeout=30_000)
    assert load_settings().model_folders == [str(folder)]
    assert ctx.settings.model_folders == [str(folder)]
    assert panel.list_stack.currentWidget() is panel.table


def test_demo_model_is_listed_for_a_new_user(qtbot, tmp_path, monkeypatch, demo_model):
    _ctx, panel = _panel(qtbot, tmp_path, [], monkeypatch, demo=demo_model)
    assert _cells(panel, 0) == ["Gemma 3 270m"]
    assert _cells(panel, 3) == ["Q4_K_M"] and _cells(panel, 1) == ["gemma3"]
    qtbot.waitUntil(lambda: panel.summary_label.text().startswith("1 model ·"), timeout=10_000)


def test_cancel_stops_the_scan(qtbot, tmp_path, folder, monkeypatch):
    _ctx, panel = _panel(qtbot, tmp_path, [folder], monkeypatch)
    for i in range(30):
        shutil.copy(folder / "dense-q8.gguf", folder / f"copy{i}.gguf")
    with qtbot.waitSignal(panel.scanner.finished, timeout=30_000) as sig:
        panel.rescan()
        panel.cancel_button.click()
    assert sig.args == [True]
    assert not panel.progress_row.isVisible()


def test_paths_the_scan_skips_are_counted_with_their_reason(qtbot, tmp_path, folder, monkeypatch):
    (folder / "gone.gguf").symlink_to(tmp_path / "moved-away.gguf")  # a broken link
    _ctx, panel = _panel(qtbot, tmp_path, [folder, tmp_path / "no-such-folder"], monkeypatch)
    text, tip = panel.summary_label.text(), panel.summary_label.toolTip()
    assert "2 models" in text and "2 paths skipped" in text
    assert "gone.gguf" in tip and "no-such-folder" in tip


def test_a_linked_model_is_one_row_that_names_its_other_paths(qtbot, tmp_path, folder, monkeypatch):
    """Issue 35 item 16: a symlink beside its model was merged into one row without a word."""
    (folder / "alias.gguf").symlink_to(folder / "dense-q8.gguf")
    _ctx, panel = _panel(qtbot, tmp_path, [folder], monkeypatch)
    names = _cells(panel, 0)
    assert len(names) == 3 and "Random Qwen3 dense  (+1 link)" in names
    row = names.index("Random Qwen3 dense  (+1 link)")
    tip = panel.proxy.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert str(folder / "dense-q8.gguf") in tip and f"Also at (links to the same file): {folder / 'alias.gguf'}" in tip
