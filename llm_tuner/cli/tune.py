"""`llm-tuner tune`: find the fastest settings that fit, on the real server; `llm-tuner tunes list`.

    llm-tuner tune (--profile NAME|FILE | -- <llama-server args>) [--binary PATH] [--label NAME]
                   [--objective gen_tps] [--prompt-tokens 512] [--gen-tokens 64] [--depth N] [--clients N]
                   [--min-gen-tps X]
                   [--knob ub=64,128,256 --knob t=1,2 --knob kv=f16,q8_0 --knob custom:--alias=a,b]
                   [--only placement,t] [--budget 600] [--headroom MiB] [--min-ctx N] [--max-ppl-increase 1]
                   [--screen-reps 2] [--final-reps 5] [--final-rounds 2] [--warmup 1]
                   [--devices CUDA0=16384,...] [--no-speed-prune] [--dry-run] [--json-lines] [--resume ID]
                   [--save-as NAME] [--report FILE.md]
    llm-tuner tunes list [--json]

Without --knob, the knobs are proposed from the model, the binary's --help and the devices. Where the model
does not fit its GPUs, one "placement" knob races the placements that fit each K/V type (the most layers, the
FFN of the fewest blocks or the experts of the first or the last blocks on the CPU, llama.cpp's own fit at
the margin), each GPU keeping --headroom free; a placement that runs out of memory raises that margin for the
rest.

--dry-run lists the knobs, their values and the memory plan's verdict on each candidate without starting a
server. With --json-lines every line on stdout is one JSON object: {"type": "progress"|"trial"|"result", ...};
otherwise progress goes to stderr. `--resume ID` continues a stored tune (cancelled, crashed or killed) from
its trials.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_tuner.cli.output import CliError, RawDescription, emit_json
from llm_tuner.cli.profile_file import add_trust_argument


def register(sub: argparse._SubParsersAction) -> None:
    """Add `tune` and `tunes`."""
    from llm_tuner.core.tune import DEFAULT_MARGIN_MIB, OBJECTIVES

    p = sub.add_parser("tune", help="search the fastest settings that fit (real server, stored trials, resumable)",
                       description=__doc__, formatter_class=RawDescription)
    p.add_argument("--profile", metavar="NAME|FILE", help="the base: a saved profile or a profile file")
    add_trust_argument(p)
    p.add_argument("--binary", metavar="PATH", help="run this llama-server instead of the profile's or the configured one")
    p.add_argument("--label", help="name the tune (default: the profile's name)")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), default="gen_tps", metavar="KIND",
                   help="what to maximize (default gen_tps), one of: "
                   + "; ".join(f"{k} = {o.label}" for k, o in OBJECTIVES.items()))
    p.add_argument("--prompt-tokens", type=int, default=512, metavar="N", help="prompt length (512)")
    p.add_argument("--gen-tokens", type=int, default=64, metavar="N", help="generated tokens per request (64)")
    p.add_argument("--depth", type=int, default=0, metavar="N", help="context filled before the prompt")
    p.add_argument("--clients", type=int, default=1, metavar="N", help="concurrent clients (throughput, p99)")
    p.add_argument("--min-gen-tps", type=float, default=None, metavar="X", help="max_context: generation floor")
    p.add_argument("--knob", action="append", default=[], metavar="NAME=V1,V2",
                   help="a knob and its values (repeatable): ub=64,128 t=1,2 kv=f16,q8_0 custom:--alias=a,b; "
                        "'default' = flag absent")
    p.add_argument("--budget", type=float, default=None, metavar="S",
                   help="time budget in seconds (600; with --resume: for what is left, default the tune's own)")
    p.add_argument("--headroom", type=int, default=DEFAULT_MARGIN_MIB, metavar="MiB",
                   help=f"free memory kept per GPU ({DEFAULT_MARGIN_MIB}); a placement that runs out of memory "
                        "raises it for the rest of the tune")
    p.add_argument("--min-ctx", type=int, default=None, metavar="N", help="candidates below this context are pruned")
    p.add_argument("--max-ppl-increase", type=float, default=1.0, metavar="PCT",
                   help="K/V types: largest perplexity increase accepted (1%%)")
    p.add_argument("--final-reps", type=int, default=5, metavar="N",
                   help="final comparison: repetitions per side at least, fixed before it starts; more "
                        "(up to 4x) when the racing saw a spread that would hide the gain (5)")
    p.add_argument("--final-rounds", type=int, default=2, metavar="N",
                   help="final comparison: server starts per side, interleaved A B A B (2)")
    p.add_argument("--screen-reps", type=int, default=2, metavar="N", help="repetitions per racing round (2)")
    p.add_argument("--warmup", type=int, default=1, metavar="N", help="unmeasured requests per run (1)")
    p.add_argument("--devices", metavar="NAME=MiB,...", help="prune against these planned devices instead of the "
                   "detected ones (as `estimate --devices`; Host=MiB sets RAM)")
    p.add_argument("--json-lines", action="store_true", help="stdout: one JSON object per line")
    p.add_argument("--resume", type=int, default=None, metavar="N",
                   help="continue a stored tune: its number, as `tunes list` shows it")
    p.add_argument("--save-as", metavar="NAME", help="save the result (winner or kept baseline) as a profile version")
    p.add_argument("--report", metavar="FILE.md", help="write the Markdown report, its plot FILE-trials.svg beside it")
    p.add_argument("--only", metavar="KEY,...", help="of the proposed knobs, race only these (e.g. placement,t)")
    p.add_argument("--dry-run", action="store_true", help="list the knobs and the plan's verdict on each candidate "
                   "with its predicted speed; start no server")
    p.add_argument("--no-speed-prune", action="store_true", help="start every candidate, even one the speed model "
                   "predicts far behind its race's best (by more than the model's measured error, at least 30%%; "
                   "only with a calibration of this build: `llm-tuner estimate --calibrate`)")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: llama-server arguments")
    p.set_defaults(func=cmd_tune)

    t = sub.add_parser("tunes", help="stored tunes")
    ts = t.add_subparsers(dest="tunes_command", metavar="ACTION")
    q = ts.add_parser("list", help="tunes, newest first")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_tunes_list)
    t.set_defaults(func=lambda a: (t.print_help(), 2)[1])


def _engine():
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine

    return open_engine(database_path())


def _settings():
    try:
        from llm_tuner.services.settings_store import load_settings

        return load_settings()
    except Exception:  # noqa: BLE001 - unreadable settings: the built-in defaults
        return None


def _base(args) -> tuple[list[str], dict[str, str], str | None, str, int | None]:
    """(argv, env, binary, label, profile version id) of the base."""
    server_args = list(args.server_args or [])
    if server_args[:1] == ["--"]:
        server_args = server_args[1:]
    binary = str(Path(args.binary).expanduser()) if args.binary else None
    if args.profile:
        if server_args:
            raise CliError("give either --profile or llama-server arguments after --, not both")
        from llm_tuner.cli.profile_file import load_profile, profile_binary
        from llm_tuner.core.cmdline import profile_to_argv

        loaded = load_profile(args.profile)
        own = profile_binary(loaded.profile, getattr(args, "trust_binary", False))
        argv, env = profile_to_argv(loaded.profile)
        return list(argv), dict(env or {}), binary or own, args.label or loaded.label, loaded.version_id
    if not server_args:
        raise CliError("nothing to tune: give --profile NAME|FILE, or llama-server arguments after -- (with -m MODEL)")
    return server_args, {}, binary, args.label or "command line", None


def _resolver(args, argv, env, binary):
    """The placement frontier's resolver: on --devices (planned hardware) or the binary's devices. None when the
    model cannot be placed (no -m, unreadable)."""
    from llm_tuner.services.tune.placement import PlacementResolver

    gpus = host = None
    if args.devices:
        from llm_tuner.cli.plan import parse_devices

        gpus, host = parse_devices(args.devices)
    try:
        return PlacementResolver(argv, env, binary=binary, gpus=gpus, host=host, margin_mib=args.headroom)
    except (ValueError, OSError) as exc:
        raise CliError(str(exc)) from None


def _spec(args, resolver=None):
    from llm_tuner.core.tune import Objective, TuneSpec, parse_knob
    from llm_tuner.services.tune import default_knobs

    argv, env, binary, label, version_id = _base(args)
    objective = Objective(kind=args.objective, prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens,
                          depth=args.depth, clients=args.clients, min_gen_tps=args.min_gen_tps)
    try:
        knobs = [parse_knob(k) for k in args.knob]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    _check_knob_values(knobs, binary)
    if not knobs:
        speed = None if args.no_speed_prune else _speed(argv, env, objective, binary, resolver, _engine())
        knobs = default_knobs(argv, env, binary=binary, objective=objective, plan_fn=_plan_fn(args, binary),
                              settings=_settings(), resolver=resolver, speed=speed)
        if args.only:
            keep = {k.strip() for k in args.only.split(",") if k.strip()}
            unknown = keep - {k.key for k in knobs}
            if unknown:
                raise CliError(f"--only {args.only}: not proposed for this base: {', '.join(sorted(unknown))} "
                           f"(proposed: {', '.join(k.key for k in knobs)})")
            knobs = [k for k in knobs if k.key in keep]
    if not knobs:
        raise CliError("no knobs to tune: give --knob NAME=V1,V2 (the model could not be read to propose any)")
    return TuneSpec(base_argv=tuple(argv), base_env=env, binary=binary, label=label, profile_version_id=version_id,
                    objective=objective, knobs=tuple(knobs), min_ctx=args.min_ctx, headroom_mib=args.headroom,
                    budget_s=args.budget or 600.0, max_ppl_increase_pct=args.max_ppl_increase, final_reps=args.final_reps,
                    final_rounds=args.final_rounds,
                    screen_reps=args.screen_reps, warmup=args.warmup, prune_by_speed=not args.no_speed_prune)


def _check_knob_values(knobs, binary: str | None) -> None:
    """Refuse (exit 2) a --knob value the server would refuse (`ub=64,abc`, `kv=f16,q9_0`), each named, before
    the baseline starts: a tune would otherwise spend a server start on it."""
    from llm_tuner.cli.bench import _catalog_for
    from llm_tuner.core import flags
    from llm_tuner.core.cmdline import value_problem
    from llm_tuner.core.tune.knobs import KV_PAIR, PLACEMENT_KNOB

    if not knobs:
        return
    catalog = _catalog_for(binary)
    problems: list[str] = []
    for k in knobs:
        if k.flag == PLACEMENT_KNOB:
            continue
        names = ([flags.spelling("cache_type_k")] if k.flag == KV_PAIR else
                 [k.flag] if k.key.startswith("custom:") else [flags.spelling(k.flag)])
        problems += [p for v in k.values if v is not None for n in names if (p := value_problem(n, v, catalog))]
    if problems:
        raise CliError("nothing was started: " + "; ".join(dict.fromkeys(problems)) + ". Correct the --knob values")


def _plan_fn(args, binary, headroom_mib: int | None = None):
    """The pruning plan: detected devices, or --devices (planned hardware), with the tune's headroom."""
    from llm_tuner.services.tune import make_plan_fn

    headroom = args.headroom if headroom_mib is None else headroom_mib
    if not args.devices:
        return make_plan_fn(headroom, binary=binary)
    from llm_tuner.cli.plan import parse_devices

    gpus, host = parse_devices(args.devices)
    return make_plan_fn(headroom, gpus=gpus, host=host)


