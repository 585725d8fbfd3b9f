"""The Live tab's sub-views without Qt (issue 36): the Requests feed's batches and "Show all", the History's
rows from a real SQLite history, and a router's Models: rows, summary, the warning, the plan's refusal of a
Load and what the router answered. Real GGUF files for the router's plan (tests/support/router_models)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.memory import host_device
from llm_tuner.core.memory.router import ModelPlan
from llm_tuner.core.server_endpoints import RouterModel
from llm_tuner.core.session import RequestRecord
from llm_tuner.services.router_presets import plan_profile
from llm_tuner.services.router_watch import ModelUsage, RouterModels
from llm_tuner.state.callbacks import declared
from llm_tuner.state.live_views import (
    AUTOLOAD_HINT,
    HISTORY_HEADERS,
    MODELS_HEADERS,
    NOT_IN_HISTORY,
    RequestsFeed,
    RouterModelsState,
    SessionHistory,
    all_requests,
    exit_cell,
    requests_labels,
)
from llm_tuner.store.db import open_engine
from llm_tuner.store.sessions import SessionRepository
from tests.support.router_models import write_three


def _record(i: int, model: str | None = None) -> RequestRecord:
    return RequestRecord(
        time_unix=1_000_000.0 + i,
        slot=0,
        task=i,
        cache_n=0,
        prompt_n=8,
        prompt_ms=4.0,
        prompt_per_second=2000.0,
        predicted_n=4,
        predicted_ms=40.0,
        predicted_per_second=100.0,
        model=model,
    )


@pytest.fixture
def sessions(tmp_path):
    engine = open_engine(tmp_path / "history.sqlite")
    yield SessionRepository(engine)
    engine.dispose()


# -- Requests ----------------------------------------------------------------------------------------------
def test_requests_land_in_batches_at_most_once_a_second_while_shown():
    feed = RequestsFeed(max_rows=50, every_s=1.0)
    assert feed.take(visible=True, now=0.0) == []  # nothing queued
    feed.add(_record(0))
    feed.add(_record(1))
    assert [r.task for r in feed.take(visible=True, now=10.0)] == [0, 1]  # the first batch lands at once
    feed.add(_record(2))
    assert feed.take(visible=True, now=10.5) == []  # shown: waits for the second
    assert [r.task for r in feed.take(visible=False, now=10.6)] == [2]  # hidden: no paint, each batch
    feed.add(_record(3))
    assert [r.task for r in feed.take(visible=True, now=10.7, force=True)] == [3]  # the timer's batch
    feed.add(_record(4))
    feed.clear()  # another session shown
    assert feed.take(visible=False) == []


def test_the_requests_words_say_what_the_table_leaves_out():
    empty = requests_labels(0, 0)
    assert empty.hint and not empty.trimmed and not empty.fit and empty.note == ""
    some = requests_labels(50, 50)
    assert not some.hint and not some.trimmed and some.fit
    trimmed = requests_labels(10_000, 12_345)
    assert trimmed.trimmed and trimmed.note.startswith("Showing the newest 10,000 of 12,345 requests")


def test_show_all_joins_the_history_to_the_newest_received_without_gaps_or_doubles():
    recs = [_record(i) for i in range(120)]
    # ten more reached the view while the history (110 stored) was read
    assert [r.task for r in all_requests(recs[:110], 115, recs[65:115])] == list(range(115))
    # the history ahead of the view: those come as usual
    assert [r.task for r in all_requests(recs[:110], 100, recs[50:100])] == list(range(100))


def test_show_all_reads_the_session_back_from_the_real_history(sessions):
    sid = sessions.begin(["llama-server"], started_unix=1_000_000.0)
    recs = [_record(i, ("first", "second")[i % 2]) for i in range(12)]
    sessions.add_requests(sid, recs[:10])
    feed = RequestsFeed(max_rows=5)
    said: list[tuple] = []
    feed.add_callback(lambda what, *d: said.append((what, *d)))
    feed.read_all(sessions, sid, lambda: (12, recs[7:12]))
    assert said[0] == ("reading", True) and said[1] == ("reading", False)
    what, rows, received = said[2]
    assert what == "all" and received == 12 and [r.task for r in rows] == list(range(12))
    assert [r.model for r in rows[:2]] == ["first", "second"]  # the history keeps each request's model
    said.clear()
    feed.read_all(sessions, sid, lambda: None)  # the view shows another session by then: nothing shown
    assert [w for w, *_ in said] == ["reading", "reading"]
    feed.read_all(None, sid, lambda: (1, []))
    assert said[-1] == ("note", NOT_IN_HISTORY)


# -- History -----------------------------------------------------------------------------------------------
def test_the_history_lists_sessions_newest_first_and_says_which_still_run(sessions):
    done = sessions.begin(["llama-server", "-m", "/m/a b.gguf"], started_unix=1_000_000.0)
    sessions.add_requests(done, [_record(0), _record(1)])
    sessions.end(done, exit_code=-9, exit_reason="killed by the user", ended_unix=1_000_100.0)
    running = sessions.begin(["llama-server", "-m", "/m/c.gguf"], started_unix=1_000_200.0)
    lost = sessions.begin(["llama-server"], started_unix=1_000_300.0)
    history = SessionHistory(sessions, lambda: {running})
    assert set(declared(SessionHistory)) == {"rows", "error"}
    history.load()
    rows = history.rows
    assert [r[0][0] for r in rows] == [str(lost), str(running), str(done)]
    assert all(len(r) == len(HISTORY_HEADERS) for r in rows)
    by_id = {int(r[0][0]): r for r in rows}
    assert by_id[running][4] == ("running", None)
    assert by_id[lost][4][0] == "not recorded"
    assert by_id[done][3][0] == "2" and by_id[done][4] == ("SIGKILL", "killed by the user")
    assert by_id[done][6] == ("llama-server -m '/m/a b.gguf'", "llama-server -m '/m/a b.gguf'")
    assert SessionHistory(None).rows == ()  # no store: no history, nothing asked


def test_a_history_that_cannot_be_read_says_why():
    class Broken:
        def history(self, limit: int = 100):
            raise OSError("disk gone")

    history = SessionHistory(Broken())
    history.load()
    assert history.error == "The server history could not be read: disk gone" and history.rows == ()


def test_the_exit_column_of_an_attach_and_of_a_launch_that_never_started(sessions):
    from llm_tuner.core.session import SessionInfo

    attach = SessionInfo(id=1, started_unix=0.0, argv=(), mode="attach", ended_unix=5.0)
    assert exit_cell(attach, running=False)[0] == "—"
    never = SessionInfo(id=2, started_unix=0.0, argv=("llama-server",), ended_unix=1.0)
    assert exit_cell(never, running=False) == ("did not start", "The server process did not start.")


# -- a router's Models -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """a and b each fit alone in the host's RAM, not together; "broken" has no plan."""
    folder = write_three(tmp_path_factory.mktemp("live-router"), ("a", "b"))
    host = host_device(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000)))
    _named, planned = plan_profile(
        import_command(f"--models-dir {folder} -c 4096 --cache-ram 0").profile, (), host
    )
    a, b = (planned.model(n).use_mib["Host"] for n in ("a", "b"))
    margin = planned.margins_mib.get("Host", 0)
    return replace(
        planned,
        models=(*planned.models, ModelPlan("broken", (), None, "unreadable")),
        budgets_mib={"Host": a + b + margin - 1.0},
        models_max=1,
    )


