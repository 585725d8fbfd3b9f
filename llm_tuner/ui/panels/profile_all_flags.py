"""The Profile editor's "All flags" section: a field for every flag of the chosen llama-server's `--help` that
has no hand-made field, grouped by the help's own sections, with a search box (which also finds the flags that
have a hand-made field, with a link to it, and lists the text-only ones with why).

The fields are views of the profile's Extra arguments (where such flags live verbatim): editing one sets its
flag there (core.cmdline.write_value) and the panel reads the arguments back as if typed, so a pasted command
line keeps its order and spellings. The section is collapsed at first and its ~170 fields are built the
first time it is opened (and again when another binary's `--help` is read), not with the window, and in
slices between which the window answers, each help section shown in chunks (on two cores at load 12-13:
0.3-1.5 s in all, the longest pause 120-260 ms; benchmarks/all_flags_build.py).
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.cmdline import (
    FIELD_BY_NAME,
    FlagCatalog,
    FlagSpec,
    GeneratedField,
    TextOnly,
    classify,
    help_tooltip,
    read_value,
    write_value,
)
from llm_tuner.state.profile_flags import HEADER_TIP, header_text, row_matches, search_words, unlisted_text
from llm_tuner.ui.panels.profile_fields import connect_edited
from llm_tuner.ui.wheel_guard import guard_wheel

_DEFAULT = "(default)"
_SLICE_MS = 25  # the longest one slice of the build may keep the window from answering
_CHUNK_ROWS = 20  # rows laid out and styled at once, when their chunk is shown


class _Row:
    """One listed flag: its group, the widgets of its row, and the text the search looks in."""

    def __init__(self, box: QGroupBox, flag: str, words: list[str],
                 where: tuple[QFormLayout, int] | QWidget, *, hand_made: bool = False) -> None:
        self.box, self.flag, self._where = box, flag, where  # a form's row, or a widget of its own
        self.hand_made = hand_made  # listed only while searching: its field is above
        self.haystack = " ".join(words).lower()
        self.visible = True

    def set_visible(self, visible: bool) -> None:
        if visible == self.visible:
            return  # a row shown again costs a layout pass; most rows stay as they are
        self.visible = visible
        if isinstance(self._where, QWidget):
            self._where.setVisible(visible)
        else:
            self._where[0].setRowVisible(self._where[1], visible)


_HAND_MADE = "With a field above (click one to go to it)"  # listed only while searching


class _HandMade:
    """A flag of `--help` with a hand-made field: listed so that a search for it finds where it is."""

    def __init__(self, spec: FlagSpec, field: str) -> None:
        self.spec, self.field = spec, field
        self.ff = FIELD_BY_NAME[field]


def _group_of(entry: GeneratedField | TextOnly | _HandMade) -> str:
    """The group a row is shown in: its `--help` section ('Sampling params'), the text-only list, or the
    flags with a field above."""
    if isinstance(entry, _HandMade):
        return _HAND_MADE
    if isinstance(entry, TextOnly):
        return "Text only: write these in Extra arguments"
    return entry.section[:1].upper() + entry.section[1:]


class _GeneratedEditor:
    """One generated field: a check box (switch), a drop-down (toggle, choice) or a text box (number, path,
    text, secret), reading and showing the flag's value as the command line writes it."""

    def __init__(self, gf: GeneratedField) -> None:
        self.gf = gf
        self.help_tip = help_tooltip(gf.spec)
        self.invalid: str | None = None
        k = gf.kind
        if k == "switch":
            self.widget = QCheckBox()
        elif k in ("toggle", "choice"):
            self.widget = QComboBox()
            self.widget.addItems([_DEFAULT, *(("on", "off") if k == "toggle" else gf.choices)])
            self.widget.setEditable(k == "choice")  # a fork may accept values this build does not list
        else:
            self.widget = QLineEdit()
            if k == "secret":
                self.widget.setEchoMode(QLineEdit.EchoMode.Password)
            default = gf.spec.default
            self.widget.setPlaceholderText(f"default: {default}" if default else "default")
        self.widget.setObjectName(f"flag_{gf.flag.lstrip('-')}")
        self.widget.setToolTip(self.help_tip)
        self.row: QWidget = self.widget
        if k in ("path", "folder"):
            self.row = QWidget()
            h = QHBoxLayout(self.row)
            h.setContentsMargins(0, 0, 0, 0)
            h.addWidget(self.widget, 1)
            browse = QToolButton()
            browse.setText("…")
            browse.setToolTip("Choose the folder" if k == "folder" else "Choose the file")
            browse.clicked.connect(self._on_browse_clicked)
            h.addWidget(browse)

    def connect(self, slot) -> None:
        connect_edited(self.widget, slot)

    def text(self) -> str | None:
        """The value to write: None for the default (the flag left out)."""
        w = self.widget
        if isinstance(w, QCheckBox):
            return "on" if w.isChecked() else None
        t = (w.currentText() if isinstance(w, QComboBox) else w.text()).strip()
        return None if t in ("", _DEFAULT) else t

    def show(self, value: str | None) -> None:
        w = self.widget
        w.blockSignals(True)
        try:
            if isinstance(w, QCheckBox):
                w.setChecked(value is not None)
            elif isinstance(w, QComboBox):
                w.setCurrentText(_DEFAULT if value is None else value)
            else:
                w.setText(value or "")
        finally:
            w.blockSignals(False)
        self.mark_invalid(None)

    def mark_invalid(self, message: str | None) -> None:
        if message == self.invalid:
            return  # a style sheet set again re-styles the widget: 170 of them are felt
        self.invalid = message
        self.widget.setStyleSheet("border: 1px solid #c62828;" if message else "")
        self.widget.setToolTip(f"{message}\n\n{self.help_tip}" if message else self.help_tip)

    def _on_browse_clicked(self) -> None:
        if self.gf.kind == "folder":
            path = QFileDialog.getExistingDirectory(self.row, f"Choose the folder for {self.gf.flag}",
                                                    self.widget.text())
        else:
            path, _ = QFileDialog.getOpenFileName(self.row, f"Choose the file for {self.gf.flag}",
                                                  self.widget.text())
        if path:
            self.widget.setText(path)
            self.widget.textEdited.emit(path)


