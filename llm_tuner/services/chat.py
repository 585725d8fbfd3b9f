"""A chat with a running llama-server: one streamed reply at a time over its OpenAI-compatible endpoint.

The conversation (system prompt, then user and assistant turns) is sent whole with each question, as OpenAI's
API wants; llama-server reuses the cached prefix, so only the new turn is processed (its `cache_n` says so).
Sampling is left to the server: its defaults are what its command line (the profile's sampling fields) set,
and `sampling_summary` shows them from /props. Each reply's figures are the server's own `timings` of that
request (core.session.RequestRecord.from_timings), the same the Requests table shows from the log.
A router (llama-server in router mode) serves several models and refuses a request that names none (HTTP 400):
`stream_reply(model=...)` names it, and the reply's record carries that name, as the Requests table's would.

No Qt here: qt.chat_session runs `stream_reply` on a worker thread and hands the text to the view.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx

from llm_tuner.core import flags
from llm_tuner.core.server_endpoints import parse_slots
from llm_tuner.core.session import RequestRecord
from llm_tuner.services.client import LlamaClient, ServerError, StreamCancelled

REPLY_TIMEOUT_S = 600.0  # the longest the server may take for the first event (a long prompt) or between two
STOP_WAIT_S = 120.0  # the longest a stopped reply waits for the server to let go of it
STOP_POLL_S = 0.2
# tokens: the Chat's own cap on a reply (a model without a template can run on for minutes)
DEFAULT_REPLY_LIMIT = 1024


@dataclass(frozen=True)
class ChatReply:
    """One finished (or stopped) reply."""

    text: str
    reasoning: str = ""  # the model's thinking, when the server separates it (reasoning_content)
    # "stop" (the model ended), "length" (the token limit); None when stopped
    finish_reason: str | None = None
    record: RequestRecord | None = None  # the server's own figures of this request; None when it sent none
    cancelled: bool = False  # the user stopped it (the text is what arrived until then)
    model: str | None = None
    # A stopped reply: closing the connection does not stop a server reading a long prompt (it finishes the
    # step it is on first). How long after Stop its slot was free (None: the server does not say), and whether
    # it was still busy when the wait gave up (STOP_WAIT_S).
    freed_after_s: float | None = None
    still_busy: bool = False


class ReplyAccumulator:
    """Gathers one streamed reply from its chunks: the text, the reasoning, and the last chunk's `timings`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.finish_reason: str | None = None
        self.timings: Mapping[str, Any] | None = None
        self.model: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> tuple[str, str]:
        """Take one chunk; returns the new (text, reasoning) it carried."""
        text = reasoning = ""
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            choice = choices[0]
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                content = delta.get("content")
                text = content if isinstance(content, str) else ""
                r = delta.get("reasoning_content")
                reasoning = r if isinstance(r, str) else ""
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
        # on the last chunk (on every one with timings_per_token)
        if isinstance(chunk.get("timings"), Mapping):
            self.timings = chunk["timings"]
        if text:
            self.text.append(text)
        if reasoning:
            self.reasoning.append(reasoning)
        return text, reasoning

    def reply(self, *, cancelled: bool = False, time_unix: float | None = None,
              model: str | None = None) -> ChatReply:
        """The reply so far; `model`: the router's model the request named (its record carries it)."""
        record = None
        if self.timings is not None and not cancelled:
            record = RequestRecord.from_timings(self.timings, time.time() if time_unix is None else time_unix)
            if model:
                record = replace(record, model=model)
        return ChatReply("".join(self.text), "".join(self.reasoning), None if cancelled else self.finish_reason,
                         record, cancelled, self.model)


def read_reply(chunks: Iterable[Mapping[str, Any]], on_text: Callable[[str, str], None] | None = None, *,
               model: str | None = None) -> ChatReply:
    """A whole reply from its chunks (as LlamaClient.chat_stream yields them), `on_text(text, reasoning)` for
    each piece as it arrives. A StreamCancelled from the chunks ends it as a stopped reply with what came so
    far. `model`: the router's model the request named (the reply's record carries it)."""
    acc = ReplyAccumulator()
    try:
        for chunk in chunks:
            text, reasoning = acc.feed(chunk)
            if on_text is not None and (text or reasoning):
                on_text(text, reasoning)
    except StreamCancelled:
        return acc.reply(cancelled=True)
    return acc.reply(model=model)


