"""What a launch runs: user flags vs the app's watch flags, a clean environment, config files shown."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.core.cmdline import parse_help
from llm_tuner.services.launch import plan_launch

HELP = (Path(__file__).parents[1] / "data" / "binary" / "llama-server-help.txt").read_text()


def test_watch_flags_are_kept_apart_and_left_out_of_the_copied_command():
    plan = plan_launch("/opt/llama-server", ["-m", "m.gguf", "--port", "9000"], catalog=parse_help(HELP),
                       base_env={})
    assert plan.watch_args == ("--metrics", "--log-jsonl")
    assert plan.argv == ["/opt/llama-server", "-m", "m.gguf", "--port", "9000", "--metrics", "--log-jsonl"]
    assert plan.command_line() == "/opt/llama-server -m m.gguf --port 9000"
    assert plan.command_line(include_watch=True).endswith("--metrics --log-jsonl")
    assert plan.url == "http://127.0.0.1:9000"


def test_watching_can_be_turned_off_and_is_not_doubled():
    assert plan_launch("s", ["--port", "1", "--metrics"], catalog=parse_help(HELP), base_env={}).watch_args == (
        "--log-jsonl",)
    assert plan_launch("s", ["--port", "1"], catalog=parse_help(HELP), watch=False, base_env={}).watch_args == ()
    # A binary whose --help lacks --log-jsonl (older or a fork) only gets --metrics.
    assert plan_launch("s", ["--port", "1"], catalog=None, base_env={}).watch_args == ("--metrics",)


def test_inherited_llama_arg_vars_are_dropped_unless_the_profile_sets_them():
    base = {"PATH": "/bin", "LLAMA_ARG_CTX_SIZE": "99", "LLAMA_ARG_N_GPU_LAYERS": "0"}
    plan = plan_launch("s", ["--port", "1"], {"LLAMA_ARG_N_GPU_LAYERS": "99"}, base_env=base)
    assert "LLAMA_ARG_CTX_SIZE" not in plan.env and plan.env["LLAMA_ARG_N_GPU_LAYERS"] == "99"
    assert plan.dropped_env == {"LLAMA_ARG_CTX_SIZE": "99"}
    assert any("LLAMA_ARG_CTX_SIZE=99 is not passed on" in n for n in plan.notes())
    assert plan.command_line().startswith("LLAMA_ARG_N_GPU_LAYERS=99 s ")


def test_cuda_device_order_is_pci_bus_unless_the_user_chose():
    assert plan_launch("s", ["--port", "1"], base_env={}).env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    mine = plan_launch("s", ["--port", "1"], base_env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert mine.env["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_a_llama_cpp_config_ini_is_shown(tmp_path):
    ini = tmp_path / "llama.cpp" / "config.ini"
    ini.parent.mkdir()
    ini.write_text("[server]\nctx-size = 512\n")
    plan = plan_launch("s", ["--port", "1"], base_env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert plan.config_files == (str(ini),)
    assert any(str(ini) in n for n in plan.notes())


def test_secrets_are_masked_in_the_copied_command_and_kept_out_of_argv():
    plan = plan_launch("s", ["--port", "1", "--api-key", "sk-secret", "--hf-token", "hf_flag"],
                       {"HF_TOKEN": "hf_x", "LLAMA_ARG_HF_TOKEN": "hf_y"}, base_env={})
    line = plan.command_line()
    for secret in ("sk-secret", "hf_x", "hf_y", "hf_flag"):
        assert secret not in line
    assert "--api-key '********'" in line and "LLAMA_ARG_HF_TOKEN='********'" in line
    # what runs (and what the history stores) carries no secret: they travel in the environment
    assert "--hf-token" not in plan.argv and "hf_flag" not in " ".join(plan.argv)
    # llama-server lets a flag override its variable: the flag's token is the one it gets
    assert plan.env["HF_TOKEN"] == "hf_flag"


def test_a_free_port_is_chosen_when_none_is_given():
    plan = plan_launch("s", ["-m", "m.gguf"], base_env={})
    assert plan.user_args[-2] == "--port" and plan.port > 0
