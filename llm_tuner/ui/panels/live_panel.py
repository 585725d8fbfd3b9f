"""Live panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class LivePanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Live", "Launch a profile to watch the server: health, GPU plots and every request.", parent)
        self.ctx = ctx
