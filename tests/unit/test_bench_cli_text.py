"""`llm-tuner runs show|compare` as text for people (readable names, no None) and a closed stdout."""

from __future__ import annotations

import subprocess
import sys

from llm_tuner.cli import main
from llm_tuner.core.bench_spec import BenchRun, Repetition


def _store_runs(count: int = 2, model: str = "/m/x.gguf") -> list[int]:
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    repo = RunRepository(open_engine(database_path()))
    ids = []
    for i in range(count):
        argv = ("-m", "x.gguf", "--jinja") + (("--ubatch-size", "256") if i % 2 else ())
        run_id = repo.create_run(BenchRun(label=f"run{i}", model_path=model, server_argv=argv))
        for seq, gen in enumerate((60.0 + 10 * (i % 2), 61.0 + 10 * (i % 2))):
            repo.add_rep(run_id, Repetition(seq=seq, prompt_tokens=128, prompt_n=128, prompt_per_second=500.0,
                                            predicted_n=32, predicted_per_second=gen, ttft_ms=100.0,
                                            latency_ms=300.0))
        repo.finish_run(run_id, "complete")
        ids.append(run_id)
    repo.engine.dispose()
    return ids


def test_runs_show_and_compare_print_readable_names_and_absent_flags(capsys):
    a, b = _store_runs()
    assert main(["runs", "list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["run", "started", "status", "profile", "model", "(benchmark", "settings)"]
    assert len(rows) == 2 and rows[0].split()[0] == str(b) and "T" not in rows[0].split()[2]  # a date, a time
    assert main(["runs", "show", str(a)]) == 0
    out = capsys.readouterr().out
    assert "Time to first token @ 128 tok (ms)" in out and "ttft_ms@" not in out

    assert main(["runs", "compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Generation @ 128 tok (t/s)" in out and "gen_tps@" not in out
    assert "--ubatch-size: (absent) -> 256" in out
    assert "None" not in out

    assert main(["runs", "compare", str(a), str(b), "--json"]) == 0  # scripts keep the ids and null
    assert '"name": "gen_tps@128"' in capsys.readouterr().out


def test_runs_compare_says_inconclusive_where_the_interval_cannot_tell(capsys, tmp_path):
    """Two noisy repetitions a side: "within noise" would read as "the same"; the table says inconclusive and
    a line under it says why and what narrows it, in the terminal and the Markdown report."""
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    repo = RunRepository(open_engine(database_path()))
    ids = []
    for label, gens in (("a", (100.0, 80.0)), ("b", (95.0, 110.0))):
        run_id = repo.create_run(BenchRun(label=label, model_path="/m/x.gguf", server_argv=("-m", "x.gguf")))
        for seq, gen in enumerate(gens):
            repo.add_rep(run_id, Repetition(seq=seq, prompt_tokens=128, prompt_n=128, prompt_per_second=500.0,
                                            predicted_n=32, predicted_per_second=gen))
        repo.finish_run(run_id, "complete")
        ids.append(run_id)
    repo.engine.dispose()
    assert main(["runs", "compare", str(ids[0]), str(ids[1]), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("Generation @ 128"))
    assert row.rstrip().endswith("inconclusive")
    assert "Inconclusive (Generation @ 128 tok (t/s)): within noise, but the 95 % interval still allows" in out
    report = next(tmp_path.glob("*.md")).read_text()
    assert "| inconclusive |" in report and "Inconclusive (Generation @ 128 tok (t/s))" in report


def test_a_closed_stdout_ends_quietly(tmp_path):
    _store_runs(400, "/m/" + "x" * 300 + ".gguf")  # more text than a pipe holds: writing fails after `head`
    proc = subprocess.Popen([sys.executable, "-m", "llm_tuner", "runs", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.readline()  # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_vs_no_draft_text_never_puts_the_drafting_acceptance_under_the_none_run(capsys):
    """Issue 22 item 6: the interleaved A/B ends with a `--spec-type none` run; the pooled acceptance of the
    drafting runs printed right after it, indented like its own lines, read as the none run's figures."""
    from llm_tuner.cli.bench import print_speculative_ab
    from llm_tuner.core.bench_report import speculative_ab

    def run(i, value, drafted):
        rep = Repetition(prompt_tokens=64, predicted_n=64, predicted_per_second=30.0 if drafted else 20.0,
                         draft_n=40 if drafted else None, draft_n_accepted=25 if drafted else None)
        argv = ("-m", "x.gguf", "--spec-type", value, "--spec-draft-n-max", "3")
        return BenchRun(id=i, label=f"p {value}", status="complete", reps=(rep,), sweep_value=value, server_argv=argv)

    runs = [run(1, "draft-simple", True), run(2, "none", False), run(3, "draft-simple", True), run(4, "none", False)]
    print_speculative_ab(runs, speculative_ab(runs))
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("run 4 "))
    none_block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        none_block.append(line)  # the lines that read as the none run's own
    assert not any("Draft acceptance" in line for line in none_block), none_block
    assert "Drafting runs 1, 3 pooled" in out and "Draft acceptance 62.5% overall" in out


def test_runs_compare_text_shows_both_medians(capsys):
    a, b = _store_runs()
    assert main(["runs", "compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "A median" in out and "B median" in out
    row = next(line for line in out.splitlines() if "Generation @ 128 tok (t/s)" in line)
    assert "60.50" in row and "70.50" in row  # the medians of (60, 61) and (70, 71)


def test_export_delete_and_database_print_text_or_json(capsys, tmp_path):
    import json

    (a,) = _store_runs(1)
    assert main(["runs", "export", str(a), "--format", "csv", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"run {a} written to ")
    assert main(["runs", "export", str(a), "--format", "csv", "--out", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == a
    assert main(["database", "check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["runs", "delete", str(a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": a}
