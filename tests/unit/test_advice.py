"""Advice rules fire on the traps users hit (field notes) and stay quiet on a clean profile."""

from __future__ import annotations

from dataclasses import dataclass

from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.profile import LaunchProfile, OverrideRule
from tests.conftest import DATA

CATALOG = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())


@dataclass
class Facts:
    nextn_layers: int = 0
    context_length: int | None = 32768


def ids(profile, **kw):
    return {a.id for a in advise(profile, CATALOG, **kw)}


def test_clean_profile_has_no_advice():
    assert ids(LaunchProfile(model="m.gguf", ctx_size=8192, cache_type_k="q8_0", cache_type_v="q8_0")) == set()


def test_case_a_command_warns_about_mtp_on_a_layer_split_and_ignored_fit():
    text = ("llama-server -m Q.gguf -c 262144 -ngl 999 -fa on -ctk q8_0 -ctv q8_0 --spec-type draft-mtp,ngram-map-k4v "
            "--spec-draft-n-max 3 --spec-draft-device CUDA0 --split-mode layer -dev CUDA0,Vulkan2 -ts 40,60 "
            "--jinja -fitt 256 -ub 2048")
    got = ids(import_command(text, CATALOG).profile, model=Facts(nextn_layers=1, context_length=262144))
    assert got == {"mtp-multi-gpu-prefill", "fit-ignored", "large-ubatch-multi-gpu", "mixed-backends"}


def test_kv_mismatch_and_quantized_v_without_fa():
    got = advise(LaunchProfile(model="m.gguf", cache_type_k="q8_0", cache_type_v="q4_0", flash_attn="off"), CATALOG)
    assert [a.id for a in got] == ["quantized-v-needs-fa", "kv-type-mismatch"]  # errors first
    assert all(a.reason and a.source for a in got)


def test_kv_mismatch_counts_llama_arg_env():
    assert "kv-type-mismatch" in ids(LaunchProfile(cache_type_k="q8_0", env={"LLAMA_ARG_CACHE_TYPE_V": "f16"}))


def test_removed_and_unknown_flags():
    r = import_command("./build/bin/llama-server -m m.gguf -c 262000 -tbq 4 --mtp-draft 3 --mlock", CATALOG)
    got = {a.id: a for a in advise(r.profile, CATALOG)}
    assert "-tbq 4 --mtp-draft 3" in got["unknown-flag"].message
    assert "--load-mode mmap+mlock" in got["removed-flag"].message


def test_model_facts_rules():
    p = LaunchProfile(model="m.gguf", spec_type=("draft-mtp",), ctx_size=65536)
    assert {"draft-mtp-without-mtp-layers", "ctx-over-trained"} <= ids(p, model=Facts(0, 32768))
    assert ids(p, model=Facts(1, 131072)) == set()
    assert "draft-mtp-without-mtp-layers" not in ids(p)  # unknown model: no claim


def test_exposed_without_api_key():
    assert "exposed-without-api-key" in ids(LaunchProfile(host="0.0.0.0"))
    assert "exposed-without-api-key" not in ids(LaunchProfile(host="0.0.0.0", api_key="k"))
    assert "exposed-without-api-key" not in ids(LaunchProfile(host="127.0.0.1"))
    assert "exposed-without-api-key" not in ids(LaunchProfile(host="::1"))


def test_fit_ignored_only_when_fit_is_on():
    p = LaunchProfile(override_tensor=(OverrideRule(pattern="ffn", buffer="CPU"),))
    assert "fit-ignored" in ids(p)
    assert "fit-ignored" not in ids(p.model_copy(update={"fit": False}))


def test_more_traps():
    assert "draft-model-without-spec-type" in ids(LaunchProfile(draft_model="d.gguf"))
    assert "cuda-graphs-env-presence" in ids(LaunchProfile(env={"GGML_CUDA_DISABLE_GRAPHS": "0"}))
    assert "chat-template-kwargs-json" in ids(LaunchProfile(chat_template_kwargs="{bad"))
    assert "kv-type-unsupported" in ids(LaunchProfile(cache_type_k="turbo4", cache_type_v="turbo4"))
    assert "parallel-zero" in ids(LaunchProfile(parallel=0))


def test_multi_gpu_rules_use_the_machine_gpu_count_when_devices_are_left_default():
    p = LaunchProfile(model="m.gguf", spec_type=("draft-mtp",), ubatch_size=2048)
    assert ids(p) == set()  # one GPU, or unknown: quiet
    assert {"mtp-multi-gpu-prefill", "large-ubatch-multi-gpu"} <= {a.id for a in advise(p, CATALOG, n_gpus=2)}
    assert "mtp-multi-gpu-prefill" not in {a.id for a in advise(p.model_copy(update={"split_mode": "none"}),
                                                                CATALOG, n_gpus=2)}


