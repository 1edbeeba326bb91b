"""Day 75 grader: the block allocators (host) and the copy_blocks kernel (naive, optimized)."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(75)
A = g.target  # the module under test: its allocators are graded directly

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "cache-not-kv-pair": lambda xs: (np.concatenate([xs[0], xs[0][:1]]), xs[1]),
        "mapping-three-columns": lambda xs: (xs[0], np.ascontiguousarray(np.pad(xs[1], ((0, 0), (0, 1))))),
        "block-id-out-of-range": lambda xs: (xs[0], np.where(np.arange(xs[1].size).reshape(xs[1].shape) == 0,
                                                             xs[0].shape[1], xs[1]).astype(np.int32)),
        "negative-block-id": lambda xs: (xs[0], np.where(np.arange(xs[1].size).reshape(xs[1].shape) == 1,
                                                         -1, xs[1]).astype(np.int32)),
        "duplicate-destination": lambda xs: (xs[0], np.ascontiguousarray(
            np.concatenate([xs[1], xs[1][:1, ::-1][:, ::-1]]))),
        "destination-is-a-source": lambda xs: (xs[0], np.array([[1, 2], [2, 3]], dtype=np.int32)),
    }
)


def _word_loads(ptx: str, bits: int) -> int:
    return len(re.findall(rf"^\s*(?:@!?%\w+\s+)?ld\.(?:u|b|s|f){bits}\s", ptx, flags=re.M))


def test_optimized_copies_words_not_elements():
    """The naive kernel moves 2-byte float16 elements; the optimized one moves 8-byte words."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert _word_loads(opt.ptx, 64) > 0, "optimized: expected 64-bit word loads (view the page as uint64)"
    assert _word_loads(naive.ptx, 16) > 0, "naive: expected element-wise 16-bit loads"
    for rep in (naive, opt):
        assert not rep.uses_local_memory, f"{rep.name}: {rep.stack_bytes} bytes of stack"
        assert rep.count("ld.shared") == rep.count("bar.sync") == 0


def test_copies_leave_other_blocks_alone():
    """Blocks that are not destinations keep their bytes, including the sources."""
    g.require_implemented("optimized")
    kv, mapping = g.solution.make_inputs(9, seed=5)
    out = g.target.optimized(kv, mapping)
    untouched = np.setdiff1d(np.arange(kv.shape[1]), mapping[:, 1])
    assert np.array_equal(out[:, untouched], kv[:, untouched])


# --- the allocators --------------------------------------------------------------------------------------

OPS = st.lists(st.tuples(st.sampled_from(["alloc", "free", "incref"]), st.integers(0, 10_000)),
               min_size=1, max_size=300)


def _check_against_model(allocator, num_blocks, ops, refcounts: bool):
    owners = {}  # block -> owners (the model)
    for op, k in ops:
        if op == "alloc":
            if len(owners) == num_blocks:
                before = allocator.num_free_blocks
                with pytest.raises(A.NoFreeBlockError):
                    allocator.allocate()
                assert allocator.num_free_blocks == before
            else:
                b = allocator.allocate()
                assert 0 <= b < num_blocks and b not in owners, f"allocate() gave block {b}, already owned"
                owners[b] = 1
        elif op == "free" and owners:
            b = sorted(owners)[k % len(owners)]
            allocator.free(b)
            owners[b] -= 1
            if owners[b] == 0:
                del owners[b]
        elif op == "incref" and owners and refcounts:
            b = sorted(owners)[k % len(owners)]
            allocator.incref(b)
            owners[b] += 1
        assert allocator.num_free_blocks == num_blocks - len(owners)
        if refcounts:
            for b, c in owners.items():
                assert allocator.ref_count(b) == c


@settings(max_examples=60, deadline=None)
@given(num_blocks=st.integers(1, 12), ops=OPS)
def test_block_allocator_matches_model(num_blocks, ops):
    _check_against_model(A.BlockAllocator(num_blocks), num_blocks, ops, refcounts=True)


@settings(max_examples=40, deadline=None)
@given(num_blocks=st.integers(1, 12), ops=OPS)
def test_linear_scan_allocator_matches_model(num_blocks, ops):
    _check_against_model(A.LinearScanAllocator(num_blocks), num_blocks, ops, refcounts=False)


@pytest.mark.parametrize("cls", ["LinearScanAllocator", "BlockAllocator"])
def test_double_free_and_bad_ids_are_errors(cls):
    alloc = getattr(A, cls)(4)
    b = alloc.allocate()
    alloc.free(b)
    with pytest.raises(ValueError):
        alloc.free(b)
    with pytest.raises(ValueError):
        alloc.free(4)
    assert alloc.num_free_blocks == 4


def test_shared_block_returns_after_last_owner():
    alloc = A.BlockAllocator(3)
    b = alloc.allocate()
    alloc.incref(b)
    alloc.free(b)
    assert alloc.num_free_blocks == 2 and alloc.ref_count(b) == 1
    alloc.free(b)
    assert alloc.num_free_blocks == 3 and alloc.ref_count(b) == 0
    with pytest.raises(ValueError):
        alloc.incref(b)  # a free block cannot gain an owner


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
