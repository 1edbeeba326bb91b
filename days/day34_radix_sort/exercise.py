"""Day 34 exercise: radix sort -- uint32 keys sorted ascending, stably, one digit a pass (least significant first).

optimized(keys) returns the sorted keys; sort_pairs(keys, values) returns (keys, values) with the int32
values reordered with their keys, equal keys keeping the input order of their values (stable). Every
pass must be stable: pass p orders by digit p and keeps the order of passes 0..p-1 among equal digits,
so after the last pass the keys are ordered by all their digits.

v1 naive      one bit a pass, 32 passes. Each pass: a flags kernel (flag = 1 where the bit is 0), day
              27's three-kernel scan of the flags (the number of zeros up to each key), and a stable
              split: a zero goes to (zeros before it), a one to (all zeros) + (ones before it). Every
              pass reads the keys twice and writes them once, plus the flags and their scan: ~32 x 32
              bytes a key.
v2 optimized  8-bit digits, 4 passes, tiles of TILE = 256 threads x 16 keys. Each pass: an upsweep
              (day 22's privatized histogram: each warp counts the tile's digits into its own 256 shared
              bins; the block writes its 256 totals digit-major, counts[digit * blocks + block]), day
              27's scan of that table (scan_blocks) (so entry (d, b) becomes the number of keys with a
              smaller digit anywhere plus those with digit d in earlier blocks: the carry between
              blocks), and a downsweep: the block reloads its tile, ranks every key stably within the
              tile (per warp, match_any_sync finds the lanes holding the same digit, popc of those below
              gives the order among them, a per-warp shared counter per digit the order across the
              warp's items; a scan over the warps and digits places every warp's run), stages the tile
              in shared memory in digit order, and writes it out: key at tile slot i with digit d to
              offset(d, block) + i - (start of d in the tile). Consecutive threads write consecutive
              addresses of one digit's run (~16 keys per digit a tile): runs of whole sectors instead
              of 32 scattered words.

Napkin math (n = 2^26 keys, 268 MB): a pass reads the keys in the upsweep and reads and writes them in
the downsweep, 12 bytes a key; 4 passes, 48 bytes a key: 3.2 GB, ~0.77 ms at the H200's ~4.2 TB/s copy
rate, plus the counts table (256 x 16384 blocks = 4 M int32, 16 MB) written, scanned (~64 MB of
traffic) and read (both tables) each pass: ~0.11 GB a pass, ~0.45 GB more in all. cupy.sort (CUB's
onesweep radix sort) runs 2^26 keys at ~38.4 G keys/s, 1.75 ms: the target is 30 % of that (5.8 ms),
the aim 50 % (3.5 ms); the floor of this design is ~0.8 ms, so the margin is for the ranking. A key
costs one match_any_sync, two popc, one shared atomic (the leader of its peers only) and one shuffle,
then a scattered shared store into the staged tile and a shared load back: ~25 instructions a key.
2^28 key-passes in 1 ms on 132 SMs at 1.98 GHz is ~1 key per SM per clock, ~25 warp-instructions per
32 clocks against 4 issue slots a clock: issue is not the bound, but the chain match -> atomic ->
shuffle is serial within a warp (16 items one after another), so latency is hidden only by the other
warps: 5 blocks of 42 KB shared fit an SM by shared memory, 2 by registers (102 a thread at sm_90:
16 keys, values and ranks each), 16 warps an SM. The naive
version moves ~32 x 32 bytes a key (~69 GB at 2^26: ~16 ms at best) and is a row for contrast.

What you write (each raises NotImplementedError with its hint until you do):
  bit_flags_kernel     flag the keys whose bit is 0, guarded (3 lines)
  split_kernel         destination from the scanned flags (zeros first, then ones, each in input order) (12 lines)
  digit_counts_kernel  zero the warps' shared bins, barrier, load ITEMS keys, count into the warp's row, barrier,
                       store (21 lines)
  rank_scatter_kernel  zero the warp's counters, load its keys (PAD past n), rank them with match_any_sync + popc
                       (22 lines)
  rank_scatter_kernel  thread d: scan wcount[:, d] over the warps, scan the digit totals (shuffles + wsum), start
                       and gbase (21 lines)
  rank_scatter_kernel  stage each key (and value) at its tile slot, barrier, write the slots out, coalesced (16
                       lines)
Everything else in this file is given. Grade with:  make check DAY=34
"""