def _listed(plan, **status: str) -> RouterModels:
    models = tuple(
        RouterModel(id=n, status=s, source="models_dir", path=f"/m/{n}.gguf")
        for n, s in sorted(status.items())
    )
    return RouterModels(models=models, usage=(ModelUsage("a", rss_mib=812.4, load_s=2.5),), plan=plan)


def test_a_routers_models_show_their_state_memory_plan_and_speed(plan):
    state = RouterModelsState()
    assert set(declared(RouterModelsState)) == {"rows", "summary", "warning", "message"}
    state.show(
        _listed(plan, a="loaded", b="unloaded", broken="unloaded"),
        url="http://127.0.0.1:1",
        records=[_record(0, "a"), _record(1, "a")],
    )
    rows = {r[0]: dict(zip(MODELS_HEADERS, r, strict=True)) for r in state.rows}
    assert rows["a"]["State"] == "loaded" and rows["a"]["Loaded in"] == "2.5 s"
    assert rows["a"]["Memory (RSS)"] == "812 MiB" and rows["b"]["Memory (RSS)"] == "—"
    assert rows["a"]["Plan"].startswith("Host ") and rows["a"]["Plan"].endswith(" MiB")
    assert rows["broken"]["Plan"] == "no plan: unreadable"
    assert "t/s generation" in rows["a"]["Speed"] and rows["b"]["Speed"] == "—"
    assert rows["b"]["File"] == "/m/b.gguf" and rows["b"]["Found in"] == "models_dir"
    assert state.summary.startswith("3 model(s); loaded: a.") and "at most 1 at once fit" in state.summary
    assert state.warning == "" and state.loaded_names() == ["a"]
    assert state.can_unload("a") and not state.can_load("a")
    assert state.can_load("b") and not state.can_unload("b") and not state.can_load("nobody")


