"""Day 31 grader: stream compaction, x[x > threshold] in order. A global atomic counter (the set is
right, the order is not: compared sorted), flags + block scan + scatter (stable, two passes), one pass
with warp ballots and a decoupled look-back between 4096-element tiles (stable), and the same one pass
on float4 loads, 16384-element tiles, per-warp staging and day 29's look-back (stable), and that pass
in day 29's tile shape, the kept elements stored straight from registers (stable), and that pass on a
persistent grid whose blocks load their next tile while they look back (stable)."""

import numpy as np
import pytest

from course import ON_GPU, checking, cuda, launch
from course.grading import Grader

g = Grader(31)
sol = g.solution
ORDERED = [v for v in sol.VERSIONS if v not in sol.UNORDERED]
ONE_PASS = ["warp_aggregated", "optimized", "direct", "pipelined"]

# Compaction moves values, it computes none: every kept element must come out bit for bit.
test_matches_reference = g.matches_reference(versions=ONE_PASS, rtol=0.0)
test_optimized_over_many_tiles = g.matches_reference(sol.OPT_SIZES, versions=["optimized"], rtol=0.0)
test_direct_over_many_tiles = g.matches_reference(sol.DIRECT_SIZES, versions=["direct"], rtol=0.0)
test_pipelined_over_many_tiles = g.matches_reference(sol.PIPE_SIZES, versions=["pipelined"], rtol=0.0)
test_scan_matches_reference = g.matches_reference(sol.SCAN_SIZES, versions=["scan"], rtol=0.0)
test_hard_inputs = g.matches_reference(sol.HARD_CASES, versions=ORDERED, rtol=0.0)
test_hard_inputs_over_tiles = g.matches_reference(sol.TILE_CASES, versions=ONE_PASS, rtol=0.0)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "two-dimensional": lambda xs: (np.ascontiguousarray(xs[0][None, :]),) + xs[1:],
        "threshold-array": lambda xs: (xs[0], np.array([xs[1]], dtype=np.float32)),
        "threshold-none": lambda xs: (xs[0], None),
    }
)


def _sorted_compare(version, n):
    g.require_implemented(version)
    inputs, seed = g.inputs(n, version, "sorted")
    got = checking.to_host(getattr(g.target, version)(*inputs))
    report = checking.compare(np.sort(got), np.sort(sol.reference(*inputs)), rtol=0.0,
                              name=f"{version}(n={n}), both sorted")
    assert report.ok, f"{report.text}\n  (inputs: make_inputs({n!r}, seed={seed}))"


@pytest.mark.parametrize("n", sol.TEST_SIZES + sol.HARD_CASES + sol.TILE_CASES, ids=str)
@pytest.mark.parametrize("version", sol.UNORDERED)
def test_unordered_version_keeps_the_right_set(version, n):
    """The atomic counter hands out slots in whatever order the threads arrive: the output is the
    right multiset of values, in some order. Compared after sorting both."""
    _sorted_compare(version, n)


@pytest.mark.parametrize("order", ["forward", "reverse"])
@pytest.mark.parametrize("version", ORDERED)
def test_order_survives_any_thread_schedule(version, order):
    """Stability may not depend on which thread runs first: the simulator runs the threads of each block
    in reverse as well (an offset taken from an atomic comes out in arrival order)."""
    if ON_GPU:
        pytest.skip("the thread order is the simulator's to choose; on a GPU the scheduler picks it")
    from course.simulator import thread_order

    with thread_order(order):
        g.run_and_compare(version, 1031 if version == "scan" else 4097, rtol=0.0, parts=(order,))


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_in_device_out(version):
    """A device array in: the result stays on the device (a device array of the kept length)."""
    g.require_implemented(version)
    (x, threshold), _ = g.inputs(1000, version, "device")
    got = getattr(g.target, version)(cuda.to_device(x), threshold)
    assert not isinstance(got, np.ndarray), f"{version}: a device array in must give a device array out"
    expected = sol.reference(x, threshold)
    host = checking.to_host(got)
    if version in sol.UNORDERED:
        host, expected = np.sort(host), np.sort(expected)
    checking.assert_matches(host, expected, rtol=0.0, name=f"{version}(device)")


@pytest.mark.parametrize("n", (1, 255, 4097, 9001, (1300, "all"), (1301, "one"), (700, "none"))
                         + sol.DIRECT_SIZES[:2], ids=str)