import numpy as np

from course import cuda, launch
from numba import int32, uint32  # numba names only after the course import
from solutions.day22_histogram import BINS
from solutions.day27_scan_kogge_stone import scan_blocks

TITLE = "Radix sort: per-block digit histograms, a scan, stable ranking"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# One key, a tile -1/+1 (the second block holds one key); last a size under a tile, which the traffic
# counts and `bench` use in the simulator (the 32-pass naive version must finish there too).
TEST_SIZES = (1, 4095, 4097, 300)
NAIVE_SIZES = (257,)  # 32 passes of flags, a 512-thread scan and a split: ~4 s in the simulator whatever n
BENCH_SIZES = (1 << 26,)  # 268 MB of keys: four times the 60 MB L2
BOUND = "memory"

RADIX = BINS  # 256 digit values: day 22's 256 bins
DIGIT_BITS = 8
PASSES = 32 // DIGIT_BITS  # 4
MASK = RADIX - 1
THREADS = 256  # one digit a thread in the scans over the tile's digits
WARPS = THREADS // 32
WARP_BINS = WARPS * RADIX  # one row of RADIX counters per warp: 2048 int32, 8 KB
ITEMS = 16  # keys a thread: 16 loads in flight, and a 4096-key tile keeps the counts table small
TILE = THREADS * ITEMS  # 4096 keys a block
SEG = 32 * ITEMS  # 512 consecutive keys a warp ranks
FULL = 0xFFFFFFFF
PAD = 0xFFFFFFFF  # slots past the end of the keys: the largest digit, ranked after every real key
NAIVE_THREADS = 256
NO_VALUES = 0
WITH_VALUES = 1


def make_inputs(n: int, seed: int = 0):
    """Uniform random uint32 keys over the whole range, (n,)."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32),)


def reference(keys):
    return np.sort(keys, kind="stable")


def reference_pairs(keys, values):
    """The stable sort of (keys, values) by key: equal keys keep the input order of their values."""
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order]


def traffic(keys):
    """(minimum bytes moved through device memory, operations): any sort reads every key once and writes
    it once; this day's 4-pass design moves 6 times that (48 bytes a key, see the docstring)."""
    return 2 * keys.size * keys.itemsize, 0


# --- v1: one bit a pass -------------------------------------------------------------------------------


@cuda.jit
def bit_flags_kernel(keys, bit, flags):  # keys (n,) uint32, flags (n,) int32
    """flags[i] = 1 where bit `bit` of keys[i] is 0, else 0 (one thread a key, guard i < n)."""
    raise NotImplementedError("Day 34: flag the keys whose bit is 0, guarded (3 lines)")


@cuda.jit
def split_kernel(keys, vals, bit, zeros_incl, keys_out, vals_out, with_values):
    """The stable split of one pass. zeros_incl (n,) int32 is the inclusive scan of the flags (the
    zeros among keys[0..i]); total = zeros_incl[n - 1]. A key whose bit is 0 goes to
    zeros_incl[i] - 1, a key whose bit is 1 to total + (i - zeros_incl[i]) (the ones before it).
    Move vals[i] to the same place when with_values is 1. One thread a key, guard i < n."""
    raise NotImplementedError("Day 34: destination from the scanned flags (zeros first, then ones, each in input "
                              "order) (12 lines)")


# --- v2: 8-bit digits, per-block histograms, a scan of the table, stable ranking in the tile ----------


@cuda.jit
def digit_counts_kernel(keys, shift, counts):  # keys (n,) uint32, counts (RADIX * blocks,) int32
    """Upsweep: block b counts the digits (keys[i] >> shift) & MASK of its tile keys[b * TILE ...
    b * TILE + TILE - 1] (inside n) and writes its count of digit d to counts[d * blocks + b].

    Day 22's privatized histogram: hist = cuda.shared.array(WARP_BINS, int32), one row of 256 bins
    per warp (warps do not contend with each other); zero it, cuda.syncthreads(), load the tile's keys
    (key j * THREADS + t of the tile for thread t: coalesced) into a local array first (all ITEMS loads
    in flight), count each with cuda.atomic.add into the warp's row, cuda.syncthreads(); thread t (=
    digit t) sums its digit over the WARPS rows and stores counts[t * blocks + b] (blocks =
    cuda.gridDim.x).
    """
    raise NotImplementedError("Day 34: zero the warps' shared bins, barrier, load ITEMS keys, count into the warp's "
                              "row, barrier, store (21 lines)")


