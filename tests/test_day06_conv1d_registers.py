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


def _outputs_per_thread():
    return getattr(g.target, "OUTPUTS_PER_THREAD", sol.OUTPUTS_PER_THREAD)


def test_optimized_loads_fewer_values_per_output():
    """Count the loads in PTX: naive issues one per tap per output. A register window loads the taps
    once and each input of its window once, then reuses them from registers for every output that
    needs them: fewer loads per output than taps, even with the taps and the edge path counted."""
    naive, opt = g.report("naive"), g.report("optimized")
    v = _outputs_per_thread()
    per_naive = _global_loads(naive)  # one output per thread: the whole kernel is one output
    per_opt = _global_loads(opt) / v  # the taps and the edge path counted too: an upper bound
    assert per_naive >= sol.MASK_WIDTH, f"naive: only {per_naive} loads for {sol.MASK_WIDTH} taps"
    assert per_opt < sol.MASK_WIDTH, (
        f"optimized: {_global_loads(opt)} loads in PTX for {v} outputs per thread ({per_opt:.2f} per output), "
        f"no fewer than the {sol.MASK_WIDTH} taps: each output still loads its own neighbours; load each input "
        f"once and take the inputs an output shares with its neighbours from registers")


def test_optimized_moves_eight_byte_words():
    """Away from the ends of x, inputs and outputs travel as 8-byte words (two floats per load or
    store instruction), not one float at a time."""
    rep = g.report("optimized")
    wide = r"\.(v2\.(u32|b32|f32)|u64|b64)\b"
    loads = len(re.findall(r"ld\.global(\.nc)?" + wide, rep.ptx))
    stores = len(re.findall(r"st\.global" + wide, rep.ptx))
    assert loads >= 1 and stores >= 1, (
        f"optimized: {loads} 8-byte global loads and {stores} 8-byte stores in PTX: load the window and "
        f"store the outputs through x and out viewed as uint64 words")


def test_optimized_reads_neighbours_through_shuffles():
    """A lane's outputs need inputs that the next lanes loaded: they come over from those lanes'
    registers by shfl.sync, not from another load. Naive has none."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert naive.count("shfl.sync") == 0, "naive: shuffles in PTX; naive reads every tap from global memory"
    assert opt.count("shfl.sync") >= 1, (
        "optimized: no shfl.sync in PTX: the inputs a lane shares with its neighbours come from their registers "
        "through cuda.shfl_sync")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", 1 << 24)
    g.run_and_compare("naive", (1 << 24) + 3)
