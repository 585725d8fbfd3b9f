"""`llm-tuner chat`: one question to the real llama-server (the tiny model), the reply streamed to stdout and the
server's own figures (the Chat tab's speed row) on stderr; --profile starts the profile's server for the reply and
stops it; bad input is one line and exit 2, a server that does not answer exit 1, never a traceback."""

from __future__ import annotations

import json

import psutil
import pytest

from llm_tuner.cli import main
from tests.support.fake_llama import GOOD_TIMINGS, FakeLlama, send

pytestmark = pytest.mark.server


def run(capsys, *argv: str):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_reply_streams_to_stdout_with_the_servers_figures_on_stderr(llama_server, capsys):
    code, out, err = run(capsys, "chat", "--url", llama_server.url, "--max-tokens", "8", "Say hello")
    assert code == 0, err
    assert out.strip() and out.endswith("\n")
    (speed,) = [ln for ln in err.splitlines() if ln.startswith("prompt ")]
    assert " tokens at " in speed and "generation 8 tokens at " in speed and "TTFT " in speed
    assert "stopped at the token limit" in err


def test_json_holds_the_text_and_the_servers_timings(llama_server, capsys):
    code, out, err = run(capsys, "chat", "--json", "--url", llama_server.url + "/", "--max-tokens", "5",
                         "--system", "Answer briefly.", "What is 2+2?")
    data = json.loads(out)
    assert code == 0, err
    assert data["finish_reason"] == "length" and not data["cancelled"] and isinstance(data["text"], str)
    t = data["timings"]
    assert t["predicted_n"] == 5 and t["prompt_n"] > 5 and t["predicted_per_second"] > 0 and t["ttft_ms"] > 0


def test_a_profile_starts_its_server_for_the_reply_and_stops_it(server_binary, tiny_model, capsys):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert main(["profile", "import", "--name", "tiny", "--", "-m", str(tiny_model), "-c", "1024", "-t", "2"]) in (0, 1)
    capsys.readouterr()
    code, out, err = run(capsys, "chat", "--profile", "tiny", "--json", "--max-tokens", "3", "Hi")
    assert code == 0, err
    assert json.loads(out)["timings"]["predicted_n"] == 3 and "starting 'tiny'" in err
    left = {p.pid for p in psutil.Process().children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE} - before
    assert left == set(), "the profile's server outlived the reply"


def test_a_reply_never_acts_on_the_terminal(capsys):
    """A reply's escape sequences (clear the screen, retitle the window) are printed as escapes; its lines stay."""
    chunks = [{"choices": [{"delta": {"content": "one\n\x1b[2J\x1b]0;owned\x07two"}}]},
              {"choices": [{"delta": {}, "finish_reason": "stop"}], "timings": GOOD_TIMINGS}]
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    with FakeLlama(routes={"/v1/chat/completions": lambda h, _b: send(h, 200, stream, "text/event-stream")}) as fake:
        code, out, err = run(capsys, "chat", "--url", fake.url, "hi")
    assert code == 0, err
    assert out == "one\n\\x1b[2J\\x1b]0;owned\\x07two\n" and "\x1b" not in err


@pytest.mark.parametrize(("argv", "code", "words"), [
    (["chat", "--url", "localhost:8080", "hi"], 2, "is not a server's address"),
    (["chat", "--url", "http://127.0.0.1:x", "hi"], 2, "the port is not a number"),
    (["chat", "--url", "http://127.0.0.1:9", "hi"], 1, "cannot be reached"),
    (["chat", "--url", "http://127.0.0.1:9", "  "], 2, "nothing to ask"),
    (["chat", "--profile", "nope", "hi"], 2, "no saved profile named 'nope'"),
])
def test_bad_input_is_one_line(capsys, argv, code, words):
    got, out, err = run(capsys, *argv)
    assert got == code and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_a_profile_whose_server_cannot_start_says_why(server_binary, tmp_path, capsys):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"model": str(bad), "ctx_size": 512}))
    code, out, err = run(capsys, "chat", "--profile", str(profile), "hi")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "did not start" in err.splitlines()[-1]
