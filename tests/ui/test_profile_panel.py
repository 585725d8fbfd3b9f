"""The profile editor: editing a field changes exactly its flag in the preview; import, save, revert."""

from __future__ import annotations

import shlex

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.binaries import default_catalog
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.profile_panel import ProfilePanel


@pytest.fixture
def panel(qtbot, tmp_path):
    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "ui.sqlite"))
    w = ProfilePanel(ctx)
    qtbot.addWidget(w)
    w.show()
    return w


def preview_words(panel):
    return shlex.split(panel.preview.toPlainText().replace("\\\n", " "))


def test_editing_a_field_changes_exactly_its_flag(panel, qtbot):
    panel.set_profile(import_command("llama-server -m m.gguf -c 4096 -ctk q8_0 -ctv q8_0 -tbq 4",
                                     default_catalog()).profile)
    before = preview_words(panel)
    published = []
    panel.ctx.state.profile_changed.connect(published.append)
    ctx_edit = panel.editors["ctx_size"].widget
    ctx_edit.selectAll()
    qtbot.keyClicks(ctx_edit, "8192")
    after = preview_words(panel)
    assert [w for w in before if w not in after] == ["4096"]
    assert [w for w in after if w not in before] == ["8192"]
    assert after[after.index("--ctx-size") + 1] == "8192"
    assert published[-1].ctx_size == 8192 and panel.ctx.state.profile.ctx_size == 8192
    # a switch adds exactly its flag, at its place; the fork's flag stays last
    panel.editors["metrics"].widget.click()
    words = preview_words(panel)
    assert [w for w in words if w not in after] == ["--metrics"] and words[-2:] == ["-tbq", "4"]


def test_tooltip_is_the_binary_help_and_invalid_input_is_marked(panel, qtbot):
    assert "size of the prompt context" in panel.editors["ctx_size"].widget.toolTip()
    qtbot.keyClicks(panel.editors["batch_size"].widget, "abc")
    assert "whole number" in panel.error_label.text()
    assert "--batch-size" not in panel.preview.toPlainText()


def test_advice_follows_the_edits(panel, qtbot):
    panel.editors["cache_type_k"].widget.setCurrentText("q8_0")
    ids = {panel.advice_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(panel.advice_list.count())}
    assert "kv-type-mismatch" in ids
    panel.editors["cache_type_v"].widget.setCurrentText("q8_0")
    assert "kv-type-mismatch" not in {a.id for a in panel.advice}


def test_paste_import_fix_save_and_revert(panel, qtbot):
    from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog

    dlg = PasteCommandDialog(default_catalog())
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        dlg.set_text("./build/bin/llama-server -m q.gguf -c 262000 --mlock -tbq 4")
    assert "-tbq 4" in dlg.report.text() and "--load-mode mmap+mlock" in dlg.report.text()
    panel.import_result(dlg.result)
    assert "--mlock" in preview_words(panel) and panel.fix_button.isEnabled()
    panel.save_as("fork")  # the store call runs off the GUI thread; the editor knows the name at once
    assert panel.current_name == "fork" and panel.names_list.currentItem().text() == "fork"
    qtbot.mouseClick(panel.fix_button, Qt.MouseButton.LeftButton)
    words = preview_words(panel)
    assert "--mlock" not in words and words[words.index("--load-mode") + 1] == "mmap+mlock"
    panel.save_as("fork")
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)
    assert [panel.versions_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(2)] == [2, 1]
    panel.revert_to(1)
    assert "--mlock" in preview_words(panel)
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)
    assert panel.repo.latest("fork").version == 3 and panel.versions_list.count() == 3


