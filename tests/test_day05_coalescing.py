"""Day 05 grader: kinetic energy from an array of structs (naive) and a struct of arrays (optimized)."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(5)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "aos-seven-fields": lambda xs: (np.ascontiguousarray(xs[0][:, :7]), xs[1]),
        "soa-transposed": lambda xs: (xs[0], np.ascontiguousarray(xs[1].T)),
        "soa-one-particle-short": lambda xs: (xs[0], np.ascontiguousarray(xs[1][:, :-1])),
        "aos-as-a-transposed-view": lambda xs: (xs[1].T, xs[1]),
    }
)


def test_versions_read_their_own_layout():
    """Each version must read only its own layout: scramble the other one and the answer must not
    change (the naive kernel reads aos, the optimized one soa)."""
    n = 1021
    (aos, soa), seed = g.inputs(n, "layout")
    expected = g.solution.reference(aos, soa)
    scrambled_soa = np.ascontiguousarray(soa[:, ::-1])
    scrambled_aos = np.ascontiguousarray(aos[::-1])
    from course.checking import assert_matches

    g.require_implemented("naive", "optimized")
    assert_matches(g.target.naive(aos, scrambled_soa), expected, name=f"naive (seed {seed})")
    assert_matches(g.target.optimized(scrambled_aos, soa), expected, name=f"optimized (seed {seed})")


def test_kernels_stay_in_registers():
    for label in g.versions:
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert rep.count("ld.shared") == rep.count("st.shared") == 0, f"{label} uses shared memory"


def test_arithmetic_stays_float32():
    """0.5 written as a Python float makes Numba compute in float64 (and convert back): the PTX
    of either kernel should have no double-precision multiply."""
    for label in g.versions:
        rep = g.report(label)
        assert "mul.f64" not in rep.ptx and "mul.rn.f64" not in rep.ptx, f"{label} computes in float64"


@pytest.mark.gpu
def test_optimized_large():
    """2^24 + 3 particles: several times the L2."""
    g.run_and_compare("optimized", (1 << 24) + 3)
    g.run_and_compare("naive", (1 << 24) + 3)


def test_soa_reads_a_third_of_the_sectors_per_request_or_fewer():
    """The lesson's point, counted as the hardware counts it: a warp reading one field of 32 structs
    of 32 bytes touches 32 sectors; of a struct of arrays, 4 (5 when the row does not start on a
    sector)."""
    naive, opt = g.traffic("naive"), g.traffic("optimized")
    assert opt.sectors_per_load <= naive.sectors_per_load / 3, (
        f"optimized: {opt.sectors_per_load:.1f} sectors per load request against naive's "
        f"{naive.sectors_per_load:.1f}: lanes next to each other should read fields next to each other")
