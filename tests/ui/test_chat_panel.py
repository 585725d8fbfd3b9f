"""The Chat tab on the real llama-server with the tiny random model (what the tab does, not what a model says): replies,
their speed rows (the same figures the Requests table shows), several turns, Copy, Clear, the web UI's address, and
what it says without a server. That a reply streams, and that Stop ends it, is checked against a server made to
stream at the test's pace (tests/support/fake_llama.chat_stream): the tiny model answers faster than a busy machine
paints, so its reply may well arrive in one batch. Stops are awaited on the server's exit event, generously."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication

from tests.support.window import open_window


class _Browser(QObject):
    """Stands where the desktop's browser would: QDesktopServices hands it the URLs "Open web UI" opens."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


@pytest.fixture
def window(qtbot):
    _ctx, win = open_window(qtbot)
    yield win
    if win.live_panel.slot.running:
        _stop_server(qtbot, win.live_panel)


def _stop_server(qtbot, live) -> None:
    """Stop the shown server and wait for its exit event (a stop may take SIGINT's, then SIGTERM's timeout)."""
    from llm_tuner.services.supervised import ServerState

    with qtbot.waitSignal(live.bridge.state_changed, timeout=120_000,
                          check_params_cb=lambda ev: ev.state is ServerState.EXITED):
        live.stop_server()


def _reply(qtbot, chat, text: str, timeout: int = 240_000):
    batches = []
    chat.session.text_received.connect(lambda t, _r: batches.append(t))
    with qtbot.waitSignal(chat.session.reply_finished, timeout=timeout) as done:
        chat.input_edit.setPlainText(text)
        chat.send_button.click()
        assert chat.stop_button.isEnabled() and not chat.send_button.isEnabled()
    return done.args[0], batches


@pytest.mark.server
def test_chat_streams_replies_with_the_servers_own_figures(qtbot, window, tiny_model):
    live, chat = window.live_panel, window.chat_panel
    assert window.tabs.tabText(window.tabs.indexOf(chat)) == "Chat"
    assert chat.server_label.text().startswith("No server is running") and not chat.send_button.isEnabled()

    key = "chat-test-key-9f3a"
    live.args_edit.setText(f"-m {tiny_model} -c 2048 -np 1 -t 2 -n 24 --temp 0.5 --api-key {key}")
    assert live.start()
    qtbot.waitUntil(live.is_ready, timeout=120_000)
    window.tabs.setCurrentWidget(chat)
    assert chat.url == live.slot.url and chat.send_button.isEnabled()
    qtbot.waitUntil(lambda: "temperature" in chat.sampling_label.text(), timeout=20_000)
    assert "temperature 0.5 ·" in chat.sampling_label.text()  # the server's defaults: its command line's
    assert "no chat template" in chat.template_label.text()  # the tiny model has none: the note says why replies are odd

    # One reply: all of what streamed is shown; the speed row under it is the server's own timings of the request.
    chat.system_edit.setPlainText("You are a helpful assistant. Answer briefly.")
    reply, batches = _reply(qtbot, chat, "Name three colours of the rainbow.")
    assert not reply.cancelled and reply.text.strip() and reply.record is not None
    assert batches and "".join(batches) == reply.text  # every piece reached the view, in order
    transcript = chat.transcript.toPlainText()
    assert "Name three colours of the rainbow." in transcript and reply.text.strip()[:20] in transcript
    rec = reply.record
    row = re.search(r"prompt (\d+) tokens at ([\d.]+) t/s · generation (\d+) tokens at ([\d.]+) t/s · TTFT (\d+) ms",
                    transcript)
    assert row, transcript
    assert (int(row[1]), int(row[3])) == (rec.prompt_n, rec.predicted_n) and rec.predicted_n > 1
    assert row[4] == f"{rec.predicted_per_second:.2f}"

    # The Requests table has the same request from the server's log, with the same figures.
    qtbot.waitUntil(lambda: live.request_model.rowCount() == 1, timeout=20_000)
    logged = live.request_model.records[0]
    assert (logged.prompt_n, logged.predicted_n) == (rec.prompt_n, rec.predicted_n)
    assert f"{logged.predicted_per_second:.2f}" == f"{rec.predicted_per_second:.2f}"
    # the log prints milliseconds to 2 decimals: 4.50 there is 4.5004 in the reply (whole ms would differ by one)
    assert logged.ttft_ms == pytest.approx(rec.ttft_ms, abs=0.01)

    # A second turn goes with the first: the server reuses the conversation's cached prefix.
    reply2, _ = _reply(qtbot, chat, "And one more?")
    assert [m["role"] for m in chat.session.messages] == ["user", "assistant", "user", "assistant"]
    assert reply2.record.cache_n and reply2.record.cache_n > rec.prompt_n // 2
    assert "cached)" in chat.transcript.toPlainText()

    chat.copy_button.click()
    assert QGuiApplication.clipboard().text() == reply2.text

    # Open web UI: this build has no web page ("/" answers 404, though /props says the UI is on): the button says so.
    assert not chat.web_button.isEnabled() and "has no web page" in chat.web_button.toolTip()

    chat.clear_button.click()
    assert chat.transcript.toPlainText() == "" and chat.session.messages == [] and not chat.copy_button.isEnabled()

    # The server stops: the chat says so and sends nothing.
    _stop_server(qtbot, live)
    assert "is not running (exited)" in chat.server_label.text()
    assert not chat.send_button.isEnabled()
    assert not chat.send("hello?")


