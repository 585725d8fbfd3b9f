"""The log parser on recorded real llama-server output (tests/data/logs, see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_tuner.services.logparse import (
    BufferSize,
    Listening,
    Loaded,
    LoadFailed,
    Loading,
    LogLine,
    LogParser,
    MemoryBreakdown,
    RequestTimings,
    ServerError,
    SlotSelected,
    SlotsInitialized,
    classify_failure,
    parse_lines,
)

LOGS = Path(__file__).parents[1] / "data" / "logs"


def _events(name: str):
    return parse_lines((LOGS / f"{name}.log").read_text().splitlines())


def _returned(name: str) -> list[dict]:
    return json.loads((LOGS / f"{name}.cmd.json").read_text())["timings"]


@pytest.mark.parametrize("name", ["plain_default", "plain_lv4", "jsonl_default", "plain_spec_ngram",
                                  "jsonl_spec_ngram"])
def test_request_timings_equal_what_the_server_returned(name):
    records = [e for e in _events(name) if isinstance(e, RequestTimings)]
    returned = _returned(name)
    assert len(records) == len(returned) == 2
    for rec, t in zip(records, returned, strict=True):
        for key in ("prompt_n", "predicted_n", "cache_n"):
            assert getattr(rec, key) == t[key], key
        for key in ("prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_second"):
            assert getattr(rec, key) == pytest.approx(t[key], abs=0.006), key  # the log prints 2 decimals
        assert rec.draft_n == t.get("draft_n")
        assert rec.draft_n_accepted == t.get("draft_n_accepted")
        assert rec.ttft_ms == pytest.approx(t["prompt_ms"], abs=0.01)
        assert rec.latency_ms == pytest.approx(t["prompt_ms"] + t["predicted_ms"], abs=0.02)


def test_startup_sequence_plain_and_jsonl_agree():
    for name in ("plain_default", "jsonl_default"):
        evs = _events(name)
        kinds = [type(e) for e in evs if type(e) in (Loading, Loaded, Listening)]
        assert kinds == [Loading, Loaded, Listening]
        url = next(e.url for e in evs if isinstance(e, Listening))
        assert url.startswith("http://127.0.0.1:")
        assert [e.how for e in evs if isinstance(e, SlotSelected)] == ["lru", "lcp"]


def test_every_line_reaches_the_console_with_its_level():
    evs = _events("plain_default")
    lines = [e for e in evs if isinstance(e, LogLine)]
    assert len(lines) == len((LOGS / "plain_default.log").read_text().splitlines())
    assert {e.level for e in lines} >= {"info", "warn"}
    assert lines[0].t_s == pytest.approx(0.003549)


def test_memory_breakdown_from_jsonl_and_from_the_text_table_agree():
    jsonl = [e for e in _events("jsonl_default") if isinstance(e, MemoryBreakdown)]
    text = [e for e in _events("plain_lv4") if isinstance(e, MemoryBreakdown)]
    assert jsonl[0].source == "jsonl" and text[0].source == "text"
    host_j = next(r for r in jsonl[0].rows if r.kind == "host")
    host_t = next(r for r in text[0].rows if r.kind == "host")
    assert (host_t.model_mib, host_t.context_mib, host_t.compute_mib) == (222, 18, 20)
    assert (host_j.model_mib, host_j.context_mib, host_j.compute_mib) == (222, 18, 20)
    assert [r.name for r in text[0].rows] == ["Host", "CPU_REPACK"]


def test_device_row_of_the_text_table():
    # Format string from common/fit.cpp (template_gpu); the CUDA recording is added from the lent GPU.
    p = LogParser()
    p.feed("0.00.625.805 I common_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model"
           "   context   compute    unaccounted |")
    p.feed("0.00.625.815 I common_memory_breakdown_print: |   - CUDA0 (H200)         | 143771 = 1000 + (140000 = "
           "120000 +   18000 +    2000) +        2771 |")
    out = p.feed("0.00.625.900 I srv  llama_server: model loaded")
    mb = next(e for e in out if isinstance(e, MemoryBreakdown))
    row = mb.rows[0]
    assert (row.name, row.description, row.total_mib, row.model_mib, row.context_mib, row.compute_mib,
            row.unaccounted_mib) == ("CUDA0", "H200", 143771, 120000, 18000, 2000, 2771)


@pytest.mark.parametrize(("name", "kind", "needle"), [
    ("fail_unknown_flag", "unknown_flag", "--load-mode"),
    ("fail_removed_flag", "removed_flag", "--spec-draft-n-max"),
    ("fail_unknown_device", "unknown_device", "CUDA0"),
    ("fail_model_missing", "model_missing", "/nonexistent/model.gguf"),
    ("fail_model_missing_jsonl", "model_missing", "does not exist"),
    ("fail_quant_v_no_fa", "quant_v_needs_fa", "-fa on"),
    ("fail_quant_v_no_fa_jsonl", "quant_v_needs_fa", "-ctv f16"),
    ("fail_port_in_use", "port_in_use", "already taken"),
    ("fail_oom_kv", "oom", "KV cache on CPU"),
    ("fail_oom_kv_jsonl", "oom", "lower the context"),
])
def test_startup_failures_are_classified_with_an_actionable_message(name, kind, needle):
    failure = classify_failure((LOGS / f"{name}.log").read_text().splitlines(), exit_code=1)
    assert failure is not None and failure.kind == kind
    assert needle in failure.message


def test_cuda_session_recorded_on_an_h200():
    """A --log-jsonl session on one H200 with one 1024-token request (cuda-h200-server.cmd.json)."""
    evs = _events("cuda-h200-server")
    kinds = [type(e) for e in evs if type(e) in (Loading, SlotsInitialized, Loaded, Listening)]
    assert kinds == [Loading, SlotsInitialized, Loaded, Listening]
    assert next(e for e in evs if isinstance(e, Listening)).url == "http://127.0.0.1:58853"
    assert next(e for e in evs if isinstance(e, SlotsInitialized)) == SlotsInitialized(1, 8192, False)
    assert not [e for e in evs if isinstance(e, ServerError | LoadFailed)]
    # the breakdown comes twice: after loading and at exit (free memory differs, the parts do not)
    breakdowns = [e for e in evs if isinstance(e, MemoryBreakdown)]
    assert [b.source for b in breakdowns] == ["jsonl", "jsonl"]
    for b in breakdowns:
        assert [(r.kind, r.name) for r in b.rows] == [("device", "CUDA0"), ("host", "Host")]
        cuda, host = b.rows
        assert (cuda.description, cuda.total_mib, cuda.model_mib, cuda.context_mib, cuda.compute_mib) == (
            "H200", 143155, 2189, 384, 57)
        assert (host.model_mib, host.context_mib, host.compute_mib, host.total_mib) == (125, 0, 24, None)
    assert [b.rows[0].free_mib for b in breakdowns] == [142629, 139929]
    assert [b.rows[0].unaccounted_mib for b in breakdowns] == [-2103, 596]


def test_cuda_session_request_timings_equal_what_the_server_returned():
    (rec,) = [e for e in _events("cuda-h200-server") if isinstance(e, RequestTimings)]
    (t,) = _returned("cuda-h200-server")
    assert (rec.slot, rec.task, rec.prompt_n, rec.predicted_n, rec.cache_n) == (0, 12, 9, 1024, t["cache_n"])
    for key in ("prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_second"):
        assert getattr(rec, key) == pytest.approx(t[key], abs=0.006), key
    assert rec.latency_ms == pytest.approx(1747.88) and rec.ttft_ms == pytest.approx(16.19)
    assert (rec.n_tokens, rec.truncated) == (1032, False)


def test_cuda_oom_recorded_on_an_h200_is_a_kv_failure_on_cuda0():
    """`-c 4000000 -fit off -ngl 99` on one H200: the KV cache (187500 MiB) does not fit (cuda-h200-oom.cmd.json)."""
    lines = (LOGS / "cuda-h200-oom.log").read_text().splitlines()
    f = classify_failure(lines, exit_code=1)
    assert (f.kind, f.what, f.device) == ("oom", "kv", "CUDA0")
    assert (f.request_mib, f.free_mib) == (187500.0, 142629.0)
    assert "cudaMalloc failed: out of memory" in f.evidence
    assert "KV cache on CUDA0 (187500 MiB; 142629 MiB were free" in f.message and "lower the context" in f.message
    evs = parse_lines(lines)
    assert [(b.kind, b.buffer, b.mib) for b in evs if isinstance(b, BufferSize)] == [
        ("model", "CPU_Mapped", 125.0), ("model", "CUDA0", 2189.41), ("output", "CUDA_Host", 0.12)]
    assert isinstance([e for e in evs if not isinstance(e, LogLine)][-1], LoadFailed)


def test_cuda_oom_on_weights_names_the_device():
    # No real recording of a weights OOM yet (the H200 holds any model we can carry there): lines as the CUDA
    # build prints them (ggml-cuda.cu:888, ggml-backend.cpp:102, llama-model.cpp:1872; reference section 2.5),
    # in the order the real KV recording above shows them.
    lines = [
        "0.01.000.000 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81920.00 MiB on device 1: "
        "cudaMalloc failed: out of memory",
        "0.01.000.001 E ggml_backend_buft_alloc_buffer_n_default: failed to allocate CUDA1 buffer of size 85899345920",
        "0.01.000.002 E llama_model_load: error loading model: unable to allocate CUDA1 buffer",
        "0.01.000.003 E srv  llama_server: exiting due to model loading error",
    ]
    f = classify_failure(lines, 1)
    assert (f.kind, f.what, f.device, f.request_mib) == ("oom", "weights", "CUDA1", 81920.0)


def test_failed_load_yields_error_and_load_failed_events():
    evs = _events("fail_model_missing")
    assert any(isinstance(e, ServerError) for e in evs)
    assert isinstance([e for e in evs if isinstance(e, LoadFailed)][-1], LoadFailed)


def test_a_request_cut_off_by_a_crash_is_still_handed_out_at_flush():
    p = LogParser()
    for line in (LOGS / "plain_default.log").read_text().splitlines()[:13]:  # up to the first eval line
        p.feed(line)
    p.feed("0.01.983.469 I slot print_timing: id  0 | task 0 |       total time =     569.75 ms /    30 tokens")
    recs = [e for e in p.flush() if isinstance(e, RequestTimings)]
    assert len(recs) == 1 and recs[0].predicted_n == 24 and recs[0].cache_n is None
