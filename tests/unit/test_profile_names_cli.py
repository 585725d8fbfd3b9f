"""`llm-tuner profile rename|delete|duplicate` and `--json` on `profile command`, `workers add|remove` as a script
uses them: real profiles in a real SQLite file, real settings; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.services.settings_store import database_path, load_settings
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository


def run(capsys, *argv: str):
    code = main(list(argv))
    out = capsys.readouterr()
    try:
        return code, json.loads(out.out), out.err
    except ValueError:
        return code, out.out, out.err


@pytest.fixture
def saved(capsys):
    """A saved profile `chat` with two versions (the second with an API key)."""
    assert main(["profile", "import", "--name", "chat", "--", "-m", "q.gguf", "-c", "4096"]) == 1  # q.gguf: missing
    assert main(["profile", "import", "--name", "chat", "--", "-m", "q.gguf", "-c", "8192", "--api-key",
                 "s3cret"]) == 1
    capsys.readouterr()
    return ProfileRepository(open_engine(database_path()))


def test_rename_duplicate_delete_change_the_saved_profiles(saved, capsys):
    code, data, _ = run(capsys, "profile", "duplicate", "chat", "chat ub256", "--json")
    assert code == 0 and data == {"copy_of": "chat", "name": "chat ub256", "version": 1,
                                  "version_id": data["version_id"]}
    assert saved.latest("chat ub256").profile == saved.latest("chat").profile
    code, data, _ = run(capsys, "profile", "rename", "chat", "chat-8k", "--json")
    assert code == 0 and (data["renamed"], data["name"], data["version"]) == ("chat", "chat-8k", 2)
    assert len(saved.versions("chat-8k")) == 2 and saved.latest("chat") is None  # the versions follow the name
    kept = saved.latest("chat ub256").version_id
    code, data, _ = run(capsys, "profile", "delete", "chat ub256", "--json")
    assert code == 0 and data == {"deleted": "chat ub256"}
    assert saved.names() == ["chat-8k"] and saved.get_version(kept) is not None  # runs keep their settings
    code, text, _ = run(capsys, "profile", "rename", "chat-8k", "chat")
    assert code == 0 and text == "renamed 'chat-8k' to 'chat'\n"


@pytest.mark.parametrize(("argv", "words"), [
    (["profile", "rename", "nope", "x"], "no profile named 'nope'"),
    (["profile", "rename", "chat", "chat"], "already has that name"),
    (["profile", "rename", "chat", "  "], "a profile needs a name"),
    (["profile", "duplicate", "chat", "chat"], "a profile named 'chat' exists already"),
    (["profile", "duplicate", "nope", "x", "--json"], "no profile named 'nope'"),
    (["profile", "delete", "nope", "--json"], "no profile named 'nope'"),
])
def test_bad_names_are_one_line_and_exit_2_and_change_nothing(saved, capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and words in err, err
    assert saved.names() == ["chat"] and saved.latest("chat").version == 2


def test_profile_command_json_masks_the_key_unless_asked(saved, capsys):
    code, data, _ = run(capsys, "profile", "command", "chat", "--json")
    assert code == 0 and set(data) == {"argv", "env", "binary", "command"}
    assert data["argv"][:4] == ["--model", "q.gguf", "--ctx-size", "8192"]
    assert "s3cret" not in json.dumps(data) and "--api-key" in data["argv"]
    code, data, _ = run(capsys, "profile", "command", "chat", "--json", "--show-secrets")
    assert "s3cret" in data["argv"] and "s3cret" in data["command"]


def test_workers_add_and_remove_answer_in_json_without_the_token(capsys, monkeypatch):
    monkeypatch.setenv("LLM_TUNER_AGENT_TOKEN", "agent-token-xyz")
    code, data, _ = run(capsys, "workers", "add", "10.0.0.2:50052", "--agent", "http://10.0.0.2:50100", "--json")
    assert code == 0 and data == {"added": {"endpoint": "10.0.0.2:50052", "agent_url": "http://10.0.0.2:50100"},
                                  "agent_token_set": True}
    assert load_settings().rpc_workers[0].agent_token == "agent-token-xyz"
    code, data, _ = run(capsys, "workers", "remove", "10.0.0.2:50052", "--json")
    assert code == 0 and data == {"removed": "10.0.0.2:50052"} and load_settings().rpc_workers == []
    code, out, err = run(capsys, "workers", "remove", "10.0.0.2:50052", "--json")
    assert code == 2 and out == "" and "no worker 10.0.0.2:50052" in err
    code, out, err = run(capsys, "workers", "stop", "no-port", "--json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
