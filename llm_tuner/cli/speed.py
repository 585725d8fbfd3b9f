"""`estimate --speed`: the predicted speed of a command line per device (core.speed), with the calibration of
this machine's build and driver from the history, `--calibrate` to measure one (llama-bench on the model at hand
and, as a second size, the demo model) and `--bandwidth NAME=GB/s` to set a device's read rate by hand."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_tuner.cli.output import CliError

if TYPE_CHECKING:
    from llm_tuner.core.memory import PlanDevice
    from llm_tuner.core.speed import SpeedCalibration


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speed (the speed model: predicted prefill and generation t/s per device)")
    g.add_argument("--speed", action="store_true", help="also predict prefill and generation speed, TTFT and the "
                   "roofline per device (with this machine's calibration from the history, if any)")
    g.add_argument("--depth", type=int, default=0, metavar="N", help="tokens already in the cache when generating "
                   "(default 0)")
    g.add_argument("--prompt", type=int, default=512, metavar="N", help="prompt tokens for prefill and TTFT "
                   "(default 512)")
    g.add_argument("--bandwidth", metavar="NAME=GB/s,...", help="set a device's effective read rate by hand "
                   "(e.g. CUDA0=700,Host=45); implies --speed")
    g.add_argument("--calibrate", action="store_true", help="measure this machine first (llama-bench on the model "
                   "and a second model of another size, the demo model unless --calibrate-with: about a minute) "
                   "and keep the calibration for this build and driver; implies --speed")
    g.add_argument("--calibrate-from-runs", action="store_true", help="fit the calibration over the benchmark runs "
                   "in the history made with this llama-server (with --calibrate: together with the probe) and keep "
                   "it; implies --speed")
    g.add_argument("--calibrate-with", metavar="MODEL.gguf", help="the probe's second model (another size, so the "
                   "fixed cost per token and the read rate can be told apart)")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.speed or args.calibrate or args.bandwidth or args.calibrate_with or args.calibrate_from_runs)


def parse_bandwidth(text: str, devices: list[str] | None) -> dict[str, float]:
    """`CUDA0=700,Host=45` -> {device: GB/s}; CliError (one message) for anything else. `devices` None: the
    form alone is checked (before the devices are detected, which starts llama.cpp: bad input is refused at once)."""
    out: dict[str, float] = {}
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CliError(f"--bandwidth: {part!r} is not NAME=GB/s (e.g. CUDA0=700 or Host=45)")
        try:
            gbps = float(value)
        except ValueError:
            raise CliError(f"--bandwidth: {value.strip()!r} is not a number of GB/s (in {part!r})") from None
        if not gbps > 0 or gbps == float("inf"):
            raise CliError(f"--bandwidth: {part!r}: the rate must be a positive number of GB/s")
        match = name if devices is None else next((d for d in devices if d.lower() == name.lower()), None)
        if match is None:
            raise CliError(f"--bandwidth: {name!r} is not a device of this plan ({', '.join(devices or [])})")
        out[match] = gbps
    if not out:
        raise CliError("--bandwidth: give NAME=GB/s (e.g. CUDA0=700 or Host=45)")
    return out


def speed_json(args: argparse.Namespace, server_args: list[str], model: Any, plan: Any, gpus: list[PlanDevice],
               cpu_flags: tuple[str, ...], physical_cores: int | None) -> dict[str, Any]:
    """The `speed` object of `estimate --json` (and what the text output prints)."""
    from llm_tuner.core.speed import SpeedCalibration, predict, traffic
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.services.speed import calibration_identity, device_peaks, nvml_gbps, threads_of
    from llm_tuner.store.db import StorageFullError, open_engine
    from llm_tuner.store.speed import SpeedCalibrationRepo

    if args.depth < 0 or args.prompt < 1:
        raise CliError("--depth must be 0 or more and --prompt at least 1")
    names = [d.name for d in plan.devices]
    by_hand = parse_bandwidth(args.bandwidth, names) if args.bandwidth else {}
    threads = threads_of(server_args, physical_cores or 4)
    build, driver, bench = calibration_identity()
    engine = open_engine(database_path())
    repo = SpeedCalibrationRepo(engine)
    cal: SpeedCalibration | None = None
    stored_id = None
    if args.calibrate or args.calibrate_with or args.calibrate_from_runs:
        cal = _calibrate(model, args, gpus, cpu_flags, threads, build, driver, bench, engine)
        try:
            stored_id = repo.save(cal)
        except StorageFullError as exc:
            print(f"warning: the calibration was not kept: {exc}", file=sys.stderr)
    else:
        stored = repo.latest(build, driver)
        if stored is not None:
            cal, stored_id = stored.calibration, stored.id
    if by_hand:
        base = cal or SpeedCalibration(source="rates set by hand")
        costs = dict(base.costs)
        keys = [f"read:{name}@{threads}" if name == "Host" else f"read:{name}" for name in by_hand]
        for key, gbps in zip(keys, by_hand.values(), strict=True):
            costs[key] = 1.0 / gbps
        cal = replace(base, costs=costs, peaks_gbps={**base.peaks_gbps, **by_hand},
                      source=(base.source + " + " if base.costs else "") + "--bandwidth " + args.bandwidth,
                      threads=tuple(sorted({*base.threads, threads})), by_hand=(*base.by_hand, *keys))
    t = traffic(model, plan, gpus, cpu_flags)
    pr = predict(t, cal, threads=threads, depth=args.depth, prompt_tokens=args.prompt, peaks=device_peaks(gpus, nvml_gbps(None)))
    out = pr.to_json()
    out["calibration"] = {"id": stored_id, "build": build, "driver": driver or None,
                          "source": cal.source if cal else None,
                          "calibrated": bool(cal and cal.costs)}
    return out


def _calibrate(model: Any, args: argparse.Namespace, gpus: list[PlanDevice], cpu_flags: tuple[str, ...],
               threads: int, build: str, driver: str, bench: Path | None, engine: Any) -> SpeedCalibration:
    """The probe (--calibrate, --calibrate-with) and/or the stored runs (--calibrate-from-runs), fitted together."""
    from llm_tuner.core.speed.calibrate import Measurement, fit, with_error
    from llm_tuner.services import binaries
    from llm_tuner.services.speed import ProbeError, run_count, run_probe, runs_said, stored_run_measurements

    ms: list[Measurement] = []
    sources = []
    if args.calibrate or args.calibrate_with:
        models = _probe_models(model, args.calibrate_with)
        if bench is None:
            raise CliError("--calibrate needs llama-bench (not found: set its path in Settings or "
                           "LLM_TUNER_LLAMA_BENCH)")
        try:
            _, probed = run_probe(models, [threads], gpus=gpus, cpu_flags=cpu_flags, build=build, driver=driver,
                                  progress=lambda m: print(m, file=sys.stderr))
        except ProbeError as exc:
            raise CliError(f"--calibrate: {exc}") from None
        ms += probed
        sources.append("probe of " + " + ".join(Path(m).name for m in models))
    if args.calibrate_from_runs:
        loc = binaries.locate(binaries.SERVER)
        stored, skipped = stored_run_measurements(engine, loc.path if loc else None, gpus, cpu_flags, threads)
        for why in skipped:
            print(f"left out: {why}", file=sys.stderr)
        if not stored and not ms:
            raise CliError("--calibrate-from-runs: no benchmark run in the history can be used (see 'left out'); "
                           "run a benchmark first, or use --calibrate")
        ms += stored
        sources.append(runs_said(stored))
        if not (args.calibrate or args.calibrate_with):
            return _refine_stored(engine, build, driver, stored)
    cal = fit(ms, build=build, driver=driver, source=" + ".join(sources))
    if args.calibrate_from_runs:
        cal = replace(cal, server_runs=run_count(stored))
    return with_error(cal, ms)


def _refine_stored(engine: Any, build: str, driver: str, stored: list[Any]) -> SpeedCalibration:
    """--calibrate-from-runs alone: this build's probe calibration refined on the stored runs, as the app's refit
    after a benchmark does (services.speed.calibrate_on_runs); without a probe, a fit over the runs where they
    determine every cost, refused where they do not."""
    from llm_tuner.services.speed import calibrate_on_runs
    from llm_tuner.store.speed import SpeedCalibrationRepo

    probe = SpeedCalibrationRepo(engine).latest(build, driver, probe_only=True)
    cal, short = calibrate_on_runs(probe.calibration if probe is not None else None, stored, build=build,
                                   driver=driver)
    if cal is None:
        raise CliError(f"--calibrate-from-runs: the stored runs tell apart only {short}: a fit would put the "
                       "whole time on whichever costs it liked, and no calibration of this build is stored to "
                       "refine. Benchmark other models, prompt lengths, depths or thread counts, or add --calibrate")
    if probe is not None:
        print("refined: this build's probe calibration moved as little as the runs require"
              + (f" (they tell apart only {short})" if short else ""), file=sys.stderr)
    return cal


def _probe_models(model: Any, second: str | None) -> list[str]:
    from llm_tuner.services.demo_model import find_demo_model
    from llm_tuner.services.library import read_model

    models = [str(model.path)]
    if second:
        info = read_model(second)
        if info.error:
            raise CliError(f"--calibrate-with: {second}: {info.error}")
    other = Path(second) if second else find_demo_model()
    if other is not None and other.resolve() != Path(model.path).resolve():
        models.append(str(other))
    return models


def speed_text(speed: dict[str, Any]) -> list[str]:
    """`estimate --speed`'s lines as people read them."""
    if speed.get("gen_tps") is None:
        return [f"speed: unknown (no rate for {', '.join(speed.get('unknown_devices') or ['a device'])}); "
                "give it with --bandwidth NAME=GB/s or measure it with --calibrate"]
    r = lambda v, f: "–" if v is None else format(v, f)  # noqa: E731
    lines = [f"speed at depth {speed['depth']}, prompt {speed['prompt_tokens']}, {speed['threads']} threads: "
             f"generation {r(speed['gen_tps'], '.1f')} t/s, prefill {r(speed['prefill_tps'], '.0f')} t/s, "
             f"TTFT {r(speed['ttft_ms'], '.0f')} ms, roofline {r(speed['roofline_tps'], '.1f')} t/s "
             f"(±{speed['expected_error']:.0%})",
             f"{'device':10} {'MiB/token':>10} {'gen ms':>8} {'share':>6} {'GB/s':>8}  rate from"]
    for d in speed["devices"]:
        share = d.get("time_share")
        lines.append(f"{d['name']:10} {d['mib_per_token']:10.1f} {r(d['gen_ms'], '8.3f'):>8} "
                     f"{'–' if share is None else format(share, '6.0%'):>6} {r(d['read_gbps'], '8.1f'):>8}  "
                     f"{d['rate_source'] or '–'}")
    lines.append(f"fixed cost {speed['fixed_ms_per_token']} ms per token; calibrated on: {speed['calibrated_on']}")
    lines += [f"note: {n}" for n in speed.get("notes") or []]
    return lines
