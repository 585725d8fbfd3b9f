"""core.tune.knob_table: a new knob is one row of KNOBS, and the proposer, the search's order and interactions
and the quality checks all read it."""

from contextlib import contextmanager

from llm_tuner.core.tune import Knob, coordinate_descent, order_knobs, propose_knobs
from llm_tuner.core.tune.knob_table import G_MEMORY, KNOBS, PERPLEXITY, KnobRow, register
from llm_tuner.core.tune.quality import changes_kv, check_of, perplexity_keys
from llm_tuner.core.tune.search import interacts
from llm_tuner.services.binaries import default_catalog


class _Model:
    block_count = 8
    context_length = 4096
    expert_count = 0
    nextn_layers = 0


@contextmanager
def extra_row(row: KnobRow):
    register(row)
    try:
        yield
    finally:
        KNOBS.pop(row.key, None)


def _swa_full(ctx):
    """A knob llama-server has and the tune did not race: --swa-full on or absent."""
    return Knob(key="swa", flag="swa_full", values=(None, ""), reason="full-size SWA cache")


def test_a_new_knob_is_one_row_proposed_ordered_and_checked():
    row = KnobRow("swa", "swa_full", G_MEMORY, 11.5, _swa_full, PERPLEXITY, memory=True)
    base = ["-m", "m.gguf"]
    before = {k.key for k in propose_knobs(_Model(), default_catalog(), [], base, cpu_threads=4)}
    assert "swa" not in before and "swa_full" not in perplexity_keys()
    with extra_row(row):
        knobs = propose_knobs(_Model(), default_catalog(), [], base, cpu_threads=4)
        keys = [k.key for k in knobs]
        assert "swa" in keys  # proposed
        ordered = [k.key for k in order_knobs(knobs)]
        # ordered by its row: after the K/V pair (7), before the batches (12, 13) and threads (19)
        assert ordered.index("kv") < ordered.index("swa") < ordered.index("ub") < ordered.index("t")
        swa = next(k for k in knobs if k.key == "swa")
        ub = next(k for k in knobs if k.key == "ub")
        t = next(k for k in knobs if k.key == "t")
        assert interacts(swa, ub) and not interacts(swa, t)  # its group (memory) decides what a change re-opens
        # checked: a change of the flag is judged by llama-perplexity, as K/V types are
        assert check_of("swa_full") == PERPLEXITY
        assert changes_kv([*base, "--swa-full"], base)
        # the search races it in its place
        seen = []

        def evaluate(values, n, knob):
            seen.append(knob)
            return [10.0 + (1.0 if values.get("swa") == "" else 0.0)] * n

        best, _ = coordinate_descent(base, [swa, ub], evaluate, reps=1)
        assert best is not None and best["swa"] == "" and seen.index("swa") < seen.index("ub")
    assert "swa_full" not in perplexity_keys() and check_of("swa_full") is None


def test_every_built_in_row_has_a_distinct_order_and_its_flags_are_known():
    from llm_tuner.core import flags

    orders = [r.order for r in KNOBS.values()]
    assert len(orders) == len(set(orders))
    for r in KNOBS.values():
        for key in r.flag_keys:
            if key != "placement":
                flags.flag(key)  # a core.flags key (KeyError otherwise)
