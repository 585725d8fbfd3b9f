"""Benchmark models: what to measure (BenchSpec) and what was measured (Repetition, BenchRun, RunGroup).

Pure and frozen: the runner (services/bench/runner.py) produces them, the store (store/runs.py) keeps and
returns them, the UI and CLI show them. Figures come from the server's own `timings` object; the
only client clocks kept are time to first token and total latency, which the server cannot see.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llm_tuner.core.build import BuildStamp

STATUSES = ("running", "complete", "incomplete", "failed", "cancelled")


class BenchSpec(BaseModel):
    """What one benchmark run measures.

    `warm_cache=False` (cold) sends every measured prompt with `cache_prompt: false`, so the server
    reprocesses it all (server-context.cpp: `n_past = 0`), and each repetition also uses a different
    slice of the text. `warm_cache=True` primes the cache with the prompt first, so the measured
    request processes only what is not cached (mostly generation). `depth` fills the context with
    that many tokens first (cached), then measures N new prompt tokens after it. `model`: for a router
    (llama-server without -m, with --models-dir/--models-preset), the model measured, sent as each request's
    `model`; the router loads it on demand (the first request waits for the load: use a warm-up).
    """

    model_config = ConfigDict(frozen=True)

    prompt_tokens: tuple[int, ...] = (512,)
    gen_tokens: int = 128
    reps: int = 3
    warmup: int = 1
    warm_cache: bool = False
    depth: int = 0
    clients: int = 1
    prompt_file: str | None = None
    llama_bench: bool = False
    model: str | None = None

    @field_validator("model")
    @classmethod
    def _model_name(cls, v: str | None) -> str | None:
        return (v.strip() or None) if v is not None else None

    @field_validator("prompt_tokens")
    @classmethod
    def _positive(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(n < 1 for n in v):
            raise ValueError("prompt lengths must be positive token counts")
        return tuple(v)

    @field_validator("reps", "clients")
    @classmethod
    def _at_least_one(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be at least 1")
        return v

    @field_validator("gen_tokens", "warmup", "depth")
    @classmethod
    def _not_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must not be negative")
        return v

    @property
    def n_requests(self) -> int:
        """Measured requests of the run (for progress): lengths × reps × clients, plus warm-ups."""
        return len(self.prompt_tokens) * (self.reps * self.clients + self.warmup)

    def describe(self) -> str:
        parts = [f"prompt {','.join(map(str, self.prompt_tokens))} tok", f"gen {self.gen_tokens} tok",
                 f"{self.reps} reps", f"warm-up {self.warmup}",
                 "warm cache" if self.warm_cache else "cold cache"]
        if self.depth:
            parts.append(f"depth {self.depth}")
        if self.clients > 1:
            parts.append(f"{self.clients} clients")
        if self.model:
            parts.insert(0, f"model {self.model}")
        return ", ".join(parts)


class DevicePeak(BaseModel):
    """Telemetry peaks of one device during one repetition (None: not measurable here).

    For the device "Host", `vram_used_mib` holds the server process's resident memory (RSS)."""

    model_config = ConfigDict(frozen=True)

    device: str
    vram_used_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    energy_j: float | None = None
    # a GPU slowed by power, heat or a hardware brake at some point of the request
    throttled: bool | None = None
    # NVML during the request: the temperature at its start, the lowest SM and memory clocks (a throttled GPU
    # drops them) and every clocks-event reason bit seen (nvmlClocksEventReason*, OR-ed)
    temp_start_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: int | None = None


