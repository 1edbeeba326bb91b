"""Day 30 grader: the summed-area table, two naive passes in global memory vs shared tiles."""

import numpy as np
import pytest

from course import ON_GPU, traffic
from course.grading import Grader

g = Grader(30)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "one-dimensional": lambda xs: (np.ascontiguousarray(xs[0].ravel()),),
        "three-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None]),),
        "a-transposed-view": lambda xs: (xs[0].T,),
        "empty": lambda xs: (np.zeros((0, 5), np.float32),),
    }
)


def _kernels(version):
    """The version's traffic per kernel, at the largest test size (six whole tiles)."""
    g.traffic(version)  # skips on a GPU, fails with the hint while the version is unwritten
    (measured,) = traffic.measure_day(g.target, sol, sol.TEST_SIZES[-1], versions=[version])
    return {k.name: k for k in measured.kernels}


def test_carries_from_above_the_left_and_the_corner():
    """Three tiles down, four across, ragged at the bottom and the right: every tile but the first
    needs what lies above it, left of it, or both (a dropped carry shows in every later tile)."""
    g.run_and_compare("optimized", (2 * sol.TILE + 7, 3 * sol.TILE + 5))


def test_optimized_goes_through_shared_tiles():
    """The day's idea, whatever the scan: the tile staged in shared memory, barriers between the
    phases, nothing in local memory."""
    rep = g.report("optimized")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: no shared-memory tile"
    assert rep.count("bar.sync") >= 2, (
        f"optimized: {rep.count('bar.sync')} barrier(s): the row phase and the column phase each read "
        "words that other warps wrote")
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_uses_no_shared_memory():
    for label in ("naive", "naive.columns"):
        rep = g.report(label)
        assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, label


def test_naive_row_pass_is_uncoalesced():
    """One thread per row: a warp's 32 lanes sit on 32 rows, one sector per lane (32 a request),
    where the column pass (one thread per column) reads 4 sectors a request."""
    k = _kernels("naive")
    rows = k["sat_rows_naive_kernel"]
    cols = k["sat_columns_naive_kernel"]
    assert rows.sectors_per_load >= 28, (
        f"naive rows: {rows.sectors_per_load:.1f} sectors per load request: the naive row pass gives each "
        "thread a row, so a warp reads 32 rows at once (that is the contrast the day measures)")
    assert cols.sectors_per_load <= 4.1, (
        f"naive columns: {cols.sectors_per_load:.1f} sectors per load request: one thread per column, "
        "neighbouring lanes on neighbouring columns")


def test_optimized_is_coalesced_and_conflict_free():
    """Every kernel of the optimized version: at most 4 sectors a global request (a warp on one
    128-byte row), and 1 wavefront a shared request (the tile read along its rows and down its
    columns: the column read needs the padded tile of day 21)."""
    t = g.traffic("optimized")
    assert t.shared_requests > 0, "optimized: no shared-memory requests: stage the tiles in shared memory"
    assert t.sectors_per_load <= 4.1 and t.sectors_per_store <= 4.1, (
        f"optimized: {t.sectors_per_load:.1f} sectors per load, {t.sectors_per_store:.1f} per store: a warp "
        "should read and write rows of the tile")
    assert t.wavefronts_per_request <= 1.1, (
        f"optimized: {t.wavefronts_per_request:.2f} wavefronts per shared request: the lanes reading a tile "
        "column share banks (pad the tile's rows)")


def test_optimized_moves_fewer_bytes_than_naive():
    """Sector bytes at six whole tiles: the naive row pass alone moves 8x its data in sectors; the
    optimized version reads img twice and writes S once, plus small carries (under 2x the minimum)."""
    naive = g.traffic("naive")
    opt = g.traffic("optimized")
    (img,) = sol.make_inputs(sol.TEST_SIZES[-1], seed=0)
    minimum = sol.traffic(img)[0]
    assert opt.global_bytes < 2.0 * minimum, (
        f"optimized: {opt.global_bytes / minimum:.2f}x the minimum bytes: read img at most twice, write S once")
    assert naive.global_bytes > 2 * opt.global_bytes


@pytest.mark.gpu
def test_at_benchmark_scale():
    """Primes past the L2 (three levels of tile totals), and the two thin shapes."""
    assert ON_GPU
    for shape in ((4099, 8191), (1, (1 << 20) + 3), ((1 << 20) + 3, 1), (1061, 1063)):
        g.run_and_compare("optimized", shape)
    g.run_and_compare("naive", (1061, 1063))
