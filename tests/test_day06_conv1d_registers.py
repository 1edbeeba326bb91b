"""Day 06 grader: 1D convolution, one output per thread and a register window."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(6)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "mask-too-short": lambda xs: (xs[0], xs[1][:-1]),
        "mask-2d": lambda xs: (xs[0], np.ascontiguousarray(xs[1][None, :])),
        "x-2d": lambda xs: (np.ascontiguousarray(xs[0][None, :]), xs[1]),
    }
)


def test_optimized_covers_more_outputs_than_threads():
    """The grid-stride loop must visit every chunk: a size the simulator's grid cannot cover in one pass."""
    g.run_and_compare("optimized", 20_011)


def test_optimized_keeps_mask_and_window_in_registers():
    """Registers cannot be indexed at run time: a stack frame means the arrays went to local memory."""
    rep = g.report("optimized")
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"
    assert rep.count("ld.local") + rep.count("st.local") == 0, "optimized: local loads/stores in PTX"


def _global_loads(rep):
    return rep.count("ld.global") + rep.count("ld (generic)")


def test_optimized_loads_fewer_values_per_output():
    """Count the loads in PTX: naive issues 2 per tap per output, the register version
    (WINDOW + MASK_WIDTH) per OUTPUTS_PER_THREAD outputs."""
    naive, opt = g.report("naive"), g.report("optimized")
    per_naive = _global_loads(naive)  # one output per thread: the whole kernel is one output
    per_opt = _global_loads(opt) / sol.OUTPUTS_PER_THREAD  # both window paths counted: an upper bound
    assert per_naive >= sol.MASK_WIDTH, f"naive: only {per_naive} loads for {sol.MASK_WIDTH} taps"
    assert per_opt * 1.5 <= per_naive, (
        f"optimized: {per_opt:.1f} loads per output vs naive's {per_naive}: keep taps and inputs in registers")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", 1 << 24)
    g.run_and_compare("naive", (1 << 24) + 3)
