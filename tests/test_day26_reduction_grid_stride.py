"""Day 26 grader: reduction IV, one element pair per thread vs a grid-stride loop over the GPU."""

import numpy as np
import pytest

from course import launch
from course.grading import Grader

g = Grader(26)
sol = g.solution

# A size where the simulator's grid (4 blocks of 256: one SM's worth) makes several full trips.
TRIPS_SIZE = 70001



@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every version at the awkward sizes. The naive version is day 25's, given: it is graded here as
    the row the grid-stride one is compared with, once the day's own kernel is written."""
    g.require_implemented("optimized")
    g.run_and_compare(version, n)


# The naive version's input checks are day 25's (its grader tests them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=("optimized",),
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    }
)


def test_several_grid_stride_trips():
    """Every thread loops: four full trips of eight words and a ragged tail, then the odd float."""
    g.run_and_compare("optimized", TRIPS_SIZE)


def test_input_not_on_an_8_byte_boundary():
    """A device view x[1:] starts 4 bytes past an 8-byte boundary: the wide loads must still be
    aligned (handle the first float on its own) and the sum still right; the result stays on the device."""
    g.require_implemented("optimized")
    (x,), seed = g.inputs(4099, "unaligned")
    (d_x,) = launch.to_device(x)
    got = g.target.optimized(d_x[1:])
    assert launch.is_device_array(got), "optimized: a device array in should give a device array out"
    from course import checking

    checking.assert_matches(got, sol.reference(x[1:]), rtol=sol.RTOL, name=f"optimized(x[1:], seed={seed})")


def test_grid_is_sized_to_the_gpu():
    """Each block stores one partial, so the store requests count the blocks (plus the final pass):
    far fewer than n / 256, as a grid sized to the GPU and a grid-stride loop give; the naive
    version's one pair per thread needs n / 512 blocks."""
    n = TRIPS_SIZE
    opt = g.traffic("optimized", n)
    assert opt.global_store_requests < n / 256 / 8, (
        f"optimized: {opt.global_store_requests} store requests (about one per block) for n = {n}: "
        "size the grid to the GPU (launch.grid_stride_blocks) and let each thread loop over many elements")
    assert opt.sectors_per_load >= 4, f"optimized: {opt.sectors_per_load:.1f} sectors per load request: not coalesced"


def test_optimized_keeps_loads_in_flight():
    """Several independent global loads issued before the adds (wide words or several accumulators),
    shuffles for the block's fold, and the registers staying registers."""
    opt, naive = g.report("optimized"), g.report("naive")
    assert opt.loads_in_flight >= 4, (
        f"optimized: at most {opt.loads_in_flight} global load(s) in a row in the PTX; issue several "
        "independent loads a trip (all loads first, then the adds) so that bytes are in flight")
    assert opt.loads_in_flight > naive.loads_in_flight
    assert opt.count("shfl.sync") > 0, "optimized: no shfl.sync: fold the block's accumulators with warp shuffles"
    assert not opt.uses_local_memory, (
        f"optimized: {opt.stack_bytes} bytes of stack (local memory): index the word registers with "
        "constants only (unrolled loops)")


@pytest.mark.gpu
def test_optimized_at_largest_size():
    """2^28 floats: the accumulation chains stay short enough for the interface's 1e-5."""
    g.run_and_compare("optimized", 1 << 28)


@pytest.mark.gpu
def test_library_at_largest_size():
    g.run_and_compare("library", 1 << 28)
