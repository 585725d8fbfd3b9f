"""The chat's stream: server-sent events as llama-server sends them (recorded from the embedded build with the demo
model, tests/data/chat/), a reply gathered from them with the server's own timings, and Stop.

The recordings are the raw bytes of /v1/chat/completions answers; their first lines (SSE comments, which the
parser must skip as it skips the server's keep-alives) give the command that produced each.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from llm_tuner.services.chat import (
    ReplyAccumulator,
    read_reply,
    sampling_summary,
    stream_reply,
    template_note,
    web_ui_problem,
)
from llm_tuner.services.client import BadAnswer, LlamaClient, ServerError, StreamCancelled, sse_events
from tests.support.fake_llama import FakeLlama, send, trickle

DATA = Path(__file__).parents[1] / "data" / "chat"


def recorded(name: str) -> bytes:
    return (DATA / name).read_bytes()


def cuts(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 100, 1 << 20])
def test_recorded_stream_reads_the_same_however_the_bytes_arrive(size):
    data = recorded("gemma3-270m-stream.sse")
    events = list(sse_events(cuts(data, size)))
    assert events == list(sse_events([data]))
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    reply = read_reply(events)
    assert reply.text and reply.finish_reason in ("stop", "length") and not reply.cancelled
    # the text is every delta's content, in order, and the figures are the last chunk's own timings
    pieces = [e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")]
    assert reply.text == "".join(pieces)
    timings = events[-1]["timings"]
    rec = reply.record
    assert (rec.prompt_n, rec.predicted_n, rec.predicted_per_second) == (
        timings["prompt_n"], timings["predicted_n"], timings["predicted_per_second"])
    assert rec.ttft_ms == timings["prompt_ms"] and rec.latency_ms == timings["prompt_ms"] + timings["predicted_ms"]
    assert rec.draft_n is None and rec.draft_acceptance is None


def test_recorded_drafted_stream_gives_the_draft_acceptance():
    events = list(sse_events([recorded("gemma3-270m-stream-ngram.sse")]))
    rec = read_reply(events).record
    timings = events[-1]["timings"]
    assert rec.draft_n == timings["draft_n"] > 0 and rec.draft_n_accepted == timings["draft_n_accepted"]
    assert rec.draft_acceptance == timings["draft_n_accepted"] / timings["draft_n"]


def test_recorded_props_give_the_sampling_the_server_uses():
    props = json.loads(recorded("gemma3-270m-props.json"))
    assert sampling_summary(props).startswith("temperature 0.3 · top-k 20 · top-p 0.9 · min-p 0.05 · repeat penalty 1")
    assert web_ui_problem(props, page_found=True) == ""
    assert "has no web page" in web_ui_problem(props, page_found=False)  # the embedded build: /props says on, "/" 404
    assert "switched off" in web_ui_problem({**props, "ui": False}, page_found=None)


def test_a_model_without_a_chat_template_is_said(demo_model, tmp_path):
    """The demo model's file has no template: the server's generic one is named as the likely cause of nonsense."""
    props = {**json.loads(recorded("gemma3-270m-props.json")), "model_path": str(demo_model)}
    assert "no chat template" in template_note(props)
    assert template_note({**props, "chat_template": "{{ messages }}"}) == ""  # the profile gave one
    assert template_note({**props, "model_path": str(tmp_path / "gone.gguf")}) == ""


def test_keep_alives_other_fields_and_done_end_as_the_server_means():
    data = (b": keep-alive\n\nevent: x\nid: 3\ndata: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\r\n\r\n"
            b":\n\ndata: [DONE]\n\ndata: {\"after\": \"done\"}\n\n")
    assert list(sse_events([data])) == [{"choices": [{"delta": {"content": "a"}}]}]
    assert list(sse_events([b'data: {"last": 1}'])) == [{"last": 1}]  # a stream cut before its blank line


@pytest.mark.parametrize("data,status,said", [
    (b'data: {"error": {"code": 400, "message": "request exceeds the available context size", '
     b'"type": "exceed_context_size_error"}}\n\n', 400, "exceeds the available context"),
    (b'error: {"error": {"code": 500, "message": "boom", "type": "server_error"}}\n\n', 500, "boom"),
])
def test_an_error_inside_a_stream_is_the_servers_error(data, status, said):
    with pytest.raises(ServerError, match=said) as info:
        list(sse_events([b'data: {"choices": []}\n\n', data]))
    assert info.value.status == status and not isinstance(info.value, BadAnswer)


def test_garbage_events_are_bad_answers():
    with pytest.raises(BadAnswer, match="not JSON"):
        list(sse_events([b"data: {nope\n\n"]))
    with pytest.raises(BadAnswer, match="not a JSON object"):
        list(sse_events([b"data: [1, 2]\n\n"]))


def test_a_reply_stopped_midway_keeps_its_text_and_has_no_figures():
    events = list(sse_events([recorded("gemma3-270m-stream.sse")]))

    def stopped():
        yield from events[:4]
        raise StreamCancelled()

    seen = []
    reply = read_reply(stopped(), lambda t, _r: seen.append(t))
    assert reply.cancelled and reply.record is None and reply.finish_reason is None
    assert reply.text == "".join(seen) == "".join(ReplyAccumulator().feed(e)[0] for e in events[:4])


def test_stop_ends_a_wait_for_the_first_word_at_once():
    """The server takes its time (a long prompt): Stop does not wait for it, nor for the client's timeout."""
    with FakeLlama(routes={"/v1/chat/completions": trickle(b"", 1.0, headers_too=True, forever=True)}) as fake:
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        t0 = time.monotonic()
        reply = stream_reply(fake.url, None, [{"role": "user", "content": "hi"}], cancel=cancel, timeout=60)
        assert reply.cancelled and reply.text == ""
        assert time.monotonic() - t0 < 10  # the poll's fraction of a second, not the 60 s timeout


