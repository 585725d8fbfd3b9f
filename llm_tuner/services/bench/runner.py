"""The benchmark runner: a real llama-server, real requests, each repetition stored as it finishes."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from llm_tuner.core import flags
from llm_tuner.core.bench_report import draft_counter_deltas
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition, RunGroup
from llm_tuner.core.build import BuildStamp
from llm_tuner.core.cmdline import FlagCatalog, parse_help, profile_to_argv, respell
from llm_tuner.core.profile import LaunchProfile, SavedProfile
from llm_tuner.core.server_endpoints import parse_metrics
from llm_tuner.core.session import implausible_timings, server_timings
from llm_tuner.core.settings import Settings
from llm_tuner.services import binaries, device_ids
from llm_tuner.services.bench.errors import BenchCancelled, BenchError
from llm_tuner.services.bench.group import GroupStep, about_left, run_group
from llm_tuner.services.bench.heat import CoolDown
from llm_tuner.services.bench.llama_bench import (
    argv_model,
    model_identity,
    parse_llama_bench_json,
    set_flag,
    translate_to_llama_bench,
)
from llm_tuner.services.bench.memory import predict_memory
from llm_tuner.services.bench.meters import OtherCpuMeter, PeakTracker, TelemetrySource
from llm_tuner.services.bench.prompts import PromptBuilder, prompt_texts
from llm_tuner.services.bench.stall import DEFAULT_STALL_S, StallWatch
from llm_tuner.services.bench.target import CancelFn, ProgressFn, ServerTarget
from llm_tuner.services.client import LlamaClient, ServerError
from llm_tuner.services.launch import free_port
from llm_tuner.services.process import child_env
from llm_tuner.services.rpc import run_devices
from llm_tuner.services.server import ServerProcess
from llm_tuner.services.telemetry.host import machine_record
from llm_tuner.store.db import StorageFullError
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunDeleted, RunRepository

# bench --url: no whole answer to /health at all for this long is a frozen server or none (a load answers 503)
ATTACHED_UNANSWERED_S = 10.0
log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# -- the runner ---------------------------------------------------------------------------------

def scrape_metrics(client: LlamaClient) -> dict[str, float] | None:
    """The server's Prometheus series through the one /metrics parser (core.server_endpoints: labelled
    series kept as `name{label="v"}`); None when /metrics is off."""
    try:
        return parse_metrics(client.metrics_text())
    except Exception:  # noqa: BLE001 - started without --metrics, or an older server
        return None


@dataclass
class _Eta:
    total: int
    done: int = 0
    t0: float = field(default_factory=time.monotonic)

    def text(self) -> str:
        if not self.done:
            return "estimating time left…"
        return about_left((time.monotonic() - self.t0) / self.done * (self.total - self.done))


@dataclass(frozen=True)
class RunOutcome:
    """What BenchRunner.run hands back: the stored run, the output lines of the server it started (after it
    stopped; () for an attached server) and what the run's probe returned (None: no probe, or the server never
    became ready). The lines are for callers that read the log (the tune's defaults and out-of-memory retries)."""

    run: BenchRun
    lines: tuple[str, ...] = ()
    probe: object | None = None


def _client_key(target: ServerTarget) -> str | None:
    """The key requests carry: the target's own, else the first one the launch gives the server."""
    if target.api_key or target.attached_url:
        return target.api_key
    _rest, env = flags.secrets_to_env(target.argv, target.env)
    keys = flags.api_keys(env)
    return keys[0] if keys else None


class BenchRunner:
    """Runs BenchSpecs against llama-server and stores every repetition as it finishes."""

    def __init__(self, repo: RunRepository, *, settings: Settings | None = None,
                 telemetry: TelemetrySource | None = None, devices: list[dict[str, Any]] | None = None, ready_timeout_s: float = 300.0,
                 predict_memory: bool = True, on_server_line: Callable[[str], None] | None = None,
                 stall_s: float = DEFAULT_STALL_S) -> None:
        self.repo = repo
        self.stall_s = stall_s  # the server we started shows no progress this long while we wait on it: run ends
        self._stall: StallWatch | None = None
        self.on_server_line = on_server_line  # each output line of the server a run starts (its thread)
        self.settings = settings
        self.telemetry = telemetry
        self.devices = devices or []  # the inventory's GPUs (JSON); the machine's own entry is added to each run
        self._machine: list[dict[str, Any]] | None = None
        self.ready_timeout_s = ready_timeout_s
        self.predict_memory = predict_memory
        self._binary_cache: dict[str, tuple[Path, str | None, tuple[str, ...]]] = {}
        self._catalogs: dict[str, FlagCatalog | None] = {}
        self._stamps: dict[str, BuildStamp | None] = {}
        self.run_notes: list[str] = []  # said in the next run's notes (a cool-down wait before it); then cleared
        self.heat_gate = True  # A/Bs wait for the GPUs to cool back to where they began (default_cool_down)
        self.cool_down: CoolDown | None = None  # the gate every run waits at first (heat_gated)
        self.current_process: ServerProcess | None = None  # the server of the run in progress

    def _machine_entry(self) -> list[dict[str, Any]]:
        """This machine (CPU, RAM, OS) for each run's record, read once (core.hardware: reports name it)."""
        if self._machine is None:
            try:
                self._machine = [machine_record()]
            except Exception:  # noqa: BLE001 - a run is measured without it; its report says "not recorded"
                self._machine = []
        return list(self._machine)

    # -- server lifecycle ------------------------------------------------------------------------
    def _binary(self, override: str | None = None) -> tuple[Path, str | None, tuple[str, ...]]:
        loc: binaries.BinaryLocation | None
        if override:
            loc = binaries.BinaryLocation(binaries.SERVER, Path(override), "profile")
            binaries.require_trusted(loc.path, self.settings)  # a profile's program runs once confirmed
            binaries.check_executable(loc.path)
        else:
            loc = binaries.locate(binaries.SERVER, self.settings)
        if loc is None:
            raise BenchError("llama-server not found: set its path in Settings or install the built-in one")
        key = str(loc.path)
        if key not in self._binary_cache:
            try:
                version, _commit, _built = binaries.read_version(loc.path)
            except binaries.BinaryError:
                version = None
            self._binary_cache[key] = (loc.path, version, binaries.backends_of(loc.path, []))
        return self._binary_cache[key]

    def _stamp(self, binary: Path | None) -> BuildStamp | None:
        """The build stamp of the run's llama-server (cached per path); None for an attached server."""
        if binary is None:
            return None
        if str(binary) not in self._stamps:
            self._stamps[str(binary)] = binaries.build_stamp(binary, self.settings)
        return self._stamps[str(binary)]

    def _catalog(self, binary: Path) -> FlagCatalog | None:
        """The flags this binary's `--help` lists (cached per path); None when it cannot be read."""
        key = str(binary)
        if key not in self._catalogs:
            try:
                self._catalogs[key] = parse_help(binaries.read_help(binary))
            except (binaries.BinaryError, OSError, ValueError):
                self._catalogs[key] = None
        return self._catalogs[key]

    def _start(self, target: ServerTarget, binary: Path) -> tuple[ServerProcess, str]:
        argv = respell(target.argv, self._catalog(binary))  # each flag as this binary spells it
        port = free_port()
        argv = flags.without(argv, "host", "port") + flags.argv_for("host", "127.0.0.1") + flags.argv_for(
            "port", str(port))
        if not flags.has(flags.effective_argv(argv, target.env), "metrics"):
            argv += flags.argv_for("metrics")
        env, _dropped = child_env(target.env)
        argv, env = flags.secrets_to_env(argv, env)  # secrets in the environment, not in `ps`
        proc = ServerProcess([str(binary), *argv], env, on_line=self._on_line)
        proc.start()
        return proc, f"http://127.0.0.1:{port}"

    def _on_line(self, line: str) -> None:
        if self._stall is not None:
            self._stall.progress()
        if self.on_server_line is not None:
            self.on_server_line(line)

    def _waiting(self) -> contextlib.AbstractContextManager[None]:
        """The context of a wait on the run's own server (its load, a request): the stall watch counts then."""
        return self._stall.waiting() if self._stall is not None else contextlib.nullcontext()

    def _progress(self) -> None:
        if self._stall is not None:
            self._stall.progress()

    def serve(self, target: ServerTarget) -> tuple[ServerProcess, str]:
        """Start the target's server the way a run does (its binary, flags respelled, secrets in the
        environment) for a short check of its output; the caller stops it. Returns the process and its URL."""
        binary_path, _version, _backends = self._binary(target.binary)
        return self._start(target, binary_path)

    def default_cool_down(self) -> CoolDown | None:
        """The cool-down gate of an A/B on this machine: over the GPU telemetry when it reads temperatures and
        `heat_gate` is on; None (no waiting) otherwise."""
        return CoolDown.for_telemetry(self.telemetry) if self.heat_gate else None

    @contextlib.contextmanager
    def heat_gated(self, cool: CoolDown | None) -> Iterator[CoolDown | None]:
        """Every run started inside first waits for the GPUs to cool to where the gate began (the A/B's start),
        within its time limit, and says so in its notes (services.bench.heat). `cool` None: no gate."""
        before, self.cool_down = self.cool_down, cool
        if cool is not None:
            cool.begin()
        try:
            yield cool
        finally:
            self.cool_down = before

    # -- one run ----------------------------------------------------------------------------------
    def run(self, target: ServerTarget, spec: BenchSpec, *, progress: ProgressFn | None = None,
            cancelled: CancelFn | None = None, group_id: int | None = None, sweep_value: str | None = None,
            progress_span: tuple[float, float] = (0.0, 1.0),
            probe: Callable[[LlamaClient], object] | None = None) -> RunOutcome:
        """Measure `spec` on `target`; returns the stored run (its final status tells how it ended) with its
        server's output lines and the probe's answer (RunOutcome).

        `probe`, when given, is called with the ready server's client before the warm-up (a check that needs
        this server, e.g. the tune's output at --temp 0, without starting another)."""
        probed = None
        lines: tuple[str, ...] = ()
        progress = progress or (lambda f, t: None)
        cancelled = cancelled or (lambda: False)
        lo, hi = progress_span

        def report(frac: float | None, text: str) -> None:
            progress(None if frac is None else lo + (hi - lo) * frac, text)

        binary_path, version, backends = (None, None, ()) if target.attached_url else self._binary(target.binary)
        if self.cool_down is not None:
            note = self.cool_down.wait(cancelled, lambda text: report(0.0, text))
            if note:
                self.run_notes.append(note)
        ident = model_identity(argv_model(target.argv))
        rpc_devices = [] if target.attached_url else run_devices(list(target.argv), target.env, binary_path)
        run = BenchRun(label=target.label, profile_version_id=target.profile_version_id,
                       server_argv=tuple(flags.strip_secrets(target.argv, target.env)[0]),
                       server_env=flags.strip_secrets(target.argv, target.env)[1],
                       attached_url=target.attached_url, binary_path=str(binary_path) if binary_path else None,
                       binary_version=version, binary_backends=tuple(backends), build=self._stamp(binary_path),
                       notes=tuple(self.run_notes), devices=self._machine_entry() + self.devices + rpc_devices, spec=spec,
                       status="running", started_at=_now(), group_id=group_id, sweep_value=sweep_value,
                       memory_predicted_mib=target.memory_predicted_mib, **ident)
        run_id = self.repo.create_run(run)
        self.run_notes = []
        if target.memory_predicted_mib is None and target.attached_url is None and self.predict_memory:
            predicted = predict_memory(list(target.argv), binary_path, target.env)
            if predicted:
                self.repo.update_run(run_id, memory_predicted_mib=predicted)
        proc: ServerProcess | None = None
        status, error = "complete", None
        full = False
        measured_mib: dict[str, float] = {}
        extra: dict[str, Any] = {}
        try:
            if spec.llama_bench and spec.model:  # llama-bench loads a file given with -m; a router has none
                extra["llama_bench_error"] = "not run: llama-bench measures a model file, not a router's model"
            elif spec.llama_bench and target.attached_url is None:
                extra.update(self._llama_bench(target, spec, report, cancelled))
            if cancelled():
                raise BenchCancelled()
            if target.attached_url:
                url = target.attached_url
            else:
                assert binary_path is not None  # not attached: _binary found it, or raised
                report(0.0, "starting llama-server…")
                proc, url = self._start(target, binary_path)
                self.current_process = proc
                assert proc.pid is not None  # started
                self._stall = StallWatch(proc.pid, proc.kill, self.stall_s, url=url).__enter__()
            with LlamaClient(url, api_key=_client_key(target), model=spec.model) as client:
                if target.attached_url:
                    report(0.0, f"asking {url}/health …")
                with self._waiting():
                    health = client.wait_ready(timeout=self.ready_timeout_s, poll_s=0.2,
                                               alive=(proc.alive if proc else (lambda: True)),
                                               unanswered_s=ATTACHED_UNANSWERED_S if target.attached_url else None)
                if not health.ready and target.attached_url:
                    raise BenchError(f"the server at {url} gave no ready answer to /health ({health.message}) "
                                     + (f"within {ATTACHED_UNANSWERED_S:g} s: is it frozen, or not a llama-server? "
                                        if health.status_code is None else "")
                                     + "Check the URL and that the server runs")
                if not health.ready:
                    tail = "\n".join(list(proc.lines)[-15:]) if proc else ""
                    raise BenchError(f"llama-server did not become ready ({health.message}). "
                                     f"Check the profile's flags and the log:\n{tail}")
                if spec.model:
                    self._router_model(run_id, client, spec.model, report)
                if probe is not None:
                    report(0.0, "checking the output…")
                    with self._waiting():
                        probed = probe(client)
                report(0.0, "tokenizing prompt text…")
                with self._waiting():
                    builder = PromptBuilder(client, prompt_texts(spec.prompt_file))
                status, error = self._measure(run_id, client, builder, spec, report, cancelled, measured_mib,
                                              proc)
        except BenchCancelled:
            status, error = "cancelled", "cancelled by the user; finished repetitions kept"
        except StorageFullError:
            full = True
            raise  # nothing more can be stored: the caller says so in one line (finish_run below still tries)
        except RunDeleted as exc:  # another process deleted it: the caller gets a failed run that says so
            status, error = "failed", str(exc)
        except (BenchError, binaries.BinaryError, ServerError, OSError, httpx.HTTPError) as exc:
            said = f"the server's answer could not be read ({type(exc).__name__}: {exc})" if isinstance(
                exc, httpx.HTTPError) else str(exc)
            status, error = ("incomplete" if self._has_reps(run_id) else "failed"), said
        except Exception as exc:  # stored, then re-raised for the log
            log.exception("benchmark run %s failed", run_id)
            status, error = ("incomplete" if self._has_reps(run_id) else "failed"), f"{type(exc).__name__}: {exc}"
        finally:
            if self._stall is not None:
                self._stall.__exit__(None, None, None)
                if self._stall.reason is not None:  # the server was stuck: that is why the run ended
                    status = "incomplete" if self._has_reps(run_id) else "failed"
                    error = self._stall.reason
                self._stall = None
            if proc is not None:
                report(None, "stopping llama-server…")
                proc.stop()
                lines = tuple(proc.lines)
                device_ids.remember_from_log(binary_path, list(lines))  # PCI addresses for the inventory
                self.current_process = None
            try:
                self.repo.finish_run(run_id, status, error, memory_measured_mib=measured_mib or None, **extra)
            except StorageFullError:
                if not full:  # the first sign of a full disk; else the one already on its way
                    raise
        report(1.0, f"run {run_id} {status}")
        stored = self.repo.get_run(run_id)
        if stored is None:  # deleted meanwhile: what was measured is gone, the caller still learns how it ended
            stored = run.model_copy(update={"id": run_id, "status": "failed", "finished_at": _now(),
                                            "error": error if status == "failed" else str(RunDeleted(run_id))})
        return RunOutcome(stored, lines, probed)

    def _router_model(self, run_id: int, client: LlamaClient, name: str, report: ProgressFn) -> None:
        """A run of one model of a router: check the router knows it, and record its file (size, header hash)
        as the run's model; the router loads it with the first request."""
        with self._waiting():
            known = client.models()
        model = next((m for m in known if m.id == name), None)
        if model is None:
            raise BenchError(f"the server has no model named {name!r}; it has: "
                             + (", ".join(m.id for m in known) or "none"))
        if model.path:
            self.repo.update_run(run_id, **model_identity(model.path))
        report(0.0, f"model {name} ({model.status}; a router loads it with the first request)…")

    def _has_reps(self, run_id: int) -> bool:
        stored = self.repo.get_run(run_id)
        return bool(stored and stored.reps)

    def _measure(self, run_id: int, client: LlamaClient, builder: PromptBuilder, spec: BenchSpec,
                 report: ProgressFn, cancelled: CancelFn, measured_mib: dict[str, float],
                 proc: ServerProcess | None) -> tuple[str, str | None]:
        eta = _Eta(spec.n_requests)
        seq = 0
        failures: list[str] = []
        offset = 0
        stride = 7919  # a prime: successive repetitions start at unrelated places in the text
        tracker = PeakTracker(self.telemetry, server_pid=proc.pid if proc else None)
        for n in spec.prompt_tokens:
            for w in range(spec.warmup):
                self._check(cancelled, proc)
                report(eta.done / eta.total, f"warm-up {w + 1}/{spec.warmup} · prompt {n} tokens · {eta.text()}")
                offset += stride
                self._one(client, builder, spec, n, offset, 0, 0, cancelled)
                eta.done += 1
            for rep in range(spec.reps):
                self._check(cancelled, proc)
                report(eta.done / eta.total, f"prompt {n} tokens · repetition {rep + 1}/{spec.reps}"
                       + (f" × {spec.clients} clients" if spec.clients > 1 else "") + f" · {eta.text()}")
                offsets = [offset + stride * (c + 1) for c in range(spec.clients)]
                offset = offsets[-1]
                before = scrape_metrics(client) if spec.clients == 1 else None
                with tracker, OtherCpuMeter(proc.pid if proc else None) as meter:
                    if spec.clients == 1:
                        results = [self._one(client, builder, spec, n, offsets[0], rep, 0, cancelled)]
                    else:
                        with ThreadPoolExecutor(spec.clients) as pool:
                            futs = [pool.submit(self._one_own_client, client, builder, spec, n, offsets[c], rep, c,
                                                cancelled) for c in range(spec.clients)]
                            results = [f.result() for f in futs]
                peaks = tracker.peaks()
                for p in peaks:
                    if p.vram_used_mib is not None:
                        measured_mib[p.device] = max(measured_mib.get(p.device, 0.0), p.vram_used_mib)
                steps: int | None = None
                per_pos: tuple[int, ...] = ()
                if before is not None and results[0].draft_n:
                    steps, per_pos = draft_counter_deltas(before, scrape_metrics(client) or {})
                for r in results:
                    rep_obj = r.model_copy(update={"seq": seq, "peaks": peaks, "other_cpu_pct": meter.pct,
                                                   "draft_steps": steps if r.client == 0 else None,
                                                   "draft_accepted_per_pos": per_pos if r.client == 0 else ()})
                    self.repo.add_rep(run_id, rep_obj)
                    seq += 1
                    if r.error:
                        failures.append(r.error)
                eta.done += spec.clients
                if cancelled():
                    raise BenchCancelled()
                if proc is not None and not proc.alive():
                    raise BenchError("llama-server exited during the run:\n" + "\n".join(list(proc.lines)[-10:]))
        if failures:
            return "incomplete", f"{len(failures)} request(s) failed: {failures[0]}"
        return "complete", None

    @staticmethod
    def _check(cancelled: CancelFn, proc: ServerProcess | None) -> None:
        if cancelled():
            raise BenchCancelled()
        if proc is not None and not proc.alive():
            raise BenchError("llama-server exited during the run:\n" + "\n".join(list(proc.lines)[-10:]))

    def _one_own_client(self, client: LlamaClient, *args: Any) -> Repetition:
        with LlamaClient(client.base_url, model=client.model) as own:
            own._http.headers.update(client._http.headers)
            return self._one(own, *args)

    def _one(self, client: LlamaClient, builder: PromptBuilder, spec: BenchSpec, n: int, offset: int,
             rep: int, c: int, cancelled: CancelFn) -> Repetition:
        """One measured request (after priming the cache for warm/depth runs)."""
        started = _now()
        base = {"prompt_tokens": n, "depth": spec.depth, "rep": rep, "client": c, "started_at": started}
        with self._waiting():
            return self._request(client, builder, spec, n, offset, base, cancelled)

    def _request(self, client: LlamaClient, builder: PromptBuilder, spec: BenchSpec, n: int, offset: int,
                 base: dict[str, Any], cancelled: CancelFn) -> Repetition:
        try:
            prefix = builder.prompt(spec.depth, offset * 3 + 11) if spec.depth else []
            body = builder.prompt(n, offset) if not prefix else builder.prompt(n + len(builder.bos), offset)[
                len(builder.bos):]
            tokens = prefix + body
            cache_prompt = spec.warm_cache or bool(spec.depth)
            if spec.depth:
                client.completion(prefix, n_predict=0, cache_prompt=True)
            if spec.warm_cache:
                client.completion(tokens, n_predict=0, cache_prompt=True)
            t0 = time.perf_counter()
            ttft = None
            final = None
            for chunk in client.completion_stream(tokens, n_predict=spec.gen_tokens, ignore_eos=True,
                                                  cache_prompt=cache_prompt, seed=1234):
                self._progress()
                if ttft is None and (chunk.get("tokens") or chunk.get("content")):
                    ttft = (time.perf_counter() - t0) * 1000.0
                if chunk.get("stop"):
                    final = chunk
                    break
                if cancelled():
                    raise BenchCancelled()
            latency = (time.perf_counter() - t0) * 1000.0
            if final is None or "timings" not in final:
                return Repetition(**base, error="the server's stream ended without timings")
            t = final["timings"]
            problems = implausible_timings(t)
            if problems:  # kept as a failed request that says why, never as a measurement
                return Repetition(**base, error="the server's timings are not plausible: " + "; ".join(problems[:3]))
            return Repetition(**base, **server_timings(t), ttft_ms=ttft, latency_ms=latency)
        except BenchCancelled:
            raise
        except ServerError as exc:
            return Repetition(**base, error=f"server error: {exc.message}")
        except Exception as exc:  # noqa: BLE001 - connection lost (server died), etc.; kept as a failed rep
            return Repetition(**base, error=f"{type(exc).__name__}: {exc}")

    # -- llama-bench ----------------------------------------------------------------------------
    def _llama_bench(self, target: ServerTarget, spec: BenchSpec, report: ProgressFn,
                     cancelled: CancelFn) -> dict[str, Any]:
        """Run llama-bench with the same settings while no server of ours holds the devices."""
        argv, lacking = translate_to_llama_bench(list(target.argv), spec)
        report(0.0, "running llama-bench (same settings)…")
        try:
            result = binaries.run_llama_bench(argv, timeout=600.0, cancel_check=cancelled, settings=self.settings)
        except binaries.BinaryError as exc:
            if cancelled():
                raise BenchCancelled() from exc
            return {"llama_bench_skipped": lacking, "llama_bench_error": str(exc)}
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            return {"llama_bench_skipped": lacking,
                    "llama_bench_error": f"llama-bench exited with {result.returncode}: {tail}"}
        try:
            parsed = parse_llama_bench_json(result.stdout)
        except (json.JSONDecodeError, ValueError) as exc:
            return {"llama_bench_skipped": lacking, "llama_bench_error": f"could not read llama-bench JSON: {exc}"}
        return {"llama_bench": parsed, "llama_bench_skipped": lacking}

    # -- sweeps -----------------------------------------------------------------------------------
    def sweep(self, target: ServerTarget, spec: BenchSpec, flag: str, values: list[str], *, rounds: int = 1,
              progress: ProgressFn | None = None, cancelled: CancelFn | None = None) -> tuple[int, list[BenchRun]]:
        """One run per value of `flag` (the server restarted between values), kept as a group.

        With `rounds` > 1 the values are interleaved (A, B, A, B, …): a slow drift of the machine (heat,
        another process) then falls on both sides alike; `core.bench_report.pooled` joins a value's runs.
        Each run of an interleaved A/B waits for the GPUs to cool (the heat gate)."""
        hit = flags.lookup(flag)
        own = flags.value_of(list(target.argv), hit[0].key) if hit is not None else None
        order = [v for _ in range(max(1, rounds)) for v in values]
        steps = [GroupStep(value, f"{flag}={value}", self._sweep_target(target, flag, value, own), spec)
                 for value in order]
        return run_group(self, RunGroup(param=flag, values=tuple(values), label=target.label), steps,
                         heat_gate=rounds > 1, progress=progress, cancelled=cancelled)

    @staticmethod
    def _sweep_target(target: ServerTarget, flag: str, value: str, own: str | None) -> ServerTarget:
        """The target of one value of a sweep."""
        # the profile's own value runs the profile as it is: its label, so `runs compare --profiles` finds it
        label = target.label if value == own and target.label else f"{target.label} {flag}={value}".strip()
        return ServerTarget(argv=set_flag(list(target.argv), flag, value), env=target.env, label=label,
                            attached_url=None, profile_version_id=target.profile_version_id, binary=target.binary)

    def speculative_ab(self, target: ServerTarget, spec: BenchSpec, *, rounds: int = 2,
                       progress: ProgressFn | None = None, cancelled: CancelFn | None = None) -> list[BenchRun]:
        """The profile as it is and with `--spec-type none`, interleaved over `rounds` (a sweep of the
        speculative type): the measured speed-up beside the ceiling the acceptance counters imply."""
        current = flags.value_of(list(target.argv), "spec_type")
        if current is None or current == "none":
            raise BenchError("the profile does not draft (no speculative type): nothing to compare with "
                             "--spec-type none")
        return self.sweep(target, spec, flags.spelling("spec_type"), [current, "none"], rounds=rounds,
                          progress=progress, cancelled=cancelled)[1]


def demo_target(model: str | Path, threads: int | None = 2) -> ServerTarget:
    """The demo model with default flags (what the Benchmarks panel uses before a profile exists)."""
    argv = [*flags.argv_for("model", str(model)), *flags.argv_for("ctx_size", "4096"),
            *flags.argv_for("parallel", "1")]
    if threads:
        argv += flags.argv_for("threads", str(threads))
    return ServerTarget(argv=argv, label="demo (default flags)")


def target_from_profile(profile: LaunchProfile | SavedProfile, label: str | None = None,
                        version_id: int | None = None) -> ServerTarget:
    """A ServerTarget from a LaunchProfile or a SavedProfile (name + version id + LaunchProfile),
    through core.cmdline.profile_to_argv."""
    saved, launch = (profile, profile.profile) if isinstance(profile, SavedProfile) else (None, profile)
    argv, env = profile_to_argv(launch)
    return ServerTarget(argv=list(argv), env=dict(env or {}),
                        label=label or (saved.name if saved else "") or "profile",
                        profile_version_id=version_id if version_id is not None else (saved.version_id if saved else None),
                        binary=launch.binary)


def profile_versions(engine: Engine, *version_ids: int | None) -> list[LaunchProfile | None]:
    """The LaunchProfiles of stored profile versions (None where unknown), for flag diffs."""
    try:
        repo = ProfileRepository(engine)
        out: list[LaunchProfile | None] = []
        for vid in version_ids:
            saved = repo.get_version(vid) if vid is not None else None
            out.append(saved.profile if saved else None)
        return out
    except Exception:  # noqa: BLE001 - no profile store: fall back to argv diffs
        return [None for _ in version_ids]
