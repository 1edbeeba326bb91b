"""Day 83 grader: copy-on-write in the BlockManager (checked against a model after every step) and one
decode step over forked samples: whole-sequence copies (naive) or one page while shared (optimized)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(83)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = 5e-4  # float32 softmax sums; a token written into a shared page is off by far more

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


def _full_table(xs):
    """Contexts of 12 tokens in tables of 3 pages of 4: the new tokens have nowhere to go."""
    return xs[:2] + (np.ascontiguousarray(xs[2][:, :3]), np.full_like(xs[3], 12)) + xs[4:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    Config(3, 2, 1, 32, 4, 10, 0, "float32"),
    extra_cases={
        "cache-not-kv-pair": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:1])),
        "new-kv-wrong-samples": lambda xs: _replace(xs, 5, np.ascontiguousarray(xs[5][:, :-1])),
        "new-kv-dtype-differs": lambda xs: _replace(xs, 5, xs[5].astype(np.float16)),
        "too-few-free-blocks": lambda xs: _replace(xs, 6, np.ascontiguousarray(xs[6][:1])),
        "free-block-in-use": lambda xs: _replace(xs, 6, np.concatenate([xs[2][:1, :1].ravel(), xs[6][1:]])),
        "no-room-in-table": _full_table,
        "context-zero": lambda xs: _replace(xs, 3, np.zeros_like(xs[3])),
    },
)


def test_copy_on_write_copies_one_page_per_shared_append():
    """Right after a fork of a prompt that ends mid-page, every sample but the last owner of the tail
    page copies it: one page each with copy-on-write, the whole sequence each in the naive plan. Then
    the kernels: 8-byte word copies and writes, and day 78's warp attention."""
    cfg = Config(5, 2, 1, 32, 4, 10, 0)
    got = M.pages_copied(cfg, seed=1)
    pages = math.ceil(cfg.prompt_len / cfg.block_size)
    assert got == {"naive": (cfg.num_samples - 1) * pages, "optimized": cfg.num_samples - 1}, got
    assert M.pages_copied(Config(5, 2, 1, 32, 4, 12, 0), seed=1) == {"naive": 0, "optimized": 0}, \
        "a prompt that fills its last page leaves nothing shared to write into"
    for version in sol.VERSIONS:
        copy, write, attn = (g.report(f"{version}.{k}") for k in ("copy_blocks", "write", "attention"))
        assert "ld.u64" in copy.ptx or "ld.global.u64" in copy.ptx, f"{version}: copies should move 8-byte words"
        assert attn.count("shfl.sync") > 0 and attn.count("bar.sync") > 0
        for rep in (copy, write, attn):
            assert rep.stack_bytes == 0, f"{rep.name}: {rep.stack_bytes} B of local memory"


def test_fork_then_append_basics():
    bm = M.BlockManager(num_blocks=6, block_size=4)
    bm.allocate("p", 6)
    full, tail = bm.block_table("p")
    bm.fork("p", "c")
    assert bm.block_table("c") == [full, tail] and bm.take_copies() == [], "fork copies nothing"
    assert bm.ref_count(tail) == 2
    slot = bm.append_slot("c")  # lands in the shared tail page: copy it first
    new = bm.block_table("c")[1]
    assert new != tail and slot == new * 4 + 2 and bm.take_copies() == [(tail, new)]
    assert bm.ref_count(tail) == 1 and bm.ref_count(new) == 1
    assert bm.append_slot("p") == tail * 4 + 2 and bm.take_copies() == [], "the last owner writes in place"
    for seq in ("p", "c"):
        bm.free(seq)
    assert bm.num_free_blocks == 6 and all(bm.ref_count(b) == 0 for b in range(6))


# --- BlockManager against a model ------------------------------------------------------------------------

STEP = st.tuples(st.sampled_from(["allocate", "allocate", "append", "append", "append", "fork", "fork", "free"]),
                 st.integers(0, 3), st.integers(0, 3), st.integers(0, 10))


