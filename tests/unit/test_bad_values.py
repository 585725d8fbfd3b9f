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
