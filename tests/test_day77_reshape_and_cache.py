"""Day 77 grader: reshape-and-cache, a thread per element and a block per token."""

import re

import numpy as np
import pytest

from course.grading import Grader
from solutions.day76_block_tables import BlockManager
from solutions.day76_block_tables import optimized as gather

g = Grader(77)


def _with_slot(xs, index, value):
    slots = xs[3].copy()
    slots[index] = value
    return xs[:3] + (slots,)


def _first_real(xs):
    return int(np.flatnonzero(xs[3] >= 0)[0])


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "slot-past-cache": lambda xs: _with_slot(xs, _first_real(xs), xs[2].shape[1] * xs[2].shape[2]),
        "duplicate-slot": lambda xs: _with_slot(xs, -1 if _first_real(xs) != xs[3].size - 1 else 0,
                                                xs[3][_first_real(xs)]),
        "value-shape-differs": lambda xs: (xs[0], xs[1][:-1], xs[2], xs[3]),
        "slots-shorter": lambda xs: xs[:3] + (xs[3][:-1],),
        "slots-int32": lambda xs: xs[:3] + (xs[3].astype(np.int32),),
        "heads-mismatch": lambda xs: (xs[0][:, :, :-1].copy(), xs[1][:, :, :-1].copy(), xs[2], xs[3]),
        "key-float32-cache-float16": lambda xs: (xs[0].astype(np.float32), xs[1].astype(np.float32),
                                                 xs[2], xs[3]),
    }
)


def test_padding_tokens_write_nothing():
    """Only padding: the cache comes back exactly as it went in (NaN slots included)."""
    g.require_implemented(*g.versions)
    key, value, kv_cache, slots = g.solution.make_inputs(12, seed=3)
    slots = np.full_like(slots, -1)
    for version in g.versions:
        out = getattr(g.target, version)(key, value, kv_cache, slots)
        assert np.array_equal(out, kv_cache, equal_nan=True), f"{version}: a padding token was written"


def test_index_math_and_word_copies():
    """Naive: per-element div/mod. Optimized: 64-bit word copies, no per-element index division."""
    naive, opt = g.report("naive"), g.report("optimized")

    def divisions(ptx):
        return len(re.findall(r"^\s*(?:@!?%\w+\s+)?(?:div|rem)\.[su]\d+", ptx, flags=re.M))

    assert divisions(naive.ptx) >= 4
    assert divisions(opt.ptx) < divisions(naive.ptx)
    assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", opt.ptx, flags=re.M), "optimized: no 64-bit word loads"
    for rep in (naive, opt):
        assert not rep.uses_local_memory


def test_round_trip_with_day76():
    """Prompts placed by a BlockManager, written by this kernel, read back by day 76's gather."""
    g.require_implemented("optimized")
    rng = np.random.default_rng(1)
    bm = BlockManager(num_blocks=10, block_size=4)
    kv_cache = np.full((2, 10, 4, 2, 8), np.nan, dtype=np.float16)
    prompts = {"a": 7, "b": 4, "c": 10}
    keys, values, slots = [], [], []
    for seq, n in prompts.items():
        bm.allocate(seq, n)
        keys.append(rng.standard_normal((n, 2, 8)).astype(np.float16))
        values.append(rng.standard_normal((n, 2, 8)).astype(np.float16))
        slots += bm.slot_mapping(seq) + [-1]  # a padding token after each prompt
        keys.append(np.zeros((1, 2, 8), np.float16))
        values.append(np.zeros((1, 2, 8), np.float16))
    kv_cache = g.target.optimized(np.concatenate(keys), np.concatenate(values), kv_cache,
                                  np.array(slots, dtype=np.int64))
    for k, (seq, n) in enumerate(prompts.items()):
        table = np.array(bm.block_table(seq), dtype=np.int32)
        got = gather(kv_cache, table, n)
        assert np.array_equal(got[0], keys[2 * k]) and np.array_equal(got[1], values[2 * k]), seq


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
