"""core.server_endpoints on a real llama-server's /metrics and /slots (tests/data/logs/README.md: endpoints_spec_ngram)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from llm_tuner.core.server_endpoints import labelled, parse_metrics, parse_slots, series_key

LOGS = Path(__file__).parents[1] / "data" / "logs"
PER_POS = "spec_decode_num_accepted_tokens_per_pos_total"


def test_metrics_keep_plain_and_labelled_series():
    m = parse_metrics((LOGS / "endpoints_spec_ngram.metrics.txt").read_text())
    assert m["prompt_tokens_total"] == 74 and m["prompt_tokens_cached_total"] == 64
    assert m["tokens_predicted_total"] == 96 and m["spec_decode_num_accepted_tokens_total"] == 88
    by_pos = {int(labels["position"]): v for labels, v in labelled(m, PER_POS)}
    assert sorted(by_pos) == list(range(48))
    assert (by_pos[0], by_pos[3], by_pos[4], by_pos[19], by_pos[20]) == (6, 6, 4, 4, 0)
    # per position they add up to the server's total of accepted draft tokens
    assert sum(by_pos.values()) == m["spec_decode_num_accepted_tokens_total"]
    assert m[series_key(PER_POS, {"position": "1"})] == 6
    assert labelled(m, "prompt_tokens_total") == []


def test_metrics_values_and_deltas():
    text = (LOGS / "endpoints_spec_ngram.metrics.txt").read_text()
    before = parse_metrics(text)
    after = parse_metrics(text.replace(f'{PER_POS}{{position="0"}} 6', f'{PER_POS}{{position="0"}} 9')
                          .replace("llamacpp:prompt_tokens_seconds 80.3252", "llamacpp:prompt_tokens_seconds nan"))
    assert after[series_key(PER_POS, {"position": "0"})] - before[series_key(PER_POS, {"position": "0"})] == 3
    assert math.isnan(after["prompt_tokens_seconds"])
    assert parse_metrics('# HELP x\nllamacpp:broken{position="0" 1\nllamacpp:ok 2 1700000000000\n') == {"ok": 2}


def test_slots():
    (idle,) = parse_slots(json.loads((LOGS / "endpoints_spec_ngram.slots.json").read_text()))
    assert (idle.id, idle.task, idle.is_processing, idle.n_ctx, idle.n_decoded, idle.n_remain) == (
        0, 6, False, 1024, 0, -1)
    assert (idle.n_prompt_processed, idle.n_prompt_cache) == (0, 0)
    # a busy slot as /slots serves it (server-context.cpp slot to_json)
    (busy,) = parse_slots([{"id": 1, "id_task": 7, "is_processing": True, "n_prompt_tokens_processed": 12,
                            "n_prompt_tokens_cache": 3, "next_token": [{"n_remain": 11, "n_decoded": 5}]}])
    assert (busy.id, busy.task, busy.is_processing, busy.n_decoded, busy.n_remain) == (1, 7, True, 5, 11)
    assert parse_slots(None) == [] and parse_slots(["junk"]) == []
