"""The model library: scanning folders, split sets, projectors, bad files, the cache, and the CLI."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from llm_tuner.cli import main as cli_main
from llm_tuner.cli.model_json import INFO_KEYS
from llm_tuner.services import library
from llm_tuner.services.library import find_models, read_model, scan
from llm_tuner.store.db import open_engine
from llm_tuner.store.model_cache import ModelCacheRepo
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    d = tmp_path_factory.mktemp("orig")
    return {
        "dense": write_qwen3_dense(d / "dense.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32),
        "moe": write_qwen3_moe(d / "moe.gguf", n_layer=2, n_embd=64, n_ff=128, n_ff_exp=64, head_dim=32),
        "split": write_qwen3_dense(d / "big.gguf", n_layer=2, n_embd=64, n_ff=128, head_dim=32,
                                   split_max_tensors=10),
    }


@pytest.fixture
def library_dirs(tmp_path, originals):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "nested" / "deeper").mkdir(parents=True)
    (b / ".hidden").mkdir(parents=True)
    shutil.copy(originals["dense"], a / "nested" / "deeper" / "Dense-Q8_0.gguf")
    shutil.copy(originals["moe"], b / "moe.gguf")
    for part in originals["split"].parent.glob("big-*.gguf"):
        shutil.copy(part, a / part.name)
    shutil.copy(originals["dense"], b / "mmproj-model-f16.gguf")
    shutil.copy(originals["dense"], b / ".hidden" / "ignored.gguf")
    (a / "notes.txt").write_text("not a model")
    (a / "bad-magic.gguf").write_bytes(b"NOPE" + b"\0" * 100)
    data = originals["moe"].read_bytes()
    (b / "truncated.gguf").write_bytes(data[: len(data) // 2])
    hostile = bytearray(data[:200])
    hostile[8:16] = (2**60).to_bytes(8, "little")  # absurd tensor count
    (b / "hostile.gguf").write_bytes(bytes(hostile))
    return a, b


def test_scan_groups_splits_keeps_projectors_apart_and_reports_bad_files(library_dirs):
    a, b = library_dirs
    entries = find_models([a, b])
    assert [e.path for e in entries] == sorted(e.path for e in entries)
    names = sorted(e.file_name for e in entries)
    assert names == ["Dense-Q8_0.gguf", "bad-magic.gguf", "big-00001-of-00003.gguf",
                     "hostile.gguf", "mmproj-model-f16.gguf", "moe.gguf", "truncated.gguf"]
    split = next(e for e in entries if e.file_name.startswith("big-"))
    assert len(split.files) == 3 and split.size_bytes == sum(os.path.getsize(f) for f in split.files)
    assert [e.file_name for e in entries if e.is_projector] == ["mmproj-model-f16.gguf"]

    infos = {os.path.basename(i.path): i for i in scan(entries)}
    assert infos["big-00001-of-00003.gguf"].split_count == 3 and infos["big-00001-of-00003.gguf"].error is None
    assert infos["moe.gguf"].expert_count == 8 and infos["Dense-Q8_0.gguf"].architecture == "qwen3"
    assert infos["mmproj-model-f16.gguf"].is_projector
    reasons = {n: infos[n].error for n in ("bad-magic.gguf", "truncated.gguf", "hostile.gguf")}
    assert "bad magic" in reasons["bad-magic.gguf"]
    assert "truncated" in reasons["truncated.gguf"]
    assert "absurd tensor count" in reasons["hostile.gguf"]
    assert all(r and "\n" not in r for r in reasons.values())


def test_scan_reports_progress_and_stops_when_cancelled(library_dirs):
    entries = find_models(library_dirs)
    seen: list[float] = []
    got = scan(entries, progress=lambda f, _t: seen.append(f), cancelled=lambda: len(seen) >= 3)
    assert 0 < len(got) < len(entries)
    assert seen == sorted(seen)


def test_rescan_reads_nothing_unchanged_and_rereads_a_changed_file(library_dirs, tmp_path, monkeypatch):
    repo = ModelCacheRepo(open_engine(tmp_path / "cache.sqlite"))
    first = scan(find_models(library_dirs), cache=repo)
    reads: list[str] = []
    real = library.read_model
    monkeypatch.setattr(library, "read_model", lambda p: reads.append(str(p)) or real(p))
    again = scan(find_models(library_dirs), cache=repo)
    assert reads == [] and again == first  # bad files are cached too: their reason stays
    moe = library_dirs[1] / "moe.gguf"
    st = moe.stat()
    os.utime(moe, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    scan(find_models(library_dirs), cache=repo)
    assert reads == [str(moe)]


def test_cli_model_info_json_has_exactly_the_issue_keys(originals, capsys):
    assert cli_main(["model", "info", str(originals["moe"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert tuple(data) == INFO_KEYS
    assert data["file_type"] == "Q8_0" and data["expert_count"] == 8 and data["expert_used_count"] == 2
    assert data["head_count_kv"] == 2 and data["nextn_layers"] == 0 and data["sliding_window"] is None
    assert data["n_tensors"] == len(read_model(originals["moe"]).tensors)


def test_cli_model_info_on_the_demo_model(demo_model, capsys):
    assert cli_main(["model", "info", str(demo_model), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["file_type"] == "Q4_K_M" and data["architecture"] == "gemma3"
    assert data["sliding_window"] == 512 and data["head_count_kv"] == 1 and data["split_count"] == 1


def test_cli_models_scan_json(library_dirs, capsys):
    assert cli_main(["models", "scan", *map(str, library_dirs), "--json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert len(models) == 7
    for m in models:
        assert {"path", "files", "error", *INFO_KEYS} <= set(m)
    split = next(m for m in models if m["path"].endswith("big-00001-of-00003.gguf"))
    assert split["split_count"] == 3 and len(split["files"]) == 3
    bad = next(m for m in models if m["path"].endswith("bad-magic.gguf"))
    assert "bad magic" in bad["error"] and bad["architecture"] is None and bad["expert_count"] == 0


def test_a_symlink_or_hard_link_to_a_model_is_one_model_at_its_real_path(tmp_path, originals):
    real = tmp_path / "models" / "dense.gguf"
    real.parent.mkdir()
    shutil.copy(originals["dense"], real)
    (tmp_path / "models" / "alias.gguf").symlink_to(real)  # sorts before the real name
    other = tmp_path / "other"
    other.mkdir()
    os.link(real, other / "hard.gguf")
    entries = find_models([tmp_path / "models", other])
    assert [e.path for e in entries] == [str(real)]
    # issue 35 item 16: the row names its other paths (was: merged without a word, "skipped": [])
    assert set(entries[0].also_at) == {str(tmp_path / "models" / "alias.gguf"), str(other / "hard.gguf")}


def test_models_scan_names_the_other_paths_of_a_linked_model(tmp_path, originals, capsys):
    real = tmp_path / "dense.gguf"
    shutil.copy(originals["dense"], real)
    (tmp_path / "alias.gguf").symlink_to(real)
    assert cli_main(["models", "scan", str(tmp_path), "--json", "--no-cache"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert [(m["path"], m["also_at"]) for m in models] == [(str(real), [str(tmp_path / "alias.gguf")])]
    assert cli_main(["models", "scan", str(tmp_path), "--no-cache"]) == 0
    assert f"also at: {tmp_path / 'alias.gguf'} (links to the same file)" in capsys.readouterr().out


def test_sizes_read_as_people_read_them():
    from llm_tuner.core.units import format_bytes, format_mib

    assert format_bytes(1024) == "1.0 KiB" and format_bytes(512) == "512 B"
    assert format_bytes(253_000_000) == "241.3 MiB" and format_bytes(5 * 1024**3) == "5.00 GiB"
    assert format_mib(374.2) == "374 MiB" and format_mib(23050) == "22.51 GiB" and format_mib(None) == "—"
