"""What a benchmark run says: per-metric samples, summaries, A/B comparison, llama-bench gap, reports.

Pure functions over core models (no I/O), shared by the UI, the CLI and the export.
Metric ids (kept in JSON and CSV): `prefill_tps@N`, `gen_tps@N`, `ttft_ms@N`, `latency_ms@N`, `acceptance@N`,
`peak_ram_mib:Host`, `peak_vram_mib:DEV`, `peak_power_w:DEV`, `peak_temp_c:DEV`, `energy_per_token_j`;
every view shows them as `metric_label` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.stats import Comparison, compare, percentile, speculative_bound, summarize

# Metric id prefix -> (readable name, unit). Ids stay in JSON and CSV; people read `metric_label`.
_KINDS = {
    "prefill_tps": ("Prefill", "t/s"),
    "gen_tps": ("Generation", "t/s"),
    "ttft_ms": ("Time to first token", "ms"),
    "latency_ms": ("Latency", "ms"),
    "acceptance": ("Draft acceptance", "%"),
    "peak_ram_mib": ("Peak memory", "MiB"),
    "peak_vram_mib": ("Peak VRAM", "MiB"),
    "peak_power_w": ("Peak power", "W"),
    "peak_temp_c": ("Peak temperature", "°C"),
    "energy_per_token_j": ("Energy per token", "J/token"),
}


def metric_label(name: str) -> str:
    """A metric id as people read it, with its unit: `ttft_ms@128` -> "Time to first token @ 128 tok (ms)",
    `peak_ram_mib:Host` -> "Peak memory: Host (MiB)". An unknown id comes back as it is."""
    kind, sep, arg = name.partition("@")
    if not sep:
        kind, sep, arg = name.partition(":")
    if kind not in _KINDS:
        return name
    title, unit = _KINDS[kind]
    where = {"@": f" @ {arg} tok", ":": f": {arg}"}.get(sep, "")
    return f"{title}{where} ({unit})"


@dataclass(frozen=True)
class MetricSamples:
    name: str
    unit: str
    higher_is_better: bool
    values: tuple[float, ...]


def _ok(run: BenchRun) -> list[Repetition]:
    return [r for r in run.reps if r.error is None]


def metric_samples(run: BenchRun) -> dict[str, MetricSamples]:
    """Every metric of a run with its per-repetition values, in a stable order."""
    out: dict[str, MetricSamples] = {}

    def add(kind: str, where: str, higher: bool, value: float | None) -> None:
        if value is None:
            return
        name = kind + where
        m = out.get(name)
        out[name] = MetricSamples(name, _KINDS[kind][1], higher, (*(m.values if m else ()), float(value)))

    reps = _ok(run)
    for n in sorted({r.prompt_tokens for r in reps}):
        for r in (r for r in reps if r.prompt_tokens == n):
            add("prefill_tps", f"@{n}", True, r.prompt_per_second if (r.prompt_n or 0) > 1 else None)
            add("gen_tps", f"@{n}", True, r.predicted_per_second if (r.predicted_n or 0) > 1 else None)
            add("ttft_ms", f"@{n}", False, r.ttft_ms)
            add("latency_ms", f"@{n}", False, r.latency_ms)
            add("acceptance", f"@{n}", True, None if r.acceptance is None else 100.0 * r.acceptance)
    for r in reps:
        for p in r.peaks:
            add("peak_ram_mib" if p.device == "Host" else "peak_vram_mib", f":{p.device}", False, p.vram_used_mib)
            add("peak_power_w", f":{p.device}", False, p.power_w)
            add("peak_temp_c", f":{p.device}", False, p.temp_c)
        add("energy_per_token_j", "", False, r.energy_per_token_j)
    return out


# Other processes using this share of all cores (median over requests, or BUSY_MAX_PCT in one request)
# make timings unreliable: on a machine whose cores the server uses fully, 10% of them is a real slowdown.
BUSY_CPU_PCT = 10.0
BUSY_MAX_PCT = 25.0


def busy_warning(run: BenchRun) -> str | None:
    """A warning when other processes used much CPU while the run measured."""
    s = summarize([r.other_cpu_pct for r in run.reps])
    if s is None or (s.median < BUSY_CPU_PCT and s.max < BUSY_MAX_PCT):
        return None
    return (f"run {run.id}: other processes used {s.median:.0f}% of the CPU while it measured (max {s.max:.0f}%); "
            "its timings reflect that load, not only the settings. Re-run on a quiet machine.")


def run_summary(run: BenchRun) -> dict:
    """Median/spread/n per metric, latency percentiles, speculative figures and the llama-bench gap."""
    samples = metric_samples(run)
    metrics = {}
    for name, m in samples.items():
        s = summarize(m.values)
        metrics[name] = {"unit": m.unit, **(s.to_json() if s else {})}
    reps = _ok(run)
    latency = {}
    for n in sorted({r.prompt_tokens for r in reps}):
        sel = [r for r in reps if r.prompt_tokens == n]
        latency[str(n)] = {
            f"{key}_p{p}": percentile([getattr(r, key) for r in sel], p)
            for key in ("ttft_ms", "latency_ms") for p in (50, 95, 99)}
    drafted = [r for r in reps if r.draft_n]
    spec = None
    if drafted:
        draft_n = sum(r.draft_n or 0 for r in drafted)
        accepted = sum(r.draft_n_accepted or 0 for r in drafted)
        steps = sum(r.draft_steps or 0 for r in drafted)
        alpha = accepted / draft_n if draft_n else None
        k = draft_depth(run.server_argv)
        spec = {"acceptance": alpha, "draft_n": draft_n, "draft_n_accepted": accepted,
                "mean_accepted_len": (1.0 + accepted / steps) if steps else None, "draft_depth_k": k,
                "bound_tokens_per_step": speculative_bound(alpha, k) if alpha is not None and k else None}
    return {"run_id": run.id, "label": run.label, "status": run.status, "n_reps": len(reps),
            "n_failed": len(run.reps) - len(reps), "metrics": metrics, "latency_percentiles": latency,
            "speculative": spec, "llama_bench_gap": llama_bench_gap(run),
            "other_cpu_pct_median": (summarize([r.other_cpu_pct for r in reps]) or _NONE).median,
            "busy_warning": busy_warning(run)}


class _NoSummary:
    median = None


_NONE = _NoSummary()


def draft_depth(argv: tuple[str, ...] | list[str]) -> int | None:
    """The draft depth k of the bound 1 + α + … + α^k.

    Draft-model and MTP types draft `--spec-draft-n-max` tokens (default 3, common.h); `ngram-mod`
    drafts up to `--spec-ngram-mod-n-max` (default 64). Other n-gram types propose variable-length
    drafts, for which the bound with a fixed k does not apply: None.
    """
    argv = list(argv)
    n_max = flags.value_of(argv, "draft_n_max")
    types = (flags.value_of(argv, "spec_type") or "").split(",")
    try:
        if n_max is not None:
            return int(n_max)
        if any(t.startswith("draft-") for t in types) or flags.has(argv, "draft_model"):
            return 3
        if "ngram-mod" in types:
            return int(flags.value_of(argv, "ngram_mod_n_max") or 64)
    except ValueError:
        return None
    return None if any(t.startswith("ngram") for t in types) else 3


def llama_bench_gap(run: BenchRun) -> list[dict]:
    """Pair llama-bench tests with the server's medians: "llama-bench X, llama-server Y, gap Z%"."""
    out = []
    samples = metric_samples(run)
    for lb in run.llama_bench:
        if lb.n_gen == 0:
            key, what = f"prefill_tps@{lb.n_prompt}", f"prefill {lb.n_prompt} tokens"
        elif lb.n_prompt == 0:
            gens = [k for k in samples if k.startswith("gen_tps@")]
            key, what = (gens[0] if gens else None), f"generation {lb.n_gen} tokens"
        else:
            continue
        server = summarize(samples[key].values).median if key in samples else None
        gap = None if server is None or not lb.avg_ts else 100.0 * (server - lb.avg_ts) / lb.avg_ts
        text = f"{what}: llama-bench {lb.avg_ts:.1f} t/s, llama-server " + (
            f"{server:.1f} t/s, gap {gap:+.1f}%" if server is not None else "not measured")
        out.append({"test": lb.test, "metric": key, "llama_bench_tps": lb.avg_ts, "llama_server_tps": server,
                    "gap_pct": gap, "text": text})
    return out


