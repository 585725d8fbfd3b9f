"""llama-server output (plain text and `--log-jsonl`) -> typed events.

Formats follow the build we test (llama.cpp common/log.cpp and tools/server; recorded samples in
tests/data/logs): plain lines are
`M.SS.mmm.uuu L <msg>`, JSONL lines are `{"type":"log","time":µs,"level":..,"msg":..}` or
`{"type":"fit_memory_breakdown","data":{...}}`. Slot lines carry `slot <func>: id N | task T | ...`.

`LogParser.feed(line)` returns every event one line yields: always a `LogLine` (for the console)
and, where the line means something, a typed event. Per-request timings span 4-5 lines
(prompt eval, eval, total, graphs reused, optional draft acceptance) and are handed out as one
`RequestTimings` when the slot releases its task. Memory lines (`-lv 4` buffer lines incl. the
recurrent-state RS buffer, the breakdown table and its JSONL form) are read by core.memory_log's one
parser. `classify_failure(lines)` turns the output of a server that failed to start into a message a
user can act on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.devices import DeviceIdLine, LlamaDevice, parse_device_info_line, parse_device_line
from llm_tuner.core.memory_log import (
    BreakdownRow,
    BufferLine,
    MemoryBreakdown,
    MemoryLineReader,
    breakdown_from_json,
)

LEVELS = {"I": "info", "W": "warn", "E": "error", "D": "debug"}


# --------------------------------------------------------------------------------------------- events
@dataclass(frozen=True)
class LogLine:
    """One line as the console shows it. `t_s`: seconds since the server's logger started."""

    level: str  # "info", "warn", "error", "debug", "cont", "output"
    text: str
    t_s: float | None = None


@dataclass(frozen=True)
class Loading:
    model_path: str


@dataclass(frozen=True)
class SlotsInitialized:
    n_slots: int
    n_ctx_slot: int
    kv_unified: bool


@dataclass(frozen=True)
class Loaded:
    pass


@dataclass(frozen=True)
class Listening:
    url: str


# The memory formats (buffer lines incl. recurrent state, the breakdown table, its JSONL form) have one
# parser, core.memory_log; these names stay importable from here.
MemoryRow = BreakdownRow
BufferSize = BufferLine  # a `-lv 4` buffer line: kind (model, kv, rs, compute, output) on a buffer, MiB


@dataclass(frozen=True)
class SlotSelected:
    slot: int
    how: str  # "id", "lcp", "lru"
    similarity: float | None = None


@dataclass(frozen=True)
class TaskStarted:
    slot: int
    task: int
    t_s: float | None = None


@dataclass(frozen=True)
class PromptProgress:
    slot: int
    task: int
    n_tokens: int
    progress: float


@dataclass(frozen=True)
class RequestTimings:
    """One finished request as the server logged it (its `timings`, rounded to 2 decimals).

    `cache_n` is derived: from the `-lv 4` prompt size when seen, else from the slot's token count
    at release (n_tokens = cache_n + prompt_n + predicted_n - 1); None when neither is known.
    `ttft_ms` is the server-side time to first token (prompt processing); `latency_ms` the total.
    """

    slot: int
    task: int
    prompt_n: int
    prompt_ms: float
    prompt_per_second: float
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float
    total_ms: float | None = None
    cache_n: int | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    draft_mean_len: float | None = None
    n_tokens: int | None = None
    truncated: bool | None = None
    t_start_s: float | None = None
    t_end_s: float | None = None
    model: str | None = None  # a router's model that served it (its instance's lines); None on a plain server

    @property
    def ttft_ms(self) -> float:
        return self.prompt_ms

    @property
    def latency_ms(self) -> float:
        return self.total_ms if self.total_ms is not None else self.prompt_ms + self.predicted_ms

    @property
    def draft_acceptance(self) -> float | None:
        if not self.draft_n:
            return None
        return (self.draft_n_accepted or 0) / self.draft_n

    def to_json(self) -> dict[str, Any]:
        """The server's own key names (plus ttft_ms and latency_ms)."""
        return {"slot": self.slot, "task": self.task, "cache_n": self.cache_n, "prompt_n": self.prompt_n,
                "prompt_ms": self.prompt_ms, "prompt_per_second": self.prompt_per_second,
                "predicted_n": self.predicted_n, "predicted_ms": self.predicted_ms,
                "predicted_per_second": self.predicted_per_second, "draft_n": self.draft_n,
                "draft_n_accepted": self.draft_n_accepted, "ttft_ms": self.ttft_ms,
                "latency_ms": self.latency_ms}


