"""Finding and reading llama.cpp binaries: the real embedded build, recorded output, and bad input."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from llm_tuner.core import flags
from llm_tuner.core.cmdline import parse_help
from llm_tuner.core.devices import parse_list_devices
from llm_tuner.core.settings import Settings
from llm_tuner.services import binaries
from llm_tuner.services.binaries import SERVER, BinaryError, gpu_backend_advice, probe

DATA = Path(__file__).parents[1] / "data" / "binary"


def test_help_catalog_of_the_recorded_server_knows_every_spelling():
    catalog = parse_help((DATA / "llama-server-help.txt").read_text())
    assert len(catalog.flags) > 200
    ctk = catalog.lookup("-ctk")
    assert ctk is catalog.lookup("--cache-type-k")
    assert ctk.canonical == "--cache-type-k" and ctk.value == "TYPE"
    assert ctk.env == "LLAMA_ARG_CACHE_TYPE_K" and ctk.default == "f16"
    ctx = catalog.lookup("-c")
    assert ctx.default == "0, 0 = loaded from model" and "size of the prompt context" in ctx.help
    # placeholders with commas and spaces are not spellings
    assert catalog.lookup("-ts").names == ("-ts", "--tensor-split")
    assert catalog.lookup("-ot").value == "<tensor name pattern>=<buffer type>,..."
    assert "-nkvo" in catalog.lookup("--kv-offload").names
    assert catalog.lookup("--ctx_size") is ctx  # llama.cpp accepts '_' for '-'
    assert catalog.lookup("--mlock") is None  # removed in this build
    assert catalog.by_env("LLAMA_ARG_N_GPU_LAYERS").canonical == "--gpu-layers"
    sections = {f.section for f in catalog.flags}
    assert {"common params", "sampling params"} <= sections


def test_list_devices_parses_gpu_lines_and_ignores_noise():
    text = ("ggml_cuda_init: found 2 CUDA devices:\nAvailable devices:\n"
            "  CUDA0: NVIDIA H200 (143771 MiB, 142000 MiB free)\n"
            "  Vulkan1: AMD Radeon RX 7900 XTX (RADV NAVI31) (24560 MiB, 24000 MiB free)\n")
    devs = parse_list_devices(text)
    assert [(d.name, d.backend, d.memory_total_mib) for d in devs] == [("CUDA0", "CUDA", 143771),
                                                                     ("Vulkan1", "Vulkan", 24560)]
    assert devs[1].description == "AMD Radeon RX 7900 XTX (RADV NAVI31)"
    assert parse_list_devices((DATA / "llama-server-list-devices-cpu.txt").read_text()) == []


@pytest.mark.server
def test_embedded_server_is_found_and_read():
    info = probe(SERVER, Settings())
    assert info.ok, info.error
    assert info.source in ("embedded", "PATH")
    assert info.version and set(info.backends) == {"CPU", "RPC"}  # the embedded build has RPC (ggml-rpc-server)
    assert info.catalog.lookup("--flash-attn") is not None
    assert info.to_json()["n_flags"] == len(info.catalog.flags)


def test_settings_path_wins_and_missing_path_says_what_to_do(tmp_path):
    info = probe(SERVER, Settings(llama_server_path=str(tmp_path / "nope" / "llama-server")))
    assert not info.ok
    assert "does not exist" in info.error and "Settings" in info.error


def test_not_executable_file_is_reported_with_the_fix(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho hi\n")
    fake.chmod(0o644)
    info = probe(SERVER, Settings(llama_server_path=str(fake)))
    assert not info.ok and "chmod +x" in info.error


def test_binary_whose_help_cannot_be_read_is_reported(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 139\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    info = probe(SERVER, Settings(llama_server_path=str(fake)))
    assert not info.ok
    assert "--help failed" in info.error and "exit 139" in info.error


def test_environment_variable_is_used_before_path(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_TUNER_LLAMA_SERVER", str(tmp_path / "custom-server"))
    loc = binaries.locate(SERVER, Settings())
    assert loc.source == "environment" and loc.path.name == "custom-server"


def test_short_runs_time_out_and_kill(tmp_path):
    script = tmp_path / "slow"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    with pytest.raises(BinaryError, match="did not finish"):
        binaries.run_short([str(script)], timeout=0.5)


@pytest.mark.server
def test_cpu_only_server_with_gpus_gets_advice():
    info = probe(SERVER, Settings())
    assert gpu_backend_advice(info, 0) is None
    advice = gpu_backend_advice(info, 2)
    assert "CPU-only" in advice and "-DGGML_CUDA=ON" in advice


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
def test_folder_instead_of_binary(tmp_path):
    info = probe(SERVER, Settings(llama_server_path=str(tmp_path)))
    assert "is a folder" in info.error


def test_llama_bench_help_is_a_catalog_too():
    catalog = parse_help((DATA / "llama-bench-help.txt").read_text())
    assert catalog.lookup("-ot").names == ("-ot", "--override-tensor")
    assert catalog.lookup("-ts").value == "<ts0/ts1/..>"
    assert catalog.lookup("-lm").value == "<auto|none|mmap|mlock|mmap+mlock|dio>"
    assert catalog.lookup("-lm").default == "auto"
    assert catalog.lookup("-r").default == "5"
    assert catalog.lookup("--spec-type") is None  # llama-bench has no speculative decoding


@pytest.fixture
def counting_server(tmp_path, server_binary):
    """(a wrapper program that appends its arguments to a file at each start, then runs the real llama-server;
    how many times it was asked for its devices)."""
    if os.name == "nt":
        pytest.skip("a shell script as the binary")
    count = tmp_path / "starts"
    wrapper = tmp_path / "llama-server"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> '{count}'\nexec '{server_binary}' \"$@\"\n")
    wrapper.chmod(0o755)
    asked = flags.spelling("list_devices")
    return wrapper, lambda: count.read_text().split().count(asked) if count.exists() else 0


def test_list_devices_is_asked_once_per_binary_for_a_while(counting_server):
    """A tune prunes each candidate with the device list: the binary (path + size + mtime) answers once per
    LIST_DEVICES_MAX_AGE_S."""
    wrapper, starts = counting_server
    first = binaries.list_devices(wrapper)
    assert binaries.list_devices(wrapper) == first
    assert starts() == 1
    binaries.list_devices(wrapper, max_age_s=0)  # asked now: a fresh answer
    assert starts() == 2
    os.utime(wrapper, ns=(wrapper.stat().st_atime_ns, wrapper.stat().st_mtime_ns + 10**9))  # rebuilt: asked again
    binaries.list_devices(wrapper)
    assert starts() == 3


def test_a_tune_places_on_the_devices_as_they_are_at_its_start(tmp_path, counting_server, demo_model):
    """A --list-devices answer kept from before another process took GPU memory (a holder, a second server) made
    a tune plan on the whole GPU (benchmarks/sessions/2026-12-07-gpu-server-cal): a tune's resolver asks now,
    a preview's may use the kept answer. The tune is the real TuneRunner measured by a scripted bench (no
    server run): its --list-devices is counted."""
    from llm_tuner.core.tune import Knob, Objective, TuneSpec
    from llm_tuner.services.rpc import planned_gpus
    from llm_tuner.services.tune import TuneRunner
    from llm_tuner.services.tune.placement import PlacementResolver
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.store.tunes import TuneRepository
    from tests.support.tune_bench import Clock, ScriptedBench

    wrapper, starts = counting_server
    argv = ["-m", str(demo_model)]
    planned_gpus(wrapper, argv)
    PlacementResolver(argv, binary=str(wrapper))  # a preview: the kept answer
    assert starts() == 1
    planned_gpus(wrapper, argv, fresh=True)
    PlacementResolver(argv, binary=str(wrapper), fresh_devices=True)
    assert starts() == 3
    engine, clock = open_engine(tmp_path / "h.sqlite"), Clock()
    spec = TuneSpec(base_argv=tuple(argv), binary=str(wrapper), objective=Objective(prompt_tokens=16, gen_tokens=8),
                    knobs=(Knob(key="placement", flag="placement", values=(None, "f16:ffn")),), budget_s=600)
    TuneRunner(TuneRepository(engine), bench_runner=ScriptedBench(RunRepository(engine), clock, lambda a: 100.0),
               plan_fn=lambda a, e: (True, ""), clock=clock).run(spec)
    assert starts() == 4  # the tune's own list, though an answer from seconds ago was kept


@pytest.mark.server
def test_fit_params_flags_are_read_and_counted(capsys):
    """Issue 35 item 8: `binaries` said "llama-fit-params … 0 flags" although its --help lists many."""
    from llm_tuner.cli import main
    from llm_tuner.services.binaries import FIT_PARAMS

    info = probe(FIT_PARAMS, Settings())
    assert info.ok, info.error
    assert len(info.catalog.flags) > 100 and info.catalog.lookup("--fit-target") is not None
    main(["binaries"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("llama-fit-params:"))
    assert f"{len(info.catalog.flags)} flags" in line and " 0 flags" not in line