class AllFlagsSection(QWidget):
    """Collapsible: a header button, then a search box and one group of fields per `--help` section."""

    built = Signal()  # the fields of the current catalog are all there
    field_requested = Signal(str)  # a hand-made field's name: the user asked to go to it
    args_edited = Signal(object)  # tuple[str, ...]: the Extra arguments with the edited flag set
    problems_changed = Signal()  # a field's text became (in)valid

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._catalog: FlagCatalog | None = None
        self._args: tuple[str, ...] = ()
        self._built_for: FlagCatalog | None = None
        self.editors: dict[str, _GeneratedEditor] = {}  # by the flag's written spelling
        self._rows: list[_Row] = []
        self.build_ms: float | None = None  # how long the last build of the fields took, start to end
        self.build_slice_ms = 0.0  # its longest slice: the longest the window did not answer
        self._pending: list[GeneratedField | TextOnly] = []
        self._build_timer = QTimer(self, singleShot=True, interval=0)
        self._build_timer.timeout.connect(self._build_step)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        self.toggle_button = QToolButton()
        self.toggle_button.setObjectName("all_flags_toggle")
        self.toggle_button.setCheckable(True)
        self.toggle_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle_button.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle_button.setStyleSheet("QToolButton { border: none; font-weight: bold; }")
        self.toggle_button.toggled.connect(self._on_toggle_toggled)
        v.addWidget(self.toggle_button)
        self.body = QWidget()
        self.body.setVisible(False)
        self._body_layout = QVBoxLayout(self.body)
        self._body_layout.setContentsMargins(0, 0, 0, 0)
        self.search_edit = QLineEdit()
        self.search_edit.setObjectName("all_flags_search")
        self.search_edit.setPlaceholderText("Search flags and their help, e.g. rope, mirostat, lora")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self._on_search_changed)
        self._body_layout.addWidget(self.search_edit)
        self.unlisted_label = QLabel("")
        self.unlisted_label.setObjectName("all_flags_unlisted")
        self.unlisted_label.setWordWrap(True)
        self._body_layout.addWidget(self.unlisted_label)
        self.no_match_label = QLabel("No flag matches.")
        self._body_layout.addWidget(self.no_match_label)
        self.building_label = QLabel("Reading the flags…")
        self.building_label.hide()
        self._body_layout.addWidget(self.building_label)
        self._groups_host = QWidget()
        self._groups_layout = QVBoxLayout(self._groups_host)
        self._groups_layout.setContentsMargins(0, 0, 0, 0)
        self._body_layout.addWidget(self._groups_host)
        v.addWidget(self.body)
        self._update_header()

    # -- what it shows -------------------------------------------------------------------------------
    def set_catalog(self, catalog: FlagCatalog) -> None:
        """The chosen binary's flags; the fields are rebuilt now if the section is open, else when opened."""
        self._catalog = catalog
        self._update_header()
        if self.body.isVisible() and catalog is not self._built_for:
            self._build()

    def show_args(self, args: Sequence[str], *, force: bool = False) -> None:
        """Show the profile's Extra arguments in the fields. A field holding text that is no value keeps it
        (marked) unless `force` (another profile was loaded)."""
        self._args = tuple(args)
        if self._catalog is None:
            return
        unlisted = unlisted_text(self._args, self._catalog)
        self.unlisted_label.setText(unlisted)
        self.unlisted_label.setVisible(bool(unlisted))
        for ed in self.editors.values():
            if ed.invalid and not force:
                continue
            value = read_value(self._args, ed.gf, self._catalog)
            if ed.text() != value or ed.invalid:
                ed.show(value)

    def problems(self) -> list[tuple[str, str]]:
        """(flag, problem) for each field whose text is not a value of its flag."""
        return [(ed.gf.flag, ed.invalid) for ed in self.editors.values() if ed.invalid]

    # -- construction ----------------------------------------------------------------------------------
    def _update_header(self) -> None:
        self.toggle_button.setText(header_text(self._catalog))
        if self._catalog is not None:
            self.toggle_button.setToolTip(HEADER_TIP)

    def _on_toggle_toggled(self, opened: bool) -> None:
        self.toggle_button.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        if opened and self._catalog is not None and self._catalog is not self._built_for:
            self._build()
        self.body.setVisible(opened)
        if opened:
            self.search_edit.setFocus()

    def _build(self) -> None:
        """Start building the fields for the current catalog, a slice at a time (`_build_step`), so the
        window keeps answering while ~170 rows are made (each slice at most ~`_SLICE_MS`)."""
        catalog = self._catalog
        assert catalog is not None
        self._built_for = catalog
        self._build_started = time.perf_counter()
        self.build_slice_ms = 0.0
        old = self._groups_host
        self._groups_host = QWidget()
        self._groups_layout = QVBoxLayout(self._groups_host)
        self._groups_layout.setContentsMargins(0, 0, 0, 0)
        self._body_layout.replaceWidget(old, self._groups_host)
        old.deleteLater()
        self.editors.clear()
        self._rows.clear()
        self._groups: dict[str, QGroupBox] = {}
        self._chunk: tuple[QWidget, QFormLayout | QVBoxLayout] | None = None
        sorted_flags = classify(catalog)
        self._pending = [*sorted_flags.generated, *sorted_flags.text_only,
                         *(_HandMade(spec, field) for spec, field in sorted_flags.hand_made)]
        longest = max((gf.flag for gf in sorted_flags.generated), key=len, default="")
        self._label_width = self.fontMetrics().horizontalAdvance(longest + "  ")  # chunks' columns line up
        self.building_label.show()
        self._build_timer.start()

    def _layout_for(
        self, entry: GeneratedField | TextOnly | _HandMade
    ) -> tuple[QGroupBox, QFormLayout | QVBoxLayout]:
        """The chunk of rows `entry` goes in: a group per `--help` section, split in chunks of `_CHUNK_ROWS`
        rows, each shown once full (showing a widget lays out and styles all it holds, at once)."""
        title = _group_of(entry)
        box = self._groups.get(title)
        if box is None:
            self._show_chunk()
            box = self._groups[title] = QGroupBox(title.replace("&", "&&"))
            QVBoxLayout(box).setSpacing(0)
            box.hide()
            self._groups_layout.addWidget(box)
        if self._chunk is None:
            chunk = QWidget()
            listed = not isinstance(entry, GeneratedField)
            layout: QFormLayout | QVBoxLayout = QVBoxLayout(chunk) if listed else QFormLayout(chunk)
            # a wrapped reason in a form row is clipped: text-only is a list
            layout.setContentsMargins(0, 0, 0, 0)
            chunk.hide()
            box.layout().addWidget(chunk)
            self._chunk = (chunk, layout)
        return box, self._chunk[1]

    def _show_chunk(self) -> bool:
        """Show the chunk being filled (and its group); False when there was none."""
        if self._chunk is None:
            return False
        chunk, _layout = self._chunk
        chunk.show()
        if chunk.parentWidget() is not self._groups.get(_HAND_MADE):  # that one waits for a search
            chunk.parentWidget().show()
        self._chunk = None
        return True

    def _build_step(self) -> None:
        start = time.perf_counter()
        while self._pending and (time.perf_counter() - start) * 1000 < _SLICE_MS:
            entry = self._pending.pop(0)
            self._add_row(entry)
            full = self._chunk is not None and self._chunk[1].count() >= _CHUNK_ROWS * (
                2 if isinstance(entry, GeneratedField) else 1)
            if full or not self._pending or _group_of(self._pending[0]) != _group_of(entry):
                self._show_chunk()
                break  # its layout is this slice's work
        self.build_slice_ms = max(self.build_slice_ms, (time.perf_counter() - start) * 1000)
        if self._pending:
            self._build_timer.start()
            return
        guard_wheel(self._groups_host)
        self.building_label.hide()
        self.show_args(self._args, force=True)
        self._on_search_changed(self.search_edit.text())
        self.build_ms = (time.perf_counter() - self._build_started) * 1000
        self.built.emit()

    def _add_row(self, entry: GeneratedField | TextOnly | _HandMade) -> None:
        box, layout = self._layout_for(entry)
        if isinstance(entry, GeneratedField):
            ed = _GeneratedEditor(entry)
            ed.connect(lambda *_a, e=ed: self._on_editor_edited(e))
            self.editors[entry.flag] = ed
            label = QLabel(entry.flag)
            label.setMinimumWidth(self._label_width)
            label.setToolTip(ed.help_tip)
            label.setBuddy(ed.widget)
            assert isinstance(layout, QFormLayout)
            layout.addRow(label, ed.row)
            self._rows.append(_Row(box, entry.flag, [*entry.spec.names, entry.spec.help],
                                   (layout, layout.rowCount() - 1)))
            return
        spec = entry.spec
        if isinstance(entry, _HandMade):
            where = f"{entry.ff.label}, in {entry.ff.section}"
            names = html.escape(", ".join(spec.names))
            line = QLabel(f"<a href='{entry.field}'>{names}</a>: {html.escape(where)}")
            line.setToolTip(help_tooltip(spec))
            line.linkActivated.connect(self.field_requested.emit)
            line.hide()
            layout.addWidget(line)
            row = _Row(box, spec.canonical, [*spec.names, spec.help, where], line, hand_made=True)
            row.visible = False
            self._rows.append(row)
            return
        line = QLabel(f"<b>{html.escape(', '.join(spec.names))}</b>: {html.escape(entry.reason)}")
        line.setWordWrap(True)
        line.setToolTip(help_tooltip(spec))
        layout.addWidget(line)
        self._rows.append(_Row(box, spec.canonical, [*spec.names, spec.help, entry.reason], line))

    # -- editing and search ----------------------------------------------------------------------------
    def _on_editor_edited(self, ed: _GeneratedEditor) -> None:
        text = ed.text()
        problem = ed.gf.problem(text or "")
        ed.mark_invalid(problem)
        if problem is not None or self._catalog is None:
            self.problems_changed.emit()  # the panel says so; the arguments keep the last valid value
            return
        self._args = write_value(self._args, ed.gf, text, self._catalog)
        self.args_edited.emit(self._args)

    def _on_search_changed(self, text: str) -> None:
        words = search_words(text)
        shown: dict[QGroupBox, bool] = {}
        for row in self._rows:
            hit = row_matches(row.haystack, words, hand_made=row.hand_made)
            row.set_visible(hit)
            shown[row.box] = shown.get(row.box, False) or hit
        for box, any_hit in shown.items():
            if box.isHidden() == any_hit:
                box.setVisible(any_hit)
        self.no_match_label.setVisible(bool(self._rows) and not any(shown.values()))

    def shown_flags(self) -> list[str]:
        """The flags the search leaves listed, in order (the written spelling of each)."""
        return [row.flag for row in self._rows if row.visible]