def test_store_calls_run_off_the_gui_thread_and_lists_follow(panel, qtbot, monkeypatch):
    import threading

    from PySide6.QtWidgets import QMessageBox

    warned = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text, *a, **k: warned.append(text))
    threads = []
    real_save, real_names = panel.repo.save, panel.repo.names
    panel.repo.save = lambda *a, **k: threads.append(threading.current_thread()) or real_save(*a, **k)
    panel.repo.names = lambda: threads.append(threading.current_thread()) or real_names()
    panel.set_profile(LaunchProfile(model="a.gguf", ctx_size=4096))
    panel.save_as("a")
    panel.duplicate(panel.unique_name("a"))  # "a 2": the unique name comes from the loaded list, no SQL
    assert panel.current_name == "a 2" and panel.names_list.count() == 2
    panel.rename("b")
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)
    assert threads and threading.main_thread() not in threads
    assert panel.repo.names() == ["a", "b"] and [panel.names_list.item(i).text() for i in range(2)] == ["a", "b"]
    assert panel.repo.latest("b").profile.ctx_size == 4096
    # picking a profile in the list loads it (in the background) with its history
    panel.set_profile(LaunchProfile(model="other.gguf"), None)
    panel.names_list.setCurrentRow(0)
    qtbot.waitUntil(lambda: panel.profile.model == "a.gguf" and panel.versions_list.count() == 1, timeout=5000)
    assert panel.current_name == "a"
    # a name the list already has is refused at once; the store is not asked
    panel.duplicate("b")
    assert warned and "exists already" in warned[-1]
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)
    assert panel.repo.names() == ["a", "b"]
    panel.delete_current()
    assert panel.names_list.count() == 1
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)
    assert panel.repo.names() == ["b"] and panel.empty_hint.isHidden()


def test_model_selection_sets_the_model(panel):
    panel.ctx.state.select_model("/models/x.gguf")
    assert preview_words(panel)[1:3] == ["--model", "/models/x.gguf"]


@pytest.mark.parametrize("field, edit, expected", [
    ("cache_type_v", lambda w: w.setCurrentText("q4_0"), ["--cache-type-v", "q4_0"]),
    ("kv_offload", lambda w: w.setCurrentText("off"), ["--no-kv-offload"]),
    ("fit", lambda w: w.setCurrentText("off"), ["--fit", "off"]),
    ("override_tensor", lambda w: w.setPlainText("blk\\.1\\.ffn_.*=CPU\nexps=CPU"),
     ["--override-tensor", "blk\\.1\\.ffn_.*=CPU,exps=CPU"]),
    ("gpu_layers", lambda w: w.setText("all") or w.textEdited.emit("all"), ["--n-gpu-layers", "all"]),
    ("spec_type", lambda w: w.setText("draft-mtp,ngram-mod") or w.textEdited.emit("x"),
     ["--spec-type", "draft-mtp,ngram-mod"]),
    ("cpu_moe", lambda w: w.click(), ["--cpu-moe"]),
])
def test_each_kind_of_field_adds_exactly_its_flag(panel, field, edit, expected):
    panel.set_profile(LaunchProfile(model="m.gguf", ctx_size=4096))
    before = panel.current_argv()
    edit(panel.editors[field].widget)
    after = panel.current_argv()
    added = list(after)
    for w in before:
        added.remove(w)
    assert added == expected
    assert preview_words(panel)[1:] == after


def test_environment_lines_become_env_and_show_their_flag(panel, qtbot):
    panel.env_edit.setPlainText("GGML_CUDA_DISABLE_GRAPHS=1\nLLAMA_ARG_CTX_SIZE=8192")
    assert panel.profile.env == {"GGML_CUDA_DISABLE_GRAPHS": "1", "LLAMA_ARG_CTX_SIZE": "8192"}
    assert "LLAMA_ARG_CTX_SIZE sets --ctx-size" in panel.env_flags.text()
    assert preview_words(panel)[:2] == ["GGML_CUDA_DISABLE_GRAPHS=1", "LLAMA_ARG_CTX_SIZE=8192"]


def test_advice_uses_the_real_model_header_read_off_the_gui_thread(panel, qtbot, demo_model):
    panel.set_profile(LaunchProfile(ctx_size=65536, spec_type=("draft-mtp",)))
    panel.ctx.state.select_model(demo_model)  # Gemma 3 270M: trained on 32768 tokens, no MTP layers
    qtbot.waitUntil(lambda: {"ctx-over-trained", "draft-mtp-without-mtp-layers"} <= {a.id for a in panel.advice},
                    timeout=10000)