def _speed(argv, env, objective, binary, resolver, engine):
    """The speed model for this tune: the planned devices (--devices) or the detected ones, and the history's
    calibration of the build and driver in use; None when it cannot be set up (every candidate is then started)."""
    from llm_tuner.services.tune import SpeedOracle

    try:
        return SpeedOracle.for_tune(list(argv), dict(env), objective, engine=engine, binary=binary,
                                    gpus=resolver.gpus if resolver is not None else None,
                                    host=resolver.planner.host if resolver is not None else None)
    except Exception as exc:  # noqa: BLE001 - no predictions: the tune starts every candidate
        print(f"note: no speed predictions ({exc})", file=sys.stderr)
        return None


def _emit(obj) -> None:
    emit_json(obj)


def cmd_tune(args) -> int:
    if args.dry_run:
        return _dry_run(args)
    return _tune(args)


def _dry_run(args) -> int:
    """The knobs, their values and the memory plan's verdict on each candidate (one value changed from the base),
    placements resolved at the margin; no server is started."""
    from llm_tuner.services.tune.preview import preview_candidates

    if args.resume is not None:
        raise CliError("--dry-run plans a new tune; it does not take --resume")
    argv, env, binary, _label, _v = _base(args)
    resolver = _resolver(args, argv, env, binary)
    spec = _spec(args, resolver)
    speed = _speed(spec.base_argv, spec.base_env, spec.objective, spec.binary, resolver, _engine())
    cands = preview_candidates(spec.base_argv, spec.base_env, spec.knobs, resolver, _plan_fn(args, binary), speed,
                               prune=spec.prune_by_speed)
    gpus = [{"name": d.name, "budget_mib": d.free_mib if d.free_mib is not None else d.capacity_mib}
            for d in resolver.gpus]
    head = {"type": "dry_run", "margin_mib": resolver.margin_mib, "gpus": gpus,
            "needs_placement": resolver.needs_placement(),
            "speed_calibration": (speed.calibration.source or "stored") if speed and speed.calibration else None,
            "knobs": [{"key": k.key, "flag": k.flag, "values": list(k.values), "reason": k.reason} for k in spec.knobs]}
    if args.json_lines:
        _emit(head)
        for c in cands:
            _emit({"type": "candidate", **c.to_json()})
        return 0
    devs = ", ".join(f"{g['name']} {g['budget_mib']} MiB" for g in gpus) or "no GPU"
    print(f"Devices: {devs}; each GPU keeps {resolver.margin_mib} MiB free (--headroom)")
    if head["needs_placement"]:
        print("The model does not fit the GPUs: placement and K/V type are raced together.")
    print("Speed model: " + (f"calibrated on {head['speed_calibration']}" if head["speed_calibration"] else
                             "no calibration of this build (default costs: nothing is pruned by speed; "
                             "`llm-tuner estimate --calibrate` measures one)"))
    for k in spec.knobs:
        print(f"\n{k.key} ({k.reason})")
        for c in (c for c in cands if c.knob == k.key):
            status = "pruned" if not c.fits else "slow  " if c.speed_pruned else "fits  "
            print(f"  {status} {c.label}: {c.args_text} · predicted {c.predicted_text}")
            if c.plan:
                print(f"         {c.plan}")
            if c.speed_pruned:
                print(f"         {c.speed_pruned}")
    return 0


