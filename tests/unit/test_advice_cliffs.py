"""Issue 38: what llama.cpp switches off or moves silently gets a rule, each on a real command line (the tested
build's --help parses it), and none fires on the field notes' three seed command lines where it does not apply."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from llm_tuner.core.advice import RULES, advise
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.devices import fa_quants_from_log
from llm_tuner.core.memory import PlanDevice, args_from_profile, pipeline, plan_memory
from tests.conftest import DATA
from tests.unit.test_memory import gpu, make_model

CATALOG = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())
# the tested CUDA build's own system_info line (the lead's H200 recording)
H200_QUANTS = fa_quants_from_log((DATA / "rpc" / "rpc-rpc0-rpc1-ts1-1.log").read_text())
NEW = {"pipeline-parallel-off", "kv-type-gpu-attention", "cache-ram-crowds-host", "draft-is-main-model",
       "split-tensor-quantized-kv", "split-tensor-no-fit", "ngl-negative", "parallel-without-kvu"}


@dataclass
class Facts:
    nextn_layers: int = 0
    context_length: int | None = 262144
    block_count: int | None = 28


def found(text: str, **kw) -> dict:
    return {a.id: a for a in advise(import_command(text, CATALOG).profile, CATALOG, **kw)}


def test_every_rule_is_a_small_function_and_the_old_ids_stand():
    assert len(RULES) >= 43 and all(callable(r) for r in RULES)
    # the 35 rules before issue 38 still fire under their ids
    assert "kv-type-mismatch" in found("-m m.gguf -ctk q8_0 -ctv f16")
    assert "fit-ignored" in found("-m m.gguf -ngl 20")
    assert "fit-ignored" not in found("-m m.gguf -ngl -1")  # -1 is llama.cpp's auto: fit still places


def test_pipeline_parallelism_lost_to_an_override_or_an_ngl_equal_to_the_layer_count():
    two = "-m m.gguf -dev CUDA0,CUDA1 -ngl 999"
    assert "pipeline-parallel-off" not in found(two, model=Facts())
    ot = found(two + r" -ot 'blk\.(0|3|6)\.ffn_.*=CPU'", model=Facts())["pipeline-parallel-off"]
    assert ot.severity == "info" and "-ot blk" in ot.message and "any override turns it off" in ot.message
    assert "src/llama-context.cpp:432-437" in ot.source and "pipeline parallelism enabled" in ot.reason
    assert "--n-cpu-moe" not in ot.message
    assert "-ncmoe 4" in found(two + " --n-cpu-moe 4", model=Facts())["pipeline-parallel-off"].message
    eq = found("-m m.gguf -dev CUDA0,CUDA1 -ngl 28", model=Facts())["pipeline-parallel-off"]
    assert eq.severity == "warning" and "-ngl 28 equals the model's 28 layers" in eq.message and "-ngl 29" in eq.message
    assert "pipeline-parallel-off" not in found("-m m.gguf -dev CUDA0,CUDA1 -ngl 10", model=Facts())  # partial: a choice
    assert "pipeline-parallel-off" in found(two + " -nkvo", model=Facts())
    # one device, or the device count unknown: nothing to lose
    assert "pipeline-parallel-off" not in found(r"-m m.gguf -ngl 99 -ot 'blk\.0\.ffn_.*=CPU'", n_gpus=1)
    assert "pipeline-parallel-off" not in found(r"-m m.gguf -ngl 99 -ot 'blk\.0\.ffn_.*=CPU'")
    assert "pipeline-parallel-off" in found(r"-m m.gguf -ngl 99 -ot 'blk\.0\.ffn_.*=CPU'", n_gpus=2)
    assert "pipeline-parallel-off" not in found(two + r" -sm row -ot 'blk\.0\.ffn_.*=CPU'")


def test_pipeline_rule_with_a_plan_names_fits_own_overflow_and_the_memory():
    moe = make_model(n_layer=8, n_expert=64, n_ff_exp=1024, n_embd=2048)
    gpus = [gpu("CUDA0", 2000), gpu("CUDA1", 2000)]
    host = PlanDevice("Host", "CPU", 65536, 60000)
    profile = import_command("-m m.gguf -c 4096 -fitt 0", CATALOG).profile
    args = args_from_profile(profile)
    plan = plan_memory(moe, args, gpus, host)
    assert plan.args.overrides and not args.overrides and plan.pipeline_parallel is False  # fit's own overflow
    assert "pipeline-parallel-off" not in {x.id for x in advise(profile, CATALOG)}  # only the plan knows
    pipe = pipeline(moe, plan, gpus, host, user_args=args)
    a = {x.id: x for x in advise(profile, CATALOG, plan=plan, pipeline=pipe)}["pipeline-parallel-off"]
    assert "fit moved expert weights" in a.message and "With it on, compute buffers would take" in a.reason
    assert "MiB on CUDA0" in a.reason


def test_kv_types_without_a_gpu_attention_kernel_from_the_binarys_fa_quants():
    assert H200_QUANTS == ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")
    q51 = found("-m m.gguf -ctk q5_1 -ctv q5_1", fa_quants=H200_QUANTS)["kv-type-gpu-attention"]
    assert q51.severity == "warning" and "q5_1-q5_1" in q51.message and "FA_QUANTS = q4_0-q4_0" in q51.message
    assert "converts K and V to f16" in q51.reason and "fattn.cu" in q51.source
    unknown = found("-m m.gguf -ctk q5_1 -ctv q5_1")["kv-type-gpu-attention"]  # the binary has not started yet
    assert unknown.severity == "info" and "unknown until it has started" in unknown.message
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q8_0 -ctv q8_0")  # every CUDA build has it
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q5_1 -ctv q5_1", fa_quants=("all",))
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q5_1 -ctv q5_1", fa_quants=())  # no CUDA
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q5_1 -ctv q5_1 -ngl 0", fa_quants=H200_QUANTS)
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q5_1 -ctv q5_1", n_gpus=0)  # no GPU here, unknown
    iq = found("-m m.gguf -ctk iq4_nl -ctv iq4_nl", fa_quants=H200_QUANTS)["kv-type-gpu-attention"]
    assert "attention runs on the CPU" in iq.message
    assert "kv-type-gpu-attention" not in found("-m m.gguf -ctk q5_1 -ctv q8_0", fa_quants=H200_QUANTS)  # mismatch rule


def test_cache_ram_counts_in_the_host_total_and_is_advised_when_it_crowds_the_host():
    m = make_model(n_layer=8)
    host = PlanDevice("Host", "CPU", 65536, 60000)

    def plan_of(text):
        p = import_command(text, CATALOG).profile
        return p, plan_memory(m, args_from_profile(p), [gpu()], host)

    p, plan = plan_of("-m m.gguf -c 4096 -ngl 99")
    h = plan.device("Host")
    assert h.prompt_cache_mib == 8192 and h.total_mib == pytest.approx(h.resident_mib + h.mapped_mib + 8192)
    assert "cache-ram-crowds-host" not in {a.id for a in advise(p, CATALOG, plan=plan)}
    p, plan = plan_of("-m m.gguf -c 4096 -ngl 99 --cache-ram 65536")
    [a] = [a for a in advise(p, CATALOG, plan=plan) if a.id == "cache-ram-crowds-host"]
    assert "--cache-ram 65536" in a.message and "beside the model" in a.message and "-cram" in a.message
    assert any("prompt cache may grow to 65536 MiB" in w for w in plan.warnings)
    assert plan_of("-m m.gguf -c 4096 -ngl 99 -cram 0")[1].device("Host").prompt_cache_mib == 0
    # without a plan: the default 8192 MiB against the RAM available now
    assert "default --cache-ram 8192" in found("-m m.gguf", host_available_mib=6000)["cache-ram-crowds-host"].message
    assert "cache-ram-crowds-host" not in found("-m m.gguf", host_available_mib=60000)


def test_a_draft_model_that_is_the_main_model():
    a = found("-m /models/q.gguf -md /models/./q.gguf --spec-type draft-simple")["draft-is-main-model"]
    assert a.severity == "warning" and "0.47x" in a.reason
    assert "draft-is-main-model" not in found("-m /models/q.gguf -md /models/q-0.6b.gguf --spec-type draft-simple")


def test_split_mode_tensor_with_quantized_kv_or_fit():
    got = found("-m m.gguf -sm tensor -ctk q8_0 -ctv q8_0 -fa on")
    assert {"split-tensor-quantized-kv", "split-tensor-no-fit"} <= set(got)
    assert got["split-tensor-no-fit"].severity == "info" and "fit.cpp:183-185" in got["split-tensor-no-fit"].source
    assert found("-m m.gguf -sm tensor -fit on")["split-tensor-no-fit"].severity == "warning"
    quiet = found("-m m.gguf -sm tensor -fit off -c 8192")
    assert not {"split-tensor-quantized-kv", "split-tensor-no-fit", "fit-ignored"} & set(quiet)


def test_a_negative_ngl_other_than_auto_and_all():
    a = found("-m m.gguf -ngl -5")["ngl-negative"]
    assert "-ngl -5" in a.message and "every layer" in a.message and "-ngl all" in a.reason
    for ok in ("-ngl -1", "-ngl -2", "-ngl all", "-ngl auto", "-ngl 99"):
        assert "ngl-negative" not in found(f"-m m.gguf {ok}")


def test_explicit_parallel_without_unified_kv():
    a = found("-m m.gguf -np 4 -c 32768")["parallel-without-kvu"]
    assert "-np 4" in a.message and "-kvu" in a.message and "server.cpp:168-172" in a.source
    assert "parallel-without-kvu" not in found("-m m.gguf -np 4 -kvu")
    assert "parallel-without-kvu" not in found("-m m.gguf -np 4 -no-kvu")  # a choice
    assert "parallel-without-kvu" not in found("-m m.gguf")


SEED_A = ("llama-server -m Q.gguf -c 262144 -ngl 999 -fa on -ctk q8_0 -ctv q8_0 --spec-type draft-mtp,ngram-map-k4v "
          "--spec-draft-n-max 3 --spec-draft-device CUDA0 --split-mode layer -dev CUDA0,Vulkan2 -ts 40,60 --jinja "
          "-fitt 256 -ub 2048")
SEED_B = (r"llama-server -m Q27.gguf -c 65536 -ngl 99 -fa on -ctk q8_0 -ctv q8_0 "
          r'--override-tensor "blk\.(0|3|6|9|12|15|18|21|24|27|30|33|36|39|42|45|48|51|54|57|60|63)\.ffn_.*=CPU" '
          "--spec-type draft-mtp --spec-draft-n-max 2 -ctkd q8_0 -ctvd q8_0 -t 8 -tb 16")
SEED_C = "./build/bin/llama-server -m Q-MTP.gguf -c 262000 -tbq 4 --mtp-draft 3 -ngl 99 -t 8"


@pytest.mark.parametrize(("text", "n_gpus"), [(SEED_A, 2), (SEED_B, 1), (SEED_C, 1)], ids=["A", "B", "C"])
def test_no_new_rule_fires_on_the_seed_command_lines(text, n_gpus):
    """Cases A (two GPUs, no override, -ngl 999), B (one 16 GB GPU with an FFN override) and C (a fork's flags)
    hit none of the cliffs: with the tested build's FA_QUANTS, this machine's GPU count and a roomy host."""
    got = found(text, model=Facts(nextn_layers=1, block_count=64), n_gpus=n_gpus, physical_cores=8,
                fa_quants=H200_QUANTS, host_available_mib=60000)
    assert not NEW & set(got), got


def test_a_launched_servers_log_keeps_its_builds_fa_quants(tmp_path):
    """The Live launch path: ServerSession reads the system_info line and keeps FA_QUANTS for its binary."""
    from llm_tuner.services import device_ids
    from llm_tuner.services.launch import plan_launch
    from llm_tuner.services.server import ServerSession

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    assert device_ids.cached_fa_quants(binary) is None  # never started: unknown
    session = ServerSession(plan_launch(binary, ["-m", "x.gguf"], watch=False), lambda ev: None)
    for line in (DATA / "logs" / "h200-vulkan-nodev.log").read_text().splitlines():
        session._on_line(line)
    assert device_ids.cached_fa_quants(binary) == H200_QUANTS
