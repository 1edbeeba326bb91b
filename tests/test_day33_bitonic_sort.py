"""Day 33 grader: bitonic sort of float32 keys of any length, the network step by step in global
memory vs the steps inside a tile done in shared memory (a tile sort, then per stage the global steps
and one shared-memory merge)."""

import numpy as np
import pytest

from course.grading import Grader, seed_for

# inf - inf in the comparison's error measure (the reference has +-inf keys): NaN there, never counted.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")

g = Grader(33)
sol = g.solution

test_optimized_matches_reference = g.matches_reference(versions=["optimized"])
test_naive_matches_reference = g.matches_reference(sol.NAIVE_SIZES, versions=["naive"])
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=257,
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
        "int32": lambda xs: (xs[0].view(np.int32),),
    },
)


def _specials(n, rng):
    """Mostly +-0.0 and +-inf, a few finite keys: the pad (+inf) is equal to every real +inf key."""
    return rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, 1.5, -2.5], dtype=np.float32), size=n)


HARD = {  # name -> keys of length n
    "all-equal": lambda n, rng: np.full(n, 3.25, dtype=np.float32),
    "sorted": lambda n, rng: np.sort(rng.standard_normal(n).astype(np.float32)),
    "reverse-sorted": lambda n, rng: np.sort(rng.standard_normal(n).astype(np.float32))[::-1].copy(),
    "zeros-and-infs": _specials,
    "all-plus-inf": lambda n, rng: np.full(n, np.inf, dtype=np.float32),
}
# The naive network is cheap in the simulator (no barriers). The optimized one runs the orderings
# that matter across tiles at TILE + 1 (P = 2 * TILE: a global step and a merge on top of the tile
# sort), the uniform ones inside one part-tile.
ACROSS = ("sorted", "reverse-sorted", "zeros-and-infs")
CASES = ([("naive", name, n) for name in HARD for n in (1, 509)]
         + [("optimized", name, n) for name in HARD for n in (1, sol.TILE + 1 if name in ACROSS else 1000)])


def _assert_sorted_like_numpy(got, keys, label):
    """As values: -0.0 == 0.0, so either order of the two zeros passes; +-inf must sit at the ends,
    and there must be exactly n outputs (the +inf pad dropped by position, real +inf keys kept)."""
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    want = np.sort(keys)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{label}: expected {want.shape} {want.dtype}, got {got.shape} {got.dtype}; drop the pad by position "
        "(the first n slots), not by value: real keys may be +inf too")
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        i = int(bad[0])
        raise AssertionError(f"{label}: {bad.size} of {want.size} places differ from np.sort, first at {i}: "
                             f"expected {want[i]!r}, got {got[i]!r}")


@pytest.mark.parametrize("version,case,n", CASES, ids=[f"{v}-{c}-{n}" for v, c, n in CASES])
def test_hard_inputs(version, case, n):
    """Equal keys meet in every pair (no swap may lose one); sorted and reverse-sorted runs; +-0.0 and
    +-inf mixed in, and keys that are all +inf like the pad."""
    g.require_implemented(version)
    rng = np.random.default_rng(seed_for("day33", version, case, n))
    keys = HARD[case](n, rng)
    _assert_sorted_like_numpy(getattr(g.target, version)(keys), keys, f"{version}({case}, n={n})")


def test_device_in_device_out():
    """Device arrays in, a device array out (that is how bench times the kernels)."""
    g.require_implemented("optimized")
    from course import cuda

    (keys,) = sol.make_inputs(300, seed=seed_for("day33", "device"))
    got = g.target.optimized(cuda.to_device(keys))
    assert not isinstance(got, np.ndarray), "optimized: device input should give a device array back"
    _assert_sorted_like_numpy(got, keys, "optimized(device array)")


@pytest.mark.parametrize("label", ["optimized", "optimized.merge"])
def test_tile_steps_live_in_shared_memory(label):
    """The tile sort and the per-stage merge keep their steps in shared memory: stores and loads there,
    a barrier after the load and one inside the step loop, nothing in local memory."""
    rep = g.report(label)
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, (
        f"{label}: no shared-memory traffic; load the block's tile into a shared array and do the steps there")
    assert rep.count("bar.sync") >= 2, (
        f"{label}: {rep.count('bar.sync')} barriers in the PTX; one after the load and one after every step")
    assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_naive_steps_live_in_global_memory():
    rep = g.report("naive")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "naive: one compare-exchange per thread in global memory; the launch boundary is the barrier")


def test_naive_launches_once_per_step():
    """log2(P)(log2(P)+1)/2 steps, each its own launch: at n = 257 (P = 512), 45."""
    steps = 9 * 10 // 2
    naive = g.traffic("naive", 257)
    assert naive.launches >= steps, f"naive: {naive.launches} launches for the {steps} steps of a 512-key network"


def test_optimized_needs_few_launches_and_passes():
    """At n = 2049 (P = 4096, 78 steps): the steps inside a tile share a launch, so a handful of
    launches, each reading and writing the keys about once (8 bytes a key), coalesced."""
    size = sol.padded_length(2049)
    opt = g.traffic("optimized", 2049)
    steps = 12 * 13 // 2
    assert opt.launches <= steps // 4, (
        f"optimized: {opt.launches} launches for {steps} steps; do every step whose partner lies in the "
        "block's tile in one shared-memory launch")
    per_key = opt.global_bytes / size
    assert per_key <= 8.5 * opt.launches, (
        f"optimized: {per_key:.1f} bytes a key over {opt.launches} launches; a launch should read and write "
        "each key once (the tile's steps in shared memory, not in global)")
    assert opt.sectors_per_load <= 4.2 and opt.sectors_per_store <= 4.2, (
        f"optimized: {opt.sectors_per_load:.2f} sectors per load, {opt.sectors_per_store:.2f} per store: "
        "consecutive threads should load and store consecutive keys")


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [(1 << 22) + 7, 1 << 24], ids=["2^22+7", "2^24"])
def test_at_scale(version, n):
    g.run_and_compare(version, n)
