"""The test suite beside a busy core: does a selection hold when another process keeps one core at 100 %?

    .venv/bin/python benchmarks/busy_core.py [--runs 2] [--core N] [--label TEXT] -- tests/ui/test_chat_panel.py -q
    .venv/bin/python benchmarks/busy_core.py --runs 2 --label "full suite, fresh clone" -- -q   (the whole suite)
    python3 benchmarks/busy_core.py --ci --label "fresh clone"   (`make test` itself: setup, both phases)

A busy loop (a child process spinning, pinned to one core with os.sched_setaffinity, as `taskset -c N` would) runs
for the whole time; the pytest selection after `--` runs `--runs` times in a row beside it (each a fresh pytest
process, with QT_QPA_PLATFORM=offscreen). A fresh-clone run is the caller's: run this script in the clone.

Appends one block per invocation to benchmarks/results/busy_core/busy_core.txt: the machine, its load, the busy
core, the selection, and per run its exit code, wall time and pytest's summary line, and per failed test its name
and why: the `file:line: Exception` line of its traceback and its first `E   ...` lines (the assertion as pytest
explained it), each cut to one line, so a failure can be understood from the record alone.
Exit code: 0 when every run passed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "busy_core" / "busy_core.txt"


def spin(core: int) -> None:
    """The busy core: one process pinned to `core`, never sleeping."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    while True:
        pass


WHY_LINES = 3  # the `E   ...` lines kept per failure
WHY_WIDTH = 220  # characters kept of each


def _cut(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= WHY_WIDTH else line[: WHY_WIDTH - 1] + "\u2026"


def failure_reasons(lines: list[str]) -> dict[str, list[str]]:
    """Per section of pytest's FAILURES / ERRORS report (its header's name: `test_x[p]` or `ERROR at teardown of
    test_x`), the traceback's last `file:line: Exception` line and the first WHY_LINES lines of its last block of
    `E   ...` lines (with chained exceptions: the one that ended the test)."""
    sections: dict[str, list[str]] = {}
    name: str | None = None
    where, said, in_e = "", [], False
    for ln in [*lines, "=== end ==="]:
        head = re.fullmatch(r"_{3,} (.+?) _{3,}", ln.strip())
        if head or re.fullmatch(r"=+ .* =+", ln.strip()):
            if name is not None:
                sections[name] = ([where] if where else []) + said[:WHY_LINES]
            name, where, said, in_e = (head.group(1) if head else None), "", [], False
            continue
        if name is not None and ln.startswith("E   ") and ln[1:].strip():
            said = [*said, _cut(ln[1:])] if in_e else [_cut(ln[1:])]
        elif name is not None and re.match(r"^\S+\.py:\d+: \w", ln):
            where = _cut(ln)  # the last one: where the exception was raised
        in_e = ln.startswith("E ")
    return sections


def run_selection(selection: list[str], ci: bool = False) -> tuple[int, float, str, list[tuple[str, list[str]]]]:
    """One pytest run of `selection` (with `ci`: the whole `CI=true bash .ci/run`, setup included, instead): exit
    code, wall seconds, pytest's summary line(s), and the failed test ids each with why (the traceback's
    `file:line: Exception` and `E` lines, else the short summary's reason)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), COLUMNS="200")
    cmd = (["bash", ".ci/run"] if ci else
           [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", *selection])
    if ci:
        env["CI"] = "true"
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    lines = (done.stdout + done.stderr).splitlines()
    if ci:
        (OUT.parent / "last_ci_run.log").write_text("\n".join(lines[-400:]) + "\n")
    said = [ln.strip("= ") for ln in lines if re.search(r"\d+ (passed|failed|error).* in [\d.]+s", ln)]
    summary = (" + ".join(said) if ci and said else said[-1] if said else lines[-1] if lines else "(no output)")
    sections = failure_reasons(lines)
    failed = []
    for ln in lines:
        if not ln.startswith(("FAILED ", "ERROR ")):
            continue
        kind, rest = ln.split(" ", 1)
        test_id, _, reason = rest.partition(" - ")
        short = test_id.rsplit("::", 1)[-1]
        key = short if kind == "FAILED" else next((k for k in sections if k.endswith(f" of {short}")), short)
        why = sections.get(key) or ([_cut(reason)] if reason else [])
        failed.append((f"{test_id} ({'failed' if kind == 'FAILED' else key.split(' of ')[0].lower()})", why))
    return done.returncode, wall, summary, failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="how many times in a row (default 1)")
    ap.add_argument("--core", type=int, default=None, help="the core to keep busy (default: the last one)")
    ap.add_argument("--label", default="", help="a note for the record (fresh clone, wheel reused, ...)")
    ap.add_argument("--no-record", action="store_true", help="print only")
    ap.add_argument("--ci", action="store_true", help="run `CI=true bash .ci/run` (the README's `make test`: setup "
                    "and both phases) instead of a pytest selection: a fresh clone's first run")
    ap.add_argument("selection", nargs=argparse.REMAINDER, help="after --: pytest's arguments")
    args = ap.parse_args()
    selection = [a for a in args.selection if a != "--"] or ["-q"]
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    core = cores[-1] if args.core is None else args.core

    busy = multiprocessing.Process(target=spin, args=(core,), name="busy-core", daemon=True)
    busy.start()
    results = []
    try:
        time.sleep(1.0)  # the spinner has its core before the first test
        for i in range(args.runs):
            rc, wall, summary, failed = run_selection(selection, args.ci)
            results.append((rc, wall, summary, failed))
            print(f"run {i + 1}/{args.runs}: exit {rc} in {wall:.0f} s: {summary}", flush=True)
            for name, why in failed:
                print(f"  {name}", *(f"    {w}" for w in why), sep="\n", flush=True)
    finally:
        busy.terminate()
        busy.join(10)
    block = [f"## {time.strftime('%Y-%m-%d %H:%M:%S')} {platform.node()} ({os.cpu_count()} cores, "
             f"{len(cores)} usable), load average {os.getloadavg()[0]:.2f} after the runs"
             + (f", {args.label}" if args.label else ""),
             f"busy core: {core} (a spinning process pinned there); "
             + ("CI=true bash .ci/run (make test)" if args.ci else f"pytest {' '.join(selection)}")]
    for i, (rc, wall, summary, failed) in enumerate(results, 1):
        block.append(f"run {i}: {'PASS' if rc == 0 else f'FAIL (exit {rc})'} in {wall:.0f} s: {summary}")
        for name, why in failed:
            block += [f"  {name}", *(f"    {w}" for w in why)]
    text = "\n".join(block) + "\n"
    print(text)
    if not args.no_record:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        with open(OUT, "a") as f:
            f.write(text + "\n")
    return 0 if results and all(r[0] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