def compare_runs(a: BenchRun, b: BenchRun, threshold_pct: float = 2.0) -> list[Comparison]:
    """Per metric present in either run: B against A with its verdict."""
    sa, sb = metric_samples(a), metric_samples(b)
    names = list(sa) + [n for n in sb if n not in sa]
    out = []
    for name in names:
        m = sa.get(name) or sb[name]
        out.append(compare(name, sa[name].values if name in sa else (), sb[name].values if name in sb else (),
                           higher_is_better=m.higher_is_better, threshold_pct=threshold_pct, unit=m.unit))
    return out


def _flag_pairs(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """argv -> {flag: value} ('' for switches), each flag under its long spelling (so `-c` and `--ctx-size`
    are one flag); repeated flags are joined with ' '. Secret values are masked."""
    out: dict[str, str] = {}
    for _i, tok, value in flags.iter_flags(flags.mask_argv(list(argv))):
        hit = flags.lookup(tok)
        name = flags.normalize(tok) if hit is None else (hit[0].flag if hit[1] else hit[0].neg_flag)
        val = value or ""
        out[name] = f"{out[name]} {val}".strip() if name in out else val
    return out


def argv_diff(a: tuple[str, ...] | list[str], b: tuple[str, ...] | list[str]) -> list[dict]:
    """Flags whose values differ between two llama-server argument lists ({flag, a, b}; None = absent)."""
    pa, pb = _flag_pairs(a), _flag_pairs(b)
    out = []
    for flag in list(pa) + [f for f in pb if f not in pa]:
        va, vb = pa.get(flag), pb.get(flag)
        if va != vb:
            out.append({"flag": flag, "a": va, "b": vb})
    return out


def run_flag_diff(a: BenchRun, b: BenchRun, profile_a=None, profile_b=None) -> list[dict]:
    """Which flags differ between two runs: through core.cmdline.profile_diff when both runs' saved
    profile versions are given (LaunchProfile), else from their llama-server argument lists."""
    if profile_a is not None and profile_b is not None:
        from llm_tuner.core.cmdline import profile_diff  # noqa: PLC0415

        return [{"flag": f, "a": va, "b": vb} for f, va, vb in profile_diff(profile_a, profile_b)]
    return argv_diff(a.server_argv, b.server_argv)


def speculative_speedup(run: BenchRun, baseline: BenchRun) -> dict | None:
    """Measured generation speed-up of a drafting run over a no-draft run, beside the bound."""
    spec = run_summary(run)["speculative"]
    if not spec or spec["acceptance"] is None:
        return None
    sa, sb = metric_samples(baseline), metric_samples(run)
    common = [k for k in sb if k.startswith("gen_tps@") and k in sa]
    if not common:
        return None
    base = summarize(sa[common[0]].values).median
    spd = summarize(sb[common[0]].values).median
    return {"metric": common[0], "measured_speedup": spd / base if base else None,
            "bound": spec["bound_tokens_per_step"], "acceptance": spec["acceptance"], "k": spec["draft_depth_k"]}


def _fmt(v, digits: int = 1) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}"


