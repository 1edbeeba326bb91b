"""Day 41 grader: matrix multiply step 3, 32 x 32 tiles of A and B staged in shared memory."""

import functools

import pytest

from course.grading import Grader

g = Grader(41)
sol = g.solution
traffic = functools.cache(g.traffic)  # one recorded run of a version serves both traffic tests
OWN = ("shared_tiles",)  # the day's own version: naive and coalesced are days 39 and 40's, given


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every step so far at every test shape (K = 37, 40, 67: a partial last k tile), within float32
    accumulation error (sol.tolerance(K)); the earlier steps are graded once the day's kernel is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, n, rtol=sol.tolerance(sol.sizes(n)[2]))


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
    """Three tiles down, two across, three k steps, each one partial: rows past M, columns past N and
    k past K all land in the tiles as zeros (a tile that reads past K, or keeps the last step's values
    there, is off)."""
    shape = (2 * sol.TILE + 1, sol.TILE + 3, 2 * sol.TILE + 5)
    g.run_and_compare("shared_tiles", shape, rtol=sol.tolerance(shape[2]))


def test_shared_tiles_go_through_shared_memory():
    """The day's idea, whatever the tile's shape: tiles stored to shared memory and read back from
    there, a barrier before the reads and one before the next overwrite, nothing in local memory."""
    rep = g.report("shared_tiles")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "shared_tiles: no shared-memory traffic"
    assert rep.count("bar.sync") >= 2, (
        f"shared_tiles: {rep.count('bar.sync')} barrier(s): a tile step needs one after loading the tiles "
        "and one after reading them (before the next step overwrites them)")
    assert rep.stack_bytes == 0, f"shared_tiles: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_each_element_loaded_once_per_tile():
    """The step's point, counted as Nsight Compute counts it (64^3): day 40 issues 2K / 32 load requests
    per output (each thread its own row of A and column of B); with 32 x 32 tiles a warp loads one row
    of each tile per 32 k, 2 ceil(K / 32) / 32 per output: 32x fewer. At least 16x fewer passes."""
    g.require_implemented(*OWN)
    m, n, k = sol.sizes(sol.TEST_SIZES[-1])
    day40, tiled = traffic("coalesced"), traffic("shared_tiles")
    per_output = tiled.global_load_requests / (m * n)
    assert 16 * tiled.global_load_requests <= day40.global_load_requests, (
        f"shared_tiles: {per_output:.3f} global load requests per output against coalesced's "
        f"{day40.global_load_requests / (m * n):.3f}: load each element of A and B once per tile, into shared "
        "memory, and let the block's 32 warps read it from there")
    assert tiled.sectors_per_load <= 4.1, (
        f"shared_tiles: {tiled.sectors_per_load:.1f} sectors per load request: a warp should load a row of "
        "each tile (x along k for A, along the columns for B)")
    assert tiled.sectors_per_store <= 4.1, (
        f"shared_tiles: {tiled.sectors_per_store:.1f} sectors per store request: x along the columns of C")


def test_tile_reads_are_conflict_free():
    """a_tile[ty, kk] is one word for the whole warp (a broadcast) and b_tile[kk, tx] a row, one bank a
    lane: one wavefront a shared request, loads and stores alike."""
    t = traffic("shared_tiles")
    assert t.shared_requests > 0, "shared_tiles: no shared-memory requests: stage the tiles in shared memory"
    assert t.wavefronts_per_request <= 1.1, (
        f"shared_tiles: {t.wavefronts_per_request:.2f} wavefronts per shared request: a warp's lanes hit one "
        "bank (reading a column of a 32-wide tile?); read b_tile along its rows and a_tile at one word")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES, ids=[str(n) for n in sol.BENCH_SIZES])
def test_shared_tiles_at_bench_size(n):
    """4096^3 and 4093 x 4099 x 1021 (K = 1021: a partial last tile) on the GPU."""
    g.run_and_compare("shared_tiles", n, rtol=sol.tolerance(sol.sizes(n)[2]))
