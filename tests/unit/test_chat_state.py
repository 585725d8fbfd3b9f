"""ChatState without Qt: the Live slot it follows (real ServerSlots and launch plans), a router's models and the
one picked, the reply limit each question carries, what the server's /props says, the notes under replies and
which controls act."""

from __future__ import annotations

from llm_tuner.core.server_endpoints import RouterModel
from llm_tuner.core.session import RequestRecord
from llm_tuner.services.chat import ChatReply, stop_text
from llm_tuner.services.launch import plan_launch
from llm_tuner.services.router_watch import RouterModels
from llm_tuner.services.supervised import ServerState
from llm_tuner.state.chat import ASKING, NO_ROUTER_MODEL, NO_SERVER, STOPPING, ChatState
from llm_tuner.state.live import ServerSlot

URL = "http://127.0.0.1:8080"


def _ready(name: str = "gemma", url: str = URL, args: tuple[str, ...] = ("-m", "x.gguf"), *,
           router: RouterModels | None = None) -> ServerSlot:
    plan = plan_launch("llama-server", list(args), watch=False, base_env={})
    return ServerSlot(name=name, plan=plan, state=ServerState.READY, url=url, router_models=router)


def _told(state: ChatState) -> list[str]:
    events: list[str] = []
    state.add_callback(lambda what, *d: events.append(what))
    return events


def test_it_follows_the_live_slot_and_says_why_it_cannot_chat():
    state = ChatState()
    told = _told(state)
    assert state.server_line == NO_SERVER and state.url is None
    assert not state.show_server(None)
    assert state.ask("hello", busy=False) is None  # no server: nothing goes
    loading = ServerSlot(name="gemma", state=ServerState.LOADING, url=URL)
    assert not state.show_server(loading)  # not ready: no address to talk to, the slot's own words
    assert state.server_line == loading.status_text() and state.server_line
    assert state.show_server(_ready()) and state.url == URL  # ready: its /props is to be read
    assert state.server_line == f"Chat with gemma · {URL}" and state.sampling_text == ASKING
    assert {"server", "props"} <= set(told)
    assert not state.show_server(_ready())  # the same server again: nothing to read


def test_a_question_carries_the_lower_of_the_chats_limit_and_the_servers():
    state = ChatState(reply_limit=512)
    state.show_server(_ready(args=("-m", "x.gguf", "-n", "300")))
    assert state.server_limit == 300 and "300 tokens (-n in its profile)" in state.limit_tip
    ask = state.ask("  Name three colours.  ", busy=False)
    assert ask is not None and ask.question == "Name three colours." and ask.max_tokens == 300
    state.reply_limit = 100
    assert state.ask("again", busy=False).max_tokens == 100
    state.reply_limit = 0  # none of its own: the server's
    assert state.ask("again", busy=False).max_tokens == 300
    assert state.ask("again", busy=True) is None and state.ask("   ", busy=False) is None
    attached = ServerSlot(name="there", state=ServerState.READY, url="http://127.0.0.1:9000")  # no plan: not known
    state.show_server(attached)
    assert state.server_limit is None and "not known here" in state.limit_tip
    assert state.ask("x", busy=False).max_tokens is None


def test_a_router_needs_a_model_and_the_picked_one_stays_picked():
    state = ChatState()
    told = _told(state)
    state.show_server(_ready(router=RouterModels(())))
    assert state.router_items == [] and state.no_model and state.message == (NO_ROUTER_MODEL, True)
    assert state.ask("hi", busy=False) is None
    assert not state.controls(busy=False, stopping=False, transcript_empty=True).send
    state.set_router_models(RouterModels((RouterModel("a", "unloaded"), RouterModel("b", "loaded"))))
    assert state.picked_model == "a" and state.message == ("", False) and "models" in told
    state.pick("b")
    assert not state.set_router_models(RouterModels((RouterModel("a", "unloaded"), RouterModel("b", "loaded"))))
    state.set_router_models(RouterModels((RouterModel("b", "unloaded"),)))
    assert state.picked_model == "b" and state.router_items == [("b", "unloaded")]
    ask = state.ask("hi", busy=False)
    assert ask.model == "b" and state.reply_author(ask) == "gemma · b"
    state.set_router_models(None)  # one model again: the question names none
    assert state.picked_model is None and state.ask("hi", busy=False).model is None


