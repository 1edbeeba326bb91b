"""Day 38: checkpoint -- top-k by radix select: the k largest of n float32 values, sorted descending.

optimized(x, k): x float32 (n,) (no NaN; +-inf and +-0.0 allowed), 1 <= k <= n -> the k largest values,
largest first, float32 (k,). topk_indices(x, k) -> their int32 indices. Ties go to the smallest index,
so the answer is unique: the reference is NumPy's np.argsort(-x, kind="stable")[:k] (values x[idx]).
-0.0 and +0.0 are equal here, as NumPy compares them (and as sampling treats two equal logits): the key
folds -0.0 onto +0.0, so they tie and the smaller index comes first; the values returned are x[idx], bit
for bit (a -0.0 comes out as -0.0). This is the operation a serving engine runs for top-k sampling.

Keys. float_to_ordered_uint32 maps the float's bits to a uint32 whose unsigned order is the float
order: a positive float's bits already order like integers, so setting the sign bit puts them above all
negatives; a negative float's bits order backwards (a larger magnitude is a larger integer), so all bits
are flipped, which reverses that order and clears the sign bit. -inf -> 0x007FFFFF, -0.0 -> 0x7FFFFFFF,
+0.0 -> 0x80000000, +inf -> 0xFF800000. The select works on descending_key = ~ordered (with -0.0 folded
onto +0.0 first): the k largest floats are the k smallest descending keys, and "smallest index first"
becomes the ascending order of the pair (key, index), which a stable ascending sort gives.

v1 naive      the full sort: one kernel writes every element's descending key and its index, day 34's
              stable 8-bit LSD radix sort_pairs sorts all n pairs (ties keep index order), and a gather
              takes the first k (values x[idx]). ~4 passes x 20 bytes a pair over n: all of x sorted to
              keep k of it.
v2 optimized  radix select: 4 passes of 8 bits from the top. Pass p is a histogram of digit p of the
              keys still in play (those whose higher digits equal the prefix found so far), counted into
              day 22's replicated shared bins (32 copies a bin, one a lane: no bank conflict, however the
              digits fall), merged with one global atomic a bin a block; then one block of 256 threads
              scans the 256 counts (day 31's warp shuffle scan) and finds the digit holding the k-th
              smallest key: the prefix grows by a digit and k shrinks by the keys below it. After 4 passes
              the threshold key T is known, with `less` = the keys below it and r = k - less the keys
              equal to it that are taken. One pass of day 31's one-pass compaction (ballots, popc, a
              decoupled look-back with day 31's scan_counts) gathers, in index order, every key < T and
              the first r keys == T (their rank among the equal keys, counted by the look-back, < r):
              exactly k pairs. Then a small sort of the k survivors: a one-block bitonic sort of the
              64-bit (key, index) pairs in shared memory for k <= SMALL_K = 2048, day 34's stable radix
              sort_pairs for larger k.

Bytes. The histogram passes each re-read x (4 bytes a key) rather than compacting the candidates after
the first pass: a float's top byte is its sign and 7 exponent bits, so for data of one scale the first
pass separates little (uniform(-1, 1): a quarter of all keys share the top digit of the largest ones),
and a stable compaction of the candidates (key + index, 8 bytes, to keep the ties rule) would write and
re-read about as much as it saves; it wins only when the first digit already isolates a thin tail
(normal logits: ~2 % left), at the price of data-dependent buffers. Re-reading keeps every pass at 4n
bytes, whatever the data.

Napkin math at n = 2^26 (268 MB of x), k = 50 or 2048: v2 reads x 5 times (4 histogram passes + the
gather): 1.34 GB, ~0.32 ms at the H200's ~4.2 TB/s copy rate (x is 4.5x the 60 MB L2, so every pass
comes from DRAM), plus 4 tiny scans and the sort of k pairs (one block; a few us): launches, not bytes,
are the rest. The minimum (traffic()) is one read of x, 268 MB, ~64 us: a one-pass select would need the
threshold in advance. v1 moves ~4 x (4 + 4 + 4 + 8) = 80 bytes a key plus the key write: ~5.6 GB, ~1.4 ms
at best. The library row is cupy.sort(x)[-k:][::-1] (CUB's full radix sort of the floats; cupy.partition
and cupy.argpartition also sort the whole array, their documentation says). Measured on the H200 at 2^26,
k = 50: naive 4,163 us, optimized 907 us, cupy.sort 1,806 us (k = 2048: 4,154, 939, 1,807 us).
"""