def test_the_advice_view_shows_the_cliffs_with_the_plan_of_this_machine(panel, qtbot, demo_model):
    """Issue 38: the prompt cache against the host RAM the plan leaves (the real model's header, read off the GUI
    thread), and an explicit -np without -kvu."""
    from llm_tuner.core.devices import DeviceInventory, HostInfo

    panel.ctx.state.set_inventory(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000)))
    panel.set_profile(import_command(f"-m {demo_model} -c 4096 -np 4 --cache-ram 100000", default_catalog()).profile)
    qtbot.waitUntil(lambda: "cache-ram-crowds-host" in {a.id for a in panel.advice}, timeout=10000)
    texts = [panel.advice_list.item(i).text() for i in range(panel.advice_list.count())]
    assert any(t.startswith("WARNING: the prompt cache may grow to 97.66 GiB") for t in texts)
    assert any(t.startswith("INFO: -np 4 set explicitly turns the unified K/V cache off") for t in texts)
    panel.set_profile(import_command(f"-m {demo_model} -c 4096", default_catalog()).profile)
    qtbot.waitUntil(lambda: panel.profile_state.facts.info is not None, timeout=10000)
    assert not {"cache-ram-crowds-host", "parallel-without-kvu"} & {a.id for a in panel.advice}


def test_invalid_input_greys_the_preview_and_copy_waits_until_it_is_fixed(panel, qtbot):
    panel.set_profile(LaunchProfile(model="m.gguf", ctx_size=4096))
    ctx_edit = panel.editors["ctx_size"].widget
    ctx_edit.selectAll()
    qtbot.keyClicks(ctx_edit, "4k")
    assert "context (tokens): --ctx-size needs a whole number, got '4k'" in panel.error_label.text()
    lines = panel.preview.toPlainText().splitlines()
    assert lines[:2] == ["# Fix context (tokens) first.", "# The last valid command, for reference:"]
    assert not panel.copy_button.isEnabled() and "context (tokens)" in panel.copy_button.toolTip()
    assert "whole number" in ctx_edit.toolTip() and "size of the prompt context" in ctx_edit.toolTip()
    panel.profile_state.facts_read(("m.gguf", None), False, None, None)  # a background answer must not bring a stale Copy back
    assert not panel.copy_button.isEnabled() and panel.preview.toPlainText().startswith("# Fix")
    qtbot.keyClick(ctx_edit, Qt.Key.Key_Backspace)
    assert panel.copy_button.isEnabled() and panel.error_label.text() == ""
    assert preview_words(panel)[1:] == ["--model", "m.gguf", "--ctx-size", "4"]
    assert ctx_edit.toolTip() == panel.editors["ctx_size"].help_tip and not ctx_edit.styleSheet()


def test_a_missing_model_file_shows_an_error_advice(panel, qtbot, tmp_path):
    panel.set_profile(LaunchProfile(model=str(tmp_path / "gone.gguf")))
    qtbot.waitUntil(lambda: "model-file-missing" in {a.id for a in panel.advice}, timeout=5000)
    item = next(panel.advice_list.item(i) for i in range(panel.advice_list.count())
                if panel.advice_list.item(i).data(Qt.ItemDataRole.UserRole) == "model-file-missing")
    assert item.text().startswith("ERROR:") and "pick the file in Models" in item.text()
    present = tmp_path / "here.gguf"
    present.write_bytes(b"not a gguf")
    panel.set_profile(LaunchProfile(model=str(present)))
    qtbot.waitUntil(lambda: panel.profile_state.facts.exists is True, timeout=5000)
    assert "model-file-missing" not in {a.id for a in panel.advice}


def test_a_long_profile_name_elides_the_title_and_does_not_widen_the_pane(panel, qtbot):
    panel.resize(1100, 700)
    right = panel.copy_button.parentWidget()
    before = right.minimumSizeHint().width()
    name = "copy of gemma-3-270m-q4_k_m with a very long descriptive name for the context test"
    panel.set_profile(LaunchProfile(model="m.gguf"), name)
    panel.editors["threads"].widget.setText("2")
    panel.editors["threads"].widget.textEdited.emit("2")
    full = f"{name} (modified)"
    assert panel.title.full_text() == full
    assert right.minimumSizeHint().width() == before  # the name does not push the splitter
    qtbot.waitUntil(lambda: panel.title.text() != full, timeout=2000)
    assert panel.title.text().startswith("copy of gemma") and panel.title.text().endswith("… (modified)")
    assert panel.title.toolTip() == full


