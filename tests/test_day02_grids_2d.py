"""Day 02 grader: 2D grids, one thread per row against (32, 8) blocks along the columns."""

import pytest

from course.grading import Grader

g = Grader(2)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "bias-too-short": lambda xs: (xs[0], xs[1][:-1]),
        "x-is-1d": lambda xs: (xs[0][0], xs[1]),
        "bias-is-2d": lambda xs: (xs[0], xs[1][None, :]),
    }
)


def test_optimized_strides_over_both_axes():
    """More columns and rows than the grid has threads: both loops must go round more than once."""
    g.run_and_compare("optimized", (70, 600))


def test_optimized_tall_and_narrow():
    """A single column: all the work is in the row loop, and most of each warp has no column."""
    g.run_and_compare("optimized", (203, 1))


def test_kernels_stay_in_registers():
    """A bias add needs no shared or local memory: each value goes load -> register -> store."""
    for label in ("naive", "optimized"):
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert rep.count("ld.shared") == rep.count("st.shared") == 0, f"{label} uses shared memory"


def test_optimized_keeps_several_loads_in_flight():
    """The optimized row loop takes several rows a trip, loads before stores: the PTX must issue
    more than one load of x back to back."""
    opt = g.report("optimized")
    assert opt.loads_in_flight >= 2, (
        f"optimized: at most {opt.loads_in_flight} load(s) before each store in the PTX; load "
        "several rows of the column first, then write them")


@pytest.mark.gpu
def test_optimized_large():
    """A matrix several times the L2, with awkward sides: every block edge is exercised."""
    g.run_and_compare("optimized", (4099, 8191))


def test_the_2d_walk_reads_a_third_of_the_sectors_per_request_or_fewer():
    """A warp along a row (x the column index) reads consecutive floats: ~4 sectors a request; a warp
    down the rows (one row a thread) touches one sector per lane."""
    naive, opt = g.traffic("naive"), g.traffic("optimized")
    assert opt.sectors_per_load <= naive.sectors_per_load / 3, (
        f"optimized: {opt.sectors_per_load:.1f} sectors per load request against naive's "
        f"{naive.sectors_per_load:.1f}: cuda.grid(2)'s x, the fastest thread index, should walk the columns")
