"""Day 21 grader: the tiled transpose through a plain, a padded and a swizzled shared tile."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(21)
sol = g.solution
TILED = ("padded", "swizzled", "optimized")  # the conflict-free layouts
WHOLE_TILES = (64, 96)  # six whole 32 x 32 tiles: every request a full warp

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "x-1d": lambda xs: (np.ascontiguousarray(xs[0].ravel()),),
        "x-3d": lambda xs: (np.ascontiguousarray(xs[0][None]),),
        "x-transposed-view": lambda xs: (xs[0].T,),
    }
)


def _float64_inputs(n, version):
    (x,), seed = g.inputs(n, version, "float64")
    return x.astype(np.float64) * np.pi, seed  # low mantissa bits set: a float32 round trip would show


@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", [(1, 1), (33, 31), (67, 97)], ids=str)
def test_float64_matches_reference(version, n):
    """The same kernels on 8-byte elements (transpose_f64): the tile takes x's dtype."""
    g.require_implemented(version)
    x, seed = _float64_inputs(n, version)
    got = g.target.transpose_f64(x, version)
    report = checking.compare(got, sol.reference(x), rtol=0.0, name=f"transpose_f64({version}, n={n})")
    assert report.ok, f"{report.text}\n  (seed {seed})"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_float64_path_rejects_float32(version):
    g.require_implemented(version)
    (x,), _ = g.inputs((33, 31), "bad64")
    with pytest.raises(ValueError):
        g.target.transpose_f64(x, version)


def test_every_version_stages_through_shared_memory_behind_a_barrier():
    for version in sol.VERSIONS:
        rep = g.report(version)
        assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, f"{version}: no shared-memory tile"
        assert rep.count("bar.sync") >= 1, f"{version}: no barrier between staging the tile and reading its columns"
        assert rep.stack_bytes == 0, f"{version}: {rep.stack_bytes} bytes of stack frame (local memory)"


def test_padding_costs_shared_memory_and_the_swizzle_does_not():
    """The padded tile is larger than the plain one (a spare word a row); the swizzled tile is not."""
    plain = g.report("naive").shared_bytes
    assert g.report("padded").shared_bytes > plain, "padded: the tile is no larger than (32, 32): pad its rows"
    assert g.report("swizzled").shared_bytes <= plain, (
        "swizzled: the tile is larger than (32, 32): the swizzle needs no padding")


def test_naive_column_reads_conflict_32_ways():
    """Counted as Nsight Compute counts it, at six whole tiles: each row store 1 wavefront, each
    column read 32 (all 32 words in one bank): 16.5 on average over both."""
    t = g.traffic("naive", WHOLE_TILES)
    assert t.shared_requests > 0, "naive: no shared-memory requests: stage the tile in shared memory"
    assert t.wavefronts_per_request >= 16, (
        f"naive: {t.wavefronts_per_request:.2f} wavefronts per shared request: a plain (32, 32) tile read down "
        "a column conflicts 32 ways (16.5 on average with the conflict-free row stores)")


@pytest.mark.parametrize("version", ("padded", "swizzled"))
def test_tile_columns_are_read_without_conflicts(version):
    t = g.traffic(version, WHOLE_TILES)
    assert t.shared_requests > 0, f"{version}: no shared-memory requests: stage the tile in shared memory"
    assert t.wavefronts_per_request <= 1.1, (
        f"{version}: {t.wavefronts_per_request:.2f} wavefronts per shared request: the lanes reading a tile "
        "column still share banks (pad each row by one word, or keep element (r, c) at column c ^ r)")


def _least_wavefronts(n):
    """Every element goes into the tile once and out once, 128 bytes a wavefront at best."""
    (x,), _ = g.inputs(n, "least")
    return 2 * x.nbytes // 128


