"""Chat: talk to the server selected in the Live tab, its replies streamed, each with its speed row.

The speed row is the server's own figures for that reply (prompt and generation speed, TTFT, draft acceptance):
the same numbers the Requests table shows for the request. Sampling is the server's own defaults, which its
command line (the profile's sampling fields) set; the line under the header shows them as the server reports.
"Open web UI" opens llama-server's own page in the browser; an API key never goes into its address (the page
asks for it).

A router (llama-server in router mode) serves several models and needs each request to name one: the model
picker beside the server's name lists the router's models (the Live slot's `router_models`, as its Models tab
shows them) and every question goes to the one picked; its speed row names it.

The main window calls `show_server(slot)` whenever the Live tab's selected server, its state or its router models
change: that is the whole hook. Nothing here waits on the network: the reply streams on a worker thread (qt.chat_session), /props
is read by a BackgroundJob.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QFont, QGuiApplication, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.chat_session import ChatSession
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.chat import (
    DEFAULT_REPLY_LIMIT,
    ChatReply,
    sampling_summary,
    server_reply_limit,
    speed_text,
    stop_text,
    template_note,
    web_ui_problem,
)
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.router_watch import is_router_props
from llm_tuner.services.supervised import ServerState

NO_SERVER = "No server is running. Start one in the Live tab (F5), then chat with it here."
NO_ROUTER_MODEL = "This server is a router without models: give its profile a models folder or preset."
STOPPING = "Stopping: the server ends this reply once the step it is on is done (reading a long prompt takes a while)…"


def _server_of(slot, key: str | None) -> tuple[str, str | None, str | None, str]:
    """The Live slot's name, URL when it takes requests (ready), API key, and what to say while it does not (the
    slot's own words, as the status bar's)."""
    if slot is None or slot.server_state is ServerState.IDLE:
        return "", None, None, NO_SERVER
    if slot.server_state is ServerState.READY:
        return slot.name, slot.url, key, ""
    return slot.name, None, key, slot.status_text()


class ChatPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = ChatSession(self)
        self.server_name = ""
        self.url: str | None = None
        self._has_key = False
        self._web_problem = ""  # why the server's own page cannot open ("" : it can, or not known yet)
        self._props_job: BackgroundJob | None = None
        self._talked_to: tuple[str, str | None] | None = None  # the URL and model the last reply came from
        self._router_items: list[tuple[str, str]] | None = None  # the picker's (model, state); None: no router
        self.last_reply: ChatReply | None = None
        self._server_limit: int | None = None  # the server's own cap on a reply (-n), when its command is known
        self._server_limit_known = False

        self.server_label = QLabel(NO_SERVER)
        self.server_label.setTextFormat(Qt.TextFormat.PlainText)
        self.web_button = QPushButton("Open web UI")
        self.model_caption = QLabel("Model:")
        self.model_combo = QComboBox()  # a router's models: the one each question names
        self.model_combo.setToolTip("The router's model that answers: it loads the model on the first question "
                                    "that names it (that one takes longer). The Live tab's Models tab lists them.")
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.model_caption.hide()
        self.model_combo.hide()
        self.limit_caption = QLabel("Reply limit:")
        self.limit_spin = QSpinBox()  # the Chat's own cap on a reply, sent with each question (max_tokens)
        self.limit_spin.setRange(0, 1_000_000)
        self.limit_spin.setSingleStep(256)
        self.limit_spin.setSpecialValueText("none")
        self.limit_spin.setSuffix(" tokens")
        self.limit_spin.setValue(DEFAULT_REPLY_LIMIT)
        self._show_limit_tip()
        self.sampling_label = QLabel()
        self.sampling_label.setWordWrap(True)
        self.sampling_label.setStyleSheet("color: palette(placeholder-text)")
        self.sampling_label.setToolTip("What each reply uses: the server's own defaults, which its command line set "
                                       "(the profile's sampling fields). Change them in the Profile tab and restart "
                                       "the server.")
        self.template_label = QLabel()  # the model has no chat template: why replies may be nonsense
        self.template_label.setWordWrap(True)
        self.template_label.setStyleSheet("color: #b8860b")
        self.template_label.hide()
        self.system_edit = QPlainTextEdit()
        self.system_edit.setPlaceholderText("Optional: instructions sent before the conversation, e.g. “Answer in "
                                            "one sentence.” (the model's chat template decides how it reads them)")
        self.system_edit.setMaximumHeight(self.fontMetrics().lineSpacing() * 3 + 12)
        self.system_edit.setTabChangesFocus(True)
        self.transcript = QTextBrowser()
        self.transcript.setOpenLinks(False)
        self.transcript.setPlaceholderText("The conversation appears here.")
        self.input_edit = QPlainTextEdit()
        self.input_edit.setPlaceholderText("Message (Enter sends, Shift+Enter starts a new line)")
        self.input_edit.setMaximumHeight(self.fontMetrics().lineSpacing() * 4 + 12)
        self.input_edit.setTabChangesFocus(True)
        self.input_edit.installEventFilter(self)
        self.send_button = QPushButton("Send")
        self.send_button.setToolTip("Send the message with the conversation so far (Enter)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the reply (the server stops generating); what arrived stays")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the last reply's text")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Start a new conversation (the system prompt stays)")
        self.message_label = QLabel()
        self.message_label.setWordWrap(True)

        top = QHBoxLayout()
        top.addWidget(self.server_label, 1)
        top.addWidget(self.model_caption)
        top.addWidget(self.model_combo)
        top.addWidget(self.limit_caption)
        top.addWidget(self.limit_spin)
        top.addWidget(self.web_button)
        buttons = QVBoxLayout()
        for b in (self.send_button, self.stop_button, self.copy_button, self.clear_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.input_edit, 1)
        bottom.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.sampling_label)
        lay.addWidget(self.template_label)
        system_row = QHBoxLayout()
        system_caption = QLabel("System prompt:")
        system_caption.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        system_row.addWidget(system_caption)
        system_row.addWidget(self.system_edit, 1)
        lay.addLayout(system_row)
        lay.addWidget(self.transcript, 1)
        lay.addWidget(self.message_label)
        lay.addLayout(bottom)

        self.send_button.clicked.connect(self._on_send_clicked)
        self.stop_button.clicked.connect(self._on_stop_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.clear_button.clicked.connect(self._on_clear_clicked)
        self.web_button.clicked.connect(self._on_web_clicked)
        self.session.text_received.connect(self._on_session_text_received)
        self.session.reply_finished.connect(self._on_session_reply_finished)
        self.session.reply_failed.connect(self._on_session_reply_failed)
        self._update_controls()

    # -- the hook -----------------------------------------------------------------------------------
    def show_server(self, slot, api_key: str | None = None) -> None:
        """Follow the Live tab's selected server slot (called on every change of it or its state); `api_key` is
        the key its clients send (LivePanel.api_key)."""
        name, url, key, waiting = _server_of(slot, api_key)
        plan = getattr(slot, "plan", None)  # a launch's command: its own reply limit (-n); an attach's is not known
        self._server_limit_known = plan is not None
        self._server_limit = server_reply_limit(plan.user_args, plan.env_set) if plan is not None else None
        self._show_limit_tip()
        self.set_server(name, url, key, waiting=waiting)
        self.set_router_models(getattr(slot, "router_models", None))

    def set_router_models(self, listed) -> None:
        """Fill the model picker from a router's models (a services.router_watch.RouterModels; None: the server
        serves one model, and the picker hides). The picked model stays picked while the router lists it."""
        items = None if listed is None else [(m.id, m.status) for m in listed.models]
        if items != self._router_items:
            picked = self.model_combo.currentData()
            self.model_combo.blockSignals(True)
            self.model_combo.clear()
            for model, state in items or ():
                self.model_combo.addItem(f"{model} ({state})", model)
            found = self.model_combo.findData(picked)
            self.model_combo.setCurrentIndex(found if found >= 0 else 0 if items else -1)
            self.model_combo.blockSignals(False)
            self._router_items = items
        self.model_caption.setVisible(items is not None)
        self.model_combo.setVisible(items is not None)
        self._update_controls()

    def picked_model(self) -> str | None:
        """The router's model the next question names; None for a server of one model (or a router without any)."""
        return self.model_combo.currentData() if self._router_items else None

    def set_server(self, name: str, url: str | None, api_key: str | None, *, waiting: str = NO_SERVER) -> None:
        """Chat with the server at `url` (None: none takes requests now, and `waiting` says why); `api_key` goes
        only in request headers."""
        changed = url != self.url
        self.server_name, self.url, self._has_key = name, url, bool(api_key)
        self.session.set_server(url, api_key)
        if url is None:
            self.server_label.setText(waiting)
            self.sampling_label.clear()
            self.template_label.hide()
        else:
            self.server_label.setText(f"Chat with {name} · {url}")
            if changed:
                self._web_problem = ""
                self.template_label.hide()
                self.sampling_label.setText("Sampling: asking the server…")
                self._read_props(url, api_key)
        self._update_controls()

    # -- actions ------------------------------------------------------------------------------------
    def send(self, text: str | None = None) -> bool:
        """Send `text` (else the input's) as the next message; False when it cannot go now."""
        question = (self.input_edit.toPlainText() if text is None else text).strip()
        model = self.picked_model()
        if not question or self.url is None or self.session.busy or (self._router_items is not None and not model):
            return False
        self.session.system_prompt = self.system_edit.toPlainText()
        self.session.model = model
        # a request's limit replaces the server's -n: the lower one of the two goes with it
        limits = [n for n in (self.limit_spin.value(), self._server_limit) if n]
        self.session.max_tokens = min(limits) if limits else None
        if not self.session.ask(question):
            return False
        who = f"{self.server_name} ({self.url}{f', model {model}' if model else ''})"
        if self._talked_to is not None and self._talked_to != (self.url, model):
            self._append_note(f"Now chatting with {who}; the conversation so far goes along.")
        self._talked_to = (self.url, model)
        self.input_edit.clear()
        self._append_turn("You", question)
        self._append_turn(" · ".join(filter(None, (self.server_name, model))) or "Model", "")
        self._show_message("")
        self._update_controls()
        return True

    def _on_send_clicked(self) -> None:
        self.send()

    def _on_stop_clicked(self) -> None:
        self.session.stop()
        self._show_message(STOPPING)
        self._update_controls()

    def _on_copy_clicked(self) -> None:
        if self.last_reply is not None and self.last_reply.text:
            QGuiApplication.clipboard().setText(self.last_reply.text)
            self._show_message("The last reply is copied.")

    def _on_clear_clicked(self) -> None:
        self.session.clear()
        self.transcript.clear()
        self.last_reply, self._talked_to = None, None
        self._show_message("")
        self._update_controls()

    def _on_web_clicked(self) -> None:
        if self.url is not None:  # the address alone: a key in a URL lands in the browser's history and logs
            QDesktopServices.openUrl(QUrl(self.url + "/"))

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if (obj is self.input_edit and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
                and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.send()
            return True
        return super().eventFilter(obj, event)

    # -- session -> view ----------------------------------------------------------------------------
    def _on_session_text_received(self, text: str, reasoning: str) -> None:
        if reasoning:
            self._insert(reasoning, italic=True, muted=True)
        if text:
            self._insert(text)

    def _on_session_reply_finished(self, reply: ChatReply) -> None:
        self.last_reply = reply
        if self.message_label.text() == STOPPING:
            self._show_message("")
        if reply.cancelled:
            self._append_note(stop_text(reply))
        elif reply.record is not None:
            self._append_note(speed_text(reply.record))
            if reply.record.implausible:
                self._show_message("Figures the server sent that no real request has were left out: "
                                   + "; ".join(reply.record.implausible), error=True)
        else:
            self._append_note("The server sent no timings for this reply.")
        if reply.finish_reason == "length":
            self._show_message(self._limit_text(reply))
        self._update_controls()

    def _limit_text(self, reply: ChatReply) -> str:
        """Which limit ended a reply: the Chat's own (the one it was asked with), else the server's (-n)."""
        asked, theirs = self.session.asked_limit, self._server_limit
        if asked and asked == theirs:
            return (f"The reply stopped at the server's own limit of {theirs} tokens (-n in its profile: change it "
                    "there and restart the server).")
        if asked:
            return (f"The reply stopped at the {asked}-token reply limit (Reply limit, top right: raise it, or choose "
                    "none, for longer replies).")
        return "The reply stopped at the server's limit on generated tokens (-n, set in its command line)."

    def _show_limit_tip(self) -> None:
        if not self._server_limit_known:
            theirs = "A server started elsewhere: its own limit (-n) is not known here, and this one replaces it."
        elif self._server_limit is None:
            theirs = "The server has no limit of its own (no -n in its profile)."
        else:
            theirs = f"The server's own limit: {self._server_limit} tokens (-n in its profile); the lower one counts."
        self.limit_spin.setToolTip("The most tokens a reply may have, sent with each question (none: only the "
                                   "server's limit). A model without a chat template can otherwise run on for "
                                   f"minutes. {theirs}")

    def _on_session_reply_failed(self, message: str) -> None:
        self._append_note("No reply.")
        self._show_message(message, error=True)
        self._update_controls()

    # -- helpers ------------------------------------------------------------------------------------
    def _read_props(self, url: str, api_key: str | None) -> None:
        def run(_ctl):
            with LlamaClient(url, api_key=api_key, timeout=10.0) as client:
                props = client.props()
                try:
                    page = client.serves_web_page()
                except Exception:  # noqa: BLE001 - unknown: the button stays, the browser will say
                    page = None
            return url, props, template_note(props), web_ui_problem(props, page)

        job = self._props_job = BackgroundJob(run, self, what="Reading the server's settings (/props)",
                                              on_failed=lambda _exc, u=url: self._on_props_job_failed(u))
        job.succeeded.connect(self._on_props_job_succeeded)
        job.start()

    def _on_props_job_succeeded(self, result) -> None:
        url, props, note, web_problem = result
        if url != self.url:
            return
        summary = sampling_summary(props)
        if is_router_props(props):  # a router has no sampling of its own: each model's instance has its own
            self.sampling_label.setText("Sampling: each model's own defaults (the router's command line, or the "
                                        "model's preset).")
        else:
            self.sampling_label.setText(f"Sampling (the server's defaults, from its profile): {summary}" if summary
                                        else "Sampling: the server's own defaults (it does not list them).")
        self.template_label.setText(note)
        self.template_label.setVisible(bool(note))
        self._web_problem = web_problem
        self._update_controls()

    def _on_props_job_failed(self, url: str) -> None:
        if url == self.url:
            self.sampling_label.setText("Sampling: the server's own defaults (it did not say which).")

    def _update_controls(self) -> None:
        ready, busy = self.url is not None, self.session.busy
        no_model = self._router_items is not None and self.picked_model() is None  # a router listing no models
        self.send_button.setEnabled(ready and not busy and not no_model)
        self.model_combo.setEnabled(not busy)
        if ready and no_model:
            self._show_message(NO_ROUTER_MODEL, error=True)
        elif self.message_label.text() == NO_ROUTER_MODEL:
            self._show_message("")
        self.input_edit.setReadOnly(busy)
        self.stop_button.setEnabled(busy and not self.session.is_stopping)
        self.copy_button.setEnabled(self.last_reply is not None and bool(self.last_reply.text))
        self.clear_button.setEnabled(not self.transcript.document().isEmpty() or busy)
        self.web_button.setEnabled(ready and not self._web_problem)
        tip = "Open llama-server's own chat page in your browser."
        if self._has_key:
            tip += (" This server needs its API key: the page asks for it (the key is never put in the address, "
                    "where the browser's history would keep it).")
        if not ready:
            tip = "Start a server in the Live tab first."
        elif self._web_problem:
            tip = self._web_problem
        self.web_button.setToolTip(tip)

    def _show_message(self, text: str, *, error: bool = False) -> None:
        self.message_label.setStyleSheet("color: #c62828" if error else "")
        self.message_label.setText(text)

    def _cursor_at_end(self) -> tuple[QTextCursor, bool]:
        bar = self.transcript.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        cursor = QTextCursor(self.transcript.document())  # not the view's own: a selection the user made stays
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor, at_bottom

    def _follow(self, at_bottom: bool) -> None:
        if at_bottom:
            bar = self.transcript.verticalScrollBar()
            bar.setValue(bar.maximum())

    def _insert(self, text: str, *, italic: bool = False, muted: bool = False) -> None:
        cursor, at_bottom = self._cursor_at_end()
        fmt = QTextCharFormat()
        fmt.setFontItalic(italic)
        if muted:
            fmt.setForeground(self.palette().placeholderText())
        cursor.insertText(text, fmt)
        self._follow(at_bottom)

    def _append_turn(self, who: str, text: str) -> None:
        cursor, at_bottom = self._cursor_at_end()
        if not self.transcript.document().isEmpty():
            cursor.insertBlock()
            cursor.insertBlock()
        bold = QTextCharFormat()
        bold.setFontWeight(QFont.Weight.Bold)
        cursor.insertText(who, bold)
        cursor.insertBlock()
        cursor.insertText(text, QTextCharFormat())
        self._follow(at_bottom)

    def _append_note(self, text: str) -> None:
        """A small grey line under the reply (its speed row, or what happened)."""
        cursor, at_bottom = self._cursor_at_end()
        cursor.insertBlock()
        fmt = QTextCharFormat()
        fmt.setForeground(self.palette().placeholderText())
        fmt.setFontPointSize(max(self.font().pointSizeF() - 1, 7))
        cursor.insertText(text, fmt)
        self._follow(at_bottom)
