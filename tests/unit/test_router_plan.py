"""Issue 40: a router planned as a whole (`llm-tuner router plan`) and its presets file (llama.cpp's INI with a
`[*]` section), written from profiles and read back. Real GGUF files written with the `gguf` package."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.core.cmdline import import_command
from llm_tuner.core.memory import FIT_TARGET_MIB
from llm_tuner.core.router_presets import (
    PresetError,
    model_argvs,
    options_to_argv,
    parse_ini,
    presets_from_profiles,
    profile_argv,
    profiles_from_presets,
    write_ini,
)
from llm_tuner.services.router_presets import scan_models_dir
from tests.support.router_models import write_three

ROUTER_ARGS = ["--", "-c", "32768", "-ngl", "99", "--cache-ram", "0"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three models that differ in depth: the K/V of 32k tokens grows with it (a < b < c per device)."""
    return write_three(tmp_path_factory.mktemp("router-models"))


def _plan(capsys, devices: str, folder) -> tuple[int, dict]:
    code = main(["router", "plan", "--json", "--devices", devices, "--models-dir", str(folder), *ROUTER_ARGS])
    return code, json.loads(capsys.readouterr().out)


def test_router_plan_names_the_sets_that_fit_on_two_planned_gpus_and_the_safe_models_max(capsys, folder):
    _code, roomy = _plan(capsys, "CUDA0=80000,CUDA1=80000,Host=65536", folder)
    use = {m["name"]: m["use_mib"] for m in roomy["models"]}
    assert list(use) == ["a", "b", "c"] and all(set(u) == {"CUDA0", "CUDA1", "Host"} for u in use.values())
    assert use["a"]["CUDA0"] < use["b"]["CUDA0"] < use["c"]["CUDA0"]  # each planned with its own layers
    assert roomy["fitting_sets"] == [["a", "b", "c"]] and roomy["models_max"] == 3
    reserved = 80000 - roomy["devices"][0]["budget_mib"]  # what the driver keeps of a planned card
    # a card where a + c fits beside the -fitt margin but b + c does not
    room = (use["a"]["CUDA0"] + use["c"]["CUDA0"] + use["b"]["CUDA0"] + use["c"]["CUDA0"]) / 2
    cap = int(room + FIT_TARGET_MIB + reserved)
    code, tight = _plan(capsys, f"CUDA0={cap},CUDA1={cap},Host=65536", folder)
    assert code == 0
    assert [d["margin_mib"] for d in tight["devices"]] == [FIT_TARGET_MIB, FIT_TARGET_MIB, 0]
    assert tight["fitting_sets"] == [["a", "b"], ["a", "c"]]
    assert [p["models"] for p in tight["pairs_not_fitting"]] == [["b", "c"]]
    assert "CUDA0" in tight["pairs_not_fitting"][0]["short"][0]
    assert tight["models_max"] == 1  # b and c are two models that do not fit together

    assert main(["router", "plan", "--devices", f"CUDA0={cap},CUDA1={cap},Host=65536", "--models-dir",
                 str(folder), *ROUTER_ARGS]) == 0
    text = capsys.readouterr().out
    assert "Sets that fit together: {a, b}, {a, c}" in text and "Do not fit together: b + c" in text
    assert "Safe --models-max: 1" in text


