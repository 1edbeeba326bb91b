"""Day 44 grader: matrix multiply step 6, every load and store 16 bytes wide, A transposed in shared memory."""

import functools

import numpy as np
import pytest

from course import launch
from course.grading import Grader

g = Grader(44)
sol = g.solution
OWN = ("vectorized",)  # the day's own version: the first five steps are days 39-43's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully
FULL_TILE = (sol.BM, sol.BN, 2 * sol.BK)  # one whole 128 x 128 tile, two k steps: no idle threads
traffic = functools.cache(lambda version: g.traffic(version, FULL_TILE))


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """The day's kernel at every test shape (K = 1, 5, 37, 67: padded to a multiple of 4; N = 1, 35, 37:
    padded too, and C stored element by element), within float32 accumulation error."""
    g.run_and_compare("vectorized", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-43, once the day's kernel is written."""
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
    """A tile + 1 in every direction (129 x 129 x 9): two tile rows and columns (the last 1 wide), two k
    steps (the last 1 deep), K and N not multiples of 4 so both A and B are padded, and a first tile that
    is whole but whose rows of C are not 16-byte aligned (N = 129): it must be stored element by element."""
    shape = (sol.BM + 1, sol.BN + 1, sol.BK + 1)
    g.run_and_compare("vectorized", shape, rtol=sol.tolerance(shape[2]))


def test_non_square_tiles_of_c():
    """Tall and wide: a fragment indexed with the thread's row for its column (or the two 4 x 4 blocks of
    a thread mixed up) is right only where they coincide; here every output's row and column differ."""
    for shape in ((70, 9, 11), (9, 70, 11)):
        g.run_and_compare("vectorized", shape, rtol=sol.tolerance(shape[2]))


@pytest.mark.parametrize("shape", [(128, 128, 16), (256, 128, 8), (130, 132, 12)],
                         ids=["one-tile", "two-tile-rows", "whole-and-edge-tiles"])
def test_float4_store_path(shape):
    """N a multiple of 4 and whole 128 x 128 tiles: C goes out as float4 (wide.store4, no guards); at
    130 x 132 one tile takes the float4 path and three the guarded one, in one launch. No padding
    either (K and N multiples of 4): the inputs' own rows are read as float4."""
    g.run_and_compare("vectorized", shape, rtol=sol.tolerance(shape[2]))


@pytest.mark.parametrize("cols", [1, 2, 3, 5, 6, 7, 13, 129])
def test_pad_columns(cols):
    """The padding on its own: rows of 1, 2, 3, 5, ... floats become rows of a multiple of 4, the
    values kept and the new columns exactly 0.0 (the k past K must add nothing)."""
    g.require_implemented(*OWN)
    rows = 7
    src = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    (d,) = launch.to_device(src)
    out = g.target.pad_columns(d).copy_to_host()
    cols4 = -(-cols // 4) * 4
    assert out.shape == (rows, cols4), f"pad_columns: shape {out.shape}, expected {(rows, cols4)}"
    np.testing.assert_array_equal(out[:, :cols], src)
    np.testing.assert_array_equal(out[:, cols:], 0.0)


def test_pad_columns_leaves_aligned_rows_alone():
    """Rows already a multiple of 4 long: no copy at all (at 4096^3 the padding costs nothing)."""
    g.require_implemented(*OWN)
    (d,) = launch.to_device(np.ones((3, 8), np.float32))
    assert g.target.pad_columns(d) is d, "pad_columns: rows of 8 floats need no padding, and no copy"


def test_sixteen_byte_instructions():
    """The day's idea, as the compiler sees it: both tiles loaded from global memory with ld.global.v4,
    the fragments read with ld.shared.v4 (4 shared loads per 64 FMAs: day 43 had 16), C stored with
    st.global.v4 where it can be; registers as day 43's (no stack frame, no spills, <= 255), two barriers."""
    rep = g.report("vectorized")
    ptx = rep.ptx
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"vectorized: {rep.stack_bytes} bytes of stack frame: index the accumulators and fragments only with "
        "constants (loops over range(TM) / range(TN), and the two store paths as two separate loops)")
    assert rep.spill_stores == rep.spill_loads == 0, (
        f"vectorized: {rep.spill_stores} spill stores, {rep.spill_loads} spill loads")
    assert rep.registers <= 255, f"vectorized: {rep.registers} registers a thread (255 at most)"
    assert rep.count("vector ld/st") > 0, "vectorized: no 16-byte instruction in the PTX: use wide.load4 / wide.store4"
    assert ptx.count("ld.global.v4") >= 2, (
        f"vectorized: {ptx.count('ld.global.v4')} ld.global.v4 in the PTX: load a float4 of the A tile and one "
        "of the B tile per k step (wide.load4 on a and b)")
    assert ptx.count("ld.shared.v4") >= 4, (
        f"vectorized: {ptx.count('ld.shared.v4')} ld.shared.v4 in the PTX: read each fragment as two float4 "
        "(the A tile transposed, so A's fragment is contiguous too)")
    assert ptx.count("st.global.v4") > 0, "vectorized: C is never stored as float4 (N a multiple of 4, whole tiles)"
    assert rep.count("bar.sync") >= 2, (
        f"vectorized: {rep.count('bar.sync')} barrier(s): one after storing the tiles, one before the next "
        "step overwrites them")
    fmas = ptx.count("fma.rn.f32")
    assert fmas >= sol.TM * sol.TN, (
        f"vectorized: {fmas} fused multiply-adds in the PTX: the 8 x 8 outer product should unroll to 64")
    loads = rep.count("ld.shared")
    assert loads <= 4 * fmas / (sol.TM * sol.TN) + 2, (
        f"vectorized: {loads} shared load instructions for {fmas} multiply-adds in the PTX (day 43: 16 for 64): "
        "4 float4 loads per kk, two of the A fragment and two of the B fragment")


def test_quarter_of_the_global_load_requests_of_day43():
    """On one full 128 x 128 tile (K = 16): a float4 a thread per tile per k step instead of four floats,
    so a quarter of day 43's load requests, each 512 bytes (16 full sectors) instead of 128 (4)."""
    g.require_implemented(*OWN)
    day43, mine = traffic("blocking_2d"), traffic("vectorized")
    assert 3.5 * mine.global_load_requests <= day43.global_load_requests, (
        f"vectorized: {mine.global_load_requests} global load requests against blocking_2d's "
        f"{day43.global_load_requests}: load each tile as one float4 a thread per k step")
    assert mine.sectors_per_load >= 15, (
        f"vectorized: {mine.sectors_per_load:.1f} sectors per load request (16 expected: a warp's 32 float4 "
        "cover 16 rows x 32 bytes of A, or 512 consecutive bytes of a row of B)")
    assert mine.sectors_per_store >= 15, (
        f"vectorized: {mine.sectors_per_store:.1f} sectors per store request: a whole tile with N a multiple "
        "of 4 goes out as float4, 2 rows x 256 bytes a warp")


def test_fewer_shared_requests_than_day43():
    """Per kk 4 float4 fragment reads instead of 16 scalar loads, plus 5 tile stores a k step instead of 8:
    3.7x fewer shared requests on one full tile. Each request now moves more bytes, so it may take more
    than one wavefront (the B fragment: 256 bytes, 2; the transposed A store: 2-way conflicted), but
    fewer wavefronts in all."""
    g.require_implemented(*OWN)
    day43, mine = traffic("blocking_2d"), traffic("vectorized")
    outputs = FULL_TILE[0] * FULL_TILE[1]
    assert mine.shared_requests > 0, "vectorized: no shared-memory requests: stage the tiles in shared memory"
    assert 3 * mine.shared_requests <= day43.shared_requests, (
        f"vectorized: {mine.shared_requests / outputs:.3f} shared requests per output against blocking_2d's "
        f"{day43.shared_requests / outputs:.3f}: read each fragment as two float4 (wide.load4)")
    assert mine.shared_wavefronts < day43.shared_wavefronts, (
        f"vectorized: {mine.shared_wavefronts} shared wavefronts against blocking_2d's {day43.shared_wavefronts} "
        f"({mine.wavefronts_per_request:.2f} a request): the float4 fragment reads conflict")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((1021, 1023, 513),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((1021, 1023, 513),)])
def test_vectorized_at_bench_size(n):
    """4096^3 (nothing padded, C stored as float4), 4093 x 4099 x 1021 and 1021 x 1023 x 513 (A and B
    padded, C element by element) on the GPU: a misaligned float4 stops the kernel there."""
    g.run_and_compare("vectorized", n, rtol=sol.tolerance(sol.sizes(n)[2]))
