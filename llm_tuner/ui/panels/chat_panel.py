"""Chat: talk to the server selected in the Live tab, its replies streamed, each with its speed row.

The speed row is the server's own figures for that reply (prompt and generation speed, TTFT, draft
acceptance): the same numbers the Requests table shows for the request. Sampling is the server's own defaults,
which its command line (the profile's sampling fields) set; the line under the header shows them as the server
reports. "Open web UI" opens llama-server's own page in the browser; an API key never goes into its address
(the page asks for it).

A router (llama-server in router mode) serves several models and needs each request to name one: the model
picker beside the server's name lists the router's models (the Live slot's `router_models`, as its Models tab
shows them) and every question goes to the one picked; its speed row names it.

The main window calls `show_server(slot)` whenever the Live tab's selected server, its state or its router
models change: that is the whole hook. What the view says and which controls act is a `state.chat.ChatState`;
the panel binds its widgets to it. Nothing here waits on the network: the reply streams on a worker thread
(qt.chat_session), /props is read by a BackgroundJob.
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
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.chat import DEFAULT_REPLY_LIMIT, ChatReply, template_note, web_ui_problem
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.router_watch import RouterModels
from llm_tuner.state.chat import NO_SERVER, ChatState
from llm_tuner.state.live import ServerSlot

MODEL_TIP = ("The router's model that answers: it loads the model on the first question that names it (that "
             "one takes longer). The Live tab's Models tab lists them.")
SAMPLING_TIP = ("What each reply uses: the server's own defaults, which its command line set (the profile's "
                "sampling fields). Change them in the Profile tab and restart the server.")
SYSTEM_HINT = ("Optional: instructions sent before the conversation, e.g. “Answer in one sentence.” (the "
               "model's chat template decides how it reads them)")


class ChatPanel(QWidget):
    def __init__(self, ctx: AppContext | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.session = ChatSession(self)
        self.chat_state = ChatState(DEFAULT_REPLY_LIMIT)
        self._props_job: BackgroundJob | None = None

        self.server_label = QLabel(NO_SERVER)
        self.server_label.setTextFormat(Qt.TextFormat.PlainText)
        self.web_button = QPushButton("Open web UI")
        self.model_caption = QLabel("Model:")
        self.model_combo = QComboBox()  # a router's models: the one each question names
        self.model_combo.setToolTip(MODEL_TIP)
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
        self.limit_spin.setToolTip(self.chat_state.limit_tip)
        self.sampling_label = QLabel()
        self.sampling_label.setWordWrap(True)
        self.sampling_label.setStyleSheet("color: palette(placeholder-text)")
        self.sampling_label.setToolTip(SAMPLING_TIP)
        self.template_label = QLabel()  # the model has no chat template: why replies may be nonsense
        self.template_label.setWordWrap(True)
        self.template_label.setStyleSheet("color: #b8860b")
        self.template_label.hide()
        self.system_edit = QPlainTextEdit()
        self.system_edit.setPlaceholderText(SYSTEM_HINT)
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
        self.model_combo.currentIndexChanged.connect(self._on_model_combo_changed)
        self.limit_spin.valueChanged.connect(self._on_limit_spin_changed)
        self.chat_state.add_callback(self._on_chat_state_changed)
        self._update_controls()
        if ctx is not None:  # follows the Live tab's shown server, through the workspace
            ctx.state.server_shown.connect(self._on_state_server_shown)
            self._on_state_server_shown()

    def _on_state_server_shown(self) -> None:
        if self.ctx is not None:
            self.show_server(self.ctx.state.server, self.ctx.state.server_api_key)

    # -- the hook -----------------------------------------------------------------------------------
    @property
    def url(self) -> str | None:
        return self.chat_state.url

    @property
    def last_reply(self) -> ChatReply | None:
        return self.chat_state.last_reply

    def show_server(self, slot: ServerSlot | None, api_key: str | None = None) -> None:
        """Follow the Live tab's selected server slot (called on every change of it or its state); `api_key`
        is the key its clients send (LivePanel.api_key)."""
        if self.chat_state.show_server(slot, api_key) and self.chat_state.url is not None:
            self._read_props(self.chat_state.url, api_key)
        self._after_server(api_key)

    def set_router_models(self, listed: RouterModels | None) -> None:
        """Fill the model picker from a router's models (None: the server serves one model, and the picker
        hides). The picked model stays picked while the router lists it."""
        self.chat_state.set_router_models(listed)
        self._update_controls()

    def picked_model(self) -> str | None:
        """The router's model the next question names; None for a server of one model (or a router without
        any)."""
        return self.chat_state.picked_model

    def set_server(self, name: str, url: str | None, api_key: str | None, *,
                   waiting: str = NO_SERVER) -> None:
        """Chat with the server at `url` (None: none takes requests now, and `waiting` says why); `api_key`
        goes only in request headers."""
        if self.chat_state.set_server(name, url, api_key, waiting=waiting) and url is not None:
            self._read_props(url, api_key)
        self._after_server(api_key)

    def _after_server(self, api_key: str | None) -> None:
        self.session.set_server(self.chat_state.url, api_key)
        self._update_controls()

    # -- actions ------------------------------------------------------------------------------------
    def send(self, text: str | None = None) -> bool:
        """Send `text` (else the input's) as the next message; False when it cannot go now."""
        question = self.input_edit.toPlainText() if text is None else text
        ask = self.chat_state.ask(question, busy=self.session.busy)
        if ask is None:
            return False
        self.session.system_prompt = self.system_edit.toPlainText()
        self.session.model = ask.model
        self.session.max_tokens = ask.max_tokens
        if not self.session.ask(ask.question):
            return False
        note = self.chat_state.sent(ask)
        if note is not None:
            self._append_note(note)
        self.input_edit.clear()
        self._append_turn("You", ask.question)
        self._append_turn(self.chat_state.reply_author(ask), "")
        self._update_controls()
        return True

    def _on_send_clicked(self) -> None:
        self.send()

    def _on_stop_clicked(self) -> None:
        self.session.stop()
        self.chat_state.stopping()
        self._update_controls()

    def _on_copy_clicked(self) -> None:
        reply = self.chat_state.last_reply
        if reply is not None and reply.text:
            QGuiApplication.clipboard().setText(reply.text)
            self.chat_state.say("The last reply is copied.")

    def _on_clear_clicked(self) -> None:
        self.session.clear()
        self.transcript.clear()
        self.chat_state.cleared()
        self._update_controls()

    def _on_model_combo_changed(self, _index: int) -> None:
        self.chat_state.pick(self.model_combo.currentData())

    def _on_limit_spin_changed(self, value: int) -> None:
        self.chat_state.reply_limit = value

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
        self._append_note(self.chat_state.reply_finished(reply, self.session.asked_limit))
        self._update_controls()

    def _on_session_reply_failed(self, message: str) -> None:
        self._append_note(self.chat_state.reply_failed(message))
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
        self.chat_state.props_read(*result)

    def _on_props_job_failed(self, url: str) -> None:
        self.chat_state.props_failed(url)

    # -- state -> view ------------------------------------------------------------------------------
    def _on_chat_state_changed(self, what: str) -> None:
        state = self.chat_state
        if what == "server":
            self.server_label.setText(state.server_line)
            self.limit_spin.setToolTip(state.limit_tip)
        elif what == "models":
            self._fill_model_combo()
        elif what == "props":
            self.sampling_label.setText(state.sampling_text)
            self.template_label.setText(state.template_note)
            self.template_label.setVisible(bool(state.template_note))
        elif what == "message":
            text, error = state.message
            self.message_label.setStyleSheet("color: #c62828" if error else "")
            self.message_label.setText(text)
        self._update_controls()

    def _fill_model_combo(self) -> None:
        items = self.chat_state.router_items
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for model, state in items or ():
            self.model_combo.addItem(f"{model} ({state})", model)
        self.model_combo.setCurrentIndex(self.model_combo.findData(self.chat_state.picked_model))
        self.model_combo.blockSignals(False)
        self.model_caption.setVisible(items is not None)
        self.model_combo.setVisible(items is not None)

    def _update_controls(self) -> None:
        c = self.chat_state.controls(busy=self.session.busy, stopping=self.session.is_stopping,
                                     transcript_empty=self.transcript.document().isEmpty())
        self.send_button.setEnabled(c.send)
        self.model_combo.setEnabled(c.pick_model)
        self.input_edit.setReadOnly(c.input_read_only)
        self.stop_button.setEnabled(c.stop)
        self.copy_button.setEnabled(c.copy)
        self.clear_button.setEnabled(c.clear)
        self.web_button.setEnabled(c.web)
        self.web_button.setToolTip(c.web_tip)

    def _cursor_at_end(self) -> tuple[QTextCursor, bool]:
        bar = self.transcript.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        # not the view's own: a selection the user made stays
        cursor = QTextCursor(self.transcript.document())
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
