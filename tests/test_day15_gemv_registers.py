"""Day 15 grader: GEMV, a thread per row and a warp per four rows with x in registers and shuffles."""

import pytest

from course.grading import Grader

g = Grader(15)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "x-too-short": lambda xs: (xs[0], xs[1][:-1]),
        "a-one-dimensional": lambda xs: (xs[0].ravel(), xs[1]),
        "no-columns": lambda xs: (xs[0][:, :0].copy(), xs[1][:0].copy()),
    }
)


def test_optimized_grid_strides_over_rows():
    """More row groups than the simulator's grid has warps: every warp must come back for more rows."""
    g.run_and_compare("optimized", (1201, 40))


def test_optimized_reduces_in_registers():
    """v2: lanes share their partial sums through warp shuffles, with no local memory; v1 has none."""
    opt = g.report("optimized")
    assert opt.count("shfl.sync") > 0, (
        "optimized: no shfl.sync in the PTX; the lanes of a warp should combine their partial sums "
        "with warp shuffles (cuda.shfl_down_sync, offsets 16, 8, 4, 2, 1)")
    assert not opt.uses_local_memory, f"optimized: {opt.stack_bytes} bytes of stack (local memory)"
    naive = g.report("naive")
    assert naive.count("shfl.sync") == 0 and naive.count("ld.shared") == 0
    assert not naive.uses_local_memory


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