@pytest.mark.server
def test_chat_with_a_router_picks_its_model_and_names_it(qtbot, window, tiny_model, tmp_path):
    """A router (two links to the tiny model in a folder) refuses a chat that names no model: the Chat tab's picker
    lists the router's models from Live, the question names the one picked, and its speed row says which."""
    live, chat = window.live_panel, window.chat_panel
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "first.gguf").symlink_to(tiny_model)
    (folder / "second.gguf").symlink_to(tiny_model)
    live.args_edit.setText(f"--models-dir {folder} --models-max 1 -c 512 -np 1 -t 2 -n 8")
    assert live.start()
    qtbot.waitUntil(lambda: chat.model_combo.count() == 2, timeout=120_000)
    assert [chat.model_combo.itemData(i) for i in range(2)] == ["first", "second"]
    assert chat.model_combo.itemText(1) == "second (unloaded)" and not chat.model_combo.isHidden()
    qtbot.waitUntil(lambda: "each model's own defaults" in chat.sampling_label.text(), timeout=20_000)
    chat.model_combo.setCurrentIndex(1)
    assert chat.picked_model() == "second" and chat.send_button.isEnabled()

    reply, batches = _reply(qtbot, chat, "Say hello.")
    assert not reply.cancelled and reply.text.strip() and "".join(batches) == reply.text
    assert reply.record is not None and reply.record.model == "second" and reply.record.predicted_n >= 1
    transcript = chat.transcript.toPlainText()
    assert f"{live.slot.name} · second" in transcript  # the reply's heading names the model
    row = re.search(r"model second · prompt (\d+) tokens at [\d.]+ t/s · generation (\d+) tokens at", transcript)
    assert row, transcript
    assert (int(row[1]), int(row[2])) == (reply.record.prompt_n, reply.record.predicted_n)

    # The router loaded the model for the question: the picker follows Live's list and keeps the choice.
    qtbot.waitUntil(lambda: chat.model_combo.itemText(1) == "second (loaded)", timeout=30_000)
    assert chat.picked_model() == "second"
    qtbot.waitUntil(lambda: live.request_model.rowCount() == 1, timeout=20_000)
    assert live.request_model.records[0].model == "second"
    _stop_server(qtbot, live)  # here, not in the fixture: pytest-qt closes the window before fixtures end


