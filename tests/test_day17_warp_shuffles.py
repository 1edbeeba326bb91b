"""Day 17 grader: row sums, a shared-memory tree against warp shuffles."""

import pytest

from course.grading import Grader

g = Grader(17)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "one-dimensional": lambda xs: (xs[0].ravel(),),
        "no-columns": lambda xs: (xs[0][:, :0].copy(),),
    }
)


def test_rows_outnumber_blocks():
    """More rows than the simulator's grid has blocks: every block strides over several rows, and
    shared memory is reused from one row to the next (a race there shows up here)."""
    g.run_and_compare("optimized", (29, 300))


def test_optimized_reduces_with_shuffles():
    """v2 folds each warp in registers (shfl.sync) and needs a barrier or two a row, not one per
    halving; v1 is the shared-memory tree: no shuffles, barriers between its steps."""
    opt = g.report("optimized")
    assert opt.count("shfl.sync") > 0, (
        "optimized: no shfl.sync in the PTX; fold each warp in registers with warp shuffles "
        "(cuda.shfl_down_sync(FULL_MASK, v, offset) for offset 16, 8, 4, 2, 1)")
    assert not opt.uses_local_memory, f"optimized: {opt.stack_bytes} bytes of stack (local memory)"
    assert opt.count("bar.sync") <= 2, (
        f"optimized: {opt.count('bar.sync')} barriers in the PTX; after the shuffles a row needs one "
        "(two if the warps' slots are not alternated between rows)")
    naive = g.report("naive")
    assert naive.count("shfl.sync") == 0, "naive: the shared-memory tree should not use shuffles"
    assert naive.count("ld.shared") > 0 and naive.count("st.shared") > 0 and naive.count("bar.sync") > 0


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