def test_a_missing_model_file_is_an_error_that_says_what_to_do():
    p = LaunchProfile(model="/models/gone.gguf", ctx_size=4096)
    [a] = [a for a in advise(p, CATALOG, model_file_exists=False) if a.id == "model-file-missing"]
    assert a.severity == "error" and a.fields == ("model",)
    assert "/models/gone.gguf" in a.message and "pick the file in Models or correct the path" in a.message
    assert "model-file-missing" not in ids(p, model_file_exists=True)
    assert "model-file-missing" not in ids(p)  # not checked: no finding
    # a literal ~ says why it was not found
    [a] = advise(LaunchProfile(model="~/m.gguf"), model_file_exists=False)
    assert "does not expand ~" in a.reason and "full path" in a.reason
    # a download has no local file to find
    hf = LaunchProfile(model="cache.gguf", hf_repo="ggml-org/gemma-3-270m-GGUF")
    assert "model-file-missing" not in ids(hf, model_file_exists=False)
    url = LaunchProfile(model="m.gguf", extra_args=("-mu", "https://example.org/m.gguf"))
    assert "model-file-missing" not in ids(url, model_file_exists=False)


def test_gpu_layers_on_a_machine_without_a_gpu_is_an_info_not_silence():
    from llm_tuner.core.advice import advise
    from llm_tuner.core.profile import LaunchProfile

    ids = lambda p, n: [a.id for a in advise(p, n_gpus=n)]  # noqa: E731
    assert "no-gpu-for-layers" in ids(LaunchProfile(gpu_layers=99), 0)
    assert "no-gpu-for-layers" not in ids(LaunchProfile(gpu_layers=99), 1)
    assert "no-gpu-for-layers" not in ids(LaunchProfile(gpu_layers=99), None)  # not known yet
    assert "no-gpu-for-layers" not in ids(LaunchProfile(gpu_layers=0), 0)
    assert "no-gpu-for-layers" not in ids(LaunchProfile(), 0)


def _advice(text):
    return {a.id: a.message for a in advise(import_command(text, CATALOG).profile, CATALOG)}


def test_fa_with_a_wrong_value_says_what_it_takes_not_that_it_was_removed():
    got = _advice("-m m.gguf -fa maybe")
    assert got == {"bad-value": "-fa takes on|off|auto, got 'maybe'"}
    assert "removed-flag" in _advice("-m m.gguf -fa -c 4096")  # the old switch form still is a removed flag


def test_values_llama_server_refuses_are_errors():
    got = [a for a in advise(import_command("-m m.gguf -c abc -t two", CATALOG).profile, CATALOG)]
    assert [(a.id, a.severity, a.message) for a in got] == [
        ("bad-value", "error", "-c needs a whole number, got 'abc'"),
        ("bad-value", "error", "-t needs a whole number, got 'two'")]


def test_a_typo_gets_a_did_you_mean():
    assert "did you mean --ctx-size?" in _advice("-m m.gguf --ctx-sise 100")["unknown-flag"]


def test_removed_flag_messages_say_use_once_and_mlock_fix_matches_its_message():
    from llm_tuner.core.cmdline import apply_fix, validate

    assert "use use" not in _advice("-m m.gguf --draft-max 4")["removed-flag"]
    msg = _advice("-m m.gguf --mlock")["removed-flag"]
    assert "--load-mode mmap+mlock" in msg
    p = import_command("-m m.gguf --mlock", CATALOG).profile
    (removed,) = validate(p, CATALOG).removed
    assert apply_fix(p, removed, CATALOG).load_mode == "mmap+mlock"  # what the message says --mlock did


def test_rpc_workers_are_offload_devices_so_no_gpu_here_does_not_keep_layers_on_the_cpu():
    """Issue 22 item 9: the plan put 19/19 layers on RPC0/RPC1 (CPU workers) while the advice said "no GPU:
    layers stay on the CPU"."""
    rpc = LaunchProfile(model="m.gguf", gpu_layers=99, rpc=("127.0.0.1:50052", "127.0.0.1:50053"))
    assert "no-gpu-for-layers" not in ids(rpc, n_gpus=0)
    [a] = [a for a in advise(LaunchProfile(model="m.gguf", gpu_layers=99), CATALOG, n_gpus=0)
           if a.id == "no-gpu-for-layers"]
    assert "GPU" not in a.message  # an offload device may be a CPU (an RPC worker)
