"""ARCHITECTURE.md's rules that import-linter cannot express (stdlib modules, Qt submodules)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "llm_tuner"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _modules(sub: str = ""):
    for path in sorted((PKG / sub).rglob("*.py")):
        yield path.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", "."), _imports(path)


def _top(name: str) -> str:
    return name.split(".")[0]


def test_core_imports_only_stdlib_pydantic_and_gguf():
    allowed_third_party = {"pydantic", "gguf", "numpy", "llm_tuner"}
    forbidden_stdlib = {"subprocess", "threading", "socket", "asyncio", "multiprocessing", "concurrent", "http",
                        "urllib"}
    for mod, imports in _modules("core"):
        for name in imports:
            top = _top(name)
            assert top not in forbidden_stdlib, f"{mod} imports {name}: core does no I/O, threads or processes"
            assert top in sys.stdlib_module_names or top in allowed_third_party, f"{mod} imports {name}"
            if top == "llm_tuner":
                assert name.startswith("llm_tuner.core"), f"{mod} imports {name}: core imports only core"


def test_qt_layer_uses_qtcore_only():
    for mod, imports in _modules("qt"):
        bad = {n for n in imports if n.startswith(("PySide6.QtWidgets", "PySide6.QtGui", "pyqtgraph"))}
        assert not bad, f"{mod} imports {bad}: qt/ is QtCore only"


def test_processes_are_started_only_in_services_process():
    """One spawner (own process group, parent-death signal, stop escalation): no other module imports
    subprocess or multiprocessing, and exactly one module calls Popen."""
    owner = "llm_tuner.services.process"
    for mod, imports in _modules():
        if "subprocess" in imports or "multiprocessing" in imports:
            assert mod == owner, f"{mod} imports subprocess: only {owner} starts processes"
    callers = sorted(path.relative_to(PKG.parent).as_posix() for path in PKG.rglob("*.py")
                     if "Popen(" in path.read_text(encoding="utf-8"))
    assert callers == ["llm_tuner/services/process.py"], callers
    spawns = [p for p in PKG.rglob("*.py") for fn in ("os.fork(", "os.spawn", "os.system(", "os.exec", "pty.spawn(")
              if fn in p.read_text(encoding="utf-8")]
    assert spawns == [], spawns


def test_no_silent_except_exception_in_services():
    """A service that survives a failure on purpose logs it once per kind (services.failures.log_once) or keeps
    it for the user; `except Exception: pass` loses it without a trace."""
    import re

    silent = re.compile(r"except (?:Exception|BaseException)\b[^\n]*:[^\n]*\n\s*pass\b")
    found = [str(p.relative_to(PKG.parent)) for p in (PKG / "services").rglob("*.py")
             if silent.search(p.read_text(encoding="utf-8"))]
    assert found == [], found


def test_one_importer_each_for_pynvml_and_pyamdgpuinfo():
    for mod, imports in _modules():
        if "pynvml" in imports:
            assert mod == "llm_tuner.services.telemetry.nvml", mod
        if "pyamdgpuinfo" in imports:
            assert mod == "llm_tuner.services.telemetry.amd", mod


def test_every_file_the_package_reads_at_run_time_ships_in_a_wheel():
    """A non-editable install (a wheel) only has what package-data names: prompts, icon, catalog, migrations."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["llm_tuner"]
    package = root / "llm_tuner"
    data_files = [p for folder in ("data", "store/migrations") for p in (package / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts]
    missing = [str(p.relative_to(package)) for p in data_files
               if not any(fnmatch.fnmatch(str(p.relative_to(package)), pat) for pat in patterns)]
    assert data_files and not missing, f"not in [tool.setuptools.package-data]: {missing}"
