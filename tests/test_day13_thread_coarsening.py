"""Day 13 grader: thread coarsening -- a vertical 9-tap filter, one vs eight outputs per thread."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(13)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=(17, 33),
    extra_cases={
        "image-one-dimensional": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1]),
        "too-few-taps": lambda xs: (xs[0], xs[1][:-1].copy()),
    },
)


def test_optimized_tail_tiles():
    """Heights that leave the last tile of COARSEN rows partly empty (and one exactly full)."""
    for rows in (g.solution.COARSEN - 1, 2 * g.solution.COARSEN, 3 * g.solution.COARSEN + 5):
        g.run_and_compare("optimized", (rows, 37), parts=("tail", rows))


def _loads(rep):
    return rep.count("ld.global") + rep.count("ld (generic)")


def test_optimized_loads_less_per_output():
    """Count loads in the PTX: naive issues them for one output, optimized for COARSEN outputs."""
    naive, opt = g.report("naive"), g.report("optimized")
    per_naive = _loads(naive)
    per_opt = _loads(opt) / g.target.COARSEN
    assert per_naive >= 2 * g.solution.TAPS - 1, f"naive: expected ~{2 * g.solution.TAPS} loads, PTX has {per_naive}"
    assert per_opt * 2 <= per_naive, (
        f"optimized: {_loads(opt)} loads for {g.target.COARSEN} outputs = {per_opt:.1f} per output vs naive "
        f"{per_naive}: load each row and weight once into registers and reuse it")


def test_optimized_keeps_the_window_in_registers():
    """The reused rows must stay in registers: a stack frame would mean the window went to local memory."""
    rep = g.report("optimized")
    assert not rep.uses_local_memory, (
        f"optimized: {rep.stack_bytes} bytes of stack: index the window only with loop counters of "
        "constant trip count so it unrolls into registers")


@pytest.mark.gpu
def test_optimized_at_bench_size():
    """On the GPU: the coarsened kernel at the benchmark size, against the float64 reference."""
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
