"""Day 06 grader: 1D convolution, one output per thread and a register window shared through shuffles."""

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
    """The grid-stride loop must visit every warp chunk: a size the simulator's grid cannot cover in one pass."""
    g.run_and_compare("optimized", 20_011)


def test_optimized_keeps_mask_and_window_in_registers():
    """Registers cannot be indexed at run time: a stack frame means an array went to local memory."""
    rep = g.report("optimized")
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} bytes of stack frame (local memory)"
    assert rep.count("ld.local") + rep.count("st.local") == 0, (
        "optimized: local loads/stores in PTX (a runtime index, or a choice between two array slots "
        "instead of two values)")


def _global_loads(rep):
    return rep.count("ld.global") + rep.count("ld (generic)")


def test_optimized_loads_fewer_values_per_output():
    """Count the loads in PTX: naive issues 2 per tap per output; the register version loads the taps
    once and C + 1 rows of 32 inputs per warp chunk, OUTPUTS_PER_THREAD = C outputs per lane."""
    naive, opt = g.report("naive"), g.report("optimized")
    c = sol.OUTPUTS_PER_THREAD
    per_naive = _global_loads(naive)  # one output per thread: the whole kernel is one output
    per_opt = _global_loads(opt) / c  # the taps counted too: an upper bound
    budget = (sol.MASK_WIDTH + c + 1) / c
    assert per_naive >= sol.MASK_WIDTH, f"naive: only {per_naive} loads for {sol.MASK_WIDTH} taps"
    assert per_opt <= budget, (
        f"optimized: {_global_loads(opt)} loads in PTX for {c} outputs per lane ({per_opt:.2f} per output); "
        f"the budget is {sol.MASK_WIDTH} taps once plus {c + 1} window rows ({budget:.2f} per output): "
        f"neighbours' inputs come from their registers, not from another load")


def test_optimized_reads_neighbours_through_shuffles():
    """A lane's window holds one input in 32: the other 16 taps of each output sit in the registers of
    the lanes around it, read with one shfl.sync per tap per output. Naive has none."""
    naive, opt = g.report("naive"), g.report("optimized")
    need = sol.MASK_WIDTH * sol.OUTPUTS_PER_THREAD
    assert naive.count("shfl.sync") == 0, "naive: shuffles in PTX; naive reads every tap from global memory"
    assert opt.count("shfl.sync") >= need, (
        f"optimized: {opt.count('shfl.sync')} shfl.sync in PTX, expected {need} "
        f"(one per tap per output, loops unrolled)")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", 1 << 24)
    g.run_and_compare("naive", (1 << 24) + 3)
