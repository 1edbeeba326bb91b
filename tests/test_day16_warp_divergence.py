"""Day 16 grader: warp divergence, a parity branch per lane and the same branch made warp-uniform."""

import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(16)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={"two-dimensional": lambda xs: (xs[0].reshape(1, -1),)}
)


def _paths_per_warp(version, n, monkeypatch):
    """Run a version in the simulator with smooth/root swapped for recorders: {global warp: paths}."""
    g.require_implemented(version)
    seen = {}

    def recorder(path):
        def record(v):
            cu = g.target.cuda  # inside a simulated launch: the simulator's per-thread cuda module
            t = cu.blockIdx.x * cu.blockDim.x + cu.threadIdx.x
            seen.setdefault(t // 32, set()).add(path)
            return np.float32(0.0)
        return record

    monkeypatch.setattr(g.target, "smooth", recorder("smooth"))
    monkeypatch.setattr(g.target, "root", recorder("root"))
    (x,), _ = g.inputs(n, "paths", version)
    getattr(g.target, version)(x)
    return seen


@pytest.mark.sim
def test_optimized_warps_take_one_path(monkeypatch):
    """Record which path every thread took: in v2 no warp may hold lanes of both paths."""
    seen = _paths_per_warp("optimized", 512, monkeypatch)
    assert len(seen) == 512 // 32, f"expected 16 full warps to do work, saw {len(seen)}"
    mixed = sorted(w for w, paths in seen.items() if len(paths) > 1)
    assert not mixed, (f"warps {mixed} hold lanes on both paths: they diverge. Map threads so that every "
                       "lane of a warp gets elements of one parity")


@pytest.mark.sim
def test_naive_warps_diverge(monkeypatch):
    """The contrast (and a check of the recorder itself): in v1 every warp runs both paths."""
    seen = _paths_per_warp("naive", 512, monkeypatch)
    assert len(seen) == 16 and all(len(paths) == 2 for paths in seen.values())


def test_kernels_keep_a_real_branch_in_registers():
    """Both versions must compile both paths behind a branch (none dropped or folded into selects),
    with every value in registers: no local memory."""
    for label in ("naive", "optimized"):
        rep = g.report(label)
        assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
        assert re.search(r"^\s*@%p\d+\s+bra", rep.ptx, re.M), f"{label}: no conditional branch in the PTX"
        assert "div.rn.f32" in rep.ptx and "fma.rn.f32" in rep.ptx, f"{label}: one of the two paths is missing"


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
