"""The one table of the tune's knobs (`KNOBS`): what each is, in one row, as OBJECTIVES is for objectives.

A row says: the knob's `key` (what the CLI's `--only` and a trial's values name), its `flags` (core.flags keys
set together: "cache_type_k+cache_type_v" is one matched pair; "placement" a frontier placement), its
interaction `group` (which decisions a change re-opens: core.tune.search.interacts), its race `order`
(placement and memory first: they decide what fits and every later figure depends on them), its `quality`
check (None, PERPLEXITY: the numbers change, llama-perplexity judges; OUTPUT: the output at --temp 0 must not
change), its `memory` relevance (whether the memory plan judges a value before a start: a value that does not
fit is pruned), and its `propose` function (the values worth racing on this model, binary and devices; None:
not proposed here).

core.tune.knobs proposes by asking every row in table order, core.tune.search orders and pairs knobs by
`order` and `group`, core.tune.quality checks the flags of the rows with a check. A new knob is one row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PERPLEXITY = "perplexity"  # the candidate's numbers change: llama-perplexity against the baseline's
OUTPUT = "output"  # the output at --temp 0 must be the baseline's (speculative decoding)

# Interaction groups (core.tune.search.interacts): placement interacts with everything but threads and
# speculation; memory knobs with each other; a pair group only with itself; "own" with nothing else.
G_PLACEMENT, G_MEMORY, G_SPEC, G_THREADS, G_OWN = "placement", "memory", "speculation", "threads", "own"


@dataclass(frozen=True)
class ProposeContext:
    """What a proposer sees: the model's header, the binary's --help (None: unknown, every flag assumed), the
    GPUs, the base argv, the objective, whether the base does not fit, the host's physical cores, the
    placement frontier (the fitting ones, fastest first) and the facts derived from these once."""

    model: Any
    catalog: Any
    gpus: Sequence[Any]
    argv: Sequence[str]
    objective: Any = None
    needs_offload: bool = False
    cpu_threads: int | None = None
    placement: Sequence[Any] = ()
    fitting: Sequence[Any] = ()
    cpu_computes: bool = False
    prompts: bool = True  # prompt processing counts for the objective (batches are raced)
    # weights are computed from host memory (batches decide the copies to the GPU)
    weights_on_host: bool = False


Proposer = Callable[[ProposeContext], Any]  # -> core.tune.model.Knob | None


@dataclass(frozen=True)
class KnobRow:
    """One knob: see the module docstring."""

    key: str
    flags: str
    group: str
    order: int
    propose: Proposer | None = None
    quality: str | None = None
    memory: bool = False

    @property
    def flag_keys(self) -> tuple[str, ...]:
        return tuple(self.flags.split("+"))


KNOBS: dict[str, KnobRow] = {}


def register(*rows: KnobRow) -> None:
    """Add rows to KNOBS (core.tune.knobs registers the built-in ones with their proposers)."""
    for r in rows:
        KNOBS[r.key] = r


def row_of_flag(flag: str) -> KnobRow | None:
    """The row whose flags are `flag` (a knob's flag: "ubatch_size", "cache_type_k+cache_type_v"), else
    None."""
    return next((r for r in KNOBS.values() if r.flags == flag), None) or next(
        (r for r in KNOBS.values() if flag in r.flag_keys and len(r.flag_keys) == 1), None)


def order_of(flag: str) -> int | None:
    """The race order of a knob's flag (None: a flag the table does not hold, e.g. a custom knob: last)."""
    r = row_of_flag(flag)
    if r is not None:
        return r.order
    parts = flag.split("+")
    orders = [r.order for p in parts if (r := row_of_flag(p)) is not None]
    return min(orders) if orders else None


def group_of(flag: str) -> str | None:
    r = row_of_flag(flag)
    if r is not None:
        return r.group
    groups = {r.group for p in flag.split("+") if (r := row_of_flag(p)) is not None}
    return groups.pop() if len(groups) == 1 else None


def checked_keys(check: str) -> tuple[str, ...]:
    """The core.flags keys of every row with this quality check (PERPLEXITY, OUTPUT), in table order."""
    out: list[str] = []
    for r in KNOBS.values():
        if r.quality == check:
            out += [k for k in r.flag_keys if k not in out]
    return tuple(out)


def memory_keys() -> tuple[str, ...]:
    """The flags whose values the memory plan judges before a start."""
    return tuple(k for r in KNOBS.values() if r.memory for k in r.flag_keys)
