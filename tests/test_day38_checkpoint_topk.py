"""Day 38 grader: top-k of float32 by radix select. The full sort (day 34's radix sort of every key and
index) vs four 8-bit histogram passes from the top, a one-pass gather of the k survivors (day 31's
compaction) and a small sort. Ties go to the smallest index; -0.0 == +0.0; values are x[idx] bit for bit."""

import sys

import numpy as np
import pytest

from course import ON_GPU, checking, compiler, cuda
from course.grading import Grader

g = Grader(38)
sol = g.solution


@pytest.fixture(autouse=True, scope="module")
def _short_switch_interval():
    """The simulator's warps meet at a collective per element row: shorter GIL slices (results unchanged)."""
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(saved)


# Selection moves values, it computes none: the k values must come out bit for bit.
test_optimized_matches_reference = g.matches_reference(versions=["optimized"], rtol=0.0)
test_naive_matches_reference = g.matches_reference(sol.NAIVE_SIZES, versions=["naive"], rtol=0.0)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=(40, 5),
    extra_cases={
        "k-zero": lambda xs: (xs[0], 0),
        "k-above-n": lambda xs: (xs[0], xs[0].size + 1),
        "k-negative": lambda xs: (xs[0], -3),
        "k-float": lambda xs: (xs[0], 5.0),
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]), xs[1]),
        "empty": lambda xs: (xs[0][:0].copy(), 1),
        "int32-x": lambda xs: (xs[0].view(np.int32), xs[1]),
    },
)


def _compare_indices(version, n, parts=(), values=False):
    """topk_indices against np.argsort(-x, kind="stable")[:k] (and, with values, the values' bits
    against x[idx])."""
    g.require_implemented(version)
    (x, k), seed = g.inputs(n, version, "indices", *parts)
    got = checking.to_host(g.target.topk_indices(x, k, version=version))
    want = sol.reference_indices(x, k)
    where = f"(inputs: make_inputs({n!r}, seed={seed}))"
    assert got.dtype == np.int32, f"topk_indices: expected int32 indices, got {got.dtype}"
    report = checking.compare(got, want, rtol=0.0, name=f"topk_indices(n={n}, version={version!r})")
    assert report.ok, (f"{report.text}\n  (ties go to the smallest index; -0.0 and +0.0 are equal, so they tie "
                       f"too)\n  {where}")
    if not values:
        return
    vals = checking.to_host(getattr(g.target, version)(x, k))
    assert np.array_equal(vals.view(np.uint32), x[want].view(np.uint32)), (
        f"{version}(n={n}): the values must be x[idx] bit for bit (a -0.0 stays -0.0) {where}")


@pytest.mark.parametrize("n", sol.HARD_CASES, ids=str)
def test_hard_inputs_indices(n):
    """All values equal, +-inf, +-0.0, many copies of the k-th value straddling the threshold (over two
    gather tiles), all negative: the indices, ties to the smallest index, and the values' bits."""
    _compare_indices("optimized", n, values=n[2] == "zeros")


@pytest.mark.parametrize("n", [(1, 1), (200, 200), (500, 1, "equal")], ids=str)
def test_k_is_one_or_n(n):
    _compare_indices("optimized", n)


def test_naive_indices_ties():
    """The full sort keeps equal keys in index order because day 34's sort is stable."""
    _compare_indices("naive", (400, 100, "dups"))


def test_ordered_mapping_is_monotone():
    """keys_kernel's descending_key over floats in increasing order (negative and positive, +-inf,
    +-0.0, subnormals) must be non-increasing, equal only for -0.0 and +0.0: float_to_ordered_uint32
    flips all bits of a negative float and only the sign bit of a positive one."""
    g.require_implemented("naive")
    f = np.array([-np.inf, -3e38, -2.5, -1.0, -1e-38, -1e-45, -0.0, 0.0, 1e-45, 1e-38, 0.75, 1.0, 7.0, 3e38,
                  np.inf], dtype=np.float32)
    keys = cuda.to_device(np.zeros(f.size, np.uint32))
    idx = cuda.to_device(np.zeros(f.size, np.int32))
    g.target.keys_kernel[1, 32](cuda.to_device(f.view(np.uint32)), keys, idx)
    k = keys.copy_to_host().astype(np.int64)
    steps = np.diff(k)
    zero = int(np.flatnonzero(f == 0)[0])  # -0.0, followed by +0.0
    assert steps[zero] == 0, f"-0.0 and +0.0 must get the same key, got {k[zero]:#x} and {k[zero + 1]:#x}"
    others = np.delete(steps, zero)
    assert np.all(others < 0), (
        "descending keys must strictly decrease as the floats increase; got "
        + ", ".join(f"{a} -> {k[i]:#x}" for i, a in enumerate(f)) + " (negative floats: flip every bit)")