def test_a_reply_streams_piece_by_piece_and_stop_ends_it_with_what_arrived(qtbot):
    """A server that streams at the test's pace: the first piece is shown before the server sends the second (so
    the reply streams, whatever the machine's load), the speed row follows the last; Stop ends a reply the server
    holds open, with what arrived, and the next question can be asked."""
    import threading

    from llm_tuner.ui.panels.chat_panel import ChatPanel
    from tests.support.fake_llama import GOOD_TIMINGS, FakeLlama, chat_stream

    gates = [threading.Event(), threading.Event()]
    with FakeLlama(routes={"/v1/chat/completions": chat_stream(["Red, ", "green ", "and blue."], gates)}) as fake:
        chat = ChatPanel()
        qtbot.addWidget(chat)
        chat.set_server("slow", fake.url, None)
        batches: list[str] = []

        def on_text(text: str, _reasoning: str) -> None:
            batches.append(text)
            if len(batches) <= len(gates):
                gates[len(batches) - 1].set()  # the server sends the next piece only once this one was shown

        chat.session.text_received.connect(on_text)
        with qtbot.waitSignal(chat.session.reply_finished, timeout=120_000) as done:
            assert chat.send("Name three colours.")
        reply = done.args[0]
        assert batches == ["Red, ", "green ", "and blue."] and reply.text == "Red, green and blue."
        assert not reply.cancelled and reply.record.predicted_n == GOOD_TIMINGS["predicted_n"]
        assert "Red, green and blue." in chat.transcript.toPlainText() and "generation 8 tokens" in \
            chat.transcript.toPlainText()

        held = [threading.Event()]  # never set: the server holds the reply open after its first piece
        fake.routes["/v1/chat/completions"] = chat_stream(["Once upon ", "a time"], held)
        chat.session.text_received.disconnect(on_text)
        first: list[str] = []
        chat.session.text_received.connect(lambda t, _r: first.append(t))
        with qtbot.waitSignal(chat.session.reply_finished, timeout=120_000) as stopped:
            assert chat.send("Tell me a long story.")
            qtbot.waitUntil(lambda: bool(first), timeout=120_000)
            chat.stop_button.click()
        assert stopped.args[0].cancelled and stopped.args[0].text == "Once upon "
        assert chat.transcript.toPlainText().rstrip().endswith("Stopped.")
        assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()
        assert [m["role"] for m in chat.session.messages] == ["user", "assistant", "user", "assistant"]


def test_without_a_server_the_chat_says_what_to_do(qtbot):
    from llm_tuner.ui.panels.chat_panel import ChatPanel

    chat = ChatPanel()
    qtbot.addWidget(chat)
    assert "Start one in the Live tab" in chat.server_label.text()
    assert not chat.send_button.isEnabled() and not chat.web_button.isEnabled()
    assert not chat.send("hello")
    assert chat.transcript.toPlainText() == ""


def test_a_server_that_refuses_says_so_and_the_question_can_be_asked_again(qtbot):
    """A wrong API key: the server's 401 in words, and the unanswered question leaves the history."""
    from llm_tuner.ui.panels.chat_panel import ChatPanel
    from tests.support.fake_llama import FakeLlama, json_route

    refuse = json_route({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}},
                        code=401)
    with FakeLlama(routes={"/v1/chat/completions": refuse, "/props": refuse}) as fake:
        chat = ChatPanel()
        qtbot.addWidget(chat)
        chat.set_server("attached", fake.url, "wrong-key")
        with qtbot.waitSignal(chat.session.reply_failed, timeout=20_000):
            assert chat.send("hello")
        qtbot.waitUntil(lambda: "did not say" in chat.sampling_label.text(), timeout=20_000)
    assert "needs an API key" in chat.message_label.text() and chat.session.messages == []
    assert chat.transcript.toPlainText().rstrip().endswith("No reply.") and chat.send_button.isEnabled()


def test_open_web_ui_opens_the_address_only_and_says_the_page_asks_for_the_key(qtbot):
    from llm_tuner.ui.panels.chat_panel import ChatPanel
    from tests.support.fake_llama import FakeLlama

    def page(h, _body):  # llama-server with its web page: "/" answers (HEAD here)
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", "0")
        h.end_headers()

    key = "sk-web-ui-secret"
    with FakeLlama(routes={"/": page}) as fake:
        chat = ChatPanel()
        qtbot.addWidget(chat)
        chat.set_server("fake", fake.url, key)
        qtbot.waitUntil(lambda: "Sampling" in chat.sampling_label.text() and "asking" not in
                        chat.sampling_label.text(), timeout=20_000)
    assert chat.web_button.isEnabled()
    assert "asks for it" in chat.web_button.toolTip() and key not in chat.web_button.toolTip()
    browser = _Browser()
    QDesktopServices.setUrlHandler("http", browser, "open")
    try:
        chat.web_button.click()
    finally:
        QDesktopServices.unsetUrlHandler("http")
    assert browser.opened == [fake.url + "/"] and key not in browser.opened[0]


