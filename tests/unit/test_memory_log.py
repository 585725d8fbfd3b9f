"""core.memory_log on recorded real llama.cpp output (tests/data/memory/README.md says how each was made)."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.core.memory_log import parse_fit_print, parse_fitted_args, parse_memory_log

DATA = Path(__file__).parents[1] / "data" / "memory"


def test_server_lv4_buffers_and_breakdown():
    log = parse_memory_log((DATA / "llama-server-lv4-demo.log").read_text())
    assert log.by_buffer("model") == {"CPU_Mapped": 235.16, "CPU_REPACK": 12.66}
    assert log.total("kv") == 133.5 and log.total("compute") == 52.78 and log.total("output") == 4.0
    assert log.kv_caches == [{"mib": 96.0, "cells": 32768, "layers": 3, "seqs": (4, 1)},
                             {"mib": 37.5, "cells": 2560, "layers": 15, "seqs": (4, 1)}]
    assert log.context["n_ctx"] == 32768 and log.context["n_seq_max"] == 4 and log.context["n_ubatch"] == 512
    host = next(r for r in log.breakdown if r.name == "Host")
    assert (host.self_mib, host.model_mib, host.context_mib, host.compute_mib) == (421, 235, 133, 52)
    assert any(r.name == "CPU_REPACK" and r.model_mib == 12 for r in log.breakdown)


def test_breakdown_gpu_row_format():
    log = parse_memory_log((DATA / "breakdown-cuda-synthetic.txt").read_text())
    cuda = log.breakdown[0]
    assert (cuda.name, cuda.description, cuda.total_mib, cuda.free_mib) == ("CUDA0", "H200", 143771, 141920)
    assert (cuda.self_mib, cuda.model_mib, cuda.context_mib, cuda.compute_mib, cuda.unaccounted_mib) == (
        1410, 1024, 256, 130, 441)
    assert log.breakdown[1].name == "Host" and log.breakdown[1].model_mib == 97


def test_fit_params_outputs():
    rows = parse_fit_print((DATA / "llama-fit-params-fitp-demo.stdout").read_text())
    assert [(r.name, r.model_mib, r.context_mib, r.compute_mib) for r in rows] == [("Host", 222, 111, 551)]
    fitted = parse_fitted_args((DATA / "llama-fit-params-demo.stdout").read_text())
    assert fitted.ctx == 32768 and fitted.ngl == -1 and fitted.argv() == ["-c", "32768", "-ngl", "-1"]
    multi = parse_fitted_args('-c 65536 -ngl 41 -ts 20,21 -ot "blk\\.40\\.ffn_(up|down)_(ch|)exps=CPU"\n')
    assert multi.tensor_split == (20, 21) and multi.overrides == ("blk\\.40\\.ffn_(up|down)_(ch|)exps=CPU",)
    assert parse_fitted_args("llama_fit_params: failed to fit") is None


def test_hybrid_mtp_log_rs_buffer_and_second_context():
    log = parse_memory_log((DATA / "llama-server-lv4-qwen35-mtp.log").read_text())
    assert log.total("rs") == 3.28 and log.total("kv") == 8.0
    # the MTP context (second context) has its own KV and compute; its scheduler reserved twice = one buffer
    assert log.total("kv", context_index=1) == 4.0
    assert [b.mib for b in log.buffers if b.kind == "compute"] == [22.02, 13.52]
    assert log.total("compute", context_index=None) == 35.54


def test_one_reader_for_the_live_log_and_a_whole_log():
    """The recorded hybrid (tests/data/logs/README.md) read whole and line by line gives the same buffers."""
    from llm_tuner.core.memory_log import MemoryLineReader

    text = (DATA.parent / "logs" / "hybrid_lv4.log").read_text()
    log = parse_memory_log(text)
    assert log.total("rs") == 0.79 and log.total("kv") == 0.25
    assert log.by_buffer("model") == {"AMX": 24.0, "CPU_Mapped": 39.04}
    assert [(r.kind, r.name, r.model_mib) for r in log.breakdown] == [("host", "Host", 39),
                                                                  ("buffer_type", "AMX", 24)]
    reader = MemoryLineReader()
    found = [x for line in text.splitlines() for x in reader.feed(line)] + reader.close()
    assert [b for b in found if b not in log.buffers and hasattr(b, "mib")] == []
    assert found[-1].rows == tuple(log.breakdown) and found[-1].source == "text"
