"""Day 11 grader: registers and occupancy -- column mean and variance, one-pass vs two-pass in registers."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(11)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "wrong-row-count": lambda xs: (np.ascontiguousarray(xs[0][:-1]),),
        "one-dimensional": lambda xs: (np.ascontiguousarray(xs[0][0]),),
    }
)


def test_naive_loops_over_the_grid():
    """The one-pass kernel covers every column with a grid-stride loop: check it past one grid's worth."""
    g.run_and_compare("naive", 4099)


def test_occupancy_calculator():
    """The H200's limits: 65536 registers, 2048 threads and 32 blocks an SM, 228 KB of shared memory."""
    g.require_implemented("occupancy")
    occ = g.target.occupancy
    full = occ(32, 256)
    assert (full["blocks_per_sm"], full["warps_per_sm"], full["occupancy"]) == (8, 64, 1.0)
    assert occ(64, 256)["blocks_per_sm"] == 4 and occ(64, 256)["limited_by"] == "registers"
    # 33 registers round up to 40 (registers go to warps 256 at a time): 6 blocks of 256, not 7.
    assert occ(33, 256)["blocks_per_sm"] == 6
    assert occ(255, 256)["warps_per_sm"] == 8
    assert occ(16, 32)["blocks_per_sm"] == 32 and occ(16, 32)["limited_by"] == "blocks"
    # 100 KB of shared memory a block (plus the 1 KB the system keeps): two blocks fit in 228 KB.
    shared = occ(32, 128, shared_bytes=100 * 1024)
    assert shared["blocks_per_sm"] == 2 and shared["limited_by"] == "shared memory"
    with pytest.raises(ValueError):
        occ(300, 256)


def test_optimized_spends_registers_on_loads_in_flight():
    """The point of the day: the optimized kernel holds the column in registers (no local memory),
    more of them than the one-pass kernel's running sums, so it runs at a lower occupancy."""
    naive, opt = g.report("naive"), g.report("optimized")
    for label, rep in (("naive", naive), ("optimized", opt)):
        assert rep.registers > 0, f"{label}: no register count from the compiler"
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack: keep it in registers"
    assert opt.registers > naive.registers, (
        f"naive uses {naive.registers} registers, optimized {opt.registers}: the optimized kernel keeps the "
        "column's values live, the one-pass kernel only its running sums")
    occ = g.target.occupancy
    threads = g.target.THREADS
    low, high = occ(opt.registers, threads)["occupancy"], occ(naive.registers, threads)["occupancy"]
    assert low < high, (
        f"occupancy at {opt.registers} registers ({low:.0%}) should be below that at {naive.registers} ({high:.0%})")


@pytest.mark.gpu
def test_optimized_at_bench_size():
    """On the GPU: the two-pass register kernel at the benchmark size, against the float64 reference."""
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