def test_optimized_tile_has_no_conflicts():
    """Whatever the access width (a 16-byte request of 32 lanes is 512 bytes: 4 wavefronts at least),
    the shared tile's wavefronts add up to the least its bytes need: no request pays for a conflict."""
    t = g.traffic("optimized", WHOLE_TILES)
    least = _least_wavefronts(WHOLE_TILES)
    assert t.shared_requests > 0, "optimized: no shared-memory requests: stage the tile in shared memory"
    assert t.shared_wavefronts <= 1.1 * least, (
        f"optimized: {t.shared_wavefronts} shared wavefronts for a tile that needs {least} (each element "
        "stored once and read once, 128 bytes a wavefront): some requests conflict")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_global_memory_is_coalesced_both_ways(version):
    """Every sector moved carries 32 useful bytes: a warp reads whole 128-byte runs of x's rows and
    writes whole runs of out's rows (4 sectors a request for 4-byte lanes, 16 for 16-byte ones)."""
    t = g.traffic(version, WHOLE_TILES)
    (x,), _ = g.inputs(WHOLE_TILES, "least")
    assert t.global_load_sectors * 32 <= x.nbytes and t.global_store_sectors * 32 <= x.nbytes, (
        f"{version}: {t.global_load_sectors * 32} bytes of sectors loaded and {t.global_store_sectors * 32} "
        f"stored for {x.nbytes} bytes each way ({t.sectors_per_load:.1f} sectors per load request, "
        f"{t.sectors_per_store:.1f} per store): a warp should read a row of the tile from x and write a row "
        "of out")


def test_optimized_moves_16_bytes_a_lane():
    """The optimized kernel's global loads and stores are 16-byte vectors (course.wide): a warp's
    request carries 512 bytes, a quarter of the instructions of 4-byte lanes."""
    import re

    ptx = g.report("optimized").ptx
    assert re.search(r"\bld(?:\.global)?(?:\.nc)?\.v4\.", ptx), (
        "optimized: no 16-byte global load: read x with wide.load4")
    assert re.search(r"\bst(?:\.global)?\.v4\.", ptx), "optimized: no 16-byte global store: write out with wide.store4"


def _traffic_f64(version):
    from course import ON_GPU, traffic

    if ON_GPU:
        pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
    g.require_implemented(version)
    x, _ = _float64_inputs(WHOLE_TILES, version)
    with traffic.record() as rec:
        g.target.transpose_f64(x, version)
    return rec.total


def test_float64_plain_tile_conflicts():
    """8-byte elements in a (32, 32) tile: a column's words sit 64 apart, all in banks 0 and 1."""
    t = _traffic_f64("naive")
    assert t.wavefronts_per_request >= 16, (
        f"naive, float64: {t.wavefronts_per_request:.2f} wavefronts per request, expected the 32-way conflict")


@pytest.mark.parametrize("version", TILED)  # optimized: the padded kernel on 8-byte elements
def test_float64_tiles_reach_the_two_wavefront_minimum(version):
    """32 lanes x 8 bytes = 256 bytes: two wavefronts is the least a request can take; one spare
    element a row (or the xor swizzle) gets there."""
    t = _traffic_f64(version)
    assert t.shared_requests > 0, f"{version}, float64: no shared-memory requests"
    assert t.wavefronts_per_request <= 2.05, (
        f"{version}, float64: {t.wavefronts_per_request:.2f} wavefronts per request: the minimum for 256 "
        "bytes is 2")


@pytest.mark.gpu
def test_optimized_at_benchmark_scale():
    g.run_and_compare("optimized", (4099, 8191))  # rows off the 16-byte grid: the padded kernel
    g.run_and_compare("optimized", (4100, 8196))  # the 16-byte path with ragged regions both ways
    g.run_and_compare("padded", (8191, 33))
    g.run_and_compare("swizzled", (1, (1 << 22) + 3))
    g.run_and_compare("optimized", ((1 << 22) + 3, 1))  # 131073 row tiles: past a 2-D grid's 65535


@pytest.mark.gpu
def test_float64_at_benchmark_scale():
    g.require_implemented("optimized")
    x, seed = _float64_inputs((2053, 4099), "optimized")
    report = checking.compare(g.target.transpose_f64(x, "optimized"), sol.reference(x), rtol=0.0, name="float64")
    assert report.ok, f"{report.text}\n  (seed {seed})"