def test_a_load_that_does_not_fit_is_refused_with_its_figures_unless_overridden(plan):
    state = RouterModelsState()
    state.show(_listed(plan, a="loaded", b="unloaded"), url="http://127.0.0.1:1")
    assert not state.ask_load("b")  # nothing is asked of the router
    assert (
        state.message.startswith("Not loaded: b does not fit beside a: Host: ")
        and "MiB short" in state.message
    )
    assert state.ask_load("b", override=True) and state.message.startswith(
        "Loading b… (b does not fit beside a"
    )
    state.loaded("b", 3.04)
    state.done("b", "load", None)
    assert state.message == "b is loaded (in 3.0 s)."
    state.show(_listed(plan, a="loaded", b="loaded"), url="http://127.0.0.1:1")  # the list follows
    assert dict(zip(MODELS_HEADERS, state.rows[1], strict=True))["Loaded in"] == "3.0 s"  # timed here
    assert state.warning.startswith("The running models do not fit together: b does not fit beside a")
    assert state.warning.endswith(AUTOLOAD_HINT)
    assert state.ask_unload("a") and state.message == "Unloading a…"
    state.done("a", "unload", None)
    assert state.message == "The router unloads a; the list follows within seconds."
    state.done("a", "unload", "HTTP 500")
    assert state.message == "The router did not unload a: HTTP 500"


def test_without_a_server_or_a_list_nothing_loads(plan):
    state = RouterModelsState()
    state.show(None)
    assert state.rows == () and state.summary == "" and state.warning == ""
    state.show(_listed(plan, a="unloaded"))  # no URL: Load and Unload go nowhere
    assert not state.can_load("a") and not state.ask_load("a") and not state.ask_unload("a")
    state.show(replace(_listed(plan, a="unloaded"), error="the router stopped answering"), url="http://x")
    assert state.summary.endswith("the router stopped answering")


# -- the log console ---------------------------------------------------------------------------------------
def test_the_log_keeps_the_newest_lines_and_filters_by_level_and_text():
    from llm_tuner.services.logparse import LogLine
    from llm_tuner.state.live_views import LOG_FILTERS, LogLines, format_line

    log = LogLines(max_lines=4)
    batch = [
        LogLine("info", "main: listening on http://127.0.0.1:8080"),
        LogLine("warn", "slot 0: context shift"),
        LogLine("error", "failed to allocate CUDA0 buffer"),
        LogLine("debug", "print_timing: 12 t/s"),
    ]
    assert log.add(batch) == batch  # everything shown at first
    assert format_line(batch[2]) == "E failed to allocate CUDA0 buffer" and format_line(batch[0])[0] == "I"
    assert [x.level for x in log.set_filter(1, "")] == ["warn", "error"]  # warnings and errors
    shown = log.add([LogLine("output", "plain output"), LogLine("error", "again an ERROR")])
    assert [x.text for x in shown] == ["again an ERROR"]  # the filter holds for new lines too
    assert len(log.lines) == 4 and log.count_text == "4 lines"  # the ring keeps the newest
    assert [x.text for x in log.set_filter(LOG_FILTERS[-1][1], "error")] == ["again an ERROR"]  # any case
    log.clear()
    assert log.count_text == "0 lines" and log.set_filter(3, "") == []


def test_the_devices_note_says_what_the_plots_show():
    from llm_tuner.core.devices import GpuInfo
    from llm_tuner.state.live_views import devices_note

    assert devices_note(None) == "Detecting devices…"
    host = HostInfo(memory_total_mib=65536, memory_available_mib=60000)
    assert devices_note(DeviceInventory(host=host)).startswith(
        "No GPU found: the plots show the host CPU and RAM"
    )
    gpu = GpuInfo(name="CUDA0", backend="CUDA", vendor="nvidia", llama_names=("CUDA0",))
    assert devices_note(DeviceInventory(host=host, devices=(gpu,))).startswith("One curve per GPU")
