"""Day 46 grader: matrix multiply step 8, block -> warp -> thread tiles on day 45's double-buffered pipeline."""

import functools

import pytest

from course.grading import Grader

g = Grader(46)
sol = g.solution
OWN = ("warp_tiling",)  # the day's own version: the first seven steps are days 39-45's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully
FULL_TILE = (sol.BM, sol.BN, 2 * sol.BK)  # one whole 128 x 128 tile, two k steps (both copies used)
traffic = functools.cache(lambda version: g.traffic(version, FULL_TILE))


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """The day's kernel at every test shape (K = 1, 5, 37, 67: padded to a multiple of 4, one to five
    16-deep steps; N = 1, 35, 37: padded too, C stored element by element), within float32 error."""
    g.run_and_compare("warp_tiling", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-45, once the day's kernel is written."""
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
    """A tile + 1 in every direction (129 x 129 x 17): two tile rows and columns (the last 1 wide), two k
    steps (the last 1 deep: the second copy holds one k of data and 15 of zeros), K and N not multiples
    of 4 (both inputs padded), and a whole first tile whose rows of C are not 16-byte aligned."""
    shape = (sol.BM + 1, sol.BN + 1, sol.BK + 1)
    g.run_and_compare("warp_tiling", shape, rtol=sol.tolerance(shape[2]))


@pytest.mark.parametrize("shape", [(70, 9, 11), (9, 70, 11), (200, 40, 21), (40, 200, 21)],
                         ids=["tall", "wide", "tall-two-warp-rows", "wide-two-warp-columns"])
def test_non_square_tiles_of_c(shape):
    """Tall and wide: a warp's row index used for its column (or a lane's, or a sub-tile's) is right only
    where the two coincide; here rows and columns differ everywhere, across warp tiles (64 rows, 32
    columns) and, at 200 x 40 and 40 x 200, across tiles of C."""
    g.run_and_compare("warp_tiling", shape, rtol=sol.tolerance(shape[2]))


@pytest.mark.parametrize("shape", [(128, 128, 16), (256, 128, 8), (128, 256, 32), (130, 132, 12)],
                         ids=["one-tile", "two-tile-rows", "two-tile-columns", "whole-and-edge-tiles"])
def test_float4_store_path(shape):
    """N a multiple of 4 and whole 128 x 128 tiles: C goes out as float4 (no guards), every warp's 64 x 32
    block of it; at 130 x 132 one tile takes the float4 path and three the guarded one, in one launch.
    K and N multiples of 4: nothing is padded, the inputs' own rows are read as float4."""
    g.run_and_compare("warp_tiling", shape, rtol=sol.tolerance(shape[2]))


def test_registers_and_sixteen_byte_instructions():
    """The day's idea, as the compiler sees it (`make inspect`): 64 accumulators, 16 fragment values and
    the 16 prefetched floats in registers (no stack frame, no spills, <= 255 registers), both tiles
    loaded with ld.global.v4, the fragments read with ld.shared.v4 (4 per 64 FMAs: two sub-tiles of A,
    two of B), C stored with st.global.v4, and the barriers of a double-buffered loop (the prologue's
    and one a step)."""
    rep = g.report("warp_tiling")
    ptx = rep.ptx
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"warp_tiling: {rep.stack_bytes} bytes of stack frame: index the accumulators, fragments and "
        "prefetch registers only with constants (loops over range(WMITER), range(TM), ...; the two store "
        "paths as two separate loops)")
    assert rep.spill_stores == rep.spill_loads == 0, (
        f"warp_tiling: {rep.spill_stores} spill stores, {rep.spill_loads} spill loads")
    assert rep.registers <= 255, f"warp_tiling: {rep.registers} registers a thread (255 at most)"
    assert rep.count("vector ld/st") > 0, "warp_tiling: no 16-byte instruction in the PTX: use wide.load4 / wide.store4"
    assert ptx.count("ld.global.v4") >= 2, (
        f"warp_tiling: {ptx.count('ld.global.v4')} ld.global.v4 in the PTX: load the tiles as float4 (wide.load4)")
    assert ptx.count("ld.shared.v4") >= 4, (
        f"warp_tiling: {ptx.count('ld.shared.v4')} ld.shared.v4 in the PTX: read each sub-tile's fragment "
        "as a float4 (TM = TN = 4: one float4 of A and one of B per sub-tile)")
    assert ptx.count("st.global.v4") > 0, "warp_tiling: C is never stored as float4 (N a multiple of 4, whole tiles)"
    assert rep.count("bar.sync") >= 2, (
        f"warp_tiling: {rep.count('bar.sync')} barrier(s): one after the prologue stores copy 0, one a k step")
    fmas = ptx.count("fma.rn.f32")
    assert fmas >= sol.OUTPUTS, (
        f"warp_tiling: {fmas} fused multiply-adds in the PTX: the 8 x 8 outer product should unroll to 64")
    loads = rep.count("ld.shared")
    assert loads <= 4 * fmas / sol.OUTPUTS + 2, (
        f"warp_tiling: {loads} shared load instructions for {fmas} multiply-adds in the PTX: 4 float4 "
        "loads per kk (WMITER of A, WNITER of B)")


