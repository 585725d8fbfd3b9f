"""Plan panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class PlanPanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Plan", "Memory per device (weights, KV cache, compute) appears here for the selected model and profile.", parent)
        self.ctx = ctx