def test_direct_on_device_leaves_the_count_on_the_device(n):
    """direct_on_device (CUB's interface): the (n,) output buffer and a (1,) int32 count, both on the
    device; the buffer's first count elements are the kept ones, in order."""
    g.require_implemented("direct")
    (x, threshold), seed = g.inputs(n, "direct_on_device")
    out, count = g.target.direct_on_device(cuda.to_device(x), threshold)
    assert not isinstance(out, np.ndarray) and not isinstance(count, np.ndarray), "both must stay on the device"
    assert count.shape == (1,) and count.dtype == np.int32, f"count: {count.shape} {count.dtype}"
    assert out.shape == x.shape, f"out: {out.shape}, expected the whole buffer {x.shape}"
    want = sol.reference(x, threshold)
    kept = int(checking.to_host(count)[0])
    assert kept == want.shape[0], f"count {kept}, expected {want.shape[0]} (make_inputs({n!r}, seed={seed}))"
    checking.assert_matches(checking.to_host(out)[:kept], want, rtol=0.0, name=f"direct_on_device(n={n})")


def test_direct_on_device_of_nothing():
    g.require_implemented("direct")
    out, count = g.target.direct_on_device(cuda.to_device(np.zeros(0, np.float32)), 0.5)
    assert out.shape == (0,) and int(checking.to_host(count)[0]) == 0


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_optimized_takes_a_view_off_the_16_byte_grid(offset):
    """x[offset:] of a device array starts 4, 8 or 12 bytes into a 16-byte line: a float4 load at x[0]
    would be misaligned (the GPU stops the kernel). The tiles start on the grid before x instead, and
    the positions before x[0] are never kept."""
    g.require_implemented("optimized")
    n = 3 * sol.OPT_TILE + 5
    (x, threshold), seed = g.inputs(n, "offset", offset)
    got = g.target.optimized(cuda.to_device(x)[offset:], threshold)
    checking.assert_matches(checking.to_host(got), sol.reference(x[offset:], threshold), rtol=0.0,
                            name=f"optimized(device x[{offset}:], seed={seed})")


def test_warp_aggregated_look_back_walks_past_aggregates():
    """Tile 39 of 40, run alone, its predecessors' status words preset: tiles 38..6 hold only their own
    counts (AGGREGATE), tile 5 an inclusive PREFIX, tiles 4..0 a PREFIX that must be ignored. The
    look-back must cross a window of 32 and stop at tile 5: offset = prefix(5) + counts(6..38). (The
    simulator runs blocks in order, so a whole launch always finds a PREFIX next door; this test
    reaches the windows the GPU reaches.)"""
    g.require_implemented("warp_aggregated")
    tiles, tile = 40, 39
    (x, threshold), seed = g.inputs(tiles * sol.TILE, "look-back")
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 50, size=tiles)
    status = np.zeros(tiles + 1, dtype=np.uint64)
    status[6:tile] = (counts[6:tile].astype(np.uint64) << np.uint64(2)) | np.uint64(sol.AGGREGATE)
    prefix5 = 1000
    status[5] = (np.uint64(prefix5) << np.uint64(2)) | np.uint64(sol.PREFIX)
    status[:5] = (np.uint64(10**6) << np.uint64(2)) | np.uint64(sol.PREFIX)  # too far back: never read
    status[tiles] = tile  # the ticket counter: the single block launched takes tile 39
    offset = prefix5 + int(counts[6:tile].sum())
    d_status = cuda.to_device(status)
    out = cuda.to_device(np.full(x.size, np.nan, dtype=np.float32))
    g.target.warp_aggregated_kernel[1, sol.THREADS](cuda.to_device(x), np.float32(threshold), d_status, out)
    seg = x[tile * sol.TILE:]
    kept = seg[seg > np.float32(threshold)]
    got = out.copy_to_host()[offset:offset + kept.size]
    checking.assert_matches(got, kept, rtol=0.0, name="tile 39's kept elements at its looked-back offset")
    word = int(d_status.copy_to_host()[tile])
    assert word & 3 == sol.PREFIX and word >> 2 == offset + kept.size, (
        f"tile 39 published {word >> 2} with flag {word & 3}; expected the inclusive prefix "
        f"{offset + kept.size} with flag PREFIX ({sol.PREFIX})")


