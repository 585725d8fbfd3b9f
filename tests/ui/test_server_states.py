"""One ServerState, one colour and one set of words in every view: an attached server that stops answering is
"gone", and Live, the status bar and Chat all say so at that moment (red, "not answering"; no "Ready at" left)."""

from __future__ import annotations

import pytest

from llm_tuner.services.supervised import ServerState
from llm_tuner.state.live import STATE_COLOURS
from tests.support.window import open_window


@pytest.fixture
def window(qtbot):
    _ctx, win = open_window(qtbot)
    return win


def test_a_server_that_stops_answering_is_gone_in_live_the_status_bar_and_chat(qtbot, window):
    from tests.support.fake_llama import FakeLlama, raw

    live, chat = window.live_panel, window.chat_panel
    seen: dict[str, tuple[str, str, str, str]] = {}

    def views_at(ev) -> None:  # connected after the panel's own slot: every view has taken the state by now
        seen.setdefault(str(ev.state), (live.state_label.text(), live.message_label.text(),
                                        window.server_state_label.text(), chat.server_label.text()))

    fake = FakeLlama().__enter__()
    try:
        live.attach(fake.url)
        live.bridge.state_changed.connect(views_at)
        qtbot.waitUntil(live.is_ready, timeout=60_000)
        assert chat.url == fake.url and chat.send_button.isEnabled()
    finally:  # it stops answering: the open connection is dropped, new ones are refused
        fake.routes["/health"] = raw(b"")
        fake.close()
    qtbot.waitUntil(lambda: "gone" in seen, timeout=60_000)
    state, message, status, chat_line = seen["gone"]
    red = STATE_COLOURS[ServerState.GONE]
    assert red == "#c62828"
    assert f"color:{red}'>● not answering" in state
    assert "stopped answering" in message and "Ready at" not in message
    assert f"color:{red}'>● not answering" in status and fake.url in status
    assert chat_line.endswith(f"is not answering at {fake.url}: it may have stopped or hung. It is watched a few "
                              "seconds more, then given up.")
    assert "ready" in seen and "#2e7d32" in seen["ready"][0] and "#2e7d32" in seen["ready"][2]  # one colour each
    qtbot.waitUntil(lambda: not live.slot.running, timeout=60_000)  # given up: the attach ends
    assert live.slot.display_state == "exited" and not chat.send_button.isEnabled()


def test_every_state_has_one_colour_and_words():
    from llm_tuner.state.live import ServerSlot

    assert set(STATE_COLOURS) == set(ServerState)
    for state in ServerState:
        slot = ServerSlot(name="s", state=state, url="http://127.0.0.1:1")
        assert slot.running == (state not in (ServerState.IDLE, ServerState.EXITED))
        assert (slot.status_text() == "") == (state is ServerState.READY)
    assert ServerSlot(state=ServerState.STOPPING).running and not ServerState.STOPPING.stoppable
    assert ServerState.GONE.stoppable and ServerState.LOADING.coming_up
