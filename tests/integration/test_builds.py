"""A profile saved with one llama-server build, opened under another (issue 39), on the real binaries: the build
before the 2026-04-26 renames is its recorded --help (tests/data/binary/llama-server-help-2026-04.txt) and a
stamp; the new build is a copy of the embedded one. The renamed flag migrates with consent (the CLI's --yes, the
Profile tab's banner), the ambiguous one only with a choice; `bench --vs-binary` compares the embedded build with
its copy on the real server path."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from llm_tuner.cli import main
from llm_tuner.core.build import BuildStamp
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.services import binaries
from llm_tuner.services.settings_store import load_settings
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository

pytestmark = pytest.mark.server

OLD_HELP = (Path(__file__).resolve().parents[1] / "data" / "binary" / "llama-server-help-2026-04.txt").read_text()
OLD_STAMP = BuildStamp(key="f:0ld0ld0ld0ld h:0ld p:-", file_sha256="0" * 64,
                       help_sha256=hashlib.sha256(OLD_HELP.encode()).hexdigest(), package_version=None,
                       path="/opt/llama.cpp-2026-04/llama-server")


@pytest.fixture
def other_build(server_binary, tmp_path) -> Path:
    """A copy of the embedded build's folder (the program finds its libraries beside it): 'another build'."""
    folder = tmp_path / "other-build"
    shutil.copytree(server_binary.parent, folder, symlinks=True)
    return folder / server_binary.name


def _save_old_profile(tmp_path, binary: Path) -> None:
    from llm_tuner.services.settings_store import database_path

    settings = load_settings()
    binaries.trust_binary(binary, settings)  # the user confirmed this program (the Profile tab's button)
    profile = import_command(["-m", "/models/q.gguf", "-md", "/models/d.gguf", "--spec-type", "draft-simple",
                              "--draft-max", "8", "--mlock", "-c", "4096"], catalog=parse_help(OLD_HELP)).profile
    profile = profile.model_copy(update={"binary": str(binary)})
    ProfileRepository(open_engine(database_path())).save("spec", profile, "saved with the old build",
                                                         build=OLD_STAMP, help_text=OLD_HELP)


def _out(capsys):
    return capsys.readouterr().out


def test_profile_migrate_with_yes_and_a_choice(capsys, tmp_path, other_build):
    _save_old_profile(tmp_path, other_build)
    assert main(["profile", "migrate", "spec", "--json"]) == 0
    data = json.loads(_out(capsys))
    assert data["saved_build"]["path"] == OLD_STAMP.path and data["current_build"]["path"] == str(other_build)
    assert data["changes"][0].startswith("llama-server build 00000000 ->") and data["old_help_kept"]
    moves = {m["flag"]: m for m in data["moves"]}
    assert moves["--draft-max"]["ambiguous"] and moves["--draft-max"]["choices"] == ["--spec-draft-n-max",
                                                                                      "--spec-ngram-mod-n-max"]
    assert moves["--mlock"]["fix"] == ["--load-mode", "mmap+mlock"]
    assert "--draft-max 8" in data["command_before"] and "--load-mode mmap+mlock" in data["command_after"]
    assert data["saved"] is None  # nothing saved without --yes

    assert main(["profile", "migrate", "spec", "--yes"]) == 1  # the ambiguous flag waits for a choice
    text = _out(capsys)
    assert "saved as 'spec' version 2" in text
    assert "not applied: --draft-max needs a choice: --choose draft-max=spec-draft-n-max or spec-ngram-mod-n-max" \
        in text
    assert main(["profile", "migrate", "spec", "--yes", "--choose", "draft-max=spec-draft-n-max", "--json"]) == 0
    done = json.loads(_out(capsys))
    assert done["saved"]["version"] == 3 and done["undone"] == []
    from llm_tuner.services.settings_store import database_path

    latest = ProfileRepository(open_engine(database_path())).latest("spec")
    assert latest.profile.draft_n_max == 8 and latest.profile.load_mode == "mmap+mlock"
    assert latest.profile.extra_args == ()
    assert latest.build is not None and latest.build.path == str(other_build)  # saved with the build it runs now
    assert latest.note.startswith("migrated to this build: --draft-max")
    assert main(["profile", "migrate", "spec"]) == 0
    assert "nothing to migrate (the same build)" in _out(capsys)


def test_the_profile_tab_offers_the_migration_and_applies_it_with_the_choice(qtbot, tmp_path, other_build):
    from llm_tuner.qt.context import AppContext
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    _save_old_profile(tmp_path, other_build)
    ctx = AppContext(engine=open_engine(database_path()), settings=load_settings())
    panel = ProfilePanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: panel.names_list.count() == 1, timeout=10_000)
    panel.names_list.setCurrentRow(0)
    banner = panel.migrate_banner
    qtbot.waitUntil(lambda: banner.isVisibleTo(panel), timeout=60_000)
    assert "spec v1 was saved with another build" in banner.headline.text()
    assert "2 flag(s) this build renamed or removed, 1 with a choice to make" in banner.headline.text()
    banner.review_button.setChecked(True)
    box = banner.choice_boxes["--draft-max"]
    assert box.currentData() is None  # never chosen for the user
    assert [box.itemData(i) for i in range(box.count())] == [None, "--spec-draft-n-max", "--spec-ngram-mod-n-max"]
    assert "(the profile points here)" in box.itemText(1)
    assert "+ " in banner.diff_view.toPlainText() and "--draft-max 8" in banner.diff_view.toPlainText().split("\n")[1]
    box.setCurrentIndex(2)
    assert "--spec-ngram-mod-n-max 8" in banner.diff_view.toPlainText()
    banner.apply()
    qtbot.waitUntil(lambda: panel.profile.ngram_mod_n_max == 8, timeout=60_000)
    assert panel.profile.load_mode == "mmap+mlock" and "--draft-max" not in panel.profile.extra_args
    qtbot.waitUntil(lambda: not banner.isVisibleTo(panel), timeout=60_000)  # the new version is this build's
    qtbot.waitUntil(lambda: not panel.store_busy, timeout=10_000)


