"""Day 76 grader: BlockManager (host, checked against a model after every step) and the page gather."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(76)
M = g.target  # the module under test: its BlockManager is graded directly

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "context-len-zero": lambda xs: (xs[0], xs[1], 0),
        "context-beyond-table": lambda xs: (xs[0], xs[1], xs[1].shape[0] * xs[0].shape[2] + 1),
        "context-len-float": lambda xs: (xs[0], xs[1], float(xs[2])),
        "block-id-outside-cache": lambda xs: (xs[0], np.where(np.arange(xs[1].size) == 0, xs[0].shape[1],
                                                              xs[1]).astype(np.int32), xs[2]),
        "negative-block-id": lambda xs: (xs[0], np.where(np.arange(xs[1].size) == 0, -1,
                                                         xs[1]).astype(np.int32), xs[2]),
        "table-2d": lambda xs: (xs[0], xs[1][None, :], xs[2]),
        "cache-4d": lambda xs: (xs[0][0], xs[1], xs[2]),
    }
)


def test_optimized_needs_no_division_and_moves_words():
    """The naive kernel divides for every element; the optimized one loads 8-byte words, and its only
    division is the one the compiler adds to count the copy loop's trips (once per thread)."""
    naive, opt = g.report("naive"), g.report("optimized")

    def divisions(ptx):
        return len(re.findall(r"^\s*(?:@!?%\w+\s+)?(?:div|rem)\.[su]\d+", ptx, flags=re.M))

    assert divisions(naive.ptx) >= 4, "naive: expected the per-element div/mod index math"
    assert divisions(opt.ptx) < divisions(naive.ptx), "optimized: as much index division as the naive kernel"
    assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", opt.ptx, flags=re.M), "optimized: no 64-bit word loads"
    for rep in (naive, opt):
        assert not rep.uses_local_memory


def test_gather_through_a_block_manager():
    """End to end: the manager places tokens, the kernel reads them back in order."""
    g.require_implemented("optimized")
    rng = np.random.default_rng(0)
    bm = M.BlockManager(num_blocks=12, block_size=4)
    kv_cache = np.full((2, 12, 4, 2, 8), np.nan, dtype=np.float16)
    tokens = {}
    for seq, prompt in (("a", 5), ("b", 3), ("c", 9)):
        bm.allocate(seq, prompt)
        tokens[seq] = rng.standard_normal((2, prompt, 2, 8)).astype(np.float16)
    for _ in range(6):  # decode steps interleave the sequences' pages
        for seq in tokens:
            slot = bm.append_slot(seq)
            new = rng.standard_normal((2, 1, 2, 8)).astype(np.float16)
            tokens[seq] = np.concatenate([tokens[seq], new], axis=1)
            kv_cache.reshape(2, -1, 2, 8)[:, slot] = new[:, 0]
    for seq, want in tokens.items():
        slots = bm.slot_mapping(seq, 0, bm.num_tokens(seq) - 6)
        kv_cache.reshape(2, -1, 2, 8)[:, slots] = want[:, :len(slots)]
        table = np.array(bm.block_table(seq) + [999], dtype=np.int32)
        got = g.target.optimized(kv_cache, table, want.shape[1])
        assert np.array_equal(got, want), f"sequence {seq}: gathered tokens differ"


# --- BlockManager against a model --------------------------------------------------------------------

STEP = st.tuples(st.sampled_from(["allocate", "append", "append", "append", "free"]),
                 st.integers(0, 7), st.integers(0, 40))


def _snapshot(bm, seqs):
    return bm.num_free_blocks, {s: bm.block_table(s) for s in seqs}


def _check_invariants(bm, model, num_blocks, block_size):
    owned = [b for s in model for b in bm.block_table(s)]
    assert len(owned) == len(set(owned)), "a block is owned twice"
    assert all(0 <= b < num_blocks for b in owned)
    assert bm.num_free_blocks + len(owned) == num_blocks, "free + owned != total: a block leaked"
    for s, n in model.items():
        assert len(bm.block_table(s)) == -(-n // block_size), f"seq {s}: {n} tokens, wrong table length"


@settings(max_examples=40, deadline=None)
@given(num_blocks=st.integers(1, 16), block_size=st.integers(1, 5), steps=st.lists(STEP, max_size=150))
def test_block_manager_matches_model(num_blocks, block_size, steps):
    bm = M.BlockManager(num_blocks, block_size)
    model = {}  # seq_id -> number of tokens
    slots = {}  # seq_id -> slots handed out so far, in token order
    for op, seq, n in steps:
        before = _snapshot(bm, model)
        if op == "allocate":
            if seq in model:
                with pytest.raises(ValueError):
                    bm.allocate(seq, n)
            elif -(-n // block_size) > before[0]:
                with pytest.raises(M.OutOfBlocksError):
                    bm.allocate(seq, n)
                assert _snapshot(bm, model) == before, "OutOfBlocksError changed the manager"
            else:
                bm.allocate(seq, n)
                model[seq] = n
                slots[seq] = bm.slot_mapping(seq)
        elif op == "append":
            if seq not in model:
                with pytest.raises(KeyError):
                    bm.append_slot(seq)
            elif model[seq] % block_size == 0 and before[0] == 0:
                with pytest.raises(M.OutOfBlocksError):
                    bm.append_slot(seq)
                assert _snapshot(bm, model) == before, "OutOfBlocksError changed the manager"
            else:
                slot = bm.append_slot(seq)
                table, pos = bm.block_table(seq), model[seq]
                assert slot == table[pos // block_size] * block_size + pos % block_size, "wrong slot"
                model[seq] += 1
                slots[seq].append(slot)
        else:
            if seq not in model:
                with pytest.raises(KeyError):
                    bm.free(seq)
            else:
                bm.free(seq)
                del model[seq], slots[seq]
                with pytest.raises(KeyError):
                    bm.block_table(seq)
        _check_invariants(bm, model, num_blocks, block_size)
        live = [x for s in slots.values() for x in s]
        assert len(live) == len(set(live)), "two live tokens share a slot"


def test_block_manager_basics():
    bm = M.BlockManager(num_blocks=3, block_size=4)
    bm.allocate(7, 5)  # two pages, five tokens
    assert len(bm.block_table(7)) == 2 and bm.num_free_blocks == 1
    first = bm.block_table(7)
    assert bm.append_slot(7) == first[1] * 4 + 1  # token 5: page 1, offset 1
    with pytest.raises(M.OutOfBlocksError):
        bm.allocate(8, 5)
    assert bm.num_free_blocks == 1 and bm.block_table(7) == first
    with pytest.raises(ValueError):
        bm.allocate(7, 1)
    with pytest.raises(KeyError):
        bm.free(9)
    bm.free(7)
    assert bm.num_free_blocks == 3


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