def _word(flag, value):
    """A status word as day 29 packs it: the flag in the high 32 bits, the int32 value low."""
    return np.uint64((int(flag) << 32) | (int(value) & 0xFFFFFFFF))


# Where the nearest inclusive prefix (P) sits among the 40 tiles before the 3 compacted ones: right
# behind them; 36 tiles back (a second window of 32); at tile 0 (the window hangs past the start).
LOOK_BACK_CASES = {"P-adjacent": 39, "P-36-back": 3, "P-at-tile-0": 0}


def _launch_after_presets(version, d_x, threshold, d_status, d_counter, out):
    """Three blocks of the version's kernel over status words preset by hand."""
    if version == "optimized":
        g.target.compact_kernel[3, sol.OPT_THREADS](d_x, np.int32(0), np.float32(threshold), d_status, d_counter, out)
    elif version == "pipelined":  # the first block to run takes all three tiles, one after another
        g.target.compact_pipelined_kernel[3, sol.PIPE_THREADS](d_x, np.float32(threshold), d_status, d_counter, out)
    else:
        g.target.compact_direct_kernel[3, sol.DIRECT_THREADS](d_x, np.float32(threshold), d_status, d_counter, out)


@pytest.mark.parametrize("case", list(LOOK_BACK_CASES))
@pytest.mark.parametrize("version", ["optimized", "direct", "pipelined"])
def test_optimized_look_back_adds_aggregates_until_a_prefix(version, case):
    """The simulator runs blocks one after another, so a look-back there always finds its predecessor
    done. Here the status words of 40 earlier tiles are set by hand (aggregates after the nearest P,
    wrong values before it; the ticket counter starts at 40) and the kernel compacts the 3 tiles after
    them, the last one ragged: their kept elements must land at the prefix the look-back adds up, each
    tile must end with FLAG_P and its inclusive count, and the last one must write the total to
    counter[1]."""
    g.require_implemented(version)
    tile, before = {"optimized": sol.OPT_TILE, "direct": sol.DIRECT_TILE, "pipelined": sol.PIPE_TILE}[version], 40
    n = (before + 3) * tile - 7
    (x, threshold), seed = g.inputs(n, "look-back", case)
    kept = x > np.float32(threshold)
    counts = kept[: before * tile].reshape(before, tile).sum(axis=1)
    inclusive = np.cumsum(counts)
    p_tile = LOOK_BACK_CASES[case]
    status = np.zeros(before + 3, dtype=np.uint64)
    for k in range(before):
        if k < p_tile:  # behind the nearest P: a look-back that reads these goes too far
            status[k] = _word(sol.FLAG_P, 10**6)
        elif k == p_tile:
            status[k] = _word(sol.FLAG_P, inclusive[k])
        else:
            status[k] = _word(sol.FLAG_A, counts[k])
    d_x, d_status, d_counter = launch.to_device(x, status, np.array([before, -1], dtype=np.int32))
    out = cuda.to_device(np.full(n, np.nan, dtype=np.float32))
    _launch_after_presets(version, d_x, threshold, d_status, d_counter, out)
    start = int(inclusive[-1])
    tail = x[before * tile:]
    want = tail[tail > np.float32(threshold)]
    got = out.copy_to_host()[start:start + want.size]
    report = checking.compare(got, want, rtol=0.0,
                              name=f"{version}: tiles {before}.. after a hand-made look-back ({case})")
    assert report.ok, (f"{report.text}\n  (seed={seed}) the look-back must add the aggregate (flag A) of every "
                       "tile after the nearest P, then that P's prefix, and stop there")
    words = d_status.copy_to_host()[before:]
    flags, values = words >> np.uint64(32), (words & np.uint64(0xFFFFFFFF)).astype(np.int64)
    ends = [min((k + 1) * tile, tail.size) for k in range(3)]  # the last tile is 7 short
    expected = np.array([start + int(np.count_nonzero(tail[:e] > np.float32(threshold))) for e in ends])
    assert (flags == sol.FLAG_P).all() and (values == expected).all(), (
        f"status of the compacted tiles: flags {flags.tolist()}, values {values.tolist()}; expected FLAG_P "
        f"({sol.FLAG_P}) with the inclusive counts {expected.tolist()}")
    total = int(d_counter.copy_to_host()[1])
    assert total == start + want.size, f"counter[1] = {total}: the last tile writes the total kept, {start + want.size}"


