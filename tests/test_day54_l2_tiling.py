"""Day 54 grader: day 46's GEMM with its blocks taking their tiles in grouped (swizzled) order."""

import types

import numpy as np
import pytest

from course import cuda, days
from course.grading import Grader

g = Grader(54)
sol = g.solution
OWN = "grouped_tile_coords"  # what the learner writes: `grouped` is day 46's kernel compiled with it


def _require():
    g.require_implemented("grouped", OWN)


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_grouped_matches_reference(n):
    """The grouped order at every test shape: one tile; a single group shorter than GROUP_M (2 tile
    rows) over 3 columns; a single tile row; a single tile column; whole aligned tiles. A tile taken
    twice or never leaves NaN (the output is poisoned) or a wrong block of C."""
    _require()
    g.run_and_compare("grouped", n, rtol=sol.tolerance(sol.sizes(n)[2]))


def test_row_major_still_matches():
    """Day 46's order, the table's first row (imported: day 46 grades it fully)."""
    _require()
    shape = (33, 35, 37)
    g.run_and_compare("row_major", shape, rtol=sol.tolerance(shape[2]))


_rejects = g.rejects_bad_inputs(
    versions=("grouped",),
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
    },
)


def test_rejects_bad_inputs(version, case):
    """Wrong dtypes, strided views, mismatched K, no rows: ValueError before any launch (the input
    checks are day 39's: here they must still run before the grouped kernel is launched)."""
    g.require_implemented(OWN)
    _rejects(version, case)


test_rejects_bad_inputs.pytestmark = _rejects.pytestmark


# ---- the order itself, through a tiny kernel in the simulator ------------------------------------------

@cuda.jit
def _record_kernel(tiles_m, tiles_n, out):  # out (tiles_m * tiles_n, 2)
    block = cuda.grid(1)
    if block < out.shape[0]:
        tr, tc = coords(block, tiles_m, tiles_n)
        out[block, 0] = tr
        out[block, 1] = tc


coords = sol.tile_coords  # replaced per test through days.with_globals


def _grouped_with(group_m):
    """The target's grouped_tile_coords as a device function with GROUP_M = group_m."""
    py = g.target.grouped_tile_coords.py_func
    if "GROUP_M" not in py.__code__.co_names:
        pytest.fail("grouped_tile_coords reads no GROUP_M: take the group's height from the module constant",
                    pytrace=False)
    fn = types.FunctionType(py.__code__, dict(py.__globals__, GROUP_M=group_m), py.__name__,
                            py.__defaults__, py.__closure__)
    return cuda.jit(device=True, inline=True)(fn)


def _expected(block, tiles_m, tiles_n, group_m):
    group, within = divmod(block, group_m * tiles_n)
    rows = min(group_m, tiles_m - group * group_m)
    return group * group_m + within % rows, within // rows


GRIDS = ((1, 1), (1, 7), (7, 1), (2, 3), (5, 4), (8, 3), (9, 2), (16, 5), (17, 3), (23, 2), (33, 1))


