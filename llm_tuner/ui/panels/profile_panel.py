"""Profile panel: named profiles, a sectioned editor for every llama-server setting, a live command
preview with Copy, and the advice list beside it.

The view's state and rules (the edited profile, its name, modified or not, the invalid fields, the model's
facts, the advice and the speed line) are `state.profile.ProfileState`'s; this module binds the widgets to it.
Every edit builds a new immutable LaunchProfile and the state publishes it to the workspace, so the Plan, Live
and Benchmark panels follow. Tooltips are the chosen binary's own `--help` text.
"""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt, QThreadPool, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.advice import Advice
from llm_tuner.core.cmdline import (
    FIELD_FLAGS,
    SECTIONS,
    FlagCatalog,
    describe_env,
    profile_to_argv,
    render_shell,
)
from llm_tuner.core.profile import LaunchProfile, nul_fields
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob, state_run
from llm_tuner.services.binaries import BinaryError, trust_binary
from llm_tuner.services.speed import load_basis
from llm_tuner.state.callbacks import Run
from llm_tuner.state.profile import NUL_PROBLEM, ProfileState
from llm_tuner.state.profile_library import ProfileLibraryState
from llm_tuner.state.speed import SpeedModel
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog
from llm_tuner.ui.panels.profile_all_flags import AllFlagsSection
from llm_tuner.ui.panels.profile_fields import ProgramRow, _FieldEditor, _tooltip
from llm_tuner.ui.panels.profile_library import ProfileLibrary
from llm_tuner.ui.panels.profile_migrate import MigrationBanner
from llm_tuner.ui.wheel_guard import guard_wheel
from llm_tuner.ui.widgets import ElidedLabel

_SEVERITY_COLOUR = {"error": QColor("#c62828"), "warning": QColor("#b26a00"), "info": QColor("#1565c0")}
_COPY_TIP = "Copy the command as a shell line (the API key stays masked)"


