"""`llm-tuner bench`, `llm-tuner runs list|show|compare|export|delete`, `llm-tuner sweep`.

    llm-tuner bench --json (--profile NAME|FILE | --url URL | -- <llama-server arguments>)
                    --prompt-tokens 512,4096 --gen-tokens 128 --reps 3 [--warmup 1] [--llama-bench]
                    [--clients N] [--depth N] [--warm-cache] [--prompt-file FILE] [--label NAME]
                    [--router-model NAME]    (one model of a router: llama-server with --models-dir, no -m)
                    [--binary PATH]          (another llama-server build: an A/B across builds, then
                                              `runs compare`)
                    [--vs-no-draft ROUNDS]   (a drafting profile against --spec-type none, interleaved)
                    [--vs-binary PATH [--rounds N]]
                                             (the same profile on another llama-server build, interleaved
                                              A B A B: verdict and 95% interval; heat-gated on GPUs unless
                                              --no-heat-gate)
    llm-tuner runs list --json
    llm-tuner runs show ID --json
    llm-tuner runs compare A B --json [--profiles]      (A, B: run ids, or profile labels with --profiles)
                    [--format md|json --out DIR]        (a report of the comparison, both runs' hardware named)
    llm-tuner runs export ID --format md|csv|json --out DIR [--json]
    llm-tuner runs delete ID [--json]
    llm-tuner sweep --param FLAG --values V1,V2,... (same run options as bench)

Without a profile or arguments, the demo model is benchmarked with default flags.
Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_tuner.cli.output import CliError, RawDescription, emit_json
from llm_tuner.cli.profile_file import add_trust_argument
from llm_tuner.core.stats import AB_THRESHOLD_PCT


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated token counts, got {text!r}") from exc


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--profile", metavar="NAME|FILE",
                     help="a saved profile's name, a profile JSON file, or a text file with a llama-server command")
    src.add_argument("--url", metavar="URL", help="benchmark a server someone else started (not stopped)")
    add_trust_argument(p)
    p.add_argument("--api-key", help="with --url: the server's API key")
    p.add_argument("--label", help="name the run (default: the profile's name)")
    p.add_argument("--prompt-tokens", type=_ints, default=(512,), metavar="N1,N2", help="prompt lengths (512)")
    p.add_argument("--gen-tokens", type=int, default=128, metavar="N", help="generated tokens per request (128)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per prompt length (3)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured warm-up requests per prompt length (1)")
    p.add_argument("--warm-cache", action="store_true", help="measure with the prompt already cached (default: cold)")
    p.add_argument("--depth", type=int, default=0, metavar="N", help="fill N tokens of context before the prompt")
    p.add_argument("--clients", type=int, default=1, metavar="N", help="concurrent clients (latency under load)")
    p.add_argument("--prompt-file", metavar="FILE", help="your own text to cut prompts from")
    p.add_argument("--llama-bench", action="store_true", help="also run llama-bench with the same settings")
    p.add_argument("--router-model", metavar="NAME",
                   help="the model to measure on a router (llama-server with --models-dir or --models-preset, no -m)")
    p.add_argument("--binary", metavar="PATH",
                   help="run this llama-server (an upgrade, a fork) instead of the profile's or the configured one")
    p.add_argument("--stall-after", type=positive_seconds, default=None, metavar="SECONDS",
                   help="end the run when the server it started shows no progress (no tokens, no log line, no CPU "
                        "time) for this long while a request waits (default 120)")
    p.add_argument("--force", action="store_true",
                   help="start the server even when the profile has advice errors (llama-server would refuse or "
                   "fail; a fork may accept them). Without it such a run is refused (exit 2) before anything starts")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: llama-server arguments")


def positive_seconds(text: str) -> float:
    """A number of seconds above 0 (argparse says the error with the option's name)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 1e7:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add `bench`, `runs` and `sweep`."""
    p = sub.add_parser("bench", help="benchmark llama-server (real requests, the server's own timings)",
                       description=__doc__, formatter_class=RawDescription)
    _add_run_options(p)
    p.add_argument("--vs-no-draft", type=int, default=0, metavar="ROUNDS",
                   help="A/B the drafting profile against --spec-type none, interleaved over ROUNDS rounds")
    p.add_argument("--vs-binary", metavar="PATH",
                   help="A/B the same profile on this llama-server build (B) against its own or the configured one "
                        "(A), interleaved; naming it here confirms it may run")
    p.add_argument("--rounds", type=int, default=2, metavar="N", help="with --vs-binary: rounds of A B (2)")
    p.add_argument("--no-heat-gate", action="store_true",
                   help="A/Bs do not wait for the GPUs to cool back to where they began before each run")
    p.add_argument("--cool-within", type=float, default=None, metavar="C",
                   help="heat gate: wait until every GPU is within C °C of the A/B's start (5)")
    p.add_argument("--cool-limit", type=positive_seconds, default=None, metavar="SECONDS",
                   help="heat gate: wait at most this long before each run (300); the run's notes say so")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("sweep", help="one parameter over values: a run per value, kept as a group")
    p.add_argument("--param", required=True, metavar="FLAG",
                   help="the llama-server flag: --param=-ub, --param=--tensor-split, or without dashes (ub, tensor-split)")
    p.add_argument("--values", required=True, metavar="V1,V2", help="values; use ';' between values that contain ','")
    _add_run_options(p)
    p.set_defaults(func=cmd_sweep)

    runs = sub.add_parser("runs", help="benchmark history: list, show, compare, export, delete")
    rs = runs.add_subparsers(dest="runs_command", metavar="ACTION")
    q = rs.add_parser("list", help="runs, newest first")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.add_argument("--model", help="only runs whose model path contains this")
    q.add_argument("--profile", help="only runs of this profile label")
    q.set_defaults(func=cmd_runs_list)
    q = rs.add_parser("show", help="one run with its repetitions and summary")
    q.add_argument("run_id", type=int, metavar="ID", help="the run's id, as `runs list` shows it")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_runs_show)
    q = rs.add_parser("compare", help="B against A per metric: median, spread, Δ%%, 95%% CI, verdict")
    q.add_argument("a", metavar="A", help="the run to compare against (an id; a profile with --profiles)")
    q.add_argument("b", metavar="B", help="the run compared (an id; a profile with --profiles)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.add_argument("--profiles", action="store_true", help="A and B name profiles: compare their latest runs (each one's newest runs of the same settings, pooled)")
    q.add_argument("--threshold", type=float, default=None, metavar="PCT",
                   help=f"practical threshold in %% (default: Settings.ab_threshold_pct, {AB_THRESHOLD_PCT:g})")
    q.add_argument("--format", choices=("md", "json"), default=None,
                   help="with --out: write a report of the comparison (md: with both runs' hardware)")
    q.add_argument("--out", metavar="DIR", help="folder for the report (compare-A-B.md or .json)")
    q.set_defaults(func=cmd_runs_compare)
    q = rs.add_parser("export", help="a run as Markdown (with PNG plots and its hardware), CSV or JSON")
    q.add_argument("run_id", type=int, metavar="ID", help="the run's id, as `runs list` shows it")
    q.add_argument("--format", choices=("md", "csv", "json"), default="md",
                   help="md: Markdown with PNG plots and the hardware (default); csv; json")
    q.add_argument("--out", required=True, metavar="DIR", help="the folder to write into")
    q.add_argument("--json", action="store_true", help="print what was written as JSON")
    q.set_defaults(func=cmd_runs_export)
    q = rs.add_parser("delete", help="delete a run and its repetitions")
    q.add_argument("run_id", type=int, metavar="ID", help="the run's id, as `runs list` shows it")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_runs_delete)
    runs.set_defaults(func=lambda a: (runs.print_help(), 2)[1])


# -- helpers -------------------------------------------------------------------------------------

def _repo():
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    repo = RunRepository(open_engine(database_path()))
    repo.mark_interrupted()
    return repo


def _settings():
    try:
        from llm_tuner.services.settings_store import load_settings

        return load_settings()
    except Exception:  # noqa: BLE001 - unreadable settings: the built-in defaults
        return None


def resolve_target(args):
    """ServerTarget from --url, --profile NAME|FILE, `-- args`, or the demo model."""
    from llm_tuner.services import bench

    server_args = [a for a in (args.server_args or [])]
    if server_args[:1] == ["--"]:
        server_args = server_args[1:]
    if args.url:
        return bench.ServerTarget(attached_url=args.url, api_key=args.api_key, label=args.label or args.url)
    if args.profile:
        from llm_tuner.cli.profile_file import load_profile, profile_binary

        loaded = load_profile(args.profile)
        profile_binary(loaded.profile, getattr(args, "trust_binary", False))  # refused here, before anything runs
        return bench.target_from_profile(loaded.profile, label=args.label or loaded.label,
                                         version_id=loaded.version_id)
    if server_args:
        return bench.ServerTarget(argv=server_args, label=args.label or "command line")
    from llm_tuner.services.demo_model import find_demo_model

    model = find_demo_model()
    if model is None:
        raise CliError("nothing to benchmark: give --profile, --url or `-- -m MODEL ...` "
                       "(the demo model is not assembled: python -m llm_tuner.services.demo_model)")
    target = bench.demo_target(model)
    if args.label:
        target.label = args.label
    return target


def _with_binary(target, args):
    """--binary: the run starts that llama-server (the user named it on the command line)."""
    if getattr(args, "binary", None):
        if target.attached_url:
            raise CliError("--binary starts a server: not with --url")
        target.binary = str(Path(args.binary).expanduser())
    return target


def _preflight(target, args) -> None:
    """Refuse (exit 2, with the errors) a target whose advice has errors before any server starts, unless
    --force: what would fail is not run only to read "ConnectError"."""
    if target.attached_url or getattr(args, "force", False):
        return
    from llm_tuner.services.preflight import PreflightRefused, check_launch

    try:
        check_launch(argv=list(target.argv), env=dict(target.env), catalog=_catalog_for(target.binary))
    except PreflightRefused as exc:
        raise CliError(str(exc)) from None


def _check_values(flag: str, values: list[str], target, args) -> None:
    """Refuse (exit 2) values the server would refuse (`-ub abc`), each named, before any server starts: a sweep
    would otherwise start one for it and store a failed run. --force starts them anyway."""
    from llm_tuner.core.cmdline import value_problem

    if not values:
        raise CliError(f"--values {args.values!r}: no values to sweep")
    if getattr(args, "force", False):
        return
    catalog = _catalog_for(target.binary)
    problems = list(dict.fromkeys(p for v in values if (p := value_problem(flag, v, catalog)) is not None))
    if problems:
        raise CliError("nothing was started: " + "; ".join(problems)
                       + ". Correct --values (or give --force to start the server anyway)")


def _catalog_for(binary: str | None):
    """The flag catalog of the llama-server a run starts: `binary` (confirmed before this is called), else the
    configured one; the tested build's when neither can be read (--force launches what it refuses)."""
    from llm_tuner.services.binaries import SERVER, BinaryError, default_catalog, probe, read_help

    if binary:
        from llm_tuner.core.cmdline import parse_help

        try:
            return parse_help(read_help(Path(binary)))
        except BinaryError:
            return default_catalog()
    info = probe(SERVER, _settings(), with_devices=False)
    return info.catalog if info.ok and info.catalog is not None else default_catalog()


def _spec(args):
    from llm_tuner.core.bench_spec import BenchSpec

    try:
        return BenchSpec(prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, reps=args.reps,
                         warmup=args.warmup, warm_cache=args.warm_cache, depth=args.depth, clients=args.clients,
                         prompt_file=args.prompt_file, llama_bench=args.llama_bench,
                         model=getattr(args, "router_model", None))
    except ValueError as exc:
        raise CliError(options_error(exc)) from None


def options_error(exc: ValueError) -> str:
    """A refused option in plain words, named as typed (`--reps: must be at least 1`): pydantic's errors without
    its type names and web addresses."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc) or "invalid benchmark options"
    out = []
    for e in errors():
        where = "--" + "-".join(str(x) for x in e.get("loc", ()) if isinstance(x, str)).replace("_", "-")
        msg = str(e.get("msg", "not valid")).removeprefix("Value error, ")
        got = e.get("input")
        got = ",".join(map(str, got)) if isinstance(got, (list, tuple)) else got
        out.append(f"{where}: {msg} (got {got})" if where != "--" else msg)
    return "; ".join(out) or "invalid benchmark options"


def _progress(quiet: bool = False):
    last = {"text": None}

    def report(frac, text):
        if text != last["text"]:
            last["text"] = text
            pct = "" if frac is None else f"[{100 * frac:5.1f}%] "
            print(f"{pct}{text}", file=sys.stderr, flush=True)

    return report


def _runner(args=None):
    from llm_tuner.services.bench import BenchRunner, default_telemetry

    stall = {"stall_s": args.stall_after} if args is not None and args.stall_after else {}
    runner = BenchRunner(_repo(), settings=_settings(), telemetry=default_telemetry(), devices=_gpu_records(), **stall)
    runner.heat_gate = not getattr(args, "no_heat_gate", False)
    return runner


def _cool_down(runner, args):
    """The heat gate of an A/B with the command's --cool-within / --cool-limit (None: no GPU temperatures, or
    --no-heat-gate)."""
    from llm_tuner.services.bench.heat import CoolDown

    if not runner.heat_gate:
        return None
    kw = {k: v for k, v in (("within_c", getattr(args, "cool_within", None)),
                            ("limit_s", getattr(args, "cool_limit", None))) if v is not None}
    return CoolDown.for_telemetry(runner.telemetry, **kw)


def _gpu_records() -> list[dict]:
    """This machine's GPUs (model, memory, driver) for each run's record, as the window records them."""
    try:
        from llm_tuner.services.telemetry.inventory import detect_inventory

        return [d.model_dump(mode="json") for d in detect_inventory().devices]
    except Exception:  # noqa: BLE001 - the run is measured without them; its report says "none recorded"
        return []


def run_json(run) -> dict:
    from llm_tuner.core.bench_report import run_to_json

    return run_to_json(run)


def _print_run(run) -> None:
    from llm_tuner.core.bench_report import metric_label, run_summary
    from llm_tuner.core.units import printable

    s = run_summary(run)
    print(printable(f"run {run.id} ({run.label}): {run.status}" + (f" - {run.error}" if run.error else "")))
    if run.build is not None:
        print(printable(f"  {run.build.describe()}"))
    for note in run.notes:
        print(printable(f"  note: {note}"))
    for name, m in s["metrics"].items():
        print(f"  {metric_label(name):40s} median {m.get('median', 0):10.2f}  IQR {m.get('iqr', 0):8.2f}  "
              f"n={m.get('n', 0)}")
    for g in s["llama_bench_gap"]:
        print("  " + g["text"])
    if s["speculative"]:
        from llm_tuner.core.bench_report import speculative_lines

        for line in speculative_lines(s["speculative"]):
            print("  " + line)
    if run.llama_bench_skipped:
        print("  flags llama-bench lacks: " + " ".join(run.llama_bench_skipped))


# -- commands ------------------------------------------------------------------------------------

def cmd_bench(args) -> int:
    target, spec = _with_binary(resolve_target(args), args), _spec(args)
    _preflight(target, args)
    if args.vs_no_draft:
        return _speculative_ab(target, spec, args)
    if args.vs_binary:
        from llm_tuner.cli.bench_builds import vs_binary

        return vs_binary(_runner(args), target, spec, args, cool_down=lambda r: _cool_down(r, args),
                         show_run=_print_run, progress=_progress())
    from llm_tuner.services.bench import BenchError
    from llm_tuner.services.bench.builds import slower_than_stored

    runner = _runner(args)
    try:
        run = runner.run(target, spec, progress=_progress()).run
    except BenchError as exc:  # before the run could start (no llama-server found, an unconfirmed program)
        raise CliError(str(exc)) from None
    retune = slower_than_stored(runner.repo, run)
    if args.json:
        emit_json({**run_json(run), "retune": retune})
    else:
        _print_run(run)
        if retune:
            print(f"Re-tune? {retune}")
    return 0 if run.status == "complete" else 1


def _speculative_ab(target, spec, args) -> int:
    from llm_tuner.core.bench_report import pooled, run_summary, speculative_ab
    from llm_tuner.services.bench import BenchError

    if target.attached_url:
        raise CliError("--vs-no-draft restarts the server: give a profile or llama-server arguments")
    runner = _runner(args)
    try:
        with runner.heat_gated(_cool_down(runner, args)):
            runs = runner.speculative_ab(target, spec, rounds=args.vs_no_draft, progress=_progress())
    except BenchError as exc:
        raise CliError(str(exc)) from exc
    ab = speculative_ab(runs)
    drafted = pooled([r for r in runs if r.sweep_value != "none"])
    if args.json:
        emit_json({"runs": [run_json(r) for r in runs], "speculative_ab": ab,
                   "speculative": run_summary(drafted)["speculative"] if drafted else None})
    else:
        print_speculative_ab(runs, ab)
    return 0 if runs and all(r.status == "complete" for r in runs) else 1


def print_speculative_ab(runs, ab) -> None:
    """The A/B as text: each run (a `--spec-type none` run says it drafts nothing), then the drafting runs'
    pooled acceptance under its own heading, so it never reads as the last run's (a none run's) figures."""
    from llm_tuner.core import flags
    from llm_tuner.core.bench_report import pooled, run_summary, speculative_lines

    spec_type = flags.spelling("spec_type")
    for r in runs:
        _print_run(r)
        if r.sweep_value == "none":
            print(f"  no drafting ({spec_type} none): no acceptance figures")
    drafting = [r for r in runs if r.sweep_value != "none"]
    drafted = pooled(drafting)
    sp = run_summary(drafted)["speculative"] if drafted else None
    if sp:
        print(f"Drafting runs {', '.join(str(r.id) for r in drafting)} pooled "
              f"({spec_type} {drafting[0].sweep_value}):")
        for line in speculative_lines(sp):
            print("  " + line)
    if ab:
        print(ab["text"])


def cmd_sweep(args) -> int:
    target, spec = _with_binary(resolve_target(args), args), _spec(args)
    if target.attached_url:
        raise CliError("a sweep restarts the server for each value: give a profile or llama-server arguments")
    _preflight(target, args)
    values = [v.strip() for v in (args.values.split(";") if ";" in args.values else args.values.split(","))]
    param = args.param if args.param.startswith("-") else ("-" if len(args.param) <= 4 else "--") + args.param
    _check_values(param, [v for v in values if v], target, args)
    group_id, runs = _runner(args).sweep(target, spec, param, [v for v in values if v], progress=_progress())
    if args.json:
        emit_json({"group_id": group_id, "param": param, "values": values,
                   "runs": [run_json(r) for r in runs]})
    else:
        for r in runs:
            _print_run(r)
    return 0 if runs and all(r.status == "complete" for r in runs) else 1


def cmd_runs_list(args) -> int:
    from llm_tuner.core.units import printable

    runs = _repo().list_runs(model=args.model, label=args.profile)
    rows = []
    for r in runs:
        rows.append({"run_id": r.id, "profile": r.label, "model": r.model_path, "status": r.status,
                     "started": r.started_at.isoformat() if r.started_at else None,
                     "finished": r.finished_at.isoformat() if r.finished_at else None,
                     "binary_version": r.binary_version, "spec": r.spec.describe(), "n_reps": len(r.reps),
                     "group_id": r.group_id, "sweep_value": r.sweep_value, "error": r.error})
    if args.json:
        emit_json(rows)
    else:
        if rows:
            print(f"{'run':>5s}  {'started':19s}  {'status':10s}  {'profile':30s}  model  (benchmark settings)")
        for row in rows:
            started = (row['started'] or '').replace("T", " ")
            print(printable(f"{row['run_id']:5d}  {started:19.19s}  {row['status']:10s}  "
                            f"{row['profile']:30.30s}  {Path(row['model'] or '').name}  ({row['spec']})"))
        if not rows:
            print("no runs yet: llm-tuner bench --prompt-tokens 512 --gen-tokens 128 -- -m MODEL.gguf")
    return 0


def cmd_runs_show(args) -> int:
    run = _repo().get_run(args.run_id)
    if run is None:
        raise CliError(f"no run {args.run_id}: see `llm-tuner runs list`")
    if args.json:
        emit_json(run_json(run))
    else:
        _print_run(run)
    return 0


def compare_json(side_a, side_b, threshold_pct: float, engine) -> dict:
    """B against A as `runs compare` prints it: each side one run, or a profile's runs of one setting pooled
    (core.bench_starts.same_settings), held to how much server starts differ here (from the history), with
    the saved profiles' differing flags."""
    from llm_tuner.core.bench_report import run_flag_diff, speculative_speedup
    from llm_tuner.core.bench_starts import HISTORY_RUNS, compare_across_starts, side_warnings
    from llm_tuner.services.bench import profile_versions
    from llm_tuner.store.runs import RunRepository

    a, b, comps, starts = compare_across_starts(side_a, side_b, RunRepository(engine).list_overview(
        limit=HISTORY_RUNS), threshold_pct)
    pa, pb = profile_versions(engine, a.profile_version_id, b.profile_version_id)
    out = {"a": {"run_id": a.id, "runs": [r.id for r in side_a], "label": a.label,
                 "profile_version_id": a.profile_version_id},
           "b": {"run_id": b.id, "runs": [r.id for r in side_b], "label": b.label,
                 "profile_version_id": b.profile_version_id},
           "threshold_pct": threshold_pct,
           "metrics": [c.to_json() for c in comps],
           "between_starts": starts,
           "profile_diff": run_flag_diff(a, b, pa, pb)}
    spd = speculative_speedup(b, a) or speculative_speedup(a, b)
    if spd:
        out["speculative_speedup"] = spd
    out["warnings"] = side_warnings(side_a, side_b)
    return out, a, b, side_a, side_b


