"""llama-server's HTTP answers as data: `/metrics` (Prometheus text), `/slots` and a router's `/models`
(JSON).

The one parser of each: the telemetry reader, the attach-mode request watcher and the benchmarks ask
here (services.client only fetches). Pure: text or decoded JSON in, data out.

`/metrics` (server started with `--metrics`) has counters and gauges named `llamacpp:<name>`, some of
them labelled (`llamacpp:<name>{position="0"} 12`: e.g. speculative decoding's accepted tokens per draft
position). parse_metrics keeps every series: an unlabelled one under its name without the prefix, a
labelled one under `name{label="value",...}` (labels sorted), so counter deltas work alike for both;
labelled() reads one family back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_tuner.core import flags

_PREFIX = "llamacpp:"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def series_key(name: str, labels: Mapping[str, str] | None = None) -> str:
    """The key parse_metrics uses for a series: `name` or `name{a="1",b="x"}` (labels sorted)."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


def _labels(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None
        out[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {series key: value}; the `llamacpp:` prefix is dropped (see series_key).

    Comment lines (# HELP, # TYPE) and lines that are not samples are skipped; NaN and ±Inf are kept.
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        name = m.group(1).removeprefix(_PREFIX)
        labels = _labels(m.group(2)) if m.group(2) else {}
        if labels is None:
            continue
        out[series_key(name, labels)] = value
    return out


def labelled(metrics: Mapping[str, float], name: str) -> list[tuple[dict[str, str], float]]:
    """Every series of one labelled family in parse_metrics' result: [(labels, value)], in key order."""
    out = []
    start = name + "{"
    for key in sorted(metrics):
        if key.startswith(start) and key.endswith("}"):
            labels = _labels(key[len(start):-1])
            if labels is not None:
                out.append((labels, metrics[key]))
    return out


@dataclass(frozen=True)
class SlotState:
    """One entry of `/slots`: a slot, its current task and its progress. None where the server omits it."""

    id: int | None
    task: int | None  # id_task: the task the slot holds (or last held)
    is_processing: bool
    n_ctx: int | None = None
    n_decoded: int | None = None  # tokens generated so far for the task (next_token[0].n_decoded)
    n_remain: int | None = None  # tokens still allowed (next_token[0].n_remain; -1: no limit)
    n_prompt_processed: int | None = None  # n_prompt_tokens_processed
    n_prompt_cache: int | None = None  # n_prompt_tokens_cache: prompt tokens reused from the cache
    # n_prompt_tokens: the tokens the slot holds. While it generates: the whole prompt + n_decoded; once idle,
    # the last task's prompt + its generated tokens - 1 (the last one is never fed back), so the generated
    # count of a finished task is (idle n_tokens) - (busy n_tokens - busy n_decoded) + 1 (checked on the real
    # server)
    n_tokens: int | None = None


def _int(x: object) -> int | None:
    """A whole number a database can keep (|x| < 2**63), else None: a lying server's 1e300 or NaN is no
    count."""
    if not isinstance(x, int | float) or isinstance(x, bool) or not math.isfinite(x) or abs(x) >= 2**63:
        return None
    return int(x)


def parse_slots(data: Iterable[Mapping[str, Any]] | None) -> list[SlotState]:
    """The decoded `/slots` JSON (a list of objects) -> SlotState per slot; non-objects are skipped."""
    out = []
    for s in data or ():
        if not isinstance(s, Mapping):
            continue
        nxt = s.get("next_token")
        nt = nxt[0] if isinstance(nxt, list) and nxt and isinstance(nxt[0], Mapping) else (
            nxt if isinstance(nxt, Mapping) else {})
        out.append(SlotState(
            id=_int(s.get("id")), task=_int(s.get("id_task")), is_processing=bool(s.get("is_processing")),
            n_ctx=_int(s.get("n_ctx")), n_decoded=_int(nt.get("n_decoded")),
            n_remain=_int(nt.get("n_remain")),
            n_prompt_processed=_int(s.get("n_prompt_tokens_processed")),
            n_prompt_cache=_int(s.get("n_prompt_tokens_cache")), n_tokens=_int(s.get("n_prompt_tokens"))))
    return out


@dataclass(frozen=True)
class RouterModel:
    """One model a router (llama-server without -m, with --models-dir/--models-preset) knows, from `GET
    /models`.

    `status`: the router's word for it ("unloaded", "loading", "loaded", ...); `source`: where the router
    found it ("models_dir", "preset", ...); `path`: the GGUF file its instance loads (the `--model` of its
    command line)."""

    id: str
    status: str
    source: str | None = None
    path: str | None = None
    args: tuple[str, ...] = ()  # its instance's command line as the router renders it (binary first)
    failed: bool = False  # its last instance exited with an error (the router's `status.failed`)

    @property
    def loaded(self) -> bool:
        return self.status == "loaded"


def parse_router_models(data: Mapping[str, Any] | None) -> list[RouterModel]:
    """The decoded `GET /models` JSON of a router -> RouterModel per entry of `data` (sorted by id). The
    router answers `{"data": [{"id", "status": {"value", "args": [...]}, "source", ...}], "object": "list"}`
    (checked on the embedded build); entries without a text id are skipped. A plain server's answer (no
    `status`) reads as "loaded": it serves its one model."""
    out = []
    entries = data.get("data") if isinstance(data, Mapping) else None
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, Mapping) or not isinstance(e.get("id"), str) or not e["id"]:
            continue
        st = e.get("status")
        value = st.get("value") if isinstance(st, Mapping) else None
        args = st.get("args") if isinstance(st, Mapping) else None
        path = None
        if isinstance(args, list):
            path = flags.value_of([str(a) for a in args], "model")
        out.append(RouterModel(e["id"], value if isinstance(value, str) else "loaded",
                               e.get("source") if isinstance(e.get("source"), str) else None,
                               path if isinstance(path, str) else None,
                               tuple(str(a) for a in args) if isinstance(args, list) else (),
                               isinstance(st, Mapping) and st.get("failed") is True))
    return sorted(out, key=lambda m: m.id)
