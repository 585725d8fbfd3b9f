"""Benchmarks panel."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from llm_tuner.qt.context import AppContext
from llm_tuner.ui.panels.placeholder import HintPanel


class BenchPanel(HintPanel):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Benchmarks", "Benchmark a profile on the real server path; every run is kept in the history.", parent)
        self.ctx = ctx