def _flag_value(value: str | None) -> str:
    """A flag's value as the compare text shows it: absent, on (a switch), or the value."""
    return "(absent)" if value is None else (value or "on")


def cmd_runs_compare(args) -> int:
    repo = _repo()
    if args.profiles:  # each profile's newest run and its earlier runs of the same settings, pooled
        from llm_tuner.core.bench_starts import same_settings

        side_a, side_b = (same_settings(repo.list_runs(label=n, limit=20)) for n in (args.a, args.b))
        missing = [n for n, side in ((args.a, side_a), (args.b, side_b)) if not side]
        if missing:
            raise CliError(f"no finished run of profile(s) {', '.join(missing)}; labels: {', '.join(repo.labels())}")
    else:
        try:
            ra, rb = repo.get_run(int(args.a)), repo.get_run(int(args.b))
        except ValueError as exc:
            raise CliError("run ids are numbers (use --profiles to name profiles)") from exc
        if ra is None or rb is None:
            raise CliError(f"no run {args.a if ra is None else args.b}: see `llm-tuner runs list`")
        side_a, side_b = [ra], [rb]
    settings = _settings()
    threshold = args.threshold if args.threshold is not None else getattr(settings, "ab_threshold_pct", AB_THRESHOLD_PCT)
    result, a, b, side_a, side_b = compare_json(side_a, side_b, threshold, repo.engine)
    if args.format and not args.out:
        raise CliError("--format writes a report: give the folder with --out DIR")
    if args.out:
        from llm_tuner.services.bench_export import export_comparison

        result["report"] = str(export_comparison(a, b, result, Path(args.out), args.format or "md"))
    if args.json:
        emit_json(result)
    else:
        from llm_tuner.core.bench_report import inconclusive_json_line, metric_label, verdict_cell
        from llm_tuner.core.units import printable

        def med(side) -> str:
            return "–" if not side or side.get("median") is None else f"{side['median']:.2f}"

        from llm_tuner.core.bench_starts import side_text

        print(printable(f"B = {side_text(b, side_b)} against A = {side_text(a, side_a)}, threshold {threshold:g}%"))
        print(f"  {'Metric':40s} {'A median':>10s} {'B median':>10s} {'Δ B vs A':>8s} {'95% CI of Δ':18s} Verdict")
        for m in result["metrics"]:
            d = "–" if m["delta_pct"] is None else f"{m['delta_pct']:+6.1f}%"
            ci = "–" if m["ci_low_pct"] is None else f"[{m['ci_low_pct']:+.1f}, {m['ci_high_pct']:+.1f}]%"
            print(f"  {metric_label(m['name']):40s} {med(m['a']):>10s} {med(m['b']):>10s} {d:>8s} {ci:18s} "
                  f"{verdict_cell(m)}")
        if line := inconclusive_json_line(result["metrics"], threshold):
            print(line)
        for line in result["between_starts"]:
            print(line)
        print("Flags that differ (A -> B):" if result["profile_diff"] else "Flags: the same in A and B.")
        for f in result["profile_diff"]:
            print(f"  {f['flag']}: {_flag_value(f['a'])} -> {_flag_value(f['b'])}")
        for w in result["warnings"]:
            print(f"Warning: {w}")
        if "report" in result:
            print(f"report: {result['report']}")
    return 0


def cmd_runs_export(args) -> int:
    run = _repo().get_run(args.run_id)
    if run is None:
        raise CliError(f"no run {args.run_id}: see `llm-tuner runs list`")
    from llm_tuner.services.bench_export import export_run

    path = export_run(run, Path(args.out), args.format, plots=_plot_renderer() if args.format == "md" else None)
    if args.json:
        emit_json({"run_id": run.id, "path": str(path)})
    else:
        print(f"run {run.id} written to {path}")
    return 0


def _plot_renderer():
    """PNG plots for the Markdown report (pyqtgraph, offscreen); None when Qt cannot start."""
    try:
        from llm_tuner.ui.plots.bench_plots import render_run_plots

        return render_run_plots
    except Exception:  # noqa: BLE001 - the report is still written, without plots
        return None


def cmd_runs_delete(args) -> int:
    repo = _repo()
    if repo.get_run(args.run_id) is None:
        raise CliError(f"no run {args.run_id}")
    repo.delete_run(args.run_id)
    if args.json:
        emit_json({"deleted": args.run_id})
    else:
        print(f"run {args.run_id} deleted")
    return 0
