"""Day 39 grader: matrix multiply step 1, one thread per output with x along the rows of C."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(39)
sol = g.solution


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every version at every test shape, held to the float32 accumulation error of a K-long dot
    product (sol.tolerance(K): 8 sqrt(K) 2^-24 of max|C|); one lost k term is far outside it."""
    g.run_and_compare(version, n, rtol=sol.tolerance(sol.sizes(n)[2]))


test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-one-dimensional": lambda xs: (xs[0].ravel(), xs[1]),
        "b-three-dimensional": lambda xs: (xs[0], np.ascontiguousarray(xs[1][None])),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
        "no-columns": lambda xs: (xs[0], xs[1][:, :0].copy()),
    }
)


def test_naive_stays_in_registers():
    """One accumulator a thread, no shared memory, no barrier, no local memory: the baseline."""
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "naive: shared memory or barriers in the baseline: that is day 41's step")
    assert not rep.uses_local_memory, f"naive: {rep.stack_bytes} bytes of stack (local memory)"


def test_naive_walks_the_rows_of_c():
    """The step's point, counted as Nsight Compute counts it (64^3): the 32 lanes of a warp own 32
    rows of one column of C, so every store request writes 32 sectors (4 useful bytes each), every
    load of A reads 32 sectors and the load of b[k, j] one (a broadcast): 16.5 a load on average."""
    t = g.traffic("naive")
    assert t.sectors_per_store >= 28, (
        f"naive: {t.sectors_per_store:.1f} sectors per store request: the step's baseline lets x of the "
        "thread index walk the rows of C (i, j = cuda.grid(2)), so a warp writes down a column of C")
    assert t.sectors_per_load >= 12, (
        f"naive: {t.sectors_per_load:.1f} sectors per load request: a warp should read 32 rows of A "
        "(32 sectors) and one word of B")
    m, n, k = sol.sizes(sol.TEST_SIZES[-1])
    assert t.global_store_requests == m * n // 32, (
        f"naive: {t.global_store_requests} store requests for {m} x {n} outputs: one store per output, "
        "a request per warp")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES, ids=[str(n) for n in sol.BENCH_SIZES])
def test_naive_at_bench_size(n):
    """4096^3 and 4093 x 4099 x 1021 on the GPU (about a second a call for this step at 4096^3)."""
    g.run_and_compare("naive", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.gpu
def test_library_within_the_tolerance():
    """cuBLAS, the row every step is measured against, passes the same check at the awkward shape."""
    g.require_implemented("naive")
    (a, b), seed = g.inputs(sol.BENCH_SIZES[1], "library")
    got = checking.to_host(sol.library(a, b))
    checking.assert_matches(got, sol.reference(a, b), rtol=sol.RTOL, floor=sol.ERROR_FLOOR,
                            name=f"library (seed {seed})")
