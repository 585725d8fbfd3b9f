"""Which knobs a tune proposes (every row of core.tune.knob_table.KNOBS asked in turn) and the CLI's knob syntax.

The rules of each built-in knob are its proposer in core.tune.proposers (one row each); a new knob is one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.cmdline.help import FlagCatalog
from llm_tuner.core.tune.frontier import Placement
from llm_tuner.core.tune.knob_table import KNOBS, ProposeContext
from llm_tuner.core.tune.model import Knob
from llm_tuner.core.tune.objectives import PROMPT, Objective
from llm_tuner.core.tune.proposers import (  # re-exported: the knob constants' one home is proposers
    KV_PAIR,
    KV_TYPES,
    MAX_PLACEMENTS,
    PLACEMENT_KNOB,
    allowed_values,
)

__all__ = ["ABSENT", "KV_PAIR", "KV_TYPES", "MAX_PLACEMENTS", "PLACEMENT_KNOB", "allowed_values", "parse_knob",
           "propose_knobs"]

ABSENT = ("default", "none()", "-")  # CLI words for "flag absent"


def _int(v: str | None, default: int) -> int:
    try:
        return int(v) if v is not None else default
    except ValueError:
        return default


def propose_knobs(model_info: Any, catalog: FlagCatalog | None, devices: Sequence[Any],
                  base_argv: Sequence[str], *, objective: Objective | None = None, needs_offload: bool = False,
                  cpu_threads: int | None = None, placement: Sequence[Placement] = ()) -> list[Knob]:
    """Knobs worth racing for this model, binary and devices (GPU devices: objects with `.name`): every KNOBS row's
    proposer asked in table order.

    `placement`: the placement frontier (core.tune.frontier), given when the base computes weights on the CPU
    beside GPUs: one knob races the placements that fit jointly with their K/V types (PLACEMENT_KNOB, the
    fastest predicted first, at most MAX_PLACEMENTS), instead of separate K/V, -ngl and -ot knobs; threads
    follow (the CPU computes). `needs_offload`: the base does not fit at all (the plan says so) - the older
    per-flag placement knobs. `cpu_threads`: the CPU's physical cores (None: unknown, no thread knobs)."""
    argv = list(base_argv)
    gpus = list(devices)
    ngl = flags.value_of(argv, "gpu_layers")
    fitting = [p for p in placement if p.fits]
    ctx = ProposeContext(
        model=model_info, catalog=catalog, gpus=gpus, argv=argv, objective=objective, needs_offload=needs_offload,
        cpu_threads=cpu_threads, placement=tuple(placement), fitting=tuple(fitting),
        cpu_computes=not gpus or (ngl is not None and _int(ngl, 999) == 0) or needs_offload or bool(placement),
        prompts=objective is None or objective.uses(PROMPT),
        weights_on_host=bool(gpus) and (bool(fitting) or needs_offload))
    out: list[Knob] = []
    for row in list(KNOBS.values()):
        if row.propose is None:
            continue
        knob = row.propose(ctx)
        if knob is not None and knob.values:
            out.append(knob)
    return out


def parse_knob(text: str) -> Knob:
    """The CLI's `--knob`: `ub=64,128,256` (a flag's short or long name, or a flags key), `kv=f16,q8_0` (matched
    K/V pair), `custom:--alias=a,b` (any flag, as typed). `default` as a value means the flag absent; ';'
    separates values that contain ','."""
    name, sep, vals = text.partition("=")
    if name.startswith("custom:"):
        flag = name[len("custom:"):]
        if not flag.startswith("-"):
            raise ValueError(f"--knob {text!r}: a custom knob names a flag with its dashes (custom:--alias=a,b)")
        key_name, flag_name = f"custom:{flag}", flag
    else:
        key_name = name.strip().lstrip("-")
        if key_name in ("kv", KV_PAIR):
            flag_name = KV_PAIR
        else:
            hit = flags.lookup(name if name.startswith("-") else ("-" if len(key_name) <= 4 else "--") + key_name)
            if hit is None:
                hit = flags.lookup(("--" if len(key_name) <= 4 else "-") + key_name)
            if hit is None:
                try:
                    flag_name = flags.flag(key_name).key
                except KeyError:
                    raise ValueError(f"--knob {text!r}: {name!r} is not a llama-server flag; use custom:--flag=a,b "
                                     "for a flag this tool does not know") from None
            else:
                flag_name = hit[0].key
    if not sep or not vals.strip():
        raise ValueError(f"--knob {text!r}: give values after '=' (e.g. ub=64,128,256)")
    parts = vals.split(";") if ";" in vals else vals.split(",")
    values = tuple(None if p.strip() in ABSENT else p.strip() for p in parts if p.strip())
    return Knob(key=key_name, flag=flag_name, values=values, reason="given by the user")
