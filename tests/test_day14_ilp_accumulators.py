"""Day 14 grader: instruction-level parallelism -- column sums with one vs four accumulators."""

import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(14)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=(257, 33),
    extra_cases={
        "one-dimensional": lambda xs: (np.ascontiguousarray(xs[0][:, 0]),),
        "no-rows": lambda xs: (xs[0][:0].copy(),),
    },
)

_ADD = re.compile(r"^(?:@!?%\w+\s+)?add(?:\.rn)?\.f32\s+(%\w+),\s*(%\w+),\s*(%\w+)")
_BLOCK_END = re.compile(r"^(?:\$\w+:|(?:@!?%\w+\s+)?(?:bra|ret))")


def independent_add_chains(ptx: str) -> int:
    """The most float adds in one straight-line block of PTX whose result no later add of it reads.

    A loop body `acc += x[r]` unrolled four times is one chain (each add feeds the next): 1.
    Four accumulators updated in the same body are four chains the scheduler can overlap: 4.
    """
    best = 0
    block: list[tuple[str, str, str]] = []
    for line in ptx.splitlines() + ["ret;"]:
        line = line.split("//")[0].strip()
        m = _ADD.match(line)
        if m:
            block.append(m.groups())
        elif _BLOCK_END.match(line):
            # an add ends a chain unless a later add of the block reads its result
            ends = sum(1 for i, (dst, _, _) in enumerate(block)
                       if not any(dst in (a, b) for _, a, b in block[i + 1:]))
            best = max(best, ends)
            block = []
    return best


def test_tails_of_every_length():
    """Chunks whose row count leaves 0, 1, 2 or 3 rows after the four-row trips."""
    for rows in (64, 65, 66, 67, 131):
        g.run_and_compare("optimized", (rows, 5), parts=("tail", rows))


def test_optimized_has_independent_add_chains():
    """The PTX of the main loop must hold several add chains that do not feed each other."""
    naive, opt = g.report("naive"), g.report("optimized")
    chains_naive, chains_opt = independent_add_chains(naive.ptx), independent_add_chains(opt.ptx)
    assert chains_naive == 1, f"naive should be one dependent chain of adds, found {chains_naive} independent"
    assert chains_opt >= 2, (
        f"optimized: {chains_opt} independent add chain(s) in any block of the PTX; keep several "
        "accumulators and add a different row into each")
    assert not opt.uses_local_memory, f"optimized: {opt.stack_bytes} bytes of stack: keep the accumulators in registers"


@pytest.mark.gpu
def test_optimized_at_bench_size():
    """On the GPU: the four-accumulator kernel at the benchmark size, against the float64 reference."""
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
