"""Day 04 grader: a scale kernel three ways, one element per thread to unrolled grid-stride."""

import pytest

from course.grading import Grader

g = Grader(4)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "x-is-2d": lambda xs: (xs[0].reshape(1, -1), xs[1]),
        "alpha-is-an-array": lambda xs: (xs[0], xs[0][:1]),
    }
)


def test_optimized_covers_many_strides():
    """Many more elements than the grid has threads, and not a multiple of four strides: the unrolled
    loop runs several times and the tail loop finishes the rest."""
    g.run_and_compare("optimized", 2048 * 4 * 3 + 2048 * 2 + 77)


def test_optimized_has_several_loads_in_flight():
    """Bytes in flight: the unrolled loop issues several loads of x before its stores; the naive
    kernel's one load is followed by its store."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert naive.loads_in_flight == 1, f"naive: {naive.loads_in_flight} loads before a store, expected 1"
    assert opt.loads_in_flight >= 2, (
        f"optimized: at most {opt.loads_in_flight} load(s) before each store in the PTX; load "
        "several elements first, then write them")


def test_kernels_stay_in_registers():
    for label in g.versions:
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert rep.count("ld.shared") == rep.count("st.shared") == 0, f"{label} uses shared memory"


@pytest.mark.gpu
def test_optimized_large():
    """2^26 + 5 elements, several times the L2, on the real grid of 132 SMs x 8 blocks."""
    g.run_and_compare("optimized", (1 << 26) + 5)
