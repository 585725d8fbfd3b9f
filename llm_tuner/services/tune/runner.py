"""The tune runner: the pure search of core.tune with the benchmark engine as its scorer.

Every measurement is a BenchRunner run (the one measuring path) stored in History with the tune's group id;
every candidate is a trial stored the moment it is decided (pruned by the plan, failed at launch or on
quality, measured), so a tune killed mid-way keeps them and `run(..., resume_tune_id=ID)` continues from them
without measuring any of them again. An argv is measured once per tune: a re-race only tops its samples up.

Time: the budget covers the search and the final comparison; the final's share is reserved from the start,
estimated from the baseline's run (load included) × the final's runs. When the search would eat into it, the
search stops with the best so far.

The final: the winner against the baseline, interleaved A B A B, as core.tune.final designs it before its first
run (n per side, the server starts, the cost that is reserved, the noise between starts) and reads it (the
objective's comparison gives the verdict); a decisive lead measured in this sitting is read from the
screening's own runs instead, with no fresh start, where they call it better. This module measures and stores;
the policy is there.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.bench_report import argv_diff, busy_warning, pooled, throttle_warning
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.hardware import hardware_lines
from llm_tuner.core.heat import heat_warning
from llm_tuner.core.settings import Settings
from llm_tuner.core.stats import AB_THRESHOLD_PCT, NOISE, Comparison, median
from llm_tuner.core.tune import (
    PLACEMENT_KNOB,
    BaselineCost,
    FinalDesign,
    Knob,
    Trial,
    TuneResult,
    TuneSpec,
    apply_values,
    coordinate_descent,
    current_value,
    design_final,
    final_comparisons,
    final_cost,
    is_out_of_memory,
    measured_in_starts,
    objective_metric,
    rep_scores,
    start_noise,
)
from llm_tuner.core.tune.frontier import Placement
from llm_tuner.core.tune.model import BASELINE_KEPT, NOT_MEASURED
from llm_tuner.core.tune.prune import speed_prune
from llm_tuner.core.tune.quality import changes_kv, changes_speculation, output_keys, ppl_increase_pct
from llm_tuner.core.tune.search import Values
from llm_tuner.services import logparse
from llm_tuner.services.bench import BenchRunner, ServerTarget, about_left
from llm_tuner.services.server import ServerProcess
from llm_tuner.services.tune import checks
from llm_tuner.services.tune.placement import PlacementResolver
from llm_tuner.services.tune.speed import SpeedOracle
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository

log = logging.getLogger(__name__)

ProgressFn = Callable[[float | None, str], None]


_MARGIN_RAISED = re.compile(r"margin raised to (\d+) MiB")


class _Cancelled(Exception):
    pass


class TuneRunner:
    """Runs TuneSpecs: search, final interleaved comparison, quality checks, result; every trial stored."""

    def __init__(self, repo: TuneRepository, *, settings: Settings | None = None,
                 bench_runner: BenchRunner | None = None,
                 plan_fn: checks.PlanFn | None = None, clock: Callable[[], float] = time.monotonic,
                 resolver: PlacementResolver | None = None, speed: SpeedOracle | None = None) -> None:
        self.repo = repo
        self.settings = settings
        self.bench = bench_runner or BenchRunner(RunRepository(repo.engine), settings=settings)
        self.plan_fn = plan_fn
        self.clock = clock
        self.resolver = resolver  # placement knobs: the frontier on planned devices (else the detected ones)
        self.speed = speed  # the speed model's predictions (else one for the tune: this machine, stored calibration)

    @property
    def current_process(self) -> ServerProcess | None:
        """The llama-server of the trial in progress (for the log dock), or None."""
        return self.bench.current_process

    def run(self, spec: TuneSpec | None = None, *, progress: ProgressFn | None = None,
            cancelled: Callable[[], bool] | None = None, on_trial: Callable[[Trial], None] | None = None,
            resume_tune_id: int | None = None) -> TuneResult:
        """Tune `spec` (or resume a stored tune: its stored spec and trials; the budget starts again for what is
        left, `spec`'s budget when one is given). Returns the result, also stored with the tune."""
        return _Tune(self, spec, progress or (lambda f, t: None), cancelled or (lambda: False),
                     on_trial or (lambda t: None), resume_tune_id).run()


class _Tune:
    """One tune's state while it runs."""

    def __init__(self, owner: TuneRunner, spec: TuneSpec | None, progress: ProgressFn, cancelled: Callable[[], bool],
                 on_trial: Callable[[Trial], None], resume_tune_id: int | None) -> None:
        self.o, self.progress, self.cancelled, self.on_trial = owner, progress, cancelled, on_trial
        self.trials: dict[tuple[str, ...], Trial] = {}
        self.measured_now: set[tuple[str, ...]] = set()  # command lines measured in this sitting (not resumed)
        self.seq = 0
        if resume_tune_id is not None:
            rec = owner.repo.resume(resume_tune_id)  # refused while it runs elsewhere; its API key from $ENV
            if rec is None or rec.spec is None:
                raise ValueError(f"no tune {resume_tune_id} to resume")
            self.spec, self.tune_id = rec.spec, rec.id
            if spec is not None:  # a resume may come with a new time budget for what is left (a spent one)
                self.spec = self.spec.model_copy(update={"budget_s": spec.budget_s})
            for t in owner.repo.list_trials(rec.id):
                self.trials[tuple(t.argv)] = t
                self.seq = max(self.seq, t.seq)
        else:
            if spec is None:
                raise ValueError("give a TuneSpec or a tune id to resume")
            self.spec, self.tune_id = spec, owner.repo.create(spec)
        stored = owner.repo.get(self.tune_id)
        self.number = stored.number if stored is not None and stored.number else self.tune_id  # tune 1, 2, …
        self.plan_fn = owner.plan_fn or checks.make_plan_fn(self.spec.headroom_mib, binary=self.spec.binary)
        s = self.spec
        self.resolver = None
        if any(k.flag == PLACEMENT_KNOB for k in s.knobs):
            self.resolver = owner.resolver or PlacementResolver(s.base_argv, s.base_env, binary=s.binary,
                                                                margin_mib=s.headroom_mib, fresh_devices=True)
            learned = [int(m.group(1)) for t in self.trials.values() if (m := _MARGIN_RAISED.search(t.reason or ""))]
            if learned:  # resumed: the margin learned from placements that ran out of memory
                self.resolver.margin_mib = max(self.resolver.margin_mib, *learned)
        self.base_values = {k.key: current_value(s.base_argv, k) for k in s.knobs}
        self.speed = owner.speed
        if self.speed is None:
            try:
                self.speed = SpeedOracle.for_tune(s.base_argv, s.base_env, s.objective, engine=owner.repo.engine,
                                                  binary=s.binary)
            except Exception as exc:  # noqa: BLE001 - no predictions: every candidate is started
                log.info("no speed model for tune %s: %s", self.tune_id, exc)
        else:  # one oracle may serve several tunes: each learns the server's cost from its own baseline
            self.speed.forget_server_cost()
        self._server_cost_learned = False
        self.defaults: dict[str, str] = {}  # what llama.cpp takes for an absent flag here (learned: _learn_defaults)
        # (argv without -fa, "on"/"off") -> the run left to -fa auto that resolved to it (_learn_fa)
        self._fa_auto: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
        self.baseline_argv = self.argv_of(self.base_values)
        self.t0 = owner.clock()
        self.reserve_s = 0.0
        self._base_cost: BaselineCost | None = None  # the baseline run's (measured, or read back on resume)
        self._run_medians: dict[int, list[float | None]] = {}  # per trial id: each of its runs' median score
        self.quality: dict[str, str] = {}
        self._baseline_ppl: tuple[float | None, str] | None = None
        self._baseline_text: tuple[str | None, str] | None = None
        self.probed: tuple[str | None, str] = (None, "not read")
        self.server_lines: tuple[str, ...] = ()  # the output of the latest run's server (BenchRunner's RunOutcome)
        # speculative knobs: the baseline's run reads its output at --temp 0 too (no server start of its own)
        self.spec_knobs = any(set(k.flag.split("+")) & set(output_keys()) for k in s.knobs)
        self.current = ""
        if self.baseline_argv in self.trials:  # resumed: the final's share from the stored baseline run
            self._reserve_from_stored(self.trials[self.baseline_argv])

    def _reserve_from_stored(self, trial: Trial) -> None:
        run = self.o.bench.repo.get_run(trial.run_ids[0]) if trial.run_ids else None
        if run is not None and run.started_at and run.finished_at:
            self._reserve((run.finished_at - run.started_at).total_seconds(), max(1, run.spec.reps))

    def argv_of(self, values: Values) -> tuple[str, ...]:
        """The candidate's command line, normalized (core.tune.apply_values) with the defaults learned so far."""
        s = self.spec
        resolve = self.resolver.fragment if self.resolver is not None else None
        argv = tuple(apply_values(s.base_argv, s.knobs, values, s.base_env, self.defaults, resolve=resolve))
        fa = self._fa_value(argv)
        return self._fa_auto.get((self._fa_free(argv), fa), argv) if fa in ("on", "off") else argv

    def _learn_defaults(self, argv: tuple[str, ...]) -> None:
        """The threads llama.cpp picks on this host when -t/-tb are absent, from the server's log: -t at that
        value then runs as the baseline does, one trial instead of two. Only from a run without either flag
        (so the baseline's own command line stays as it was)."""
        eff = flags.effective_argv(list(argv), self.spec.base_env)
        if self.defaults or flags.value_of(eff, "threads") is not None or flags.has(eff, "threads_batch"):
            return
        if flags.has(self.baseline_argv, "threads") or flags.has(self.baseline_argv, "threads_batch"):
            return
        self.defaults = logparse.threads_in_effect(list(self.server_lines))

    # -fa on (or off) where a run left to -fa auto resolved to just that: the same run, one trial (learned per
    # command line, as auto's answer depends on where the layers sit)
    def _fa_free(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(flags.without(list(argv), "flash_attn"))

    def _fa_value(self, argv: tuple[str, ...]) -> str | None:
        return flags.value_of(flags.effective_argv(list(argv), self.spec.base_env), "flash_attn")

    def _learn_fa(self, argv: tuple[str, ...]) -> None:
        """After a run that left flash attention to llama.cpp (`-fa auto`, the default): what its log says auto
        ran with; the same command with `-fa` at that value is this run (`_fa_auto`)."""
        if self._fa_value(argv) not in (None, "auto"):
            return
        resolved = logparse.flash_attn_in_effect(self.server_lines)
        if resolved is not None:
            self._fa_auto.setdefault((self._fa_free(argv), resolved), argv)

    @property
    def threshold(self) -> float:
        """The A/B threshold (%) from Settings: the search's zone, the final's verdict, the final's effect floor."""
        return getattr(self.o.settings, "ab_threshold_pct", AB_THRESHOLD_PCT) or AB_THRESHOLD_PCT

    # -- time and progress -----------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.o.clock() - self.t0

    def out_of_time(self) -> bool:
        return self.cancelled() or self.elapsed() + self.reserve_s >= self.spec.budget_s

    def _report(self, text: str) -> None:
        left = self.spec.budget_s - self.elapsed()
        self.progress(min(1.0, self.elapsed() / max(1.0, self.spec.budget_s)),
                      f"{self.current}: {text} · tune: {about_left(left)} of the budget")

    # -- measuring ---------------------------------------------------------------------------------
    def measure(self, argv: tuple[str, ...], reps: int, phase: str, probe: bool = False) -> BenchRun:
        """One BenchRunner run of `reps` repetitions; `probe`: the output at --temp 0 is read from the same
        server first (self.probed), for the speculation check."""
        s = self.spec
        self.measured_now.add(tuple(argv))
        target = ServerTarget(argv=list(argv), env=dict(s.base_env), label=f"{s.label} · tune {self.number}",
                              binary=s.binary,
                              profile_version_id=s.profile_version_id if argv == self.baseline_argv else None)
        outcome = self.o.bench.run(target, s.bench_spec(reps), progress=lambda f, t: self._report(t),
                                   cancelled=self.cancelled, group_id=self.tune_id, sweep_value=phase,
                                   probe=checks.greedy_text if probe else None)
        run, self.server_lines = outcome.run, outcome.lines
        if probe:
            said = outcome.probe  # checks.greedy_text's (text or None, why)
            self.probed = said if isinstance(said, tuple) else (None, "the server did not become ready")
        self._learn_defaults(argv)
        self._learn_fa(argv)
        if run.status == "cancelled" or self.cancelled():
            raise _Cancelled()
        return run

    def _store(self, trial: Trial) -> Trial:
        trial = trial.model_copy(update={"id": self.o.repo.add_trial(trial)})
        self.trials[tuple(trial.argv)] = trial
        self.on_trial(trial)
        return trial

    def evaluate(self, values: Values, n: int, knob: str | None) -> tuple[float, ...] | None:
        argv = self.argv_of(values)
        t = self.trials.get(argv)
        if t is None:
            if self.trials and self.out_of_time():
                return None
            t = self._new_trial(values, argv, knob, n)
            t = self._placement_retry(values, t, knob, n)
        if t.status != "measured":
            return None
        if len(t.samples) < n and not self.out_of_time():
            t = self._top_up(t, n)
        return t.samples

    def predicted(self, argv: tuple[str, ...]) -> dict[str, Any] | None:
        """The speed model's prediction of a command line (SpeedGuess.to_json()), None without one."""
        g = self.speed.guess(argv, self.spec.base_env) if self.speed is not None else None
        return g.to_json() if g is not None else None

    def screen(self, cands: list[Values], incumbent: Values, knob: str) -> list[Values]:
        """The race's candidates worth starting: those the speed model puts far behind the race's best prediction
        (core.tune.prune) are stored as pruned trials with the reason, not started. The incumbent always stays.
        The first race after the baseline's measurement teaches the model the server's per-token cost."""
        if not self.spec.prune_by_speed or self.speed is None or len(cands) < 2:
            return cands
        if not self._server_cost_learned and self.baseline_argv in self.trials:
            self._server_cost_learned = True
            self.speed.learn_server_cost(self.baseline_argv, self.spec.base_env, self._trial_gen_tps())
        argvs = [self.argv_of(c) for c in cands]
        inc = self.argv_of(incumbent)
        guesses = {a: self.speed.guess(a, self.spec.base_env) for a in argvs}
        what = self.spec.objective.row.what.format(clients=self.spec.objective.clients,
                                                   min_gen_tps=self.spec.objective.min_gen_tps)
        pruned = speed_prune(guesses, keep=inc, what=what)
        kept = []
        for values, argv in zip(cands, argvs, strict=True):
            if argv not in pruned or argv in self.trials:  # decided before (measured or pruned): as it stands
                kept.append(values)
                continue
            self.seq += 1
            self._store(Trial(tune_id=self.tune_id, values=dict(values), argv=argv, knob=knob, seq=self.seq,
                              status="pruned", reason=pruned[argv], predicted=self.predicted(argv)))
        return kept

    def _placement(self, values: Values) -> Placement | None:
        """The resolved placement of a candidate's placement value (None: the base's own)."""
        value = next((values.get(k.key) for k in self.spec.knobs if k.flag == PLACEMENT_KNOB), None)
        return self.resolver.placement(value) if value is not None and self.resolver is not None else None

    def _placement_retry(self, values: Values, t: Trial, knob: str | None, n: int) -> Trial:
        """A placement that ran out of memory (at load or at the first request) raises the margin every later
        placement keeps (core.tune.next_margin) and is tried once more at the new margin, as a new trial."""
        for _ in range(3):
            p = self._placement(values)
            trial_id = t.id
            if p is None or self.resolver is None or trial_id is None or t.status != "failed":
                return t
            log_tail = "\n".join(self.server_lines[-60:])
            if not is_out_of_memory(f"{t.reason}\n{log_tail}") or self.out_of_time():
                return t
            old = self.resolver.margin_mib
            new = self.resolver.learn_out_of_memory(p)
            note = (f"out of memory with {old} MiB kept free per GPU (the plan left {p.min_headroom_mib:.0f}): "
                    f"margin raised to {new} MiB for every later placement")
            t = t.model_copy(update={"reason": f"{note}. {t.reason}"[:2000]})
            self.o.repo.update_trial(trial_id, reason=t.reason)
            self.trials[tuple(t.argv)] = t
            self.on_trial(t)
            argv = self.argv_of(values)
            if argv in self.trials:
                return self.trials[argv]
            t = self._new_trial(values, argv, knob, n)
        return t

    def _new_trial(self, values: Values, argv: tuple[str, ...], knob: str | None, n: int) -> Trial:
        s = self.spec
        self.seq += 1
        base = Trial(tune_id=self.tune_id, values=dict(values), argv=argv, knob=knob, seq=self.seq,
                     predicted=self.predicted(argv))
        changed = {k: v for k, v in values.items() if v != self.base_values.get(k)}
        self.current = f"trial {self.seq} " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "baseline")
        placed = self._placement(values)
        if placed is not None and not placed.fits:
            return self._store(base.model_copy(update={"status": "pruned", "reason": placed.reason}))
        ctx = flags.value_of(argv, "ctx_size")
        if s.min_ctx and ctx is not None and ctx.isdigit() and 0 < int(ctx) < s.min_ctx:
            return self._store(base.model_copy(update={
                "status": "pruned", "reason": f"context {ctx} is below the minimum {s.min_ctx}"}))
        fits, reason = self.plan_fn(list(argv), dict(s.base_env))
        if not fits:
            return self._store(base.model_copy(update={"status": "pruned", "reason": reason}))
        label = ", ".join(f"{k}={v}" for k, v in changed.items())
        bad = self._kv_quality(argv, label)
        if bad:
            return self._store(base.model_copy(update={"status": "failed", "reason": bad}))
        started = self.o.clock()
        is_base = argv == self.baseline_argv
        phase = "baseline" if is_base else "screen"
        speculative = not is_base and changes_speculation(argv, self.baseline_argv)
        if speculative and self._baseline_text is None:  # not read in the baseline's run (a resumed tune)
            self._baseline_text = checks.greedy_output(self.o.bench, self._target(self.baseline_argv))
        probe = speculative or (is_base and self.spec_knobs and self._baseline_text is None)
        run, samples, run_ids, flagged = self._measure_checked(argv, n, phase, started, probe=probe)
        if is_base and probe:
            self._baseline_text = self.probed
        bad = self._spec_quality(label) if speculative else None
        if bad:
            return self._store(base.model_copy(update={"status": "failed", "reason": bad, "run_id": run.id,
                                                       "run_ids": run_ids}))
        if not samples:
            return self._store(base.model_copy(update={
                "status": "failed", "run_id": run.id, "run_ids": run_ids,
                "reason": (run.error or f"run {run.status}: no figure for the objective").strip()[:2000]}))
        return self._store(base.model_copy(update={
            "status": "measured", "run_id": run_ids[-1], "run_ids": run_ids, "samples": tuple(samples),
            "score": median(samples), "flagged": flagged, "reason": self._same_as_baseline() if is_base else ""}))

    def _same_as_baseline(self) -> str:
        """'fa=on, t=2 run as the baseline: ...': the knob values that are the baseline's own command here, so the
        report and the Trials table say where those candidates went."""
        same = [f"{k.key}={v}" for k in self.spec.knobs if k.flag != "placement" for v in k.values
                if self._as_baseline(k, v)]
        return (f"{', '.join(same)} run as the baseline: llama.cpp's default, or what its log says it chose "
                "without the flag") if same else ""

    def _measure_checked(self, argv: tuple[str, ...], n: int, phase: str, started: float | None = None,
                         probe: bool = False) -> tuple[BenchRun, list[float], tuple[int | None, ...], str | None]:
        """One run of n repetitions; when the machine was busy or a GPU throttled while it measured
        (bench_report.busy_warning, throttle_warning), measured once more and that run's figures kept.
        Returns (run, samples, run ids, flag text or None)."""
        run = self.measure(argv, n, phase, probe)
        if started is not None and argv == self.baseline_argv and not self.reserve_s:
            self._reserve(self.o.clock() - started, n)
        samples = rep_scores(run, self.spec.objective)
        run_ids: tuple[int | None, ...] = (run.id,)
        flagged: str | None = None
        warning = (busy_warning(run) or throttle_warning(run)) if samples else None
        if warning:
            again = self.measure(argv, n, "re-measure")
            run_ids += (again.id,)
            if rep_scores(again, self.spec.objective):
                samples, run = rep_scores(again, self.spec.objective), again
            flagged = f"{warning} Re-measured once (run {again.id})."
        return run, samples, run_ids, flagged

    def _top_up(self, t: Trial, n: int) -> Trial:
        _run, more, run_ids, flagged = self._measure_checked(t.argv, n - len(t.samples), "top-up")
        if not more:
            return t
        samples = (*t.samples, *more)
        t = t.model_copy(update={"samples": samples, "run_ids": (*t.run_ids, *run_ids), "score": median(samples),
                                 "flagged": flagged or t.flagged})
        if t.id is not None:
            self.o.repo.update_trial(t.id, samples=t.samples, run_ids=t.run_ids, score=t.score, flagged=t.flagged)
        self.trials[tuple(t.argv)] = t
        self.on_trial(t)
        return t

    def _reserve(self, baseline_s: float, reps: int) -> None:
        """The final comparison's share of the budget: its runs (final_plan, both sides) at the baseline's cost
        (its load and warm-up as measured, repetitions scaled)."""
        self._base_cost = BaselineCost(baseline_s, reps)
        self.reserve_s = final_cost(self.spec, self.spec.final_reps, self._base_cost)

    # -- quality -----------------------------------------------------------------------------------
    def _kv_quality(self, argv: tuple[str, ...], label: str) -> str | None:
        """None when the candidate may be measured, else why its K/V types are rejected ("quality: ...")."""
        s = self.spec
        if changes_kv(argv, self.baseline_argv):
            if self._baseline_ppl is None:
                self._baseline_ppl = checks.perplexity(list(self.baseline_argv), server_binary=s.binary,
                                                       cancelled=self.cancelled, settings=self.o.settings)
            base, err = self._baseline_ppl
            ppl, err2 = checks.perplexity(list(argv), server_binary=s.binary, cancelled=self.cancelled,
                                          settings=self.o.settings)
            if base is None or ppl is None:
                self.quality[label] = f"perplexity not measured: {err or err2}"
                return f"quality: perplexity could not be measured ({err or err2})"
            inc = ppl_increase_pct(base, ppl)
            self.quality[label] = f"perplexity {ppl:.3f} vs baseline {base:.3f} ({inc:+.2f}%)"
            if inc > s.max_ppl_increase_pct:
                return f"quality: perplexity {inc:+.2f}% over the baseline (limit {s.max_ppl_increase_pct:g}%)"
        return None

    def _spec_quality(self, label: str) -> str | None:
        """After a speculative candidate's run: None when its output at --temp 0 (read by that run's probe) is
        the baseline's, else why it is rejected (its run stays in History, its figures do not count)."""
        text, err = self.probed
        base_text, base_err = self._baseline_text or (None, "not read")
        if text is None or base_text is None:
            self.quality[label] = f"output at --temp 0 not compared: {err or base_err}"
            return f"quality: output at --temp 0 could not be compared ({err or base_err})"
        if text != base_text:
            self.quality[label] = "output at --temp 0 differs from the baseline's: rejected"
            return "quality: output at --temp 0 differs from the baseline's"
        self.quality[label] = "output at --temp 0 identical to the baseline's"
        return None

    def _target(self, argv: tuple[str, ...]) -> ServerTarget:
        return ServerTarget(argv=list(argv), env=dict(self.spec.base_env), binary=self.spec.binary)

    # -- the whole tune ------------------------------------------------------------------------------
    def run(self) -> TuneResult:
        status, note = "complete", ""
        best = None
        try:
            # a gain under the A/B threshold can never pass the final: the search does not adopt one
            best, search_log = coordinate_descent(self.spec.base_argv, self.spec.knobs, self.evaluate,
                                                  reps=self.spec.screen_reps, out_of_time=self.out_of_time,
                                                  min_gain_pct=self.threshold, noise=self.noise,
                                                  screen=self.screen)
            log.info("tune %s: %s", self.tune_id, "; ".join(search_log))
            if self.cancelled():  # the search stops on Cancel as on the budget; the tune does not go on
                raise _Cancelled()
            if best is None:
                status = "failed"
                t = self.trials.get(self.baseline_argv)
                note = "the baseline could not be measured" + (f": {t.reason}" if t and t.reason else "")
                result = self._result(self.baseline_argv, note=note)
            else:
                result = self._final(self.argv_of(best))
        except _Cancelled:
            status = "cancelled"
            result = self._result(self.baseline_argv, note="cancelled: trials so far are kept; resume to continue")
        except BaseException:
            self.o.repo.finish(self.tune_id, "failed")
            raise
        self.o.repo.finish(self.tune_id, status, result)
        self.progress(1.0, f"tune {self.number} {status}: {result.verdict}")
        return result

    def _hardware(self) -> tuple[str, ...]:
        """The machine the baseline ran on (its stored run's record), as the report's hardware block."""
        t = self.trials.get(self.baseline_argv)
        run = self.o.bench.repo.get_run(t.run_ids[0]) if t is not None and t.run_ids else None
        if run is None:
            return ()
        return tuple(hardware_lines(run.devices, run.binary_version, run.binary_backends))

    def _result(self, searched: tuple[str, ...], **kw: Any) -> TuneResult:
        kw.setdefault("hardware", self._hardware())
        return TuneResult(tune_id=self.tune_id, tune_number=self.number, baseline_argv=self.baseline_argv,
                          winner_argv=kw.pop("winner", self.baseline_argv), searched_winner_argv=searched,
                          changed_flags=tuple(argv_diff(self.baseline_argv, searched)), quality=dict(self.quality),
                          objective_metric=objective_metric(self.spec.objective),
                          trials=tuple(self.o.repo.list_trials(self.tune_id)), **kw)

    def _final(self, winner: tuple[str, ...]) -> TuneResult:
        s = self.spec
        if winner == self.baseline_argv:
            untried = self._untried()
            if untried and not any(t.status in ("measured", "final") and tuple(t.argv) != self.baseline_argv
                                   for t in self.trials.values()):
                return self._result(winner, verdict=NOT_MEASURED, bandwidth=self._bandwidth(
                    self.baseline_argv, self._trial_gen_tps()), note=(
                    f"no candidate was measured: the budget was spent on the baseline ({untried} candidate"
                    f"{'s' if untried != 1 else ''} left untried). Resume it (Resume in the Tune view, or `llm-tuner tune "
                    f"--resume {self.number}`): the baseline is not measured again"))
            ran_out = self.cancelled() or self.elapsed() >= s.budget_s
            left = (f" ({untried} candidate{'s' if untried != 1 else ''} left untried"
                    + (": the budget ran out)" if ran_out else ")")) if untried else ""
            return self._result(winner, verdict=BASELINE_KEPT,
                                bandwidth=self._bandwidth(self.baseline_argv, self._trial_gen_tps()),
                                note="the search kept the baseline: nothing beat it, no final comparison needed"
                                     + self._best_loser() + left)
        base_t, win_t = self.trials.get(self.baseline_argv), self.trials.get(winner)

        def design(on_screening: bool) -> FinalDesign:
            return design_final(s, self.trials.values(), win_t, base_t, noise=self.noise(),
                                threshold_pct=self.threshold, time_left_s=s.budget_s - self.elapsed(),
                                cost=self._base_cost, on_screening=on_screening)

        # a decisive screened lead, both sides measured in this sitting: read from the screening's runs (no start)
        fd = design(on_screening={self.baseline_argv, winner} <= self.measured_now)
        if not fd.plan:
            runs_a, runs_b = self._screened(base_t), self._screened(win_t)
            pa, pb = pooled(runs_a), pooled(runs_b)
            if pa is not None and pb is not None:
                comps, main = final_comparisons(pa, pb, s.objective, self.threshold)
                if main.verdict == "better":  # else (few repetitions, another metric): a fresh comparison
                    return self._verdict(winner, fd, runs_a, runs_b, pb, comps, "better", on_screening=True)
            fd = design(on_screening=False)
        if self.cancelled() or self.elapsed() >= s.budget_s:
            return self._result(winner, note="no time left in the budget for the final comparison: the baseline "
                                             "is kept (the search's pick is listed)")
        runs_a, runs_b = [], []
        with self.o.bench.heat_gated(self.o.bench.default_cool_down()):  # on GPUs each run waits to cool (notes say)
            for i, reps in enumerate(fd.plan):  # A B A B ...: n per side, fixed before the first run
                self.current = f"final comparison {i + 1}/{len(fd.plan)}: baseline"
                runs_a.append(self.measure(self.baseline_argv, reps, "final:baseline"))
                self.current = f"final comparison {i + 1}/{len(fd.plan)}: winner"
                runs_b.append(self.measure(winner, reps, "final:winner"))
        pa, pb = pooled(runs_a), pooled(runs_b)
        if pa is None or pb is None:  # a plan of no rounds (design_final gives at least one)
            return self._result(winner, note="the final comparison ran nothing: the baseline is kept")
        comps, main = final_comparisons(pa, pb, s.objective, self.threshold)
        verdict = main.verdict or NOISE
        return self._verdict(winner, fd, runs_a, runs_b, pb if verdict == "better" else pa, comps, verdict)

    def _verdict(self, winner: tuple[str, ...], design: FinalDesign, runs_a: list[BenchRun], runs_b: list[BenchRun],
                 kept_run: BenchRun, comps: list[Comparison], verdict: str, on_screening: bool = False) -> TuneResult:
        """The result of a final comparison: a fresh one, or the screening's runs where `on_screening`."""
        kept = winner if verdict == "better" else self.baseline_argv
        if verdict == "better":
            t = self.trials.get(winner)
            if t is not None and t.id is not None:
                self.o.repo.update_trial(t.id, status="final")
        gen = median([r.predicted_per_second for r in kept_run.reps if r.error is None])
        if on_screening:
            note = f"the winner beats the baseline in the screening's runs ({design.why})"
        else:
            note = ("the winner beats the baseline in a fresh interleaved comparison" if verdict == "better" else
                    f"{verdict}: no change better than noise; the baseline is kept") + f" ({design.why})"
            heat = heat_warning(runs_a, runs_b, names=("baseline", "winner"))  # the heat-gated final's runs only
            if heat:
                note += f"; {heat}"
        return self._result(winner, winner=kept, verdict=verdict, comparisons=tuple(c.to_json() for c in comps),
                            final_run_ids=() if on_screening else tuple(
                                r.id for pair in zip(runs_a, runs_b, strict=True) for r in pair),
                            bandwidth=self._bandwidth(kept, gen), note=note, final_n_note=design.note,
                            on_screening=on_screening)

    def _screened(self, t: Trial | None) -> list[BenchRun]:
        """The stored runs whose repetitions are the trial's samples, oldest first: a run re-measured because the
        machine was busy or a GPU throttled (_measure_checked) is replaced by its re-measurement. [] where they do
        not add up to the samples (the final then runs fresh)."""
        if t is None:
            return []
        kept: list[BenchRun] = []
        for i in t.run_ids:
            r = self.o.bench.repo.get_run(i) if i is not None else None
            if r is None:
                continue
            scores = rep_scores(r, self.spec.objective)
            if r.sweep_value == "re-measure":
                if scores and kept:
                    kept[-1] = r
            elif scores:
                kept.append(r)
        got = sorted(x for r in kept for x in rep_scores(r, self.spec.objective))
        return kept if got == sorted(t.samples) else []

    def _untried(self) -> int:
        """Knob values never tried as a change from the baseline (0 when the search reached every knob). A value
        that runs as the baseline does (-t at the threads llama.cpp picks anyway) is no change: it is not counted."""
        tried = {(t.knob, t.values.get(t.knob)) for t in self.trials.values() if t.knob}
        return sum(1 for k in self.spec.knobs for v in k.values
                   if v != self.base_values.get(k.key) and (k.key, v) not in tried and not self._as_baseline(k, v))

    def _as_baseline(self, knob: Knob, value: str | None) -> bool:
        """Whether `knob` at `value`, all else the baseline's, is the baseline's own command (llama.cpp's default
        or what it chose without the flag, learned from its log)."""
        return value != self.base_values.get(knob.key) and \
            self.argv_of({**self.base_values, knob.key: value}) == self.baseline_argv

    def _best_loser(self) -> str:
        """'; the best candidate, t=1, measured 39 % worse than the baseline': how far the candidates raced
        fell short (racing screens, not a final comparison); '' without a measured candidate."""
        base = self.trials.get(self.baseline_argv)
        measured = [t for t in self.trials.values() if t.status in ("measured", "final") and t.score is not None
                    and tuple(t.argv) != self.baseline_argv]
        if base is None or not base.score or not measured:
            return ""
        best = max(measured, key=lambda t: t.score or 0.0)
        diff = 100.0 * ((best.score or 0.0) - base.score) / abs(base.score)
        label = ", ".join(f"{k}={v}" for k, v in best.values.items() if v != self.base_values.get(k)) or "a candidate"
        how = f"{abs(diff):.0f} % {'worse' if diff < 0 else 'better'} than the baseline" if round(abs(diff)) else \
            "the same as the baseline"
        return f"; the best candidate, {label}, measured {how} while racing"

    def noise(self) -> float | None:
        """The noise between server starts so far (core.tune.start_noise), from the per-run median scores of
        the trials measured in 2+ starts (each stored run read once)."""
        groups = []
        for t in measured_in_starts(self.trials.values()):
            if t.id is None:
                continue
            if t.id not in self._run_medians or len(self._run_medians[t.id]) != len(t.run_ids):
                runs = [self.o.bench.repo.get_run(i) for i in t.run_ids]
                self._run_medians[t.id] = [median(rep_scores(r, self.spec.objective)) if r else None for r in runs]
            groups.append(self._run_medians[t.id])
        return start_noise(groups)

    def _trial_gen_tps(self) -> float | None:
        t = self.trials.get(self.baseline_argv)
        if t is None or t.run_id is None:
            return None
        run = self.o.bench.repo.get_run(t.run_id)
        return median([r.predicted_per_second for r in run.reps if r.error is None]) if run else None

    def _bandwidth(self, argv: tuple[str, ...], gen_tps: float | None) -> dict[str, Any] | None:
        o = self.spec.objective
        return checks.bandwidth(list(argv), dict(self.spec.base_env), self.spec.binary, gen_tps, o.depth,
                                o.prompt_tokens)
