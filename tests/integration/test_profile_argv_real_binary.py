"""The real llama-server accepts every flag a profile writes, and refuses what validate() reports.

`llama-server ARGV --help` parses and checks every argument first and only then prints the usage and
exits 0 (common/arg.cpp: common_params_parse); a refused argument exits 1 with 'invalid argument'.
No model is loaded, so this takes a fraction of a second.
"""

from __future__ import annotations

import pytest

from llm_tuner.core.cmdline import FIELD_FLAGS, import_command, profile_to_argv, validate
from llm_tuner.core.profile import LaunchProfile, OverrideRule
from llm_tuner.services.binaries import default_catalog, run_short

_RULE = (OverrideRule(pattern="exps", buffer="CPU"),)


def _every_field(tmp_path) -> list[LaunchProfile]:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    keys = tmp_path / "keys.txt"
    keys.write_text("# keys\nk1\n")
    a = LaunchProfile(
        model="m.gguf", mmproj="p.gguf", alias="a", host="127.0.0.1", port=8099, api_key="k", parallel=2,
        kv_unified=True, metrics=True, slots=False, props=True, ctx_size=4096, cache_type_k="q8_0",
        cache_type_v="q8_0", flash_attn="on", swa_full=True, kv_offload=False, cache_ram_mib=1024,
        context_shift=True, gpu_layers="all", split_mode="layer", devices=("none",), tensor_split=(3.0, 1.0),
        main_gpu=0, override_tensor=_RULE, cpu_moe=True, n_cpu_moe=2, fit=False, fit_target_mib=(512,),
        fit_ctx=2048, spec_type=("draft-simple", "ngram-mod"), draft_n_max=4, draft_n_min=1, draft_model="d.gguf",
        draft_device=("none",), draft_gpu_layers=0, draft_cache_type_k="q8_0", draft_cache_type_v="q8_0",
        draft_override_tensor=_RULE, draft_p_min=0.5, ngram_mod_n_min=48, ngram_mod_n_max=64, ngram_mod_n_match=24,
        ngram_simple_size_n=12, ngram_simple_size_m=48, ngram_simple_min_hits=1, ngram_map_k_size_n=12,
        ngram_map_k_size_m=48, ngram_map_k_min_hits=1, ngram_map_k4v_size_n=12, ngram_map_k4v_size_m=48,
        ngram_map_k4v_min_hits=1, batch_size=1024, ubatch_size=256, threads=2, threads_batch=2,
        load_mode="mmap+mlock", cont_batching=False, jinja=True, chat_template="chatml",
        chat_template_kwargs='{"a": 1}', reasoning_format="deepseek", reasoning="off", reasoning_effort="low",
        reasoning_budget=0, reasoning_preserve=False, temp=0.7, top_p=0.9, top_k=20, min_p=0.05,
        presence_penalty=0.1, frequency_penalty=0.1, repeat_penalty=1.1, seed=42)
    b = LaunchProfile(hf_repo="ggml-org/models", chat_template_file=str(template), api_key_file=str(keys),
                      kv_offload=True, slots=True, fit=True, cont_batching=True, reasoning_preserve=True,
                      gpu_layers=12, draft_gpu_layers="auto", flash_attn="auto")
    c = LaunchProfile(kv_unified=False, context_shift=False, jinja=False, split_mode="none")  # negative spellings
    return [a, b, c]


def profile_to_argv_has(profile, ff) -> bool:
    from llm_tuner.core.cmdline import field_tokens

    return bool(field_tokens(profile, ff))


def _parse(server_binary, argv):
    return run_short([str(server_binary), *argv, "--help"], timeout=30)


def test_every_modelled_flag_is_accepted_by_the_real_binary(server_binary, tmp_path):
    profiles = _every_field(tmp_path)
    covered = {f.field for p in profiles for f in FIELD_FLAGS if profile_to_argv_has(p, f)}
    # --rpc is parsed by connecting to the workers (common/arg.cpp add_rpc_devices): test_rpc_workers.py launches
    # the real binary with it against real workers
    assert covered == {f.field for f in FIELD_FLAGS} - {"binary", "rpc"}
    for profile in profiles:
        argv, env = profile_to_argv(profile)
        assert validate(profile, default_catalog()).ok
        run = _parse(server_binary, argv)
        assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("text, refused", [
    ("-m m.gguf --mlock", "--mlock"),
    ("-m m.gguf -c 262000 -tbq 4 --mtp-draft 3", "-tbq"),
    ("-m m.gguf --no-mmap", "--no-mmap"),
])
def test_what_validate_reports_is_what_the_binary_refuses(server_binary, text, refused):
    result = import_command(text.split(), default_catalog())
    argv, _env = profile_to_argv(result.profile)
    report = validate(result.profile, default_catalog())
    assert refused in [r.flag for r in report.removed] + report.unknown
    run = _parse(server_binary, argv)
    assert run.returncode != 0 and f"invalid argument: {refused}" in run.stderr


def test_legacy_fa_switch_is_refused_and_the_fix_is_accepted(server_binary):
    result = import_command(["-m", "m.gguf", "-fa", "-c", "2048"], default_catalog())
    assert [r.flag for r in result.removed] == ["-fa"]
    run = _parse(server_binary, profile_to_argv(result.profile)[0])
    assert run.returncode != 0  # '-c' is taken as the value of -fa
    from llm_tuner.core.cmdline import apply_fix

    fixed = apply_fix(result.profile, result.removed[0], default_catalog())
    assert fixed.flash_attn == "on"
    assert _parse(server_binary, profile_to_argv(fixed)[0]).returncode == 0