def _when(t) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else "–"


def report_markdown(run: BenchRun, plots: list[tuple[str, str]] = ()) -> str:
    """A shareable Markdown report of one run; `plots` are (title, relative PNG path)."""
    s = run_summary(run)
    lines = [f"# Benchmark run {run.id}: {run.label or '(unnamed)'}", "",
             f"- Status: **{run.status}**" + (f" ({run.error})" if run.error else ""),
             f"- Started: {_when(run.started_at)} · finished: {_when(run.finished_at)}",
             "- Model: " + (f"`{run.model_path}`" if run.model_path else "not known")
             + (f" ({run.model_size / 2**20:.0f} MiB)" if run.model_size else "")
             + (f", header sha256 `{run.model_hash[:16]}`" if run.model_hash else ""),
             f"- llama-server: {run.binary_version or 'version not known'}"
             + (f" [{', '.join(run.binary_backends)}]" if run.binary_backends else "")
             + (f" `{run.binary_path}`" if run.binary_path else ""),
             f"- Spec: {run.spec.describe()}",
             f"- Command: `llama-server {' '.join(run.server_argv)}`", ""]
    if s["busy_warning"]:
        lines += [f"> Warning: {s['busy_warning']}", ""]
    if run.memory_predicted_mib or run.memory_measured_mib:
        lines += ["| Device | Memory plan (MiB) | Measured peak (MiB) |", "|---|---:|---:|"]
        pred, meas = run.memory_predicted_mib or {}, run.memory_measured_mib or {}
        for dev in list(pred) + [d for d in meas if d not in pred]:
            lines.append(f"| {dev} | {_fmt(pred.get(dev), 0)} | {_fmt(meas.get(dev), 0)} |")
        lines += ["", "Measured: VRAM used on the GPU (whole device), or the server's RSS for Host.", ""]
    if run.devices:
        lines += ["- Devices: " + "; ".join(str(d.get("name", d)) + (f" ({d.get('model')})" if d.get("model") else "")
                                            for d in run.devices), ""]
    lines += ["| Metric | Median | IQR | Stdev | n |", "|---|---:|---:|---:|---:|"]
    for name, m in s["metrics"].items():
        lines.append(f"| {metric_label(name)} | {_fmt(m.get('median'), 2)} | {_fmt(m.get('iqr'), 2)} | "
                     f"{_fmt(m.get('stdev'), 2)} | {m.get('n', 0)} |")
    lines.append("")
    if run.spec.clients > 1:
        lines += ["## Latency under load", "", "| Prompt | TTFT p50/p95/p99 (ms) | Latency p50/p95/p99 (ms) |",
                  "|---|---|---|"]
        for n, p in s["latency_percentiles"].items():
            lines.append(f"| {n} | {_fmt(p['ttft_ms_p50'])} / {_fmt(p['ttft_ms_p95'])} / {_fmt(p['ttft_ms_p99'])} | "
                         f"{_fmt(p['latency_ms_p50'])} / {_fmt(p['latency_ms_p95'])} / {_fmt(p['latency_ms_p99'])} |")
        lines.append("")
    if s["speculative"]:
        sp = s["speculative"]
        lines += ["## Speculative decoding", "",
                  f"Acceptance α = {_fmt(100 * sp['acceptance'])}% ({sp['draft_n_accepted']}/{sp['draft_n']}), "
                  f"mean accepted length {_fmt(sp['mean_accepted_len'], 2)} tokens/step, bound for "
                  f"k={sp['draft_depth_k']}: {_fmt(sp['bound_tokens_per_step'], 2)} tokens/step", ""]
    if s["llama_bench_gap"] or run.llama_bench_error:
        lines += ["## llama-bench vs llama-server", ""]
        lines += [f"- {g['text']}" for g in s["llama_bench_gap"]]
        if run.llama_bench_skipped:
            lines.append(f"- Flags llama-bench lacks (not applied there): `{' '.join(run.llama_bench_skipped)}`")
        if run.llama_bench_error:
            lines.append(f"- llama-bench: {run.llama_bench_error}")
        lines.append("")
    for title, path in plots:
        lines += [f"![{title}]({path})", ""]
    lines += ["## Repetitions", "",
              "| # | Prompt | Client | Prompt tokens | Prefill t/s | Generated tokens | Generation t/s | TTFT ms "
              "| Latency ms | Drafts accepted |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in run.reps:
        acc = f"{r.draft_n_accepted}/{r.draft_n}" if r.draft_n else "–"
        lines.append(f"| {r.seq} | {r.prompt_tokens} | {r.client} | {_fmt(r.prompt_n, 0)} | {_fmt(r.prompt_per_second)} | "
                     f"{_fmt(r.predicted_n, 0)} | {_fmt(r.predicted_per_second)} | {_fmt(r.ttft_ms)} | {_fmt(r.latency_ms)} | "
                     f"{acc if r.error is None else 'error: ' + r.error} |")
    return "\n".join(lines) + "\n"


REP_CSV_FIELDS = ("run_id", "label", "seq", "prompt_tokens", "depth", "rep", "client", "cache_n", "prompt_n",
                  "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second",
                  "draft_n", "draft_n_accepted", "draft_steps", "ttft_ms", "latency_ms", "other_cpu_pct", "error")


def rep_rows(run: BenchRun) -> list[dict]:
    """Flat rows (one per repetition) for CSV export."""
    return [{"run_id": run.id, "label": run.label, **{k: getattr(r, k) for k in REP_CSV_FIELDS[2:]}}
            for r in run.reps]


def run_to_json(run: BenchRun) -> dict:
    """A run as the CLI and the JSON export print it: identity, spec, repetitions, summary, llama-bench."""
    return {"run_id": run.id, "label": run.label, "status": run.status, "error": run.error,
            "started": run.started_at.isoformat() if run.started_at else None,
            "finished": run.finished_at.isoformat() if run.finished_at else None,
            "model": run.model_path, "model_size": run.model_size, "model_hash": run.model_hash,
            "binary": run.binary_path, "binary_version": run.binary_version,
            "binary_backends": list(run.binary_backends), "devices": run.devices,
            "profile_version_id": run.profile_version_id, "group_id": run.group_id, "sweep_value": run.sweep_value,
            "spec": run.spec.model_dump(mode="json"), "server_argv": list(run.server_argv),
            "memory_predicted_mib": run.memory_predicted_mib, "memory_measured_mib": run.memory_measured_mib,
            "reps": [r.to_json() for r in run.reps], "summary": run_summary(run),
            "llama_bench": [lb.raw or lb.model_dump(mode="json") for lb in run.llama_bench],
            "llama_bench_skipped": list(run.llama_bench_skipped), "llama_bench_error": run.llama_bench_error}
