"""Quick start strip: the first-run path as numbered buttons above the tabs.

Pick a model → save it as a profile → launch → send a test prompt → benchmark → a second profile
(-ub changed) → benchmark it → compare. Each button does its step through the panels' own actions
(nothing here talks to a server or the store) and shows ✓ once the app's state says the step is done (a
benchmark counts when it completed); a done step stays ticked for the session.
Shown on a first run (no saved profiles and no runs); Help → Quick start shows it again.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout

from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.supervised import ServerState

STEPS = (
    ("model", "1 · Pick a model", "Select a model in the Models list on the left (the demo model is there)"),
    ("profile", "2 · Save profile", "Save the model with default settings as a profile (edit it in the Profile tab)"),
    ("launch", "3 · Launch", "Start llama-server with this profile and watch it in the Live tab"),
    ("prompt", "4 · Send test prompt", "Send one short request: a row appears in Live → Requests"),
    ("bench", "5 · Benchmark", "Measure the profile (prefill and generation speed, TTFT) in the Benchmarks tab"),
    ("second", "6 · Second profile (-ub 256)", "Duplicate the profile with a smaller micro-batch (-ub 256)"),
    ("bench2", "7 · Benchmark it", "Measure the second profile the same way"),
    ("compare", "8 · Compare", "B against A per metric, with a verdict: better, worse or within noise"),
)


class QuickStartBar(QFrame):
    """The numbered first-run steps; `window` is the MainWindow (its panels do the work)."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.setObjectName("quick_start")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.buttons: dict[str, QPushButton] = {}
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        self.hint.setMinimumWidth(220)
        title = QLabel("<b>Quick start</b>")
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Hide the quick start (Help → Quick start shows it again)")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        grid = QGridLayout()  # two rows of four: the strip stays narrow enough for a wide models list
        grid.setHorizontalSpacing(4)
        grid.setVerticalSpacing(2)
        for i, (key, text, tip) in enumerate(STEPS):
            b = QPushButton(text)
            b.setToolTip(tip)
            b.clicked.connect(getattr(self, f"_on_{key}_clicked"))
            self.buttons[key] = b
            grid.addWidget(b, i // 4, i % 4)
        left = QVBoxLayout()
        left.addWidget(title)
        left.addWidget(self.hint, 1)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addLayout(left, 1)
        row.addLayout(grid)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.done: dict[str, bool] = dict.fromkeys(self.buttons, False)
        self._timer = QTimer(self)  # cheap in-memory checks of the panels' state, only while shown
        self._timer.setInterval(500)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start()
        self.refresh()

    # -- state ---------------------------------------------------------------------------------
    def _state(self) -> dict[str, bool]:
        """What the app's state says is done now; refresh() keeps a step done once it was (a later failed
        launch does not undo a launch that worked)."""
        w = self.window
        ctx = w.ctx
        n_profiles = w.profile_panel.names_list.count()
        history = w.bench_panel.history_model
        # only finished runs count: a run still going (or failed, cancelled) has not measured anything yet
        complete = {history.payload(i).label for i in range(history.rowCount())
                    if history.payload(i).status == "complete"}
        live = w.live_panel
        return {
            "model": ctx.state.model_path is not None or ctx.state.profile is not None and bool(ctx.state.profile.model),
            "profile": n_profiles >= 1,
            "launch": any(s.server_state is ServerState.READY or s.records for s in live.servers()),
            "prompt": any(s.records for s in live.servers()),
            "bench": len(complete) >= 1,
            "second": n_profiles >= 2,
            "bench2": len(complete) >= 2,  # a second profile measured, not the first one twice
            "compare": w.compare_panel.run_b is not None,
        }

    def _on_timer_timeout(self) -> None:
        if self.isVisible():
            self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        self.refresh()
        super().showEvent(event)

    def refresh(self) -> None:
        self.done = {k: self.done.get(k, False) or now for k, now in self._state().items()}
        next_key = next((k for k, _t, _tip in STEPS if not self.done[k]), None)
        for key, text, _tip in STEPS:
            b = self.buttons[key]
            b.setText(("✓ " if self.done[key] else "") + text)
            font = b.font()
            font.setBold(key == next_key)
            b.setFont(font)
        tip = dict((k, t) for k, _x, t in STEPS)
        self.hint.setText(f"Next: {tip[next_key]}." if next_key else
                          "Done: you benchmarked and compared two profiles. Try your own models (Models → "
                          "Add folder…) and flags; every run stays in Benchmarks → History.")

    def say(self, text: str) -> None:
        self.hint.setText(text)

    # -- steps ---------------------------------------------------------------------------------
    def _on_model_clicked(self) -> None:
        w = self.window
        demo = find_demo_model()
        if demo is not None and w.models_panel.select_path(str(demo)):
            w.ctx.state.workspace.post_status(f"Selected the demo model {demo.name}.")
        elif demo is not None:
            w.ctx.state.select_model(demo)
        else:
            self.say("No demo model: add a folder with .gguf files in the Models list (Add folder…), then "
                     "click a model.")
        w.tabs.setCurrentWidget(w.profile_panel)

    def _on_profile_clicked(self) -> None:
        w = self.window
        p = w.profile_panel
        if not p.profile.model:
            self.say("Pick a model first (step 1).")
            return

        if p.current_name is None:
            p.save_as(p.unique_name(Path(p.profile.model).stem))
        else:
            p.save_as(p.current_name)
        w.tabs.setCurrentWidget(p)

    def _on_launch_clicked(self) -> None:
        w = self.window
        w.tabs.setCurrentWidget(w.live_panel)
        w.live_panel.start()

    def _on_prompt_clicked(self) -> None:
        w = self.window
        w.tabs.setCurrentWidget(w.live_panel)
        live = w.live_panel
        if not live.is_ready():
            self.say("Launch a server first (step 3) and wait until it is ready.")
            return
        live.send_test_prompt()
        live.tabs.setCurrentIndex(live.tabs.indexOf(live.request_table.parentWidget()))

    def _on_bench_clicked(self) -> None:
        w = self.window
        w.run_benchmark()

    def _on_second_clicked(self) -> None:
        w = self.window
        p = w.profile_panel
        if p.current_name is None:
            self.say("Save a first profile (step 2), then duplicate it.")
            return
        w.tabs.setCurrentWidget(p)
        p.duplicate(p.unique_name(f"{p.current_name} ub256"))
        editor = p.editors.get("ubatch_size")
        if editor is not None:
            editor.widget.setText("256")
            p._on_field_edited()
            p.save_as(p.current_name)
        self.say("Saved a copy with -ub 256. Benchmark it (step 7), then Compare.")

    def _on_bench2_clicked(self) -> None:
        self._on_bench_clicked()

    def _on_compare_clicked(self) -> None:
        w = self.window
        c = w.compare_panel
        w.tabs.setCurrentWidget(c)
        c.by_runs.setChecked(True)
        c.compare_button.click()


