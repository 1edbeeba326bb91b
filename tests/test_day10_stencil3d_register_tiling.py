"""Day 10 grader: 3D 7-point stencil, seven global loads per point vs a shared plane + register queue."""

import re

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(10)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "u-2d": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1]),
        "u-4d": lambda xs: (np.ascontiguousarray(xs[0][None]), xs[1]),
        "coef-too-short": lambda xs: (xs[0], xs[1][:3]),
        "coef-2d": lambda xs: (xs[0], np.ascontiguousarray(xs[1][None, :])),
    }
)


@pytest.mark.parametrize("version", ["zmarch", "optimized"])
@pytest.mark.parametrize("nz", [sol.Z_CHUNK + 2, sol.Z_CHUNK + 5])
def test_march_crosses_a_chunk_boundary(version, nz):
    """Two z chunks: the first plane of the second chunk needs the last plane of the first as z - 1,
    and the last plane of the first needs the second's first as z + 1. A second chunk of 2 and of 5
    planes: the main march's trips and the tail end on either parity."""
    g.run_and_compare(version, (nz, 3, 5))


@pytest.mark.parametrize("version", ["zmarch", "optimized"])
def test_each_axis_has_its_own_weight(version):
    """A grid that varies along one axis at a time: a kernel that swaps two axes' weights (or their
    neighbours) gets the wrong answer on at least one of them."""
    g.require_implemented(version)
    coef = np.array([0.1, 0.2, 0.3, 0.15], np.float32)
    shape = (3, 6, 9)
    for axis in range(3):
        ramp = np.arange(shape[axis], dtype=np.float32) ** 2
        u = np.ascontiguousarray(np.broadcast_to(ramp.reshape([-1 if a == axis else 1 for a in range(3)]), shape))
        checking.assert_matches(getattr(g.target, version)(u, coef), sol.reference(u, coef),
                                name=f"{version}(axis {axis})")


@pytest.mark.parametrize("version", ["zmarch", "optimized"])
def test_marches_use_a_shared_plane_and_registers(version):
    rep = g.report(version)
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, f"{version}: no shared-memory plane"
    assert rep.count("bar.sync") >= 1, \
        f"{version}: a plane needs a barrier between its stores and its neighbours' reads"
    assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame: the z queue left registers"


def _march_loop(ptx):
    """(instructions, barriers) of the PTX loop with the most barriers: the main march, one barrier a plane."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith((".", "{", "}"))]
    labels, best = {}, (0, 0)
    for i, ln in enumerate(lines):
        if re.match(r"^\$\w+:$", ln):
            labels[ln[:-1]] = i
            continue
        m = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", ln)
        if m and m.group(1) in labels:  # a backward branch closes a loop
            body = [b for b in lines[labels[m.group(1)]:i + 1] if not b.endswith(":")]
            bars = sum(1 for b in body if re.match(r"^(?:@!?%\w+\s+)?(?:bar|barrier)\.sync\b", b))
            if bars > best[1]:
                best = (len(body), bars)
    return best


def test_optimized_issues_fewer_instructions_per_output():
    """The march is issue-bound: the optimized kernel's main loop must issue fewer instructions per output
    than the one-output-a-thread z march (PTX of the loop / (planes in it x outputs a thread a plane))."""
    g.require_implemented("zmarch", "optimized")
    per_output = {}
    for version, rows in (("zmarch", 1), ("optimized", getattr(g.target, "ROWS", 1))):
        instructions, planes = _march_loop(g.report(version).ptx)
        assert planes, f"{version}: no loop with a barrier found in the PTX: does the kernel march along z?"
        per_output[version] = instructions / (planes * rows)
    assert per_output["optimized"] < 0.9 * per_output["zmarch"], (
        f"optimized issues {per_output['optimized']:.1f} PTX instructions per output in its main loop, the z march "
        f"{per_output['zmarch']:.1f}: several outputs a thread should share the barrier, the loop step and the offsets")


def test_naive_reads_neighbours_from_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, \
        "naive: the contrast version uses no shared memory"
    assert rep.count("ld.global") + rep.count("ld (generic)") >= 7, "naive: fewer than seven loads per point"


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["zmarch", "optimized"])
def test_marches_at_benchmark_scale(version):
    g.run_and_compare(version, (131, 259, 517))


@pytest.mark.gpu
def test_naive_at_benchmark_scale():
    g.run_and_compare("naive", (131, 259, 517))