def test_keys_stay_uint32_on_the_gpu():
    """Numba's CUDA compiler (not the simulator, whose NumPy keeps uint32) types ~x and x | y of uint32s
    as uint64: a key left that wide compares above every uint32 threshold (day 64's compaction, which
    compares keys against one, took no key at all on the GPU). Both functions must return uint32."""
    g.require_implemented("naive")
    for name in ("float_to_ordered_uint32", "descending_key"):
        typed = compiler.return_type(g.target, name, "uint32")
        assert typed == "uint32", (f"{name}(uint32) compiles to return {typed}: wrap the result in uint32(...) "
                                   "(Numba widens ~ and | of uint32s to 64 bits)")


def test_device_in_device_out():
    g.require_implemented("optimized")
    (x, k), _ = g.inputs((300, 20), "device")
    got = g.target.optimized(cuda.to_device(x), k)
    assert not isinstance(got, np.ndarray), "optimized: a device array in must give a device array out"
    checking.assert_matches(checking.to_host(got), sol.reference(x, k), rtol=0.0, name="optimized(device)")
    idx = g.target.topk_indices(cuda.to_device(x), k)
    assert not isinstance(idx, np.ndarray), "topk_indices: a device array in must give a device array out"


def test_ties_do_not_depend_on_thread_order():
    """The r equal keys taken at the threshold are the r smallest indices, whichever thread runs first."""
    if ON_GPU:
        pytest.skip("the thread order is the simulator's to choose")
    from course.simulator import thread_order

    with thread_order("reverse"):
        _compare_indices("optimized", (4200, 300, "equal"), parts=("reverse",))


def test_kernels_use_shared_memory_ballots_and_barriers():
    """The histogram counts with shared atomics between two barriers; the gather votes (ballot) and looks
    back; the small sort runs its network in shared memory with barriers; nothing in local memory."""
    hist = g.report("optimized")
    assert hist.count("atom.shared") > 0, "histogram: no atom.shared: count the digits into shared bins"
    assert hist.count("bar.sync") >= 2, "histogram: a barrier after zeroing the bins and one before the merge"
    gather = g.report("optimized.gather")
    assert "vote.sync.ballot" in gather.ptx, "gather: rank the kept lanes with cuda.ballot_sync"
    assert gather.count("shfl.sync") > 0, "gather: scan the warp counts with shuffles"
    srt = g.report("optimized.sort")
    assert srt.count("ld.shared") > 0 and srt.count("st.shared") > 0 and srt.count("bar.sync") >= 1
    for label in ("optimized", "optimized.select", "optimized.gather", "optimized.sort"):
        rep = g.report(label)
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_select_reads_x_a_few_times_not_a_sort():
    """Counted in the simulator: 4 histogram passes and a gather read x five times (plus small tables);
    the full sort moves several times that. Loads are coalesced warps."""
    n = (1200, 50)
    opt, full = g.traffic("optimized", n), g.traffic("naive", n)
    x_bytes = 4 * n[0]
    fixed = 32 * 1024  # the 4 x 256 counts (zeroed, merged, scanned), the status words, the k survivors
    assert opt.global_bytes <= 5.5 * x_bytes + fixed, (
        f"optimized: {opt.global_bytes:,} bytes for x's {x_bytes:,}: 4 histogram passes and a gather read x "
        "5 times, plus a few KB of tables")
    assert full.global_bytes >= 2 * opt.global_bytes, (
        f"naive: {full.global_bytes:,} bytes against optimized's {opt.global_bytes:,}: the full sort moves more")
    assert opt.sectors_per_load <= 4.5, f"optimized: {opt.sectors_per_load:.2f} sectors a load: coalesce the reads"


@pytest.mark.gpu
@pytest.mark.parametrize("n", [((1 << 24) + 7, 50), ((1 << 24) + 7, 2048), ((1 << 22) + 1, 5000),
                               ((1 << 22) + 1, 1000, "dups"), ((1 << 22) + 1, 3000, "equal")], ids=str)
def test_optimized_at_scale(n):
    g.run_and_compare("optimized", n, rtol=0.0)
    _compare_indices("optimized", n, values=True)


@pytest.mark.gpu
def test_naive_at_scale():
    g.run_and_compare("naive", ((1 << 22) + 1, 64), rtol=0.0)
