"""Day 25 grader: reduction III, the last warp in shared memory with syncwarp vs warp shuffles."""

import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(25)
sol = g.solution

# ptxas reports 1 KB of shared memory per block that sm_90 reserves for the system, on top of the
# kernel's own arrays.
RESERVED_SHARED = 1024

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
    }
)


def test_naive_finishes_in_shared_memory_with_syncwarp():
    """v1: a shared-memory tree, block barriers only while the halves span several warps, then the
    last warp with cuda.syncwarp() (bar.warp.sync in the PTX) between its steps, and no shuffles."""
    rep = g.report("naive")
    assert rep.count("shfl.sync") == 0, "naive: the last warp should stay in shared memory, without shuffles"
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, "naive: no shared-memory tree"
    warp_syncs = len(re.findall(r"^\s*bar\.warp\.sync\b", rep.ptx, re.M))
    block_barriers = rep.count("bar.sync") - warp_syncs  # course.compiler counts both as bar.sync
    assert warp_syncs > 0, (
        "naive: no bar.warp.sync in the PTX: since Volta the lanes of a warp are not in lock-step, "
        "so each step of the unrolled last warp needs cuda.syncwarp() before it reads its neighbour's slot")
    assert block_barriers <= 4, (
        f"naive: {block_barriers} block barriers; below 32 values a single warp is left, and "
        "cuda.syncthreads() per step there is what the unrolled last warp removes")


def test_optimized_folds_with_shuffles():
    """v2: shuffles below 32 (shfl.sync), one block barrier, no shared-memory tree (a slot a warp)."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, (
        "optimized: no shfl.sync in the PTX; fold each warp in registers with "
        "cuda.shfl_down_sync(FULL_MASK, v, offset) for offset 16, 8, 4, 2, 1")
    assert rep.count("bar.sync") <= 2, (
        f"optimized: {rep.count('bar.sync')} barriers (or warp syncs); after the shuffles one block "
        "barrier is enough: the warps' sums in shared memory, then warp 0 folds them")
    own = rep.shared_bytes - RESERVED_SHARED
    assert own <= sol.WARP * 4, (
        f"optimized: {own} bytes of shared memory for the kernel's arrays; one float a warp is all "
        "shuffles leave for shared memory (the 256-float tree is the naive version's)")
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack (local memory)"


def test_last_warp_shared_traffic():
    """In the simulator: the shuffle version's shared requests are a few per block; the naive tree's
    are many (one per step per warp taking part), every one of them conflict-free."""
    naive, opt = g.traffic("naive"), g.traffic("optimized")
    assert naive.shared_requests > 0 and naive.wavefronts_per_request <= 1.0, (
        f"naive: {naive.wavefronts_per_request:.2f} wavefronts per shared request: sequential "
        "addressing should be conflict-free")
    assert opt.shared_requests * 4 < naive.shared_requests, (
        f"optimized: {opt.shared_requests} shared requests against the tree's {naive.shared_requests}: "
        "below 32 the values should travel by shuffle, not through shared memory")


@pytest.mark.gpu
def test_optimized_at_largest_size():
    """2^28 floats (four passes), within the interface's 1e-5."""
    g.run_and_compare("optimized", 1 << 28)