@dataclass(frozen=True)
class ServerError:
    """An error line (level E, or an unprefixed `error...` line)."""

    text: str


@dataclass(frozen=True)
class LoadFailed:
    """The server said it is exiting because it could not load the model or bind its socket."""

    text: str


@dataclass(frozen=True)
class DeviceListed:
    """One device of the server's own device list at start (`-lv 4`), with an RPC device's endpoint."""

    device: LlamaDevice



# DeviceIdLine (core.devices): a "using/skipping device" line with the device's PCI address
Event = (LogLine | Loading | SlotsInitialized | Loaded | Listening | MemoryBreakdown | BufferSize | SlotSelected
         | TaskStarted | PromptProgress | RequestTimings | ServerError | LoadFailed | DeviceIdLine | DeviceListed)


# --------------------------------------------------------------------------------------------- regexes
_PLAIN = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ([IWED]) (.*)$")
_SLOT = re.compile(r"^slot\s+(\S+): id\s+(-?\d+) \| task (-?\d+) \| (.*)$")
_LOADING = re.compile(r"load_model: loading model '(.*)'$")
_INIT = re.compile(r"load_model: initializing, n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'")
_LISTEN = re.compile(r"listening on (\S+)")
_PROMPT = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens \(\s*([\d.]+|inf|nan) ms per token,\s+"
                     r"([\d.]+|inf|nan) tokens per second\)")
_EVAL = re.compile(r"^\s*eval time =\s+([\d.]+) ms /\s+(\d+) tokens \(\s*([\d.]+|inf|nan) ms per token,\s+"
                   r"([\d.]+|inf|nan) tokens per second\)")
_TOTAL = re.compile(r"total time =\s+([\d.]+) ms /\s+(\d+) tokens")
_DRAFT = re.compile(r"draft acceptance = ([\d.]+|nan) \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([\d.]+|nan)")
_RELEASE = re.compile(r"stop processing: n_tokens = (\d+), truncated = (\d+)")
_NEW_PROMPT = re.compile(r"new prompt, n_ctx_slot = \d+, n_keep = \d+, task\.n_tokens = (\d+)")
_PROGRESS = re.compile(r"prompt processing, n_tokens = \s*(\d+), progress = ([\d.]+)")
_SEL_ID = re.compile(r"selected slot by id")
_SEL_LCP = re.compile(r"selected slot by LCP similarity, f_sim_best = ([\d.]+)")
_SEL_LRU = re.compile(r"selected slot by LRU")
# router mode: the router starts one llama-server per model and prefixes each instance's lines with its port
_CHILD = re.compile(r"^\[(\d+)\] (.*)$")
_SPAWN = re.compile(r"spawning server instance with name=(\S+) on port (\d+)")

_SYSTEM_INFO = re.compile(r"system_info: n_threads = (\d+) \(n_threads_batch = (\d+)\)")  # at -lv 4
_THREADPOOL = re.compile(r"llama threadpool init, n_threads = (\d+)")  # at the default verbosity


def threads_in_effect(lines: Iterable[str]) -> dict[str, str]:
    """The threads a server ran with: {"threads": "N"} from `llama threadpool init, n_threads = N` (the
    generation threads, printed at every verbosity), with "threads_batch" too where the verbose
    `system_info: n_threads = N (n_threads_batch = M) / C` line is there; {} when neither is."""
    out: dict[str, str] = {}
    for line in lines:
        if m := _SYSTEM_INFO.search(line):
            return {"threads": m.group(1), "threads_batch": m.group(2)}
        if not out and (m := _THREADPOOL.search(line)):
            out = {"threads": m.group(1)}
    return out


