"""The Plan view's state: the model, its arguments (PlacementArgs), the devices planned, the compute
calibrations learnt from llama.cpp checks, and every change (a control, the solver's answer, an override rule,
the RPC workers) as the change it makes to the profile being edited.

The plan itself is core.memory.plan_memory (pure, a few ms): `recompute` makes it from this state. The slow
reads (a model header, a draft model, RPC workers' devices) go through the `Run` given (callbacks.py).
PlanPanel binds its widgets to a PlanState; the override and check boxes read it, never the panel.

Listeners get `notify(what, *details)` with `what` one of: "model" (the model, or why there is none, changed),
"note" (what the model line says meanwhile: reading, unreadable; or why the arguments cannot be planned),
"args" (the arguments changed other than by a control: the controls show them), "inputs" (anything the plan
reads changed: recompute), "overrides" (the -ot rules changed), "profile" (profile: the edited profile as
changed here, to publish).

What the view shows is declared (callbacks.Declared: said once per change, an equal value not at all):
`model` and `no_model_reason` ("model"), `note` and `args_error` ("note"), the planned devices, the draft
model and why it could not be read, the RPC workers' devices and error and the calibrations ("inputs"). Two
stay plain, each for its reason: `args` (a control's own change is not said back to the controls as "args")
and `profile` (one coming in from the Profile tab is not said back as "profile", only a change made here).

The predicted speed (core.speed through state.speed.SpeedModel, whose basis is loaded through `run`) is read
from the plan: `prediction`, `speed_curve` (generation t/s against the depth), `speed_options` (the fit solver's
answers ranked by predicted speed); a new basis is an "inputs" change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.cmdline import effective_profile
from llm_tuner.core.devices import DeviceInventory, LlamaDevice, backend_of
from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.memory import (
    ArgumentError,
    Calibration,
    FitAnswer,
    MemoryPlan,
    Pipeline,
    PlacementArgs,
    PlanDevice,
    args_from_profile,
    host_device,
    listed_device,
    overrides_as_profile,
    pipeline,
    placement_argv,
    plan_gpus,
    plan_memory,
    solve,
)
from llm_tuner.core.memory_check import CheckRow, calibrate, compare
from llm_tuner.core.memory_log import parse_memory_log
from llm_tuner.core.profile import LaunchProfile, OverrideRule
from llm_tuner.core.rpc import default_device_order
from llm_tuner.core.settings import Settings
from llm_tuner.core.speed import Prediction
from llm_tuner.core.units import format_mib
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import worker_devices
from llm_tuner.services.speed import SpeedBasis
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now
from llm_tuner.state.speed import SpeedModel, profile_argv

NO_MODEL = ("No model selected. Choose one in the Models view, or open a GGUF file here, to see what fits on "
            "each device.")
DEFAULT_MARGIN_MIB = PlacementArgs().fit_target_mib[0]  # -fitt when the profile sets none
PLANNED_PREFIX = {"Metal": "MTL"}  # a planned device's name prefix where llama.cpp's differs from the backend's


# the solver's goals that move bytes between devices (the largest context changes memory, not the speed at a depth)
SOLVER_GOALS = (("layers", "Most GPU layers"), ("split", "Balance split"))


@dataclass(frozen=True)
class SpeedOption:
    """One of the fit solver's answers (or the settings as they are: goal ''), with its predicted speed."""

    goal: str
    label: str
    args_text: str  # what it sets: '-ngl 99', '-c 32768', '-ts 1,1'
    prediction: Prediction | None
    reason: str = ""


def _or_none(value: Any, default: Any) -> Any:
    """A control's value as the profile keeps it: llama-server's default is no flag at all."""
    return None if value == default else value