import math

import numpy as np

from course import cuda, launch
from numba import int32, uint32, uint64  # numba names only after the course import
from solutions.day17_warp_shuffles import warp_sum  # day 17's shuffle fold
from solutions.day22_histogram import BINS, COPIES, SLOTS  # day 22's replicated shared bins
from solutions.day29_scan_decoupled_lookback import read_status  # day 29's poll of a status word
from solutions.day31_stream_compaction import (  # day 31's one-pass compaction pieces
    AGGREGATE,
    ITEMS,
    PREFIX,
    TILE,
    WARPS,
    scan_counts,
    warp_inclusive_scan,
    zero_kernel,
)
from solutions.day31_stream_compaction import SLOTS as ROW_SLOTS
from solutions.day31_stream_compaction import THREADS as GATHER_THREADS
from solutions.day34_radix_sort import WITH_VALUES, _radix_sort  # day 34's stable 8-bit sort of pairs

TITLE = "Checkpoint: top-k by radix select"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")

RADIX = BINS  # 256 digit values
DIGIT_BITS = 8
PASSES = 32 // DIGIT_BITS  # 4
SIGN = 0x80000000
FULL = 0xFFFFFFFF
THREADS = 256  # histogram and select kernels: one digit a thread where they read the bins
UNROLL = 4  # histogram: 4 loads in flight a thread each trip of the grid-stride loop
SMALL_K = 2048  # the final sort: up to 2048 pairs of 8 bytes (16 KB) in one block's shared memory
SORT_THREADS = 256  # the bitonic block: up to SMALL_K / 2 / 256 = 4 compare-exchanges a thread a step
LOW = 0xFFFFFFFF

# n = 1 (k = 1 = n); a block + 1 with k = 1; a prime over two tiles with k > SMALL_K (day 34
# sorts the survivors); a gather tile + 1 (a look-back). An int n means k = min(n, 50).
TEST_SIZES = (1, (257, 1), (5003, 2500), (4097, 100))  # the last: the traffic counts
NAIVE_SIZES = ((300, 7), (300, 300, "equal"))  # the full sort: day 34's 4 passes over all of n
# The data decides the work. "equal": every value the same (ties by index); "inf": +-inf mixed with
# finite values; "zeros": +-0.0 among few other values; "dups": many copies of the k-th value, straddling
# the threshold (over two gather tiles: the equal keys' ranks cross tiles); "negative": all values
# negative (the sign flip of the mapping).
HARD_CASES = ((600, 600, "equal"), (900, 40, "inf"), (800, 300, "zeros"),
              (4200, 600, "dups"), (1000, 77, "negative"))
BENCH_SIZES = ((1 << 26, 50), (1 << 26, 2048))  # 268 MB of x: 4.5x the 60 MB L2
BOUND = "memory"


