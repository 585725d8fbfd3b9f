"""`llm-tuner tune --dry-run --devices CUDA0=<MiB>` on this CPU-only machine (issue 21): the real CLI with the real
embedded llama-server (its --help and --list-devices) and a real random-weight GGUF that does not fit the planned
card. It lists placement and thread knobs, every placement candidate fits the card, and nothing is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.random_gguf import write_qwen3_dense, zero_weights

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "llm_tuner", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=240)


def test_dry_run_lists_placement_and_threads_within_the_planned_card(tmp_path, server_binary):
    with zero_weights():  # a dry run reads the header only: the weights' values are never loaded
        model = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=24, n_embd=1024, n_ff=3072, n_head=16,
                                  n_head_kv=8, head_dim=64, n_ctx_train=32768)
    mib = 1800
    out = _cli("tune", "--dry-run", "--json-lines", "--devices", f"CUDA0={mib}", "--", "-m", str(model), "-c", "8192")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    head, cands = lines[0], lines[1:]
    assert head["type"] == "dry_run" and head["needs_placement"] and head["margin_mib"] == 128
    keys = [k["key"] for k in head["knobs"]]
    assert keys[0] == "placement" and "t" in keys
    placed = [c for c in cands if c["knob"] == "placement" and c["value"] is not None]
    assert len(placed) >= 2 and all(c["fits"] for c in placed)
    for c in placed:  # none of them needs more than the card: each keeps the margin of what the plan gives it
        (gpu,) = c["gpus"]
        assert gpu["device"] == "CUDA0" and gpu["resident_mib"] + 128 <= gpu["budget_mib"] <= mib
        assert "--n-gpu-layers" in c["argv"] or "--fit-target" in c["argv"]
    assert {c["value"].split(":")[0] for c in placed} >= {"q4_0", "q8_0"}
    text = _cli("tune", "--dry-run", "--devices", f"CUDA0={mib}", "--", "-m", str(model), "-c", "8192")
    assert "placement and K/V type are raced together" in text.stdout and "\nt (" in text.stdout
    # nothing was started or stored: no run, no tune in the history (the CLI's data folder, read here: two more
    # `runs list`/`tunes list` processes would cost their start-up, several seconds each on a busy machine)
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.store.tunes import TuneRepository

    engine = open_engine(database_path())
    try:
        assert RunRepository(engine).list_runs() == [] and TuneRepository(engine).list_tunes() == []
    finally:
        engine.dispose()
