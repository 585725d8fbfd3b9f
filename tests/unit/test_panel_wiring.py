"""Panels talk through the workspace, never through each other's widgets (issue 36; docs/ARCHITECTURE.md, state/).

The main window constructs the panels, puts them in its tabs and docks and calls only the hooks below; a menu
action is a workspace request the owning panel hears. A panel module imports no other panel, only its own
sub-widgets (the modules named after it) and the shared widgets listed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "llm_tuner" / "ui"

# what the main window may call on a panel (layout and quit, not another view's work)
WINDOW_HOOKS = {
    "take_log_console",  # the Live tab's log console becomes the window's bottom dock
    "quit_question",  # closing the window asks what quitting would stop
}
# modules of ui/panels/ that several families use, each with its reason
SHARED = {
    "bench_tables": "make_table, the one result-table helper of Benchmarks, Compare and Tune",
}
# sub-widget modules whose name does not start with their panel's
FAMILY = {"router_plan": "plan", "log_console": "live"}


def _family(module: str) -> str:
    return FAMILY.get(module, module.split("_")[0])


def window_violations(source: str) -> list[str]:
    """Each place where the main window's code reaches into a panel: an attribute of `self.<panel>` that is
    not a hook, or a panel bound to another name (whose widgets would then be reached unchecked)."""
    tree = ast.parse(source)
    panel_classes = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and (node.module or "").startswith("llm_tuner.ui.panels.") for alias in node.names
                     if alias.name.endswith("Panel")}
    panels = {target.attr for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
              and node.value.func.id in panel_classes
              for target in node.targets if isinstance(target, ast.Attribute)}

    def is_panel(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in panels and isinstance(node.value, ast.Name)
                and node.value.id == "self")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_panel(node.value) and node.attr not in WINDOW_HOOKS:
            found.append(f"line {node.lineno}: self.{node.value.attr}.{node.attr}")  # type: ignore[attr-defined]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                and is_panel(node.value):
            found.append(f"line {node.lineno}: self.{node.value.attr} bound to a name")  # type: ignore[attr-defined]
    return found


def panel_import_violations(module: str, source: str) -> list[str]:
    """Each import of a ui/panels module that `module` (a module of ui/panels) may not make."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if not name.startswith("llm_tuner.ui.panels."):
                continue
            other = name.removeprefix("llm_tuner.ui.panels.")
            if other.endswith("_panel"):
                found.append(f"{module} imports the panel {other}")
            elif other not in SHARED and _family(other) != _family(module):
                found.append(f"{module} imports {other}, a sub-widget of another panel")
    return found


def reach_violations(source: str) -> list[str]:
    """Each place where a view that is not a panel (the quick start) reaches into one: an import of a panel
    module or of the main window, a `*_panel` attribute, or another object's private attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("llm_tuner.ui.panels", "llm_tuner.ui.main_window")):
            found.append(f"line {node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr.endswith("_panel"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            found.append(f"line {node.lineno}: another object's private .{node.attr}")
    return found


def test_the_quick_start_acts_through_the_workspace_only():
    found = reach_violations((UI / "quick_start.py").read_text(encoding="utf-8"))
    assert not found, ("the quick start reaches into a panel (read the workspace, ask through a workspace "
                       f"request the owning panel listens to): {found}")


def test_the_main_window_wires_panels_only_through_the_workspace():
    found = window_violations((UI / "main_window.py").read_text(encoding="utf-8"))
    assert not found, ("the main window reaches into a panel (use a workspace request the panel listens to, "
                       f"or add a hook to WINDOW_HOOKS with its reason): {found}")


def test_a_panel_imports_no_other_panel():
    found = [v for path in sorted((UI / "panels").glob("*.py")) if path.stem != "__init__"
             for v in panel_import_violations(path.stem, path.read_text(encoding="utf-8"))]
    assert not found, found


def test_the_checks_find_what_they_forbid():
    """The checks above are not vacuous: the wirings issue 36 removed are each found."""
    window = """
from llm_tuner.ui.panels.live_panel import LivePanel
from llm_tuner.ui.panels.bench_panel import BenchPanel
class W:
    def __init__(self, ctx):
        self.live_panel = LivePanel(ctx)
        self.bench_panel = BenchPanel(ctx)
        self.log = self.live_panel.take_log_console()
        self.tabs.addTab(self.live_panel, "Live")
        self.action(self.live_panel.new_server_button.click)
        live = self.live_panel
    def run_benchmark(self):
        if not self.bench_panel.is_running():
            self.bench_panel.run_button.click()
"""
    found = window_violations(window)
    assert {f.split(": ", 1)[1] for f in found} == {  # ast.walk's order: compared as a set
        "self.live_panel.new_server_button", "self.live_panel bound to a name", "self.bench_panel.is_running",
        "self.bench_panel.run_button"}
    assert panel_import_violations("tune_panel", "from llm_tuner.ui.panels.profile_panel import ProfilePanel")
    assert panel_import_violations("tune_form", "from llm_tuner.ui.panels.plan_speed import PlanSpeedBox")
    assert not panel_import_violations("tune_panel", "from llm_tuner.ui.panels.tune_form import TuneForm")
    assert not panel_import_violations("compare_panel", "from llm_tuner.ui.panels.bench_tables import make_table")
    quick_start = """
from llm_tuner.ui.panels.profile_panel import ProfilePanel
class Q:
    def _state(self):
        w = self.window
        n = w.profile_panel.names_list.count()
        self._say(n)
    def _on_second_clicked(self):
        p = self.profiles
        p._on_field_edited()
        self.workspace.request_profile_variant("ub256", {"ubatch_size": 256})
"""
    assert {f.split(": ", 1)[1] for f in reach_violations(quick_start)} == {
        "imports llm_tuner.ui.panels.profile_panel", ".profile_panel", "another object's private ._on_field_edited"}
