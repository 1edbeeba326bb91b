"""Day 12 grader: local memory and spills -- median of 9 by insertion sort vs a min/max network."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(12)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(np.stack([xs[0], xs[0]])),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    }
)


def test_optimized_loops_over_the_grid():
    """The network kernel walks the array with a grid-stride loop: check it on a longer input."""
    g.run_and_compare("optimized", 6007)


def test_optimized_removes_spikes_and_keeps_ties():
    """Hand-made windows: a lone spike vanishes, a plateau of equal values survives, edges repeat."""
    g.require_implemented("optimized")
    x = np.array([1, 2, 3, 4, 99, 5, 6, 7, 8, 2, 2, 2, 2, 2, -50, 2, 2, 2, 2, 2, 2], dtype=np.float32)
    got = g.target.optimized(x)
    np.testing.assert_array_equal(got, g.solution.reference(x))


def test_naive_uses_local_memory():
    """The insertion sort indexes its window with run-time values: the window must live in local memory."""
    rep = g.report("naive")
    assert rep.stack_bytes > 0, "naive: no stack frame -- is the sort indexing the window at run time?"
    assert rep.count("ld.local") > 0 and rep.count("st.local") > 0


def test_optimized_stays_in_registers():
    """Every value of the network has a fixed name, so nothing goes to local memory."""
    rep = g.report("optimized")
    assert rep.stack_bytes == 0, (
        f"optimized: {rep.stack_bytes} bytes of stack frame (local memory); an array indexed with a "
        "run-time value cannot live in registers: use named scalars and min/max")
    assert rep.count("ld.local") == rep.count("st.local") == 0
    assert rep.spill_stores == rep.spill_loads == 0


@pytest.mark.gpu
def test_optimized_at_bench_size():
    """On the GPU: the network kernel at 2^23 samples (NumPy's reference is the slow part beyond)."""
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0] // 16)
