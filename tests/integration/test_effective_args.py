"""A profile's LLAMA_ARG_* variables count everywhere: the CLI estimate, the Plan and the launched server agree.

llama-server reads `LLAMA_ARG_CTX_SIZE=4096` as `--ctx-size 4096`; a plan that ignored it planned the trained
context (32k for the demo model) while the server ran 4096. Here the tiny model (trained context 4096) runs 2048.
"""

from __future__ import annotations

import json
import threading

import httpx

from llm_tuner.cli import main as cli_main
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.launch import plan_from_profile
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import ServerState, StateChanged

CTX = 2048  # not the tiny model's trained 4096: a plan or a server that ignored the variable would say 4096


def _profile(model) -> LaunchProfile:
    return LaunchProfile(model=str(model), threads=2, parallel=1, env={"LLAMA_ARG_CTX_SIZE": str(CTX)})


def test_estimate_plans_a_profile_file_with_its_environment(tmp_path, tiny_model, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"profile": _profile(tiny_model).to_dict()}))
    assert cli_main(["estimate", "--json", "--profile", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["n_ctx"] == CTX
    # the same profile saved under a name
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    ProfileRepository(open_engine(database_path())).save("ctx-env", _profile(tiny_model))
    assert cli_main(["estimate", "--json", "--profile", "ctx-env"]) == 0
    assert json.loads(capsys.readouterr().out)["n_ctx"] == CTX


def test_a_profile_file_with_an_unknown_key_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"model": "m.gguf", "ctx_sise": 4096}))
    assert cli_main(["estimate", "--json", "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'ctx_sise'" in err and str(path) in err
    path.write_text(json.dumps({"model": "m.gguf", "ctx_size": "big"}))
    assert cli_main(["profile", "command", str(path)]) == 2
    assert "'ctx_size'" in capsys.readouterr().err


def test_the_plan_panel_plans_the_variable_too(qtbot, tmp_path, tiny_model):
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.ui.panels.plan_panel import PlanPanel

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "plan.sqlite"))
    panel = PlanPanel(ctx)
    qtbot.addWidget(panel)
    ctx.state.set_profile(_profile(tiny_model))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    assert panel.recompute_now().n_ctx == CTX


def test_the_launched_server_runs_the_planned_context(server_binary, tiny_model):
    plan = plan_from_profile(server_binary, _profile(tiny_model))
    ready = threading.Event()

    def on_event(ev) -> None:
        if isinstance(ev, StateChanged) and ev.state == ServerState.READY:
            ready.set()

    session = ServerSession(plan, on_event)
    session.start()
    try:
        assert ready.wait(120)
        props = httpx.get(f"{plan.url}/props", timeout=10).json()
        assert props["default_generation_settings"]["n_ctx"] == CTX
    finally:
        session.stop()