# -fa auto resolved (llama-context.cpp): to off with a warning (shown at every verbosity), to on with an INFO line
# that only -lv 4 shows; builds that resolve before creating the context print the result in the context's table
_FA_AUTO_OFF = re.compile(r"Flash Attention not supported, set to disabled|flash_attn is not compatible with")
_FA_AUTO_ON = re.compile(r"resolve_fused_ops: Flash Attention enabled")
_FA_CONTEXT = re.compile(r"llama_context: flash_attn\s+= (enabled|disabled)")


def flash_attn_in_effect(lines: Iterable[str]) -> str | None:
    """What a server left to `-fa auto` (the default) ran with: "on" or "off"; None when the log does not show
    a context created. At the default verbosity only "off" is printed (a warning), so a created context
    (`llama threadpool init`, printed after the context is made) without that warning ran with it on."""
    created = False
    for line in lines:
        if _FA_AUTO_OFF.search(line):
            return "off"
        if _FA_AUTO_ON.search(line):
            return "on"
        if m := _FA_CONTEXT.search(line):
            return "on" if m.group(1) == "enabled" else "off"
        created = created or bool(_THREADPOOL.search(line))
    return "on" if created else None


def _f(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


# --------------------------------------------------------------------------------------------- parser
@dataclass
class _Pending:
    slot: int
    task: int
    t_start_s: float | None = None
    n_prompt_total: int | None = None
    values: dict[str, Any] = field(default_factory=dict)


class LogParser:
    """Stateful: assembles multi-line records (timings, the text memory table). One per server run."""

    def __init__(self) -> None:
        self._pending: dict[int, _Pending] = {}  # by slot
        self._memory = MemoryLineReader()
        self.lines_seen = 0
        self._instances: dict[str, LogParser] = {}  # a router's model instances, by port
        self._names: dict[str, str] = {}  # port -> the model's name, from the router's "spawning" line

    # -- public ---------------------------------------------------------------------------------
    def feed(self, raw: str) -> list[Event]:
        """Every event this line yields (the first is always its LogLine unless the line is JSON data)."""
        self.lines_seen += 1
        raw = raw.rstrip("\r\n")
        if (child := _CHILD.match(raw)) is not None:
            return self._instance_line(child.group(1), child.group(2))
        if raw.startswith("{") and raw.endswith("}"):
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and "type" in obj:
                return self._feed_json(obj, raw)
        m = _PLAIN.match(raw)
        if m:
            t_s = int(m.group(1)) * 60 + int(m.group(2)) + int(m.group(3)) / 1e3 + int(m.group(4)) / 1e6
            return self._feed_msg(LEVELS[m.group(5)], m.group(6), t_s)
        level = "error" if raw.lower().startswith("error") else "output"
        return self._feed_msg(level, raw, None)

    def flush(self) -> list[Event]:
        """At process exit: requests whose release line never came (the server died) and an open table."""
        out: list[Event] = []
        out.extend(self._memory.close())
        for slot in list(self._pending):
            rec = self._finish(slot, None, None)
            if rec is not None:
                out.append(rec)
        for port, instance in self._instances.items():
            out.extend(replace(e, model=self._names.get(port)) for e in instance.flush()
                       if isinstance(e, RequestTimings))
        return out

    # -- internals ------------------------------------------------------------------------------
    def _instance_line(self, port: str, text: str) -> list[Event]:
        """A line of one of a router's model instances (`[port] line`): its own parser reads it; the console
        gets it named by its model, and its finished requests carry the model's name. The instance's other
        events (its load, its port, its slots) are not the router's: they are left out."""
        instance = self._instances.setdefault(port, LogParser())
        name = self._names.get(port)
        out: list[Event] = []
        for e in instance.feed(text):
            if isinstance(e, LogLine):
                out.append(replace(e, text=f"[{name or port}] {e.text}"))
            elif isinstance(e, RequestTimings):
                out.append(replace(e, model=name))
            elif isinstance(e, ServerError):
                out.append(e)
        return out

    def _feed_json(self, obj: dict[str, Any], raw: str) -> list[Event]:
        kind = obj.get("type")
        if kind == "log":
            t = obj.get("time")
            msg = str(obj.get("msg", "")).rstrip("\n")
            # a router's instance, its line wrapped in the router's
            if (child := _CHILD.match(msg)) is not None:
                return self._instance_line(child.group(1), child.group(2))
            return self._feed_msg(str(obj.get("level", "info")), msg, t / 1e6 if isinstance(t, int | float) else None)
        if kind == "fit_memory_breakdown":
            mb = breakdown_from_json(obj.get("data"))
            return [LogLine("debug", _summarize_breakdown(mb.rows)), mb]
        return [LogLine("debug", raw)]

    def _feed_msg(self, level: str, msg: str, t_s: float | None) -> list[Event]:
        out: list[Event] = [LogLine(level, msg, t_s)]
        out.extend(self._memory.feed(msg))  # buffer lines, the breakdown table (closed by the next line)
        m = _SLOT.match(msg)
        if m:
            out.extend(self._slot_line(int(m.group(2)), int(m.group(3)), m.group(4), t_s))
            return out
        if level == "error":
            out.append(ServerError(msg))
        if "common_memory_breakdown_print" in msg:
            return out
        if (m := _SPAWN.search(msg)) is not None:
            self._names[m.group(2)] = m.group(1)
        elif (m := _LOADING.search(msg)) is not None:
            out.append(Loading(m.group(1)))
        elif (m := _INIT.search(msg)) is not None:
            out.append(SlotsInitialized(int(m.group(1)), int(m.group(2)), m.group(3) == "true"))
        elif msg.endswith("llama_server: model loaded"):
            out.append(Loaded())
        elif "llama_server: listening on" in msg and (m := _LISTEN.search(msg)) is not None:
            out.append(Listening(m.group(1)))
        elif "exiting due to" in msg:
            out.append(LoadFailed(msg))
        elif "common_param:" in msg and (dev := parse_device_info_line(msg)) is not None:
            out.append(DeviceListed(dev))
        elif (d := parse_device_line(msg)) is not None:
            out.append(d)
        return out

    def _slot_line(self, slot: int, task: int, rest: str, t_s: float | None) -> list[Event]:
        out: list[Event] = []
        if task < 0:
            if lcp := _SEL_LCP.search(rest):
                out.append(SlotSelected(slot, "lcp", float(lcp.group(1))))
            elif _SEL_LRU.search(rest):
                out.append(SlotSelected(slot, "lru"))
            elif _SEL_ID.search(rest):
                out.append(SlotSelected(slot, "id"))
            return out
        if rest.startswith("processing task"):
            if slot in self._pending:  # previous task never released (should not happen)
                rec = self._finish(slot, None, None)
                if rec:
                    out.append(rec)
            self._pending[slot] = _Pending(slot, task, t_s)
            out.append(TaskStarted(slot, task, t_s))
            return out
        pend = self._pending.get(slot)
        if pend is None or pend.task != task:
            pend = self._pending[slot] = _Pending(slot, task, t_s)
        if (m := _NEW_PROMPT.search(rest)) is not None:
            pend.n_prompt_total = int(m.group(1))
        elif (m := _PROMPT.search(rest)) is not None:
            pend.values.update(prompt_ms=_f(m.group(1)), prompt_n=int(m.group(2)), prompt_per_second=_f(m.group(4)))
        elif (m := _EVAL.search(rest)) is not None:
            pend.values.update(predicted_ms=_f(m.group(1)), predicted_n=int(m.group(2)),
                               predicted_per_second=_f(m.group(4)))
        elif (m := _TOTAL.search(rest)) is not None:
            pend.values["total_ms"] = _f(m.group(1))
        elif (m := _DRAFT.search(rest)) is not None:
            pend.values.update(draft_n_accepted=int(m.group(2)), draft_n=int(m.group(3)),
                               draft_mean_len=_f(m.group(4)))
        elif (m := _PROGRESS.search(rest)) is not None:
            out.append(PromptProgress(slot, task, int(m.group(1)), _f(m.group(2))))
        elif (m := _RELEASE.search(rest)) is not None:
            rec = self._finish(slot, int(m.group(1)), bool(int(m.group(2))), t_s)
            if rec:
                out.append(rec)
        return out

    def _finish(self, slot: int, n_tokens: int | None, truncated: bool | None,
                t_s: float | None = None) -> RequestTimings | None:
        pend = self._pending.pop(slot, None)
        if pend is None or "prompt_n" not in pend.values or "predicted_n" not in pend.values:
            return None
        v = pend.values
        cache_n = None
        if pend.n_prompt_total is not None:
            cache_n = max(0, pend.n_prompt_total - v["prompt_n"])
        elif n_tokens is not None and not truncated:
            cache_n = max(0, n_tokens - v["prompt_n"] - v["predicted_n"] + 1)
        return RequestTimings(slot=slot, task=pend.task, cache_n=cache_n, n_tokens=n_tokens, truncated=truncated,
                              t_start_s=pend.t_start_s, t_end_s=t_s, **v)


def _summarize_breakdown(rows: Iterable[MemoryRow]) -> str:
    parts = [f"{r.name}: model {r.model_mib} + context {r.context_mib} + compute {r.compute_mib} MiB" for r in rows]
    return "memory breakdown: " + "; ".join(parts)


def parse_lines(lines: Iterable[str]) -> list[Event]:
    """Parse a whole recorded output (tests, attach mode with a log file)."""
    parser = LogParser()
    out: list[Event] = []
    for line in lines:
        out.extend(parser.feed(line))
    out.extend(parser.flush())
    return out


# --------------------------------------------------------------------------------------------- failures
@dataclass(frozen=True)
class Failure:
    """Why a server did not start, with what to do about it."""

    kind: str  # oom, unknown_flag, removed_flag, unknown_device, model_missing, model_unreadable,
    #            quant_v_needs_fa, port_in_use, bad_value, load_failed, killed, crashed, unknown
    message: str
    evidence: str  # the log line that decided it
    what: str | None = None  # for oom: "weights", "kv", "compute"
    device: str | None = None  # for oom: "CUDA0", "CPU", ...
    request_mib: float | None = None  # for oom: the allocation that failed
    free_mib: float | None = None  # for oom: what the device had free when the server started


_OOM_DEVICE = re.compile(r"allocating ([\d.]+) MiB on device (\d+): cudaMalloc failed")
_OOM_BUFT = re.compile(r"failed to allocate (\S+) buffer of size (\d+)")
_OOM_MALLOC = re.compile(r"insufficient memory \(attempted to allocate ([\d.]+) MB\)")
_UNABLE_BUF = re.compile(r"unable to allocate (\S+) buffer")
# The server's device list at start: `- CUDA0   : NVIDIA H200 (143155 MiB, 142629 MiB free)` (common_param
# device_info); the "using device" lines (llama_prepare_model_devices) are core.devices.parse_device_line's.
_DEV_FREE = re.compile(r"- (\S+)\s+: .*\(\d+ MiB, (\d+) MiB free\)")


# Signals that mean the program itself failed (llama.cpp, ggml or a GPU driver), not that someone ended it.
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP", "SIGSYS"})


def _log_tail(lines: Iterable[str], n: int = 5) -> list[str]:
    """The last `n` non-empty text lines of a log (parsed like any other, so JSONL lines read as text)."""
    texts: list[str] = []
    for raw in lines:
        for ev in LogParser().feed(raw):
            if isinstance(ev, LogLine) and ev.text.strip():
                texts.append(ev.text.strip())
    return texts[-n:]


def signal_failure(sig: str, lines: Iterable[str]) -> Failure:
    """Why a server that ended by signal `sig` (e.g. "SIGSEGV") ended. Only SIGKILL can be the out-of-memory
    killer (it sends nothing else); SIGSEGV, SIGABRT and their kind are a crash of llama.cpp or the driver,
    shown with the log's last lines; any other signal came from another program."""
    tail = _log_tail(lines)
    last = ("\nLast log lines:\n" + "\n".join(tail)) if tail else " The log has no lines."
    evidence = tail[-1] if tail else f"killed by {sig}"
    if sig == "SIGKILL":
        return Failure("killed", f"llama-server was killed ({sig}): by the system's out-of-memory killer (`dmesg` or "
                       "`journalctl -k` says so when it was) or by another program. Requests in flight are lost.",
                       evidence)
    if sig in CRASH_SIGNALS:
        return Failure("crashed", f"llama-server crashed ({sig}): a fault in llama.cpp or the GPU driver, not a lack "
                       "of memory. Requests in flight are lost; the log's last lines may say where." + last, evidence)
    return Failure("killed", f"llama-server was ended by {sig} from another program. Requests in flight are lost.",
                   evidence)


def classify_failure(lines: Iterable[str], exit_code: int | None = None) -> Failure | None:
    """Read a failed start's output and say what went wrong and what to do. None: nothing recognised."""
    texts: list[str] = []
    for raw in lines:
        for ev in LogParser().feed(raw):
            if isinstance(ev, LogLine):
                texts.append(ev.text)
    joined = "\n".join(texts)

    def first(pattern: str) -> str | None:
        for t in texts:
            if re.search(pattern, t):
                return t
        return None

    if (hit := first(r"error while handling argument .*the argument has been removed")) is not None:
        m = re.search(r'argument "([^"]+)": the argument has been removed\. (.*)$', hit)
        flag, hint = (m.group(1), m.group(2)) if m else ("?", "")
        return Failure("removed_flag", f"The flag {flag} was removed from this llama-server build: {hint}. "
                       "Edit the profile and use the new flag.", hit)
    if (hit := first(r"^error: invalid argument: ")) is not None:
        flag = hit.split("invalid argument:", 1)[1].strip()
        removed = flags.REMOVED.get(flags.normalize(flag))
        extra = f" This build replaced it: use {removed.replacement}." if removed is not None else ""
        return Failure("unknown_flag", f"This llama-server does not know the flag {flag}.{extra} Remove or "
                       "replace it in the profile (the flag list comes from the binary's --help).", hit)
    if (hit := first(r'error while handling argument "[^"]+": invalid device: ')) is not None:
        dev = hit.rsplit("invalid device:", 1)[1].strip()
        return Failure("unknown_device", f"This llama-server has no device named {dev}. Check the device list "
                       "(llama-server --list-devices) and whether the binary was built with that backend.", hit)
    if (hit := first(r"^error while handling (argument|environment variable)")) is not None:
        return Failure("bad_value", f"llama-server rejected a setting: {hit}. Fix the value in the profile.", hit)
    if (hit := first(r"couldn't bind HTTP server socket")) is not None:
        m = re.search(r"hostname: (\S+), port: (\d+)", hit)
        where = f"{m.group(1)}:{m.group(2)}" if m else "the chosen address"
        return Failure("port_in_use", f"Port {where} is already taken (another server is running there?). "
                       "Stop that server or choose another port.", hit)
    if (hit := first(r"quantized V cache requires flash_attn")) is not None:
        return Failure("quant_v_needs_fa", "A quantized V cache (-ctv) needs flash attention: set -fa on or "
                       "auto, or use -ctv f16.", hit)
    if (hit := first(r"failed to open GGUF file")) is not None:
        m = re.search(r"failed to open GGUF file '(.*)' \((.*)\)", hit)
        path, why = (m.group(1), m.group(2)) if m else ("?", "")
        kind = "model_missing" if "No such file" in why else "model_unreadable"
        verb = "does not exist" if kind == "model_missing" else f"cannot be read ({why})"
        return Failure(kind, f"The model file {path} {verb}. Pick the file again in the profile.", hit)
    if (hit := first(r"gguf_init_from_file.*(invalid magic|failed to read|tensor .* data is not within)")) is not None:
        return Failure("model_unreadable", "The model file is not a valid GGUF (damaged or incomplete "
                       f"download?): {hit}", hit)
    oom = _classify_oom(texts)
    if oom is not None:
        return oom
    if (hit := first(r"exiting due to|failed to load model|failed to create.context")) is not None:
        errs = [t for t in texts if t.startswith(("E ",)) or "error" in t.lower()]
        return Failure("load_failed", "llama-server could not load the model: "
                                      f"{errs[0] if errs else hit}", hit)
    if exit_code not in (None, 0):
        tail = texts[-1] if texts else "(no output)"
        return Failure("unknown", f"llama-server exited with code {exit_code}: {tail}", tail)
    del joined
    return None


def _classify_oom(texts: list[str]) -> Failure | None:
    evidence = None
    device = None
    what = None
    request_mib = None
    free: dict[str, float] = {}
    for t in texts:
        if (m := _DEV_FREE.search(t)) is not None:
            free[m.group(1)] = float(m.group(2))
        elif (d := parse_device_line(t)) is not None and d.free_mib is not None:
            free[d.name] = float(d.free_mib)
        if (m := _OOM_DEVICE.search(t)) is not None:
            evidence = evidence or t
            device = device or f"CUDA{m.group(2)}"
            request_mib = request_mib or float(m.group(1))
        elif (m := _OOM_BUFT.search(t)) is not None and "failed to allocate" in t:
            evidence = evidence or t
            device = device or m.group(1)
            request_mib = request_mib or int(m.group(2)) / 2**20
        elif (m := _OOM_MALLOC.search(t)) is not None:
            evidence = evidence or t
            request_mib = request_mib or float(m.group(1))
        elif (m := _UNABLE_BUF.search(t)) is not None:
            evidence = evidence or t
            device = device or m.group(1)
            what = what or "weights"
        if "failed to allocate buffer for kv cache" in t:
            what = "kv"
            evidence = evidence or t
        elif "failed to allocate compute" in t or "graph_reserve: failed to allocate" in t:
            what = what or "compute"
            evidence = evidence or t
        elif "error loading model" in t and evidence is not None:
            what = what or "weights"
    if evidence is None:
        return None
    if device and device.upper().startswith("CPU"):
        device = "CPU"
    what = what or "weights"
    label = {"weights": "the model weights", "kv": "the KV cache", "compute": "the compute buffers"}[what]
    fix = {"weights": "offload fewer layers (-ngl), use a smaller quantization, or spread layers over more devices",
           "kv": "lower the context (-c) or the parallel slots (-np), or quantize the KV cache (-ctk/-ctv q8_0)",
           "compute": "lower the batch sizes (-b/-ub) or the context (-c)"}[what]
    on = f" on {device}" if device else ""
    free_mib = free.get(device) if device else None
    size = ""
    if request_mib is not None:
        size = f" ({request_mib:.0f} MiB"
        size += f"; {free_mib:.0f} MiB were free when the server started)" if free_mib is not None else ")"
    return Failure("oom", f"Out of memory allocating {label}{on}{size}. To fix: {fix}.", evidence, what=what,
                   device=device, request_mib=request_mib, free_mib=free_mib)


def with_cache_n(rec: RequestTimings, cache_n: int | None) -> RequestTimings:
    """A copy with `cache_n` set (attach mode learns it from /slots)."""
    return replace(rec, cache_n=cache_n)
