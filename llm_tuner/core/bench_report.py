"""What a benchmark run says: per-metric samples, summaries, A/B comparison, llama-bench gap, reports.

Pure functions over core models (no I/O), shared by the UI, the CLI and the export.
Metric ids (kept in JSON and CSV): `prefill_tps@N`, `gen_tps@N`, `ttft_ms@N`, `latency_ms@N`, `acceptance@N`,
`peak_ram_mib:Host`, `peak_vram_mib:DEV`, `peak_power_w:DEV`, `peak_temp_c:DEV`, `energy_per_token_j`;
every view shows them as `metric_label` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.cmdline import profile_diff
from llm_tuner.core.hardware import hardware_lines
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.server_endpoints import labelled
from llm_tuner.core.speed import Prediction
from llm_tuner.core.stats import (
    AB_THRESHOLD_PCT,
    INCONCLUSIVE,
    INCONCLUSIVE_PCT,
    Comparison,
    acceptance_by_position,
    compare,
    fit_constant_alpha,
    median,
    percentile,
    speculative_bound,
    summarize,
    tokens_per_step,
)

_DRAFTS = "spec_decode_num_drafts_total"
_PER_POS = "spec_decode_num_accepted_tokens_per_pos_total"
PREDICTED_DEPTHS = (1, 2, 3, 4, 5, 6, 8)  # draft depths the constant-α model is asked about

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


def throttle_warning(run: BenchRun) -> str | None:
    """A warning when a GPU throttled (power, heat, a hardware brake) while the run measured."""
    devices = sorted({p.device for r in run.reps for p in r.peaks if p.throttled})
    if not devices:
        return None
    return (f"run {run.id}: {', '.join(devices)} throttled while it measured; its timings reflect that, not only "
            "the settings.")


def run_summary(run: BenchRun) -> dict[str, Any]:
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
    spec = speculative_figures(run, reps)
    return {"run_id": run.id, "label": run.label, "status": run.status, "n_reps": len(reps),
            "n_failed": len(run.reps) - len(reps), "metrics": metrics, "latency_percentiles": latency,
            "speculative": spec, "llama_bench_gap": llama_bench_gap(run),
            "other_cpu_pct_median": (summarize([r.other_cpu_pct for r in reps]) or _NONE).median,
            "busy_warning": busy_warning(run)}


def draft_counters(metrics: dict[str, float]) -> tuple[float | None, tuple[float, ...]]:
    """llama.cpp's speculative counters in parse_metrics' result: (verification steps, accepted tokens
    per 0-based draft position). The per-position family is emitted only once non-empty."""
    by_pos: dict[int, float] = {}
    for labels, value in labelled(metrics, _PER_POS):
        try:
            by_pos[int(labels.get("position", ""))] = value
        except ValueError:
            continue
    per_pos = tuple(by_pos.get(p, 0.0) for p in range(max(by_pos) + 1)) if by_pos else ()
    return metrics.get(_DRAFTS), per_pos


def draft_counter_deltas(before: dict[str, float], after: dict[str, float]) -> tuple[int | None, tuple[int, ...]]:
    """What one request added to the counters of draft_counters: (steps, accepted per position). A series
    missing before counts as 0 (llama-server emits the per-position family only once something is in it)."""
    s0, p0 = draft_counters(before)
    s1, p1 = draft_counters(after)
    steps = int(s1 - (s0 or 0.0)) if s1 is not None else None
    per_pos = tuple(int(v - (p0[i] if i < len(p0) else 0.0)) for i, v in enumerate(p1))
    while per_pos and per_pos[-1] == 0:
        per_pos = per_pos[:-1]
    return steps, per_pos


def speculative_from_counters(steps: float, per_pos: Sequence[float], k: int | None) -> dict[str, Any]:
    """α_i, mean tokens per step, the speed-up ceiling and the constant-α predictions from llama.cpp's
    counters (steps = spec_decode_num_drafts_total, per_pos = accepted per 0-based position).

    The ceiling is the mean tokens per step: each verification step costs one target forward pass, so
    with draft and verification cost ignored speculation can at best multiply generation speed by it.
    The constant-α model (docs/field-reports.md) is fitted to give the measured figure at the run's
    own depth k, then asked what the other depths would give."""
    alphas = acceptance_by_position(per_pos, steps) if steps else []
    tps = tokens_per_step(alphas) if steps else None
    alpha_c = fit_constant_alpha(tps, k) if tps is not None and k else None
    predictions = ({str(d): speculative_bound(alpha_c, d) for d in sorted({*PREDICTED_DEPTHS, k})}
                   if alpha_c is not None and k else {})
    return {"alpha_by_position": alphas, "tokens_per_step": tps, "speedup_ceiling": tps,
            "alpha_constant": alpha_c, "predicted_tokens_per_step": predictions}


def speculative_figures(run: BenchRun, reps: list[Repetition]) -> dict[str, Any] | None:
    """The speculative section of run_summary (None when nothing was drafted)."""
    drafted = [r for r in reps if r.draft_n]
    if not drafted:
        return None
    draft_n = sum(r.draft_n or 0 for r in drafted)
    accepted = sum(r.draft_n_accepted or 0 for r in drafted)
    steps = sum(r.draft_steps or 0 for r in drafted)
    counted = [r for r in drafted if r.draft_steps and r.draft_accepted_per_pos]
    width = max((len(r.draft_accepted_per_pos) for r in counted), default=0)
    per_pos = [sum(r.draft_accepted_per_pos[p] for r in counted if p < len(r.draft_accepted_per_pos))
               for p in range(width)]
    k = draft_depth(run.server_argv)
    figures = speculative_from_counters(sum(r.draft_steps or 0 for r in counted), per_pos, k) if counted else \
        speculative_from_counters(0, (), None)
    return {"acceptance": accepted / draft_n if draft_n else None, "draft_n": draft_n,
            "draft_n_accepted": accepted, "mean_accepted_len": (1.0 + accepted / steps) if steps else None,
            "draft_depth_k": k, **figures}


class _NoSummary:
    median = None


_NONE = _NoSummary()


def draft_depth(argv: tuple[str, ...] | list[str]) -> int | None:
    """The draft depth k (tokens drafted per step) of the constant-α model 1 + α + … + α^k.

    Draft-model and MTP types draft `--spec-draft-n-max` tokens (default 3, common.h); `ngram-mod`
    drafts up to `--spec-ngram-mod-n-max` (default 64). Other n-gram types propose variable-length
    drafts, for which a model with a fixed k does not apply: None.
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


