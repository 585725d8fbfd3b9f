"""What a tune says: the memory-bandwidth figure, the Markdown report, the JSON the CLI prints.

Memory-bandwidth limit: generating one token reads every active weight once and the KV cache up to the
current depth, so a device cannot generate faster than bandwidth / bytes read per token. With a layer split
the devices work in turn, so the limit is 1 / Σ(bytes_i / bandwidth_i). The bandwidth is NVML's memory clock
× bus width when the caller has it, else the vendor's published figure for the GPU model (PUBLISHED_GBPS);
a CPU's is not known here, so a tune whose weights sit largely in host memory says "unknown".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_tuner.core.bench_report import verdict_cell
from llm_tuner.core.cmdline import render_shell
from llm_tuner.core.tune.model import BASELINE_KEPT, NOT_MEASURED, Trial, TuneResult
from llm_tuner.core.tune.prune import trial_prediction
from llm_tuner.core.tune.trial_plot import TITLE, trial_plot_svg

# Published memory bandwidth (GB/s, vendor spec sheets), matched as lower-case substrings of the device's
# description, longest match first.
PUBLISHED_GBPS = {
    "h200": 4800.0, "h100 sxm": 3350.0, "h100 pcie": 2000.0, "h100": 3350.0, "a100-sxm4-80gb": 2039.0,
    "a100 80gb pcie": 1935.0, "a100": 1555.0, "l40s": 864.0, "l4": 300.0, "rtx 5090": 1792.0,
    "rtx 4090 laptop": 576.0, "rtx 4090": 1008.0, "rtx 4080": 716.8, "rtx 3090": 936.2, "rtx a6000": 768.0,
    "rx 7900 xtx": 960.0, "7900 xtx": 960.0, "mi300x": 5300.0, "mi250x": 3277.0,
}
HOST_SHARE_UNKNOWN = 0.10  # weights beyond this share in host memory: the CPU's bandwidth decides, unknown here


def published_gbps(description: str) -> float | None:
    d = (description or "").lower()
    for key in sorted(PUBLISHED_GBPS, key=len, reverse=True):
        if key in d:
            return PUBLISHED_GBPS[key]
    return None


def bandwidth_figure(devices: list[dict[str, Any]], gen_tps: float | None,
                     measured_gbps: dict[str, float] | None = None) -> dict[str, Any] | None:
    """How close generation is to the memory-bandwidth limit.

    `devices`: [{name, description, bytes}] with the bytes each device reads per generated token (its active
    weights and its KV cache at the measured depth); 'Host' is the CPU. Returns {bytes_per_token, limit_tps,
    pct, devices: [{name, gbps, source}], text}; pct None when a bandwidth is unknown."""
    if not devices or not gen_tps:
        return None
    total = sum(d["bytes"] for d in devices)
    if total <= 0:
        return None
    rows, seconds, unknown = [], 0.0, []
    host_bytes = sum(d["bytes"] for d in devices if d["name"] == "Host")
    gpu_devices = [d for d in devices if d["name"] != "Host"]
    counted = gpu_devices if gpu_devices and host_bytes / total <= HOST_SHARE_UNKNOWN else devices
    for d in counted:
        gbps, source = (measured_gbps or {}).get(d["name"]), "NVML (memory clock × bus width)"
        if gbps is None:
            gbps, source = published_gbps(d.get("description", "")), "published figure"
        if gbps is None:
            unknown.append(d["name"])
            source = "unknown"
        else:
            seconds += d["bytes"] / (gbps * 1e9)
        rows.append({"name": d["name"], "gbps": gbps, "source": source, "bytes": d["bytes"]})
    gib = total / 2**30
    if unknown or seconds <= 0:
        return {"bytes_per_token": total, "limit_tps": None, "pct": None, "devices": rows,
                "text": f"{gib:.2f} GiB read per generated token; memory bandwidth of "
                        f"{', '.join(unknown) or 'the devices'} unknown: no limit computed"}
    limit = 1.0 / seconds
    pct = 100.0 * gen_tps / limit
    return {"bytes_per_token": total, "limit_tps": limit, "pct": pct, "devices": rows,
            "text": f"{gen_tps:.1f} t/s is {pct:.0f}% of the memory-bandwidth limit ({limit:.1f} t/s: "
                    f"{gib:.2f} GiB read per token)"}


def trial_json(trial: Trial) -> dict[str, Any]:
    return {"type": "trial", **trial.model_dump(mode="json")}


def result_json(result: TuneResult) -> dict[str, Any]:
    d = result.model_dump(mode="json")
    d["trials"] = [t.model_dump(mode="json") for t in result.trials]
    return {"type": "result", **d}


def _fmt(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _values(values: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={'(absent)' if v is None else v}" for k, v in values.items()) or "(baseline)"


def tune_report_markdown(result: TuneResult, plots: Sequence[tuple[str, str]] = (), *, objective: str = "",
                         label: str = "") -> str:
    """The tune as a Markdown document: verdict, changed flags, per-metric comparison, quality, bandwidth,
    every trial (pruned and failed included, with their reasons) and the plots given as (title, file)."""
    lines = [f"# Tune {result.tune_number or result.tune_id or ''} {label}".rstrip(), ""]
    if objective:
        lines += [f"Objective: {objective}", ""]
    kept = tuple(result.winner_argv) == tuple(result.baseline_argv)
    if result.verdict == NOT_MEASURED:
        lines.append(f"**Verdict: {result.verdict}: no candidate ran within the budget; the baseline is kept.**")
    elif result.verdict == BASELINE_KEPT:
        lines.append(f"**Verdict: {result.verdict}: no candidate beat the baseline while racing.**")
    elif kept:
        lines.append(f"**Verdict: {result.verdict}: no change better than noise; the baseline is kept.**")
    else:
        lines.append(f"**Verdict: {result.verdict}: the winner beats the baseline.**")
    if result.note:
        lines += ["", result.note]
    lines += ["", "Baseline:", "", "    " + render_shell(list(result.baseline_argv)), ""]
    if result.hardware:
        lines += list(result.hardware)
    if not kept:
        lines += ["Winner:", "", "    " + render_shell(list(result.winner_argv)), ""]
    if result.changed_flags:
        lines += ["| flag | baseline | winner |", "|---|---|---|"]
        lines += [f"| {c['flag']} | {c.get('a') if c.get('a') is not None else '(absent)'} | "
                  f"{c.get('b') if c.get('b') is not None else '(absent)'} |" for c in result.changed_flags]
        lines.append("")
    if result.comparisons:
        title = ("Comparison on the racing runs (winner against baseline; no fresh start)" if result.on_screening
                 else "Final comparison (interleaved, winner against baseline)")
        lines += [f"## {title}", "",
                  "| metric | baseline median | winner median | Δ% | 95% CI | verdict |", "|---|---|---|---|---|---|"]
        for c in result.comparisons:
            a, b = c.get("a") or {}, c.get("b") or {}
            ci = ("–" if c.get("ci_low_pct") is None else f"{c['ci_low_pct']:+.1f} … {c['ci_high_pct']:+.1f}")
            lines.append(f"| {c['name']} | {_fmt(a.get('median'), 2)} (n={a.get('n', 0)}) | "
                         f"{_fmt(b.get('median'), 2)} (n={b.get('n', 0)}) | "
                         f"{'–' if c.get('delta_pct') is None else format(c['delta_pct'], '+.1f')} | {ci} | "
                         f"{verdict_cell(c)} |")
        lines.append("")
    if result.quality:
        lines += ["## Quality", ""] + [f"- {k}: {v}" for k, v in result.quality.items()] + [""]
    if result.bandwidth:
        lines += ["## Memory bandwidth", "", result.bandwidth.get("text", ""), ""]
    if result.trials:
        lines += ["## Trials", "", "Predicted: the speed model's score before the candidate started (core.speed, "
                  "with its expected error); measured vs predicted: how far the measurement was from it.", "",
                  "| # | knob | values | status | score | predicted | measured vs predicted | run | note |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for t in result.trials:
            note = "; ".join(x for x in (t.reason, f"flagged: {t.flagged}" if t.flagged else "") if x)
            pred, vs = trial_prediction(t.predicted, t.score)
            lines.append(f"| {t.seq} | {t.knob or 'baseline'} | {_values(t.values)} | {t.status} | "
                         f"{_fmt(t.score, 2)} | {pred} | {vs} | {t.run_id or '–'} | {note.replace('|', '/')} |")
        lines.append("")
    for title, path in plots:
        lines += [f"![{title}]({path})", ""]
    return "\n".join(lines)


def tune_report_files(result: TuneResult, stem: str, *, objective: str = "", label: str = "",
                      y_label: str = "score", trials: list[Trial] | None = None) -> dict[str, str]:
    """The report as files to write side by side: `<stem>.md` and its plot `<stem>-trials.svg` (file name ->
    text). `trials` default to the result's."""
    plot = f"{stem}-trials.svg"
    svg = trial_plot_svg(list(trials if trials is not None else result.trials), y_label)
    md = tune_report_markdown(result, [(TITLE, plot)], objective=objective, label=label)
    return {f"{stem}.md": md, plot: svg}
