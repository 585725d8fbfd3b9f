"""Issue 35: bad values at the entry points say what is wrong in plain words, never a traceback or Python's own
words (`invalid literal for int()`, a KeyError). The CLI runs in-process on the real demo model's header."""

from __future__ import annotations

import pytest

from llm_tuner.cli import main

PYTHON_WORDS = ("Traceback", "invalid literal", "could not convert", "KeyError", "ValueError", "base 10",
                "object has no attribute", "unsupported operand", "division by zero", "index out of range")


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def assert_plain(text: str) -> None:
    for w in PYTHON_WORDS:
        assert w not in text, text


@pytest.mark.parametrize(("args", "words"), [
    (("-ctk", "q9_0"), "-ctk q9_0: not a K/V cache type of llama-server; it takes f32, f16"),
    (("-c", "abc"), "-c needs a whole number, got 'abc'"),
    (("-ngl", "x"), "-ngl needs a number of layers, 'auto' or 'all', got 'x'"),
    (("-fitt", "1,z"), "-fitt needs whole numbers separated by commas"),
])
def test_estimate_says_a_bad_value_in_plain_words(capsys, demo_model, args, words):
    code, out, err = cli(capsys, "estimate", "--", "-m", demo_model, *args)
    assert code == 2 and words in err and not out
    assert_plain(err)


@pytest.mark.parametrize(("param", "values", "words"), [
    ("ub", "64,abc", "-ub needs a whole number, got 'abc'"),
    ("--cache-type-k", "f16,q9_0", "--cache-type-k takes f32, f16"),
    ("sm", "layer,sideways", "-sm takes none, layer, row, tensor, got 'sideways'"),
])
def test_sweep_refuses_a_bad_value_before_any_server_starts(capsys, tiny_model, param, values, words):
    """Item 4: `sweep --param ub --values 64,abc` started a server for `abc`, stored a failed run and exited 0."""
    code, out, err = cli(capsys, "sweep", f"--param={param}", "--values", values, "--prompt-tokens", "8",
                         "--gen-tokens", "2", "--reps", "1", "--warmup", "0", "--", "-m", tiny_model, "-c", "512")
    assert code == 2 and words in err and "nothing was started" in err
    assert_plain(err)
    assert cli(capsys, "runs", "list", "--json")[1].strip() == "[]"  # no run, failed or not


@pytest.mark.parametrize(("knob", "words"), [("ub=64,abc", "--ubatch-size needs a whole number, got 'abc'"),
                                             ("kv=f16,q9_0", "--cache-type-k takes f32, f16"),
                                             ("custom:--temp=0.5,hot", "--temp needs a number, got 'hot'")])
def test_tune_refuses_a_bad_knob_value_before_any_server_starts(capsys, tiny_model, knob, words):
    code, out, err = cli(capsys, "tune", "--knob", knob, "--budget", "60", "--", "-m", tiny_model, "-c", "512")
    assert code == 2 and words in err and "nothing was started" in err
    assert_plain(err)
