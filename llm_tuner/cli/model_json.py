"""A model's JSON as every command prints it (`model info`, `models scan`, `models plan`): a leaf of the cli
package, so the commands that print it import none of each other."""

from __future__ import annotations

#: The keys of `model info --json`, in order (issue 4).
INFO_KEYS = ("architecture", "name", "file_type", "size_bytes", "n_params", "block_count", "nextn_layers",
             "context_length", "embedding_length", "head_count", "head_count_kv", "expert_count",
             "expert_used_count", "sliding_window", "n_tensors", "split_count")


def info_json(info) -> dict:
    """The issue's JSON for one model: absent counts 0, other absent values null."""
    data = info.model_dump(include=set(INFO_KEYS))
    return {k: data.get(k) for k in INFO_KEYS}
