"""Named profiles with immutable versions in a real SQLite file."""

from __future__ import annotations

import pytest

from llm_tuner.core.profile import LaunchProfile, SavedProfile
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileNameError, ProfileRepository


@pytest.fixture
def repo(tmp_path):
    return ProfileRepository(open_engine(tmp_path / "p.sqlite"))


def test_each_save_is_a_new_immutable_version(repo):
    v1 = repo.save("qwen", LaunchProfile(model="q.gguf", ctx_size=4096, api_key="k"))
    v2 = repo.save("qwen", LaunchProfile(model="q.gguf", ctx_size=8192, api_key="k"))
    assert isinstance(v1, SavedProfile) and (v1.version, v2.version) == (1, 2)
    assert repo.save("qwen", v2.profile).version_id == v2.version_id  # unchanged: no duplicate version
    assert repo.get_version(v1.version_id).profile.ctx_size == 4096
    assert repo.latest("qwen").profile.ctx_size == 8192
    assert repo.latest("qwen").profile.api_key_value() == "k"  # the key survives storage
    assert [v.version for v in repo.versions("qwen")] == [2, 1]


def test_rename_duplicate_delete_revert(repo):
    v1 = repo.save("a", LaunchProfile(ctx_size=1))
    repo.save("a", LaunchProfile(ctx_size=2))
    rv = repo.revert("a", 1)
    assert rv.version == 3 and rv.profile.ctx_size == 1
    repo.rename("a", "b")
    assert repo.names() == ["b"]
    dup = repo.duplicate("b", "c")
    assert dup.version == 1 and dup.profile.ctx_size == 1
    with pytest.raises(ProfileNameError):
        repo.rename("b", "c")
    repo.delete("b")
    assert repo.names() == ["c"] and repo.latest("b") is None
    assert repo.get_version(v1.version_id).profile.ctx_size == 1  # runs can still read it
    assert repo.save("b", LaunchProfile()).version == 1  # the name is free again
    assert repo.unique_name("c") == "c 2"
