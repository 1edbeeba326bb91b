"""Day 29 exercise: scan III -- any length in one pass: out[i] = x[0] + ... + x[i] with decoupled look-back.

The inclusive prefix sum of x (float32 or int32 (n,), n from 1 to 2^28; int32 wraps as the hardware
adds). Day 28 scanned any length in three steps; today one kernel reads x once and writes out once.

v1 naive      the three-kernel scan of day 28 (its kernels and driver, imported): Brent-Kung block
              scans of 1024 elements that write each block's total, the same scan over the totals
              (recursively), then an add-back kernel that reads and rewrites every block after the
              first. Two trips through out: ~16 bytes an element.
v2 optimized  a single pass with decoupled look-back (Merrill & Garland): each block takes the next
              tile of TILE = THREADS x ITEMS elements from an atomic counter (so it only ever waits on
              tiles whose blocks already run), loads it (ITEMS coalesced loads a thread, all in
              flight before any add), scans it in registers and warp shuffles (one warp total a warp
              through shared memory), publishes the tile's aggregate (flag A) in its status word,
              and one warp looks back over the predecessors' words, 32 at a time with a ballot,
              summing aggregates until it meets an inclusive prefix (flag P); it then publishes its
              own P. Status and value share one 64-bit word (flag in the high 32 bits, the value's
              bits in the low 32), read with an atomic, so a flag is never seen with a stale value;
              cuda.threadfence() before each publish orders the value's computation before the flag.

Napkin math: 4 bytes read and 4 written an element, one add: 2^28 int32 move 2.1 GB at the minimum,
~0.51 ms at the H200's ~4.2 TB/s copy rate. The three-kernel scan moves ~16 bytes an element (x in,
out written, out read and written again, plus the totals: a 1/1024 share): ~1.0 ms at best, half the
copy rate. The single pass moves 8 bytes an element plus 8 bytes of status a tile (a 1/512 share at
TILE = 4096): it can run at the copy rate if nothing else binds. Per SM the DRAM share is ~16 bytes a
clock; a warp's 512-element chunk (2 KB in, 2 KB out) therefore has ~256 clocks of DRAM time, against
16 load and 16 store instructions, 16 x 6 shuffles (5 for the warp scan, 1 for the chunk's total) and
two barriers: the shuffle pipe (one warp instruction a clock) is the busiest unit at ~40 %. The look-back
is latency, not bandwidth: a tile waits for its predecessor's aggregate (~1 us: the predecessor's
loads), and with 4096-element tiles 2^28 elements are 65536 tiles and 65536 same-address atomics on
the tile counter (a few tens of us of L2 atomic time, spread over the whole run). 256 threads x ~64
registers: 4 blocks (1024 threads) resident an SM, 64 bytes of loads in flight a thread, 64 KB an SM,
~3x what Little's law asks for (~23 KB). Expect close to the copy rate (measured on the H200: 725 us
at 2^28 int32, 70 % of it; 2.7x cupy.cumsum).

float32: the prefix of tile k is tile k-1's prefix plus tile k's aggregate, a chain of one add a tile;
its rounding error grows like sqrt(tiles) x 2^-24 (~3e-6 of the running sum at 2^24 elements); int32
is exact. In the simulator (one block at a time, ~0.15 ms a thread) TILE is 256 x 4 = 1024 so that the
graders see ten tiles and more; on a GPU (and in the compiler's report) it is 256 x 16 = 4096.

What you write (each raises NotImplementedError with its hint until you do):
  pack                cell[0] = value; cell.view(np.uint32)[1] = flag; return cell.view(np.uint64)[0] (3 lines)
  unpack              write word into cell.view(np.uint64)[0], return cell[0] (2 lines)
  look_back           rounds of 32 predecessors: spin while any flag is X; ballot for P; add the values from the
                      nearest P on (19 lines)
  single_pass_kernel  publish A (P for tile 0) after a threadfence; warp 0 looks back, publishes P, shares the
                      prefix (13 lines)
Everything else in this file is given. Grade with:  make check DAY=29
"""

import numpy as np

from course import DEVICE, cuda, flags, launch
from numba import uint32, uint64
from solutions.day28_scan_brent_kung import (  # noqa: F401  (the days' problem: the graders read these)
    RTOL,
    make_inputs,
    reference,
    traffic,
)
from solutions.day28_scan_brent_kung import _check, add_block_sums_kernel, brent_kung_kernel
from solutions.day28_scan_brent_kung import optimized as day28_optimized

