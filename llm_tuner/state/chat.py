"""The Chat view's state: the server it talks to (the Live tab's selected one), a router's models and the one
picked, the reply limits (the Chat's own and the server's -n), what the server says of its sampling and
template, the line under the transcript, and which controls act now.

ChatPanel binds its widgets to a ChatState and keeps what needs Qt (the streamed reply, qt.chat_session; the
/props read, a BackgroundJob; the transcript's text). Listeners get `notify(what)` with `what` one of:
"server" (the server, its words or its limit changed), "models" (a router's model list changed), "props"
(sampling, template note or the web page's problem changed), "message" (the line under the transcript).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_tuner.services.chat import ChatReply, sampling_summary, server_reply_limit, speed_text, stop_text
from llm_tuner.services.router_watch import RouterModels, is_router_props
from llm_tuner.services.supervised import ServerState
from llm_tuner.state.callbacks import Observable
from llm_tuner.state.live import ServerSlot

NO_SERVER = "No server is running. Start one in the Live tab (F5), then chat with it here."
NO_ROUTER_MODEL = "This server is a router without models: give its profile a models folder or preset."
STOPPING = ("Stopping: the server ends this reply once the step it is on is done (reading a long prompt "
            "takes a while)…")
ASKING = "Sampling: asking the server…"
NOT_SAID = "Sampling: the server's own defaults (it did not say which)."
WEB_TIP = "Open llama-server's own chat page in your browser."
WEB_TIP_KEY = (" This server needs its API key: the page asks for it (the key is never put in the address, "
               "where the browser's history would keep it).")
WEB_TIP_NO_SERVER = "Start a server in the Live tab first."


@dataclass(frozen=True)
class Ask:
    """A question ready to go: its text, the router's model it names (None: a server of one model) and the
    reply limit sent with it (max_tokens; None: only the server's own)."""

    question: str
    model: str | None
    max_tokens: int | None


@dataclass(frozen=True)
class ChatControls:
    """Which controls act now, and the web button's tooltip."""

    send: bool
    pick_model: bool
    input_read_only: bool
    stop: bool
    copy: bool
    clear: bool
    web: bool
    web_tip: str


class ChatState(Observable):
    """Whom the Chat talks to and what it says about it."""

    def __init__(self, reply_limit: int = 0) -> None:
        super().__init__()
        self._server_name = ""
        self._url: str | None = None
        self._has_key = False
        self._waiting = NO_SERVER  # what the server line says while no server takes requests
        # the server's own cap on a reply (-n), when its command is known
        self._server_limit: int | None = None
        self._server_limit_known = False
        self._router_items: list[tuple[str, str]] | None = None  # a router's (model, state); None: no router
        self._picked: str | None = None
        self._talked_to: tuple[str, str | None] | None = None  # the URL and model the last reply came from
        self._sampling = ""
        self._template_note = ""
        self._web_problem = ""  # why the server's own page cannot open ("": it can, or not known yet)
        self._message = ""
        self._message_error = False
        self.reply_limit = reply_limit  # the Chat's own cap on a reply (0: none), sent with each question
        self.last_reply: ChatReply | None = None

    # -- declared properties ---------------------------------------------------------------------------
    @property
    def server_name(self) -> str:
        return self._server_name

    @property
    def url(self) -> str | None:
        """The server's address while it takes requests (ready); None otherwise."""
        return self._url

    @property
    def server_line(self) -> str:
        """The line naming whom the Chat talks to, or why it talks to none."""
        return f"Chat with {self._server_name} · {self._url}" if self._url is not None else self._waiting

    @property
    def server_limit(self) -> int | None:
        return self._server_limit

    @property
    def router_items(self) -> list[tuple[str, str]] | None:
        """A router's models as (model, state), sorted as the router lists them; None: not a router."""
        return None if self._router_items is None else list(self._router_items)

    @property
    def picked_model(self) -> str | None:
        """The router's model the next question names; None for a server of one model (or a router without
        any)."""
        return self._picked if self._router_items else None

    @property
    def sampling_text(self) -> str:
        return self._sampling

    @property
    def template_note(self) -> str:
        """Why replies may be nonsense (the model has no chat template); "" when it has one or is not
        known."""
        return self._template_note

    @property
    def web_problem(self) -> str:
        return self._web_problem

    @property
    def message(self) -> tuple[str, bool]:
        """The line under the transcript and whether it is an error."""
        return self._message, self._message_error

    @property
    def no_model(self) -> bool:
        """A router that lists no models: there is nothing to ask."""
        return self._router_items is not None and self.picked_model is None

    # -- the server ------------------------------------------------------------------------------------
    def show_server(self, slot: ServerSlot | None, api_key: str | None = None) -> bool:
        """Follow the Live tab's selected slot (None: none); `api_key` is the key its clients send. True when
        the address changed (its /props is to be read)."""
        plan = slot.plan if slot is not None else None  # a launch's command; an attach's is not known
        self._server_limit_known = plan is not None
        self._server_limit = server_reply_limit(plan.user_args, plan.env_set) if plan is not None else None
        if slot is None or slot.server_state is ServerState.IDLE:
            changed = self.set_server("", None, None, waiting=NO_SERVER)
        elif slot.server_state is ServerState.READY:
            changed = self.set_server(slot.name, slot.url, api_key)
        else:  # the slot's own words, as the status bar's
            changed = self.set_server(slot.name, None, api_key, waiting=slot.status_text())
        listed = slot.router_models if slot is not None else None
        self.set_router_models(listed if isinstance(listed, RouterModels) else None)
        return changed

    def set_server(self, name: str, url: str | None, api_key: str | None, *,
                   waiting: str = NO_SERVER) -> bool:
        """Talk to the server at `url` (None: none takes requests now, and `waiting` says why). True when the
        address changed: what the last server said of its sampling, template and page is forgotten."""
        changed = url != self._url
        self._server_name, self._url, self._has_key, self._waiting = name, url, bool(api_key), waiting
        if url is None:
            self._sampling, self._template_note = "", ""
        elif changed:
            self._web_problem, self._template_note, self._sampling = "", "", ASKING
        self.notify("server")
        if changed:
            self.notify("props")
        self._check_router_message()
        return changed

    def set_router_models(self, listed: RouterModels | None) -> bool:
        """A router's models (None: the server serves one model). The picked model stays picked while the
        router lists it; else the first is. True when the list changed."""
        items = None if listed is None else [(m.id, m.status) for m in listed.models]
        if items == self._router_items:
            return False
        self._router_items = items
        names = [m for m, _state in items or ()]
        if self._picked not in names:
            self._picked = names[0] if names else None
        self.notify("models")
        self._check_router_message()
        return True

    def pick(self, model: str | None) -> None:
        """The user picked a router's model."""
        self._picked = model

    # -- questions and replies -------------------------------------------------------------------------
    def ask(self, text: str, *, busy: bool) -> Ask | None:
        """The question `text` as it goes to the server now; None when it cannot go (empty, no server, a
        reply under way, a router without a model)."""
        question = text.strip()
        model = self.picked_model
        if not question or self._url is None or busy or (self._router_items is not None and not model):
            return None
        # a request's limit replaces the server's -n: the lower one of the two goes with it
        limits = [n for n in (self.reply_limit, self._server_limit) if n]
        return Ask(question, model, min(limits) if limits else None)

    def sent(self, ask: Ask) -> str | None:
        """The question went out: the note to put first when the Chat now talks to another server or model
        (the conversation goes along), else None."""
        who = f"{self._server_name} ({self._url}{f', model {ask.model}' if ask.model else ''})"
        now = (self._url or "", ask.model)
        note = (f"Now chatting with {who}; the conversation so far goes along."
                if self._talked_to is not None and self._talked_to != now else None)
        self._talked_to = now
        self.say("")
        return note

    def reply_author(self, ask: Ask) -> str:
        """Whom a reply is from in the transcript: the server's name and the router's model."""
        return " · ".join(filter(None, (self._server_name, ask.model))) or "Model"

    def reply_finished(self, reply: ChatReply, asked_limit: int | None) -> str:
        """A reply ended (stopped or whole): the note under it (its speed row, or what happened); the line
        under the transcript says what the user should know (a limit that cut it, figures left out)."""
        self.last_reply = reply
        if self._message == STOPPING:
            self.say("")
        if reply.cancelled:
            note = stop_text(reply)
        elif reply.record is not None:
            note = speed_text(reply.record)
            if reply.record.implausible:
                self.say("Figures the server sent that no real request has were left out: "
                         + "; ".join(reply.record.implausible), error=True)
        else:
            note = "The server sent no timings for this reply."
        if reply.finish_reason == "length":
            self.say(self.limit_text(asked_limit))
        return note

    def reply_failed(self, message: str) -> str:
        """A reply failed: the note under it; the message says why."""
        self.say(message, error=True)
        return "No reply."

    def stopping(self) -> None:
        self.say(STOPPING)

    def cleared(self) -> None:
        """A new conversation."""
        self.last_reply, self._talked_to = None, None
        self.say("")

    def limit_text(self, asked: int | None) -> str:
        """Which limit ended a reply: the Chat's own (the one it was asked with), else the server's (-n)."""
        theirs = self._server_limit
        if asked and asked == theirs:
            return (f"The reply stopped at the server's own limit of {theirs} tokens (-n in its profile: "
                    "change it there and restart the server).")
        if asked:
            return (f"The reply stopped at the {asked}-token reply limit (Reply limit, top right: raise it, "
                    "or choose none, for longer replies).")
        return "The reply stopped at the server's limit on generated tokens (-n, set in its command line)."

    @property
    def limit_tip(self) -> str:
        """The reply limit's tooltip: what it does, and the server's own limit as far as it is known."""
        if not self._server_limit_known:
            theirs = ("A server started elsewhere: its own limit (-n) is not known here, and this one "
                      "replaces it.")
        elif self._server_limit is None:
            theirs = "The server has no limit of its own (no -n in its profile)."
        else:
            theirs = (f"The server's own limit: {self._server_limit} tokens (-n in its profile); the lower "
                      "one counts.")
        return ("The most tokens a reply may have, sent with each question (none: only the server's limit). "
                f"A model without a chat template can otherwise run on for minutes. {theirs}")

    # -- what the server says --------------------------------------------------------------------------
    def props_read(self, url: str, props: Mapping[str, Any], note: str, web_problem: str) -> bool:
        """The server at `url` answered /props (with its template note and whether its page opens); ignored
        (False) when the Chat has moved on to another server."""
        if url != self._url:
            return False
        summary = sampling_summary(props)
        if is_router_props(dict(props)):  # a router has no sampling of its own: each model's instance has one
            self._sampling = ("Sampling: each model's own defaults (the router's command line, or the "
                              "model's preset).")
        elif summary:
            self._sampling = f"Sampling (the server's defaults, from its profile): {summary}"
        else:
            self._sampling = "Sampling: the server's own defaults (it does not list them)."
        self._template_note, self._web_problem = note, web_problem
        self.notify("props")
        return True

    def props_failed(self, url: str) -> None:
        if url == self._url:
            self._sampling = NOT_SAID
            self.notify("props")

    # -- the view --------------------------------------------------------------------------------------
    def say(self, text: str, *, error: bool = False) -> None:
        """The line under the transcript."""
        if (text, error) != (self._message, self._message_error):
            self._message, self._message_error = text, error
            self.notify("message")

    def _check_router_message(self) -> None:
        if self._url is not None and self.no_model:
            self.say(NO_ROUTER_MODEL, error=True)
        elif self._message == NO_ROUTER_MODEL:
            self.say("")

    def controls(self, *, busy: bool, stopping: bool, transcript_empty: bool) -> ChatControls:
        """Which controls act, given the reply under way (`busy`, `stopping`) and the transcript."""
        ready = self._url is not None
        if not ready:
            tip = WEB_TIP_NO_SERVER
        elif self._web_problem:
            tip = self._web_problem
        else:
            tip = WEB_TIP + (WEB_TIP_KEY if self._has_key else "")
        reply = self.last_reply
        return ChatControls(send=ready and not busy and not self.no_model, pick_model=not busy,
                            input_read_only=busy, stop=busy and not stopping,
                            copy=reply is not None and bool(reply.text), clear=not transcript_empty or busy,
                            web=ready and not self._web_problem, web_tip=tip)


__all__ = ["ASKING", "NO_ROUTER_MODEL", "NO_SERVER", "STOPPING", "Ask", "ChatControls", "ChatState"]
