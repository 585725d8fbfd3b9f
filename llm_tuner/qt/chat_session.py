"""ChatSession: a conversation with one server, its replies streamed on a worker thread and handed to the GUI.

The reply runs as a BackgroundJob on the long-job pool (a reply can take minutes; short queries never queue
behind it). Text pieces arrive on the worker thread; they are gathered under a lock and the GUI is told once
per batch (`text_received` carries everything since the last one), so a fast server costs one repaint per
event-loop turn, not one per token. `stop()` cancels the stream: the connection closes, and the reply ends
once the server has let go of it (a long prompt is read to the end of its step first:
services.chat.stream_reply).
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication, QObject, Signal

from llm_tuner.qt.workers import BackgroundJob, emit_later
from llm_tuner.services.chat import ChatReply, failure_text, stream_reply


class ChatSession(QObject):
    text_received = Signal(str, str)  # the reply's new text and reasoning since the last signal
    reply_finished = Signal(object)  # ChatReply (cancelled=True when stopped)
    reply_failed = Signal(str)  # what went wrong, in words
    _text_posted = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.url: str | None = None
        self.api_key: str | None = None
        self.system_prompt = ""
        # the router's model the next question goes to (None: a server of one model)
        self.model: str | None = None
        self.max_tokens: int | None = None  # the next reply's limit (None: the server's own)
        self.asked_limit: int | None = None  # the limit the reply under way (or the last one) was asked with
        # the user and assistant turns so far (the system prompt is added per reply)
        self.messages: list[dict] = []
        self._job: BackgroundJob | None = None
        self._cancel = threading.Event()
        self._quitting = threading.Event()  # a stopped reply no longer waits for the server
        self._lock = threading.Lock()
        self._pending: list[tuple[str, str]] = []
        self._posted = False
        self._text_posted.connect(self._on_self_text_posted)
        # a reply under way ends with the app (an attached server keeps running and would stream to no one)
        if (app := QCoreApplication.instance()) is not None:
            app.aboutToQuit.connect(self._on_app_about_to_quit)

    @property
    def busy(self) -> bool:
        return self._job is not None

    def set_server(self, url: str | None, api_key: str | None) -> None:
        """The server the next question goes to (a reply under way keeps its own)."""
        self.url, self.api_key = url, api_key

    def ask(self, question: str) -> bool:
        """Send `question` after the turns so far; False when no server is set or a reply is under way."""
        if self.url is None or self._job is not None:
            return False
        self.messages.append({"role": "user", "content": question})
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt.strip() else []
        messages, url, key, model = system + list(self.messages), self.url, self.api_key, self.model
        limit = self.asked_limit = self.max_tokens
        params = {"max_tokens": limit} if limit else {}
        cancel = self._cancel = threading.Event()

        def run(_ctl) -> ChatReply:
            return stream_reply(url, key, messages, cancel=cancel, on_text=self._on_worker_text, model=model,
                                give_up=self._quitting, **params)

        job = self._job = BackgroundJob(run, self, what="The chat reply", on_failed=self._on_job_failed)
        job.succeeded.connect(self._on_job_succeeded)
        job.start(long=True)
        return True

    @property
    def is_stopping(self) -> bool:
        """Stop was pressed and the reply has not ended yet (the server may still be on it)."""
        return self._job is not None and self._cancel.is_set()

    def stop(self) -> None:
        """Cancel the reply under way: it ends as a stopped reply with the text so far once the server has let
        go of it."""
        self._cancel.set()

    def _on_app_about_to_quit(self) -> None:
        self._quitting.set()
        self.stop()

    def clear(self) -> None:
        """Forget the conversation (a reply under way is stopped first)."""
        self.stop()
        self.messages = []

    # -- worker thread -> GUI -------------------------------------------------------------------------
    def _on_worker_text(self, text: str, reasoning: str) -> None:
        with self._lock:
            self._pending.append((text, reasoning))
            post, self._posted = not self._posted, True
        if post:
            emit_later(self, "_text_posted")  # nothing, once the session is deleted

    def _take_pending(self) -> tuple[str, str]:
        with self._lock:
            pending, self._pending, self._posted = self._pending, [], False
        return "".join(t for t, _ in pending), "".join(r for _, r in pending)

    def _on_self_text_posted(self) -> None:
        text, reasoning = self._take_pending()
        if text or reasoning:
            self.text_received.emit(text, reasoning)

    def _on_job_succeeded(self, reply: ChatReply) -> None:
        self._on_self_text_posted()  # what arrived after the last batch comes before the end
        self._job = None
        if reply.text or reply.reasoning or not reply.cancelled:
            self.messages.append({"role": "assistant", "content": reply.text})
        else:  # stopped before a word: the question goes unanswered, so it leaves the history
            self.messages.pop()
        self.reply_finished.emit(reply)

    def _on_job_failed(self, exc: object) -> None:
        self._on_self_text_posted()
        self._job = None
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages.pop()  # unanswered: asking again sends it once
        self.reply_failed.emit(failure_text(exc))

