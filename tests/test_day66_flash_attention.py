"""Day 66 grader: FlashAttention forward in FP32 (K/V tiles through shared memory, the online softmax)."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(66)


def _swap(xs, i, new):
    return xs[:i] + (new,) + xs[i + 1:]


test_matches_reference = g.matches_reference(versions=["flash"])


@pytest.mark.parametrize("n", [(1, 4, 2, 5, 37, 32, True), (1, 2, 1, 37, 5, 32, True)])
def test_flash_agrees_with_materialised(n):
    """materialised is day 65's naive (graded there): flash gives the same rows without the scores."""
    g.require_implemented("flash")
    q, k, v, causal = g.solution.make_inputs(n, seed=3)
    checking.assert_matches(g.target.flash(q, k, v, causal), g.target.materialised(q, k, v, causal),
                            rtol=g.solution.RTOL, name="flash vs materialised")
test_large_scores = g.matches_reference(g.solution.LARGE_SIZES, rtol=g.solution.LARGE_RTOL,
                                         floor=g.solution.LARGE_FLOOR, versions=["flash"])
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (2, 4, 2, 5, 7, 32, True),  # batch 2: a strided view along batch is not contiguous
    versions=["flash"],
    extra_cases={
        "heads-not-multiple-of-kv-heads": lambda xs: _swap(xs, 0, np.ascontiguousarray(
            np.concatenate([xs[0], xs[0][:, :1]], axis=1))),
        "dim-80": lambda xs: tuple(np.zeros(a.shape[:-1] + (80,), np.float32) for a in xs[:3]) + xs[3:],
        "v-shorter-than-k": lambda xs: _swap(xs, 2, xs[2][:, :, :-1].copy()),
        "k-dim-differs": lambda xs: _swap(xs, 1, xs[1][:, :, :, :-1].copy()),
        "causal-not-bool": lambda xs: _swap(xs, 3, 1),
        "float16": lambda xs: tuple(a.astype(np.float16) for a in xs[:3]) + xs[3:],
    },
)


@pytest.mark.parametrize("seq_k", [31, 32, 33, 64, 65])
def test_every_way_the_key_loop_can_end(seq_k):
    """Key tiles of 32: one short, exactly full, one key over, two full, two and one key over."""
    g.run_and_compare("flash", (1, 1, 1, 3, seq_k, 32, False), parts=("keys",))


def test_flash_streams_tiles_through_shared_memory():
    rep = g.report("flash")
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, "flash: stage q, K/V and P in shared memory"
    assert rep.count("bar.sync") >= 3, "flash: barriers after staging K, after P, after staging V, between tiles"
    assert "ld.shared.v4" in rep.ptx, "flash: the score and P v micro-tiles read shared memory 16 bytes at a time"
    assert rep.registers <= 65536 // (g.solution.THREADS * g.solution.BLOCKS_PER_SM), (
        f"flash: {rep.registers} registers a thread: fewer than {g.solution.BLOCKS_PER_SM} blocks an SM")
    assert rep.count("shfl.sync") > 0, "flash: the row max and sum are shared by the lanes of a row (shuffles)"
    assert rep.stack_bytes == 0 and rep.spill_stores == 0 and not rep.uses_local_memory, (
        "flash: the output accumulator and the scores should live in registers")
    assert "ex2.approx" in rep.ptx, "flash: exp as exp2 (log2 e folded into the scale)"


def test_flash_reads_k_and_v_once_per_query_tile_and_stores_only_the_output():
    n = (1, 1, 1, 70, 40, 32, False)  # 2 query tiles (the second partial), 3 key tiles (the third partial)
    q, k, v, _ = g.solution.make_inputs(n)
    t = g.traffic("flash", n)
    assert t.global_store_sectors * 32 == q.nbytes, (
        f"flash: stored {t.global_store_sectors * 32} B, the output is {q.nbytes} B: nothing of size seq^2")
    tiles = -(-q.shape[2] // g.solution.BQ) * q.shape[1]  # (query tile, head) pairs; each reads its K and V once
    once = q.nbytes + tiles * (k.nbytes + v.nbytes) // k.shape[1]
    got = t.global_load_sectors * 32
    assert once <= got <= 1.1 * once, f"flash: read {got} B, K/V once per query tile is {once} B"


def test_causal_skips_the_tiles_above_the_diagonal():
    """Causal at 70 queries x 20 keys: the first query tile (rows 0-63) sees keys 0-13 only, one key tile."""
    dense = g.traffic("flash", (1, 1, 1, 70, 20, 32, False)).global_load_sectors
    causal = g.traffic("flash", (1, 1, 1, 70, 20, 32, True)).global_load_sectors
    assert causal < dense, "flash: a causal query tile should not load the key tiles past its last row's window"


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_at_long_uneven_sequences(causal):
    g.run_and_compare("flash", (2, 8, 2, 1000, 3001, 128, causal))
    g.run_and_compare("flash", (1, 4, 4, 2049, 700, 64, causal))


@pytest.mark.gpu
def test_flash_matches_materialised_at_2048():
    g.run_and_compare("materialised", (1, 8, 8, 2048, 2048, 96, True))
    g.run_and_compare("flash", (1, 8, 8, 2048, 2048, 96, True))
