"""The inputs of a memory plan: devices and the llama-server arguments that decide placement."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

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
    fit_target_mib: tuple[int, ...] = (1024,)
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


def _parse_ngl(value: str) -> int:
    v = value.strip().lower()
    if v == "auto":
        return -1
    if v == "all":
        return -2
    return int(v)


def _bool_arg(value: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "enabled", "true", "1"):
        return True
    if v in ("off", "disabled", "false", "0"):
        return False
    raise ValueError(value)


FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."

# flag -> (field, kind). kind: int, str, bool (switch), or a special handler name.
_FLAGS: dict[str, tuple[str, str]] = {}


def _reg(names: str, fieldname: str, kind: str) -> None:
    for n in names.split():
        _FLAGS[n] = (fieldname, kind)


_reg("-m --model", "model", "str")
_reg("-c --ctx-size", "ctx", "int")
_reg("-ngl --gpu-layers --n-gpu-layers", "ngl", "ngl")
_reg("-sm --split-mode", "split_mode", "str")
_reg("-dev --device", "devices", "devlist")
_reg("-ts --tensor-split", "tensor_split", "ts")
_reg("-mg --main-gpu", "main_gpu", "int")
_reg("-ot --override-tensor", "overrides", "ot")
_reg("-cmoe --cpu-moe", "overrides", "cmoe")
_reg("-ncmoe --n-cpu-moe", "overrides", "ncmoe")
_reg("-ncffn --n-cpu-ffn", "overrides", "ncffn")
_reg("-ctk --cache-type-k", "cache_type_k", "str")
_reg("-ctv --cache-type-v", "cache_type_v", "str")
_reg("-fa --flash-attn", "flash_attn", "fa")
_reg("-np --parallel", "n_parallel", "int")
_reg("-kvu --kv-unified", "kv_unified", "true")
_reg("-no-kvu --no-kv-unified", "kv_unified", "false")
_reg("--swa-full", "swa_full", "true")
_reg("-b --batch-size", "n_batch", "int")
_reg("-ub --ubatch-size", "n_ubatch", "int")
_reg("-nkvo --no-kv-offload", "no_kv_offload", "true")
_reg("-kvo --kv-offload", "no_kv_offload", "false")
_reg("--no-op-offload", "op_offload", "false")
_reg("-fit --fit", "fit", "onoff")
_reg("-fitt --fit-target", "fit_target_mib", "intlist")
_reg("-fitc --fit-ctx", "fit_ctx_min", "int")
_reg("-lm --load-mode", "load_mode", "str")
_reg("--no-host", "no_host", "true")
_reg("--no-repack -nr", "repack", "false")
_reg("--repack", "repack", "true")
_reg("--embedding --embeddings", "embeddings", "true")
_reg("-cram --cache-ram", "cache_ram_mib", "int")
_reg("--spec-type", "spec_types", "spec")
_reg("-md --model-draft --spec-draft-model", "draft_model", "str")
_reg("-ngld --gpu-layers-draft --n-gpu-layers-draft --spec-draft-ngl", "draft_ngl", "ngl")
_reg("--spec-draft-n-max", "draft_n_max", "int")
_reg("-devd --device-draft --spec-draft-device", "draft_devices", "devlist")
_reg("-ctkd --cache-type-k-draft --spec-draft-type-k", "draft_cache_type_k", "str")
_reg("-ctvd --cache-type-v-draft --spec-draft-type-v", "draft_cache_type_v", "str")
# flags that take a value but do not matter for memory (so their value is not taken for a flag)
_VALUE_FLAGS_IGNORED = set(
    "-t --threads -tb --threads-batch --host --port -a --alias --api-key --api-key-file -n --predict "
    "--temp --top-k --top-p --min-p --seed -s --repeat-penalty --presence-penalty --frequency-penalty "
    "--chat-template --chat-template-file --chat-template-kwargs --reasoning-format -rea --reasoning "
    "--reasoning-effort --reasoning-budget -to --timeout --threads-http --cache-reuse "
    "-lv --verbosity --log-verbosity --log-file --mmproj -mm --mmproj-url -hf --hf-repo -hff --hf-file "
    "--slot-save-path --sleep-idle-seconds --spec-draft-n-min --spec-draft-p-min --draft-p-min "
    "--spec-draft-sampling --rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx "
    "--grp-attn-n --grp-attn-w -dt --defrag-thold --keep --api-prefix --path --lora --lora-scaled "
    "--control-vector -C --cpu-mask -Cb --cpu-mask-batch --prio --prio-batch --poll --numa "
    "--log-colors -sp --special --spec-ngram-mod-n-min --spec-ngram-mod-n-max --spec-ngram-mod-n-match "
    "--ssl-key-file --ssl-cert-file -cb -fitp --fit-print --reasoning-budget-message --media-path "
    "--sse-ping-interval --webui-config --webui-config-file --tools -ctxcp --ctx-checkpoints "
    "--spec-ngram-simple-size-n --spec-ngram-simple-size-m --spec-ngram-map-k-size-n "
    "--spec-ngram-map-k-size-m --spec-ngram-map-k4v-size-n --spec-ngram-map-k4v-size-m".split())


def parse_server_args(argv: list[str] | tuple[str, ...] | str) -> PlacementArgs:
    """llama-server arguments -> PlacementArgs (aliases, `--flag=value`, `_` for `-` in long flags).

    Flags that do not affect memory are skipped; unknown flags are kept in `unknown`. A repeated
    flag keeps its last value (as llama.cpp), except `-ot`/`-cmoe`/`-ncmoe`/`--spec-type` which add up.
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
        if a.startswith("--"):
            a = "--" + a[2:].replace("_", "-")
        spec_ = _FLAGS.get(a)
        if spec_ is None:
            if a in _VALUE_FLAGS_IGNORED and value is None:
                i += 2
            else:
                unknown.append(args[i])
                i += 1
            continue
        name, kind = spec_
        takes_value = kind not in ("true", "false", "cmoe")
        if takes_value and value is None:
            if i + 1 >= len(args):
                raise ValueError(f"{a} needs a value")
            value = args[i + 1]
            i += 2
        else:
            i += 1
        if kind == "int":
            kw[name] = int(value)
            if name == "ctx":
                ctx_given = True
        elif kind == "str":
            kw[name] = value
        elif kind == "ngl":
            kw[name] = _parse_ngl(value)
        elif kind == "true":
            kw[name] = True
        elif kind == "false":
            kw[name] = False
        elif kind == "onoff":
            kw[name] = _bool_arg(value)
        elif kind == "fa":
            kw[name] = {"1": "on", "true": "on", "0": "off", "false": "off", "-1": "auto"}.get(value.lower(),
                                                                                              value.lower())
        elif kind == "devlist":
            kw[name] = () if value.strip().lower() == "none" else tuple(
                d.strip() for d in value.split(",") if d.strip())
        elif kind == "ts":
            kw[name] = tuple(float(x) for x in re.split(r"[,/]", value) if x.strip())
        elif kind == "intlist":
            kw[name] = tuple(int(x) for x in value.split(",") if x.strip())
        elif kind == "ot":
            for part in value.split(","):
                if "=" not in part:
                    raise ValueError(f"invalid -ot rule {part!r} (want <regex>=<buffer>)")
                pat, buf = part.split("=", 1)
                overrides.append((pat, buf))
        elif kind == "cmoe":
            overrides.append((FFN_EXPS_REGEX, "CPU"))
        elif kind == "ncmoe":
            overrides.extend((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(int(value)))
        elif kind == "ncffn":
            overrides.extend((rf"blk\.{j}{FFN_DENSE_REGEX}", "CPU") for j in range(int(value)))
        elif kind == "spec":
            spec.extend(s.strip() for s in value.split(",") if s.strip() and s.strip() != "none")
    if overrides:
        kw["overrides"] = tuple(overrides)
    if spec:
        kw["spec_types"] = tuple(spec)
    if "ctx" in kw and not ctx_given:
        del kw["ctx"]
    kw["unknown"] = tuple(unknown)
    return PlacementArgs(**kw)


def args_from_profile(profile: Any) -> PlacementArgs:
    """core.profile.LaunchProfile (duck-typed) -> PlacementArgs; unknown flags in extra_args are parsed too."""
    g = lambda name, default=None: getattr(profile, name, default)  # noqa: E731
    kw: dict[str, Any] = {}
    if g("model"):
        kw["model"] = g("model")
    if g("ctx_size") is not None:
        kw["ctx"] = int(g("ctx_size"))
    ngl = g("gpu_layers")
    if ngl is not None:
        kw["ngl"] = _parse_ngl(str(ngl))
    for src, dst in (("split_mode", "split_mode"), ("cache_type_k", "cache_type_k"),
                     ("cache_type_v", "cache_type_v"), ("flash_attn", "flash_attn"), ("load_mode", "load_mode"),
                     ("main_gpu", "main_gpu"), ("parallel", "n_parallel"), ("kv_unified", "kv_unified"),
                     ("batch_size", "n_batch"), ("ubatch_size", "n_ubatch"), ("fit_ctx", "fit_ctx_min"),
                     ("draft_model", "draft_model"), ("draft_n_max", "draft_n_max"), ("cache_ram_mib", "cache_ram_mib"),
                     ("draft_cache_type_k", "draft_cache_type_k"), ("draft_cache_type_v", "draft_cache_type_v")):
        v = g(src)
        if v is not None:
            kw[dst] = v
    if g("devices"):
        devs = tuple(g("devices"))
        kw["devices"] = () if devs == ("none",) else devs
    if g("tensor_split"):
        kw["tensor_split"] = tuple(float(x) for x in g("tensor_split"))
    if g("swa_full"):
        kw["swa_full"] = True
    if g("kv_offload") is False:
        kw["no_kv_offload"] = True
    if g("fit") is not None:
        kw["fit"] = bool(g("fit"))
    if g("fit_target_mib"):
        kw["fit_target_mib"] = tuple(int(x) for x in g("fit_target_mib"))
    if g("draft_gpu_layers") is not None:
        kw["draft_ngl"] = _parse_ngl(str(g("draft_gpu_layers")))
    if g("draft_device"):
        kw["draft_devices"] = tuple(g("draft_device"))
    spec = tuple(s for s in (g("spec_type") or ()) if s != "none")
    if spec:
        kw["spec_types"] = spec
    overrides = [(r.pattern, r.buffer) for r in (g("override_tensor") or ())]
    if g("cpu_moe"):
        overrides.append((FFN_EXPS_REGEX, "CPU"))
    if g("n_cpu_moe"):
        overrides.extend((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(int(g("n_cpu_moe"))))
    extra = list(g("extra_args") or ())
    base = PlacementArgs(**kw)
    if extra:
        parsed = parse_server_args(extra)
        changes = {f: getattr(parsed, f) for f in parsed.__dataclass_fields__
                   if getattr(parsed, f) != getattr(PlacementArgs(), f) and f not in ("unknown", "overrides")}
        base = replace(base, **changes)
        overrides.extend(parsed.overrides)
    if overrides:
        base = replace(base, overrides=tuple(overrides))
    return base


def placement_argv(args: PlacementArgs, *, for_fit_params: bool = False) -> list[str]:
    """PlacementArgs -> llama-server arguments (only what differs from the defaults).

    `for_fit_params` leaves out what llama-fit-params does not accept (`-kvu`, speculative flags) and
    the `-fit` switch, so the same question can be asked of `llama-fit-params`.
    """
    d = PlacementArgs()
    out: list[str] = []
    if args.model:
        out += ["-m", args.model]
    if args.ctx is not None:
        out += ["-c", str(args.ctx)]
    if args.ngl is not None:
        out += ["-ngl", {-1: "auto", -2: "all"}.get(args.ngl, str(args.ngl))]
    if args.split_mode != d.split_mode:
        out += ["-sm", args.split_mode]
    if args.devices is not None:
        out += ["-dev", ",".join(args.devices) or "none"]
    if args.tensor_split:
        out += ["-ts", ",".join(f"{x:g}" for x in args.tensor_split)]
    if args.main_gpu:
        out += ["-mg", str(args.main_gpu)]
    if args.overrides:
        out += ["-ot", ",".join(f"{p}={b}" for p, b in args.overrides)]
    for flag, name in (("-ctk", "cache_type_k"), ("-ctv", "cache_type_v"), ("-fa", "flash_attn"),
                       ("-b", "n_batch"), ("-ub", "n_ubatch"), ("-lm", "load_mode")):
        if getattr(args, name) != getattr(d, name):
            out += [flag, str(getattr(args, name))]
    if args.n_parallel not in (-1, None):
        out += ["-np", str(args.n_parallel)]
    if args.kv_unified is not None and not for_fit_params:
        out.append("-kvu" if args.kv_unified else "-no-kvu")
    if args.swa_full:
        out.append("--swa-full")
    if args.no_kv_offload:
        out.append("-nkvo")
    if not args.op_offload:
        out.append("--no-op-offload")
    if args.no_host:
        out.append("--no-host")
    if not args.repack:
        out.append("--no-repack")
    if args.fit_target_mib != d.fit_target_mib:
        out += ["-fitt", ",".join(str(x) for x in args.fit_target_mib)]
    if args.fit_ctx_min != d.fit_ctx_min:
        out += ["-fitc", str(args.fit_ctx_min)]
    if args.cache_ram_mib != d.cache_ram_mib and not for_fit_params:
        out += ["-cram", str(args.cache_ram_mib)]
    if not for_fit_params:
        if not args.fit:
            out += ["-fit", "off"]
        if args.spec_types:
            out += ["--spec-type", ",".join(args.spec_types)]
        if args.draft_model:
            out += ["-md", args.draft_model]
    return out