def llama_bench_gap(run: BenchRun) -> list[dict[str, Any]]:
    """Pair llama-bench tests with the server's medians: "llama-bench X, llama-server Y, gap Z%"."""
    out = []
    samples = metric_samples(run)
    key: str | None
    for lb in run.llama_bench:
        if lb.n_gen == 0:
            key, what = f"prefill_tps@{lb.n_prompt}", f"prefill {lb.n_prompt} tokens"
        elif lb.n_prompt == 0:
            gens = [k for k in samples if k.startswith("gen_tps@")]
            key, what = (gens[0] if gens else None), f"generation {lb.n_gen} tokens"
        else:
            continue
        server = median(samples[key].values) if key is not None and key in samples else None
        gap = None if server is None or not lb.avg_ts else 100.0 * (server - lb.avg_ts) / lb.avg_ts
        text = f"{what}: llama-bench {lb.avg_ts:.1f} t/s, llama-server " + (
            f"{server:.1f} t/s, gap {gap:+.1f}%" if server is not None else "not measured")
        out.append({"test": lb.test, "metric": key, "llama_bench_tps": lb.avg_ts, "llama_server_tps": server,
                    "gap_pct": gap, "text": text})
    return out


def compare_runs(a: BenchRun, b: BenchRun, threshold_pct: float = AB_THRESHOLD_PCT) -> list[Comparison]:
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
        # a negative spelling (hit[1] False) is one of the flag's `neg`, so it has a neg_flag
        name = (hit[0].flag if hit[1] else hit[0].neg_flag) if hit is not None else None
        name = name or flags.normalize(tok)
        val = value or ""
        out[name] = f"{out[name]} {val}".strip() if name in out else val
    return out


