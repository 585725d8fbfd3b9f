"""ModelsState without Qt: a scan of real folders (services.library over GGUF files written here) fed to it as
the panel feeds it; the summary line, the folders, what is selected after a listing, and the details' text."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core.units import format_bytes
from llm_tuner.services.library import find_models, read_model
from llm_tuner.state.models import MISSING_FOLDER, ModelsState, details_html, reading_html
from tests.support.random_gguf import write_qwen3_dense


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A folder with two models and a file that is not one."""
    root = tmp_path_factory.mktemp("models_state")
    write_qwen3_dense(root / "small.gguf", n_layer=2, n_embd=128, n_ff=256)
    write_qwen3_dense(root / "sub" / "other.gguf", n_layer=2, n_embd=128, n_ff=256, seed=1)
    (root / "broken.gguf").write_bytes(b"not a gguf file at all")
    return root


def _scan(state: ModelsState, *, read: bool = True, cancelled: bool = False) -> list:
    """What the panel's scan does with the state: begin, list, read each header, finish."""
    roots = state.begin_scan()
    entries = find_models(roots, on_skipped=state.skipped)
    state.listed(entries)
    if read:
        for e in entries:
            state.read(read_model(e.path))
    state.finished(cancelled)
    return entries


def test_a_scan_lists_the_models_and_says_which_cannot_be_read(library):
    state = ModelsState([str(library)], demo_model=lambda: None)
    told: list[str] = []
    state.add_callback(lambda what, *d: told.append(what))
    entries = _scan(state)
    assert {Path(e.path).name for e in state.entries} == {"small.gguf", "other.gguf", "broken.gguf"}
    text, tip = state.summary()
    good = sum(e.size_bytes for e in entries if not e.path.endswith("broken.gguf"))
    assert text == f"2 models · {format_bytes(good)} · 1 unreadable file"  # the broken file's size not counted
    assert tip == "" and "summary" in told
    broken = next(e.path for e in entries if e.path.endswith("broken.gguf"))
    assert state.info(broken) is not None and state.info(broken).error
    assert not state.publishes(state.info(broken)) and state.publishes(None)


def test_a_cancelled_scan_says_how_many_headers_are_unread(library):
    state = ModelsState([str(library)], demo_model=lambda: None)
    _scan(state, read=False, cancelled=True)
    assert "3 not read (cancelled; Rescan to finish)" in state.summary()[0]
    _scan(state, read=False, cancelled=False)  # a scan still under way: nothing to finish yet
    assert "not read" not in state.summary()[0]


def test_a_folder_that_is_gone_is_said_not_silently_empty(library, tmp_path):
    gone = str(tmp_path / "unplugged")
    state = ModelsState([str(library), gone], demo_model=lambda: None)
    _scan(state)
    assert state.skipped_paths == ((gone, MISSING_FOLDER),)
    text, tip = state.summary()
    assert "1 path skipped (hover for why)" in text and tip == f"{gone}: {MISSING_FOLDER}"


def test_folders_change_only_when_the_list_does_and_a_new_folder_is_appended(library, tmp_path):
    state = ModelsState([str(library)], demo_model=lambda: tmp_path / "demo.gguf")
    told: list[str] = []
    state.add_callback(lambda what, *d: told.append(what))
    assert state.roots() == [library, tmp_path / "demo.gguf"]  # the demo model is searched too
    assert not state.set_folders([str(library)]) and told == []
    assert state.with_folder(str(library)) is None  # listed already: a rescan, no new setting
    assert state.with_folder("~/more") == [str(library), str(Path("~/more").expanduser())]
    assert state.set_folders([str(library), str(tmp_path)]) and told == ["folders"]
    assert state.folders == (str(library), str(tmp_path))


def test_after_a_listing_a_download_wins_then_the_row_selected_then_the_apps_model(library, tmp_path):
    state = ModelsState([str(library)], demo_model=lambda: None)
    entries = _scan(state)
    small, other = sorted(e.path for e in entries if not e.path.endswith("broken.gguf"))
    assert state.to_select(None, None) == []
    assert state.to_select(None, other) == [other]  # nothing selected here yet: the app's chosen model
    assert state.to_select(small, other) == [small]  # the row selected before stays selected
    assert state.downloaded(small, str(library))  # into one of our folders: a rescan lists it
    assert state.to_select(other, None) == [str(Path(small).resolve()), other]
    assert state.to_select(other, None) == [other]  # asked once: the download is selected once
    assert not state.downloaded(str(tmp_path / "x.gguf"), str(tmp_path))  # another folder: add it first


def test_details_say_what_a_model_is_or_why_it_cannot_be_read(library):
    info = read_model(library / "small.gguf")
    text = details_html(info)
    assert "<b>Architecture</b></td><td>qwen3" in text and "<b>Layers</b></td><td>2" in text
    assert "Chat template" in text and str(library / "small.gguf") in text
    bad = details_html(read_model(library / "broken.gguf"))
    assert "Cannot read this file" in bad and "Download it again" in bad
    assert reading_html("a<b>.gguf") == "<p><b>a&lt;b&gt;.gguf</b></p><p>Reading header…</p>"