class ProfilePanel(ProfileLibrary, QWidget):
    """Edit, save and version launch profiles; see the exact command and the advice as you type."""

    profile_edited = Signal(object)  # LaunchProfile
    store_settled = Signal()  # every queued profile-store call has finished

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = ProfileRepository(ctx.engine)
        speed = SpeedModel(lambda: load_basis(ctx.engine),
                           run=state_run(self, "Reading the speed calibration"))
        self.profile_state = ProfileState(ctx.state.workspace, speed=speed, run=self._reported_run(
            "Reading the model file's header"))  # the view's state and rules: the widgets below bind it
        self._store_pool = QThreadPool(self)  # one thread: store calls run in the order they were made
        self._store_pool.setMaxThreadCount(1)
        # the saved names, the open one's versions and the library's actions: store calls on that one thread
        self.library = ProfileLibraryState(self.repo, self.profile_state, ctx.state.workspace,
                                           settings=lambda: ctx.settings, run=self._store_run)
        self.editors: dict[str, _FieldEditor] = {}
        self._build()
        self.profile_state.add_callback(self._on_profile_state_changed)
        self.library.add_callback(self._on_library_changed)
        guard_wheel(self)  # the page scrolls under the wheel; values change only in a clicked field
        self._refresh_tooltips()
        self.reload_names()
        self._recompute(publish=False)
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.binaries_probed.connect(self._on_state_binaries_probed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        ctx.state.profile_saved.connect(self._on_state_profile_saved)  # a tune saved a version
        # a run may refine the calibration
        ctx.state.bench_runs_changed.connect(self._on_state_bench_runs_changed)
        ctx.state.save_profile_requested.connect(self._on_state_save_profile_requested)  # the quick start
        ctx.state.profile_variant_requested.connect(self._on_state_profile_variant_requested)
        speed.load()

    def _reported_run(self, what: str) -> Run:
        """The state's `Run` as BackgroundJobs whose failure goes to the error surface (no view of its
        own)."""

        def run(work, done, _failed) -> None:
            job = BackgroundJob(lambda _ctl: work(), self, what=what)
            job.succeeded.connect(done)
            job.start()

        return run

    # the state's facts, by the names the library mix-in, the quick start and the tests use
    @property
    def profile(self) -> LaunchProfile:
        return self.profile_state.profile

    @profile.setter
    def profile(self, profile: LaunchProfile) -> None:
        self.profile_state.profile = profile

    @property
    def current_name(self) -> str | None:
        return self.profile_state.current_name

    @current_name.setter
    def current_name(self, name: str | None) -> None:
        self.profile_state.current_name = name

    @property
    def saved_profile(self) -> LaunchProfile | None:
        return self.profile_state.saved_profile

    @saved_profile.setter
    def saved_profile(self, profile: LaunchProfile | None) -> None:
        self.profile_state.saved_profile = profile

    @property
    def advice(self) -> list[Advice]:
        return self.profile_state.advice

    def _on_profile_state_changed(self, what: str, *_details) -> None:
        if what == "speed":
            self._show_speed()
        elif what == "advice":
            self._show_advice()

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
        # Two buttons a row: the list column stays narrow (the window fits 1366 px with the Models dock open).
        grid = QGridLayout()
        buttons = []
        for text, slot in (("New", self._on_new_clicked), ("Duplicate", self._on_duplicate_clicked),
                           ("Rename", self._on_rename_clicked), ("Delete", self._on_delete_clicked)):
            b = QPushButton(text)
            b.clicked.connect(slot)
            buttons.append(b)
        self.save_button = QPushButton("Save")
        self.save_button.setToolTip("Save the settings as a new version of this profile")
        self.save_button.clicked.connect(self._on_save_clicked)
        paste = QPushButton("Paste command…")
        paste.clicked.connect(self._on_paste_clicked)
        for i, b in enumerate([self.save_button, paste, *buttons]):
            grid.addWidget(b, i // 2, i % 2)
        lv.addLayout(grid)
        lv.addWidget(QLabel("Versions"))
        self.versions_list = QListWidget()
        lv.addWidget(self.versions_list, 1)
        for lst in (self.names_list, self.versions_list):  # narrow column: long entries end in "…" (tooltip)
            lst.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            lst.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.revert_button = QPushButton("Revert to this version")
        self.revert_button.clicked.connect(self._on_revert_clicked)
        self.revert_button.setEnabled(False)  # until a profile with two versions or more is listed
        lv.addWidget(self.revert_button)
        split.addWidget(left)

        # the editor
        editor = QWidget()
        ev = QVBoxLayout(editor)
        self.migrate_banner = MigrationBanner(self.ctx)  # saved with another build: its flags' migration
        self.migrate_banner.migrated.connect(self._on_load_job_succeeded)
        ev.addWidget(self.migrate_banner)
        box = QGroupBox("Program")
        bv = QVBoxLayout(box)
        self.program_row = ProgramRow()
        self.program_row.program_chosen.connect(self._on_program_chosen)
        self.program_row.program_confirmed.connect(self._on_program_confirmed)
        bv.addWidget(self.program_row)
        ev.addWidget(box)
        forms: dict[str, QFormLayout] = {}
        for section in SECTIONS:
            box = QGroupBox(section.replace("&", "&&"))
            forms[section] = QFormLayout(box)
            # narrow: the field below its label
            forms[section].setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
            ev.addWidget(box)
        for ff in FIELD_FLAGS:
            ed = _FieldEditor(ff)
            ed.connect(self._on_field_edited)
            self.editors[ff.field] = ed
            label = QLabel(ff.label)
            label.setBuddy(ed.widget)
            forms[ff.section].addRow(label, ed.widget)
        self.router_line = QLabel("")  # said under the model field when the profile is a router (no -m)
        self.router_line.setObjectName("router_line")
        self.router_line.setWordWrap(True)
        self.router_line.hide()
        model_form = forms[next(ff.section for ff in FIELD_FLAGS if ff.field == "model")]
        model_row, _role = model_form.getWidgetPosition(self.editors["model"].widget)
        model_form.insertRow(model_row + 1, self.router_line)
        self.all_flags = AllFlagsSection()  # every other flag of the binary's --help, built when opened
        self.all_flags.args_edited.connect(self._on_all_flags_args_edited)
        self.all_flags.problems_changed.connect(self._on_field_edited)
        self.all_flags.field_requested.connect(self._on_all_flags_field_requested)
        ev.addWidget(self.all_flags)
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
        scroll = self._editor_scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(editor)
        split.addWidget(scroll)

        # preview + advice
        right = QWidget()
        rv = QVBoxLayout(right)
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Command</b>"), 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip(_COPY_TIP)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        head.addWidget(self.copy_button)
        rv.addLayout(head)
        self.title = ElidedLabel()  # the profile's name on a line of its own: the pane is narrow
        self.title.setObjectName("command_title")
        rv.addWidget(self.title)
        self.preview = QPlainTextEdit()
        self.preview.setObjectName("preview")
        self.preview.setReadOnly(True)
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self._preview_palette = self.preview.palette()
        rv.addWidget(self.preview, 2)
        self.speed_label = QLabel()  # the predicted speed of this command, and what it is calibrated on
        self.speed_label.setObjectName("speed_line")
        self.speed_label.setWordWrap(True)
        self.speed_label.setToolTip("Predicted by the speed model (core.speed) from the memory plan: one "
                                    "request, a 512-token prompt, generation at an empty cache")
        rv.addWidget(self.speed_label)
        self.error_label = QLabel("")
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setWordWrap(True)
        rv.addWidget(self.error_label)
        ah = QHBoxLayout()
        ah.addWidget(QLabel("<b>Advice</b>"), 1)
        self.fix_button = QPushButton("Fix removed flags")
        self.fix_button.setToolTip("Replace removed flags by what replaces them (e.g. --mlock → --load-mode "
                                   "mlock)")
        self.fix_button.clicked.connect(self._on_fix_clicked)
        ah.addWidget(self.fix_button)
        rv.addLayout(ah)
        self.advice_list = QListWidget()
        self.advice_list.setObjectName("advice_list")
        self.advice_list.setWordWrap(True)
        rv.addWidget(self.advice_list, 2)
        split.addWidget(right)
        split.setSizes([210, 400, 290])
        split.setStretchFactor(1, 1)  # extra width goes to the editor's form

    # -- catalog / model facts --------------------------------------------------------------------
    def catalog(self) -> FlagCatalog:
        return self.profile_state.catalog()

    def _refresh_tooltips(self) -> None:
        cat = self.catalog()
        self.all_flags.set_catalog(cat)
        self.all_flags.show_args(self.profile.extra_args)
        for ed in self.editors.values():
            ed.help_tip = _tooltip(ed.ff, cat)
            if not ed.widget.styleSheet():  # a field marked invalid keeps its message on top
                ed.widget.setToolTip(ed.help_tip)

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

    # -- editing --------------------------------------------------------------------------------
    def _read_widgets(self) -> tuple[LaunchProfile | None, list[tuple[str, str]]]:
        """The profile the widgets describe, or None and the (field label, problem) of each invalid one."""
        values: dict[str, object] = {}
        errors: list[tuple[str, str]] = []
        for field, ed in self.editors.items():
            try:
                if "\0" in ed.text():
                    raise ValueError(NUL_PROBLEM)
                values[field] = ed.value()
                ed.mark_invalid(None)
            except ValueError as exc:
                errors.append((ed.ff.label, str(exc)))
                ed.mark_invalid(str(exc))
        return self.profile_state.read_fields(values, errors, self.env_edit.toPlainText(),
                                              self.extra_edit.text(), self.all_flags.problems())

    def _on_field_edited(self, *_args) -> None:
        profile, errors = self._read_widgets()
        self.error_label.setText("\n".join(f"{where}: {problem}" for where, problem in errors))
        if profile is None:
            self._show_preview()
            return
        self.profile = profile
        self.all_flags.show_args(profile.extra_args)
        self._recompute(publish=True)

    def _on_all_flags_args_edited(self, args) -> None:
        """A field of All flags set its flag in the Extra arguments: read them back as if typed there."""
        self.extra_edit.setText(shlex.join(args))
        self._on_field_edited()

    def _on_all_flags_field_requested(self, field: str) -> None:
        widget = self.editors[field].widget
        self._editor_scroll.ensureWidgetVisible(widget)
        widget.setFocus()

    def _show_preview(self) -> None:
        """The command of the profile; while a field is invalid, greyed under a line saying what to fix.

        The last valid command stays visible (greyed, labelled as such) so the user keeps their bearings,
        but Copy waits: nothing copies it as if it were what the fields say.
        """
        argv, env = profile_to_argv(self.profile, self.catalog())
        command = render_shell(argv, env, binary=self.profile.binary, multiline=True)
        refusal = self.profile_state.copy_refusal()
        if refusal is None:
            self.preview.setPlainText(command)
            self.preview.setPalette(self._preview_palette)
            self.copy_button.setEnabled(True)
            self.copy_button.setToolTip(_COPY_TIP)
            return
        which = ", ".join(self.profile_state.invalid_fields)
        self.preview.setPlainText(f"# Fix {which} first.\n# The last valid command, for reference:\n"
                                  f"{command}")
        grey = QPalette(self._preview_palette)
        disabled = grey.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
        grey.setColor(QPalette.ColorRole.Text, disabled)
        self.preview.setPalette(grey)
        self.copy_button.setEnabled(False)
        self.copy_button.setToolTip(refusal)

    def set_profile(self, profile: LaunchProfile, name: str | None = None, *, publish: bool = True) -> None:
        """Show a profile in the editor (no widget signals fire) and publish it."""
        self.profile_state.show(profile, name)
        for ed in self.editors.values():
            ed.show(profile)
        self.env_edit.blockSignals(True)
        self.env_edit.setPlainText("\n".join(f"{k}={v}" for k, v in profile.env.items()))
        self.env_edit.blockSignals(False)
        self.extra_edit.setText(shlex.join(profile.extra_args))
        self.all_flags.show_args(profile.extra_args, force=True)
        self.error_label.setText("")
        self._show_program()
        if nul_fields(profile):  # e.g. a version stored before NUL bytes were refused: mark the fields
            self._on_field_edited()
            return
        self._recompute(publish=publish)

    def _on_state_profile_changed(self, profile) -> None:
        """Another view (the Plan's settings) changed the edited profile: show it here, marked modified."""
        if self.profile_state.is_echo(profile):
            return  # our own publication
        self.set_profile(profile, self.current_name, publish=False)

    def current_argv(self) -> list[str]:
        return profile_to_argv(self.profile)[0]

    def _recompute(self, *, publish: bool) -> None:
        p = self.profile
        self._show_preview()
        self.env_flags.setText("; ".join(f"{n} sets {f}"
                                         for n, _v, f in describe_env(p.env, self.catalog()) if f))
        router = self.profile_state.router_line()
        self.router_line.setText(router or "")
        self.router_line.setVisible(router is not None)
        self.profile_state.recompute()  # the advice list and the speed line follow its "advice"
        self.title.set_parts(*self.profile_state.title_parts())
        if publish:
            self.profile_state.publish()
            self.profile_edited.emit(p)

    def _show_advice(self) -> None:
        self.advice_list.clear()
        for row in self.profile_state.advice_rows():
            item = QListWidgetItem(row.text)
            if row.severity is not None:
                item.setForeground(_SEVERITY_COLOUR[row.severity])
            if row.advice_id is not None:
                item.setToolTip(row.tooltip)
                item.setData(Qt.ItemDataRole.UserRole, row.advice_id)
            self.advice_list.addItem(item)
        self.fix_button.setEnabled(self.profile_state.can_fix())

    def _show_speed(self) -> None:
        text = self.profile_state.speed_text()
        self.speed_label.setText(text or "")
        self.speed_label.setVisible(text is not None)

    def _on_state_bench_runs_changed(self) -> None:
        if self.profile_state.speed is not None:
            self.profile_state.speed.load()

    def _on_state_profile_saved(self, _saved) -> None:
        self.reload_names(select=self.current_name)

    # -- the profile's own program (trust) -----------------------------------------------------------
    def _show_program(self, error: str | None = None) -> None:
        self.program_row.show_state(self.profile.binary, self.profile_state.program_state(), error)

    def _on_program_confirmed(self, path: str) -> None:
        try:
            trust_binary(path, self.ctx.settings)  # recorded in settings.json, keyed by path + size + mtime
        except BinaryError as exc:
            self._show_program(str(exc))
            return
        self._show_program()
        self.ctx.state.workspace.post_status(f"{path} confirmed: this profile's launches, benchmarks and "
                                             "checks use it.")

    def _on_program_chosen(self, path: str | None) -> None:
        if path is not None:
            try:
                trust_binary(path, self.ctx.settings)  # picked in a file dialog: the user's own choice
            except BinaryError as exc:
                self._show_program(str(exc))
                return
        self.profile = self.profile.model_copy(update={"binary": path})
        self._show_program()
        self._recompute(publish=True)

    # -- actions ----------------------------------------------------------------------------------
    def _on_copy_clicked(self) -> None:
        argv, env = profile_to_argv(self.profile)
        QGuiApplication.clipboard().setText(render_shell(argv, env, binary=self.profile.binary))
        self.ctx.state.workspace.post_status("Command copied (API key masked).")

    def _on_fix_clicked(self) -> None:
        self.set_profile(self.profile_state.fixed(), self.current_name)

    def _on_paste_clicked(self) -> None:
        dlg = PasteCommandDialog(self.catalog(), self)
        if dlg.exec() and dlg.result is not None:
            self.import_result(dlg.result)

    def import_result(self, result) -> None:
        """Load an imported command into the editor as an unsaved profile."""
        self.library.unselect()
        self.set_profile(result.profile, None)
        self.names_list.blockSignals(True)
        self.names_list.clearSelection()
        self.names_list.setCurrentRow(-1)
        self.names_list.blockSignals(False)