def test_warp_aggregated_votes_and_shuffles():
    """The 4096-element one pass in the PTX: a ballot per element row (vote.sync), popc for the ranks
    and counts, shuffles for the scan of the warp counts, shared memory for the counts and the staged
    tile, a handful of barriers, and no local memory (the 16 values a thread stay in registers)."""
    rep = g.report("warp_aggregated")
    assert "vote.sync.ballot" in rep.ptx, (
        "warp_aggregated: no vote.sync.ballot: rank a warp's kept lanes with cuda.ballot_sync")
    assert "popc" in rep.ptx, "warp_aggregated: no popc: count a ballot's bits with cuda.popc"
    assert rep.count("shfl.sync") > 0, "warp_aggregated: no shfl.sync: scan the warp counts in registers"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0 and rep.count("bar.sync") >= 2
    assert rep.stack_bytes == 0, (
        f"warp_aggregated: {rep.stack_bytes} bytes of stack: index the per-thread arrays with loop constants only")


def test_optimized_loads_float4_votes_and_stages():
    """v4's idea in the PTX: 16-byte loads (ld.global.v4.f32, through course.wide), ballots and popc
    for the ranks, the kept elements staged through shared memory behind barriers, atomics for the
    ticket, the status reads and the publishes, and no local memory (32 floats a thread in registers)."""
    rep = g.report("optimized")
    assert "ld.global.v4.f32" in rep.ptx, "optimized: no 16-byte load: read x with wide.load4"
    assert "vote.sync.ballot" in rep.ptx and "popc" in rep.ptx, (
        "optimized: rank the lanes' kept elements with cuda.ballot_sync and cuda.popc")
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0 and rep.count("bar.sync") >= 2, (
        "optimized: stage the kept elements in shared memory, the warp counts behind a barrier")
    assert rep.count("atom") >= 3, "optimized: atomics for the ticket, the status reads and the publishes"
    assert rep.stack_bytes == 0, (
        f"optimized: {rep.stack_bytes} bytes of stack: index the per-thread arrays with loop constants only")


def test_direct_votes_and_stores_from_registers():
    """v5's idea in the PTX: ballots and popc rank the kept lanes, nothing staged (the only shared memory
    is the warp totals and the tile's slot), two barriers, atomics for the ticket and the publishes,
    and no local memory (32 floats a thread in registers)."""
    rep = g.report("direct")
    assert "vote.sync.ballot" in rep.ptx and "popc" in rep.ptx, (
        "direct: rank the lanes' kept elements with cuda.ballot_sync and cuda.popc")
    # ptxas counts 1 KB a block besides the kernel's own arrays (the block's reserved shared memory on sm_90)
    assert rep.shared_bytes <= 2048, (
        f"direct: {rep.shared_bytes} bytes of shared memory: store the kept elements from registers, not staged")
    assert rep.count("bar.sync") >= 2, "direct: a barrier before the warp totals are read, one after the look-back"
    assert rep.count("atom") >= 3, "direct: atomics for the ticket and the publishes"
    assert rep.stack_bytes == 0, (
        f"direct: {rep.stack_bytes} bytes of stack: index the per-thread arrays with loop constants only")


def test_pipelined_holds_two_tiles_in_registers():
    """v6 in the PTX: v5's ballots and stores from registers, the two tiles' values in registers (no
    stack: a and b indexed by loop constants only, pipe_step inlined), two barriers a step, and its
    global loads issued for the next tile. Unrolled, a tile's rows cost two load instructions each (the
    full-tile and the ragged path) and a ballot each time they are counted or stored: three tiles loaded
    (the first, then one a step) against three counts and two stores give more loads than ballots, where
    a loop loading nothing after the first tile gives fewer than half as many."""
    rep = g.report("pipelined")
    assert "vote.sync.ballot" in rep.ptx and "popc" in rep.ptx, (
        "pipelined: rank the lanes' kept elements with cuda.ballot_sync and cuda.popc")
    assert rep.shared_bytes <= 2048, f"pipelined: {rep.shared_bytes} bytes of shared memory: nothing staged"
    assert rep.count("bar.sync") >= 4, "pipelined: two barriers in each of the two steps of the loop"
    assert rep.stack_bytes == 0, (
        f"pipelined: {rep.stack_bytes} bytes of stack: index a and b with loop constants only")
    ballots = rep.ptx.count("vote.sync.ballot")
    assert rep.count("ld.global") >= ballots > 0, (
        f"pipelined: {rep.count('ld.global')} global loads for {ballots} ballots: each step loads the next "
        "tile (pipe_load) while the current one is looked back over and stored")


