"""The Plan's predicted speed, beside the memory bars: prefill and generation t/s and TTFT, what they are
calibrated on, generation against the depth (a small curve) and the fit solver's answers ranked by predicted
speed. Everything it shows is read from llm_tuner.state.plan.PlanState (prediction, speed_curve,
speed_options) and worded by llm_tuner.state.speed."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QGroupBox, QLabel, QVBoxLayout, QWidget

from llm_tuner.state.plan import PlanState
from llm_tuner.state.speed import basis_text, roofline_text, speed_figures
from llm_tuner.ui.plots.speed_curve import SpeedCurve


class PlanSpeedBox(QGroupBox):
    """Predicted speed of the plan (one request, prompt 512 tokens, generation at an empty cache)."""

    def __init__(self, state: PlanState, parent: QWidget | None = None) -> None:
        super().__init__("Predicted speed", parent)
        self.state = state
        lay = QVBoxLayout(self)
        self.figures_label = QLabel()  # '≈ 38 t/s gen, 900 t/s prefill, TTFT 0.57 s'
        self.figures_label.setWordWrap(True)
        lay.addWidget(self.figures_label)
        self.basis_label = QLabel()  # what it is calibrated on, ±error
        self.basis_label.setWordWrap(True)
        self.basis_label.setStyleSheet("color: palette(placeholder-text)")
        lay.addWidget(self.basis_label)
        self.curve = SpeedCurve()
        self.curve.setToolTip("Predicted generation speed as the cache fills: each generated token reads the "
                              "K/V cache up to its depth (the band: the expected error)")
        lay.addWidget(self.curve)
        self.options_label = QLabel()  # the solver's answers ranked by predicted speed
        self.options_label.setWordWrap(True)
        lay.addWidget(self.options_label)
        self.setMinimumWidth(300)

    def refresh(self) -> None:
        st = self.state
        pr = st.prediction()
        if st.plan is None:
            self.figures_label.setText("")
            self.basis_label.setText("")
            self.curve.set_curve([])
            self.options_label.setText("")
            return
        roof = roofline_text(pr)
        self.figures_label.setText(f"<b>{html.escape(speed_figures(pr))}</b>"
                                   + (f"<br>{html.escape(roof)}" if roof else ""))
        self.basis_label.setText(html.escape(basis_text(st.speed.basis, pr)))
        self.curve.set_curve(st.speed_curve(), pr.error if pr is not None else None)
        opts = st.speed_options()
        if len(opts) > 1:
            rows = [f"{i}. {html.escape(o.label)}" + (f" ({html.escape(o.args_text)})" if o.goal else "")
                    + f": {html.escape(speed_figures(o.prediction))}" for i, o in enumerate(opts, 1)]
            self.options_label.setText("<b>The fit solver's answers by predicted speed</b> (its buttons "
                                       "apply them):<br>" + "<br>".join(rows))
        elif opts and st.gpus():
            self.options_label.setText(
                "The settings as they are place the model as fast as the fit solver can.")
        else:
            self.options_label.setText("")
