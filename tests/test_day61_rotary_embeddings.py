"""Day 61 grader: RoPE in place, GPT-NeoX (half-split) and GPT-J (interleaved) pairs; cos and sin per
element (naive) against the cached table in registers, q and k in one 16-byte pass (optimized)."""

import functools
import re

import numpy as np
import pytest

from course import checking, cuda
from course.grading import Grader

g = Grader(61)
sol = g.solution
TRAFFIC_SIZES = {style: (4, 8, 4, 128, style) for style in sol.STYLES}  # 32 threads (one warp) a token
traffic = functools.cache(lambda version, style: g.traffic(version, TRAFFIC_SIZES[style]))
# what a sin, cos or pow leaves in PTX: the fast-math instructions or libdevice's tables
TRANSCENDENTAL = re.compile(r"\b(?:sin|cos|ex2|lg2)\.approx|__cudart_(?:sin_cos_coeffs|i2opi)")


def _with(xs, **changes):
    """The inputs (q, k, positions, cos_sin_cache, style) with some replaced by name."""
    names = ("q", "k", "positions", "cache", "style")
    return tuple(changes.get(name, x) for name, x in zip(names, xs))


def _positions(xs, t, value):
    positions = xs[2].copy()
    positions[t] = value
    return positions


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "style-unknown": lambda xs: _with(xs, style="llama"),
        "style-not-a-string": lambda xs: _with(xs, style=1),
        "q-as-rows": lambda xs: _with(xs, q=xs[0].reshape(-1, xs[0].shape[-1]).copy()),
        "k-other-head-dim": lambda xs: _with(xs, k=np.ascontiguousarray(xs[1][..., :64])),
        "k-other-tokens": lambda xs: _with(xs, k=xs[1][:-1].copy()),
        "k-is-q": lambda xs: _with(xs, k=xs[0]),
        "odd-head-dim": lambda xs: _with(xs, q=np.ascontiguousarray(xs[0][..., :127]),
                                         k=np.ascontiguousarray(xs[1][..., :127]),
                                         cache=np.ascontiguousarray(xs[3][:, :127])),
        "positions-one-short": lambda xs: _with(xs, positions=xs[2][:-1].copy()),
        "positions-int64": lambda xs: _with(xs, positions=xs[2].astype(np.int64)),
        "cache-other-width": lambda xs: _with(xs, cache=np.ascontiguousarray(xs[3][:, :64])),
        "cache-flat": lambda xs: _with(xs, cache=xs[3].ravel().copy()),
        "position-past-the-cache": lambda xs: _with(xs, positions=_positions(xs, 1, xs[3].shape[0])),
        "position-negative": lambda xs: _with(xs, positions=_positions(xs, 0, -1)),
    }
)


@pytest.mark.parametrize("head_dim", (6, 64))
@pytest.mark.parametrize("style", sol.STYLES)
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_positions_out_of_order(version, style, head_dim):
    """Decode positions: out of order, up to the last row of a 128k table (angles of 1e5 radians, where a
    float32 angle is off by 0.004 rad), position 0 (the identity) among them."""
    g.require_implemented(version)
    q, k, _, cache, _ = sol.make_inputs((7, 3, 1, head_dim, style, 1 << 17), seed=61)
    positions = np.array([100000, 3, 131071, 0, 65536, 99999, 7], np.int32)
    got = getattr(g.target, version)(q, k, positions, cache, style)
    checking.assert_matches(got, sol.reference(q, k, positions, cache, style), name=f"{version}({style!r})")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_positions_past_the_cache_rejected(version):
    """A NumPy position >= the table's length (or negative) is a ValueError naming the positions."""
    g.require_implemented(version)
    q, k, positions, cache, style = sol.make_inputs((3, 2, 1, 16, "neox", 64), seed=1)
    for bad in (64, 1 << 20, -1):
        with pytest.raises(ValueError, match="position"):
            getattr(g.target, version)(q, k, _positions((q, k, positions), 2, bad), cache, style)


@pytest.mark.parametrize("head_dim", (6, 16))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_positions_past_the_cache_give_nan(version, head_dim):
    """Device positions are not read back (that would stall the stream): a position past the table makes
    its token's q and k NaN, never a read outside the table, and leaves the other tokens right."""
    g.require_implemented(version)
    q, k, positions, cache, style = sol.make_inputs((3, 2, 1, head_dim, "gptj", 64), seed=2)
    positions = np.array([5, 64, 63], np.int32)
    d_q, d_k = cuda.to_device(q), cuda.to_device(k)
    getattr(g.target, version)(d_q, d_k, cuda.to_device(positions), cuda.to_device(cache), style)
    got_q, got_k = d_q.copy_to_host(), d_k.copy_to_host()
    assert np.isnan(got_q[1]).all() and np.isnan(got_k[1]).all(), (
        f"{version}: token 1 sits at position 64 of a 64-row table: its q and k should be NaN")
    want_q, want_k = sol.reference(q, k, positions, cache, style)
    keep = [0, 2]
    checking.assert_matches(got_q[keep], want_q[keep], name=f"{version}: q of the other tokens")
    checking.assert_matches(got_k[keep], want_k[keep], name=f"{version}: k of the other tokens")


