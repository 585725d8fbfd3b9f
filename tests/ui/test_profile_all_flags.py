"""The Profile editor's "All flags" section: generated fields for the flags of --help without a hand-made field,
edited with real widgets; each edit shows in the command line, and a pasted command line reads back the same."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLabel, QStyle

from llm_tuner.core.cmdline import FlagCatalog, import_command, parse_help
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.binaries import SERVER, BinaryInfo, default_catalog
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.profile_panel import ProfilePanel

PASTED = ("llama-server -m m.gguf -c 4096 --mirostat 2 --no-perf -tbq 4 --rope-scaling linear "
          "--lora /a/b.gguf --mtp-draft 3")


@pytest.fixture
def panel(qtbot, tmp_path):
    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "ui.sqlite"))
    w = ProfilePanel(ctx)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


def words(panel):
    return shlex.split(panel.preview.toPlainText().replace("\\\n", " "))


def click_box(qtbot, box):
    """Click a check box on its square (a box without text is wide, and only the square toggles it)."""
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(box.style().pixelMetric(
        QStyle.PixelMetric.PM_IndicatorWidth) // 2 + 1, box.height() // 2))


def open_all_flags(panel, qtbot):
    section = panel.all_flags
    assert not section.body.isVisible() and not section.editors  # collapsed, nothing built with the window
    assert section.toggle_button.text() == "All flags: 164 more, 14 text only"  # the tested build's --help
    with qtbot.waitSignal(section.built, timeout=20000):
        qtbot.mouseClick(section.toggle_button, Qt.MouseButton.LeftButton)
    assert section.body.isVisible()
    return section.editors


def test_a_pasted_command_shows_in_the_fields_and_builds_the_same_line(panel, qtbot):
    panel.set_profile(import_command(PASTED, default_catalog()).profile)
    pasted = words(panel)
    editors = open_all_flags(panel, qtbot)
    assert editors["--mirostat"].widget.text() == "2"
    assert editors["--perf"].widget.currentText() == "off"
    assert editors["--rope-scaling"].widget.currentText() == "linear"
    assert editors["--lora"].widget.text() == "/a/b.gguf"
    assert not editors["--ignore-eos"].widget.isChecked()
    assert "--mtp-draft 3" in panel.all_flags.unlisted_label.text()  # the fork's flag: listed, kept as text
    assert words(panel) == pasted  # showing changed nothing
    assert "Mirostat" in editors["--mirostat"].widget.toolTip()  # the help line as tooltip


def test_editing_a_switch_a_number_and_a_choice_writes_their_flags(panel, qtbot):
    panel.set_profile(import_command(PASTED, default_catalog()).profile)
    before = words(panel)
    editors = open_all_flags(panel, qtbot)
    published = []
    panel.ctx.state.profile_changed.connect(published.append)

    click_box(qtbot, editors["--ignore-eos"].widget)  # a switch: appended
    assert words(panel) == [*before, "--ignore-eos"]

    mirostat = editors["--mirostat"].widget  # a number: replaced where it stands
    mirostat.selectAll()
    qtbot.keyClicks(mirostat, "1")
    after = words(panel)
    assert after[after.index("--mirostat") + 1] == "1" and after.index("--mirostat") == before.index("--mirostat")

    rope = editors["--rope-scaling"].widget  # a choice, picked from its list
    rope.setCurrentIndex(rope.findText("yarn"))
    numa = editors["--numa"].widget
    numa.setCurrentIndex(numa.findText("distribute"))
    editors["--perf"].widget.setCurrentText("on")  # a toggle: its positive spelling in place of --no-perf
    got = words(panel)
    assert got[got.index("--rope-scaling") + 1] == "yarn" and got[-2:] == ["--numa", "distribute"]
    assert "--perf" in got and "--no-perf" not in got
    assert got[got.index("-tbq"):got.index("-tbq") + 2] == ["-tbq", "4"]  # the fork's flags stay
    assert "--mtp-draft" in got
    assert published[-1].extra_args == tuple(got[got.index("--mirostat"):])  # what Live and Plan get
    # back to the defaults: the flags leave the command line, the rest is as pasted
    rope.setCurrentIndex(0)
    numa.setCurrentIndex(0)
    click_box(qtbot, editors["--ignore-eos"].widget)
    assert "--rope-scaling" not in words(panel) and "--numa" not in words(panel)
    assert "--ignore-eos" not in words(panel)


def test_a_number_that_is_no_number_is_marked_and_launch_refuses(panel, qtbot):
    editors = open_all_flags(panel, qtbot)
    qtbot.keyClicks(editors["--mirostat"].widget, "2")
    assert words(panel)[-2:] == ["--mirostat", "2"]
    editors["--mirostat"].widget.selectAll()
    qtbot.keyClicks(editors["--mirostat"].widget, "two")
    assert "--mirostat needs a whole number, got 'two'" in panel.error_label.text()
    assert "--mirostat" in (panel.ctx.state.profile_problem or "")
    assert panel.profile.extra_args == ("--mirostat", "2")  # the last valid value, greyed in the preview
    editors["--mirostat"].widget.selectAll()
    qtbot.keyClicks(editors["--mirostat"].widget, "3")
    assert panel.ctx.state.profile_problem is None and panel.profile.extra_args == ("--mirostat", "3")


def test_extra_arguments_typed_by_hand_show_in_the_fields(panel, qtbot):
    editors = open_all_flags(panel, qtbot)
    panel.extra_edit.setText("--mirostat 2 --fork-only 1")
    panel.extra_edit.textEdited.emit(panel.extra_edit.text())
    assert editors["--mirostat"].widget.text() == "2"
    qtbot.keyClicks(editors["--top-nsigma"].widget, "1.5")
    assert panel.profile.extra_args == ("--mirostat", "2", "--fork-only", "1", "--top-nsigma", "1.5")


def test_search_narrows_the_list_to_matching_flags(panel, qtbot):
    open_all_flags(panel, qtbot)
    section = panel.all_flags
    section.search_edit.setText("mirostat")
    assert section.shown_flags() == ["--mirostat", "--mirostat-lr", "--mirostat-ent"]
    assert section.editors["--mirostat"].widget.isVisible() and not section.editors["--numa"].widget.isVisible()
    section.search_edit.setText("repeats")  # matches nothing
    assert section.no_match_label.isVisible() and section.shown_flags() == []
    section.search_edit.setText("two values")  # a text-only entry is found by its reason
    assert section.shown_flags() == ["--control-vector-layer-range"]
    section.search_edit.setText("ctx-size")  # a flag with a hand-made field is found, with a way to it
    shown = section.shown_flags()
    assert "--ctx-size" in shown and "--override-tensor" not in shown
    section.search_edit.clear()
    assert len(section.shown_flags()) == 164 + 14  # those with a field above are listed only in a search


def test_a_flag_with_a_hand_made_field_leads_to_it(panel, qtbot):
    section = panel.all_flags
    open_all_flags(panel, qtbot)
    section.search_edit.setText("n-gpu-layers")
    assert section.shown_flags() == ["--gpu-layers", "--spec-draft-ngl"]  # the draft model's too
    link = next(w for w in section.findChildren(QLabel) if "href='gpu_layers'" in w.text())
    assert link.isVisible() and "GPU layers, in GPU offload" in link.text()
    link.linkActivated.emit("gpu_layers")  # what a click on the link sends
    assert panel.editors["gpu_layers"].widget.hasFocus()


def test_a_forks_help_read_later_gives_its_flags_fields(panel, qtbot):
    """The chosen binary's --help is read after the window opens: the open section is rebuilt from it, and the
    fork's own flag, kept as text until then, gets a field."""
    panel.set_profile(import_command(PASTED, default_catalog()).profile)
    open_all_flags(panel, qtbot)
    assert "--mtp-draft" not in panel.all_flags.editors
    fork_help = FlagCatalog(flags=(*default_catalog().flags,
                                   *parse_help("--mtp-draft N    MTP draft tokens (default: 3)\n").flags))
    info = BinaryInfo(kind=SERVER, path=Path("/opt/fork/llama-server"), source="settings", catalog=fork_help)
    with qtbot.waitSignal(panel.all_flags.built, timeout=20000):
        panel.ctx.state.set_binaries({SERVER: info})
    mtp = panel.all_flags.editors["--mtp-draft"]
    assert mtp.widget.text() == "3" and mtp.gf.kind == "number"
    assert "--mtp-draft" not in panel.all_flags.unlisted_label.text()
    assert "-tbq 4" in panel.all_flags.unlisted_label.text()  # still no flag of this build
    mtp.widget.selectAll()
    qtbot.keyClicks(mtp.widget, "5")
    assert words(panel)[-2:] == ["--mtp-draft", "5"] and "-tbq" in words(panel)
