"""Day 42 grader: matrix multiply step 4, each thread 8 outputs of a column from a register accumulator."""

import functools

import pytest

from course.grading import Grader

g = Grader(42)
sol = g.solution
traffic = functools.cache(g.traffic)  # one recorded run of a version serves several traffic tests
OWN = ("blocking_1d",)  # the day's own version: naive, coalesced and shared_tiles are days 39-41's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """The day's kernel at every test shape (K = 37, 40, 67: a partial last 8-deep k tile; M = 33: a
    tile with one thread-row of 8 and one lone row), within float32 accumulation error."""
    g.run_and_compare("blocking_1d", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-41, once the day's kernel is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, EARLIER_SIZE, rtol=sol.tolerance(EARLIER_SIZE[2]))


# The earlier steps' input checks are their own days' (their graders test them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-columns": lambda xs: (xs[0], xs[1][:, :0].copy()),
    },
)


def test_ragged_tiles_in_every_direction():
    """Three tile rows (the last holds 1 row of C: one thread-row of 8 with 7 rows past M), two tile
    columns (the last 3 wide) and three k steps (the last 5 deep): the rows past M must not be stored,
    the columns past N not read, and k past K land in the tiles as zeros."""
    shape = (2 * sol.BM + 1, sol.BN + 3, 2 * sol.BK + 5)
    g.run_and_compare("blocking_1d", shape, rtol=sol.tolerance(shape[2]))


def test_accumulator_in_registers():
    """The day's idea, as the compiler sees it: the 8 sums in registers (no stack frame: every index
    into the local array a constant after unrolling), tiles through shared memory with two barriers,
    and per multiply-add at most 1 + 1/8 shared loads in the PTX (day 41's kernel: 2)."""
    rep = g.report("blocking_1d")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"blocking_1d: {rep.stack_bytes} bytes of stack frame: index the accumulator only in loops over "
        "range(TM) (a constant trip count), so every index is a constant and it lives in registers")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "blocking_1d: no shared-memory traffic"
    assert rep.count("bar.sync") >= 2, (
        f"blocking_1d: {rep.count('bar.sync')} barrier(s): one after loading the tiles, one before the next "
        "step overwrites them")
    fmas = rep.ptx.count("fma.rn.f32")
    assert fmas > 0, "blocking_1d: no fused multiply-add in the PTX"
    assert rep.count("ld.shared") <= 1.25 * fmas, (
        f"blocking_1d: {rep.count('ld.shared')} shared loads for {fmas} multiply-adds in the PTX: read the "
        "B value once per kk into a register and use it for all TM outputs")
    assert rep.registers <= 128, f"blocking_1d: {rep.registers} registers a thread (8 accumulators need far fewer)"


def test_fewer_shared_requests_per_output_than_day41():
    """The step's point, counted as Nsight Compute counts it (64^3): day 41 reads two shared words per
    multiply-add (K / 16 warp requests per output, plus the tile stores); with a column of 8 outputs a
    thread reads 1 + 1/8, so 9K / 256 per output: 1.78x fewer requests. At least 1.6x fewer passes."""
    g.require_implemented(*OWN)
    m, n, _ = sol.sizes(sol.TEST_SIZES[-1])
    day41, mine = traffic("shared_tiles"), traffic("blocking_1d")
    assert mine.shared_requests > 0, "blocking_1d: no shared-memory requests: stage the tiles in shared memory"
    assert 1.6 * mine.shared_requests <= day41.shared_requests, (
        f"blocking_1d: {mine.shared_requests / (m * n):.2f} shared requests per output against shared_tiles' "
        f"{day41.shared_requests / (m * n):.2f}: read each B value once per kk and reuse it from a register "
        "for the thread's TM outputs")
    assert mine.wavefronts_per_request <= 1.1, (
        f"blocking_1d: {mine.wavefronts_per_request:.2f} wavefronts per shared request: a warp should read "
        "one word of a_tile (a broadcast: all lanes on the same rows) and a row of b_tile")


def test_fewer_global_loads_per_output_than_day41():
    """64 x 64 tiles 8 deep: per k step a block loads (64 + 64) x 8 floats for 64 x 64 outputs, half day
    41's load requests per output; still a row of a tile (B) or 4 rows of 8 floats (A) a request."""
    g.require_implemented(*OWN)
    day41, mine = traffic("shared_tiles"), traffic("blocking_1d")
    assert 1.9 * mine.global_load_requests <= day41.global_load_requests, (
        f"blocking_1d: {mine.global_load_requests} global load requests against shared_tiles' "
        f"{day41.global_load_requests}: one element of each 64 x 8 and 8 x 64 tile a thread per k step")
    assert mine.sectors_per_load <= 4.1, (
        f"blocking_1d: {mine.sectors_per_load:.1f} sectors per load request: let a warp read along k in A "
        "(4 rows x 8 floats) and along the columns in B")
    assert mine.sectors_per_store <= 4.1, (
        f"blocking_1d: {mine.sectors_per_store:.1f} sectors per store request: a warp should store 32 "
        "consecutive columns of one row of C")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((1021, 1023, 513),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((1021, 1023, 513),)])
def test_blocking_1d_at_bench_size(n):
    """4096^3, 4093 x 4099 x 1021 and 1021 x 1023 x 513 (no side a multiple of a tile) on the GPU."""
    g.run_and_compare("blocking_1d", n, rtol=sol.tolerance(sol.sizes(n)[2]))
