"""Day 01 grader: vector add, one element per thread and grid-stride."""

from course.grading import Grader

g = Grader(1)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={"length-mismatch": lambda xs: (xs[0], xs[1][:-1])}
)


def test_optimized_loops_over_the_grid():
    """A grid-stride kernel covers n elements with fewer threads than n: check it on a large n."""
    g.run_and_compare("optimized", 40_000)


def test_kernels_stay_in_registers():
    """Vector add needs no shared or local memory: everything lives in registers between the loads."""
    for label in ("naive", "optimized"):
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert rep.count("ld.shared") == rep.count("st.shared") == 0