class Repetition(BaseModel):
    """One measured request. `prompt_*`/`predicted_*`/`cache_n`/`draft_*` are the server's `timings`."""

    model_config = ConfigDict(frozen=True)

    run_id: int | None = None
    seq: int = 0  # order within the run
    prompt_tokens: int  # requested prompt length (the measured part, after `depth`)
    depth: int = 0
    rep: int = 0
    client: int = 0
    cache_n: int | None = None
    prompt_n: int | None = None
    prompt_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    predicted_per_second: float | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    # verification steps, from /metrics spec_decode_num_drafts_total (1 client)
    draft_steps: int | None = None
    # accepted tokens per draft position (0-based) during this request: the delta of /metrics
    # spec_decode_num_accepted_tokens_per_pos_total{position=p} (1 client; () when not measured)
    draft_accepted_per_pos: tuple[int, ...] = ()
    ttft_ms: float | None = None  # client clock: request sent -> first generated token received
    latency_ms: float | None = None  # client clock: request sent -> final event received
    peaks: tuple[DevicePeak, ...] = ()
    other_cpu_pct: float | None = None  # CPU used by other processes during the request (% of all cores)
    started_at: datetime | None = None
    error: str | None = None

    @property
    def acceptance(self) -> float | None:
        if not self.draft_n:
            return None
        return (self.draft_n_accepted or 0) / self.draft_n

    @property
    def mean_accepted_len(self) -> float | None:
        """Tokens per verification step, as llama-server logs it: 1 + accepted / steps."""
        if not self.draft_steps:
            return None
        return 1.0 + (self.draft_n_accepted or 0) / self.draft_steps

    @property
    def energy_per_token_j(self) -> float | None:
        joules = [p.energy_j for p in self.peaks if p.energy_j is not None]
        tokens = (self.prompt_n or 0) + (self.predicted_n or 0)
        return sum(joules) / tokens if joules and tokens else None

    def to_json(self) -> dict[str, Any]:
        d = self.model_dump(mode="json", exclude={"run_id"})
        d["acceptance"] = self.acceptance
        d["mean_accepted_len"] = self.mean_accepted_len
        return d


class LlamaBenchResult(BaseModel):
    """One llama-bench test (its JSON object), reduced to what comparisons need."""

    model_config = ConfigDict(frozen=True)

    n_prompt: int
    n_gen: int
    n_depth: int = 0
    avg_ts: float
    stddev_ts: float | None = None
    samples_ts: tuple[float, ...] = ()
    raw: dict[str, Any] = Field(default_factory=dict)

    @property
    def test(self) -> str:
        name = f"pp{self.n_prompt}" if self.n_gen == 0 else (
            f"tg{self.n_gen}" if self.n_prompt == 0 else f"pp{self.n_prompt}+tg{self.n_gen}")
        return name + (f" @ d{self.n_depth}" if self.n_depth else "")


class BenchRun(BaseModel):
    """One benchmark run as stored: identity of what ran, the spec, status and its repetitions."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    group_id: int | None = None
    label: str = ""  # profile name (or "demo (default flags)")
    profile_version_id: int | None = None
    server_argv: tuple[str, ...] = ()  # llama-server arguments without the binary
    server_env: dict[str, str] = Field(default_factory=dict)
    attached_url: str | None = None
    model_path: str | None = None
    model_size: int | None = None
    model_mtime: float | None = None
    model_hash: str | None = None  # sha256 of the first MiB (the GGUF header and metadata)
    binary_path: str | None = None
    binary_version: str | None = None
    binary_backends: tuple[str, ...] = ()
    build: BuildStamp | None = None  # which build (file + --help hashes, package) and GPU driver ran it
    devices: list[dict[str, Any]] = Field(default_factory=list)  # inventory snapshot
    spec: BenchSpec = BenchSpec()
    status: str = "running"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    sweep_value: str | None = None
    memory_predicted_mib: dict[str, float] | None = None  # device -> MiB (from the memory plan)
    memory_measured_mib: dict[str, float] | None = None  # device -> peak MiB measured
    llama_bench: tuple[LlamaBenchResult, ...] = ()
    llama_bench_skipped: tuple[str, ...] = ()  # flags llama-bench lacks (listed, never dropped silently)
    llama_bench_error: str | None = None
    notes: tuple[str, ...] = ()  # how the run was made, in words (a cool-down wait before it, ...)
    reps: tuple[Repetition, ...] = ()

    @property
    def model_name(self) -> str:
        """The measured model: a router's model by its name there, else the file's name."""
        if self.spec.model:
            return self.spec.model
        return self.model_path.rsplit("/", 1)[-1] if self.model_path else "(attached server)"


class RunGroup(BaseModel):
    """A sweep: one parameter over values, one run per value."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    # among the groups of its kind (sweep 3), as people name it; None before it is stored
    number: int | None = None
    kind: str = "sweep"
    param: str = ""
    values: tuple[str, ...] = ()
    label: str = ""
    created_at: datetime | None = None