def argv_diff(a: tuple[str, ...] | list[str], b: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """Flags whose values differ between two llama-server argument lists ({flag, a, b}; None = absent)."""
    pa, pb = _flag_pairs(a), _flag_pairs(b)
    out = []
    for flag in list(pa) + [f for f in pb if f not in pa]:
        va, vb = pa.get(flag), pb.get(flag)
        if va != vb:
            out.append({"flag": flag, "a": va, "b": vb})
    return out


def run_flag_diff(a: BenchRun, b: BenchRun, profile_a: LaunchProfile | None = None,
                  profile_b: LaunchProfile | None = None) -> list[dict[str, Any]]:
    """Which flags differ between two runs: through core.cmdline.profile_diff when both runs' saved
    profile versions are given (LaunchProfile), else from their llama-server argument lists."""
    if profile_a is not None and profile_b is not None:
        return [{"flag": f, "a": va, "b": vb} for f, va, vb in profile_diff(profile_a, profile_b)]
    return argv_diff(a.server_argv, b.server_argv)


def run_identity_diff(a: BenchRun, b: BenchRun) -> list[dict[str, Any]]:
    """What differs between two runs besides flags: the llama-server build (version, program path, build stamp),
    the GPU driver and the model file, as rows shaped like run_flag_diff's ({flag, a, b}; None = not known)."""
    out = [{"flag": name, "a": va, "b": vb} for name, va, vb in (
        ("llama-server version", a.binary_version, b.binary_version),
        ("llama-server binary", a.binary_path, b.binary_path),
        ("llama-server build", a.build.short if a.build else None, b.build.short if b.build else None),
        ("GPU driver", a.build.driver_text if a.build else None, b.build.driver_text if b.build else None))
        if va != vb]
    if (a.model_hash, a.model_path) != (b.model_hash, b.model_path):
        out.append({"flag": "model file", "a": a.model_path, "b": b.model_path})
    return out


def speculative_lines(sp: dict[str, Any]) -> list[str]:
    """A run's speculative figures as people read them (report, Benchmarks view, Compare)."""
    lines = [f"Draft acceptance {_fmt(100 * sp['acceptance'])}% overall ({sp['draft_n_accepted']}/{sp['draft_n']} "
             f"drafted tokens accepted); llama.cpp's mean length {_fmt(sp['mean_accepted_len'], 2)} tokens/step."]
    if sp.get("tokens_per_step") is None:
        lines.append("Per-position acceptance not measured (needs /metrics and one client).")
        return lines
    alphas = ", ".join(f"α{i + 1} = {100 * a:.0f}%" for i, a in enumerate(sp["alpha_by_position"]))
    lines.append(f"Per-position acceptance: {alphas or 'none accepted'} → mean tokens per step "
                 f"{sp['tokens_per_step']:.2f}; speed-up ceiling {sp['speedup_ceiling']:.2f}× "
                 "(draft and verification cost ignored).")
    if sp.get("predicted_tokens_per_step"):
        pred = ", ".join(f"k={k}: {v:.2f}" for k, v in sp["predicted_tokens_per_step"].items())
        lines.append(f"Constant-α model (α = {100 * sp['alpha_constant']:.0f}%, fitted at k = "
                     f"{sp['draft_depth_k']}): tokens per step {pred}.")
    else:
        lines.append("No prediction for other draft depths: the drafts have no fixed depth k (n-gram types) "
                     "or the measured tokens per step do not fit the constant-α model at this k.")
    return lines


def pooled(runs: list[BenchRun]) -> BenchRun | None:
    """Runs of one setting (the rounds of an interleaved A/B) as one run: the first's identity, every
    repetition (renumbered in order), the worst status."""
    if not runs:
        return None
    reps = tuple(r.model_copy(update={"seq": i}) for i, r in enumerate(x for run in runs for x in run.reps))
    status = next((r.status for r in runs if r.status != "complete"), "complete")
    return runs[0].model_copy(update={"reps": reps, "status": status})


def speculative_ab(runs: list[BenchRun]) -> dict[str, Any] | None:
    """An interleaved A/B of a drafting profile against `--spec-type none` (BenchRunner.speculative_ab):
    both sides pooled over their rounds, then speculative_speedup."""
    drafted = pooled([r for r in runs if r.sweep_value != "none"])
    base = pooled([r for r in runs if r.sweep_value == "none"])
    if drafted is None or base is None:
        return None
    return speculative_speedup(drafted, base)


def speculative_speedup(run: BenchRun, baseline: BenchRun) -> dict[str, Any] | None:
    """Measured generation speed-up of a drafting run over a run of the same profile without drafting
    (`--spec-type none`), beside the ceiling its counters imply."""
    spec = run_summary(run)["speculative"]
    if not spec or spec["acceptance"] is None or run_summary(baseline)["speculative"]:
        return None
    sa, sb = metric_samples(baseline), metric_samples(run)
    common = [k for k in sb if k.startswith("gen_tps@") and k in sa]
    if not common:
        return None
    base = median(sa[common[0]].values)
    spd = median(sb[common[0]].values)
    measured = spd / base if base and spd is not None else None
    ceiling = spec["speedup_ceiling"]
    text = (f"Speculative decoding: measured generation speed-up {_fmt(measured, 2)}× against no drafting"
            + (f", ceiling {ceiling:.2f}× from the acceptance counters" if ceiling else "") + ".")
    return {"metric": common[0], "measured_speedup": measured, "speedup_ceiling": ceiling,
            "acceptance": spec["acceptance"], "k": spec["draft_depth_k"], "text": text}


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}"


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else "–"


