"""AppState, the workspace's Qt face (issue 36): an attribute write goes through the workspace's setter and is
said once as its signal; a signal a view emits itself reaches the workspace's Qt-free listeners once; the
settings are the workspace's."""

from __future__ import annotations

from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext, AppState
from llm_tuner.store.db import open_engine


def test_a_write_is_said_once_as_its_signal():
    state = AppState()
    heard: list[tuple] = []
    state.workspace.add_callback(lambda *event: heard.append(("workspace", event[0])))
    state.profile_changed.connect(lambda p: heard.append(("profile_changed", p.ctx_size)))
    state.profile_meta_changed.connect(lambda: heard.append(("profile_meta_changed",)))
    state.profile_name = "gemma"  # what panels and tests wrote without a signal before
    state.profile_name = "gemma"
    state.set_profile(LaunchProfile(ctx_size=4096))
    state.set_profile(LaunchProfile(ctx_size=4096))
    assert heard == [("profile_meta_changed",), ("workspace", "profile_meta"),
                     ("profile_changed", 4096), ("workspace", "profile")]
    assert state.workspace.profile_name == "gemma" and state.profile.ctx_size == 4096


def test_a_signal_a_view_emits_reaches_the_workspace_once_and_back():
    state = AppState()
    workspace_heard: list[tuple] = []
    signal_heard: list[tuple] = []
    state.workspace.add_callback(lambda *event: workspace_heard.append(event))
    state.status_message_posted.connect(lambda text: signal_heard.append(("status", text)))
    state.compare_requested.connect(lambda a, b: signal_heard.append(("compare", a, b)))
    state.bench_runs_changed.connect(lambda: signal_heard.append(("runs",)))
    state.status_message_posted.emit("from a view")
    state.compare_requested.emit(1, 2)
    state.bench_runs_changed.emit()
    state.workspace.post_status("from the workspace")
    state.workspace.runs_changed()
    assert workspace_heard == [("status_message", "from a view"), ("compare", 1, 2), ("bench_runs",),
                               ("status_message", "from the workspace"), ("bench_runs",)]
    assert signal_heard == [("status", "from a view"), ("compare", 1, 2), ("runs",),
                            ("status", "from the workspace"), ("runs",)]


def test_requests_and_the_profile_store(qtbot):
    state = AppState()
    with qtbot.waitSignal(state.new_server_requested, timeout=1000):
        state.workspace.request_new_server()
    state.workspace.profile_store_busy = True
    assert state.store_busy
    with qtbot.waitSignal(state.store_settled, timeout=1000):
        state.workspace.profile_store_busy = False
    assert not state.store_busy


def test_the_settings_are_the_workspaces(tmp_path):
    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "db.sqlite"))
    heard: list[Settings] = []
    ctx.state.settings_changed.connect(heard.append)
    new = Settings(model_folders=[str(tmp_path)])
    ctx.settings = new
    ctx.settings = Settings(model_folders=[str(tmp_path)])  # equal: nothing to say
    assert heard == [new] and ctx.state.workspace.settings is new and ctx.settings is new
    other = Settings(model_folders=["/elsewhere"])
    ctx.state.settings_changed.emit(other)  # a view's own emit, as before
    assert ctx.settings is other and heard == [new, other]
