"""One home per fact: llama-server's flag spellings, secrets and LLAMA_ARG_* names live in core/flags.py only.

The scan reads every module of the app (not its data files) and fails on a string literal that is a flag
spelling the flags table knows, a `LLAMA_ARG_*` name or a secret variable's name, anywhere but in
`llm_tuner/core/flags.py`. Docstrings and the app's own command-line options (argparse) are not flags of
llama-server. The allow-list below names the few literals that must stay, each with why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from llm_tuner.core import flags

ROOT = Path(__file__).resolve().parents[2] / "llm_tuner"
HOME = ROOT / "core" / "flags.py"

# (module relative to llm_tuner/, literal): why it may stay
ALLOWED: dict[tuple[str, str], str] = {
    # llm-tuner's own command line (not llama-server's): `llm-tuner --version`, `-h`, `--help`
    ("app.py", "--version"): "the app's own option",
    ("app.py", "-h"): "the app's own option",
    ("app.py", "--help"): "the app's own option",
}
SECRET_VARIABLES = {flags.API_KEY_ENV, flags.HF_TOKEN_ENV}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.add(id(node.value))
    return out


def _argparse_option_nodes(tree: ast.AST) -> set[int]:
    """String arguments of `.add_argument(...)` / `.add_parser(...)`: the app's own CLI options."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "add_argument", "add_parser"):
            for a in node.args:
                if isinstance(a, ast.Constant):
                    out.add(id(a))
    return out


def offending_literals(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstring_nodes(tree) | _argparse_option_nodes(tree)
    spellings = flags.all_spellings()
    rel = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
            continue
        text = node.value
        bad = text in spellings or text in SECRET_VARIABLES or re.fullmatch(r"LLAMA_ARG_[A-Z0-9_]*", text)
        if bad and (rel, text) not in ALLOWED:
            found.append((node.lineno, node.col_offset, text))
    return [(line, text) for line, _col, text in sorted(found)]


def test_flag_spellings_secrets_and_llama_arg_names_live_only_in_the_flags_module():
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == HOME or "data" in path.relative_to(ROOT).parts:
            continue
        for line, text in offending_literals(path):
            problems.append(f"{path.relative_to(ROOT.parent)}:{line}: {text!r}")
    assert not problems, ("llama-server facts spelled outside core/flags.py (ask the flags module by key "
                          "instead):\n" + "\n".join(problems))


def test_the_scan_catches_a_spelling(tmp_path):
    """The scan is not vacuous: a module that spells a flag is caught, its docstring is not."""
    mod = tmp_path / "core" / "_one_home_probe.py"  # never inside the package: a parallel run would scan it
    mod.parent.mkdir()
    mod.write_text('"""Mentions --ctx-size in prose."""\nX = ["--ctx-size", "4096"]\nY = "LLAMA_ARG_THREADS"\n')
    assert [t for _l, t in offending_literals(mod, root=tmp_path)] == ["--ctx-size", "LLAMA_ARG_THREADS"]


def test_every_allowed_literal_is_still_there():
    """A stale allow-list entry is a fact that moved home: drop it."""
    for (rel, text), _why in ALLOWED.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.Constant) and n.value == text for n in ast.walk(tree)), (rel, text)