@cuda.jit
def rank_scatter_kernel(keys, vals, shift, counts, scanned, keys_out, vals_out, with_values):
    """Downsweep: block b moves its tile to the digit-d bucket of the output, stably.

    counts (RADIX * blocks,) is the upsweep's table, scanned its inclusive scan: the exclusive offset of
    (digit d, block b), the keys before the tile's first key of digit d in the output, is
    scanned[d * blocks + b] - counts[d * blocks + b].

    1. Warp w of the tile owns SEG = 32 * ITEMS consecutive keys: item j of lane l is tile key
       w * SEG + j * 32 + l (coalesced loads; past n: PAD, which ranks last). wcount = a shared row of
       RADIX counters per warp, zeroed by its own warp (cuda.syncwarp()).
    2. Rank, per item j in order: peers = the lanes whose key has the same digit
       (uint32(cuda.match_any_sync(FULL, int32(d)))); below = peers & cuda.lanemask_lt(); the lowest
       peer (below == 0) adds popc(peers) to wcount[w, d] with cuda.atomic.add and hands the old count
       to its peers with cuda.shfl_sync from lane cuda.ffs(peers) - 1; the key's rank in the warp is
       that count + popc(below). The order is the tile's order (item, then lane): stable.
    3. cuda.syncthreads(); thread d turns wcount[:, d] into an exclusive scan over the warps (the keys
       of digit d in earlier warps) and scans the digit totals over the block (shuffles in a warp,
       warp totals through shared memory): start[d], where digit d's run begins in the tile, and
       gbase[d] = offset(d, b) - start[d].
    4. cuda.syncthreads(); each key goes to tile slot start[d] + wcount[w, d] + its rank (a shared
       array TILE long; its value to a second one when with_values). cuda.syncthreads().
    5. Thread t writes tile slots i = j * THREADS + t (inside the tile's keys): the key at slot i with
       digit d to keys_out[gbase[d] + i] (and its value to vals_out).
    """
    wcount = cuda.shared.array(WARP_BINS, int32)  # (WARPS, RADIX): the warp's keys of each digit
    start = cuda.shared.array(RADIX, int32)  # (RADIX,) first tile slot of each digit
    gbase = cuda.shared.array(RADIX, int32)  # (RADIX,) output index of tile slot 0, per digit
    wsum = cuda.shared.array(WARPS, int32)  # (WARPS,) the digit totals of each warp's 32 digits
    skeys = cuda.shared.array(TILE, uint32)  # (TILE,) the tile in digit order
    svals = cuda.shared.array(TILE, int32)  # (TILE,) its values, same order
    t = cuda.threadIdx.x
    lane = t & 31
    w = t >> 5
    row = w * RADIX
    b = cuda.blockIdx.x
    blocks = cuda.gridDim.x
    n = keys.size
    base = b * TILE
    s = uint32(shift)

    raise NotImplementedError("Day 34: zero the warp's counters, load its keys (PAD past n), rank them with "
                              "match_any_sync + popc (22 lines)")
    cuda.syncthreads()  # every warp's counts are in

    raise NotImplementedError("Day 34: thread d: scan wcount[:, d] over the warps, scan the digit totals (shuffles + "
                              "wsum), start and gbase (21 lines)")
    cuda.syncthreads()  # start, gbase and the warps' offsets are read by every thread

    raise NotImplementedError("Day 34: stage each key (and value) at its tile slot, barrier, write the slots out, "
                              "coalesced (16 lines)")


_NAIVE_SPLIT = "void(uint32[::1], int32[::1], int64, int32[::1], uint32[::1], int32[::1], int64)"
KERNELS = {
    "naive": (split_kernel, _NAIVE_SPLIT),
    "naive.flags": (bit_flags_kernel, "void(uint32[::1], int64, int32[::1])"),
    "optimized": (rank_scatter_kernel,
                  "void(uint32[::1], int32[::1], int64, int32[::1], int32[::1], uint32[::1], int32[::1], int64)"),
    "optimized.upsweep": (digit_counts_kernel, "void(uint32[::1], int64, int32[::1])"),
}