def report_markdown(run: BenchRun, plots: Sequence[tuple[str, str]] = ()) -> str:
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
    lines += hardware_lines(run.devices, run.binary_version, run.binary_backends)
    lines += ["## Results", "", "| Metric | Median | IQR | Stdev | n |", "|---|---:|---:|---:|---:|"]
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
        lines += ["## Speculative decoding", ""] + [f"- {t}" for t in speculative_lines(sp)] + [""]
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


def compare_report_markdown(a: BenchRun, b: BenchRun, data: dict[str, Any]) -> str:
    """A shareable Markdown report of B against A: `data` is the comparison as `runs compare --json` prints it
    (metrics with both medians, Δ, the 95 % interval and the verdict; the flags that differ; warnings). The
    hardware of each run is named (once when both ran on the same)."""
    lines = [f"# Comparison: run {b.id} ({b.label}) against run {a.id} ({a.label})", "",
             f"- A: run {a.id} `{a.label}`, {a.model_name}, {a.spec.describe()}, started {_when(a.started_at)}",
             f"- B: run {b.id} `{b.label}`, {b.model_name}, {b.spec.describe()}, started {_when(b.started_at)}",
             f"- Practical threshold: {data.get('threshold_pct', 2):g} % (smaller differences are within noise); "
             "95 % interval of the ratio B/A", ""]
    lines += [f"> Warning: {w}" for w in data.get("warnings", [])] + ([""] if data.get("warnings") else [])
    starts = data.get("between_starts", [])  # what start-to-start variation did to the verdicts
    lines += [f"> {s}" for s in starts] + ([""] if starts else [])
    lines += ["## Results", "", "| Metric | A median (n) | B median (n) | Δ B vs A | 95 % interval | Verdict |",
              "|---|---:|---:|---:|---|---|"]
    for m in data.get("metrics", []):
        sa, sb = m.get("a") or {}, m.get("b") or {}
        delta = "–" if m.get("delta_pct") is None else f"{m['delta_pct']:+.1f} %"
        ci = "–" if m.get("ci_low_pct") is None else f"{m['ci_low_pct']:+.1f} … {m['ci_high_pct']:+.1f} %"
        lines.append(f"| {metric_label(m['name'])} | {_fmt(sa.get('median'), 2)} ({sa.get('n', 0)}) | "
                     f"{_fmt(sb.get('median'), 2)} ({sb.get('n', 0)}) | {delta} | {ci} | {verdict_cell(m)} |")
    if line := inconclusive_json_line(data.get("metrics", []), data.get("threshold_pct", AB_THRESHOLD_PCT)):
        lines += ["", line]
    lines.append("")
    diff = data.get("profile_diff") or []
    lines += ["## Flags that differ (A → B)", ""]
    lines += [f"- `{f['flag']}`: {_flag_text(f.get('a'))} → {_flag_text(f.get('b'))}" for f in diff] or \
        ["- none: the same flags in A and B"]
    lines.append("")
    ha = hardware_lines(a.devices, a.binary_version, a.binary_backends, title="")
    hb = hardware_lines(b.devices, b.binary_version, b.binary_backends, title="")
    if ha == hb:
        lines += ["## Hardware (A and B)", "", *ha]
    else:
        lines += ["## Hardware of A", "", *ha, "## Hardware of B", "", *hb]
    return "\n".join(lines)


