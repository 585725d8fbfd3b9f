"""Benchmark runner: real llama-server, real requests, the server's own timings.

A run = one server command line (a profile's, or raw llama-server arguments) measured with a
`BenchSpec`. The runner starts the server (or uses an attached URL), builds prompts of exactly N
tokens from real text with the server's own `/tokenize` and sends them as token arrays (llama-server
uses a token array as-is: no BOS is added, server-common.cpp `tokenize_input_subprompt`), asks for
exactly `gen_tokens` tokens (`n_predict` + `ignore_eos`), and keeps per request:

- the server's `timings` (prompt_n/ms/per_second, predicted_n/ms/per_second, cache_n, draft_n,
  draft_n_accepted) - never replaced by client clocks;
- client-side time to first token over streaming, and total latency;
- draft verification steps from `/metrics` (for the mean accepted length; one client only);
- telemetry peaks per device through an optional `TelemetrySource`.

Cold cache: `cache_prompt: false` makes the server reprocess the whole prompt (`n_past = 0`,
server-context.cpp), and every repetition also takes a different slice of the text. With a depth,
the depth prefix is cached first (`n_predict: 0`), then the measured request (prefix + N new tokens)
reuses it; with SWA/hybrid models the server may reprocess more, which `prompt_n`/`cache_n` show.

Each repetition is stored as soon as it finishes; a crash keeps them and marks the run incomplete.

The package, by seam: `prompts` (prompt text), `meters` (telemetry sources, PeakTracker,
OtherCpuMeter), `llama_bench` (argv helpers, translation to llama-bench and its JSON), `target`
(ServerTarget, the progress and cancel callbacks), `runner` (BenchRunner and the RunOutcome it returns,
targets, scrape_metrics), `memory` (memory_plan, predict_memory), `heat` (the cool-down gate of an A/B),
`group` (runs into one group: a sweep, an A/B, a router's models), `builds` (one profile on two builds),
`errors`.
Import from the package: every public name is here.
"""

from __future__ import annotations

from llm_tuner.services.bench.errors import BenchCancelled, BenchError
from llm_tuner.services.bench.group import GroupStep, about_left, run_group
from llm_tuner.services.bench.llama_bench import (
    argv_model,
    model_identity,
    parse_llama_bench_json,
    set_flag,
    translate_to_llama_bench,
)
from llm_tuner.services.bench.memory import memory_plan, predict_memory
from llm_tuner.services.bench.meters import (
    OtherCpuMeter,
    PeakTracker,
    TelemetrySource,
    _GpuSources,
    default_telemetry,
)
from llm_tuner.services.bench.prompts import PROMPTS_DIR_ENV, PromptBuilder, prompt_texts, prompts_dir
from llm_tuner.services.bench.runner import (
    BenchRunner,
    RunOutcome,
    _client_key,
    demo_target,
    profile_versions,
    scrape_metrics,
    target_from_profile,
)
from llm_tuner.services.bench.target import CancelFn, ProgressFn, ServerTarget

__all__ = [
    "BenchCancelled",
    "BenchError",
    "BenchRunner",
    "CancelFn",
    "GroupStep",
    "OtherCpuMeter",
    "PROMPTS_DIR_ENV",
    "PeakTracker",
    "ProgressFn",
    "PromptBuilder",
    "RunOutcome",
    "ServerTarget",
    "TelemetrySource",
    "_GpuSources",
    "_client_key",
    "about_left",
    "argv_model",
    "default_telemetry",
    "demo_target",
    "memory_plan",
    "model_identity",
    "parse_llama_bench_json",
    "predict_memory",
    "profile_versions",
    "prompt_texts",
    "prompts_dir",
    "run_group",
    "scrape_metrics",
    "set_flag",
    "target_from_profile",
    "translate_to_llama_bench",
]