def _check_keys(keys):
    launch.check_array("keys", keys, dtype=np.uint32, ndim=1)
    if keys.shape[0] < 1:
        raise ValueError(f"keys: expected at least one key, got shape {tuple(keys.shape)}")


def _check_values(keys, values):
    launch.check_array("values", values, dtype=np.int32, ndim=1)
    if values.shape[0] != keys.shape[0]:
        raise ValueError(f"values: expected shape ({keys.shape[0]},) like keys, got shape {tuple(values.shape)}")


def _naive_sort(d_keys, d_vals, with_values):
    """32 passes of flags, day 27's scan and the stable split, ping-ponging between two buffers."""
    n = d_keys.size
    grid = launch.blocks(n, NAIVE_THREADS)
    bufs = [launch.empty((n,), np.uint32), launch.empty((n,), np.uint32)]
    vbufs = [launch.empty((n if with_values else 1,), np.int32) for _ in range(2)]
    flags = launch.empty((n,), np.int32)
    zeros = launch.empty((n,), np.int32)
    src, vsrc = d_keys, d_vals
    for bit in range(32):
        dst, vdst = bufs[bit & 1], vbufs[bit & 1]
        bit_flags_kernel[grid, NAIVE_THREADS](src, bit, flags)
        scan_blocks(flags, zeros)  # day 27: block scans, scan of the block totals, add-back
        split_kernel[grid, NAIVE_THREADS](src, vsrc, bit, zeros, dst, vdst, with_values)
        src, vsrc = dst, vdst
    return src, vsrc


def _radix_sort(d_keys, d_vals, with_values):
    """4 passes of upsweep, day 27's scan of the counts table, downsweep."""
    n = d_keys.size
    blocks = launch.blocks(n, TILE)
    bufs = [launch.empty((n,), np.uint32), launch.empty((n,), np.uint32)]
    vbufs = [launch.empty((n if with_values else 1,), np.int32) for _ in range(2)]
    counts = launch.empty((RADIX * blocks,), np.int32)  # (RADIX, blocks) digit-major
    scanned = launch.empty((RADIX * blocks,), np.int32)
    src, vsrc = d_keys, d_vals
    for p in range(PASSES):
        shift = p * DIGIT_BITS
        dst, vdst = bufs[p & 1], vbufs[p & 1]
        digit_counts_kernel[blocks, THREADS](src, shift, counts)
        scan_blocks(counts, scanned)  # day 27, inclusive: (d, b) counts digits < d, and d in blocks <= b
        rank_scatter_kernel[blocks, THREADS](src, vsrc, shift, counts, scanned, dst, vdst, with_values)
        src, vsrc = dst, vdst
    return src, vsrc


def _no_values():
    return launch.empty((1,), np.int32)  # never read or written: with_values = 0


def naive(keys):
    _check_keys(keys)
    (d_keys,) = launch.to_device(keys)
    out, _ = _naive_sort(d_keys, _no_values(), NO_VALUES)
    return launch.result(out, keys)


def optimized(keys):
    _check_keys(keys)
    (d_keys,) = launch.to_device(keys)
    out, _ = _radix_sort(d_keys, _no_values(), NO_VALUES)
    return launch.result(out, keys)


def sort_pairs(keys, values, version="optimized"):
    """(keys sorted ascending, values reordered with them), stable; version "optimized" or "naive"."""
    _check_keys(keys)
    _check_values(keys, values)
    if version not in VERSIONS:
        raise ValueError(f"version: expected one of {VERSIONS}, got {version!r}")
    d_keys, d_vals = launch.to_device(keys, values)
    sort = _radix_sort if version == "optimized" else _naive_sort
    out_k, out_v = sort(d_keys, d_vals, WITH_VALUES)
    return launch.result(out_k, keys, values), launch.result(out_v, keys, values)


def library(keys):
    """cupy.sort (CUB's device radix sort): the call a user would make, a benchmark row."""
    import cupy

    return cupy.sort(cupy.asarray(keys))