def test_version_and_name_entries_carry_their_full_text_as_tooltips(panel, qtbot):
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=5000)  # the start-up listing has answered
    assert not panel.revert_button.isEnabled()  # no versions listed: nothing to revert to
    panel.save_as("gemma")
    name = "gemma-3-270m-q4_k_m tuned for long contexts"
    panel.duplicate(name)
    qtbot.waitUntil(lambda: not panel.store_busy and panel.versions_list.count() == 1, timeout=5000)
    assert [panel.names_list.item(i).toolTip() for i in range(2)] == ["gemma", name]
    tip = panel.versions_list.item(0).toolTip()
    assert tip.startswith("Version 1, saved ") and tip.endswith(": copy of gemma v1")
    assert not panel.revert_button.isEnabled()


def test_a_save_before_the_first_listing_answers_keeps_every_name(qtbot, tmp_path):
    """The start-up listing is asked before the save: its answer (without the new name) must not wipe it."""
    from llm_tuner.store.profiles import ProfileRepository

    engine = open_engine(tmp_path / "race.sqlite")
    ProfileRepository(engine).save("older", LaunchProfile(ctx_size=1024))
    ctx = AppContext(settings=Settings(), engine=engine)
    w = ProfilePanel(ctx)  # queues the listing
    qtbot.addWidget(w)
    w.set_profile(LaunchProfile(ctx_size=2048), None)
    w.save_as("newer")  # before the listing has answered
    qtbot.waitUntil(lambda: not w.store_busy, timeout=10_000)
    shown = [w.names_list.item(i).text() for i in range(w.names_list.count())]
    assert shown == ["newer", "older"] and w.names_list.currentItem().text() == "newer"


def test_a_change_made_in_another_view_shows_in_the_editor(panel):
    """The Plan writes its settings into the edited profile: the Profile form and command must show them."""
    panel.set_profile(LaunchProfile(model="m.gguf", ctx_size=4096), None)
    panel.ctx.state.set_profile(panel.profile.model_copy(update={"ubatch_size": 256, "cache_type_v": "q5_1"}))
    assert panel.profile.ubatch_size == 256 and panel.editors["cache_type_v"].widget.currentText() == "q5_1"
    words = preview_words(panel)
    assert words[words.index("--ubatch-size") + 1] == "256"


def test_an_invalid_field_stops_launch_and_benchmark_of_the_edited_profile(qtbot, demo_model):
    """Typing "4k" leaves ctx 4 (the last valid keystroke) published: F5 and Run must not start that."""
    from llm_tuner.app import build_window

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    profile, live, bench = window.profile_panel, window.live_panel, window.bench_panel
    profile.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096), None)
    qtbot.waitUntil(lambda: str(demo_model) in live.args_edit.text(), timeout=5000)
    ctx_edit = profile.editors["ctx_size"].widget
    ctx_edit.selectAll()
    qtbot.keyClicks(ctx_edit, "4k")
    window.launch_server()
    assert "Fix context (tokens) in the Profile tab first" in live.message_label.text() and live.slot.state == "idle"
    qtbot.waitUntil(lambda: not profile.store_busy, timeout=10_000)
    qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
    assert not bench.is_running() and "Fix context (tokens)" in bench.status_label.text()
    ctx_edit.selectAll()
    qtbot.keyClicks(ctx_edit, "4096")
    assert window.ctx.state.profile_problem is None
    from llm_tuner.qt.workers import BackgroundJob

    qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=60_000)  # the window's binary probes end


# -- issue 15 ----------------------------------------------------------------------------------------

def test_paste_dialog_reads_off_the_gui_thread_after_typing_stops(qtbot, monkeypatch):
    import threading

    from llm_tuner.ui.dialogs import paste_command_dialog as mod

    threads = []
    real_read = mod._read
    monkeypatch.setattr(mod, "_read", lambda *a: threads.append(threading.current_thread()) or real_read(*a))
    dlg = mod.PasteCommandDialog(default_catalog())
    qtbot.addWidget(dlg)
    dlg.show()
    ok = dlg.buttons.button(dlg.buttons.StandardButton.Ok)
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        qtbot.keyClicks(dlg.input, "llama-server -m q.gguf -c 4096")
    assert len(threads) == 1 and threads[0] is not threading.main_thread()  # once, not at every keystroke
    assert "--ctx-size 4096" in dlg.report.text() and ok.isEnabled() and dlg.result.profile.ctx_size == 4096
    qtbot.keyClicks(dlg.input, "0")
    assert not ok.isEnabled() and dlg.result is None  # Import waits for the reading of the new text
    qtbot.waitUntil(lambda: not dlg.busy, timeout=5000)
    assert dlg.result.profile.ctx_size == 40960 and ok.isEnabled()
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        dlg.input.insertPlainText(" " + "a" * mod.PASTE_LIMIT_CHARS)  # a paste of a huge token
    assert "Not read" in dlg.report.text() and not ok.isEnabled() and len(threads) == 2
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        dlg.set_text("llama-server -m 'a\0b.gguf'")
    assert "NUL" in dlg.report.text() and not ok.isEnabled()


