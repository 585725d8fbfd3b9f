"""Profile panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class ProfilePanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Profile", "Pick a model, then edit its launch profile here.", parent)
        self.ctx = ctx
