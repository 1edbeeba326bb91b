"""Day 55 grader: out = GELU(x + bias), exact (erf) and tanh, three passes (naive) and one (optimized)."""

import functools

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(55)
sol = g.solution
TRAFFIC_SIZE = (64, 128, "none")  # whole warps, rows 16-byte aligned, 8 quads a thread: exact counts
traffic = functools.cache(lambda version: g.traffic(version, TRAFFIC_SIZE))

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "bias-one-short": lambda xs: (xs[0], np.ascontiguousarray(xs[1][:-1]), xs[2]),
        "bias-one-long": lambda xs: (xs[0], np.append(xs[1], np.float32(1)), xs[2]),
        "bias-as-a-row": lambda xs: (xs[0], xs[1][None, :].copy(), xs[2]),
        "x-flat": lambda xs: (xs[0].ravel().copy(), xs[1], xs[2]),
        "approximate-unknown": lambda xs: (xs[0], xs[1], "exact"),
        "approximate-not-a-string": lambda xs: (xs[0], xs[1], True),
    }
)


@pytest.mark.parametrize("approximate", sol.APPROXIMATIONS)
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_both_tails(version, approximate):
    """z from -12 to 12 across rows of 129 (quads crossing row ends): no NaN or inf where exp would
    overflow, the negative tail (where 1 + erf and 1 + tanh cancel) within tolerance, the positive
    one equal to z."""
    g.require_implemented(version)
    rows, cols = 3, 129
    x = np.linspace(-12.0, 12.0, rows * cols, dtype=np.float32).reshape(rows, cols)
    bias = np.linspace(-0.25, 0.25, cols, dtype=np.float32)
    got = getattr(g.target, version)(x, bias, approximate)
    assert np.isfinite(got).all(), f"{version}: {np.count_nonzero(~np.isfinite(got))} elements not finite"
    checking.assert_matches(got, sol.reference(x, bias, approximate), name=f"{version}({approximate!r})")


@pytest.mark.parametrize("approximate", sol.APPROXIMATIONS)
def test_negative_tail_keeps_its_digits(approximate):
    """A row with z in [-9, -3] only: GELU(z) there is 1e-3 down to 1e-19 of |z|, and 1 + erf (or
    1 + tanh) in float32 is 1 - (1 - tiny): nothing of tiny is left. Written as 0.5 z erfc(-z/sqrt 2)
    and z sigmoid(2u), each element keeps float32's relative precision (against this row's scale)."""
    g.require_implemented("optimized")
    x = np.linspace(-9.0, -3.0, 257, dtype=np.float32)[None, :]
    bias = np.zeros(257, np.float32)
    got = g.target.optimized(x, bias, approximate)
    checking.assert_matches(got, sol.reference(x, bias, approximate), name=f"optimized({approximate!r})")


def test_the_two_forms_differ():
    """approximate="none" is the exact erf form, not tanh's: at z = -2.7 they differ by 4.7e-4."""
    g.require_implemented("optimized")
    x = np.full((1, 8), -2.7, np.float32)
    bias = np.zeros(8, np.float32)
    exact, approx = (g.target.optimized(x, bias, a) for a in ("none", "tanh"))
    checking.assert_matches(exact, sol.reference(x, bias, "none"), name="optimized('none')")
    checking.assert_matches(approx, sol.reference(x, bias, "tanh"), name="optimized('tanh')")


def test_one_pass_at_the_minimum_traffic():
    """The day's point, counted in the simulator at 64 x 128: the fused kernel is one launch whose
    sectors carry within 1.1x of the minimum (x read once, out written once); the three passes move
    about three times it (each kernel reads and writes a whole array)."""
    mine, unfused = traffic("optimized"), traffic("naive")
    minimum = sol.traffic(*sol.make_inputs(TRAFFIC_SIZE))[0]
    assert mine.launches == 1, f"optimized: {mine.launches} launches: bias and GELU belong in one kernel"
    assert mine.global_bytes <= 1.1 * minimum, (
        f"optimized: {mine.global_bytes} bytes through global memory against the minimum {minimum}: "
        "read x once, write out once, and the biases once a thread")
    assert unfused.launches == 3 and unfused.global_bytes >= 2.9 * minimum, (
        f"naive: {unfused.launches} launches moving {unfused.global_bytes / minimum:.2f}x the minimum: "
        "three elementwise passes (bias, GELU, store), each through device memory")


def test_sixteen_byte_requests():
    """16-byte loads and stores: a warp's request is 512 bytes, 16 sectors (4-byte ones: 4)."""
    mine, unfused = traffic("optimized"), traffic("naive")
    assert mine.sectors_per_load >= 12 and mine.sectors_per_store >= 12, (
        f"optimized: {mine.sectors_per_load:.1f} sectors per load request, {mine.sectors_per_store:.1f} "
        "per store: move 4 floats a lane with wide.load4 / wide.store4")
    assert unfused.sectors_per_load <= 5, f"naive: {unfused.sectors_per_load:.1f} sectors per load request"


def test_biases_read_once_a_thread():
    """A thread's four columns never change (the stride is a whole number of rows), so its biases are
    loaded once, before the loop: at 64 x 128 (8 quads a thread) the load requests are the x quads'
    (one a warp a quad, 64) and one a warp for the biases (8); a quarter more at most."""
    mine = traffic("optimized")
    rows, cols, _ = TRAFFIC_SIZE
    x_requests = rows * cols // 4 // 32
    assert mine.global_load_requests <= 1.25 * x_requests, (
        f"optimized: {mine.global_load_requests} load requests for {x_requests} warps' worth of x quads: "
        "load the biases into registers once, not for every quad")


def test_vector_instructions_and_registers():
    """The compiler's side: the fused kernel has ld.v4 / st.v4, no stack frame, no float64."""
    rep = g.report("optimized")
    assert rep.count("vector ld/st") > 0, "optimized: no vector load or store in the PTX (use course.wide)"
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack"
    assert ".f64" not in rep.ptx, "optimized computes in float64: write constants as float32(...)"
    assert g.report("naive").count("vector ld/st") == 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((4099, 4097, "none"), (2048, 4096, "tanh"), sol.BENCH_SIZES[1]),
                         ids=["4099x4097-none", "2048x4096-tanh", "bench-none"])
def test_large(n):
    """On the GPU: an odd width (quads across every row end), an aligned one, the benchmark size."""
    for version in sol.VERSIONS:
        g.run_and_compare(version, n)
