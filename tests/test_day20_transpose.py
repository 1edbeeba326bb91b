"""Day 20 grader: transpose, strided stores vs a 32 x 32 tile through shared memory."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(20)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "one-dimensional": lambda xs: (xs[0].ravel(),),
        "three-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None]),),
        "a-transposed-view": lambda xs: (xs[0].T,),
    }
)


def test_transpose_of_many_tiles_with_ragged_edges():
    """Three tiles down, two across, a partial tile at the bottom and the right: each block's tile
    lands at the swapped tile position of out (a kernel that keeps the tile where it was fails)."""
    g.run_and_compare("optimized", (3 * sol.TILE + 5, 2 * sol.TILE + 3))


def test_optimized_goes_through_a_shared_tile():
    """The day's idea, whatever the tile's shape: the tile stored to shared memory, a barrier, then read
    back from there; nothing sent to local memory."""
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory traffic"
    assert rep.count("bar.sync") >= 1, "optimized: no barrier between loading the tile and reading it back"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_uses_no_shared_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0


def test_naive_stores_are_strided():
    """Counted as Nsight Compute counts it (whole tiles, rows of out on sector boundaries): naive reads
    a row of x, 4 sectors a request, and writes it down a column of out, one sector per lane."""
    naive = g.traffic("naive")
    assert naive.sectors_per_load <= 4.1, (
        f"naive: {naive.sectors_per_load:.1f} sectors per load request: let x of the thread index walk "
        "the columns of x, so a warp reads a row")
    assert naive.sectors_per_store >= 16, (
        f"naive: {naive.sectors_per_store:.1f} sectors per store request: the naive version writes "
        "out[c, r] straight from x[r, c] (strided stores), that is the contrast the day measures")


def test_optimized_is_coalesced_both_ways():
    """The tile's point: a warp reads a row of x and writes a row of out, 4 sectors a request each
    way, and the transposition is left to shared memory."""
    opt = g.traffic("optimized")
    assert opt.shared_requests > 0, "optimized: no shared-memory requests: go through a shared tile"
    assert opt.sectors_per_load <= 4.1, (
        f"optimized: {opt.sectors_per_load:.1f} sectors per load request: a warp should load a row of the tile")
    assert opt.sectors_per_store <= 4.1, (
        f"optimized: {opt.sectors_per_store:.1f} sectors per store request: a warp should store a row of "
        "out, read from a column of the tile")


@pytest.mark.gpu
def test_both_versions_at_scale():
    """Primes well past the L2, and the two thin shapes."""
    for shape in ((4093, 8191), (1, 1 << 22), ((1 << 22) + 1, 1)):
        g.run_and_compare("optimized", shape)
        g.run_and_compare("naive", shape)
