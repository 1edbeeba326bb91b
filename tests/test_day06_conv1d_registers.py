"""Day 06 grader: 1D convolution, one output per thread and a register window shared through shuffles."""

import re

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
    """Count the loads in PTX: naive issues one per tap per output. The register version loads the taps
    once, then per row of V outputs a lane loads its V inputs as 8-byte words (and the halo lanes V
    more); a row touching an end of x takes its 2 V inputs one at a time. Both paths are in the PTX."""
    naive, opt = g.report("naive"), g.report("optimized")
    v = sol.OUTPUTS_PER_THREAD
    per_naive = _global_loads(naive)  # one output per thread: the whole kernel is one output
    per_opt = _global_loads(opt) / v  # the taps and the edge path counted too: an upper bound
    budget = (sol.MASK_WIDTH + 2 * (v // 2) + 2 * v) / v
    assert per_naive >= sol.MASK_WIDTH, f"naive: only {per_naive} loads for {sol.MASK_WIDTH} taps"
    assert per_opt <= budget, (
        f"optimized: {_global_loads(opt)} loads in PTX for {v} outputs per lane ({per_opt:.2f} per output); "
        f"the budget is {sol.MASK_WIDTH} taps once, {v // 2} words of this row and of the next, and "
        f"{2 * v} single inputs on the edge path ({budget:.2f} per output): neighbours' inputs come from "
        f"their registers, not from another load")


def test_optimized_moves_eight_byte_words():
    """Away from the ends of x, a lane's inputs and outputs travel as 8-byte words (two floats per
    load or store instruction), not one float at a time."""
    rep = g.report("optimized")
    wide = r"\.(v2\.(u32|b32|f32)|u64|b64)\b"
    loads = len(re.findall(r"ld\.global(\.nc)?" + wide, rep.ptx))
    stores = len(re.findall(r"st\.global" + wide, rep.ptx))
    words = sol.OUTPUTS_PER_THREAD // 2
    assert loads >= words and stores >= words, (
        f"optimized: {loads} 8-byte global loads and {stores} 8-byte stores in PTX, expected at least "
        f"{words} each: load the row through x viewed as uint64 words")


def test_optimized_reads_neighbours_through_shuffles():
    """A lane holds V consecutive inputs; its V outputs need the 2 * RADIUS inputs after them too, held
    by the next lanes: one shfl.sync per input brought over, not one per tap. Naive has none."""
    naive, opt = g.report("naive"), g.report("optimized")
    need = 2 * sol.MASK_RADIUS
    assert naive.count("shfl.sync") == 0, "naive: shuffles in PTX; naive reads every tap from global memory"
    assert need <= opt.count("shfl.sync") <= 2 * need, (
        f"optimized: {opt.count('shfl.sync')} shfl.sync in PTX, expected {need} to {2 * need} "
        f"(the {need} inputs past a lane's own V, loops unrolled)")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", 1 << 24)
    g.run_and_compare("naive", (1 << 24) + 3)
