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


def _global_loads(rep):
    # Numba's PTX spells a global load either ld.global or a generic ld; count both.
    return rep.count("ld.global") + rep.count("ld (generic)")


def test_optimized_has_four_loads_in_flight():
    """Bytes in flight: the unrolled loop body has four loads of x, the naive kernel one."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert _global_loads(naive) == 1, f"naive: {_global_loads(naive)} global loads in the PTX, expected 1"
    assert _global_loads(opt) >= 5, (
        f"optimized: {_global_loads(opt)} global loads in the PTX; expected four in the unrolled loop "
        "and one in the tail")


def test_kernels_stay_in_registers():
    for label in g.versions:
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert rep.count("ld.shared") == rep.count("st.shared") == 0, f"{label} uses shared memory"


@pytest.mark.gpu
def test_optimized_large():
    """2^26 + 5 elements, several times the L2, on the real grid of 132 SMs x 8 blocks."""
    g.run_and_compare("optimized", (1 << 26) + 5)
