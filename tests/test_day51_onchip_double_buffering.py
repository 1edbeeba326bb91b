"""Day 51 grader: an all-pairs potential, tiles staged with two barriers vs double-buffered (registers
in Numba, cp.async in CUDA C)."""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(51)
sol = g.solution
SIM = sol.SIM_VERSIONS  # cp_async is a cupy.RawKernel: graded by the gpu-marked tests below

test_matches_reference = g.matches_reference(versions=SIM)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=65,
    versions=SIM,
    extra_cases={
        "bodies-three-columns": lambda xs: (np.ascontiguousarray(xs[0][:, :3]),),
        "bodies-1d": lambda xs: (np.ascontiguousarray(xs[0].reshape(-1)),),
    },
)


def test_many_tiles_in_one_block():
    """Five source tiles and a ragged one, one block of targets: a stale or half-written tile shows."""
    g.run_and_compare("double_buffered", 5 * sol.THREADS + 3)


def test_double_buffered_has_one_barrier_a_tile():
    """The day's idea: two buffers in shared memory, one barrier in the tile loop and none outside it
    (the staged kernel needs two: one before reading a tile, one before overwriting it)."""
    rep = g.report("double_buffered")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, \
        "double_buffered: the sources must go through shared memory"
    assert rep.count("bar.sync") == 1, (
        f"double_buffered: {rep.count('bar.sync')} barriers; with two buffers one barrier a tile is enough: "
        "store the registers of tile k at the top of iteration k, then the barrier, then load tile k + 1")
    assert rep.shared_bytes >= 2 * sol.TILE_WORDS * 4, \
        f"double_buffered: {rep.shared_bytes} bytes of shared memory: two tiles need {2 * sol.TILE_WORDS * 4}"
    assert rep.stack_bytes == 0, f"double_buffered: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_staged_waits_twice_a_tile():
    rep = g.report("staged")
    assert rep.count("ld.shared") > 0 and rep.count("bar.sync") == 2, \
        "staged: a tile in shared memory, a barrier before reading it and one before overwriting it"
    assert rep.stack_bytes == 0, f"staged: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_sources_are_read_as_broadcasts():
    """Every lane of a warp reads the same source word: one wavefront a shared request, and many more
    shared reads than global loads (each source staged once a block, read by every thread)."""
    tr = g.traffic("double_buffered", 257)
    assert tr.shared_requests > 10 * tr.global_load_requests, \
        f"double_buffered: {tr.shared_requests} shared requests for {tr.global_load_requests} global loads"
    assert tr.shared_requests > 0 and tr.wavefronts_per_request <= 1.1, \
        f"double_buffered: {tr.wavefronts_per_request:.2f} wavefronts per shared request"


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_at_scale_on_gpu(version):
    """Every version, cp_async included (CuPy compiles its CUDA C with NVRTC), at an awkward large size."""
    if version == "cp_async":
        g.require_implemented("cp_async_source")
    g.run_and_compare(version, (1 << 14) + 37)