def test_the_model_picker_shows_for_a_router_only_and_needs_a_model(qtbot):
    from llm_tuner.core.server_endpoints import RouterModel
    from llm_tuner.services.router_watch import RouterModels
    from llm_tuner.state.chat import NO_ROUTER_MODEL
    from llm_tuner.ui.panels.chat_panel import ChatPanel
    from tests.support.fake_llama import FakeLlama

    with FakeLlama() as fake:
        chat = ChatPanel()
        qtbot.addWidget(chat)
        chat.set_server("router", fake.url, None)
        assert chat.model_combo.isHidden() and chat.picked_model() is None and chat.send_button.isEnabled()
        chat.set_router_models(RouterModels(()))  # a router that lists no models: nothing to ask
        assert not chat.model_combo.isHidden() and not chat.send_button.isEnabled()
        assert chat.message_label.text() == NO_ROUTER_MODEL and not chat.send("hello")
        chat.set_router_models(RouterModels((RouterModel("a", "unloaded"), RouterModel("b", "loaded"))))
        chat.model_combo.setCurrentIndex(1)
        assert chat.picked_model() == "b" and chat.send_button.isEnabled() and chat.message_label.text() == ""
        chat.set_router_models(RouterModels((RouterModel("b", "unloaded"),)))  # the picked one stays picked
        assert chat.picked_model() == "b" and chat.model_combo.currentText() == "b (unloaded)"
        chat.set_router_models(None)  # the server serves one model again
        assert chat.model_combo.isHidden() and chat.picked_model() is None
        qtbot.waitUntil(lambda: "asking" not in chat.sampling_label.text(), timeout=20_000)


@pytest.mark.server
def test_a_reply_has_a_length_limit_that_says_where_it_comes_from(qtbot, window, tiny_model):
    """Issue 35 item 15: a model without a chat template runs on for minutes; the Chat has its own reply limit
    (sent with each question) and names the server's own limit (-n) beside it."""
    live, chat = window.live_panel, window.chat_panel
    live.args_edit.setText(f"-m {tiny_model} -c 2048 -np 1 -t 2 -n 300 --temp 0")
    assert live.start()
    qtbot.waitUntil(live.is_ready, timeout=120_000)
    assert "300" in chat.limit_spin.toolTip() and "-n" in chat.limit_spin.toolTip()  # the server's own cap
    assert chat.limit_spin.value() > 0  # on by default
    chat.limit_spin.setValue(6)
    reply, _ = _reply(qtbot, chat, "Tell me everything.")
    assert reply.finish_reason == "length" and reply.record.predicted_n == 6
    assert "6-token reply limit" in chat.message_label.text()
    _stop_server(qtbot, live)  # here, not in the fixture: pytest-qt closes the window before fixtures end


@pytest.mark.server
def test_stop_waits_until_the_server_has_let_go_of_the_reply(qtbot, window, demo_model):
    """Issue 35 item 15: closing the connection does not stop a server reading a long prompt: it finishes the step it
    is on (seconds on a CPU). Stop says it is stopping, and "Stopped" comes once the server's slot is free."""
    from llm_tuner.services.client import LlamaClient

    live, chat = window.live_panel, window.chat_panel
    live.args_edit.setText(f"-m {demo_model} -c 4096 -np 1 -t 2")
    assert live.start()
    qtbot.waitUntil(live.is_ready, timeout=120_000)
    qtbot.waitUntil(lambda: "temperature" in chat.sampling_label.text(), timeout=20_000)
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 250  # ~2,500 tokens: seconds to read
    with qtbot.waitSignal(chat.session.reply_finished, timeout=240_000) as stopped:
        assert chat.send(long_prompt)
        qtbot.wait(500)  # the server is reading the prompt
        chat.stop_button.click()
        assert "Stopping" in chat.message_label.text() and not chat.stop_button.isEnabled()
        assert not chat.send_button.isEnabled()  # the next question would wait behind it anyway
    with LlamaClient(live.slot.url, timeout=10) as client:
        assert not any(s.get("is_processing") for s in client.slots())  # "Stopped" is true: the server is free
    assert stopped.args[0].cancelled
    assert "Stopped" in chat.transcript.toPlainText().splitlines()[-1]
    assert chat.send_button.isEnabled() and "Stopping" not in chat.message_label.text()
    _stop_server(qtbot, live)  # here, not in the fixture: pytest-qt closes the window before fixtures end