def test_program_of_a_pasted_command_waits_for_confirm(panel, qtbot, tmp_path, monkeypatch):
    from llm_tuner.services.binaries import is_trusted
    from llm_tuner.services.settings_store import load_settings

    mark = tmp_path / "ran.txt"
    prog = tmp_path / "llama-server"
    prog.write_text(f"#!/bin/sh\necho ran >> {mark}\n")
    prog.chmod(0o755)
    panel.set_profile(import_command(f"{prog} -m m.gguf", default_catalog()).profile)
    row = panel.program_row
    assert row.path_edit.text() == str(prog) and row.confirm_button.isVisible()
    assert "Not confirmed" in row.status.text() and str(prog) in row.confirm_button.toolTip()
    assert panel.preview.toPlainText().startswith(str(prog))  # the command shown names what will run
    qtbot.mouseClick(row.confirm_button, Qt.MouseButton.LeftButton)
    assert not row.confirm_button.isVisible() and "Confirmed" in row.status.text()
    assert is_trusted(prog, load_settings())  # recorded in settings.json, for the CLI too
    qtbot.mouseClick(row.clear_button, Qt.MouseButton.LeftButton)
    assert panel.ctx.state.profile.binary is None and not row.confirm_button.isVisible()
    assert not mark.exists()  # confirming runs nothing by itself
    panel.set_profile(import_command("./build/bin/llama-server -m m.gguf", default_catalog()).profile)
    assert "relative" in row.status.text() and not row.confirm_button.isVisible()  # choose the file instead
    other = tmp_path / "other" / "llama-server"
    other.parent.mkdir()
    other.write_text(prog.read_text())
    other.chmod(0o755)
    from PySide6.QtWidgets import QFileDialog

    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: (str(other), ""))  # the user's pick
    qtbot.mouseClick(row.choose_button, Qt.MouseButton.LeftButton)
    assert panel.ctx.state.profile.binary == str(other) and "Confirmed" in row.status.text()
    assert is_trusted(other, load_settings()) and not mark.exists()


def test_editor_refuses_a_nul_byte(panel, qtbot):
    ed = panel.editors["alias"].widget
    ed.setText("a\0b")
    ed.textEdited.emit(ed.text())
    assert "NUL" in panel.error_label.text() and "\0" not in panel.profile.to_json()
    assert panel.ctx.state.profile_problem is not None


def test_the_users_flag_spellings_survive_fix_and_every_edit(panel, qtbot):
    """Issue 22 item 13: `--cache-type-k-draft` (an older build's and a fork's spelling) came back as
    `--spec-draft-type-k` after "Fix removed flags" or any edit in the editor (profile.spellings was dropped)."""
    from llm_tuner.core.cmdline import apply_fix, validate

    imported = import_command("llama-server -m q.gguf --cache-type-k-draft q8_0 --cache-type-v-draft q8_0 --mlock",
                              default_catalog())
    mine = {"draft_cache_type_k": "--cache-type-k-draft", "draft_cache_type_v": "--cache-type-v-draft"}
    assert imported.profile.spellings == mine
    fixed = apply_fix(imported.profile, validate(imported.profile, default_catalog()).removed[0], default_catalog())
    assert fixed.load_mode and fixed.spellings == mine  # the core function the Fix button uses

    panel.import_result(imported)
    qtbot.mouseClick(panel.fix_button, Qt.MouseButton.LeftButton)
    words = preview_words(panel)
    assert "--mlock" not in words and "--cache-type-k-draft" in words and "--cache-type-v-draft" in words
    ctx_edit = panel.editors["ctx_size"].widget
    qtbot.keyClicks(ctx_edit, "8192")  # any edit re-reads the fields
    words = preview_words(panel)
    assert words[words.index("--cache-type-k-draft") + 1] == "q8_0" and "--spec-draft-type-k" not in words
    assert panel.ctx.state.profile.spellings == mine