class PlanState(Observable):
    """What the Plan view plans for, and how each change reaches the profile being edited."""

    model = Declared[ModelInfo | None](None, topic="model")
    no_model_reason = Declared[str | None](None, topic="model")  # why there is no plan, other than none chosen
    note = Declared[str | None](None, topic="note")  # what the model line says instead (reading, unreadable)
    args_error = Declared[str | None](None, topic="note")  # why the profile's arguments cannot be planned
    draft_model = Declared[ModelInfo | None](None, topic="inputs")  # the profile's -md, planned once read
    draft_error = Declared[str | None](None, topic="inputs")  # why the profile's -md could not be read
    planned = Declared[tuple[PlanDevice, ...]]((), topic="inputs")  # devices this machine lacks, by hand
    rpc_devices = Declared[tuple[LlamaDevice, ...]]((), topic="inputs")  # the RPC workers' devices, once read
    rpc_error = Declared[str | None](None, topic="inputs")
    # per model path, learnt from "Check with llama.cpp" (a new dict at each change: said once)
    calibrations = Declared[dict[str, Calibration]](topic="inputs", factory=dict)

    def __init__(self, *, inventory: Callable[[], DeviceInventory | None] = lambda: None,
                 settings: Callable[[], Settings] = Settings, run: Run = run_now,
                 speed: SpeedModel | None = None) -> None:
        super().__init__()
        self.inventory = inventory  # this machine's devices as the app last read them
        self.settings = settings
        self.run = run
        self.profile: LaunchProfile | None = None  # the profile being edited (None: this state's args only)
        self.args = PlacementArgs()
        self.plan: MemoryPlan | None = None  # made by recompute (the view asks for it after "inputs")
        self.pipeline: Pipeline | None = None  # the plan's pipeline parallelism (several devices), with the plan
        self.rpc_endpoints: tuple[str, ...] = ()  # the workers rpc_devices belong to
        self._writing = False
        # the basis of the predicted speed (default costs until a loader is given: the panel's reads the store)
        self.speed = speed or SpeedModel(SpeedBasis, run=run)
        self.speed.add_callback(lambda what, *_d: self.notify("inputs"))

    # -- the model ------------------------------------------------------------------------------------
    def select_model(self, path: str | Path | None) -> None:
        """A model chosen elsewhere (the Models view, Open GGUF): read it, or none."""
        if not path:
            self.model, self.note = None, None
            self.notify("inputs")
            return
        self.load_model(Path(path))

    def load_model(self, path: Path) -> None:
        """Read the model header (through `run`: off the GUI thread), then plan."""
        self._set_note(f"Reading {path.name} …")
        self.run(lambda: read_model(path), self._on_model_read,
                 lambda exc: self._set_note(f"Could not read {path.name}: {exc}"))

    def _set_note(self, text: str | None) -> None:
        self.note = text

    def _on_model_read(self, info: ModelInfo) -> None:
        if info.error:
            self._set_note(f"{Path(info.path).name}: {info.error}. Choose another file.")
            return
        self.set_model(info)

    def set_model(self, info: ModelInfo) -> None:
        self.model, self.no_model_reason, self.note = info, None, None
        self.notify("inputs")

    def model_line(self) -> str:
        """The line above the bars: the model, or what is being done about one, or why there is none."""
        if self.args_error:
            return self.args_error
        if self.note:
            return self.note
        info = self.model
        if info is None:
            return self.no_model_reason or NO_MODEL
        return (f"<b>{info.display_name()}</b> — {info.architecture}, {info.file_type or ''}, "
                f"{info.block_count} blocks, trained context {info.context_length}, "
                f"{format_mib(info.size_bytes / 1048576)}")

    def _load_draft(self, path: str | None) -> None:
        """Read the profile's draft model (-md); the plan counts it once read, and says why when it cannot be
        read (the plan then leaves it out)."""
        if not path:
            self.draft_model, self.draft_error = None, None
            return
        if self.draft_model is not None and str(self.draft_model.path) == str(Path(path).expanduser()):
            return
        self.draft_model, self.draft_error = None, None
        self.run(lambda: read_model(Path(path).expanduser()), self._on_draft_read,
                 lambda exc: self._on_draft_failed(path, str(exc) or type(exc).__name__))

    def _is_draft(self, path: str | Path) -> bool:
        """`path` is the profile's draft model now (else an answer about an older one: dropped)."""
        return str(path) == str(Path(self.args.draft_model or "").expanduser())

    def _on_draft_read(self, info: ModelInfo) -> None:
        if not self._is_draft(info.path):
            return  # the profile has another draft by now
        if info.error:
            self.draft_error = info.error
            return
        self.draft_model = info

    def _on_draft_failed(self, path: str, why: str) -> None:
        if self._is_draft(Path(path).expanduser()):
            self.draft_error = why

    # -- the profile in, changes out ------------------------------------------------------------------
    def use_profile(self, profile: LaunchProfile | None) -> None:
        """The profile being edited (published elsewhere): its effective arguments (LLAMA_ARG_* count, as for
        the server), its draft model, its RPC workers, and its model (never a plan for another model)."""
        if self._writing:  # our own change coming back
            return
        self.profile = profile
        if profile is None:
            return
        try:
            self.args = args_from_profile(profile)
        except ArgumentError as exc:  # no plan of these arguments, and none of the previous profile's
            self.plan = None
            self.args_error = (f"No plan: {exc}. llama-server refuses it too; correct it in the Profile tab "
                               "(or in the pasted command).")
            self.notify("inputs")
            return
        self.args_error = None
        self.notify("args")
        self._load_draft(self.args.draft_model)
        self.read_rpc_devices(tuple(effective_profile(profile).rpc))
        model_path = self.args.model
        if model_path and (self.model is None or str(self.model.path) != str(model_path)):
            if Path(model_path).expanduser().is_file():
                self.load_model(Path(model_path).expanduser())
            else:
                self.plan, self.note = None, None
                self.model = None
                self.no_model_reason = (f"The profile's model file {model_path} does not exist. Pick the model "
                                        "in the Models list, or correct the path in the Profile tab.")
        self.notify("inputs")

    def _write(self, **changes: Any) -> None:
        """Write `changes` into the profile being edited (if there is one) and hand it to the listeners."""
        if self.profile is None:
            return
        self.profile = self.profile.model_copy(update=changes)
        self._writing = True
        try:
            self.notify("profile", self.profile)
        finally:
            self._writing = False

    def _change(self, args: dict[str, Any], profile: dict[str, Any]) -> None:
        self.args = self.args.with_(**args)
        self._write(**profile)
        self.notify("inputs")

    def set_value(self, key: str, value: Any) -> None:
        """One settings control changed by the user: its flag (only it) goes into the args and the profile.
        `key`: ctx, ngl, ctk, ctv, np, fa, ub (the control's value) or fitt (the margin in MiB)."""
        if key == "fitt":
            self.set_margin(int(value))
        elif key == "ctx":
            ctx = int(value)
            self._change({"ctx": ctx if ctx > 0 else (0 if self.args.ctx is not None else None)},
                         {"ctx_size": ctx if ctx > 0 else None})
        elif key == "ngl":
            ngl = int(value)
            self._change({"ngl": None if ngl < 0 else ngl}, {"gpu_layers": None if ngl < 0 else ngl})
        elif key in ("ctk", "ctv"):
            field = "cache_type_k" if key == "ctk" else "cache_type_v"
            self._change({field: value}, {field: _or_none(value, "f16")})
        elif key == "np":
            np_ = int(value)
            self._change({"n_parallel": -1 if np_ == 0 else np_}, {"parallel": None if np_ == 0 else np_})
        elif key == "fa":
            self._change({"flash_attn": value}, {"flash_attn": _or_none(value, "auto")})
        elif key == "ub":
            ub = int(value)
            self._change({"n_ubatch": ub}, {"ubatch_size": _or_none(ub, 512)})
        else:
            raise ValueError(f"no Plan control {key!r}")

    @property
    def margin_mib(self) -> int:
        """What the fit keeps free per device (-fitt)."""
        return self.args.fit_target_mib[0] if self.args.fit_target_mib else DEFAULT_MARGIN_MIB

    def set_margin(self, mib: int) -> None:
        self._change({"fit_target_mib": (mib,)}, {"fit_target_mib": (mib,) if mib != DEFAULT_MARGIN_MIB else ()})

    def set_split(self, shares: Sequence[float]) -> None:
        """A dragged tensor split (-ts), in whole layers."""
        ts = tuple(float(round(float(s))) for s in shares)
        self._change({"tensor_split": ts}, {"tensor_split": ts})

    def set_overrides(self, overrides: tuple[tuple[str, str], ...]) -> None:
        """Replace the tensor overrides (the builder's Add / Remove all) and write them into the profile."""
        self.args = self.args.with_(overrides=tuple(overrides))
        self._write(**self._overrides_in_profile())
        self.notify("overrides")
        self.notify("inputs")

    def _overrides_in_profile(self) -> dict[str, Any]:
        """The -ot rules as the profile keeps them (--cpu-moe, --n-cpu-moe N, the other rules)."""
        cpu_moe, n_cpu_moe, rest = overrides_as_profile(self.args.overrides)
        return {"override_tensor": tuple(OverrideRule(pattern=p, buffer=b) for p, b in rest),
                "cpu_moe": cpu_moe, "n_cpu_moe": n_cpu_moe}

    # -- the solver -----------------------------------------------------------------------------------
    def solve(self, goal: str) -> str:
        """Ask the fit solver (goal: context, layers or split) with the margin in force and apply its answer
        to the args and the profile. Returns its answer in words."""
        if self.args_error:
            return self.args_error
        if self.model is None:
            return "Select a model first."
        ans = self._solve(goal)
        if ans.args is None:
            return ans.reason
        if goal == "context":
            self.args = self.args.with_(ctx=ans.value)
            self._write(ctx_size=ans.value)
        elif goal == "layers":
            # the whole placement (-ngl and, for MoE, --n-cpu-moe) goes into the profile: it is what launches
            self.args = self.args.with_(ngl=ans.args.ngl, overrides=ans.args.overrides, devices=ans.args.devices,
                                        tensor_split=ans.args.tensor_split)
            cpu_only = {"devices": ("none",), "tensor_split": ()} if ans.args.devices == () else {}  # -dev none
            self._write(gpu_layers=ans.args.ngl, **self._overrides_in_profile(), **cpu_only)
        else:
            self.args = self.args.with_(tensor_split=ans.args.tensor_split)
            self._write(tensor_split=ans.args.tensor_split)
        self.notify("args")
        self.notify("inputs")
        return ans.reason

    def _solve(self, goal: str) -> FitAnswer:
        """The fit solver's answer for `goal` with the margin in force (not applied)."""
        gpus = self.gpus()
        targets = {d.name: self.margin_mib for d in gpus}
        targets["Host"] = 0
        return solve(self.model, self.args, gpus, self.host(), goal=goal, targets_mib=targets,
                     cpu_flags=self.cpu_flags())

    # -- the predicted speed ----------------------------------------------------------------------------
    def prediction(self, depth: int = 0) -> Prediction | None:
        """The plan's predicted speed (None: no plan, no basis yet, or a model the speed model cannot read)."""
        return self.speed.predict(self.model, self.plan, depth=depth, argv=profile_argv(self.profile),
                                  gpus=self.gpus())

    def speed_curve(self) -> list[tuple[int, float]]:
        """Generation t/s against the depth already in the cache, up to a slot's context."""
        return self.speed.curve(self.model, self.plan, argv=profile_argv(self.profile), gpus=self.gpus())

    def speed_options(self) -> list[SpeedOption]:
        """The settings as they are and the fit solver's answers that change them, ranked by predicted
        generation speed (then prefill); an answer that does not fit, or changes nothing, is left out."""
        if self.model is None or self.plan is None or self.args_error or self.speed.basis is None:
            return []
        gpus, argv = self.gpus(), profile_argv(self.profile)
        opts = [SpeedOption("", "as set now", "", self.prediction())]
        for goal, label in SOLVER_GOALS:
            if (goal == "split" and len(gpus) < 2) or (goal == "layers" and not gpus):
                continue
            ans = self._solve(goal)
            if ans.args is None or ans.args == self.args.with_(fit=False) or ans.args == self.args:
                continue
            plan = ans.plan or plan_memory(self.model, ans.args, gpus, self.host(), cpu_flags=self.cpu_flags())
            pr = self.speed.predict(self.model, plan, argv=argv, gpus=gpus)
            opts.append(SpeedOption(goal, label, _args_change(self.args, ans.args), pr, ans.reason))
        return sorted(opts, key=lambda o: (-(o.prediction.gen_tps or 0) if o.prediction else 0,
                                           -(o.prediction.prefill_tps or 0) if o.prediction else 0))

    # -- devices --------------------------------------------------------------------------------------
    def gpus(self) -> list[PlanDevice]:
        """The devices llama.cpp would use without -dev, in its order: the RPC workers' first, then local ones."""
        out = [d for d in plan_gpus(self.inventory()) if d.backend != "RPC"]  # CUDA0 and Vulkan0 share a card
        out += [listed_device(d) for d in self.rpc_devices]
        names = {d.name for d in out}
        out.extend(d for d in self.planned if d.name not in names)
        return default_device_order(out)

    def host(self) -> PlanDevice:
        return host_device(self.inventory())

    def cpu_flags(self) -> tuple[str, ...]:
        inv = self.inventory()
        return tuple(inv.host.cpu_flags) if inv is not None else ()

    def add_planned_device(self, name: str, backend: str, mib: int) -> None:
        """Plan a device this machine lacks (or replace the one of that name)."""
        backend = backend or backend_of(name)
        kept = tuple(d for d in self.planned if d.name != name)
        self.planned = (*kept, PlanDevice(name, backend, mib, None, "planned", True))

    def next_device_name(self, backend: str) -> str:
        """The first name llama.cpp would give another device of `backend` that the plan does not use yet."""
        prefix = PLANNED_PREFIX.get(backend, backend)
        used = {d.name for d in self.gpus()}
        i = 0
        while f"{prefix}{i}" in used:
            i += 1
        return f"{prefix}{i}"

    def clear_planned(self) -> None:
        self.planned = ()

    def unknown_devices(self) -> list[str]:
        """The plan's devices without a size (named by -dev, not on this machine nor planned)."""
        p = self.plan
        return [d.name for d in p.devices if d.name != "Host" and d.capacity_mib is None] if p is not None else []

    def plan_unknown_devices(self, mib: int) -> None:
        for name in self.unknown_devices():
            self.add_planned_device(name, backend_of(name), mib)

    def use_workers(self, endpoints: tuple[str, ...]) -> None:
        """Settings' RPC workers into the profile's --rpc; their devices join the plan once read."""
        self._write(rpc=endpoints)
        self.read_rpc_devices(endpoints)

    def read_rpc_devices(self, endpoints: tuple[str, ...]) -> None:
        """Ask llama-server for the RPC workers' devices (through `run`) when the workers changed."""
        if endpoints == self.rpc_endpoints:
            return
        self.rpc_endpoints, self.rpc_devices, self.rpc_error = endpoints, (), None
        if not endpoints:
            return
        settings = self.settings()
        self.run(lambda: worker_devices(list(endpoints), settings, timeout_s=15),
                 lambda devs: self._on_rpc_read(endpoints, tuple(devs), None),
                 lambda exc: self._on_rpc_read(endpoints, (), str(exc)))

    def _on_rpc_read(self, endpoints: tuple[str, ...], devices: tuple[LlamaDevice, ...], error: str | None) -> None:
        if endpoints == self.rpc_endpoints:  # else the profile has other workers by now
            self.rpc_devices, self.rpc_error = devices, error

    # -- check with llama.cpp -------------------------------------------------------------------------
    def check_argv(self) -> list[str]:
        """llama-server arguments for the current settings (what the check runs), -fit off."""
        if self.model is None:
            raise ValueError("no model to check: select one first")
        argv = placement_argv(self.args.with_(model=str(self.model.path), fit=True))
        rpc = flags.argv_for("rpc", ",".join(self.rpc_endpoints)) if self.rpc_endpoints else []  # before -dev
        return [*rpc, *argv, *flags.argv_for("fit", "off"), *flags.argv_for("threads", "2")]

    def calibration(self, model_path: str) -> Calibration | None:
        """The compute calibration learnt for a model by a llama.cpp check (None: not checked)."""
        return self.calibrations.get(model_path)

    def learn_from_check(self, log: str) -> list[CheckRow]:
        """A llama.cpp check's log beside the plan: the rows to show, and this model's compute calibration."""
        rows = compare(parse_memory_log(log), self.plan, self.gpus())
        if self.model is not None:
            path = str(self.model.path)
            self.calibrations = {**self.calibrations, path: calibrate(self.plan, rows, self.calibrations.get(path))}
        return rows

    # -- the plan -------------------------------------------------------------------------------------
    def recompute(self) -> MemoryPlan | None:
        if self.model is None or self.args_error:
            self.plan, self.pipeline = None, None
            return None
        gpus, host, cal = self.gpus(), self.host(), self.calibrations.get(str(self.model.path))
        self.plan = plan_memory(self.model, self.args, gpus, host, cpu_flags=self.cpu_flags(), calibration=cal,
                                draft_model=self._draft())
        self.pipeline = pipeline(self.model, self.plan, gpus, host, user_args=self.args, cpu_flags=self.cpu_flags(),
                                 calibration=cal, draft_model=self._draft())
        return self.plan

    def pipeline_line(self) -> str:
        """The Plan's line for pipeline parallelism on several devices: on or off, why, and what it changes in
        the compute buffers ('' with one device)."""
        return self.pipeline.text() if self.pipeline is not None else ""

    def _draft(self) -> ModelInfo | None:
        return self.draft_model if self.args.draft_model else None

    def summary(self) -> str:
        """The plan in one paragraph: context and slots, layers offloaded, the verdict, the host's share."""
        p = self.plan
        if p is None:
            return ""
        host = p.device("Host")
        draft = self._draft()
        cal = self.calibrations.get(str(self.model.path)) if self.model is not None else None
        holders = [d.name for d in p.devices if d.name != "Host" and d.model_mib > 0]  # GPUs, RPC devices, CPUs
        return (
            f"n_ctx {p.n_ctx} ({p.n_seq_max} slot{'s' if p.n_seq_max > 1 else ''}, "
            f"{'unified' if p.kv_unified else 'per-slot'} KV), flash attention {'on' if p.flash_attn else 'off'}, "
            f"{p.n_gpu_layers}/{p.n_layers_total} layers offloaded"
            + (f" (to {', '.join(holders)}). " if holders and p.n_gpu_layers else ". ")
            + self._draft_sentence(draft)
            + self.verdict()
            + (f" Host: {format_mib(host.resident_mib)} must stay resident; {format_mib(host.mapped_mib)} of "
               f"weights are mapped from the file (-lm {self.args.load_mode}: the page cache may evict them, "
               "-lm mmap+mlock would pin them)." if host is not None and host.mapped_mib else "")
            + (" Compute calibrated from a llama.cpp check (" + ", ".join(
                f"{b} ×{v:.2f}" for b, v in cal.compute_scale.items()) + ")." if cal and cal.compute_scale else ""))

    def _draft_sentence(self, draft: ModelInfo | None) -> str:
        """What the summary says of the profile's draft model (-md): included, not read yet, or why it is left
        out ('' without one)."""
        if draft is not None:
            return f"Draft model {Path(str(draft.path)).name} included. "
        if not self.args.draft_model:
            return ""
        if self.draft_error:
            return (f"Draft model {Path(self.args.draft_model).name} could not be read ({self.draft_error}): the "
                    "plan leaves it out, so its verdict does not count it; check -md in the Profile tab. ")
        return "Draft model not read yet. "

    def verdict(self) -> str:
        """'Fits.', 'Does NOT fit.', or why there is no verdict (a device's size is unknown: MemoryPlan.fits)."""
        p = self.plan
        if p is None:
            return ""
        if p.fits is not None:
            return "Fits." if p.fits else "Does NOT fit."
        unknown = self.unknown_devices()
        host = p.device("Host")
        return "No fit verdict: " + "; ".join(
            ([f"the size of {', '.join(unknown)} is unknown (not on this machine): add "
              f"{'them' if len(unknown) > 1 else 'it'} as planned (below) to see whether it fits"] if unknown else [])
            + (["this machine's memory is not read yet"] if host is not None and host.budget_mib is None else [])) + "."

    def devices_line(self) -> str:
        """The devices planned, the host's memory and what the RPC workers are."""
        p = self.plan
        if p is None:
            return ""
        host = self.host()
        return ("Devices: " + (", ".join(f"{d.name} ({format_mib(d.capacity_mib)}{', planned' if d.hypothetical else ''})"
                                         for d in p.devices if d.name != "Host") or "none (CPU only)")
                + f"; host RAM {format_mib(host.capacity_mib)} total, {format_mib(host.free_mib)} free"
                + (f". RPC workers: {self.rpc_error}" if self.rpc_error else "")
                + "".join(f". {d.name} is the worker {d.description}" for d in self.rpc_devices))

    def split(self) -> tuple[list[str], list[float]] | None:
        """The tensor split to show for two or more devices: their names and shares (the args' -ts, else the
        layers the plan gives each); None with one device."""
        p = self.plan
        names = [d.name for d in p.devices if d.name != "Host"] if p is not None else []
        if p is None or len(names) < 2:
            return None
        ts = list(self.args.tensor_split[:len(names)])
        if len(ts) < len(names) or not any(ts):
            ts = [float(d.layers) for d in p.devices if d.name != "Host"]
        return names, ts


def _args_change(old: PlacementArgs, new: PlacementArgs) -> str:
    """What a solver's answer changes, as flags ('--ctx-size 32768', '--n-gpu-layers 99 --n-cpu-moe 4')."""
    words: list[str] = []
    if new.ctx != old.ctx and new.ctx:
        words += flags.argv_for("ctx_size", str(new.ctx))
    if new.ngl != old.ngl and new.ngl is not None:
        words += flags.argv_for("gpu_layers", str(new.ngl))
    rules = ""
    if new.overrides != old.overrides:
        cpu_moe, n_cpu_moe, rest = overrides_as_profile(new.overrides)
        words += (flags.argv_for("cpu_moe") if cpu_moe else []) + (
            flags.argv_for("n_cpu_moe", str(n_cpu_moe)) if n_cpu_moe else [])
        rules = f" + {len(rest)} -ot rule{'s' if len(rest) > 1 else ''}" if rest else ""
    if new.tensor_split != old.tensor_split and new.tensor_split:
        words += flags.argv_for("tensor_split", ",".join(f"{v:g}" for v in new.tensor_split))
    return (" ".join(words) + rules) or "no change"
