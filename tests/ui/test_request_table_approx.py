"""Issue 22 item 10: attached without a log, a request's token counts come from /slots between two polls (9
reported for 16 generated): every figure of such a row says it is approximate, not only its time."""

from __future__ import annotations

from llm_tuner.core.session import RequestRecord
from llm_tuner.qt.request_table_model import COLUMNS, RequestTableModel


def _row(model, i=0):
    return {title: model.index(i, c).data() for c, (title, _key) in enumerate(COLUMNS)}


def test_approximate_rows_mark_their_token_counts_and_times(qtbot):
    model = RequestTableModel()
    common = {"time_unix": 0.0, "slot": 0, "task": 1, "cache_n": None, "prompt_ms": 20.0, "prompt_per_second": None,
              "predicted_ms": 150.0, "predicted_per_second": 60.0}
    model.extend([RequestRecord(prompt_n=9, predicted_n=9, approximate=True, **common),
                  RequestRecord(prompt_n=16, predicted_n=16, **common)])
    approx, exact = _row(model, 0), _row(model, 1)
    assert approx["Prompt tokens (new)"] == "≈9" and approx["Generated tokens"] == "≈9"
    assert approx["Generation t/s"] == "≈60.00" and approx["Slot"] == "0" and approx["Cached tokens"] == "—"
    assert exact["Prompt tokens (new)"] == "16" and exact["Generated tokens"] == "16"
    tip = model.index(0, 2).data(0x0003)  # ToolTipRole
    assert "Token counts may be" in tip
