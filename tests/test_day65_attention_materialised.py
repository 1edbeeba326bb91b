"""Day 65 grader: attention with the scores in global memory (three kernels), then in shared memory."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(65)


def _swap(xs, i, new):
    return xs[:i] + (new,) + xs[i + 1:]


test_matches_reference = g.matches_reference()
test_large_scores = g.matches_reference(g.solution.LARGE_SIZES, rtol=g.solution.LARGE_RTOL,
                                         floor=g.solution.LARGE_FLOOR)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (2, 4, 2, 5, 7, 32, True),  # batch 2: a strided view along batch is not contiguous
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


def test_optimized_refuses_sequences_past_max_keys():
    """The scores of a block's rows must fit on chip: past MAX_KEYS (half of it past dim 64) the kernel says so."""
    g.require_implemented("optimized")
    q, k, v, causal = g.solution.make_inputs((1, 1, 1, 2, g.solution.MAX_KEYS // 2 + 1, 128, False))
    with pytest.raises(ValueError, match="MAX_KEYS"):
        g.target.optimized(q, k, v, causal)
    q, k, v, causal = g.solution.make_inputs((1, 1, 1, 2, g.solution.MAX_KEYS + 1, 32, False))
    with pytest.raises(ValueError, match="MAX_KEYS"):
        g.target.optimized(q, k, v, causal)
    assert g.solution.bench_skip("optimized", (8, 32, 32, 4096, 4096, 128, False))
    assert g.solution.bench_skip("naive", (8, 32, 32, 4096, 4096, 128, False)) is None


def test_naive_gemms_use_shared_tiles():
    for label in ("naive.scores", "naive.pv"):
        rep = g.report(label)
        assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, f"{label}: stage tiles in shared memory"
        assert rep.count("bar.sync") >= 2, f"{label}: a barrier after staging and one before the next step"
        assert rep.stack_bytes == 0, f"{label}: the 4 x 4 accumulators should be registers (no stack frame)"


def test_optimized_keeps_the_scores_in_shared_memory():
    rep = g.report("optimized")
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0 and rep.count("bar.sync") > 0
    assert rep.shared_bytes >= g.solution.QB * g.solution.MAX_KEYS * 4, (
        "optimized: a block's scores live in shared memory")
    assert rep.shared_bytes <= 48 * 1024, "optimized: a block may declare at most 48 KB of shared memory statically"
    assert "ld.shared.v4" in rep.ptx, "optimized: the register tiles read shared memory 16 bytes at a time"
    assert rep.stack_bytes == 0 and rep.spill_stores == 0


N_TRAFFIC = (1, 2, 2, 20, 20, 64, False)


def test_naive_writes_and_rereads_the_scores():
    """The scores go through global memory: written once, read (and written) by the softmax, read by P v."""
    q, k, _, _ = g.solution.make_inputs(N_TRAFFIC)
    t = g.traffic("naive", N_TRAFFIC)
    assert t.global_store_sectors * 32 >= 2 * g.solution.scores_bytes(q, k) + q.nbytes


def test_optimized_stores_only_the_output():
    """Nothing of size seq^2 in global memory: every byte stored is the output, stored once."""
    q, k, v, _ = g.solution.make_inputs(N_TRAFFIC)
    t = g.traffic("optimized", N_TRAFFIC)
    assert t.global_store_sectors * 32 == q.nbytes, (
        f"optimized: stored {t.global_store_sectors * 32} B, the output is {q.nbytes} B")
    # q once; k and v once per block of QB = 16 rows (from L2 on a GPU), nothing more
    blocks = -(-q.shape[2] // g.solution.QB) * q.shape[0] * q.shape[1]
    assert t.global_load_sectors * 32 <= q.nbytes + blocks * (k.nbytes + v.nbytes) // k.shape[1] * 1.1


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_at_max_keys(causal):
    for version in g.versions:
        g.run_and_compare(version, (2, 8, 4, 500, 512, 64, causal))
        g.run_and_compare(version, (1, 8, 2, 256, 250, 128, causal))
    g.run_and_compare("naive", (2, 8, 4, 1024, 1024, 64, causal))


@pytest.mark.gpu
def test_naive_at_long_uneven_sequences():
    g.run_and_compare("naive", (1, 8, 2, 1500, 2100, 128, True))