def test_scan_version_scans_in_shared_memory_without_atomics():
    """v2: the rank inside a block from a shared-memory scan of the flags (barriers between steps), the
    block offsets from a scan of the counts: no atomic anywhere, so the order is the input's."""
    scatter, count = g.report("scan"), g.report("scan.count")
    assert scatter.count("st.shared") > 0 and scatter.count("ld.shared") > 0 and scatter.count("bar.sync") >= 2, (
        "scan: rank the kept elements with a scan of the flags in shared memory, a barrier each step")
    assert scatter.count("atom") == 0 and count.count("atom") == 0, (
        "scan: an atomic hands out slots in arrival order; take the offsets from the scans")
    assert g.report("naive").count("atom") >= 1, "naive: take each kept element's slot with cuda.atomic.add"


@pytest.mark.parametrize("version", ONE_PASS)
def test_one_pass_reads_x_once(version):
    """Counted as Nsight Compute counts them: the one passes load x's sectors once (plus a status word
    a tile), v2 twice (the count pass and the scatter pass); the one passes' stores are whole
    coalesced warps."""
    n = 4500  # two tiles of warp_aggregated, nine of optimized in the simulator, nine blocks of v2
    x_sectors = -(-4 * n // 32)
    one = g.traffic(version, n)
    assert one.global_load_sectors <= 1.1 * x_sectors, (
        f"{version}: {one.global_load_sectors} sectors loaded for x's {x_sectors}: read each element once")
    assert one.sectors_per_store <= 5.5, (
        f"{version}: {one.sectors_per_store:.1f} sectors per store: copy the staged tile out with consecutive "
        "threads on consecutive words")
    if version == "optimized":
        two = g.traffic("scan", n)
        assert two.global_load_sectors >= 1.8 * x_sectors, (
            f"scan: {two.global_load_sectors} sectors loaded for x's {x_sectors}; the count and scatter passes "
            "each read x")


@pytest.mark.gpu
@pytest.mark.parametrize("version", ORDERED)
def test_at_scale(version):
    """2^25 + 3 floats: 2048 tiles of optimized, 8193 of warp_aggregated, so look-backs cross windows
    of 32 running tiles."""
    g.run_and_compare(version, (1 << 25) + 3, rtol=0.0)
    g.run_and_compare(version, ((1 << 25) + 3, "all"), rtol=0.0)
    g.run_and_compare(version, ((1 << 25) + 3, "one"), rtol=0.0)


@pytest.mark.gpu
def test_naive_at_scale():
    _sorted_compare("naive", (1 << 24) + 1)


def test_kernel_timing_needs_a_gpu():
    """kernel_us (the lesson's kernels-against-the-call split) times with CUDA events: in the simulator
    it says it needs a GPU instead of returning a number."""
    g.require_implemented("direct")
    if ON_GPU:
        pytest.skip("on a GPU it runs: see test_kernel_timing_on_a_gpu")
    x, threshold = sol.make_inputs(300, seed=1)
    with pytest.raises(RuntimeError, match="GPU"):
        g.target.kernel_us(x, threshold)


@pytest.mark.gpu
@pytest.mark.parametrize("version", ONE_PASS)
def test_kernel_timing_on_a_gpu(version):
    """kernel_us runs the version's kernels and its call, and reports both times and their difference.
    Which is larger is a measurement, not asserted: the suite's workers share the GPU, and another
    test's kernels between two events can make the kernels' span longer than a later call."""
    g.require_implemented(version)
    x, threshold = sol.make_inputs(1 << 20, seed=3)
    (d_x,) = launch.to_device(x)
    got = g.target.kernel_us(d_x, threshold, version, repeats=3)
    assert got["kept"] == int(np.count_nonzero(x > np.float32(threshold)))
    assert got["kernels_us"] > 0 and got["call_us"] > 0, got
    assert got["host_us"] == pytest.approx(got["call_us"] - got["kernels_us"]), got
