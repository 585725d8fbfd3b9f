"""Models panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class ModelsPanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Models", "Add your model folders in Settings; the demo model is listed once installed.", parent)
        self.ctx = ctx