def test_each_instance_prompt_cache_counts_in_host_ram(capsys, folder):
    """The default --cache-ram (8192 MiB) per instance: three of them outgrow 20 GiB of RAM, two do not."""
    code = main(["router", "plan", "--json", "--devices", "Host=20480", "--models-dir", str(folder), "--", "-c",
                 "4096"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["models_max"] == 2
    assert all(m["use_mib"]["Host"] > 8192 for m in out["models"])
    assert main(["router", "plan", "--devices", "Host=4096", "--models-dir", str(folder), "--", "-c", "4096"]) == 1
    assert "No --models-max is safe" in capsys.readouterr().out


def test_a_load_check_gives_the_figures(folder):
    from llm_tuner.core.memory import PlanDevice
    from llm_tuner.services.router_presets import plan_models, router_model_argvs

    named = router_model_argvs(["-c", "4096"], models_dir=str(folder))
    plan = plan_models(named, [], PlanDevice("Host", "CPU", 20480, None, "planned", True))
    assert plan.check_load("c", ["a"]).fits is True
    refused = plan.check_load("c", ["a", "b"])
    assert refused.fits is False and refused.shortfalls[0].device == "Host"
    assert refused.text().startswith("c does not fit beside a, b: Host: ") and "MiB short" in refused.text()


def test_a_models_folder_reads_as_llama_server_reads_it(tmp_path):
    (tmp_path / "one.gguf").write_bytes(b"")
    (tmp_path / "mmproj-one.gguf").write_bytes(b"")  # a companion, not a model
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "big-00001-of-00002.gguf").write_bytes(b"")
    (tmp_path / "big" / "big-00002-of-00002.gguf").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    found = scan_models_dir(tmp_path)
    assert found == {"big": str(tmp_path / "big" / "big-00001-of-00002.gguf"), "one": str(tmp_path / "one.gguf")}


def test_presets_cascade_global_then_section_then_the_router_command_line():
    text = """; a comment
version = 1
[*]
c = 4096
cache-ram = 0
swa-full = true

[small]
model = /m/small.gguf
ctx-size = 8192 ; its own context

[big]
model = /m/big.gguf
n-gpu-layers = 20
LLAMA_ARG_CACHE_TYPE_K = q8_0
"""
    presets = parse_ini(text)
    assert presets.global_options == {"c": "4096", "cache-ram": "0", "swa-full": "true"}
    argvs = model_argvs(presets, {}, ["--port", "8080", "-fa", "on", "--models-max", "2"])
    assert argvs["small"] == ["--ctx-size", "8192", "--cache-ram", "0", "--swa-full", "--model", "/m/small.gguf",
                              "--flash-attn", "on"]
    assert "--cache-type-k" in argvs["big"] and "--n-gpu-layers" in argvs["big"]
    assert "--port" not in argvs["big"] and "--models-max" not in argvs["big"]  # the router's own
    assert options_to_argv({"swa-full": "false", "kv-offload": "off", "no-kv-offload": "false"}) == [
        "--kv-offload"]  # a later key of the same flag wins; a negative spelling reads reversed
    with pytest.raises(PresetError, match="line 2"):
        parse_ini("[a]\nthis is not a key\n")


def test_presets_written_from_profiles_share_what_is_common_and_read_back_as_the_same_profiles():
    one = import_command("-m /m/one.gguf -c 4096 -ngl 99 -ctk q8_0 -ctv q8_0 -fa on --api-key s3cret").profile
    two = import_command(["-m", "/m/two.gguf", "-c", "4096", "-ngl", "12", "-ot", "blk\\.1\\.ffn_.*=CPU", "-fa", "on",
                          "--swa-full"]).profile
    presets = presets_from_profiles({"one": one, "two": two})
    assert presets.global_options == {"ctx-size": "4096", "flash-attn": "on"}
    assert presets.models["one"]["model"] == "/m/one.gguf" and presets.models["one"]["cache-type-k"] == "q8_0"
    assert presets.models["two"]["override-tensor"] == "blk\\.1\\.ffn_.*=CPU"
    text = write_ini(presets, "test")
    assert "s3cret" not in text and "[*]" in text  # no secret in a plain-text file
    back = profiles_from_presets(parse_ini(text))
    assert set(back) == {"one", "two"}
    assert sorted(profile_argv(back["two"])) == sorted(profile_argv(two))
    assert sorted(profile_argv(back["one"])) == sorted(profile_argv(one.model_copy(update={"api_key": None})))
    assert write_ini(presets_from_profiles(back), "test") == text  # and round again, unchanged


def test_presets_write_and_read_on_the_command_line(capsys, folder, tmp_path):
    """`router presets write` from a saved profile and a model the fit solver places on a planned GPU; `router
    presets read --save` turns the file back into saved profiles."""
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository

    assert main(["profile", "import", "--name", "quant", "--", "-m", str(folder / "a.gguf"), "-c", "4096", "-ctk",
                 "q8_0", "-ctv", "q8_0", "-fa", "on"]) == 0
    capsys.readouterr()
    out = tmp_path / "models.ini"
    assert main(["router", "presets", "write", "--profile", "quant", "--model", f"deep={folder / 'c.gguf'}",
                 "--devices", "CUDA0=3000", "-o", str(out)]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["models"]["quant"]["cache-type-k"] == "q8_0"
    deep = written["models"]["deep"]
    assert deep["model"] == str(folder / "c.gguf") and 0 < int(deep["n-gpu-layers"]) < 13  # part of its 13 layers
    assert main(["router", "presets", "read", str(out), "--save"]) == 0
    read = json.loads(capsys.readouterr().out)["profiles"]
    assert read["quant"]["saved_version"] == 1  # the same settings as the saved profile: no new version
    repo = ProfileRepository(open_engine(database_path()))
    assert repo.latest("deep").profile.gpu_layers == int(deep["n-gpu-layers"])