@pytest.mark.parametrize("n", ((5, 3, 1, 6, "neox"), (3, 4, 2, 64, "gptj")), ids=["scalar", "wide"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rotated_in_place_on_device(version, n):
    """Device arrays are rotated where they are: the same two arrays come back, holding the rotation.
    NumPy arrays are not touched: the result comes back as new arrays."""
    g.require_implemented(version)
    q, k, positions, cache, style = sol.make_inputs(n, seed=3)
    want = sol.reference(q, k, positions, cache, style)
    q_before, k_before = q.copy(), k.copy()
    checking.assert_matches(getattr(g.target, version)(q, k, positions, cache, style), want, name=version)
    assert np.array_equal(q, q_before) and np.array_equal(k, k_before), (
        f"{version}: the NumPy inputs changed: rotate device copies and return new arrays")
    d_q, d_k = cuda.to_device(q), cuda.to_device(k)
    got = getattr(g.target, version)(d_q, d_k, cuda.to_device(positions), cuda.to_device(cache), style)
    assert got[0] is d_q and got[1] is d_k, f"{version}: expected the same device arrays back (in place)"
    checking.assert_matches((d_q.copy_to_host(), d_k.copy_to_host()), want, name=f"{version} in place")


@pytest.mark.parametrize("style", sol.STYLES)
def test_one_pass_over_q_and_k(style):
    """The day's point, counted in the simulator (32 rows of 128 floats): one launch for q and k, every
    byte of them written exactly once, and all reads (q, k, the positions, the table) within 1.1x of the
    minimum: each thread's cos and sin serve all of its heads. The naive version is two launches."""
    mine, naive = traffic("optimized", style), traffic("naive", style)
    q, k, positions, cache, _ = sol.make_inputs(TRAFFIC_SIZES[style])
    minimum = sol.traffic(q, k, positions, cache, style)[0]
    assert mine.launches == 1, f"optimized: {mine.launches} launches: rotate q and k in one kernel"
    assert 32 * mine.global_store_sectors == q.nbytes + k.nbytes, (
        f"optimized: {32 * mine.global_store_sectors} bytes stored for q and k's {q.nbytes + k.nbytes}: "
        "write each element once, in place")
    assert mine.global_bytes <= 1.1 * minimum, (
        f"optimized: {mine.global_bytes} bytes through global memory against the minimum {minimum}: load "
        "a thread's cos and sin once and turn several heads with them")
    assert naive.launches == 2, f"naive: {naive.launches} launches (expected q, then k)"


@pytest.mark.parametrize("style", sol.STYLES)
def test_sixteen_byte_accesses(style):
    """q and k move in 16-byte accesses: a store request is 512 bytes, 16 sectors, and there are fewer
    than 2 load requests per 512 bytes of q and k (4-byte loads need 4; the rest are the table's)."""
    mine, naive = traffic("optimized", style), traffic("naive", style)
    q, k = sol.make_inputs(TRAFFIC_SIZES[style])[:2]
    per_512 = (q.nbytes + k.nbytes) / 512
    assert mine.sectors_per_store >= 15.9, (
        f"optimized: {mine.sectors_per_store:.1f} sectors per store request: store 4 floats a lane "
        "(wide.store4)")
    assert mine.global_load_requests < 2 * per_512, (
        f"optimized: {mine.global_load_requests} load requests for {per_512:.0f} x 512 bytes of q and k: "
        "load 4 floats a lane (wide.load4)")
    assert naive.global_store_requests >= 4 * per_512, f"naive: {naive.global_store_requests} store requests"


def test_no_transcendentals_in_the_optimized_kernels():
    """The table replaces the arithmetic: no sin, cos or pow (no .approx instruction, no libdevice table),
    no float64, 16-byte loads and no stack in the optimized kernels; the naive one computes them."""
    for label in ("optimized", "optimized.scalar"):
        rep = g.report(label)
        found = TRANSCENDENTAL.findall(rep.ptx)
        assert not found, f"{label}: {sorted(set(found))} in the PTX: read cos and sin from the cos_sin_cache"
        assert ".f64" not in rep.ptx, f"{label} computes in float64: the table holds float32 cos and sin"
        assert rep.stack_bytes == 0 and not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack"
    assert g.report("optimized").count("vector ld/st") > 0, "optimized: no vector load or store (course.wide)"
    assert TRANSCENDENTAL.search(g.report("naive").ptx), "naive: expected the per-element sin and cos in its PTX"


@pytest.mark.gpu
@pytest.mark.parametrize("n", (sol.BENCH_SIZES[0], (4099, 32, 8, 128, "gptj", 1 << 17),
                               (1, 32, 8, 128, "neox", 1 << 17), (4097, 7, 1, 6, "gptj"),
                               (2053, 3, 1, 64, "neox", 1 << 17)),
                         ids=["bench", "4099-gptj", "one-token", "head-dim-6", "head-dim-64"])
def test_large(n):
    """On the GPU: the benchmark size, a prime token count, a single decode token, the scalar kernel."""
    for version in sol.VERSIONS:
        g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("style", sol.STYLES)
def test_library_row(style):
    """The torch-ops version, the row the targets compare with (skipped where torch is not installed):
    right, and in place on device arrays."""
    pytest.importorskip("torch")
    g.run_and_compare("library", (1024, 32, 8, 128, style, 1 << 17))
    q, k, positions, cache, _ = sol.make_inputs((257, 4, 2, 128, style), seed=4)
    d_q, d_k = cuda.to_device(q), cuda.to_device(k)
    got = sol.library(d_q, d_k, cuda.to_device(positions), cuda.to_device(cache), style)
    assert got[0] is d_q and got[1] is d_k
    checking.assert_matches((d_q.copy_to_host(), d_k.copy_to_host()), sol.reference(q, k, positions, cache, style))
