"""PasteState without Qt (the Paste command dialog, issue 36): a pasted command read as a profile with its
report, Import refused for an empty, huge, NUL-holding or wrong paste, one reading at a time, a reading of
older text dropped and the newest read after it. The default flag catalog of the tested build."""

from __future__ import annotations

from llm_tuner.core.cmdline import PASTE_LIMIT_CHARS
from llm_tuner.services.binaries import default_catalog
from llm_tuner.state.callbacks import declared, run_now
from llm_tuner.state.paste_command import NOTHING_YET, PasteState
from tests.support.held_run import Held


def _state(run=run_now) -> tuple[PasteState, list[str]]:
    state = PasteState(default_catalog(), run=run)
    said: list[str] = []
    state.add_callback(lambda what, *_d: said.append(what))
    return state, said


def test_a_command_is_read_with_its_report_and_can_be_imported():
    state, said = _state()
    assert set(declared(PasteState)) == {"result", "report"} and state.report == NOTHING_YET
    state.edited()
    state.read_text("llama-server -m m.gguf -c 4096 -fa maybe -tbq 4")
    assert state.result is not None and state.result.profile.ctx_size == 4096 and "read" in said
    refused, _, unknown = state.report.partition("Not known to this llama-server")
    assert "Understood as" in refused and "-fa takes on|off|auto" in refused
    assert "<code>-tbq 4</code>" in unknown
    state.edited()  # the text changed: Import waits for its reading
    assert state.result is None


def test_an_empty_huge_nul_or_wrong_paste_is_not_importable():
    state, _said = _state()
    state.read_text("   ")
    assert state.result is None and state.report == NOTHING_YET
    state.edited()
    state.read_text("-m m.gguf " + "a" * PASTE_LIMIT_CHARS)
    assert state.result is None and state.report.startswith("<b>Not read:</b>")
    state.edited()
    state.read_text("llama-server -m 'a\0b.gguf'")
    assert state.result is None and "NUL byte" in state.report
    state.edited()
    state.read_text("echo hello")  # no model, no flag: as `profile import` exits 2
    assert state.result is None and state.report.startswith("<b>Not importable:</b>")


def test_one_reading_at_a_time_and_the_newest_text_is_read_after_a_stale_one():
    run = Held()
    state, said = _state(run)
    state.edited()
    state.read_text("llama-server -m m.gguf -c 4096")
    state.edited()  # typed on while it was read
    state.read_text("llama-server -m m.gguf -c 40960")  # waits: one reading at a time
    assert len(run.asked) == 1 and state.reading
    run.answer(0)  # the older text's answer: dropped, and the newest is to be read
    assert state.result is None and said[-1] == "stale" and not state.reading
    state.read_text("llama-server -m m.gguf -c 40960")
    run.answer(1)
    assert state.result.profile.ctx_size == 40960 and said[-1] == "read"


def test_a_reading_that_fails_says_why():
    def broken(_text, _catalog):
        raise ValueError("no closing quotation")

    state = PasteState(default_catalog(), read=broken)
    state.edited()
    state.read_text("llama-server -m 'm.gguf")
    assert state.result is None and state.report == "<b>Could not read the text:</b> no closing quotation"