def make_inputs(n, seed: int = 0):
    """n: an int (normal logits, k = min(n, 50)) or (n, k) or (n, k, case), case one of "normal",
    "equal", "inf", "zeros", "dups", "negative" (see HARD_CASES). Returns (x, k)."""
    if isinstance(n, int):
        n, k, case = n, min(n, 50), "normal"
    elif len(n) == 2:
        (n, k), case = n, "normal"
    else:
        n, k, case = n
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.standard_normal(n)).astype(np.float32)  # logits-like: a bulk and a thin top tail
    if case == "equal":
        x[:] = np.float32(1.25)
    elif case == "inf":
        r = rng.random(n)
        x[r < 0.05] = np.inf
        x[r > 0.95] = -np.inf
    elif case == "zeros":
        r = rng.random(n)
        x = np.where(r < 0.3, np.float32(0.0), np.where(r < 0.6, np.float32(-0.0), x)).astype(np.float32)
        x[r > 0.9] = -np.abs(x[r > 0.9])
    elif case == "dups":
        # The k-th largest value repeated across the threshold: about k/2 values above, 3k copies of it.
        order = np.argsort(-x, kind="stable")
        kth = x[order[min(k // 2, n - 1)]]
        copies = rng.choice(n, size=min(n, 3 * k), replace=False)
        x[copies] = kth
    elif case == "negative":
        x = -np.abs(x) - np.float32(0.5)
    elif case != "normal":
        raise ValueError(f"make_inputs: unknown case {case!r}")
    return x, k


def reference_indices(x, k):
    """The k indices of the largest values, largest first, ties to the smallest index (-0.0 == +0.0).
    Only the candidates are sorted: every value at least the k-th largest, which ``np.partition``
    finds in linear time (the whole array stably sorted took 14 s at the benchmark's 2^26)."""
    if not 0 < k < x.size:
        return np.argsort(-x, kind="stable")[:k].astype(np.int32)
    kth = np.partition(x, x.size - k)[x.size - k]
    candidates = np.flatnonzero(x >= kth)  # in index order: the stable sort keeps ties that way
    return candidates[np.argsort(-x[candidates], kind="stable")[:k]].astype(np.int32)


def reference(x, k):
    return x[reference_indices(x, k)]


def traffic(x, k):
    """(minimum bytes moved through device memory, operations): read x once, write the k values; this
    day's radix select reads x five times (see the docstring)."""
    return 4 * x.size + 4 * k, 0


# --- keys -----------------------------------------------------------------------------------------------


@cuda.jit(device=True)
def float_to_ordered_uint32(bits):
    """bits: a float32's bit pattern (uint32) -> a uint32 in the same order as the floats. Positive
    (sign bit clear): set the sign bit (above every negative, their integer order is already the float
    order). Negative: flip all the bits (a larger magnitude, a larger integer, must become a smaller key;
    the sign bit clears too). -0.0 -> 0x7FFFFFFF < +0.0 -> 0x80000000."""
    # EXERCISE: negative (sign bit set): ~bits; else bits | SIGN, each as a uint32
    if bits & uint32(SIGN):
        return uint32(~bits)  # Numba types ~uint32 and uint32 | uint32 as uint64: cast back
    return uint32(bits | uint32(SIGN))


@cuda.jit(device=True)
def descending_key(bits):
    """The select's key: -0.0 folded onto +0.0 (they compare equal), mapped in order, inverted, so the
    largest float has the smallest key."""
    if bits == uint32(SIGN):
        bits = uint32(0)
    return uint32(~float_to_ordered_uint32(bits))


# --- v1: the full sort ----------------------------------------------------------------------------------


@cuda.jit
def keys_kernel(xbits, keys, idx):  # xbits (n,) uint32 view of x; keys (n,) uint32; idx (n,) int32
    """keys[i] = descending_key(xbits[i]); idx[i] = i (one thread an element, guard i < n)."""
    # EXERCISE: i = cuda.grid(1); guard; the key and the index
    i = cuda.grid(1)
    if i < xbits.size:
        keys[i] = descending_key(xbits[i])
        idx[i] = i


@cuda.jit
def take_kernel(x, idx, out_vals, out_idx):  # idx (>= k,) sorted indices; out_vals (k,), out_idx (k,)
    """out_idx[j] = idx[j]; out_vals[j] = x[idx[j]] for j < k = out_vals.size."""
    j = cuda.grid(1)
    if j < out_vals.size:
        i = idx[j]
        out_idx[j] = i
        out_vals[j] = x[i]  # scattered 4-byte reads, but only k of them


# --- v2: radix select -----------------------------------------------------------------------------------


@cuda.jit
def init_kernel(state, k):  # state (4,) uint32
    """state = [prefix 0, r = k, 0, 0]: no digit known yet, all k still to find."""
    if cuda.grid(1) == 0:
        state[0] = uint32(0)
        state[1] = uint32(k)
        state[2] = uint32(0)
        state[3] = uint32(0)


@cuda.jit
def digit_hist_kernel(xbits, state, shift, himask, hist):  # hist (RADIX,) int32, zeroed
    """One pass of the select: hist[d] += the keys in play whose digit (key >> shift) & 255 is d.

    In play: (key & himask) == state[0] (the higher digits equal the prefix found so far; himask = 0 in
    the first pass: every key). key = descending_key(xbits[i]).

    Day 22's replicated bins: bins = cuda.shared.array(SLOTS, int32), bin d's copy for lane l at
    d * COPIES + l (a warp's 32 atomics hit 32 banks, however many lanes share a digit); zero them,
    cuda.syncthreads(); a grid-stride loop, UNROLL loads in flight a trip (xbits[i + u * stride]) before
    any is counted; cuda.syncthreads(); thread t (= digit t) sums its 32 copies (copy (c + t) % 32 at
    step c: conflict-free) and adds the sum to hist[t] with one global atomic (skipped when 0).
    """
    # EXERCISE: zero the replicated bins, barrier, grid-stride: load UNROLL keys, count those in play, barrier, merge
    bins = cuda.shared.array(SLOTS, int32)  # (RADIX, COPIES) flattened
    t = cuda.threadIdx.x
    for j in range(t, SLOTS, THREADS):
        bins[j] = 0
    cuda.syncthreads()  # every copy zeroed before any lane counts into it
    prefix = state[0]  # one word every thread reads: an L1/L2 broadcast
    s = uint32(shift)
    hm = uint32(himask)
    lane = uint32(t & 31)
    n = xbits.size
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    vals = cuda.local.array(UNROLL, uint32)  # unrolled: registers
    while i < n:
        for u in range(UNROLL):
            p = i + u * stride
            vals[u] = xbits[p] if p < n else uint32(0)  # all UNROLL loads issued before the first atomic
        for u in range(UNROLL):
            if i + u * stride < n:
                key = descending_key(vals[u])
                if key & hm == prefix:
                    cuda.atomic.add(bins, ((key >> s) & uint32(0xFF)) * uint32(COPIES) + lane, 1)
        i += UNROLL * stride
    cuda.syncthreads()  # all of the block's counts in before the merge reads them
    total = int32(0)
    for c in range(COPIES):
        total += bins[t * COPIES + ((c + t) & (COPIES - 1))]  # rotated: the warp's 32 reads, 32 banks
    if total > 0:  # most bins of a late pass are empty: no L2 round trip for a zero
        cuda.atomic.add(hist, t, total)


@cuda.jit
def select_digit_kernel(hist, state, shift):  # one block of THREADS = RADIX threads
    """Find the digit of the k-th smallest key in play: thread d holds c = hist[d]; the inclusive scan
    of the counts over d (warp_inclusive_scan, then the warp totals through shared memory) gives incl,
    excl = incl - c. With r = state[1] (keys still to find), the one d with excl < r <= incl adds its
    digit to the prefix (state[0] |= d << shift), sets state[1] = r - excl (the keys below its digit are
    all taken), state[2] = c (the keys in play with this digit) and state[3] += excl (the keys taken so
    far, all strictly below the threshold). Read state before the barrier, write it after."""
    # EXERCISE: read r; scan the 256 counts (shuffles, warp totals); barrier; the digit holding r updates state
    wsum = cuda.shared.array(WARPS, int32)  # (THREADS // 32,) the warps' totals
    t = cuda.threadIdx.x
    lane = t & 31
    w = t >> 5
    r = int32(state[1])
    c = hist[t]
    incl = warp_inclusive_scan(c, lane)  # day 31's shuffle scan
    if lane == 31:
        wsum[w] = incl
    cuda.syncthreads()  # the warp totals are in, and every thread has read state
    for ww in range(THREADS // 32):
        if ww < w:
            incl += wsum[ww]
    excl = incl - c
    if excl < r and r <= incl:  # exactly one digit: the counts are positive where the range is not empty
        state[0] = state[0] | (uint32(t) << uint32(shift))
        state[1] = uint32(r - excl)
        state[2] = uint32(c)
        state[3] = state[3] + uint32(excl)


@cuda.jit(device=True)
def look_back_pair(status, tile, lane):
    """Day 31's decoupled look-back, for a status word carrying two counts: (less << 33) | (equal << 2)
    | flag (each count < 2^31, so packed words add field by field). Called by warp 0 of tile > 0; returns
    in lane 0 the packed counts (flags cleared) of tiles 0..tile-1."""
    # EXERCISE: windows of 32: read_status spinning while 0; ballot of PREFIX; sum the words up to the nearest one
    ex_less = int32(0)
    ex_eq = int32(0)
    w = tile - 1
    while True:
        j = w - lane
        word = uint64(PREFIX)  # before tile 0 (never reached: tile 0 publishes a PREFIX)
        if j >= 0:
            word = read_status(status, j)  # day 29's: a plain load could be hoisted out of the spin
            while word == 0:
                word = read_status(status, j)
        done = uint32(cuda.ballot_sync(FULL, (word & uint64(3)) == uint64(PREFIX)))
        lv = int32(word >> uint64(33))  # the two counts, unpacked: day 17's int32 shuffle sum for each
        ev = int32((word >> uint64(2)) & uint64(0x7FFFFFFF))
        if done & cuda.lanemask_lt() != 0:
            lv = int32(0)  # beyond the nearest prefix: already inside it
            ev = int32(0)
        ex_less += warp_sum(lv)
        ex_eq += warp_sum(ev)
        if done != 0:
            return (uint64(ex_less) << uint64(33)) | (uint64(ex_eq) << uint64(2))
        w -= 32


@cuda.jit
def gather_kernel(xbits, state, k, status, out_keys, out_idx):  # status (tiles + 1,) uint64 zeroed
    """Day 31's one-pass compaction, with two kinds of kept element: T = state[0] (the threshold key),
    r = state[1] (the keys == T to take), less = k - r (the keys < T: all taken). A tile of TILE = 4096
    elements a block, by ticket (status[tiles]); thread t holds elements tile * TILE + row * 256 + t.

    1. Per row: lm = ballot(key < T), em = ballot(key == T) (valid elements only); lane 0 stores
       popc(lm) and popc(em) in two shared count arrays (slot row * WARPS + warp).
    2. Barrier; warp 0 scans both with day 31's scan_counts (exclusive offsets in the tile, the totals
       back); lane 0 publishes (less_total << 33 | eq_total << 2 | flag): PREFIX for tile 0, AGGREGATE for
       the others, which then look back (look_back_pair) and publish PREFIX (exclusive + aggregate).
    3. Barrier; a key < T goes to slot exclusive_less + its offset + popc(lm & lanemask_lt); a key == T
       has rank e = exclusive_eq + its offset + popc(em & lanemask_lt) among the equal keys in index
       order, and only e < r go, to slot less + e. out_keys gets the key, out_idx the index: k pairs, each
       kind in index order.
    """
    less_cnt = cuda.shared.array(ROW_SLOTS, int32)
    eq_cnt = cuda.shared.array(ROW_SLOTS, int32)
    tile_sm = cuda.shared.array(3, int32)  # [0]: the ticket; [1]: keys < T before the tile; [2]: == T before it
    t = cuda.threadIdx.x
    lane = t & 31
    warp = t >> 5
    tiles = status.size - 1
    if t == 0:
        tile_sm[0] = int32(cuda.atomic.add(status, tiles, uint64(1)))
    cuda.syncthreads()
    tile = tile_sm[0]
    base = tile * TILE
    n = xbits.size
    thr = state[0]
    r = int32(state[1])
    less = k - r
    keys = cuda.local.array(ITEMS, uint32)  # unrolled: registers
    lms = cuda.local.array(ITEMS, uint32)
    ems = cuda.local.array(ITEMS, uint32)
    for row in range(ITEMS):
        p = base + row * GATHER_THREADS + t
        keys[row] = descending_key(xbits[p]) if p < n else uint32(LOW)
    # EXERCISE: ballots and counts; barrier; warp 0 scans both, publishes, looks back; barrier; write the kept pairs
    for row in range(ITEMS):
        valid = base + row * GATHER_THREADS + t < n
        lm = uint32(cuda.ballot_sync(FULL, valid and keys[row] < thr))
        em = uint32(cuda.ballot_sync(FULL, valid and keys[row] == thr))
        lms[row] = lm
        ems[row] = em
        if lane == 0:
            less_cnt[row * WARPS + warp] = cuda.popc(lm)
            eq_cnt[row * WARPS + warp] = cuda.popc(em)
    cuda.syncthreads()
    if warp == 0:
        la = scan_counts(less_cnt, lane)  # day 31: exclusive offsets in place, the tile's total back
        ea = scan_counts(eq_cnt, lane)
        agg = (uint64(la) << uint64(33)) | (uint64(ea) << uint64(2))
        if tile == 0:
            if lane == 0:
                cuda.atomic.exch(status, 0, agg | uint64(PREFIX))
                tile_sm[1] = 0
                tile_sm[2] = 0
        else:
            if lane == 0:  # published before looking back: a successor never waits on our look-back
                cuda.atomic.exch(status, tile, agg | uint64(AGGREGATE))
            excl = look_back_pair(status, tile, lane)
            if lane == 0:
                cuda.atomic.exch(status, tile, (excl + agg) | uint64(PREFIX))
                tile_sm[1] = int32(excl >> uint64(33))
                tile_sm[2] = int32((excl >> uint64(2)) & uint64(0x7FFFFFFF))
    cuda.syncthreads()  # the offsets in shared memory and the tile's exclusive counts are in
    below = cuda.lanemask_lt()
    me = uint32(1) << uint32(lane)
    for row in range(ITEMS):
        slot = row * WARPS + warp
        if lms[row] & me:
            dst = tile_sm[1] + less_cnt[slot] + cuda.popc(lms[row] & below)
            out_keys[dst] = keys[row]
            out_idx[dst] = base + row * GATHER_THREADS + t
        if ems[row] & me:
            e = tile_sm[2] + eq_cnt[slot] + cuda.popc(ems[row] & below)
            if e < r:  # only the r smallest indices among the keys equal to the threshold
                out_keys[less + e] = keys[row]
                out_idx[less + e] = base + row * GATHER_THREADS + t
    # END EXERCISE


@cuda.jit
def small_sort_kernel(x, keys, idx, out_vals, out_idx):  # keys, idx (k,), k <= SMALL_K; one block
    """Sort the k survivors by the pair (key, index) ascending in one block: pairs packed as
    uint64(key) << 32 | index in a shared array of P = the next power of two >= k (padded with the
    largest uint64), a bitonic network (stage size 2..P, distance size/2..1, a barrier after each step;
    thread t does the compare-exchanges q = t, t + blockDim, ... of the P / 2), then out_idx[j] = the
    index, out_vals[j] = x[index] for j < k. The pairs are unique (the index), so any sorting network
    gives the one answer."""
    # EXERCISE: pack the pairs (pad past k), barrier; the bitonic steps with a barrier each; unpack
    buf = cuda.shared.array(SMALL_K, uint64)  # 16 KB: the survivors, packed
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    k = keys.size
    size_p = 1
    while size_p < k:
        size_p *= 2
    for j in range(t, size_p, nt):
        buf[j] = (uint64(keys[j]) << uint64(32)) | uint64(idx[j]) if j < k else ~uint64(0)
    cuda.syncthreads()
    size = 2
    while size <= size_p:
        d = size // 2
        while d >= 1:
            for q in range(t, size_p // 2, nt):
                i = 2 * q - (q & (d - 1))  # the lower element of pair q at distance d
                a = buf[i]
                b = buf[i + d]
                up = (i & size) == 0  # this run of the stage sorts ascending
                if (a > b) == up:
                    buf[i] = b
                    buf[i + d] = a
            cuda.syncthreads()  # the next step reads what other threads wrote
            d //= 2
        size *= 2
    for j in range(t, k, nt):
        i = int32(buf[j] & uint64(0xFFFFFFFF))
        out_idx[j] = i
        out_vals[j] = x[i]
    # END EXERCISE


_SEL = "uint32[::1], uint32[::1], int64, int64, int32[::1]"
KERNELS = {
    "naive": (keys_kernel, "void(uint32[::1], uint32[::1], int32[::1])"),
    "naive.take": (take_kernel, "void(float32[::1], int32[::1], float32[::1], int32[::1])"),
    "optimized": (digit_hist_kernel, f"void({_SEL})"),
    "optimized.init": (init_kernel, "void(uint32[::1], int64)"),
    "optimized.zero_hist": (zero_kernel, "void(int32[::1])"),
    "optimized.zero_status": (zero_kernel, "void(uint64[::1])"),
    "optimized.select": (select_digit_kernel, "void(int32[::1], uint32[::1], int64)"),
    "optimized.gather": (gather_kernel,
                         "void(uint32[::1], uint32[::1], int64, uint64[::1], uint32[::1], int32[::1])"),
    "optimized.sort": (small_sort_kernel,
                       "void(float32[::1], uint32[::1], int32[::1], float32[::1], int32[::1])"),
}


def _check(x, k):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    n = x.shape[0]
    if n < 1:
        raise ValueError(f"x: expected at least one element, got shape {tuple(x.shape)}")
    if n >= 2**31 - TILE:
        raise ValueError(f"x: expected fewer than 2^31 - {TILE} elements (int32 indices), got {n}")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k: expected an integer, got {type(k).__name__}")
    if not 1 <= k <= n:
        raise ValueError(f"k: expected 1 <= k <= n = {n}, got {k}")
    return int(k)


def _naive(d_x, k):
    n = d_x.size
    keys = launch.empty((n,), np.uint32)
    idx = launch.empty((n,), np.int32)
    keys_kernel[launch.blocks(n, THREADS), THREADS](d_x.view(np.uint32), keys, idx)
    _, s_idx = _radix_sort(keys, idx, WITH_VALUES)  # day 34: stable, so equal keys keep index order
    out_vals = launch.empty((k,), np.float32)
    out_idx = launch.empty((k,), np.int32)
    take_kernel[launch.blocks(k, THREADS), THREADS](d_x, s_idx, out_vals, out_idx)
    return out_vals, out_idx


def _optimized(d_x, k):
    n = d_x.size
    xbits = d_x.view(np.uint32)  # the floats' bits, no copy
    state = launch.empty((4,), np.uint32)
    init_kernel[1, 32](state, k)
    hist = cuda.device_array(PASSES * RADIX, dtype=np.int32)  # one row of 256 counts a pass
    zero_kernel[launch.blocks(hist.size, THREADS), THREADS](hist)
    grid = launch.grid_stride_blocks(n, THREADS, blocks_per_sm=4)  # 4 x 32 KB of bins an SM
    for p in range(PASSES):
        shift = 32 - DIGIT_BITS * (p + 1)  # 24, 16, 8, 0: from the top
        himask = (FULL << (shift + DIGIT_BITS)) & FULL if p > 0 else 0
        row = hist[p * RADIX:(p + 1) * RADIX]
        digit_hist_kernel[grid, THREADS](xbits, state, shift, himask, row)
        select_digit_kernel[1, THREADS](row, state, shift)
    tiles = math.ceil(n / TILE)
    status = cuda.device_array(tiles + 1, dtype=np.uint64)  # a word a tile, then the ticket counter
    zero_kernel[launch.blocks(tiles + 1, THREADS), THREADS](status)
    keys = launch.empty((k,), np.uint32)
    idx = launch.empty((k,), np.int32)
    gather_kernel[tiles, GATHER_THREADS](xbits, state, k, status, keys, idx)
    out_vals = launch.empty((k,), np.float32)
    out_idx = launch.empty((k,), np.int32)
    if k <= SMALL_K:
        threads = min(SORT_THREADS, max(32, 1 << max(0, (k - 1).bit_length() - 1)))  # P / 2, a warp at least
        small_sort_kernel[1, threads](d_x, keys, idx, out_vals, out_idx)
    else:
        # The gather wrote each kind in index order, the keys < T before the keys == T: a stable sort by
        # key alone leaves equal keys in index order.
        _, s_idx = _radix_sort(keys, idx, WITH_VALUES)
        take_kernel[launch.blocks(k, THREADS), THREADS](d_x, s_idx, out_vals, out_idx)
    return out_vals, out_idx


def _run(version, x, k):
    if version not in VERSIONS:
        raise ValueError(f"version: expected one of {VERSIONS}, got {version!r}")
    k = _check(x, k)
    (d_x,) = launch.to_device(x)
    return (_optimized if version == "optimized" else _naive)(d_x, k)


def naive(x, k):
    vals, _ = _run("naive", x, k)
    return launch.result(vals, x)


def optimized(x, k):
    vals, _ = _run("optimized", x, k)
    return launch.result(vals, x)


def topk_indices(x, k, version="optimized"):
    """The int32 indices of the k largest values, largest first, ties to the smallest index."""
    _, idx = _run(version, x, k)
    return launch.result(idx, x)


def library(x, k):
    """No top-k in CuPy: cupy.sort (CUB's radix sort of all n floats), the last k, reversed. (cupy's
    partition and argpartition sort the whole array too.)"""
    import cupy

    return cupy.sort(cupy.asarray(x))[-k:][::-1]
