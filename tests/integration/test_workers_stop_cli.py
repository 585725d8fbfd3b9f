"""`llm-tuner workers stop HOST:PORT --json` on a real ggml-rpc-server of this user."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.services.rpc import WorkerPool, WorkerSpec, reachable

pytestmark = pytest.mark.server


def test_workers_stop_json_names_the_stopped_worker(server_binary, tmp_path, capsys):
    pool = WorkerPool()
    try:
        worker = pool.start(WorkerSpec(devices=("CPU",), threads=1, cache_dir=str(tmp_path / "cache")))
        assert main(["workers", "stop", worker.endpoint, "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"stopped": worker.endpoint, "pid": worker.pid}
        assert reachable(worker.endpoint, 0.3) is not None
        assert main(["workers", "stop", worker.endpoint, "--json"]) == 2
        out = capsys.readouterr()
        assert out.out == "" and f"no ggml-rpc-server of yours listens on {worker.endpoint}" in out.err
    finally:
        pool.stop_all()
