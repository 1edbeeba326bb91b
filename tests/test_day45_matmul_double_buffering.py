"""Day 45 grader: matrix multiply step 7, a conflict-free transposed A tile and double-buffered k steps."""

import functools
import re

import pytest

from course.grading import Grader

g = Grader(45)
sol = g.solution
OWN = ("double_buffered",)  # the day's own version: the first six steps are days 39-44's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully
FULL_TILE = (sol.BM, sol.BN, 2 * sol.BK)  # one whole 128 x 128 tile, two k steps: no idle threads
traffic = functools.cache(lambda version: g.traffic(version, FULL_TILE))

_LABEL = re.compile(r"^(\$\w+):")
_BRANCH = re.compile(r"^(?:@!?%\w+\s+)?bra(?:\.uni)?\s+(\$\w+);")


def k_loop(ptx: str) -> list[str]:
    """The PTX lines of the outermost loop that holds the multiply-adds (the k loop): from the label
    a backward branch jumps to, down to that branch."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    labels = {}
    best = None
    for n, line in enumerate(lines):
        if m := _LABEL.match(line):
            labels[m.group(1)] = n
        elif (m := _BRANCH.match(line)) and m.group(1) in labels:
            start = labels[m.group(1)]
            body = lines[start:n + 1]
            if any(ln.startswith("fma.rn.f32") for ln in body) and (best is None or n - start > len(best)):
                best = body
    return best or []


def count(lines: list[str], pattern: str) -> int:
    rx = re.compile(r"^(?:@!?%\w+\s+)?" + pattern)
    return sum(1 for ln in lines if rx.match(ln))


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """The day's kernel at every test shape (K = 1, 5, 37, 40, 67: a last 16-deep k step that is
    partial, or the only one; 1 x 37 and 33 x 1: one row or one column of a tile)."""
    g.run_and_compare("double_buffered", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-44, once the day's kernel is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, EARLIER_SIZE, rtol=sol.tolerance(EARLIER_SIZE[2]))


# The earlier steps' input checks are their own days' (their graders test them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
    },
)


@pytest.mark.parametrize("shape", [(sol.BM + 1, sol.BN + 5, 13), (sol.BM + 2, sol.BN - 1, sol.BK + 3)],
                         ids=["129x133x13", "130x127x19"])
def test_ragged_tiles_in_every_direction(shape):
    """Two tile rows (the last 1 or 2 rows of C), tile columns ragged, K and N not multiples of 4 (the
    padded copies), and K = 13 (one partial step: the prologue's and nothing to prefetch) or 19 (two
    steps, the second 3 deep): rows past M and columns past N not stored, k past K loaded as zeros."""
    g.run_and_compare("double_buffered", shape, rtol=sol.tolerance(shape[2]))


@pytest.mark.parametrize("shape", [(sol.BM, sol.BN, 3 * sol.BK + 4), (sol.BM, 2 * sol.BN, sol.BK + 4)],
                         ids=["128x128x52", "128x256x20"])
def test_full_float4_tiles(shape):
    """Whole 128 x 128 tiles with N a multiple of 4 (C stored as float4, no guards), several k steps
    (52: four steps, both copies used twice; the last step 4 deep), and two tiles side by side."""
    g.run_and_compare("double_buffered", shape, rtol=sol.tolerance(shape[2]))


def test_non_square_tiles_of_c():
    """Tall and wide: a fragment indexed with the wrong one of the thread's row and column is right only
    where the two coincide."""
    for shape in ((70, 9, 11), (9, 70, 21)):
        g.run_and_compare("double_buffered", shape, rtol=sol.tolerance(shape[2]))


def test_registers_and_wide_accesses():
    """The accumulators, fragments and the prefetched values all in registers (no stack frame, no
    spills, <= 255 registers), every tile access and the global loads 16 bytes wide where they can be."""
    rep = g.report("double_buffered")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"double_buffered: {rep.stack_bytes} bytes of stack frame: index the accumulators, the fragments and "
        "the prefetched values only with constants (loops over constant ranges, unrolled); keep the two C "
        "store loops apart, as day 44 does")
    assert rep.spill_stores == rep.spill_loads == 0, (
        f"double_buffered: {rep.spill_stores} spill stores, {rep.spill_loads} spill loads")
    assert rep.registers <= 255, f"double_buffered: {rep.registers} registers a thread (255 at most)"
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, "double_buffered: no shared-memory traffic"
    assert rep.count("vector ld/st") >= 8, (
        f"double_buffered: {rep.count('vector ld/st')} vector loads/stores in the PTX: keep day 44's float4 "
        "global loads, B tile stores and fragment loads (wide.load4 / wide.store4)")


def test_one_barrier_a_k_step():
    """Double buffering, as the compiler sees it: the k loop (the loop holding the multiply-adds) has ONE
    barrier (day 44's has two), the prologue at most one more; the next step's global loads are issued
    in the loop before its multiply-adds and with no barrier between them."""
    rep = g.report("double_buffered")
    loop = k_loop(rep.ptx)
    assert loop, "double_buffered: no loop with multiply-adds in the PTX"
    barriers = count(loop, r"(?:bar\.sync|barrier\.sync)\b")
    assert barriers == 1, (
        f"double_buffered: {barriers} barriers in the k loop: with two copies of each tile, one "
        "cuda.syncthreads() a step (after storing the next copy) separates every write from the reads "
        "it could race with")
    assert 1 <= rep.count("bar.sync") <= 2, (
        f"double_buffered: {rep.count('bar.sync')} barriers in the kernel: one in the k loop and one after "
        "the prologue stores the first tile")
    first_fma = next(n for n, ln in enumerate(loop) if ln.startswith("fma.rn.f32"))
    loads = [n for n, ln in enumerate(loop) if re.match(r"^(?:@!?%\w+\s+)?ld\.global", ln)]
    assert loads and loads[0] < first_fma, (
        "double_buffered: no global load in the k loop before the multiply-adds: issue the next step's "
        "loads into registers first, so they are in flight during the outer products")
    assert not any(re.match(r"^(?:bar\.sync|barrier\.sync)\b", ln) for ln in loop[loads[0]:first_fma]), (
        "double_buffered: a barrier between the next step's loads and the multiply-adds: the warp waits "
        "there instead of computing while the loads are in flight")


def test_day44_has_two_barriers_a_step():
    """The contrast the PTX check above relies on: day 44's k loop has its two barriers."""
    g.require_implemented(*OWN)
    loop = k_loop(g.report("vectorized").ptx)
    assert count(loop, r"bar\.sync\b") == 2


def test_transposed_store_is_conflict_free():
    """The step's first point, counted as Nsight Compute counts it on one full 128 x 128 tile (K = 32):
    day 44's transposed A store is 2 wavefronts a request (lanes t, t + 1 on one bank), a padded (or
    swizzled) tile 1, so the kernel's shared wavefronts per request drop (1.62 to 1.51 here) with the
    same shared requests, and the global side stays day 44's (16 sectors a float4 request)."""
    g.require_implemented(*OWN)
    day44, mine = traffic("vectorized"), traffic("double_buffered")
    assert mine.shared_requests > 0, "double_buffered: no shared-memory requests: stage the tiles in shared memory"
    assert mine.wavefronts_per_request <= day44.wavefronts_per_request - 0.05, (
        f"double_buffered: {mine.wavefronts_per_request:.3f} shared wavefronts per request against vectorized's "
        f"{day44.wavefronts_per_request:.3f} ({mine.shared_wavefronts} against {day44.shared_wavefronts}): the "
        "transposed store of A still conflicts: pad its rows to 132 floats (or swizzle them)")
    assert mine.shared_requests <= day44.shared_requests, (
        f"double_buffered: {mine.shared_requests} shared requests against vectorized's {day44.shared_requests}: "
        "keep the float4 fragment loads and the float4 B store")
    assert mine.global_load_requests <= day44.global_load_requests and mine.sectors_per_load >= 15.9, (
        f"double_buffered: {mine.global_load_requests} global load requests at {mine.sectors_per_load:.1f} sectors "
        f"each (vectorized: {day44.global_load_requests} at {day44.sectors_per_load:.1f}): keep the float4 loads")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((1021, 1023, 513),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((1021, 1023, 513),)])
def test_double_buffered_at_bench_size(n):
    """4096^3, 4093 x 4099 x 1021 and 1021 x 1023 x 513 (no side a multiple of a tile) on the GPU."""
    g.run_and_compare("double_buffered", n, rtol=sol.tolerance(sol.sizes(n)[2]))