def verdict_cell(m: dict[str, Any]) -> str:
    """A metric's verdict as a comparison's JSON gives it (Comparison.to_json), "inconclusive" where its
    interval cannot tell (a comparison stored before that field: its verdict)."""
    return INCONCLUSIVE if m.get("inconclusive") else (m.get("verdict") or "no data")


def inconclusive_line(labels: Sequence[str], threshold_pct: float = AB_THRESHOLD_PCT, *,
                      no_interval: bool = False) -> str:
    """The sentence under an A/B table that has inconclusive metrics (`labels`, as shown); "" when none.
    `no_interval`: one of them has no interval (one repetition on a side)."""
    if not labels:
        return ""
    bound = max(INCONCLUSIVE_PCT, threshold_pct)
    none = " (or has none: one repetition on a side)" if no_interval else ""
    return (f"Inconclusive ({', '.join(labels)}): within noise, but the 95 % interval still allows a change of "
            f"{bound:g} % or more{none}, so the two are not shown equal either. More repetitions, or "
            "benchmarking each side again, narrow it.")


def inconclusive_json_line(metrics: Sequence[dict[str, Any]], threshold_pct: float) -> str:
    """`inconclusive_line` for comparisons as their JSON gives them (`runs compare`, its Markdown report)."""
    unclear = [m for m in metrics if m.get("inconclusive")]
    return inconclusive_line([metric_label(m["name"]) for m in unclear], threshold_pct,
                             no_interval=any(m.get("ci_low_pct") is None for m in unclear))


def _flag_text(value: str | None) -> str:
    return "(absent)" if value is None else (f"`{value}`" if value else "on")


REP_CSV_FIELDS = ("run_id", "label", "seq", "prompt_tokens", "depth", "rep", "client", "cache_n", "prompt_n",
                  "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second",
                  "draft_n", "draft_n_accepted", "draft_steps", "draft_accepted_per_pos", "ttft_ms", "latency_ms",
                  "other_cpu_pct", "error")


def rep_rows(run: BenchRun) -> list[dict[str, Any]]:
    """Flat rows (one per repetition) for CSV export."""
    return [{"run_id": run.id, "label": run.label, **{k: getattr(r, k) for k in REP_CSV_FIELDS[2:]},
             "draft_accepted_per_pos": " ".join(map(str, r.draft_accepted_per_pos))}  # positions 0, 1, …
            for r in run.reps]