def busy_slots(client: LlamaClient) -> frozenset[tuple[int | None, int | None]] | None:
    """The server's slots working on a request now, as (slot id, task id); None when it does not say (its
    /slots is off, or it answers something else). The server answers /slots between two steps of its work."""
    try:
        return frozenset((s.id, s.task) for s in parse_slots(client.slots()) if s.is_processing)
    except (ServerError, httpx.HTTPError):
        return None


def wait_until_let_go(client: LlamaClient, before: frozenset[tuple[int | None, int | None]] | None, *,
                      timeout: float = STOP_WAIT_S, poll_s: float = STOP_POLL_S,
                      give_up: threading.Event | None = None) -> tuple[float | None, bool]:
    """After a stopped reply: wait until the slots that took it up (busy now and not before it was asked:
    `before`) are free. Returns (seconds waited, still busy after `timeout` or when `give_up` was set: the app
    quits); (None, False) when the server does not say."""
    if before is None:
        return None, False
    t0 = time.monotonic()
    ours: frozenset[tuple[int | None, int | None]] | None = None
    while True:
        busy: frozenset[tuple[int | None, int | None]] | None
        try:
            busy = frozenset((s.id, s.task) for s in parse_slots(client.slots()) if s.is_processing)
        except httpx.TimeoutException:  # the step it is on outlasts a short call: it is still busy
            busy = None
        except (ServerError, httpx.HTTPError):
            return None, False
        waited = time.monotonic() - t0
        if busy is not None:
            if ours is None:
                ours = busy - before  # another client's requests are not this reply's
            if not ours & busy:
                return waited, False
        if waited >= timeout or (give_up is not None and give_up.wait(poll_s)):
            return waited, True
        if give_up is None:
            time.sleep(poll_s)


def stream_reply(url: str, api_key: str | None, messages: list[dict[str, Any]], *,
                 cancel: threading.Event,
                 on_text: Callable[[str, str], None] | None = None, timeout: float = REPLY_TIMEOUT_S,
                 model: str | None = None, give_up: threading.Event | None = None, **params: Any) -> ChatReply:
    """Ask the server at `url` for the next reply to `messages` (a list of {"role", "content"}), streamed;
    `model`: which of a router's models answers (None for a server of one model); `params` go with the request
    (`max_tokens`: the reply's limit).

    Setting `cancel` ends the stream within a fraction of a second and closes the connection; the server then
    stops too, but only once the step it is on is done (reading a long prompt on a CPU: seconds). The reply
    waits for that and says how long it took (freed_after_s), unless `give_up` is set (the app quits).
    Raises client.ServerError for the server's refusal (a wrong API key, a prompt over the context, a router
    asked without a model), httpx errors when nothing answers."""
    with LlamaClient(url, api_key=api_key, timeout=timeout, model=model) as client:
        if cancel.is_set():
            return ChatReply("", cancelled=True)
        before = busy_slots(client)
        reply = read_reply(client.chat_stream(messages, cancel=cancel, **params), on_text, model=model)
        if not reply.cancelled:
            return reply
        freed, busy = wait_until_let_go(client, before, give_up=give_up)
        return replace(reply, freed_after_s=freed, still_busy=busy)


def stop_text(reply: ChatReply) -> str:
    """The line under a stopped reply: what the server did with it."""
    said = "Stopped." if reply.text or reply.reasoning else "Stopped before the first word."
    if reply.still_busy:
        return (f"{said[:-1]} here; the server was still working on it {reply.freed_after_s:.0f} s after "
                "Stop (a long prompt is read to the end of its step first): the next question waits for it.")
    if reply.freed_after_s is None:
        return (f"{said[:-1]} here; whether the server still works on it is not known (it does not report "
                "its slots): a long prompt is read to the end of its step first.")
    if reply.freed_after_s >= 1.0:
        return (f"{said[:-1]}: the server let go of it {reply.freed_after_s:.1f} s after Stop (it finishes "
                "the step it is on first).")
    return said


def server_reply_limit(user_args: Iterable[str], env: Mapping[str, str]) -> int | None:
    """The server's own cap on generated tokens (-n, --predict, or its variable), from the command it runs;
    None when it has none (absent, -1, or not a number)."""
    value = flags.value_of(flags.effective_argv(list(user_args), env), "predict")
    try:
        n = int(value) if value is not None else -1
    except ValueError:
        return None
    return n if n >= 0 else None


def draft_text(rec: RequestRecord) -> str:
    """The drafted tokens the server accepted, as the Draft accepted column (and the Chat's speed row) shows
    them."""
    if not rec.draft_n:
        return "—"
    share = f" ({100 * rec.draft_acceptance:.0f} %)" if rec.draft_acceptance is not None else ""
    return f"{rec.draft_n_accepted}/{rec.draft_n}{share}"