@pytest.mark.parametrize("group_m", (1, 2, 3, 4, 8, 16))
def test_every_tile_exactly_once_in_grouped_order(group_m):
    """grouped_tile_coords run by a kernel of tiles_m x tiles_n threads that records each block's
    (tr, tc), for tile grids whose rows are and are not multiples of GROUP_M (a single row, a single
    column, one short group, whole groups and a short last one): every tile exactly once, and in the
    grouped order: down the group's rows first, then across to the next column."""
    g.require_implemented(OWN)
    record = days.with_globals(_record_kernel, coords=_grouped_with(group_m))
    for tiles_m, tiles_n in GRIDS:
        blocks = tiles_m * tiles_n
        out = np.full((blocks, 2), -1, np.int64)
        record[-(-blocks // 64), 64](tiles_m, tiles_n, out)
        seen = {}
        for block, (tr, tc) in enumerate(out.tolist()):
            where = f"GROUP_M = {group_m}, {tiles_m} x {tiles_n} tiles: block {block}"
            assert 0 <= tr < tiles_m and 0 <= tc < tiles_n, (
                f"{where} takes tile ({tr}, {tc}), outside the grid: is the last group shortened to "
                f"tiles_m - its first row = {tiles_m - (block // (group_m * tiles_n)) * group_m} rows?")
            assert (tr, tc) not in seen, f"{where} takes tile ({tr}, {tc}), already taken by block {seen[tr, tc]}"
            seen[tr, tc] = block
        for block, (tr, tc) in enumerate(out.tolist()):
            want = _expected(block, tiles_m, tiles_n, group_m)
            assert (tr, tc) == want, (
                f"GROUP_M = {group_m}, {tiles_m} x {tiles_n} tiles: block {block} takes tile ({tr}, {tc}), "
                f"the grouped order gives {want}: within a group, consecutive blocks go down its rows first")


# ---- the lesson's model ------------------------------------------------------------------------------

def test_resident_blocks_of_day46_kernel():
    """132 SMs x 2 blocks: day 46's kernel at 127 registers (<= 128: two blocks of 256 threads in the
    SM's 65,536 registers) and 34 KB of shared memory a block. Read from the compiler's own report."""
    rep = g.report("grouped")
    assert rep.stack_bytes == 0, f"grouped: {rep.stack_bytes} bytes of stack: the order must add no local memory"
    assert rep.registers <= 128, (
        f"grouped: {rep.registers} registers a thread: above 128 an SM holds one block, not two "
        "(the order's arithmetic should be a few integer ops inlined into day 46's kernel)")
    assert sol.resident_blocks(rep.registers, rep.shared_bytes) == 264


@pytest.mark.parametrize("n", sol.BENCH_SIZES, ids=[str(n) for n in sol.BENCH_SIZES])
def test_grouped_wave_touches_fewer_bytes(n):
    """At the benchmark sizes the first wave of 264 co-resident blocks reads, in row-major order, a few
    rows of tiles across all of B (69 panels at 8192^3, 131 at 4096 x 16384 x 4096); in grouped order a
    16 x 17 patch (33 panels): at least 2x fewer distinct bytes of A and B."""
    _require()
    m, n_cols, k = sol.sizes(n)
    rows = g.target.wave_footprint(n, "row_major", 264)
    mine = g.target.wave_footprint(n, "grouped", 264)
    assert rows == sol.wave_footprint(n, "row_major", 264) >= 4 * k * n_cols, (
        "row_major's first wave reads all of B")
    assert 2 * mine <= rows, (
        f"{n}: the grouped wave reads {mine / 2**20:.0f} MiB of A and B against row-major's "
        f"{rows / 2**20:.0f} MiB: blocks in a group should go down GROUP_M tile rows before the next column")
    assert mine == 33 * 128 * k * 4, f"{n}: grouped wave {mine} bytes, 33 panels of 128 x K expected"


def test_block_map_is_a_permutation_of_the_grid():
    """The notebook's heat map: every tile of an awkward grid (17 x 5: a short last group) gets one block."""
    _require()
    shape = (17 * sol.BM - 3, 5 * sol.BN - 1, 1)
    got = g.target.block_map(shape, "grouped")
    assert sorted(got.ravel().tolist()) == list(range(got.size))
    assert got[:, 0].tolist()[:16] == list(range(16)) and got[16, 0] == 16 * 5


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((2100, 4099, 1021),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((2100, 4099, 1021),)])
def test_grouped_at_bench_size(n):
    """8192^3, 4096 x 16384 x 4096, and 2100 x 4099 x 1021 (17 tile rows: a whole group and a last one
    of 1; A and B padded) on the GPU, against the float64 product and bit for bit against row-major."""
    _require()
    g.run_and_compare("grouped", n, rtol=sol.tolerance(sol.sizes(n)[2]))
    a, b = sol.make_inputs(n, seed=1)
    assert np.array_equal(g.target.grouped(a, b), g.target.row_major(a, b)), (
        "grouped's C differs from row-major's: the same kernel must compute the same tiles, only in another order")
