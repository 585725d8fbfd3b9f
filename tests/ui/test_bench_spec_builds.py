"""Issue 12 in the Benchmarks and Compare views: speculative figures (α_i, tokens per step, ceiling, other
depths) and an A/B across builds (a second llama-server chosen in the form; Compare lists what differs)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.bench_spec import BenchRun, Repetition


def _drafted(run_id: int, gen: float) -> BenchRun:
    reps = tuple(Repetition(seq=i, prompt_tokens=64, prompt_n=64, prompt_per_second=500.0, predicted_n=64,
                            predicted_per_second=gen + i, draft_n=121, draft_n_accepted=32, draft_steps=31,
                            draft_accepted_per_pos=(17, 9, 5, 1)) for i in range(2))
    return BenchRun(id=run_id, label="self-draft", reps=reps, status="complete", binary_version="version: 2 (new)",
                    server_argv=("-m", "x.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "4"))


def test_benchmarks_and_compare_show_the_speculative_figures(qtbot):
    from llm_tuner.app import build_window

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    bench, compare = window.bench_panel, window.compare_panel
    drafted = _drafted(2, 30.0)
    bench.show_run(drafted)
    notes = bench.gap_label.text()
    assert "α1 = 55%, α2 = 53%, α3 = 56%, α4 = 20%" in notes and "mean tokens per step 2.03" in notes
    assert "speed-up ceiling 2.03×" in notes and "k=8:" in notes
    base = BenchRun(id=1, label="no draft", status="complete", binary_version="version: 1 (old)",
                    server_argv=("-m", "x.gguf", "--spec-type", "none"),
                    reps=tuple(Repetition(seq=i, prompt_tokens=64, prompt_n=64, prompt_per_second=500.0,
                                          predicted_n=64, predicted_per_second=20.0 + i) for i in range(2)))
    compare.show_comparison(base, drafted)
    text = compare.verdict_label.text()
    assert "measured generation speed-up 1.49× against no drafting, ceiling 2.03×" in text
    rows = [tuple(compare.diff_table.item(r, c).text() for c in range(3)) for r in range(compare.diff_table.rowCount())]
    assert ("llama-server version", "version: 1 (old)", "version: 2 (new)") in rows


@pytest.mark.server
def test_a_run_with_another_llama_server_records_it_and_compare_lists_it(qtbot, tiny_model, tmp_path):
    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.services.binaries import SERVER, locate

    other = tmp_path / "other-build" / "llama-server"  # another path to a real build (an upgrade, a fork)
    other.parent.mkdir()
    other.symlink_to(locate(SERVER).path)
    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    ctx.state.set_profile(LaunchProfile(model=str(tiny_model), threads=2))  # the tiny model: the build is the claim
    bench = window.bench_panel
    bench.prompt_edit.setText("32")
    bench.gen_spin.setValue(4)
    bench.reps_spin.setValue(1)
    bench.warmup_spin.setValue(0)
    runs = []
    for binary in ("", str(other)):
        bench.binary_edit.setText(binary)
        qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not bench.is_running(), timeout=120_000)
        assert bench.last_run is not None and bench.last_run.status == "complete", bench.status_label.text()
        runs.append(bench.last_run)
    assert runs[1].binary_path == str(other) and runs[0].binary_path != str(other)
    assert runs[1].binary_version and runs[1].server_argv == runs[0].server_argv
    window.compare_panel.show_comparison(*runs)
    table = window.compare_panel.diff_table
    rows = {table.item(r, 0).text(): table.item(r, 2).text() for r in range(table.rowCount())}
    assert rows.get("llama-server binary") == str(other)
