"""Day 43 grader: matrix multiply step 5, each thread an 8 x 8 outer product from register fragments."""

import functools

import pytest

from course.grading import Grader

g = Grader(43)
sol = g.solution
OWN = ("blocking_2d",)  # the day's own version: the first four steps are days 39-42's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully
FULL_TILE = (sol.BM, sol.BN, 2 * sol.BK)  # one whole 128 x 128 tile, two k steps: no idle threads
traffic = functools.cache(lambda version: g.traffic(version, FULL_TILE))


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """The day's kernel at every test shape (K = 37, 40, 67: a partial last 8-deep k tile; 1 x 37 and
    33 x 1: one row or one column of a 128 x 128 tile), within float32 accumulation error."""
    g.run_and_compare("blocking_2d", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-42, once the day's kernel is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, EARLIER_SIZE, rtol=sol.tolerance(EARLIER_SIZE[2]))


# The earlier steps' input checks are their own days' (their graders test them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
    },
)


def test_ragged_tiles_in_every_direction():
    """Two tile rows (the last holds 1 row of C), two tile columns (the last 5 wide) and two k steps
    (the last 5 deep): rows past M and columns past N must not be stored, k past K land as zeros."""
    shape = (sol.BM + 1, sol.BN + 5, sol.BK + 5)
    g.run_and_compare("blocking_2d", shape, rtol=sol.tolerance(shape[2]))


def test_non_square_tiles_of_c():
    """Tall and wide: a B fragment indexed with the thread's row (or A's with its column) is right only
    where the two coincide; here every output's row and column are told apart."""
    for shape in ((70, 9, 11), (9, 70, 11)):
        g.run_and_compare("blocking_2d", shape, rtol=sol.tolerance(shape[2]))


def test_outer_product_from_registers():
    """The day's idea, as the compiler sees it: 64 accumulators and both fragments in registers (no
    stack frame, no spills, within the 255 a thread can have), the tiles through shared memory with two
    barriers, and at most 1/8 + 1/8 (+ a margin) shared loads per FMA in the PTX (day 42's: 1.125)."""
    rep = g.report("blocking_2d")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"blocking_2d: {rep.stack_bytes} bytes of stack frame: index the accumulators and fragments only in "
        "loops over range(TM) / range(TN) (constant trip counts), so every index is a constant")
    assert rep.spill_stores == rep.spill_loads == 0, (
        f"blocking_2d: {rep.spill_stores} spill stores, {rep.spill_loads} spill loads")
    assert rep.registers <= 255, f"blocking_2d: {rep.registers} registers a thread (255 at most)"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "blocking_2d: no shared-memory traffic"
    assert rep.count("bar.sync") >= 2, (
        f"blocking_2d: {rep.count('bar.sync')} barrier(s): one after loading the tiles, one before the next "
        "step overwrites them")
    fmas = rep.ptx.count("fma.rn.f32")
    assert fmas >= sol.TM * sol.TN, (
        f"blocking_2d: {fmas} fused multiply-adds in the PTX: the 8 x 8 outer product should unroll to 64")
    assert rep.count("ld.shared") <= 0.3 * fmas, (
        f"blocking_2d: {rep.count('ld.shared')} shared loads for {fmas} multiply-adds in the PTX: load TM values "
        "of A and TN of B into register fragments once per kk, then do all TM x TN multiply-adds from them")


def test_fewer_shared_requests_than_day42():
    """The step's point, counted as Nsight Compute counts it on one full 128 x 128 tile (K = 16): day 42
    reads 1 + 1/8 shared words per FMA, the outer product 1/8 + 1/8, so 4.5x fewer loads (4.35x with
    the tile stores). At least 3x fewer requests, and fewer wavefronts too (a bank conflict costs
    wavefronts, not requests: see the lesson for the layout that has none)."""
    g.require_implemented(*OWN)
    day42, mine = traffic("blocking_1d"), traffic("blocking_2d")
    outputs = FULL_TILE[0] * FULL_TILE[1]
    assert mine.shared_requests > 0, "blocking_2d: no shared-memory requests: stage the tiles in shared memory"
    assert 3 * mine.shared_requests <= day42.shared_requests, (
        f"blocking_2d: {mine.shared_requests / outputs:.3f} shared requests per output against blocking_1d's "
        f"{day42.shared_requests / outputs:.3f}: load both fragments once per kk and reuse each value TM or TN times")
    assert 1.3 * mine.shared_wavefronts <= day42.shared_wavefronts, (
        f"blocking_2d: {mine.shared_wavefronts} shared wavefronts against blocking_1d's {day42.shared_wavefronts} "
        f"({mine.wavefronts_per_request:.2f} a request): the fragment reads conflict heavily")


def test_fewer_global_loads_than_day42():
    """128 x 128 tiles: per k step a block loads (128 + 128) x 8 floats for 128 x 128 outputs, half day
    42's load requests per output, each still 4 sectors (4 rows x 8 floats of A, a row of B)."""
    g.require_implemented(*OWN)
    day42, mine = traffic("blocking_1d"), traffic("blocking_2d")
    assert 1.9 * mine.global_load_requests <= day42.global_load_requests, (
        f"blocking_2d: {mine.global_load_requests} global load requests against blocking_1d's "
        f"{day42.global_load_requests} on one 128 x 128 tile: load each 128 x 8 and 8 x 128 tile once per k step")
    assert mine.sectors_per_load <= 4.1, (
        f"blocking_2d: {mine.sectors_per_load:.1f} sectors per load request: let a warp read along k in A "
        "(4 rows x 8 floats) and along the columns in B")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((1021, 1023, 513),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((1021, 1023, 513),)])
def test_blocking_2d_at_bench_size(n):
    """4096^3, 4093 x 4099 x 1021 and 1021 x 1023 x 513 (no side a multiple of a tile) on the GPU."""
    g.run_and_compare("blocking_2d", n, rtol=sol.tolerance(sol.sizes(n)[2]))
