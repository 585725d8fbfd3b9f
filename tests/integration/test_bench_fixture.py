"""The test bench itself: the real server generates through the real model and reports timings."""

import pytest


def test_generates_eight_tokens_with_server_timings(llama_server):
    out = llama_server.client.completion("The capital of France is", n_predict=8, ignore_eos=True,
                                         temperature=0)
    t = out["timings"]
    assert t["predicted_n"] == 8
    assert t["prompt_n"] > 0
    assert t["predicted_ms"] > 0 and t["prompt_ms"] > 0
    # llama-server's generation rate counts n-1 decode steps (the first token comes from prefill)
    assert t["predicted_per_second"] == pytest.approx(1000.0 * (t["predicted_n"] - 1) / t["predicted_ms"], rel=0.01)
    assert isinstance(out["content"], str) and out["content"]


def test_health_is_ok_and_props_name_the_model(llama_server):
    assert llama_server.client.health().ready
    props = llama_server.client.props()
    assert props["model_path"].endswith(".gguf")
    assert props["total_slots"] == 1