def _tune(args) -> int:
    from llm_tuner.core.tune import result_json, trial_json, tune_report_files, tune_report_markdown
    from llm_tuner.core.tune.prune import trial_prediction
    from llm_tuner.services.bench import BenchRunner, default_telemetry
    from llm_tuner.services.tune import TuneRunner, save_winner
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.store.tunes import TuneRepository

    engine = _engine()
    repo = TuneRepository(engine)
    repo.mark_interrupted()
    RunRepository(engine).mark_interrupted()
    if args.resume is not None:
        tune_id = repo.id_of_number(args.resume)
        rec = repo.get(tune_id) if tune_id is not None else None
        if rec is None or rec.spec is None:
            raise CliError(f"no tune {args.resume} (list them with `llm-tuner tunes list`)")
        spec, binary, headroom = None, rec.spec.binary, rec.spec.headroom_mib  # as the tune was started
        resume_id: int | None = rec.id
        if args.budget:  # a new budget for what is left (the tune's own ran out)
            spec = rec.spec.model_copy(update={"budget_s": args.budget})
        resolver = None
    else:
        argv, env, binary, _label, _v = _base(args)
        resolver = _resolver(args, argv, env, binary) if args.devices else None
        resume_id = None
        spec = _spec(args, resolver)
        binary, headroom = spec.binary, spec.headroom_mib
    settings = _settings()
    runner = TuneRunner(repo, settings=settings, plan_fn=_plan_fn(args, binary, headroom), resolver=resolver,
                        speed=_speed(spec.base_argv, spec.base_env, spec.objective, spec.binary, resolver, engine)
                        if spec is not None else None,
                        bench_runner=BenchRunner(RunRepository(engine), settings=settings,
                                                 telemetry=default_telemetry()))
    last = {"text": None}

    def progress(frac, text):
        if text == last["text"]:
            return
        last["text"] = text
        if args.json_lines:
            _emit({"type": "progress", "fraction": frac, "text": text})
        else:
            print(("" if frac is None else f"[{100 * frac:5.1f}%] ") + text, file=sys.stderr, flush=True)

    def on_trial(trial):
        if args.json_lines:
            _emit(trial_json(trial))
        else:
            pred, vs = trial_prediction(trial.predicted, trial.score)
            print(f"trial {trial.seq} {trial.knob or 'baseline'} {trial.values}: {trial.status}"
                  + (f" score {trial.score:.2f}" if trial.score is not None else "")
                  + (f" · predicted {pred}" if pred != "–" else "")
                  + (f" · measured vs predicted {vs}" if vs != "–" else "")
                  + (f" ({trial.reason})" if trial.reason else ""), file=sys.stderr, flush=True)

    from llm_tuner.services.bench import BenchError

    try:
        result = runner.run(spec, progress=progress, on_trial=on_trial, resume_tune_id=resume_id)
    except (ValueError, BenchError) as exc:  # no llama-server, a binary not confirmed: said, not a traceback
        raise CliError(str(exc)) from None
    rec = repo.get(result.tune_id)
    if args.save_as:
        saved = save_winner(engine, args.save_as, result, rec.spec)
        _emit({"type": "saved", "profile": saved.name, "version": saved.version}) if args.json_lines else print(
            f"saved as {saved.name} version {saved.version}", file=sys.stderr)
    if args.report:  # FILE.md and its plot FILE-trials.svg beside it (the files the Tune view exports)
        report = Path(args.report)
        files = tune_report_files(result, report.stem, objective=rec.spec.objective.describe(), label=rec.spec.label,
                                  y_label=rec.spec.objective.row.label)
        try:
            for name, text in files.items():
                (report.parent / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"the report could not be written: {exc}") from None
    if args.json_lines:
        _emit(result_json(result))
    else:
        print(tune_report_markdown(result, objective=rec.spec.objective.describe(), label=rec.spec.label))
    return 0 if rec.status == "complete" else 1


def cmd_tunes_list(args) -> int:
    from llm_tuner.store.tunes import TuneRepository

    repo = TuneRepository(_engine())
    repo.mark_interrupted()
    rows = [{"tune": t.number or t.id, "tune_id": t.id, "label": t.label, "status": t.status, "created": t.created_at,
             "trials": t.n_trials, "verdict": t.result.verdict if t.result else None,
             "objective": t.spec.objective.describe() if t.spec else None} for t in repo.list_tunes()]
    if args.json:
        _emit(rows)
    else:
        for r in rows:
            print(f"{r['tune']:5d}  {str(r['created'])[:19]:19s}  {r['status']:11s}  {r['trials']:3d} trials  "
                  f"{r['label']}  {r['verdict'] or ''}")
    return 0
