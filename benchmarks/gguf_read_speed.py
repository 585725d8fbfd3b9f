"""How fast the model library reads headers (issue 4 targets).

1. First read of the demo model (Gemma 3 270M, 262,144-token vocabulary): `read_model` time, median of
   repeated reads (OS page cache warm after the first), target < 150 ms. `--gguf-reader` also times the
   `gguf` package's GGUFReader once for comparison (~15 s).
2. A library of 100 unchanged models (hard links of the demo model and of a generated random qwen3
   file, so every entry has a distinct path): first scan (no cache), then rescan from the SQLite
   cache (find files + cache lookups + JSON decode), target < 0.5 s.

Run: .venv/bin/python benchmarks/gguf_read_speed.py [--gguf-reader] > benchmarks/results/gguf_read_speed/gguf_read_speed.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.library import find_models, read_model, scan
from llm_tuner.store.db import open_engine
from llm_tuner.store.model_cache import ModelCacheRepo


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-reader", action="store_true", help="also time gguf.GGUFReader once (slow)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    demo = find_demo_model()
    if demo is None:
        print("demo model missing: python -m llm_tuner.services.demo_model")
        return 2
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} · {platform.processor() or platform.machine()} · "
          f"{os.cpu_count()} CPUs · Python {platform.python_version()}")
    print(f"# command: .venv/bin/python benchmarks/gguf_read_speed.py{' --gguf-reader' if args.gguf_reader else ''}")
    print()
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        info = read_model(demo)
        times.append(time.perf_counter() - t)
    assert info.error is None
    print(f"demo model {demo.name}: {info.vocab_size} vocab, {info.n_tensors} tensors, "
          f"{info.size_bytes / 2**20:.0f} MiB")
    print(f"  read_model: first {ms(times[0])}, median of {args.repeat} {ms(statistics.median(times))}, "
          f"max {ms(max(times))}  (target < 150 ms)")
    if args.gguf_reader:
        from gguf import GGUFReader

        t = time.perf_counter()
        GGUFReader(demo)
        print(f"  gguf.GGUFReader for comparison: {ms(time.perf_counter() - t)}")

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.random_gguf import write_qwen3_moe

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "library"
        root.mkdir()
        small = write_qwen3_moe(Path(tmp) / "moe.gguf", n_layer=8, n_embd=128, n_ff=256, n_ff_exp=64)
        for i in range(100):
            src = demo if i % 2 == 0 else small
            d = root / f"dir{i // 10}"
            d.mkdir(exist_ok=True)
            try:
                os.link(src, d / f"model-{i:03d}.gguf")
            except OSError:
                os.symlink(src, d / f"model-{i:03d}.gguf")
        repo = ModelCacheRepo(open_engine(Path(tmp) / "cache.sqlite"))
        t = time.perf_counter()
        entries = find_models([root])
        t_list = time.perf_counter() - t
        infos = scan(entries, cache=repo)
        t_first = time.perf_counter() - t
        assert len(infos) == 100 and not any(i.error for i in infos)
        rescans = []
        for _ in range(5):
            t = time.perf_counter()
            again = scan(find_models([root]), cache=repo)
            rescans.append(time.perf_counter() - t)
        assert again == infos
        print()
        print("library of 100 models (50 demo-model links, 50 random qwen3moe 8-layer links):")
        print(f"  list files (names, sizes): {ms(t_list)}")
        print(f"  first scan, no cache: {ms(t_first)} ({ms(t_first / 100)} per model)")
        print(f"  rescan from cache: median of 5 {ms(statistics.median(rescans))}, max {ms(max(rescans))}"
              f"  (target < 500 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