def test_talking_to_another_server_says_so_once():
    state = ChatState()
    state.show_server(_ready())
    assert state.sent(state.ask("one", busy=False)) is None  # the first question: nobody before
    assert state.sent(state.ask("two", busy=False)) is None
    state.show_server(_ready("qwen", "http://127.0.0.1:8081"))
    note = state.sent(state.ask("three", busy=False))
    assert note == "Now chatting with qwen (http://127.0.0.1:8081); the conversation so far goes along."
    state.cleared()  # a new conversation: nobody before again
    assert state.sent(state.ask("four", busy=False)) is None and state.last_reply is None


def test_the_note_under_a_reply_and_the_limit_that_cut_it():
    state = ChatState(reply_limit=64)
    state.show_server(_ready(args=("-m", "x.gguf", "-n", "64")))
    record = RequestRecord.from_timings({"prompt_n": 12, "prompt_ms": 30.0, "predicted_n": 64, "predicted_ms": 800.0,
                                         "prompt_per_second": 400.0, "predicted_per_second": 80.0}, 0.0)
    note = state.reply_finished(ChatReply("red, green", finish_reason="length", record=record), 64)
    assert "t/s" in note and state.last_reply.text == "red, green"
    assert state.message == (state.limit_text(64), False) and "server's own limit of 64" in state.message[0]
    state.reply_limit = 32
    state.reply_finished(ChatReply("red", finish_reason="length", record=record), 32)
    assert "32-token reply limit" in state.message[0]
    state.stopping()
    assert state.message == (STOPPING, False)
    stopped = ChatReply("", cancelled=True)
    assert state.reply_finished(stopped, 32) == stop_text(stopped) and stop_text(stopped).startswith("Stopped")
    assert state.message[0] != STOPPING  # the stop is over
    assert state.reply_finished(ChatReply("x", finish_reason="stop"), None) == \
        "The server sent no timings for this reply."
    assert state.reply_failed("the server closed the connection") == "No reply."
    assert state.message == ("the server closed the connection", True)


def test_what_the_servers_props_say_and_the_web_button():
    state = ChatState()
    state.show_server(_ready())
    c = state.controls(busy=False, stopping=False, transcript_empty=True)
    assert c.send and c.web and not c.stop and not c.copy and not c.clear and "API key" not in c.web_tip
    assert not state.props_read("http://127.0.0.1:9999", {}, "", "")  # an old server's answer: ignored
    props = {"default_generation_settings": {"params": {"temperature": 0.5, "top_k": 40}}}
    assert state.props_read(URL, props, "This model has no chat template", "")
    assert state.sampling_text.startswith("Sampling (the server's defaults, from its profile): ")
    assert state.template_note == "This model has no chat template"
    state.props_read(URL, {}, "", "this server was started with --no-webui")
    c = state.controls(busy=True, stopping=False, transcript_empty=False)
    assert not c.web and c.web_tip == "this server was started with --no-webui"
    assert c.stop and c.clear and c.input_read_only and not c.send and not c.pick_model
    assert not state.controls(busy=True, stopping=True, transcript_empty=False).stop
    state.set_server("keyed", "http://127.0.0.1:8082", "secret")
    assert "API key" in state.controls(busy=False, stopping=False, transcript_empty=True).web_tip
    state.props_failed("http://127.0.0.1:8082")
    assert state.sampling_text == "Sampling: the server's own defaults (it did not say which)."
    state.show_server(None)
    c = state.controls(busy=False, stopping=False, transcript_empty=True)
    assert not c.send and not c.web and c.web_tip == "Start a server in the Live tab first."
    assert state.sampling_text == "" and state.template_note == ""
