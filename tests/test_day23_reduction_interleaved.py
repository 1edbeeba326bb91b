"""Day 23 grader: a block-sum tree in shared memory, divergent interleaved addressing against the
strided index (no divergence, bank conflicts instead)."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(23)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    }
)


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_tree_lives_in_shared_memory(version):
    """Both versions fold the block's partials in shared memory, with barriers between the steps,
    and keep nothing in local memory."""
    rep = g.report(version)
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, (
        f"{version}: no shared-memory traffic; store each thread's element in a shared array and fold it there")
    assert rep.count("bar.sync") >= 2, (
        f"{version}: {rep.count('bar.sync')} barriers in the PTX; one after the load and one after each "
        "step of the tree (inside the loop)")
    assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_interleaved_is_divergent_strided_is_not():
    """The naive tree's live threads are scattered over every warp: all 8 warps issue every step's
    shared loads and stores with most lanes off. The strided index packs the live threads into the
    first warps, so the same tree takes far fewer warp-wide shared requests (about 3x fewer)."""
    naive, strided = g.traffic("naive"), g.traffic("optimized")
    assert naive.shared_requests > 0 and strided.shared_requests > 0, "no shared-memory requests"
    assert strided.shared_requests * 2 <= naive.shared_requests, (
        f"optimized: {strided.shared_requests} shared requests against the naive tree's "
        f"{naive.shared_requests}; pack the live threads (index = 2 * s * t) so that idle warps skip the step")


def test_strided_index_has_bank_conflicts():
    """The price of the strided index: lane t touches word 2st, so lanes of a warp collide in a bank
    (2-way at s = 1, up to 8-way): more than one wavefront per shared request. The interleaved
    tree, its lanes spread out, is conflict-free (one wavefront per request), only divergent."""
    naive, strided = g.traffic("naive"), g.traffic("optimized")
    assert strided.wavefronts_per_request > 1.5, (
        f"optimized: {strided.wavefronts_per_request:.2f} wavefronts per shared request; the strided index "
        "(index = 2 * s * t) makes lanes of a warp meet in one bank")
    assert naive.wavefronts_per_request <= 1.01, (
        f"naive: {naive.wavefronts_per_request:.2f} wavefronts per shared request; the interleaved tree "
        "(sm[t] += sm[t + s] for t % (2s) == 0) reads and writes word t: no bank conflicts")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_at_bench_size(version):
    """2^28 - 3 floats: four passes (2^20 partials, then 4096, 16, 1) and a ragged last block."""
    g.run_and_compare(version, (1 << 28) - 3)
