"""One masking for every display path, and no secret in what runs or what is kept.

A profile carries an API key (`--api-key`), a Hugging Face token (`--hf-token`) and a variable named like a
token (`LLAMA_ARG_HF_TOKEN`). Each display path must mask them through core.flags (the Profile tab, the Live
tab's command and its Copy, the CLI's `profile command` and `run` plan), each record must leave them out (the
session history, a benchmark run, its JSON/CSV/Markdown exports), and the process that runs must not carry
them in its argv. Before core.flags, the Live command showed LLAMA_ARG_HF_TOKEN in clear and `--hf-token`
stayed in the executed argv and in the history.
"""

from __future__ import annotations

import json

import psutil

from llm_tuner.cli import main as cli_main
from llm_tuner.core.cmdline import profile_to_argv, render_shell
from llm_tuner.core.flags import MASK
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.launch import plan_from_profile

KEY, TOKEN, VAR_TOKEN = "sk-live-7c1d9e0f", "hf_flagtoken_42", "hf_vartoken_43"
SECRETS = (KEY, TOKEN, VAR_TOKEN)


def _profile(model="m.gguf") -> LaunchProfile:
    return LaunchProfile(model=str(model), api_key=KEY, threads=2, parallel=1, ctx_size=1024,
                         extra_args=("--hf-token", TOKEN), env={"LLAMA_ARG_HF_TOKEN": VAR_TOKEN})


def _clean(text: str) -> bool:
    return not any(s in text for s in SECRETS)


def test_every_display_masks_through_the_one_function(tmp_path, capsys):
    p = _profile()
    argv, env = profile_to_argv(p)
    assert KEY in argv and TOKEN in argv  # the profile itself keeps them (the store is the user's)
    shown = render_shell(argv, env, binary="/opt/llama-server")  # the Profile tab's command and its Copy
    assert _clean(shown) and shown.count(MASK) == 3
    plan = plan_from_profile("/opt/llama-server", p, base_env={})
    for line in (plan.command_line(), plan.command_line(include_watch=True)):  # Live's command, Copy, run's plan
        assert _clean(line) and line.count(MASK) == 3
    assert _clean(" ".join(plan.argv))  # what runs: secrets travel in the environment
    assert plan.env["LLAMA_API_KEY"] == KEY and plan.env["HF_TOKEN"] == TOKEN
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"profile": p.model_dump(mode="json", context={"mask_secrets": False})}))
    assert cli_main(["profile", "command", str(f)]) == 0
    assert _clean(capsys.readouterr().out)


def test_history_benchmark_records_exports_and_the_process_keep_no_secret(tmp_path, tiny_model, server_binary):
    from llm_tuner.core.bench_spec import BenchSpec
    from llm_tuner.services.bench import BenchRunner, target_from_profile
    from llm_tuner.services.bench_export import export_run
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    engine = open_engine(tmp_path / "h.sqlite")
    repo = RunRepository(engine)
    seen_cmdlines: list[str] = []

    def on_line(_line: str) -> None:
        proc = runner.current_process
        if proc is not None and proc.pid and not seen_cmdlines:
            try:
                seen_cmdlines.append(" ".join(psutil.Process(proc.pid).cmdline()))
            except psutil.Error:
                pass

    runner = BenchRunner(repo, predict_memory=False, on_server_line=on_line)
    run = runner.run(target_from_profile(_profile(tiny_model), label="secret"),
                     BenchSpec(prompt_tokens=(32,), gen_tokens=4, reps=1, warmup=0)).run
    assert run.status == "complete", run.error
    assert seen_cmdlines and _clean(seen_cmdlines[0])  # the running process's argv, as `ps` shows it
    stored = repo.get_run(run.id)
    assert _clean(" ".join(stored.server_argv)) and _clean(json.dumps(stored.server_env))
    for fmt in ("json", "csv", "md"):
        out = export_run(stored, tmp_path / fmt, fmt)
        files = [out] if out.is_file() else [x for x in out.rglob("*") if x.is_file()]
        assert all(_clean(x.read_text(errors="replace")) for x in files if x.suffix != ".png"), fmt