TITLE = "Scan III: any length, one pass with decoupled look-back"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
WARP = 32
FULL_MASK = 0xFFFFFFFF
THREADS = 256  # 8 warps a block: 4 blocks resident an SM at ~64 registers a thread
WARPS = THREADS // WARP
# Elements a thread scans: 16 on a GPU (64 bytes of loads in flight a thread, 4096 a tile, so the
# look-back runs once per 16 KB); 4 in the simulator, where a thread costs ~0.15 ms and a warp
# intrinsic a thread switch, so the graders can afford ten tiles and more.
ITEMS = 4 if DEVICE.kind == "sim" else 16
TILE = THREADS * ITEMS  # elements one block scans
CHUNK = WARP * ITEMS  # elements one warp scans: lane l holds elements l, l + 32, ..., l + 32 (ITEMS - 1)
# A tile's status word: the flag in the high 32 bits, the 32 bits of the value in the low ones.
FLAG_X = 0  # nothing published yet (the status array starts zeroed)
FLAG_A = 1  # the low bits hold the tile's aggregate: the sum of its own elements
FLAG_P = 2  # the low bits hold the tile's inclusive prefix: the sum of tiles 0 .. k
# How the look-back polls a status word: a relaxed load (True) or an atomic add of 0 (False); see
# read_status. A knob for tools/sweep.py: the H200 decides which polls faster.
RELAXED_POLL = True
# float32 sizes: one element; a tile -1 and +1; primes over many tiles (the largest: 11 tiles of 1024
# in the simulator, so every tile but the first looks back). int32 sizes are the grader's.
TEST_SIZES = (1, TILE - 1, TILE + 1, 4099, 11261)
BENCH_SIZES = ((1 << 28, "int32"),)  # 1 GiB in, 1 GiB out: seventeen times the 60 MB L2; int32 is exact
BOUND = "memory"


@cuda.jit(device=True)
def pack(cell, flag, value):
    """One status word (uint64) holding ``flag`` in its high 32 bits and the 32 bits of ``value`` in
    its low 32 bits. ``cell`` is a (2,) local array of the values' dtype, the thread's scratch: write
    value into cell[0], flag into the second uint32 of cell.view(np.uint32), return the one uint64 of
    cell.view(np.uint64) (a view changes the type, not the bits: little-endian, so cell[0] is low)."""
    raise NotImplementedError("Day 29: cell[0] = value; cell.view(np.uint32)[1] = flag; return cell.view(np.uint64)[0] "
                              "(3 lines)")


@cuda.jit(device=True)
def unpack(cell, word):
    """The value (of cell's dtype) whose bits are the low 32 bits of the status word ``word``: the
    inverse of pack (the flag is word >> 32, no view needed)."""
    raise NotImplementedError("Day 29: write word into cell.view(np.uint64)[0], return cell[0] (2 lines)")


@cuda.jit(device=True)
def read_status(status, j):
    """Tile j's status word as its block last published it. A plain load in a spin loop may be hoisted
    out of it (or served from a stale L1 line). RELAXED_POLL: a relaxed load (course.flags:
    ld.relaxed.gpu, fresh from L2 every time, as CUB polls); otherwise an atomic add of 0, just as fresh
    but a read-modify-write that the word's L2 slice performs one at a time, queued with every other
    poll of the word and with the publishing atomic."""
    if RELAXED_POLL:
        return flags.load_relaxed(status, j)
    return cuda.atomic.add(status, j, uint64(0))


@cuda.jit(device=True)
def warp_total(v):
    """The sum of v over the 32 lanes, in every lane (a butterfly: shfl_xor 16, 8, 4, 2, 1)."""
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit(device=True)
def look_back(status, tile, lane, cell, zero):
    """Run by the 32 lanes of one warp of the block that owns ``tile`` (> 0): the sum of every element
    before the tile (its exclusive prefix), from the predecessors' status words.

    Rounds of 32 predecessors: in a round whose window ends at ``end`` (first end = tile), lane l
    reads tile j = end - 32 + l (read_status; j < 0 counts as flag P with value 0). While any lane
    sees FLAG_X (that tile's block has not published yet), those lanes read again (cuda.any_sync
    keeps the warp together). Then p = cuda.ballot_sync(FULL_MASK, flag == FLAG_P): if p != 0, the
    nearest P is lane 31 - cuda.clz(p); that lane's prefix and the aggregates of the lanes after it
    are what is left to add (lanes before it add zero), and the look-back ends. Otherwise every lane
    holds an aggregate: add all 32 and move the window 32 tiles back. warp_total(v) sums a round.
    ``zero`` is a 0 of the values' dtype (float32 stays float32). Returns the same value in every lane.
    """
    raise NotImplementedError("Day 29: rounds of 32 predecessors: spin while any flag is X; ballot for P; add the "
                              "values from the nearest P on (19 lines)")


