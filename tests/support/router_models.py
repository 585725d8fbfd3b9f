"""Three random-weight models for a router's tests (issue 40): the same width, 2, 6 and 12 layers, so their K/V
(8 KV heads of 64, a 32k trained context) and so their memory grows a < b < c on every device."""

from __future__ import annotations

from pathlib import Path

from tests.support.random_gguf import write_qwen3_dense

LAYERS = {"a": 2, "b": 6, "c": 12}


def write_three(folder: Path, names: tuple[str, ...] = ("a", "b", "c")) -> Path:
    """Write `<name>.gguf` into `folder` for each name (a router's --models-dir) and return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        write_qwen3_dense(folder / f"{name}.gguf", n_layer=LAYERS[name], n_embd=256, n_ff=512, n_head=8,
                          n_head_kv=8, head_dim=64, n_ctx_train=32768, name=name)
    return folder
