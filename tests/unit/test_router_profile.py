"""Router mode without a server: what makes a profile a router (and a profile without a model an error before
launch, in plain words), a router's /models answer as the embedded build gives it, its log (each model's instance
prefixed with its port) read into requests that name their model, and a benchmark spec that names one model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_tuner.core.advice import is_router, router_text
from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.core.cmdline import import_command
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.server_endpoints import RouterModel, parse_router_models
from llm_tuner.core.settings import Settings
from llm_tuner.services.logparse import LogLine, RequestTimings, parse_lines
from llm_tuner.services.preflight import preflight_errors
from llm_tuner.services.router_watch import is_router_props
from llm_tuner.services.supervised import record_from_timings
from llm_tuner.state.live import LiveFleet, StartFacts

LOGS = Path(__file__).parent.parent / "data" / "logs"

# GET /models of the embedded build in router mode (--models-dir with two files, gemma-b loaded), trimmed
MODELS = {"object": "list", "data": [
    {"id": "gemma-b", "aliases": [], "tags": [], "object": "model", "owned_by": "llamacpp", "created": 1796210086,
     "status": {"value": "loaded", "args": ["llama-server", "--host", "127.0.0.1", "--port", "59617", "--alias",
                                             "gemma-b", "--ctx-size", "512", "--model", "models/gemma-b.gguf"],
                "preset": "[gemma-b]\nmodel = models/gemma-b.gguf\n"},
     "architecture": {"input_modalities": ["text"]}, "source": "models_dir", "can_remove": False},
    {"id": "gemma-a", "object": "model", "status": {"value": "unloaded", "args": ["llama-server", "--model",
                                                                                  "models/gemma-a.gguf"]},
     "source": "models_dir"},
    {"id": 7}, "not an entry"]}


def test_a_profile_is_a_router_with_a_models_folder_or_presets_and_no_model_of_its_own():
    for text in ("--models-dir /models", "--models-preset presets.ini -c 4096"):
        profile = import_command(text).profile
        assert is_router(profile) and preflight_errors(profile) == []
        assert router_text(profile).startswith("Router mode: no model of its own")
    assert "the GGUF files in /models" in router_text(import_command("--models-dir /models").profile)
    assert is_router(LaunchProfile(env={"LLAMA_ARG_MODELS_DIR": "/models"}))  # the environment counts too
    assert not is_router(import_command("-m m.gguf --models-dir /models").profile)  # a model of its own: not one
    assert router_text(import_command("-m m.gguf").profile) is None


def test_without_a_model_and_without_router_settings_the_profile_is_an_error_in_plain_words():
    errors = preflight_errors(import_command("-c 4096").profile)
    assert [e.id for e in errors] == ["no-model"]
    assert errors[0].message.startswith("no model: give the model file (-m), or pick one in Models")
    assert "--models-dir" in errors[0].message and "router mode" in errors[0].message


@pytest.fixture
def facts(tmp_path):
    """Settings naming a stand-in llama-server: a plan names it, nothing here runs it."""
    prog = tmp_path / "llama-server"
    prog.write_text("#!/bin/sh\nexit 1\n")
    prog.chmod(0o755)
    return StartFacts(settings=Settings(llama_server_path=str(prog)))


def test_lives_start_refuses_a_profile_without_a_model_and_starts_a_router(facts):
    fleet = LiveFleet()
    fleet.command = "-c 2048"
    assert fleet.start(facts) is None and "no model: give the model file" in fleet.selected.message
    fleet.command = "--models-dir /models -c 2048"
    slot = fleet.start(facts)
    assert slot is not None and slot.state == "starting" and "--models-dir" in slot.plan.user_args


def test_a_routers_models_answer_reads_into_names_states_and_files():
    models = parse_router_models(MODELS)
    assert [(m.id, m.status, m.source, m.path, m.failed) for m in models] == [
        ("gemma-a", "unloaded", "models_dir", "models/gemma-a.gguf", False),
        ("gemma-b", "loaded", "models_dir", "models/gemma-b.gguf", False)]
    assert models[0].args == ("llama-server", "--model", "models/gemma-a.gguf")  # each instance's command line
    assert models[1].args[-4:] == ("--ctx-size", "512", "--model", "models/gemma-b.gguf")
    assert [m.id for m in models if m.loaded] == ["gemma-b"]
    plain = parse_router_models({"data": [{"id": "m.gguf", "object": "model", "meta": {}}]})  # one model, no status
    assert plain == [RouterModel("m.gguf", "loaded")]
    assert parse_router_models(None) == [] and parse_router_models({"data": "x"}) == []
    assert is_router_props({"role": "router", "model_path": "none"}) and not is_router_props({"model_path": "m"})


@pytest.mark.parametrize(("log", "model", "timed"), [("router_two_models.log", "gemma-b", (25, 8)),
                                                     ("router_jsonl.log", "gemma-a", (2, 2))])
def test_a_routers_log_names_the_model_of_each_request(log, model, timed):
    """Real router logs, plain and --log-jsonl (tests/data/logs): the router spawns a model's instance on a port,
    whose lines come prefixed `[port] ` (with --log-jsonl: the instance's JSON line inside the router's `msg`); the
    request timed there names the model, and the console names the instance."""
    events = parse_lines((LOGS / log).read_text().splitlines())
    records = [e for e in events if isinstance(e, RequestTimings)]
    assert [(t.model, t.prompt_n, t.predicted_n) for t in records] == [(model, *timed)]
    assert record_from_timings(records[0]).model == model
    texts = [e.text for e in events if isinstance(e, LogLine)]
    assert any(t.startswith(f"[{model}] slot print_timing") for t in texts)
    assert not any(t.startswith("[5") or '{"type"' in t for t in texts)


def test_a_benchmark_spec_names_one_model_of_a_router_and_the_run_goes_by_that_name():
    spec = BenchSpec(model=" gemma-b ")
    assert spec.model == "gemma-b" and spec.describe().startswith("model gemma-b, ")
    assert BenchSpec(model="  ").model is None
    assert BenchRun(spec=spec, model_path="/m/gemma-3.gguf").model_name == "gemma-b"
    assert BenchRun(model_path="/m/gemma-3.gguf").model_name == "gemma-3.gguf"
    assert BenchSpec(**json.loads(spec.model_dump_json())) == spec  # the store keeps the spec as JSON


def test_lives_server_sampler_leaves_a_router_alone():
    """A router answers /metrics and /slots with 400 "model name is missing from the request" (the embedded build's
    words): no figures of its own, not a failing sampler."""
    from llm_tuner.services.client import ServerError
    from llm_tuner.services.telemetry.server_metrics import ServerReader

    class Router:
        def metrics_text(self):
            raise ServerError(400, "model name is missing from the request", "invalid_request_error")

        slots = metrics_text

    reader = ServerReader(Router())
    reader()
    assert reader.metrics_available is False and reader.slots_available is False
