"""Issue 22 item 24: reports name the hardware (CPU, cores, RAM, OS, GPUs with their driver, RPC devices, the
llama.cpp build and backends), and a comparison has a report of its own (`runs compare --format md --out`)."""

from __future__ import annotations

import json

from llm_tuner.cli import main
from llm_tuner.core.bench_report import report_markdown
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition
from llm_tuner.core.hardware import hardware_lines, host_entry
from llm_tuner.services.telemetry.host import machine_record

HOST = host_entry("AMD EPYC 9654 96-Core Processor", 96, 192, 1548288, "Linux-6.8.0-x86_64-with-glibc2.39")
H200 = {"name": "CUDA0", "vendor": "nvidia", "model": "NVIDIA H200", "memory_total_mib": 143771,
        "driver": "570.86.15", "llama_names": ["CUDA0"]}
RPC = {"name": "RPC0", "endpoint": "10.0.0.2:50052", "model": "RPC worker 10.0.0.2:50052", "memory_total_mib": 31000}


def test_the_hardware_block_names_everything_a_reader_needs():
    text = "\n".join(hardware_lines([HOST, H200, RPC], "version: 7400 (abc123)", ("CUDA", "CPU")))
    assert "- CPU: AMD EPYC 9654 96-Core Processor (96 cores, 192 threads)" in text
    assert "- RAM: 1512.0 GiB" in text and "- OS: Linux-6.8.0" in text
    assert "- GPUs: NVIDIA H200 (CUDA0), 140.4 GiB, driver 570.86.15" in text
    assert "- RPC devices: RPC0 (RPC worker 10.0.0.2:50052) 30.3 GiB" in text
    assert "- llama.cpp: version: 7400 (abc123) · backends: CUDA, CPU" in text
    old = "\n".join(hardware_lines([], None))  # a run stored before the machine was recorded says so
    assert "not recorded with this run" in old and "GPUs: none recorded" in old


def test_this_machine_is_recorded_as_the_report_reads_it():
    rec = machine_record()
    assert rec["kind"] == "host" and rec["cores_logical"] and rec["memory_total_mib"] and rec["os"]


def test_a_run_report_has_the_hardware_block():
    run = BenchRun(id=7, label="chat", status="complete", devices=[HOST, H200], binary_version="version: 7400 (abc)",
                   binary_backends=("CUDA", "CPU"),
                   reps=(Repetition(prompt_tokens=64, predicted_n=32, predicted_per_second=50.0),))
    md = report_markdown(run)
    assert "## Hardware" in md and "NVIDIA H200 (CUDA0)" in md and "AMD EPYC 9654" in md


def _store(repo, label, gen, devices):
    run_id = repo.create_run(BenchRun(label=label, model_path="/m/x.gguf", server_argv=("-m", "x.gguf", "-ub", label),
                                      devices=devices, binary_version="version: 7400 (abc)",
                                      spec=BenchSpec(prompt_tokens=(128,), reps=2)))
    for seq, g in enumerate(gen):
        repo.add_rep(run_id, Repetition(seq=seq, prompt_tokens=128, prompt_n=128, predicted_n=32,
                                        predicted_per_second=g, ttft_ms=100.0))
    repo.finish_run(run_id, "complete")
    return run_id


def test_runs_compare_writes_a_report_with_medians_and_hardware(capsys, tmp_path):
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    repo = RunRepository(open_engine(database_path()))
    a = _store(repo, "512", (60.0, 61.0), [HOST, H200])
    b = _store(repo, "256", (70.0, 71.0), [HOST, H200])
    repo.engine.dispose()
    assert main(["runs", "compare", str(a), str(b), "--format", "md", "--out", str(tmp_path), "--json"]) == 0
    report = tmp_path / f"compare-{a}-{b}.md"
    assert json.loads(capsys.readouterr().out)["report"] == str(report)
    md = report.read_text()
    assert md.startswith(f"# Comparison: run {b} (256) against run {a} (512)")
    row = next(line for line in md.splitlines() if line.startswith("| Generation @ 128 tok"))
    assert "60.50 (2)" in row and "70.50 (2)" in row and "+16.5 %" in row
    assert "`--ubatch-size`: `512` → `256`" in md
    assert "## Hardware (A and B)" in md and "NVIDIA H200 (CUDA0), 140.4 GiB, driver 570.86.15" in md