def speed_text(rec: RequestRecord) -> str:
    """One reply's figures as the speed row under it (the Requests table's, in words), led by its router
    model."""

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f} t/s"

    cached = f" (+{rec.cache_n} cached)" if rec.cache_n else ""
    parts = [f"prompt {rec.prompt_n if rec.prompt_n is not None else '—'} tokens{cached} at "
             f"{rate(rec.prompt_per_second)}",
             f"generation {rec.predicted_n if rec.predicted_n is not None else '—'} tokens at "
             f"{rate(rec.predicted_per_second)}",
             f"TTFT {'—' if rec.ttft_ms is None else f'{rec.ttft_ms:.0f} ms'}"]
    if rec.draft_n:
        parts.append(f"draft accepted {draft_text(rec)}")
    if rec.model:
        parts.insert(0, f"model {rec.model}")
    return " · ".join(parts)


# /props default_generation_settings.params -> how the chat view names it (the profile's sampling fields). Its
# n_predict is not the server's token limit (it reads -1 with a limit set), so it is not shown.
SAMPLING_NAMES = (("temperature", "temperature"), ("top_k", "top-k"), ("top_p", "top-p"), ("min_p", "min-p"),
                  ("repeat_penalty", "repeat penalty"), ("presence_penalty", "presence penalty"),
                  ("frequency_penalty", "frequency penalty"))


def sampling_summary(props: Mapping[str, Any]) -> str:
    """The server's default sampling (what a reply uses: its command line's values) as one line, from
    /props."""
    settings = props.get("default_generation_settings")
    params = settings.get("params") if isinstance(settings, Mapping) else None
    if not isinstance(params, Mapping):
        return ""
    parts = []
    for key, name in SAMPLING_NAMES:
        value = params.get(key)
        if not isinstance(value, bool) and isinstance(value, int | float):
            parts.append(f"{name} {value:.3g}")
    return " · ".join(parts)


def web_ui_problem(props: Mapping[str, Any], page_found: bool | None) -> str:
    """Why "Open web UI" cannot work on this server, or "" (it can, or nothing says otherwise). `props` is its
    /props (`ui`, `webui` in older builds: switched off); `page_found` whether "/" answered (a build made
    without its web page, as the embedded one, answers 404 there while /props still says the UI is on)."""
    value = props.get("ui", props.get("webui"))
    if value is False:
        return "This server runs without its own web page (its web UI is switched off in the profile)."
    if page_found is False:
        return ("This llama-server build has no web page (it was built without its web UI): use the Chat "
                "here, or a llama-server built with it.")
    return ""


# ChatML: what llama-server falls back to for a model without a template
GENERIC_TEMPLATE_MARK = "<|im_start|>"


def template_note(props: Mapping[str, Any]) -> str:
    """A warning when the server chats through its generic template because the model file has none (the demo
    model is one): such a model was not trained on it and its replies can be nonsense. Reads the model's
    header (a worker thread's job); empty when the model has its own template, the profile set one, or the
    file is not here."""
    path, template = props.get("model_path"), props.get("chat_template")
    if not isinstance(path, str) or not isinstance(template, str) or GENERIC_TEMPLATE_MARK not in template:
        return ""
    from llm_tuner.services.library import read_model  # noqa: PLC0415 - only when the server's template is generic

    info = read_model(path)
    if info.error or info.chat_template:
        return ""
    return ("This model file has no chat template of its own, so the server uses a generic one (ChatML) that "
            "the model may not know: its replies can be nonsense. Give the profile a chat template made for "
            "this model (the Profile tab's chat fields).")


def failure_text(exc: object) -> str:
    """Why a reply failed, in words, with what to do."""
    if isinstance(exc, ServerError):
        if exc.status == 401:
            return ("The server refused the request: it needs an API key, or not this one (HTTP 401). A server "
                    "launched here sends its profile's key; a server attached by URL is asked without one.")
        if exc.status == 503:
            return "The server is still loading the model (HTTP 503): ask again in a moment."
        return f"The server answered with an error: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return "The server did not answer in time: is it busy with other requests? See the Live tab."
    if isinstance(exc, httpx.HTTPError):
        return f"The server cannot be reached ({type(exc).__name__}): has it stopped? See the Live tab."
    return f"The reply failed: {type(exc).__name__}: {exc}"
