"""The setups of the field notes (docs/field-reports.md) get advice: mixed backends, CUDA environment
variables, threads against physical cores, and a fork's flag the memory plan does not understand."""

from __future__ import annotations

from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.memory import parse_server_args, plan_memory
from llm_tuner.core.profile import LaunchProfile
from tests.conftest import DATA
from tests.unit.test_memory import HOST, gpu, make_model

CATALOG = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())


def by_id(profile, **kw):
    return {a.id: a for a in advise(profile, CATALOG, **kw)}


def test_mixed_cuda_and_vulkan_devices_say_which_side_is_better_at_what():
    text = ("llama-server -m Q.gguf -c 262144 -ngl 999 -fa on --spec-type draft-mtp --spec-draft-n-max 3 "
            "--spec-draft-device CUDA0 --split-mode layer -dev CUDA0,Vulkan2 -ts 40,60")
    a = by_id(import_command(text, CATALOG).profile)["mixed-backends"]
    assert "CUDA, Vulkan" in a.message
    assert "prefill" in a.reason and "generation" in a.reason and "41%" in a.reason and "64%" in a.reason
    assert "mixed-backends" not in by_id(LaunchProfile(model="m.gguf", devices=("CUDA0", "CUDA1")))


def test_cuda_environment_variables_any_value():
    graphs = by_id(LaunchProfile(model="m.gguf", env={"GGML_CUDA_DISABLE_GRAPHS": "1"}))["cuda-graphs-env-presence"]
    assert graphs.severity == "info" and "any value" in graphs.reason
    zero = by_id(LaunchProfile(model="m.gguf", env={"GGML_CUDA_DISABLE_GRAPHS": "0"}))["cuda-graphs-env-presence"]
    assert zero.severity == "warning" and "still disables" in zero.message
    uma = by_id(LaunchProfile(model="m.gguf", env={"GGML_CUDA_ENABLE_UNIFIED_MEMORY": "1"}))["cuda-unified-memory"]
    assert "--fit" in uma.message and "host" in uma.reason and "available memory" in uma.reason


def test_threads_against_physical_cores():
    p = LaunchProfile(model="m.gguf", threads=16, threads_batch=40)
    found = by_id(p, physical_cores=8)
    assert "16" in found["threads-over-physical"].message and "8 physical" in found["threads-over-physical"].message
    assert "threads-batch-over-logical" in found
    assert not {"threads-over-physical", "threads-batch-over-logical"} & set(by_id(p))  # cores unknown: quiet
    assert "threads-over-physical" not in by_id(LaunchProfile(model="m.gguf", threads=8, threads_batch=16),
                                                 physical_cores=8)


def test_plan_says_its_kv_figure_assumes_the_default_type_for_a_forks_kv_flag():
    plan = plan_memory(make_model(), parse_server_args("-m x -c 4096 -ngl 99 -tbq 4"), [gpu()], HOST)
    notes = [w for w in plan.warnings if "-tbq" in w]
    assert len(notes) == 1 and "KV" in notes[0] and "f16/f16" in notes[0]
    assert not any("'4'" in w or w.startswith("4 ") for w in plan.warnings)  # the value is not a flag
