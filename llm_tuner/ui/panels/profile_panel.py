"""Profile panel: named profiles, a sectioned editor for every llama-server setting, a live command
preview with Copy, and the advice list beside it.

Every edit builds a new immutable LaunchProfile and publishes it with `ctx.state.set_profile`, so the
Plan, Live and Benchmark panels follow. Tooltips are the chosen binary's own `--help` text.
"""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core import profile as prof
from llm_tuner.core.advice import Advice, advise
from llm_tuner.core.cmdline import (
    FIELD_FLAGS,
    SECTIONS,
    FieldFlag,
    FlagCatalog,
    apply_fix,
    describe_env,
    field_tokens,
    parse_field_value,
    profile_to_argv,
    render_shell,
    validate,
)
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.binaries import SERVER, catalog_for
from llm_tuner.store.profiles import ProfileNameError, ProfileRepository
from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog

_CHOICES = {
    "cache_type_k": prof.CACHE_TYPES, "cache_type_v": prof.CACHE_TYPES,
    "draft_cache_type_k": prof.CACHE_TYPES, "draft_cache_type_v": prof.CACHE_TYPES,
    "flash_attn": prof.FLASH_ATTN_VALUES, "split_mode": prof.SPLIT_MODES, "load_mode": prof.LOAD_MODES,
    "reasoning_format": prof.REASONING_FORMATS, "reasoning": prof.ON_OFF_AUTO,
}
_DEFAULT = "(default)"
_SEVERITY_COLOUR = {"error": QColor("#c62828"), "warning": QColor("#b26a00"), "info": QColor("#1565c0")}


class _FieldEditor:
    """One widget bound to one profile field: reads a value (raising ValueError) and shows one."""

    def __init__(self, ff: FieldFlag) -> None:
        self.ff = ff
        k = ff.kind
        if k == "switch":
            self.widget = QCheckBox()
        elif k in ("toggle", "onoff"):
            self.widget = QComboBox()
            self.widget.addItems([_DEFAULT, "on", "off"])
        elif ff.field in _CHOICES:
            self.widget = QComboBox()
            self.widget.setEditable(True)  # forks accept values this build does not list
            self.widget.addItems([_DEFAULT, *_CHOICES[ff.field]])
        elif k == "overrides":
            self.widget = QPlainTextEdit()
            self.widget.setPlaceholderText("one rule per line: PATTERN=BUFFER, e.g. blk\\.(0|3|6)\\.ffn_.*=CPU")
            self.widget.setFixedHeight(64)
        else:
            self.widget = QLineEdit()
            if k == "secret":
                self.widget.setEchoMode(QLineEdit.EchoMode.Password)
            self.widget.setPlaceholderText(_placeholder(ff))
        self.widget.setObjectName(f"field_{ff.field}")

    def connect(self, slot) -> None:
        w = self.widget
        if isinstance(w, QCheckBox):
            w.toggled.connect(slot)
        elif isinstance(w, QComboBox):
            w.currentTextChanged.connect(slot)
        elif isinstance(w, QPlainTextEdit):
            w.textChanged.connect(slot)
        else:
            w.textEdited.connect(slot)

    def text(self) -> str:
        w = self.widget
        if isinstance(w, QComboBox):
            t = w.currentText().strip()
            return "" if t == _DEFAULT else t
        if isinstance(w, QPlainTextEdit):
            return ",".join(line.strip() for line in w.toPlainText().splitlines() if line.strip())
        return w.text().strip() if isinstance(w, QLineEdit) else ""

    def value(self):
        k = self.ff.kind
        if isinstance(self.widget, QCheckBox):
            return self.widget.isChecked()
        t = self.text()
        if k in ("toggle", "onoff"):
            return None if not t else t == "on"
        if not t:
            return () if k in ("list", "append", "floats", "ints", "overrides") else None
        return parse_field_value(self.ff, t, None)

    def show(self, profile: LaunchProfile) -> None:
        v = getattr(profile, self.ff.field)
        w = self.widget
        w.blockSignals(True)
        try:
            if isinstance(w, QCheckBox):
                w.setChecked(bool(v))
            elif self.ff.kind in ("toggle", "onoff"):
                w.setCurrentText(_DEFAULT if v is None else ("on" if v else "off"))
            elif isinstance(w, QComboBox):
                w.setCurrentText(_DEFAULT if v is None else str(v))
            elif isinstance(w, QPlainTextEdit):
                w.setPlainText("\n".join(str(r) for r in v))
            else:
                if self.ff.kind == "secret":
                    text = "" if v is None else v.get_secret_value()
                else:
                    toks = field_tokens(profile, self.ff)
                    text = toks[1] if len(toks) > 1 else ""
                w.setText(text)
            w.setStyleSheet("")
        finally:
            w.blockSignals(False)

    def mark_invalid(self, message: str | None) -> None:
        self.widget.setStyleSheet("border: 1px solid #c62828;" if message else "")
        if message:
            self.widget.setToolTip(message)