def _state(bm, model):
    return bm.num_free_blocks, {s: (bm.block_table(s), bm.num_tokens(s)) for s in model}


def _expect_failure(bm, model, error, method, *args):
    before = _state(bm, model)
    with pytest.raises(error):
        getattr(bm, method)(*args)
    assert _state(bm, model) == before, f"{getattr(error, '__name__', error)} changed the manager"
    assert bm.take_copies() == [], "a failed call left a page copy behind"


def _check_invariants(bm, model, num_blocks):
    owners = {}
    for s, n in model.items():
        table = bm.block_table(s)
        assert len(table) == -(-n // bm.block_size), f"sequence {s}: wrong number of pages"
        for b in table:
            owners[b] = owners.get(b, 0) + 1
    for b in range(num_blocks):
        assert bm.ref_count(b) == owners.get(b, 0), f"block {b}: ref count {bm.ref_count(b)}, " \
            f"{owners.get(b, 0)} tables hold it"
    assert bm.num_free_blocks + len(owners) == num_blocks, "free + owned != total: a block leaked"


@settings(max_examples=80, deadline=None)
@given(num_blocks=st.integers(1, 16), block_size=st.integers(1, 4), steps=st.lists(STEP, max_size=80))
def test_copy_on_write_matches_model(num_blocks, block_size, steps):
    bm = M.BlockManager(num_blocks, block_size)
    model = {}  # seq_id -> tokens
    for op, a, b, n in steps:
        free = bm.num_free_blocks
        if op == "allocate":
            if a in model:
                _expect_failure(bm, model, ValueError, "allocate", a, n)
            elif -(-n // block_size) > free:
                _expect_failure(bm, model, M.OutOfBlocksError, "allocate", a, n)
            else:
                bm.allocate(a, n)
                model[a] = n
        elif op == "append":
            if a not in model:
                _expect_failure(bm, model, KeyError, "append_slot", a)
                continue
            table = bm.block_table(a)
            j = model[a] // block_size
            old = table[j] if j < len(table) else None
            shared = old is not None and bm.ref_count(old) > 1
            if (old is None or shared) and free == 0:
                _expect_failure(bm, model, M.OutOfBlocksError, "append_slot", a)
                continue
            before = bm.ref_count(old) if old is not None else 0
            slot = bm.append_slot(a)
            page = slot // block_size
            copies = bm.take_copies()
            assert bm.ref_count(page) == 1, "a token was written into a shared page"
            assert slot % block_size == model[a] % block_size and bm.block_table(a)[j] == page
            if shared:
                assert copies == [(old, page)], f"append into shared block {old}: expected one copy to {page}"
                assert bm.ref_count(old) == before - 1, "the other owners must keep the old page"
            else:
                assert copies == [], "a private or new page needs no copy"
                assert old is None or page == old, "a private page is written in place"
            model[a] += 1
        elif op == "fork":
            if a not in model or b in model:
                _expect_failure(bm, model, (KeyError, ValueError), "fork", a, b)
                continue
            bm.fork(a, b)
            assert bm.block_table(b) == bm.block_table(a) and bm.take_copies() == [], "fork shares every page"
            model[b] = model[a]
        else:
            if a not in model:
                _expect_failure(bm, model, KeyError, "free", a)
            else:
                bm.free(a)
                del model[a]
        _check_invariants(bm, model, num_blocks)
    for s in list(model):
        bm.free(s)
    assert bm.num_free_blocks == num_blocks and all(bm.ref_count(b) == 0 for b in range(num_blocks))


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version):
    """16 forks of a 4001-token prompt, head_dim 128: the size the benchmark times.

    Softmax over 4001 fp16 keys summed in float32 lands near 6e-4 of the float64 reference on the
    H200 (measured); 2e-3 still rejects a token written into a shared page, which is off by far more."""
    g.run_and_compare(version, sol.BENCH_SIZES[0], rtol=4 * RTOL)
