"""Day 82 grader: SharingBlockManager (fork with ref counts, checked against a model after every step)
and one decode step over forked samples, with private copies (naive) or shared pages (optimized)."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(82)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = 5e-4  # float32 softmax sums over tens of terms; a wrong page is off by orders of magnitude

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


def _unshared_tables(xs):
    tables = xs[3].copy()
    tables[-1, 0] = xs[7][-1]  # the last sample's first page differs from the others'
    return _replace(xs, 3, tables)


test_rejects_bad_inputs = g.rejects_bad_inputs(
    Config(3, 2, 1, 32, 4, 10, 2, "float32"),
    extra_cases={
        "shared-blocks-past-table": lambda xs: _replace(xs, 6, xs[3].shape[1] + 1),
        "shared-blocks-negative": lambda xs: _replace(xs, 6, -1),
        "shared-blocks-float": lambda xs: _replace(xs, 6, float(xs[6])),
        "too-few-free-blocks": lambda xs: _replace(xs, 7, np.ascontiguousarray(xs[7][:1])),
        "free-block-in-use": lambda xs: _replace(xs, 7, np.concatenate([xs[3][:1, :1].ravel(), xs[7][1:]])),
        "tables-do-not-share": _unshared_tables,
        "context-zero": lambda xs: _replace(xs, 4, np.where(np.arange(len(xs[4])) == 0, 0, xs[4]).astype(np.int32)),
    },
)


def test_naive_plans_copies_optimized_only_attends():
    """naive: a plain indexing kernel plus 8-byte word copies; optimized: day 78's warp kernel alone."""
    plan, copy, opt = g.report("naive"), g.report("naive.copy_blocks"), g.report("optimized")
    assert plan.count("shfl.sync") == plan.count("ld.shared") == plan.count("bar.sync") == 0
    assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", copy.ptx, flags=re.M), "copy_blocks: no 64-bit word loads"
    assert opt.count("shfl.sync") > 0 and opt.count("bar.sync") > 0, "optimized: expected day 78's kernel"
    for rep in (plan, copy, opt):
        assert rep.stack_bytes == 0, f"{rep.name}: {rep.stack_bytes} B of local memory"


def test_fork_saves_memory():
    """After forking, shared pages count once: the prompt's full pages plus each sample's own pages."""
    g.require_implemented("optimized")
    cfg = Config(8, 2, 1, 32, 16, 100, 20)
    got = M.memory_report(cfg, seed=4)
    rng = np.random.default_rng(4)
    gen = [int(rng.integers(0, cfg.gen_len + 1)) for _ in range(cfg.num_samples)]
    full = cfg.prompt_len // cfg.block_size
    per_sample = [math.ceil((cfg.prompt_len + n) / cfg.block_size) for n in gen]
    assert got["copy_fork"] == sum(per_sample), "copy_fork: every sample should hold its whole context"
    assert got["fork"] == full + sum(p - full for p in per_sample), "fork: the full prompt pages count once"
    assert got["saved_share"] == pytest.approx(1 - got["fork"] / got["copy_fork"])


def test_fork_copies_only_a_partial_last_page():
    bm = M.SharingBlockManager(num_blocks=8, block_size=4)
    bm.allocate("p", 6)  # one full page, one with two tokens
    full, tail = bm.block_table("p")
    bm.fork("p", "c")
    child = bm.block_table("c")
    assert child[0] == full and child[1] != tail, "the full page is shared, the partial one is not"
    assert bm.ref_count(full) == 2 and bm.ref_count(tail) == 1 and bm.ref_count(child[1]) == 1
    assert bm.take_copies() == [(tail, child[1])] and bm.take_copies() == []
    bm.allocate("q", 8)  # two full pages
    bm.fork("q", "d")
    assert bm.block_table("d") == bm.block_table("q") and bm.take_copies() == []
    for seq in ("p", "c", "q", "d"):
        bm.free(seq)
    assert bm.num_free_blocks == 8 and all(bm.ref_count(b) == 0 for b in range(8))


# --- SharingBlockManager against a model --------------------------------------------------------------

# Few sequence ids and short prompts, so that forks of live parents (full and partial) are common.
STEP = st.tuples(st.sampled_from(["allocate", "allocate", "append", "append", "append", "fork", "fork",
                                  "copy_fork", "free"]),
                 st.integers(0, 3), st.integers(0, 3), st.integers(0, 10))


def _state(bm, model):
    return bm.num_free_blocks, {s: (bm.block_table(s), bm.num_tokens(s)) for s in model}


def _check_invariants(bm, model, num_blocks):
    owners = {}
    for s in model:
        table = bm.block_table(s)
        assert len(table) == len(set(table)), f"sequence {s}: a page twice in one table"
        assert len(table) == -(-model[s] // bm.block_size), f"sequence {s}: wrong number of pages"
        for b in table:
            owners[b] = owners.get(b, 0) + 1
    for b in range(num_blocks):
        assert bm.ref_count(b) == owners.get(b, 0), f"block {b}: ref count {bm.ref_count(b)}, " \
            f"{owners.get(b, 0)} tables hold it"
    assert bm.num_free_blocks + len(owners) == num_blocks, "free + owned != total: a block leaked"


def _expect_failure(bm, model, error, method, *args):
    before = _state(bm, model)
    with pytest.raises(error):
        getattr(bm, method)(*args)
    assert _state(bm, model) == before, f"{getattr(error, '__name__', error)} changed the manager"
    assert bm.take_copies() == [], "a failed call left a page copy behind"


@settings(max_examples=80, deadline=None)
@given(num_blocks=st.integers(1, 16), block_size=st.integers(1, 4), steps=st.lists(STEP, max_size=80))
def test_sharing_block_manager_matches_model(num_blocks, block_size, steps):
    bm = M.SharingBlockManager(num_blocks, block_size)
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
            elif model[a] % block_size == 0 and free == 0:
                _expect_failure(bm, model, M.OutOfBlocksError, "append_slot", a)
            else:
                slot = bm.append_slot(a)
                assert bm.ref_count(slot // block_size) == 1, "a token was written into a shared page"
                model[a] += 1
        elif op in ("fork", "copy_fork"):
            if a not in model or b in model:
                _expect_failure(bm, model, (KeyError, ValueError), op, a, b)
                continue
            parent = bm.block_table(a)
            partial = model[a] % block_size != 0
            need = len(parent) if op == "copy_fork" else int(partial)
            if need > free:
                _expect_failure(bm, model, M.OutOfBlocksError, op, a, b)
                continue
            getattr(bm, op)(a, b)
            model[b] = model[a]
            child = bm.block_table(b)
            copies = bm.take_copies()
            if op == "copy_fork":
                assert copies == list(zip(parent, child)) and not set(child) & set(parent)
            else:
                shared = parent[:-1] if partial else parent
                assert child[:len(shared)] == shared, "fork: the child must share the parent's full pages"
                assert copies == ([(parent[-1], child[-1])] if partial else []), "fork: wrong page copies"
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
    """16 samples of a 4096-token prompt, head_dim 128: the size the benchmark times."""
    g.run_and_compare(version, sol.BENCH_SIZES[0], rtol=RTOL)
