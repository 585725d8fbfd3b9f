"""Quick start strip: the first-run path as numbered buttons above the tabs.

Pick a model → save it as a profile → launch → send a test prompt → benchmark → a second profile
(-ub changed) → benchmark it → compare. Each button asks the view that owns its step through a workspace
request (nothing here talks to a server or the store, or reaches into a panel: tests/unit/
test_panel_wiring.py) and shows ✓ once the workspace says the step is done (a benchmark counts when it
completed); a done step stays ticked for the session.
Shown on a first run (no saved profiles and no runs); Help → Quick start shows it again.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.supervised import ServerState
from llm_tuner.state.workspace import Workspace

STEPS = (
    ("model", "1 · Pick a model", "Select a model in the Models list on the left (the demo model is there)"),
    ("profile", "2 · Save profile", "Save the model with default settings as a profile (edit it in the Profile tab)"),
    ("launch", "3 · Launch", "Start llama-server with this profile and watch it in the Live tab"),
    ("prompt", "4 · Send test prompt", "Send one short request: a row appears in Live → Requests"),
    ("bench", "5 · Benchmark", "Measure the profile (prefill and generation speed, TTFT) in the Benchmarks tab"),
    ("second", "6 · Second profile (-ub 256)", "Duplicate the profile with a smaller micro-batch (-ub 256)"),
    ("bench2", "7 · Benchmark it", "Measure the second profile the same way"),
    ("compare", "8 · Compare", "B against A per metric, with a verdict: better, worse, within noise or "
                               "inconclusive (too few repetitions to tell)"),
)


class QuickStartBar(QFrame):
    """The numbered first-run steps: read from the workspace, done through its requests; `show_view(title)`
    brings a tab to the front (the window owns the tabs)."""

    def __init__(self, workspace: Workspace, show_view: Callable[[str], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.show_view = show_view
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
        """What the workspace says is done now; refresh() keeps a step done once it was (a later failed
        launch does not undo a launch that worked)."""
        ws = self.workspace
        n_profiles = len(ws.profile_names)
        # only finished runs count: a run still going (or failed, cancelled) has not measured anything yet
        measured = {label for _id, label in ws.complete_runs}
        return {
            "model": ws.model_path is not None or ws.profile is not None and bool(ws.profile.model),
            "profile": n_profiles >= 1,
            "launch": any(s.server_state is ServerState.READY or s.records for s in ws.servers),
            "prompt": any(s.records for s in ws.servers),
            "bench": len(measured) >= 1,
            "second": n_profiles >= 2,
            "bench2": len(measured) >= 2,  # a second profile measured, not the first one twice
            "compare": ws.compared is not None,
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
        demo = find_demo_model()
        if demo is not None:
            self.workspace.request_select_model(demo)
        else:
            self.say("No demo model: add a folder with .gguf files in the Models list (Add folder…), then "
                     "click a model.")
        self.show_view("Profile")

    def _on_profile_clicked(self) -> None:
        profile = self.workspace.profile
        if profile is None or not profile.model:
            self.say("Pick a model first (step 1).")
            return
        self.workspace.request_save_profile()
        self.show_view("Profile")

    def _on_launch_clicked(self) -> None:
        self.show_view("Live")
        self.workspace.request_launch()

    def _on_prompt_clicked(self) -> None:
        self.show_view("Live")
        server = self.workspace.server
        if server is None or server.server_state is not ServerState.READY:
            self.say("Launch a server first (step 3) and wait until it is ready.")
            return
        self.workspace.request_test_prompt()

    def _on_bench_clicked(self) -> None:
        self.show_view("Benchmarks")
        self.workspace.request_benchmark()  # Run waits for a profile save still on its way to the store

    def _on_second_clicked(self) -> None:
        if self.workspace.profile_name is None:
            self.say("Save a first profile (step 2), then duplicate it.")
            return
        self.show_view("Profile")
        self.workspace.request_profile_variant("ub256", {"ubatch_size": 256})
        self.say("Saved a copy with -ub 256. Benchmark it (step 7), then Compare.")

    def _on_bench2_clicked(self) -> None:
        self._on_bench_clicked()

    def _on_compare_clicked(self) -> None:
        self.show_view("Compare")
        self.workspace.request_compare_newest()