def _placeholder(ff: FieldFlag) -> str:
    return {"int": "default", "float": "default", "layers": "auto, all or a number", "list": "comma-separated",
            "append": "comma-separated", "floats": "e.g. 3,1", "ints": "MiB per device, e.g. 1024,2048",
            "secret": "none (anyone who can reach the port may use it)"}.get(ff.kind, "default")


def _tooltip(ff: FieldFlag, catalog: FlagCatalog | None) -> str:
    spec = catalog.lookup(ff.flag) if catalog is not None else None
    names = ", ".join([*ff.names, *ff.neg])
    if spec is None:
        return f"{names}\n(not listed by this llama-server's --help)"
    lines = [", ".join(spec.names) + (f" {spec.value}" if spec.value else ""), "", spec.help]
    if spec.env:
        lines.append(f"env: {spec.env}")
    return "\n".join(lines)


class ProfilePanel(QWidget):
    """Edit, save and version launch profiles; see the exact command and the advice as you type."""

    profile_edited = Signal(object)  # LaunchProfile

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = ProfileRepository(ctx.engine)
        self.profile = LaunchProfile()
        self.current_name: str | None = None
        self.saved_profile: LaunchProfile | None = None
        self.advice: list[Advice] = []
        self._model_facts = None
        self._facts_for: str | None = None
        self._facts_job: BackgroundJob | None = None
        self.editors: dict[str, _FieldEditor] = {}
        self._build()
        self._refresh_tooltips()
        self.reload_names()
        self._recompute(publish=False)
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.binaries_probed.connect(self._on_state_binaries_probed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)

    # -- construction ----------------------------------------------------------------------------
    def _build(self) -> None:
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)

        # profiles list + versions
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.addWidget(QLabel("<b>Profiles</b>"))
        self.names_list = QListWidget()
        self.names_list.currentTextChanged.connect(self._on_names_current_changed)
        lv.addWidget(self.names_list, 1)
        self.empty_hint = QLabel("No saved profiles yet. Edit the settings and press Save, or use "
                                 "“Paste command…” to import the command you already run.")
        self.empty_hint.setWordWrap(True)
        lv.addWidget(self.empty_hint)
        row = QHBoxLayout()
        for text, slot in (("New", self._on_new_clicked), ("Duplicate", self._on_duplicate_clicked),
                           ("Rename", self._on_rename_clicked), ("Delete", self._on_delete_clicked)):
            b = QPushButton(text)
            b.clicked.connect(slot)
            row.addWidget(b)
        lv.addLayout(row)
        row = QHBoxLayout()
        self.save_button = QPushButton("Save")
        self.save_button.setToolTip("Save the settings as a new version of this profile")
        self.save_button.clicked.connect(self._on_save_clicked)
        row.addWidget(self.save_button)
        paste = QPushButton("Paste command…")
        paste.clicked.connect(self._on_paste_clicked)
        row.addWidget(paste)
        lv.addLayout(row)
        lv.addWidget(QLabel("Versions"))
        self.versions_list = QListWidget()
        lv.addWidget(self.versions_list, 1)
        self.revert_button = QPushButton("Revert to this version")
        self.revert_button.clicked.connect(self._on_revert_clicked)
        lv.addWidget(self.revert_button)
        split.addWidget(left)

        # the editor
        editor = QWidget()
        ev = QVBoxLayout(editor)
        forms: dict[str, QFormLayout] = {}
        for section in SECTIONS:
            box = QGroupBox(section.replace("&", "&&"))
            forms[section] = QFormLayout(box)
            ev.addWidget(box)
        for ff in FIELD_FLAGS:
            ed = _FieldEditor(ff)
            ed.connect(self._on_field_edited)
            self.editors[ff.field] = ed
            label = QLabel(ff.label)
            label.setBuddy(ed.widget)
            forms[ff.section].addRow(label, ed.widget)
        box = QGroupBox("Environment")
        bv = QVBoxLayout(box)
        self.env_edit = QPlainTextEdit()
        self.env_edit.setObjectName("env_edit")
        self.env_edit.setPlaceholderText("one per line: NAME=value (e.g. GGML_CUDA_DISABLE_GRAPHS=1)")
        self.env_edit.setFixedHeight(80)
        self.env_edit.textChanged.connect(self._on_field_edited)
        bv.addWidget(self.env_edit)
        self.env_flags = QLabel("")
        self.env_flags.setWordWrap(True)
        bv.addWidget(self.env_flags)
        ev.addWidget(box)
        box = QGroupBox("Extra arguments")
        bv = QVBoxLayout(box)
        self.extra_edit = QLineEdit()
        self.extra_edit.setObjectName("extra_edit")
        self.extra_edit.setPlaceholderText("kept verbatim and in order, e.g. a fork's -tbq 4 --mtp-draft 3")
        self.extra_edit.textEdited.connect(self._on_field_edited)
        bv.addWidget(self.extra_edit)
        ev.addWidget(box)
        ev.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(editor)
        split.addWidget(scroll)

        # preview + advice
        right = QWidget()
        rv = QVBoxLayout(right)
        head = QHBoxLayout()
        self.title = QLabel("<b>Command</b>")
        head.addWidget(self.title, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the command as a shell line (the API key stays masked)")
        self.copy_button.clicked.connect(self._on_copy_clicked)
        head.addWidget(self.copy_button)
        rv.addLayout(head)
        self.preview = QPlainTextEdit()
        self.preview.setObjectName("preview")
        self.preview.setReadOnly(True)
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        rv.addWidget(self.preview, 2)
        self.error_label = QLabel("")
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setWordWrap(True)
        rv.addWidget(self.error_label)
        ah = QHBoxLayout()
        ah.addWidget(QLabel("<b>Advice</b>"), 1)
        self.fix_button = QPushButton("Fix removed flags")
        self.fix_button.setToolTip("Replace removed flags by what replaces them (e.g. --mlock → --load-mode mlock)")
        self.fix_button.clicked.connect(self._on_fix_clicked)
        ah.addWidget(self.fix_button)
        rv.addLayout(ah)
        self.advice_list = QListWidget()
        self.advice_list.setObjectName("advice_list")
        self.advice_list.setWordWrap(True)
        rv.addWidget(self.advice_list, 2)
        split.addWidget(right)
        split.setSizes([220, 560, 520])

    # -- catalog / model facts --------------------------------------------------------------------
    def catalog(self) -> FlagCatalog:
        return catalog_for(self.ctx.state.binaries.get(SERVER))

    def _refresh_tooltips(self) -> None:
        cat = self.catalog()
        for ed in self.editors.values():
            ed.widget.setToolTip(_tooltip(ed.ff, cat))

    def _on_state_binaries_probed(self, _binaries) -> None:
        self._refresh_tooltips()
        self._recompute(publish=False)

    def _on_state_inventory_detected(self, _inventory) -> None:
        self._recompute(publish=False)

    def _on_state_model_selected(self, path) -> None:
        if path is None:
            return
        self.editors["model"].widget.setText(str(path))
        self._on_field_edited()

    def _load_model_facts(self, model: str | None) -> None:
        """Read the model's header off the GUI thread (for ctx-over-trained and MTP advice)."""
        if model == self._facts_for:
            return
        self._facts_for, self._model_facts = model, None
        if not model:
            return
        from pathlib import Path

        def work(_ctl):
            from llm_tuner.services.library import read_model

            if not Path(model).is_file():
                return None
            info = read_model(model)
            return None if getattr(info, "error", None) else info

        job = BackgroundJob(work, self)
        job.succeeded.connect(lambda info, m=model: self._on_facts_read(m, info))
        self._facts_job = job.start()

    def _on_facts_read(self, model: str, info) -> None:
        if model == self._facts_for:
            self._model_facts = info
            self._recompute(publish=False)

    # -- editing --------------------------------------------------------------------------------
    def _read_widgets(self) -> tuple[LaunchProfile | None, list[str]]:
        values: dict[str, object] = {}
        errors: list[str] = []
        for field, ed in self.editors.items():
            try:
                values[field] = ed.value()
                ed.mark_invalid(None)
            except ValueError as exc:
                errors.append(str(exc))
                ed.mark_invalid(str(exc))
        env: dict[str, str] = {}
        for line in self.env_edit.toPlainText().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.removeprefix("export ").partition("=")
            if not sep or not name.strip():
                errors.append(f"environment line {line!r} needs NAME=value")
                continue
            env[name.strip()] = value
        try:
            extra = tuple(shlex.split(self.extra_edit.text()))
        except ValueError as exc:
            errors.append(f"extra arguments: {exc} (close the quote)")
            extra = self.profile.extra_args
        if errors:
            return None, errors
        values = {k: v for k, v in values.items() if v is not None}
        return LaunchProfile(binary=self.profile.binary, env=env, extra_args=extra, **values), []

    def _on_field_edited(self, *_args) -> None:
        profile, errors = self._read_widgets()
        self.error_label.setText("\n".join(errors))
        if profile is None:
            return
        self.profile = profile
        self._recompute(publish=True)

    def set_profile(self, profile: LaunchProfile, name: str | None = None, *, publish: bool = True) -> None:
        """Show a profile in the editor (no widget signals fire) and publish it."""
        self.profile = profile
        self.current_name = name
        for ed in self.editors.values():
            ed.show(profile)
        self.env_edit.blockSignals(True)
        self.env_edit.setPlainText("\n".join(f"{k}={v}" for k, v in profile.env.items()))
        self.env_edit.blockSignals(False)
        self.extra_edit.setText(shlex.join(profile.extra_args))
        self.error_label.setText("")
        self._recompute(publish=publish)

    def current_argv(self) -> list[str]:
        return profile_to_argv(self.profile)[0]

    def _recompute(self, *, publish: bool) -> None:
        p = self.profile
        argv, env = profile_to_argv(p)
        self.preview.setPlainText(render_shell(argv, env, binary=p.binary, multiline=True))
        self.env_flags.setText("; ".join(f"{n} sets {f}" for n, _v, f in describe_env(p.env, self.catalog()) if f))
        self._load_model_facts(p.model)
        inventory = self.ctx.state.inventory
        n_gpus = len(inventory.devices) if inventory is not None else None
        self.advice = advise(p, self.catalog(), self._model_facts, n_gpus=n_gpus)
        self.advice_list.clear()
        for a in self.advice:
            item = QListWidgetItem(f"{a.severity.upper()}: {a.message}")
            item.setToolTip(f"{a.reason}\nSource: {a.source}\nid: {a.id}")
            item.setForeground(_SEVERITY_COLOUR[a.severity])
            item.setData(Qt.ItemDataRole.UserRole, a.id)
            self.advice_list.addItem(item)
        if not self.advice:
            self.advice_list.addItem("No known traps in these settings.")
        self.fix_button.setEnabled(any(r.fix for r in validate(p, self.catalog()).removed))
        dirty = self.saved_profile is None or self.saved_profile != p
        name = self.current_name or "unsaved profile"
        self.title.setText(f"<b>Command</b> — {name}{' (modified)' if dirty and self.current_name else ''}")
        if publish:
            self.ctx.state.profile_name = self.current_name
            self.ctx.state.set_profile(p)
            self.profile_edited.emit(p)

    # -- actions ----------------------------------------------------------------------------------
    def _on_copy_clicked(self) -> None:
        argv, env = profile_to_argv(self.profile)
        QGuiApplication.clipboard().setText(render_shell(argv, env, binary=self.profile.binary))
        self.ctx.state.status_message_posted.emit("Command copied (API key masked).")

    def _on_fix_clicked(self) -> None:
        p = self.profile
        for r in validate(p, self.catalog()).removed:
            p = apply_fix(p, r, self.catalog())
        self.set_profile(p, self.current_name)

    def _on_paste_clicked(self) -> None:
        dlg = PasteCommandDialog(self.catalog(), self)
        if dlg.exec() and dlg.result is not None:
            self.import_result(dlg.result)

    def import_result(self, result) -> None:
        """Load an imported command into the editor as an unsaved profile."""
        self.saved_profile = None
        self.set_profile(result.profile, None)
        self.versions_list.clear()
        self.names_list.blockSignals(True)
        self.names_list.clearSelection()
        self.names_list.setCurrentRow(-1)
        self.names_list.blockSignals(False)

    def _ask_name(self, title: str, default: str = "") -> str | None:
        name, ok = QInputDialog.getText(self, title, "Profile name:", text=default)
        return name.strip() if ok and name.strip() else None

    def _warn(self, exc: Exception) -> None:
        QMessageBox.warning(self, "Profile", f"{exc}. Choose another name.")

    def _on_save_clicked(self) -> None:
        name = self.current_name or self._ask_name("Save profile", self.repo.unique_name("profile"))
        if name:
            self.save_as(name)

    def save_as(self, name: str) -> None:
        saved = self.repo.save(name, self.profile)
        self.current_name, self.saved_profile = saved.name, saved.profile
        self.reload_names(select=saved.name)
        self.ctx.state.status_message_posted.emit(f"Saved {saved.name} version {saved.version}.")

    def _on_new_clicked(self) -> None:
        name = self._ask_name("New profile", self.repo.unique_name("profile"))
        if name:
            self.new_profile(name)

    def new_profile(self, name: str) -> None:
        model = self.profile.model
        try:
            saved = self.repo.save(name, LaunchProfile(model=model)) if self.repo.latest(name) is None else None
        except ProfileNameError as exc:
            self._warn(exc)
            return
        if saved is None:
            self._warn(ProfileNameError(f"a profile named {name!r} exists already"))
            return
        self.reload_names(select=saved.name)

    def _on_duplicate_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Duplicate profile", self.repo.unique_name(self.current_name + " copy"))
            if name:
                self.duplicate(name)

    def duplicate(self, new: str) -> None:
        try:
            if self.current_name is None or self.repo.latest(self.current_name) is None:
                saved = self.repo.save(new, self.profile)
            else:
                saved = self.repo.duplicate(self.current_name, new)
        except ProfileNameError as exc:
            self._warn(exc)
            return
        self.reload_names(select=saved.name)

    def _on_rename_clicked(self) -> None:
        if self.current_name:
            name = self._ask_name("Rename profile", self.current_name)
            if name:
                self.rename(name)

    def rename(self, new: str) -> None:
        try:
            self.repo.rename(self.current_name, new)
        except ProfileNameError as exc:
            self._warn(exc)
            return
        self.current_name = new
        self.reload_names(select=new)

    def _on_delete_clicked(self) -> None:
        if not self.current_name:
            return
        answer = QMessageBox.question(self, "Delete profile", f"Delete “{self.current_name}”? Benchmark runs "
                                      "keep the settings they ran with.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_current()

    def delete_current(self) -> None:
        self.repo.delete(self.current_name)
        self.current_name, self.saved_profile = None, None
        self.reload_names()
        self.versions_list.clear()
        self._recompute(publish=False)

    def _on_revert_clicked(self) -> None:
        item = self.versions_list.currentItem()
        if item is not None and self.current_name:
            self.revert_to(int(item.data(Qt.ItemDataRole.UserRole)))

    def revert_to(self, version: int) -> None:
        saved = self.repo.revert(self.current_name, version)
        self.saved_profile = saved.profile
        self.set_profile(saved.profile, saved.name)
        self._reload_versions()

    # -- lists ------------------------------------------------------------------------------------
    def reload_names(self, select: str | None = None) -> None:
        names = self.repo.names()
        self.names_list.blockSignals(True)
        self.names_list.clear()
        self.names_list.addItems(names)
        self.names_list.blockSignals(False)
        self.empty_hint.setVisible(not names)
        if select is not None and select in names:
            self.names_list.setCurrentRow(names.index(select))  # loads it

    def _on_names_current_changed(self, name: str) -> None:
        if not name:
            return
        saved = self.repo.latest(name)
        if saved is None:
            return
        self.saved_profile = saved.profile
        self.set_profile(saved.profile, saved.name)
        self._reload_versions()

    def _reload_versions(self) -> None:
        self.versions_list.clear()
        if not self.current_name:
            return
        for v in self.repo.versions(self.current_name):
            item = QListWidgetItem(f"v{v.version}  {v.created_at:%Y-%m-%d %H:%M}  {v.note}")
            item.setData(Qt.ItemDataRole.UserRole, v.version)
            self.versions_list.addItem(item)
        self.revert_button.setEnabled(self.versions_list.count() > 1)