def test_same_global_traffic_as_day44():
    """On one full 128 x 128 tile (K = 32) the global side is day 44's: warp tiling moves no more bytes
    from L2, it only reorganises who computes what. Every load request a warp's 32 float4 (16 full
    sectors), every store request 8 rows x 64 bytes of C (16 full sectors)."""
    g.require_implemented(*OWN)
    day44, mine = traffic("vectorized"), traffic("warp_tiling")
    assert mine.global_load_requests <= day44.global_load_requests, (
        f"warp_tiling: {mine.global_load_requests} global load requests against vectorized's "
        f"{day44.global_load_requests}: each tile element is loaded once per k step, as a float4")
    assert mine.sectors_per_load >= 15, (
        f"warp_tiling: {mine.sectors_per_load:.1f} sectors per load request (16 expected: a warp's float4 cover "
        "16 rows x 32 bytes of A, or 512 consecutive bytes of a row of B)")
    assert mine.sectors_per_store >= 15, (
        f"warp_tiling: {mine.sectors_per_store:.1f} sectors per store request: a warp's float4 stores of C "
        "should cover 8 rows x 64 bytes (4 lane columns x 16 bytes)")


def test_warp_tiles_cut_shared_wavefronts():
    """The step's point, counted as Nsight Compute counts it on one full tile: the same shared requests
    as day 44 (4 float4 fragment reads a kk), but a warp's reads hit one compact 64 x 32 block, so each
    fragment read is one wavefront (8 float4 of A, 4 of B) instead of day 44's 2 for B (16 float4 =
    256 bytes), and the padded transposed A store is conflict-free: 1280 wavefronts against 1920."""
    g.require_implemented(*OWN)
    day44, mine = traffic("vectorized"), traffic("warp_tiling")
    assert mine.shared_requests > 0, "warp_tiling: no shared-memory requests: stage the tiles in shared memory"
    assert mine.shared_requests <= day44.shared_requests, (
        f"warp_tiling: {mine.shared_requests} shared requests against vectorized's {day44.shared_requests}: "
        "read each sub-tile's fragment as one float4")
    assert 1.4 * mine.shared_wavefronts <= day44.shared_wavefronts, (
        f"warp_tiling: {mine.shared_wavefronts} shared wavefronts against vectorized's {day44.shared_wavefronts}: "
        "a warp's lanes should read 8 consecutive float4 of A and 4 of B (8 x 4 lanes a 32 x 16 sub-tile), "
        "and the A tile's rows be padded to BM + 4 floats")
    assert mine.wavefronts_per_request <= 1.15, (
        f"warp_tiling: {mine.wavefronts_per_request:.2f} wavefronts per shared request (1.08 expected: only the "
        "512-byte float4 stores of the B tile take 4)")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((1021, 1023, 513),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((1021, 1023, 513),)])
def test_warp_tiling_at_bench_size(n):
    """4096^3 (nothing padded, C stored as float4), 4093 x 4099 x 1021 and 1021 x 1023 x 513 (A and B
    padded, C element by element) on the GPU: a misaligned float4 or a race the simulator's small
    shapes missed stops or spoils the kernel here."""
    g.run_and_compare("warp_tiling", n, rtol=sol.tolerance(sol.sizes(n)[2]))
