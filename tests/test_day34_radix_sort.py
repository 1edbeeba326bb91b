"""Day 34 grader: a stable LSD radix sort of uint32 keys, one bit a pass with a global scan vs 8-bit
digits with per-block shared histograms, a scan of the digit-major table and stable ranking in a tile."""

import sys

import numpy as np
import pytest

from course import checking
from course.grading import Grader, seed_for

g = Grader(34)
sol = g.solution

# Two tiles: a carry between blocks, and a ragged second tile (three keys).
TWO_TILES = sol.TILE + 3
ONE_TILE = 2503  # most of one tile: the hard inputs that need no second block


@pytest.fixture(autouse=True, scope="module")
def _short_switch_interval():
    """The simulator runs a thread per CUDA thread; the ranking meets at a warp collective per key.
    Shorter GIL slices make those meetings quicker (the results do not depend on it)."""
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(saved)


test_optimized_matches_reference = g.matches_reference(versions=["optimized"])
test_naive_matches_reference = g.matches_reference(sol.NAIVE_SIZES, versions=["naive"])
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),),
        "empty": lambda xs: (xs[0][:0].copy(),),
        "int32-keys": lambda xs: (xs[0].view(np.int32),),
    }
)


def _sort_pairs(version, keys, what):
    """sort_pairs(keys, arange) against NumPy's stable argsort: the values say where every key came from,
    so an unstable order among equal keys shows as wrong values even where the keys look sorted."""
    g.require_implemented(version)
    values = np.arange(keys.size, dtype=np.int32)
    got_k, got_v = g.target.sort_pairs(keys, values, version=version)
    want_k, want_v = sol.reference_pairs(keys, values)
    name = f"sort_pairs({what}, n={keys.size}, version={version!r})"
    report = checking.compare(got_k, want_k, name=name + " keys")
    assert report.ok, report.text
    report = checking.compare(got_v, want_v, name=name + " values (input positions)")
    assert report.ok, report.text + "\n  (equal keys must keep their input order: the sort must be stable)"


def _rng(*parts):
    return np.random.default_rng(seed_for("day34", *parts))


def _hard(kind, n):
    rng = _rng(kind, n)
    if kind == "all-equal":
        return np.full(n, 0x9E3779B9, dtype=np.uint32)
    if kind == "sorted":
        return np.sort(rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32))
    if kind == "reverse-sorted":
        return np.sort(rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32))[::-1].copy()
    if kind == "zero-and-max":  # 0 and 0xFFFFFFFF, the largest uint32 (every digit 255)
        return np.where(rng.random(n) < 0.5, 0, 0xFFFFFFFF).astype(np.uint32)
    if kind == "high-bits-only":  # the three low digits equal everywhere: only the last pass reorders
        return (rng.integers(0, 256, size=n, dtype=np.uint32) << np.uint32(24)) | np.uint32(0x00ABCDEF)
    if kind == "few-values":  # 16 keys, each repeated ~n/16 times: many equal keys in every warp
        return rng.integers(0, 16, size=n, dtype=np.uint32) * np.uint32(0x01010101)
    raise ValueError(kind)


def test_all_equal_keys_stay_in_input_order():
    """Every key equal over two tiles: all land in one digit in every pass, and sort_pairs must give the
    values back as arange (the warp's order, then the block's, then the carry between blocks)."""
    _sort_pairs("optimized", _hard("all-equal", TWO_TILES), "all equal")


@pytest.mark.parametrize("kind", ["sorted", "reverse-sorted", "zero-and-max", "high-bits-only"])
def test_hard_keys(kind):
    _sort_pairs("optimized", _hard(kind, ONE_TILE), kind)


def test_naive_is_stable():
    """The 1-bit split: zeros first, then ones, each in input order; equal keys, 0 and 0xFFFFFFFF (bit 31)."""
    keys = _hard("all-equal", 300)
    keys[::3] = _hard("zero-and-max", 300)[::3]
    _sort_pairs("naive", keys, "equal keys, 0 and 0xFFFFFFFF")


def test_sort_pairs_rejects_bad_values():
    g.require_implemented("optimized")
    (keys,) = sol.make_inputs(33, seed=1)
    values = np.arange(33, dtype=np.int32)
    for bad in (values.astype(np.int64), values[:-1].copy(), np.repeat(values, 2)[::2]):
        with pytest.raises(ValueError):
            g.target.sort_pairs(keys, bad)
    with pytest.raises(ValueError):
        g.target.sort_pairs(keys.astype(np.float32), values)


def test_ranking_and_histograms_live_in_shared_memory():
    """The upsweep counts with shared atomics between two barriers; the downsweep ranks and stages the
    tile in shared memory behind barriers; nothing in local memory (the keys of a thread stay in
    registers). The 1-bit version's kernels use no shared memory."""
    up = g.report("optimized.upsweep")
    assert up.count("atom.shared") > 0, "upsweep: no atom.shared: count the tile's digits into shared bins"
    assert up.count("bar.sync") >= 2, (
        f"upsweep: {up.count('bar.sync')} barrier(s): one after zeroing the bins, one before summing them")
    down = g.report("optimized")
    assert down.count("st.shared") > 0 and down.count("ld.shared") > 0, (
        "downsweep: no shared-memory traffic: rank the tile and stage it in digit order in shared memory")
    assert down.count("bar.sync") >= 2, (
        f"downsweep: {down.count('bar.sync')} barrier(s): the counts of every warp are needed before the "
        "tile is placed, and the staged tile before it is written out")
    for rep in (up, down):
        assert rep.stack_bytes == 0, f"{rep.label}: {rep.stack_bytes} bytes of stack frame (local memory)"
    for label in ("naive", "naive.flags"):
        rep = g.report(label)
        assert rep.count("ld.shared") == rep.count("st.shared") == 0, (
            f"{label}: the 1-bit version needs no shared memory")


def test_four_passes_and_a_staged_write_out():
    """Counted in the simulator over two tiles: 4 passes of (read; read and write) plus the small counts
    table, not 32 passes of one bit; every warp reads 32 consecutive keys; and the staged write-out keeps
    a warp's stores on few sectors (consecutive slots of one digit's run go to consecutive addresses)."""
    opt = g.traffic("optimized", n=TWO_TILES)
    minimum = 8 * TWO_TILES
    assert opt.global_bytes <= 16 * minimum, (
        f"optimized: {opt.global_bytes:,} bytes through device memory, {opt.global_bytes / minimum:.1f}x "
        "the minimum (8 bytes a key): 4 passes of 12 bytes a key and the counts table need ~10x; use 8-bit digits")
    assert opt.sectors_per_load <= 4.5, (
        f"optimized: {opt.sectors_per_load:.2f} sectors per global load: a warp should read 32 consecutive keys")
    assert opt.sectors_per_store <= 12, (
        f"optimized: {opt.sectors_per_store:.2f} sectors per global store request: stage the tile in digit "
        "order in shared memory so that a warp's 32 stores fall on a few runs of consecutive addresses")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["uniform", "all-equal", "high-bits-only", "zero-and-max"])
def test_optimized_at_bench_scale(kind):
    n = (1 << 24) + 7
    if kind == "uniform":
        g.run_and_compare("optimized", n)
        return
    _sort_pairs("optimized", _hard(kind, n), kind)


@pytest.mark.gpu
def test_naive_at_scale():
    g.run_and_compare("naive", (1 << 20) + 3)
    _sort_pairs("naive", _hard("few-values", (1 << 20) + 3), "few values")
