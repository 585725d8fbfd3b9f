"""No import circle inside any package, function-local imports counted.

import-linter checks the direction between packages (core <- store/services <- qt <- ui/cli); this test checks
the modules inside each of them. A circle hidden by an import inside a function still ties two modules into one
(neither can be read, tested or moved alone), so every import in a module counts, wherever it sits.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "llm_tuner"
ROOT = "llm_tuner"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules this module imports: `from pkg import sub` names the submodule when there is one."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(mod, path, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif source in known:
                    found.add(source)
    found.discard(mod)
    return found


def _graph() -> dict[str, set[str]]:
    known = _module_names()
    return {mod: _targets(mod, path, known) for mod, path in known.items()}


def _package_of(mod: str) -> str:
    """The top-level package a module belongs to (llm_tuner.services, llm_tuner.core, ...)."""
    return ".".join(mod.split(".")[:2])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_inside_a_package():
    graph = _graph()
    inner = {mod: {t for t in targets if _package_of(t) == _package_of(mod)} for mod, targets in graph.items()}
    cycles = _cycles(inner)
    assert cycles == [], "import circles (function-local imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_circle_through_a_function_local_import(tmp_path):
    """The finder itself: a -> b at the top, b -> a inside a function, is one circle."""
    assert _cycles({"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}) == [["p.a", "p.b"]]
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "b.py").write_text("def f():\n    from p.a import x\n    return x\n")
    known = {"p.a": pkg / "a.py", "p.b": pkg / "b.py"}
    assert _targets("p.b", pkg / "b.py", known) == {"p.a"}
