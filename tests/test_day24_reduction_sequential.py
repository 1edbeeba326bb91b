"""Day 24 grader: the block-sum tree with sequential addressing (conflict-free), then the first add
during the load (two elements a thread, half the blocks)."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(24)
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
        f"{version}: no shared-memory traffic; store each thread's value in a shared array and fold it there")
    assert rep.count("bar.sync") >= 2, (
        f"{version}: {rep.count('bar.sync')} barriers in the PTX; one after the load and one after each "
        "step of the tree (inside the loop)")
    assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_sequential_addressing_is_conflict_free():
    """Threads t < s add sm[t + s] into sm[t]: a warp reads and writes 32 consecutive words, 32
    banks, one wavefront per shared request (day 23's strided index took 3.3)."""
    for version in sol.VERSIONS:
        t = g.traffic(version)
        assert t.shared_requests > 0, f"{version}: no shared-memory requests: fold the block in shared memory"
        assert t.wavefronts_per_request <= 1.01, (
            f"{version}: {t.wavefronts_per_request:.2f} wavefronts per shared request; lanes of a warp meet in "
            "one bank: address sm[t] and sm[t + s] (s halving from THREADS // 2), not sm[2 * s * t]")


def test_first_add_halves_the_trees():
    """Two elements a thread: half the blocks, so about half the shared-memory requests (one tree per
    2 * THREADS elements), while global memory still sees every sector of x once (whichever pair a
    thread loads: THREADS apart, or neighbours)."""
    naive, first_add = g.traffic("naive"), g.traffic("optimized")
    assert first_add.shared_requests <= 0.6 * naive.shared_requests, (
        f"optimized: {first_add.shared_requests} shared requests against naive's {naive.shared_requests}; "
        "add two elements per thread while loading, so that a block's tree covers 2 * THREADS of them")
    assert first_add.global_load_sectors <= naive.global_load_sectors * 1.05, (
        f"optimized: {first_add.global_load_sectors} sectors loaded against naive's "
        f"{naive.global_load_sectors}; each 32-byte sector of x should be fetched once")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_at_bench_size(version):
    """2^28 - 3 floats: several passes over the partials and a ragged last block."""
    g.run_and_compare(version, (1 << 28) - 3)
