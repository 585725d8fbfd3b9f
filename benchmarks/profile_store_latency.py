#!/usr/bin/env python3
"""How long the profile editor's store calls take on the GUI thread (issue 3, threading rule 1).

The Profiles panel calls ProfileRepository directly from its slots (list names, load the latest version,
list versions, save, duplicate, rename, revert, delete). ARCHITECTURE.md allows that only for SQL that is
not slow; this measures each call on a real WAL SQLite file (store.db.open_engine: WAL, synchronous=NORMAL)
holding a large history, so the claim rests on a figure.

    .venv/bin/python benchmarks/profile_store_latency.py [--profiles 200] [--versions 50] [--reps 300]

Output: per call, median / p95 / p99 / max in milliseconds (recorded in benchmarks/results/profile_store_latency/).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_tuner.core.profile import LaunchProfile  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.store.profiles import ProfileRepository  # noqa: E402


def profile(i: int) -> LaunchProfile:
    return LaunchProfile(model=f"/models/model-{i % 17}.gguf", ctx_size=4096 + 256 * (i % 64),
                         threads=8, extra_args=("--jinja", "--top-k", str(20 + i % 30)))


def timed(fn, reps: int) -> list[float]:
    out = []
    for k in range(reps):
        t0 = time.perf_counter()
        fn(k)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=int, default=200)
    ap.add_argument("--versions", type=int, default=50, help="saved versions per profile")
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "llm-tuner.sqlite"
        repo = ProfileRepository(open_engine(db))
        t0 = time.perf_counter()
        for p in range(args.profiles):
            for v in range(args.versions):
                repo.save(f"profile {p}", profile(p * 1000 + v))
        fill_s = time.perf_counter() - t0
        names = repo.names()
        target = names[len(names) // 2]
        n = len(names)
        cases = {
            "names()": lambda k: repo.names(),
            "latest(name)": lambda k: repo.latest(names[k % n]),
            "versions(name) [50 rows]": lambda k: repo.versions(names[k % n]),
            "unique_name(base)": lambda k: repo.unique_name("profile 1"),
            "save(name, profile) [commit]": lambda k: repo.save(target, profile(k)),
            "duplicate(name, new) [commit]": lambda k: repo.duplicate(target, f"dup {k}"),
            "rename(old, new) [commit]": lambda k: repo.rename(f"dup {k}", f"renamed {k}"),
            "revert(name, version) [commit]": lambda k: repo.revert(target, 1 + k % args.versions),
            "delete(name) [commit]": lambda k: repo.delete(f"renamed {k}"),
        }
        print(f"profile store latency: {platform.python_implementation()} {platform.python_version()}, "
              f"{platform.machine()}, SQLite WAL synchronous=NORMAL on {db.parent} "
              f"({args.profiles} profiles x {args.versions} versions, filled in {fill_s:.1f} s); "
              f"{args.reps} calls each, warm (the first 10 of each are dropped)")
        print(f"{'call':34s} {'median':>8s} {'p95':>8s} {'p99':>8s} {'max':>8s}  (ms)")
        for label, fn in cases.items():
            xs = timed(fn, args.reps + 10)[10:]
            xs.sort()
            q = lambda f, xs=xs: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
            print(f"{label:34s} {statistics.median(xs):8.3f} {q(0.95):8.3f} {q(0.99):8.3f} {xs[-1]:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