def run_to_json(run: BenchRun) -> dict[str, Any]:
    """A run as the CLI and the JSON export print it: identity, spec, repetitions, summary, llama-bench."""
    return {"run_id": run.id, "label": run.label, "status": run.status, "error": run.error,
            "started": run.started_at.isoformat() if run.started_at else None,
            "finished": run.finished_at.isoformat() if run.finished_at else None,
            "model": run.model_path, "model_size": run.model_size, "model_hash": run.model_hash,
            "binary": run.binary_path, "binary_version": run.binary_version,
            "binary_backends": list(run.binary_backends), "devices": run.devices,
            "build": run.build.model_dump(mode="json") if run.build else None, "notes": list(run.notes),
            "profile_version_id": run.profile_version_id, "group_id": run.group_id, "sweep_value": run.sweep_value,
            "spec": run.spec.model_dump(mode="json"), "server_argv": list(run.server_argv),
            "memory_predicted_mib": run.memory_predicted_mib, "memory_measured_mib": run.memory_measured_mib,
            "reps": [r.to_json() for r in run.reps], "summary": run_summary(run),
            "llama_bench": [lb.raw or lb.model_dump(mode="json") for lb in run.llama_bench],
            "llama_bench_skipped": list(run.llama_bench_skipped), "llama_bench_error": run.llama_bench_error}


@dataclass(frozen=True)
class RunPrediction:
    """The speed model's prediction for one prompt length of a run, at the depths its measurement had: prefill
    after `depth` cells, generation half-way through its generated tokens (as services.speed.run_measurements
    turns the run into a measurement)."""

    prompt_tokens: int
    gen: Prediction
    prefill: Prediction


def _pct(measured: float, predicted: float | None) -> str:
    """' (measured 10 % above it)' / ' (measured 96 % below it)' ('' within 0.5 %)."""
    if not predicted:
        return ""
    d = 100 * (measured - predicted) / predicted
    return "" if abs(d) < 0.5 else f" (measured {abs(d):.0f} % {'above' if d > 0 else 'below'} it)"


def speed_vs_prediction(run: BenchRun, predictions: list[RunPrediction]) -> list[dict[str, Any]]:
    """Measured beside predicted, per prompt length, and generation's share of the roofline: "prompt 512: gen
    78.0 t/s = 91 % of what these devices' bandwidth allows (roofline 86 t/s); predicted 71.2 t/s (measured 10 %
    above it); prefill 900 t/s, predicted 950 t/s (measured 5 % below it)". Each: {prompt_tokens, gen_tps, gen_predicted, roofline_tps, roofline_pct,
    prefill_tps, prefill_predicted, text}; a prompt length without a measurement is left out."""
    samples = metric_samples(run)
    out = []
    for p in predictions:
        gen_s = summarize(list(samples[f"gen_tps@{p.prompt_tokens}"].values)) \
            if f"gen_tps@{p.prompt_tokens}" in samples else None
        pre_s = summarize(list(samples[f"prefill_tps@{p.prompt_tokens}"].values)) \
            if f"prefill_tps@{p.prompt_tokens}" in samples else None
        if gen_s is None and pre_s is None:
            continue
        gen, pre = (gen_s.median if gen_s else None), (pre_s.median if pre_s else None)
        roof = p.gen.roofline_tps
        share = 100.0 * gen / roof if gen and roof else None
        parts = []
        if gen is not None:
            parts.append(f"gen {gen:.1f} t/s" + (f" = {share:.0f} % of what these devices' bandwidth allows "
                                                 f"(roofline {roof:.1f} t/s)" if share is not None else ""))
            parts.append(f"predicted {p.gen.gen_tps:.1f} t/s{_pct(gen, p.gen.gen_tps)}" if p.gen.gen_tps
                         else "not predicted (" + ", ".join(p.gen.unknown) + " has no rate)")
        if pre is not None and p.prefill.prefill_tps:
            parts.append(f"prefill {pre:.0f} t/s, predicted {p.prefill.prefill_tps:.0f} t/s"
                         f"{_pct(pre, p.prefill.prefill_tps)}")
        out.append({"prompt_tokens": p.prompt_tokens, "gen_tps": gen, "gen_predicted": p.gen.gen_tps,
                    "roofline_tps": roof, "roofline_pct": share, "prefill_tps": pre,
                    "prefill_predicted": p.prefill.prefill_tps, "calibrated_on": p.gen.calibrated_on,
                    "expected_error": p.gen.error,
                    "text": f"prompt {p.prompt_tokens}: " + "; ".join(parts)})
    return out
