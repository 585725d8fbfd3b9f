"""Import and export of llama-server command lines (core.cmdline), against the recorded --help catalog."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_tuner.core.cmdline import (
    FIELD_FLAGS,
    apply_fix,
    effective_profile,
    import_command,
    parse_help,
    profile_diff,
    profile_to_argv,
    render_shell,
    validate,
)
from llm_tuner.core.profile import LaunchProfile, OverrideRule
from tests.conftest import DATA

CATALOG = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())

CASE_A = r"""llama-server -m Qwen3.8-27B-UD-Q6_K_XL.gguf -c 262144 -ngl 999 -fa on \
  -ctk q8_0 -ctv q8_0 --spec-type draft-mtp,ngram-map-k4v --spec-draft-n-max 3 \
  --spec-draft-device CUDA0 --split-mode layer -dev CUDA0,Vulkan2 -ts 40,60 \
  --jinja -fitt 256"""
CASE_C = ("./build/bin/llama-server -m Qwen3.6-27B-Heretic-v2-Q4_K_M-MTP.gguf -c 262000 -tbq 4 "
          "--mtp-draft 3 -ngl 99 -t 8")


def test_case_a_every_flag_lands_in_its_field():
    r = import_command(CASE_A, CATALOG)
    p = r.profile
    assert (p.model, p.ctx_size, p.gpu_layers, p.flash_attn) == ("Qwen3.8-27B-UD-Q6_K_XL.gguf", 262144, 999, "on")
    assert (p.cache_type_k, p.cache_type_v) == ("q8_0", "q8_0")
    assert p.spec_type == ("draft-mtp", "ngram-map-k4v") and p.draft_n_max == 3
    assert p.draft_device == ("CUDA0",) and p.devices == ("CUDA0", "Vulkan2")
    assert p.split_mode == "layer" and p.tensor_split == (40.0, 60.0)
    assert p.jinja is True and p.fit_target_mib == (256,)
    assert r.unknown == [] and r.removed == [] and p.extra_args == ()
    argv, env = profile_to_argv(p)
    assert "--ctx-size" in argv and "-c" not in argv  # long spellings on output
    assert argv[argv.index("--tensor-split") + 1] == "40,60"
    assert env == {}


def test_case_c_fork_flags_survive_in_order():
    r = import_command(CASE_C, CATALOG)
    assert r.unknown == ["-tbq", "4", "--mtp-draft", "3"]
    assert r.profile.extra_args == ("-tbq", "4", "--mtp-draft", "3")
    assert r.binary == "./build/bin/llama-server"
    argv, _ = profile_to_argv(r.profile)
    assert argv[-4:] == ["-tbq", "4", "--mtp-draft", "3"]
    assert validate(r.profile, CATALOG).unknown == ["-tbq", "4", "--mtp-draft", "3"]


def test_case_b_removed_flag_kept_and_flagged_env_kept():
    text = (
        "export GGML_CUDA_DISABLE_GRAPHS=1\n"
        "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 llama-server -m Qwen3.6-27B-Q4_K_M.gguf -ngl 99 "
        "--override-tensor \"blk\\.(0|3|6|9)\\.ffn_.*=CPU\" -c 65536 -ctk q8_0 -ctv q8_0 "
        "--spec-type draft-mtp --spec-draft-n-max 2 --cache-type-k-draft q8_0 --cache-type-v-draft q8_0 "
        "-t 8 -tb 16 --mlock --fit off -b 512 -ub 256 --parallel 1 "
        "--chat-template-kwargs '{\"reasoning_effort\": \"medium\"}' --reasoning-preserve "
        "--temp 1.0 --top-p 0.95 --top-k 20 --min-p 0.0 --presence-penalty 0.0 --repeat-penalty 1.0"
    )
    r = import_command(text, CATALOG)
    p = r.profile
    assert p.env == {"GGML_CUDA_DISABLE_GRAPHS": "1", "GGML_CUDA_ENABLE_UNIFIED_MEMORY": "1"}
    assert p.override_tensor == (OverrideRule(pattern=r"blk\.(0|3|6|9)\.ffn_.*", buffer="CPU"),)
    assert (p.draft_cache_type_k, p.draft_cache_type_v, p.threads, p.threads_batch) == ("q8_0", "q8_0", 8, 16)
    assert p.fit is False and p.chat_template_kwargs == '{"reasoning_effort": "medium"}'
    assert [x.flag for x in r.removed] == ["--mlock"]
    assert r.removed[0].fix == ("--load-mode", "mmap+mlock")
    assert p.extra_args == ("--mlock",) and p.load_mode is None  # never rewritten silently
    fixed = apply_fix(p, r.removed[0], CATALOG)
    assert fixed.extra_args == () and fixed.load_mode == "mmap+mlock"
    assert validate(fixed, CATALOG).ok


def test_llama_arg_env_stays_env_and_counts_for_effective_values():
    r = import_command("LLAMA_ARG_CTX_SIZE=8192 LLAMA_ARG_CACHE_TYPE_V=q8_0 llama-server -m m.gguf", CATALOG)
    assert r.profile.ctx_size is None and r.profile.env["LLAMA_ARG_CTX_SIZE"] == "8192"
    assert any("--ctx-size" in n for n in r.notes)
    eff = effective_profile(r.profile)
    assert eff.ctx_size == 8192 and eff.cache_type_v == "q8_0"


def test_shell_rendering_quotes_and_masks():
    p = LaunchProfile(model="/models/my model.gguf", api_key="s3cret", env={"HF_TOKEN": "hf_x", "A": "1"})
    argv, env = profile_to_argv(p)
    line = render_shell(argv, env, binary="/opt/llama-server")
    assert "s3cret" not in line and "hf_x" not in line
    assert shlex.split(line)[:3] == ["HF_TOKEN=********", "A=1", "/opt/llama-server"]
    assert "'/models/my model.gguf'" in line
    clear = render_shell(argv, env, binary="/opt/llama-server", mask_secrets=False)
    words = shlex.split(clear)
    assert words[words.index("--api-key") + 1] == "s3cret"


def test_aliases_map_to_one_field_and_last_value_wins():
    r = import_command(["-ctk", "q4_0", "--cache-type-k", "q8_0", "--cache_type_v", "q8_0"], CATALOG)
    assert r.profile.cache_type_k == "q8_0" and r.profile.cache_type_v == "q8_0"


def test_legacy_fa_switch_is_flagged():
    r = import_command("llama-server -m m.gguf -fa -ctk q8_0", CATALOG)
    assert r.profile.flash_attn is None and r.profile.cache_type_k == "q8_0"
    assert r.removed[0].fix == ("--flash-attn", "on")


def test_removed_flag_listed_in_help_is_reported_with_its_value():
    r = import_command(["-m", "m.gguf", "--draft-max", "16", "-md", "d.gguf"], CATALOG)
    assert r.removed[0].tokens == ("--draft-max", "16") and "--spec-draft-n-max" in r.removed[0].replacement
    assert r.profile.extra_args == ("--draft-max", "16") and r.profile.draft_model == "d.gguf"


def test_shell_noise_is_ignored_with_a_note():
    r = import_command("cd ~/llama.cpp && ./llama-server -m m.gguf --port 8081 > server.log 2>&1 &", CATALOG)
    assert r.profile.port == 8081 and r.profile.extra_args == ()
    assert any("server.log" in n for n in r.notes)


def test_pasted_text_expands_an_unquoted_tilde_and_home_as_a_shell_would():
    home = "/home/ann b"  # a space: the expansion must stay one word
    r = import_command("llama-server -m ~/.cache/llm-tuner/models/gemma-3-270m-q4_k_m.gguf -c 4096 -fa on "
                       "-ctk q8_0 -ctv q8_0 --port 8099 -t 2", CATALOG, home=home)
    assert r.profile.model == "/home/ann b/.cache/llm-tuner/models/gemma-3-270m-q4_k_m.gguf"
    assert r.profile.ctx_size == 4096 and r.profile.port == 8099
    assert any("expanded ~" in n and home in n for n in r.notes)
    r = import_command('LLAMA_ARG_MODEL=~/m.gguf llama-server --mmproj "$HOME/mm.gguf" -md ${HOME}/d.gguf '
                       "--chat-template-file ~ --log-file ~/l.txt --slot-save-path ~/slots", CATALOG, home=home)
    assert r.profile.env["LLAMA_ARG_MODEL"] == "/home/ann b/m.gguf"
    assert (r.profile.mmproj, r.profile.draft_model) == ("/home/ann b/mm.gguf", "/home/ann b/d.gguf")
    assert r.profile.chat_template_file == home
    assert r.profile.extra_args == ("--log-file", "/home/ann b/l.txt", "--slot-save-path", "/home/ann b/slots")


@pytest.mark.parametrize("text, model", [
    ("llama-server -m '~/m.gguf'", "~/m.gguf"),  # quoted: bash keeps it too
    ('llama-server -m "~/m.gguf"', "~/m.gguf"),
    ("llama-server -m \\~/m.gguf", "~/m.gguf"),
    ("llama-server -m '$HOME/m.gguf'", "$HOME/m.gguf"),
    ("llama-server -m $HOMEDIR/m.gguf", "$HOMEDIR/m.gguf"),  # another variable: not ours to guess
    ("llama-server -m models/~/m.gguf", "models/~/m.gguf"),  # not at the start of the word
])
def test_quoted_or_inner_tilde_and_other_variables_stay_literal_with_a_note(text, model):
    r = import_command(text, CATALOG, home="/home/ann")
    assert r.profile.model == model
    assert not any(n.startswith("expanded") for n in r.notes)
    if model.startswith(("~", "$")):
        assert any("kept as written" in n and "full path" in n for n in r.notes)


def test_an_argument_list_is_not_expanded_again():
    r = import_command(["-m", "~/m.gguf"], CATALOG, home="/home/ann")  # the shell already had its turn
    assert r.profile.model == "~/m.gguf"


def test_profile_diff_names_the_flags_that_differ():
    a = LaunchProfile(ctx_size=4096, cache_type_k="q8_0")
    b = a.model_copy(update={"ctx_size": 8192, "env": {"X": "1"}})
    assert profile_diff(a, b) == [("--ctx-size", "4096", "8192"), ("env X", None, "1")]


# -- property tests -----------------------------------------------------------------------------

_word = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00,"), min_size=1, max_size=12)
_token = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00,="), min_size=0, max_size=8)
_num = st.floats(allow_nan=False, allow_infinity=False, width=64)
_layers = st.one_of(st.integers(-3, 10**6), st.sampled_from(["auto", "all"]))


def _strategy_for(ff):
    k = ff.kind
    if ff.field == "rpc":  # each value is a worker's host:port (others are refused as the user types them)
        endpoint = st.builds("{}:{}".format, st.from_regex(r"[a-z0-9.-]{1,12}", fullmatch=True), st.integers(1, 65535))
        return st.lists(endpoint, min_size=1, max_size=3).map(tuple)
    return {
        "str": _word,
        "fa": st.sampled_from(["on", "off", "auto"]),
        "int": st.integers(-(2**40), 2**40),
        "float": _num,
        "switch": st.booleans(),
        "toggle": st.none() | st.booleans(),
        "onoff": st.none() | st.booleans(),
        "layers": _layers,
        "list": st.lists(_word, min_size=1, max_size=3).map(tuple),
        "append": st.lists(_word, min_size=1, max_size=3).map(tuple),
        "floats": st.lists(_num.map(abs), min_size=1, max_size=4).map(tuple),
        "ints": st.lists(st.integers(0, 10**6), min_size=1, max_size=4).map(tuple),
        "overrides": st.lists(st.builds(OverrideRule, pattern=_token, buffer=_token), min_size=1, max_size=3).map(tuple),
        "secret": _word,
    }[k]


_FORK_ARGS = st.lists(st.sampled_from([("-tbq", "4"), ("--mtp-draft", "3"), ("--rope-scaling", "yarn"),
                                       ("--no-warmup",), ("--mlock",), ("-lv", "4")]), max_size=3)


@st.composite
def profiles(draw):
    fields = draw(st.lists(st.sampled_from(FIELD_FLAGS), max_size=12, unique_by=lambda f: f.field))
    values = {ff.field: draw(_strategy_for(ff)) for ff in fields}
    extra = tuple(t for pair in draw(_FORK_ARGS) for t in pair)
    env = draw(st.dictionaries(st.from_regex(r"[A-Z_]{1,10}", fullmatch=True), _word, max_size=3))
    return LaunchProfile(**values, extra_args=extra, env=env)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_profile_to_argv_to_profile_is_identity(profile):
    argv, env = profile_to_argv(profile)
    back = import_command(argv, CATALOG, env=env).profile
    assert back == profile
    assert LaunchProfile.model_validate_json(profile.to_json()) == profile


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_importer_never_crashes_on_text(text):
    r = import_command(text, CATALOG)
    profile_to_argv(r.profile)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["-m", "-c", "-ngl", "-ot", "--spec-type", "-fa", "--mlock", "--draft", "x", "1",
                                 "-tbq", "auto", "=", "a=b", "--fit", "on", "-ts", "3/1", "--api-key", ""])
                | st.text(max_size=8), max_size=12))
def test_importer_never_crashes_on_argv(argv):
    r = import_command(argv, CATALOG)
    # nothing is lost: every token is either understood or kept
    assert set(r.unknown) <= set(argv)
    validate(r.profile, CATALOG)


@pytest.mark.parametrize("flag", ["--mlock", "--no-mmap"])
def test_validate_reports_removed_flags_in_argv(flag):
    res = validate(["-m", "m.gguf", flag], CATALOG)
    assert [r.flag for r in res.removed] == [flag] and res.unknown == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_profile_to_shell_line_to_profile_is_identity(profile):
    """The copyable shell line (secrets in clear) pasted back gives the same profile."""
    argv, env = profile_to_argv(profile)
    line = render_shell(argv, env, binary="/opt/llama.cpp/bin/llama-server", mask_secrets=False)
    back = import_command(line, CATALOG)
    assert back.profile == profile.model_copy(update={"binary": "/opt/llama.cpp/bin/llama-server"})
    multiline = render_shell(argv, env, binary="/opt/llama.cpp/bin/llama-server", mask_secrets=False, multiline=True)
    assert import_command(multiline, CATALOG).profile == back.profile


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" -=\\'\"|&;<>\n\r\t#$~^`abcm0123.:/", max_size=80))
def test_importer_never_crashes_on_shell_like_text(text):
    r = import_command(text, CATALOG)
    validate(r.profile, CATALOG)


def test_packaged_default_catalog_is_the_recorded_help():
    from llm_tuner.services.binaries import default_catalog

    assert default_catalog() == CATALOG and len(CATALOG.flags) > 200
