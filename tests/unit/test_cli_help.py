"""Every `llm-tuner … --help` reads well: no flag or word broken at its hyphen at a line's end (`--models-`
then `max`), and no description line longer than the source's 110 columns (a reflow that ran past the
margin)."""

from __future__ import annotations

import argparse
import re

import pytest

from llm_tuner.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, path: str = "llm-tuner"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


@pytest.mark.parametrize("columns", ["80", "120"])
def test_no_help_breaks_a_word_at_its_hyphen(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    helps = {path: p.format_help() for path, p in _parsers(build_parser())}
    assert len(helps) > 40  # every command and subcommand
    broken = [
        (path, line)
        for path, text in helps.items()
        for line in text.splitlines()
        if re.search(r"[A-Za-z]-$", line)
    ]
    assert broken == []
    too_wide = [(path, line) for path, text in helps.items() for line in text.splitlines() if len(line) > 120]
    assert too_wide == []


def test_tune_help_lists_its_flags_in_whole_lines(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    text = dict(_parsers(build_parser()))["llm-tuner tune"].format_help()
    usage = text.split("\n\n")[2]  # the description's usage block, as written
    for flag in ("--screen-reps 2", "--final-rounds 2", "--no-speed-prune", "--binary PATH", "--dry-run"):
        assert flag in usage
    assert all(
        line.startswith("    llm-tuner ") or line.startswith(" " * 19 + "[") for line in usage.splitlines()
    )
    assert "`llm-tuner estimate --calibrate`" in " ".join(text.split())
