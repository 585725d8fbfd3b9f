"""Builds and heat in the views (real widgets offscreen, real SQLite): the History's Build column and filter,
Compare's build row and heat warning, and the Profile tab's migration banner (diff, a choice never made for the
user, apply saves a new version)."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.core.bench_spec import BenchRun, DevicePeak, Repetition
from llm_tuner.core.build import BuildStamp
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.cmdline.migrate import plan_migration
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.builds import ProfileBuildCheck
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository

DATA = Path(__file__).resolve().parents[1] / "data" / "binary"
OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64)
NEW = BuildStamp(key="f:bbbbbbbbbbbb h:2 p:-", file_sha256="b" * 64, help_sha256="2" * 64, driver="580.65",
                 cuda="13.0")


def _ctx(tmp_path) -> AppContext:
    return AppContext(settings=Settings(), engine=open_engine(tmp_path / "ui.sqlite"))


def _run(repo, build, temp, label="p"):
    run_id = repo.create_run(BenchRun(label=label, build=build, status="running"))
    for i in range(3):
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, predicted_n=16, predicted_ms=400.0,
                                        predicted_per_second=40.0 + i,
                                        peaks=(DevicePeak(device="CUDA0", temp_c=temp, sm_clock_mhz=1900.0),)))
    repo.finish_run(run_id, "complete")
    return repo.get_run(run_id)


def test_history_shows_and_filters_by_build(qtbot, tmp_path):
    from llm_tuner.ui.panels.bench_history import RunHistoryTab

    ctx = _ctx(tmp_path)
    repo = RunRepository(ctx.engine)
    _run(repo, OLD, 40.0)
    _run(repo, NEW, 40.0)
    _run(repo, NEW, 40.0)
    tab = RunHistoryTab(ctx, repo)
    qtbot.addWidget(tab)
    tab.refresh()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 3 and tab.filter_build.count() == 3, timeout=10_000)
    column = tab.model.HEADERS.index("Build")
    assert sorted(tab.model.column_texts(column)) == ["aaaaaaaa", "bbbbbbbb", "bbbbbbbb"]
    assert tab.filter_build.itemText(1) == "build bbbbbbbb · driver 580.65 CUDA 13.0"  # the newest run's first
    tab.filter_build.setCurrentIndex(2)
    tab.refresh()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 1, timeout=10_000)
    assert tab.model.column_texts(column) == ["aaaaaaaa"] and tab.filter_build.currentData() == OLD.key


def test_compare_names_the_build_and_warns_of_different_temperatures(qtbot, tmp_path):
    from llm_tuner.ui.panels.compare_panel import ComparePanel

    ctx = _ctx(tmp_path)
    repo = RunRepository(ctx.engine)
    a, b = _run(repo, OLD, 45.0), _run(repo, NEW, 79.0)
    panel = ComparePanel(ctx)
    qtbot.addWidget(panel)
    panel.show_comparison(a, b)
    assert "different thermal states (GPU temperature 45 °C (A) vs 79 °C (B))" in panel.verdict_label.text()
    rows = {panel.diff_table.item(i, 0).text(): (panel.diff_table.item(i, 1).text(), panel.diff_table.item(i, 2).text())
            for i in range(panel.diff_table.rowCount())}
    assert rows["llama-server build"] == ("aaaaaaaa", "bbbbbbbb")
    assert rows["GPU driver"] == ("(absent)", "driver 580.65 CUDA 13.0")
    qtbot.waitUntil(lambda: panel.builds_row.profile_combo.count() == 0, timeout=5_000)
    assert not panel.builds_row.start("", "", 1)  # nothing chosen: said, nothing started
    assert "Choose a saved profile" in panel.builds_row.status_label.text()


def test_the_banner_shows_the_diff_asks_for_the_choice_and_saves_a_version(qtbot, tmp_path):
    from llm_tuner.ui.panels.profile_migrate import CHOOSE, MigrationBanner

    ctx = _ctx(tmp_path)
    old_help = (DATA / "llama-server-help-2026-04.txt").read_text()
    new = parse_help((DATA / "llama-server-help.txt").read_text())
    profile = import_command(["-m", "/m.gguf", "--spec-type", "ngram-mod", "--draft-max", "48", "--no-mmap"],
                             catalog=parse_help(old_help)).profile
    saved = ProfileRepository(ctx.engine).save("ng", profile, build=OLD, help_text=old_help)
    check = ProfileBuildCheck(saved, OLD, NEW, ("llama-server build aaaaaaaa -> bbbbbbbb",),
                              plan_migration(profile, new, parse_help(old_help)), new, True)
    banner = MigrationBanner(ctx)
    qtbot.addWidget(banner)
    got = []
    banner.migrated.connect(got.append)
    banner.show_check(check)
    assert not banner.isHidden()
    assert "ng v1 was saved with another build" in banner.headline.text()
    box = banner.choice_boxes["--draft-max"]
    assert box.currentText() == CHOOSE
    assert box.itemText(2).endswith("(the profile points here)")  # ngram-mod drafting: the ngram flag
    diff = banner.diff_view.toPlainText()
    assert "- " in diff and "--load-mode none" in diff.split("\n")[1]
    assert "(left as they are until chosen: --draft-max)" in diff
    box.setCurrentIndex(2)
    assert "--spec-ngram-mod-n-max 48" in banner.diff_view.toPlainText()
    banner.apply()
    qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    new_version, versions = got[0]
    assert new_version.version == 2 and len(versions) == 2
    assert new_version.profile.ngram_mod_n_max == 48 and new_version.profile.load_mode == "none"
    assert new_version.profile.extra_args == ()