def test_bench_vs_binary_compares_two_builds_on_the_real_server(capsys, tiny_model, other_build):
    argv = ["bench", "--json", "--vs-binary", str(other_build), "--rounds", "1", "--prompt-tokens", "16",
            "--gen-tokens", "4", "--reps", "2", "--warmup", "0", "--label", "tiny",
            "--", "-m", str(tiny_model), "-t", "2", "-c", "1024"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    runs = data["runs"]
    assert [r["sweep_value"] for r in runs] == ["A", "B"] and all(r["status"] == "complete" for r in runs)
    assert runs[1]["binary"] == str(other_build) and runs[0]["binary"] != str(other_build)
    assert runs[0]["build"]["file_sha256"] == runs[1]["build"]["file_sha256"]  # a copy: the same build
    verdict = data["verdict"]
    assert verdict["text"].startswith("B against A:") and "the same build file" in verdict["text"]
    gen = next(m for m in verdict["metrics"] if m["name"].startswith("gen_tps@"))
    assert gen["a"]["n"] == 2 and gen["b"]["n"] == 2 and gen["verdict"] is not None
    assert main(["runs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {r["group_id"] for r in listed} == {data["group_id"]}


def test_compare_runs_a_build_ab_of_a_saved_profile(qtbot, tiny_model, other_build):
    from llm_tuner.core.bench_spec import BenchSpec
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.qt.context import AppContext
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.ui.panels.compare_panel import ComparePanel

    ctx = AppContext(engine=open_engine(database_path()), settings=load_settings())
    ProfileRepository(ctx.engine).save("tiny", LaunchProfile(model=str(tiny_model), ctx_size=1024, threads=2))
    panel = ComparePanel(ctx)
    qtbot.addWidget(panel)
    row = panel.builds_row
    qtbot.waitUntil(lambda: row.profile_combo.count() == 1, timeout=10_000)
    spec = BenchSpec(prompt_tokens=(16,), gen_tokens=4, reps=2, warmup=0)
    assert row.start("tiny", str(other_build), 1, spec)
    qtbot.waitUntil(lambda: row.run_button.isEnabled(), timeout=180_000)
    assert row.status_label.text().startswith("done: B against A:"), row.status_label.text()
    assert panel.verdict_label.text().startswith("B against A:")
    assert panel.run_a.binary_path != panel.run_b.binary_path == str(other_build)


def test_an_interleaved_ab_waits_for_the_scripted_gpu_to_cool_and_each_run_says_so(tiny_model, tmp_path):
    """The real server path with the scripted NVML double as the GPU: every repetition records its temperature
    at start, clocks and throttle reasons; each run of the A/B first waits at the gate, and its notes say how."""
    from llm_tuner.core.bench_spec import BenchSpec
    from llm_tuner.services.bench import BenchRunner, ServerTarget, _GpuSources
    from llm_tuner.services.bench.heat import CoolDown
    from llm_tuner.store.runs import RunRepository
    from tests.support.scripted_gpu import ScriptedNvml

    waited: list[float] = []
    # the gate's own view of the card: 40 °C at the start, 52 after the first run, cooling 4 °C a poll
    gate = CoolDown(_GpuSources([("nvidia", ScriptedNvml(1, temps=[40.0, 40.0, 52.0, 48.0, 44.0, 40.0]))]),
                    within_c=3.0, limit_s=60.0, poll_s=0.0, sleep=waited.append)
    runner = BenchRunner(RunRepository(open_engine(tmp_path / "db.sqlite")),
                         telemetry=_GpuSources([("nvidia", ScriptedNvml(1, temps=[41.0, 43.0, 45.0]))]))
    target = ServerTarget(argv=["-m", str(tiny_model), "-t", "2", "-c", "512"], label="ab")
    spec = BenchSpec(prompt_tokens=(16,), gen_tokens=4, reps=2, warmup=0)
    with runner.heat_gated(gate):
        _group, runs = runner.sweep(target, spec, "-ub", ["32", "64"], rounds=1)
    assert [r.status for r in runs] == ["complete", "complete"]
    assert runs[0].notes == ("cool-down: no wait needed (GPUs within 3 °C of the A/B's start: nvidia:0 40 °C)",)
    assert len(waited) == 3 and runs[1].notes[0].startswith("cool-down: waited")  # 52, 48, 44 -> 40
    peak = next(p for p in runs[0].reps[0].peaks if p.device == "nvidia:0")
    assert peak.temp_start_c is not None and peak.sm_clock_mhz == 1980.0 and peak.mem_clock_mhz == 3201.0
    assert peak.throttle_reasons is not None
    assert RunRepository(runner.repo.engine).get_run(runs[1].id).notes == runs[1].notes  # kept with the run
