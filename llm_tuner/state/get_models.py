"""The Get models dialog's state, its speed part: each listed file's predicted speed on this machine's
devices, from its header and its memory plan (both read before any download), and what the prediction rests
on.

The dialog keeps the listing and the downloads (Qt jobs); this holds what a row's speed cell says, so it is
tested without Qt. Listeners get `notify("speeds")` when every row's speed should be shown again (the basis
arrived or changed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.memory import plan_gpus
from llm_tuner.core.speed import Prediction
from llm_tuner.state.callbacks import Observable
from llm_tuner.state.speed import NOT_YET, SpeedModel, basis_text, roofline_text, speed_figures

SPEED_COLUMN = "Predicted speed (this machine)"
HEADER_PENDING = "…"


class GetModelsState(Observable):
    """What the Get models dialog shows about speed: a cell per file and its tooltip."""

    def __init__(
        self, speed: SpeedModel, inventory: Callable[[], DeviceInventory | None] = lambda: None
    ) -> None:
        super().__init__()
        self.speed = speed
        self.inventory = inventory
        speed.add_callback(lambda *_a: self.notify("speeds"))

    def prediction(self, info: Any, plan: Any) -> Prediction | None:
        """The file's predicted speed with llama-server's defaults on this machine (None: not predictable)."""
        if info is None or plan is None or info.error:
            return None
        inv = self.inventory()
        return self.speed.predict(info, plan, gpus=plan_gpus(inv) if inv is not None else None)

    def basis_line(self) -> str:
        """Under the table: what every predicted speed rests on."""
        return ("Predicted speed: one request, a 512-token prompt, generation at an empty cache, with "
                + basis_text(self.speed.basis)) if self.speed.basis is not None else NOT_YET

    def speed_cell(self, info: Any, plan: Any) -> tuple[str, str]:
        """(cell text, tooltip) of a file's predicted speed: '≈ 41 t/s gen, 900 t/s prefill' and what it is
        calibrated on; '…' while the header or the basis is read, '—' for a file with no plan (a
        projector)."""
        if info is None:
            return HEADER_PENDING, ""
        if plan is None or info.error:
            return "—", ""
        if self.speed.basis is None:
            return HEADER_PENDING, NOT_YET
        pr = self.prediction(info, plan)
        text = speed_figures(pr).split(", TTFT")[0]  # the table is narrow: TTFT in the tooltip
        tip = "\n".join(x for x in (speed_figures(pr), roofline_text(pr), basis_text(self.speed.basis, pr),
                                    "One request, a 512-token prompt, generation at an empty cache, "
                                    "llama-server's defaults (the memory plan's settings)") if x)
        return text, tip


__all__ = ["SPEED_COLUMN", "GetModelsState"]