def test_stop_between_words_and_the_key_goes_in_the_header_only():
    seen = {}

    def slow_words(h, body):
        seen["auth"], seen["path"], seen["body"] = h.headers.get("Authorization"), h.path, body
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        stop = h.server.stopping
        try:
            while not stop.is_set():
                h.wfile.write(b'data: {"choices": [{"delta": {"content": "word "}}]}\n\n')
                h.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    with FakeLlama(routes={"/v1/chat/completions": slow_words}) as fake:
        cancel = threading.Event()
        words = []

        def on_text(text, _reasoning):
            words.append(text)
            if len(words) == 3:
                cancel.set()

        reply = stream_reply(fake.url, "sk-secret", [{"role": "user", "content": "hi"}], cancel=cancel,
                             on_text=on_text)
    assert reply.cancelled and reply.text == "word word word "
    assert seen["auth"] == "Bearer sk-secret" and "sk-secret" not in seen["path"]
    assert seen["body"]["stream"] is True and seen["body"]["messages"] == [{"role": "user", "content": "hi"}]


def test_a_refused_chat_is_a_server_error_with_its_message():
    def refuse(h, _body):
        send(h, 400, {"error": {"code": 400, "message": "the request exceeds the available context size",
                                "type": "exceed_context_size_error"}})

    with FakeLlama(routes={"/v1/chat/completions": refuse}) as fake, LlamaClient(fake.url) as client:
        with pytest.raises(ServerError, match="exceeds the available context size") as info:
            list(client.chat_stream([{"role": "user", "content": "hi"}]))
    assert info.value.status == 400 and info.value.kind == "exceed_context_size_error"


def test_the_servers_own_reply_limit_is_read_in_every_spelling():
    """The Chat sends the lower of its limit and the server's -n (a request's limit replaces -n): every way a
    command gives -n counts (llama-server's --help: -n, --predict, --n-predict, LLAMA_ARG_N_PREDICT)."""
    from llm_tuner.services.chat import server_reply_limit

    for argv in (["-n", "32"], ["--predict", "32"], ["--n-predict", "32"], ["--n-predict=32"]):
        assert server_reply_limit(["-m", "m.gguf", *argv], {}) == 32, argv
    assert server_reply_limit(["-m", "m.gguf"], {"LLAMA_ARG_N_PREDICT": "32"}) == 32
    assert server_reply_limit(["-n", "64"], {"LLAMA_ARG_N_PREDICT": "32"}) == 64  # the flag wins, as in llama-server
    assert server_reply_limit(["-n", "-1"], {}) is None and server_reply_limit([], {}) is None
    assert server_reply_limit(["-n", "many"], {}) is None