@cuda.jit
def single_pass_kernel(x, out, status, counter):  # x (n,), out (n,), status (tiles,) uint64, counter (1,)
    """out = the inclusive scan of x in one pass; status (tiles,) uint64 and counter (1,) int32 start
    zeroed (clear_status_kernel). Launched with one block of THREADS threads per tile.

    Given: the block's tile comes from cuda.atomic.add(counter, 0, 1) (thread 0, shared to all);
    warp w of the block scans its chunk of CHUNK elements, lane l holding elements l + 32 j in v[j]
    (each v[j] a shuffle scan across the warp, plus the totals of the chunks before it); the warps'
    totals go through shared memory, so every thread knows `before` (the sum of the warps before its
    own) and `aggregate` (the whole tile's sum). You write what turns the tile's scan into the
    array's scan:
    1. thread 0 publishes its tile: tile 0 publishes FLAG_P with its aggregate (there is nothing
       before it) and sets the shared exclusive prefix to zero; any other tile publishes FLAG_A with
       its aggregate. cuda.threadfence() before the publish (cuda.atomic.exch of pack(...)): the fence
       orders the block's work before the word, so no reader sees a flag before the value is ready.
    2. warp 0 of every tile > 0 calls look_back (all 32 lanes), then lane 0 publishes FLAG_P with
       exclusive + aggregate (again after a threadfence) and writes exclusive to the shared prefix.
    Given after that: a barrier, and each thread stores v[j] + prefix + before.
    """
    warp_sums = cuda.shared.array(WARPS, x.dtype)  # (WARPS,) the warps' totals
    shared_tile = cuda.shared.array(1, np.int32)
    shared_prefix = cuda.shared.array(1, x.dtype)  # the tile's exclusive prefix, from the look-back
    v = cuda.local.array(ITEMS, x.dtype)  # the thread's elements: registers, constant indexes only
    cell = cuda.local.array(2, x.dtype)  # scratch for pack / unpack: one uint64 seen as two values
    cell[0] = 0
    zero = cell[0]  # a 0 of x's dtype: float32 sums stay float32, int32 ones wrap at the store
    t = cuda.threadIdx.x
    lane = t % WARP
    w = t // WARP
    if t == 0:
        # Tiles in the order blocks start, not by blockIdx: a block only waits on tiles whose blocks
        # already hold an SM, so the look-back cannot wait on a block that is not scheduled.
        shared_tile[0] = cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    tile = shared_tile[0]
    n = x.size
    first = tile * TILE + w * CHUNK + lane
    for j in range(ITEMS):  # ITEMS loads in flight before any add; each warp request 128 bytes in a row
        i = first + WARP * j
        v[j] = x[i] if i < n else 0
    d = 1
    while d < WARP:  # Kogge-Stone across the warp, in registers: the ITEMS chains interleave (ILP)
        for j in range(ITEMS):
            up = cuda.shfl_up_sync(FULL_MASK, v[j], d)
            if lane >= d:
                v[j] += up
        d *= 2
    run = zero
    for j in range(ITEMS):  # each row of 32 adds the totals of the rows before it
        row_total = cuda.shfl_sync(FULL_MASK, v[j], WARP - 1)
        v[j] += run
        run += row_total
    if lane == 0:
        warp_sums[w] = run  # the chunk's total
    cuda.syncthreads()
    before = zero  # the warps before this one
    aggregate = zero  # the whole tile
    for k in range(WARPS):  # 8 broadcast reads: every lane of a warp reads the same word
        s = warp_sums[k]
        if k < w:
            before += s
        aggregate += s
    raise NotImplementedError("Day 29: publish A (P for tile 0) after a threadfence; warp 0 looks back, publishes P, "
                              "shares the prefix (13 lines)")
    cuda.syncthreads()  # the prefix thread 0 wrote is read by every thread
    offset = shared_prefix[0] + before
    for j in range(ITEMS):
        i = first + WARP * j
        if i < n:
            out[i] = v[j] + offset  # coalesced: 32 consecutive elements a warp request


@cuda.jit
def clear_status_kernel(status, counter):  # status (tiles,) uint64, counter (1,)
    """Zero the status words (every tile FLAG_X) and the tile counter before a scan: grid-stride."""
    i = cuda.grid(1)
    if i == 0:
        counter[0] = 0
    while i < status.size:
        status[i] = 0
        i += cuda.gridsize(1)


_F32 = "void(float32[::1], float32[::1], uint64[::1], int32[::1])"
_I32 = "void(int32[::1], int32[::1], uint64[::1], int32[::1])"
KERNELS = {
    "naive": (brent_kung_kernel, "void(float32[::1], float32[::1], float32[::1])"),
    "naive.add": (add_block_sums_kernel, "void(float32[::1], float32[::1])"),
    "optimized": (single_pass_kernel, _F32),
    "optimized.int32": (single_pass_kernel, _I32),
    "optimized.clear": (clear_status_kernel, "void(uint64[::1], int32[::1])"),
}


def naive(x):
    """Day 28's three-kernel scan: block scans, the scan of the block totals, the add-back."""
    return day28_optimized(x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    n = x.shape[0]
    tiles = launch.blocks(n, TILE)
    out = launch.empty((n,), x.dtype)
    status = cuda.device_array((tiles,), dtype=np.uint64)  # (tiles,): zeroed by the clear kernel
    counter = cuda.device_array((1,), dtype=np.int32)
    clear_status_kernel[launch.grid_stride_blocks(tiles, 256), 256](status, counter)
    single_pass_kernel[tiles, THREADS](d_x, out, status, counter)
    return launch.result(out, x)


def library(x):
    """CuPy's cumsum: a row of the benchmark table."""
    import cupy

    return cupy.cumsum(cupy.asarray(x), dtype=x.dtype)
