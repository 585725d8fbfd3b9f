"""The inputs of a memory plan: devices and the llama-server arguments that decide placement."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.cmdline import effective_profile, profile_to_argv
from llm_tuner.core.memory.constants import CACHE_TYPES, FIT_TARGET_MIB

# ------------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanDevice:
    """A device to plan for: a detected GPU, a hypothetical one, or the host (name 'Host').

    `name` is llama.cpp's device name (CUDA0, Vulkan1, ROCm0, MTL0); `capacity_mib` its total memory,
    `free_mib` what is free now (None: plan against capacity, as for planned hardware).
    """

    name: str
    backend: str
    capacity_mib: int | None
    free_mib: int | None = None
    description: str = ""
    hypothetical: bool = False
    # free_mib was measured by a llama.cpp process (--list-devices) that held its own runtime context,
    # so the runtime overhead is already taken out of it (as it is for the fit step inside the server)
    free_includes_runtime: bool = False
    # The physical card's memory pool (its PCI address, core.devices.GpuInfo.pool): devices with the same pool
    # are one GPU under two backends (CUDA0 and Vulkan0). Without -dev llama.cpp uses only the first of them;
    # with both in -dev they share the card's free memory. None: a card of its own.
    pool: str | None = None


def listed_device(d: Any, pool: str | None = None) -> PlanDevice:
    """A device as `--list-devices` printed it (core.devices.LlamaDevice; an RPC worker's too): its free
    memory was read by a process that held its runtime, so the runtime is already out of it."""
    return PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                      free_includes_runtime=True, pool=pool)


def plan_gpus(inventory: Any) -> list[PlanDevice]:
    """The GPUs to plan for from a core.devices.DeviceInventory: its llama.cpp devices (listed_device), each
    with its card's pool, so two backends on one card are one pool."""
    if inventory is None:
        return []
    return [listed_device(d, inventory.pool_of(d.name)) for d in inventory.llama_devices if d.backend != "CPU"]


def host_device(inventory: Any) -> PlanDevice:
    """The host (RAM) to plan for from a core.devices.DeviceInventory: its total and available memory; unknown
    without an inventory."""
    if inventory is not None and inventory.host.memory_total_mib:
        return PlanDevice("Host", "CPU", inventory.host.memory_total_mib, inventory.host.memory_available_mib,
                          inventory.host.cpu_model or "")
    return PlanDevice("Host", "CPU", None)


@dataclass(frozen=True)
class PlacementArgs:
    """The llama-server settings that decide memory, with llama.cpp's defaults when not given.

    `ctx` None = `-c` not given (0 = trained context, and fit may shrink it); an explicit 0 means the
    trained context and fit never shrinks it. `ngl` None = auto (-1, all layers); 'all' = -2.
    `overrides` are (pattern, buffer) in command-line order, `--cpu-moe`/`--n-cpu-moe` included.
    """

    model: str | None = None
    ctx: int | None = None
    ngl: int | None = None
    split_mode: str = "layer"
    devices: tuple[str, ...] | None = None  # None = every GPU; () = -dev none
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    overrides: tuple[tuple[str, str], ...] = ()
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    n_parallel: int = -1
    kv_unified: bool | None = None
    swa_full: bool = False
    n_batch: int = 2048
    n_ubatch: int = 512
    no_kv_offload: bool = False
    op_offload: bool = True
    fit: bool = True
    fit_target_mib: tuple[int, ...] = (FIT_TARGET_MIB,)
    fit_ctx_min: int = 4096
    load_mode: str = "auto"
    no_host: bool = False
    repack: bool = True
    embeddings: bool = False
    spec_types: tuple[str, ...] = ()
    draft_model: str | None = None
    draft_ngl: int | None = None
    draft_n_max: int = 3
    draft_devices: tuple[str, ...] | None = None
    draft_cache_type_k: str = "f16"
    draft_cache_type_v: str = "f16"
    load_mtp: bool = False
    ngram_size_m: int = 48
    cache_ram_mib: int = 8192
    unknown: tuple[str, ...] = ()

    # -- derived ---------------------------------------------------------------------------------
    @property
    def n_seq_max(self) -> int:
        return 4 if self.n_parallel in (-1, None) else max(1, self.n_parallel)

    @property
    def unified(self) -> bool:
        if self.kv_unified is not None:
            return self.kv_unified
        return self.n_parallel in (-1, None)

    @property
    def use_mmap(self) -> bool:
        return self.load_mode in ("auto", "mmap", "mmap+mlock")

    @property
    def spec_mtp(self) -> bool:
        return "draft-mtp" in self.spec_types

    @property
    def user_placed(self) -> bool:
        """True when fit may not place layers (-ngl, -ts, -ot, -cmoe/-ncmoe or -sm row set)."""
        return (self.ngl is not None and self.ngl != -1) or bool(self.tensor_split) or bool(self.overrides)

    def with_(self, **kw: Any) -> PlacementArgs:
        return replace(self, **kw)


class ArgumentError(ValueError):
    """A llama-server argument whose value llama-server refuses (or the plan cannot size), in plain words that
    name the flag as written and the value: `-c needs a whole number, got 'abc'`."""


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SPLIT_MODES = ("none", "layer", "row", "tensor")
_LOAD_MODES = ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")
_FA_VALUES = {"on": "on", "1": "on", "true": "on", "enabled": "on", "off": "off", "0": "off", "false": "off",
              "disabled": "off", "auto": "auto", "-1": "auto"}
# -ncmoe/-ncffn N beyond any model's layers means all of them: counted up to this, so a huge N is no hang
_MAX_BLOCKS = 4096


def _int_arg(flag: str, value: str) -> int:
    v = value.strip()
    if not _INT.fullmatch(v):
        raise ArgumentError(f"{flag} needs a whole number, got {value!r}")
    return int(v)


def _parse_ngl(flag: str, value: str) -> int:
    v = value.strip().lower()
    if v == "auto":
        return -1
    if v == "all":
        return -2
    if not _INT.fullmatch(v):
        raise ArgumentError(f"{flag} needs a number of layers, 'auto' or 'all', got {value!r}")
    return int(v)


def _bool_arg(flag: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "enabled", "true", "1"):
        return True
    if v in ("off", "disabled", "false", "0"):
        return False
    raise ArgumentError(f"{flag} takes on or off, got {value!r}")


def _choice_arg(flag: str, value: str, allowed: tuple[str, ...], what: str, note: str = "") -> str:
    if value not in allowed:
        raise ArgumentError(f"{flag} {value}: not {what}; it takes {', '.join(allowed)}{note}")
    return value


def _float_list(flag: str, value: str) -> tuple[float, ...]:
    parts = [x.strip() for x in re.split(r"[,/]", value) if x.strip()]
    if not all(_FLOAT.fullmatch(x) for x in parts):
        raise ArgumentError(f"{flag} needs numbers separated by commas (a share per device), got {value!r}")
    return tuple(float(x) for x in parts)


def _int_list(flag: str, value: str) -> tuple[int, ...]:
    parts = [x.strip() for x in value.split(",") if x.strip()]
    if not all(_INT.fullmatch(x) for x in parts):
        raise ArgumentError(f"{flag} needs whole numbers separated by commas, got {value!r}")
    return tuple(int(x) for x in parts)


FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."

# flag key (core.flags) -> (PlacementArgs field, kind). kind: int, str, ngl, onoff, fa, devlist, ts, intlist,
# ot, cmoe, ncmoe, ncffn, spec; 'true'/'false' for a switch (the value it sets); 'toggle'/'toggle-inverted'
# for a flag with a negative spelling (the positive spelling sets True, or False when inverted).
_MEMORY_FLAGS: dict[str, tuple[str, str]] = {
    "model": ("model", "str"), "ctx_size": ("ctx", "int"), "gpu_layers": ("ngl", "ngl"),
    "split_mode": ("split_mode", "str"), "devices": ("devices", "devlist"), "tensor_split": ("tensor_split", "ts"),
    "main_gpu": ("main_gpu", "int"), "override_tensor": ("overrides", "ot"), "cpu_moe": ("overrides", "cmoe"),
    "n_cpu_moe": ("overrides", "ncmoe"), "n_cpu_ffn": ("overrides", "ncffn"),
    "cache_type_k": ("cache_type_k", "str"), "cache_type_v": ("cache_type_v", "str"), "flash_attn": ("flash_attn", "fa"),
    "parallel": ("n_parallel", "int"), "kv_unified": ("kv_unified", "toggle"), "swa_full": ("swa_full", "true"),
    "batch_size": ("n_batch", "int"), "ubatch_size": ("n_ubatch", "int"),
    "kv_offload": ("no_kv_offload", "toggle-inverted"), "op_offload": ("op_offload", "toggle"),
    "fit": ("fit", "onoff"), "fit_target_mib": ("fit_target_mib", "intlist"), "fit_ctx": ("fit_ctx_min", "int"),
    "load_mode": ("load_mode", "str"), "no_host": ("no_host", "true"), "repack": ("repack", "toggle"),
    "embedding": ("embeddings", "true"), "cache_ram_mib": ("cache_ram_mib", "int"), "spec_type": ("spec_types", "spec"),
    "draft_model": ("draft_model", "str"), "draft_gpu_layers": ("draft_ngl", "ngl"),
    "draft_n_max": ("draft_n_max", "int"), "draft_device": ("draft_devices", "devlist"),
    "draft_cache_type_k": ("draft_cache_type_k", "str"), "draft_cache_type_v": ("draft_cache_type_v", "str"),
}
_NO_VALUE_KINDS = ("true", "false", "cmoe", "toggle", "toggle-inverted")


def llama_default(key: str) -> str | None:
    """llama.cpp's value for flag `key` (a core.flags key) when the flag is absent, as a command line writes
    it ("f16" for cache_type_k, "3" for draft_n_max): PlacementArgs' defaults, the one record of them. None
    when the default is not one literal value (auto, -1, from the model or the host) or the flag is not
    modelled."""
    spec = _MEMORY_FLAGS.get(key)
    if spec is None or spec[1] not in ("int", "str"):
        return None
    value = getattr(PlacementArgs(), spec[0])
    if value is None or (isinstance(value, int) and value < 0):
        return None
    return str(value)


def parse_server_args(argv: list[str] | tuple[str, ...] | str) -> PlacementArgs:
    """llama-server arguments -> PlacementArgs (aliases, `--flag=value`, `_` for `-` in long flags).

    Flags that do not affect memory are skipped; unknown flags are kept in `unknown`. A repeated
    flag keeps its last value (as llama.cpp), except `-ot`/`-cmoe`/`-ncmoe`/`--spec-type` which add up.
    A value llama-server refuses (`-c abc`, `-fa maybe`, `-ctk q9_0`) raises ArgumentError in plain words.
    """
    if isinstance(argv, str):
        argv = shlex.split(argv)
    args = list(argv)
    if args and not args[0].startswith("-"):
        args = args[1:]  # the binary
    kw: dict[str, Any] = {}
    overrides: list[tuple[str, str]] = []
    spec: list[str] = []
    unknown: list[str] = []
    ctx_given = False
    i = 0
    while i < len(args):
        a = args[i]
        value: str | None = None
        if a.startswith("--") and "=" in a:
            a, value = a.split("=", 1)
        hit = flags.lookup(a)
        spec_ = _MEMORY_FLAGS.get(hit[0].key) if hit is not None else None
        if spec_ is None:
            if hit is not None and hit[1] and hit[0].takes_value and value is None:
                i += 2  # a flag that does not matter for memory: its value is not taken for a flag
            elif hit is not None:
                i += 1
            else:
                unknown.append(args[i])
                i += 1
            continue
        name, kind = spec_
        positive = hit is not None and hit[1]  # hit is there: spec_ came from it
        if kind in ("toggle", "toggle-inverted"):
            kind = "true" if positive == (kind == "toggle") else "false"
        takes_value = kind not in _NO_VALUE_KINDS
        if takes_value and value is None:
            if i + 1 >= len(args):
                raise ArgumentError(f"{a} needs a value")
            value = args[i + 1]
            i += 2
        else:
            i += 1
        text = value or ""  # the value of a kind that takes one (read above); "" for the others
        if kind == "int":
            kw[name] = _int_arg(a, text)
            if name == "ctx":
                ctx_given = True
        elif kind == "str":
            kw[name] = _checked_str(a, name, text)
        elif kind == "ngl":
            kw[name] = _parse_ngl(a, text)
        elif kind == "true":
            kw[name] = True
        elif kind == "false":
            kw[name] = False
        elif kind == "onoff":
            kw[name] = _bool_arg(a, text)
        elif kind == "fa":
            fa = _FA_VALUES.get(text.strip().lower())
            if fa is None:
                raise ArgumentError(f"{a} takes on, off or auto, got {text!r}")
            kw[name] = fa
        elif kind == "devlist":
            kw[name] = () if text.strip().lower() == "none" else tuple(
                d.strip() for d in text.split(",") if d.strip())
        elif kind == "ts":
            kw[name] = _float_list(a, text)
        elif kind == "intlist":
            kw[name] = _int_list(a, text)
        elif kind == "ot":
            for part in text.split(","):
                if "=" not in part:
                    raise ArgumentError(f"{a}: invalid rule {part!r} (want <regex>=<buffer>)")
                pat, buf = part.split("=", 1)
                overrides.append((pat, buf))
        elif kind == "cmoe":
            overrides.append((FFN_EXPS_REGEX, "CPU"))
        elif kind == "ncmoe":
            overrides.extend((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(min(_int_arg(a, text), _MAX_BLOCKS)))
        elif kind == "ncffn":
            overrides.extend((rf"blk\.{j}{FFN_DENSE_REGEX}", "CPU") for j in range(min(_int_arg(a, text), _MAX_BLOCKS)))
        elif kind == "spec":
            spec.extend(s.strip() for s in text.split(",") if s.strip() and s.strip() != "none")
    if overrides:
        kw["overrides"] = tuple(overrides)
    if spec:
        kw["spec_types"] = tuple(spec)
    if "ctx" in kw and not ctx_given:
        del kw["ctx"]
    kw["unknown"] = tuple(unknown)
    return PlacementArgs(**kw)


def _checked_str(flag: str, name: str, text: str) -> str:
    """A text value of a memory flag, checked where llama-server takes only some words: the K/V cache types
    (the plan sizes only those), the split mode and the load mode."""
    if name.endswith(("cache_type_k", "cache_type_v")):
        return _choice_arg(flag, text, tuple(CACHE_TYPES), "a K/V cache type of llama-server",
                           " (a fork's own types need that fork's binary, and the plan cannot size them)")
    if name == "split_mode":
        return _choice_arg(flag, text, _SPLIT_MODES, "a split mode")
    if name == "load_mode":
        return _choice_arg(flag, text, _LOAD_MODES, "a load mode")
    return text


def args_from_profile(profile: Any) -> PlacementArgs:
    """A LaunchProfile -> PlacementArgs through its effective arguments: the profile's flags with the
    LLAMA_ARG_* variables of its environment applied as llama-server applies them (core.cmdline), read by
    the one argument parser above."""
    argv, _env = profile_to_argv(effective_profile(profile))
    return parse_server_args(argv)


def placement_argv(args: PlacementArgs, *, for_fit_params: bool = False) -> list[str]:
    """PlacementArgs -> llama-server arguments (only what differs from the defaults).

    `for_fit_params` leaves out what llama-fit-params does not accept (`-kvu`, speculative flags) and
    the `-fit` switch, so the same question can be asked of `llama-fit-params`.
    """
    d = PlacementArgs()
    f = flags.short
    out: list[str] = []
    if args.model:
        out += [f("model"), args.model]
    if args.ctx is not None:
        out += [f("ctx_size"), str(args.ctx)]
    if args.ngl is not None:
        out += [f("gpu_layers"), {-1: "auto", -2: "all"}.get(args.ngl, str(args.ngl))]
    if args.split_mode != d.split_mode:
        out += [f("split_mode"), args.split_mode]
    if args.devices is not None:
        out += [f("devices"), ",".join(args.devices) or "none"]
    if args.tensor_split:
        out += [f("tensor_split"), ",".join(f"{x:g}" for x in args.tensor_split)]
    if args.main_gpu:
        out += [f("main_gpu"), str(args.main_gpu)]
    if args.overrides:
        out += [f("override_tensor"), ",".join(f"{p}={b}" for p, b in args.overrides)]
    for key, name in (("cache_type_k", "cache_type_k"), ("cache_type_v", "cache_type_v"), ("flash_attn", "flash_attn"),
                      ("batch_size", "n_batch"), ("ubatch_size", "n_ubatch"), ("load_mode", "load_mode")):
        if getattr(args, name) != getattr(d, name):
            out += [f(key), str(getattr(args, name))]
    if args.n_parallel not in (-1, None):
        out += [f("parallel"), str(args.n_parallel)]
    if args.kv_unified is not None and not for_fit_params:
        out.append(f("kv_unified", negative=not args.kv_unified))
    if args.swa_full:
        out.append(f("swa_full"))
    if args.no_kv_offload:
        out.append(f("kv_offload", negative=True))
    if not args.op_offload:
        out.append(f("op_offload", negative=True))
    if args.no_host:
        out.append(f("no_host"))
    if not args.repack:
        out.append(f("repack", negative=True))
    if args.fit_target_mib != d.fit_target_mib:
        out += [f("fit_target_mib"), ",".join(str(x) for x in args.fit_target_mib)]
    if args.fit_ctx_min != d.fit_ctx_min:
        out += [f("fit_ctx"), str(args.fit_ctx_min)]
    if args.cache_ram_mib != d.cache_ram_mib and not for_fit_params:
        out += [f("cache_ram_mib"), str(args.cache_ram_mib)]
    if not for_fit_params:
        if not args.fit:
            out += [f("fit"), "off"]
        if args.spec_types:
            out += [f("spec_type"), ",".join(args.spec_types)]
        if args.draft_model:
            out += [f("draft_model"), args.draft_model]
    return out


def overrides_as_profile(overrides: tuple[tuple[str, str], ...]) -> tuple[bool, int | None, tuple[tuple[str, str], ...]]:
    """PlacementArgs.overrides -> the profile's (`--cpu-moe`, `--n-cpu-moe N`, other `-ot` rules).

    The patterns `--cpu-moe` and `--n-cpu-moe N` stand for (parse_server_args) are recognised and given back
    as those flags, so a placement the solver found is written into a profile as the user would write it (and
    is what launches); every other rule stays an `-ot` rule, in order.
    """
    cpu_moe = (FFN_EXPS_REGEX, "CPU") in overrides
    n = 0
    while (rf"blk\.{n}{FFN_EXPS_REGEX}", "CPU") in overrides:
        n += 1
    blocks = {(rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n)}
    rest = tuple(o for o in overrides if o not in blocks and o != (FFN_EXPS_REGEX, "CPU"))
    return cpu_moe, (n or None), rest
