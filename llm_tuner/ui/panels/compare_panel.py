"""Compare panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class ComparePanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Compare", "Pick two runs or two profiles to compare, with the spread that says whether a difference is real.", parent)
        self.ctx = ctx
