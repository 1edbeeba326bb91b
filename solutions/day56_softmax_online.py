"""Day 56: softmax I, passes over memory -- out[r, :] = exp(x[r, :] - max_r) / sum_k exp(x[r, k] - max_r),
x float32 (rows, cols), out float32 (rows, cols), along the last axis (torch.softmax(x, dim=-1)).

Both versions give a block of 256 threads one row at a time (block-stride over the rows, a grid sized
to the GPU) and fold the block with day 25's pattern: shuffles in each warp, one slot a warp in shared
memory, one barrier, the slots folded again.

v1 naive      three passes over the row: the row max (block max), the sum of exp(x - max) (block sum),
              then out = exp(x - max) / sum. The row is read three times from global memory.
v2 online     the online softmax (Milakov & Gimelshein 2018): ONE read pass keeping a running max m
              and a running sum s rescaled whenever the max grows, s = s exp(m_old - m_new) +
              sum exp(x - m_new), eight floats a trip as two 16-byte loads; the block's 256 (m, s)
              pairs merged with the (m, s) rule by shuffles and shared memory; then ONE write pass
              (read x again, 16-byte stores of exp(x - m) / s). Two reads and a write instead of three
              and a write.
v3 optimized  the online softmax with the row held in registers: rows on the 16-byte grid of up to
              HELD_COLS = 32768 floats, as many warps a row as hold it at HELD_FLOATS = 32 floats a thread
              (4 at 4096, two rows a block; 32 at 32768, one row a block of 1024), the recurrence as one
              trip over each thread's part, the pairs merged as in v2 (one barrier: slots
              double-buffered by parity), the output written from the registers: ONE read and one write.
              Other rows: v2 (the version `online`).
library       torch.softmax(x, dim=-1) on the GPU (a row of the benchmark table where torch is installed).

Masked positions and large logits. Every exponent is taken against the row max, so logits of +-1e4 never
overflow. A -inf logit (a masked position) gives exactly 0. A row that is all -inf has no max to subtract
(-inf - -inf is NaN): here its output is all 0, not torch's NaN. A fully masked row (a padded query, a
sequence with nothing to attend to yet) then contributes nothing downstream instead of spreading NaN into
every later sum of the batch; FlashAttention makes the same choice. The rule that makes it work in every
pass and merge: subtract max_or_zero(m) (0 when m is -inf), so exp(-inf - 0) = 0 and the sum is 0, and
multiply by 1/s only when s > 0. +inf logits are outside the interface (NaN, as torch).

Napkin math (H200, device copy ~4.2 TB/s read + write). Per element: 4 bytes read and 4 written at the
least (traffic(): what the benchmark's GB/s and % of copy count), ~3 exp-adds.
  naive      3 reads + 1 write = 16 bytes an element through L1/L2, DRAM sees 8 to 16 of them
  online     2 reads + 1 write = 12 bytes an element through L1/L2, DRAM sees 8 to 12 of them
Whether a second read of a row comes from DRAM depends on where the row still is. A row of 4096 floats
(16 KB) read by one block is re-read microseconds later: ~1056 resident blocks x 16 KB = 17 MB, well
inside the 60 MB L2, so both versions move ~8 bytes an element through DRAM and the extra passes cost
instructions and L2 bandwidth, not DRAM time. A vocabulary row of 32768 floats (128 KB): 1056 resident
blocks x 128 KB = 135 MB, twice the L2, so the naive version's later passes partly come from DRAM again;
the online version's second read is the row it has just streamed, the most recent 128 KB its block
touched, and has the better chance of an L2 hit. The bound is the copy rate on 8 bytes an element:
(4096, 32768) and (32768, 4096) are 512 MB in + 512 MB out, ~0.25 ms each; a second read from DRAM
would make it ~0.38 ms (67 % of copy).
Target: the optimized version >= 90 % of the copy rate (on its 8 bytes an element) and faster than
torch.softmax (60 % of copy at 16384 x 4096 in the guide's measurement). v3 moves the 8 bytes: ~0.25 ms at
both shapes at the copy rate, 0.28 ms at 90 % (not measured yet: H200 re-measure). Measured on the H200 for
the online kernel (then `optimized`; device copy 4226 GB/s in the same run): at (4096, 32768) 437.2 us,
2,456 GB/s, 58.1 % of copy, 2.03x naive, tied
with torch.softmax (428.9 us, 59.2 %); at (32768, 4096) 346.3 us, 3,101 GB/s, 73.5 %, 1.58x naive, 1.52x
faster than torch (526.5 us, 48.3 %). The 90 % target is missed at both: the % counts the 8 bytes of the
minimum, the kernel moves 12. With the second read from DRAM the ceiling is 67 %; 58.1 % is 87 % of copy
on 12 bytes (128 KB rows: as if the second read came from DRAM), and 73.5 % is above that ceiling
(16 KB rows: part of it hits L2). Day 57 keeps the row in registers so the second read disappears: 282.7 us,
89.9 % of copy, at (4096, 32768).
"""

import functools
import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch, wide
from numba import float32, int64
from solutions.day25_reduction_last_warp import FULL_MASK, THREADS, WARP, WARPS, warp_sum
from solutions.day26_reduction_grid_stride import _address

TITLE = "Softmax I: passes over memory"
MEMORY_SPACE = "global + register"
VERSIONS = ("naive", "online", "optimized")
# (rows, cols): one element; a row shorter than a warp; a block -1 and +1 (odd: no row starts 16-byte
# aligned but the first); a multiple of 4 (every row aligned: the wide loads alone); a prime; a long
# row, 16 trips of the optimized loop.
# optimized's held kernel: 1024 (one warp a row, 8 rows a block), (9, 2048) (2 warps a row, 4 rows a
# block: more trips than one and rows past the end), 4100 (8 warps, one group short of a class).
TEST_SIZES = ((1, 1), (5, 3), (3, 255), (2, 257), (3, 1024), (2, 1031), (1, 4097), (9, 2048), (2, 4100))
# A vocabulary's rows (128 KB each) and attention scores' rows (16 KB): 512 MB each, ~9x the L2.
BENCH_SIZES = ((4096, 32768), (32768, 4096))
BOUND = "memory"
RTOL = 1e-4
VEC = wide.WIDTH  # floats in one 16-byte load
VECS_PER_TRIP = 2  # two 16-byte loads a thread a trip: 1024 threads an SM x 32 B = 32 KB in flight
BLOCKS_PER_SM = 4  # 4 x 256 threads resident per SM at up to 64 registers a thread: one wave
NEG_INF = float32(-np.inf)
# v3 (optimized): rows on the 16-byte grid of up to HELD_COLS floats are held in registers, at most
# HELD_FLOATS floats a thread (32: 4 warps a row at 4096, 32 warps = 1024 threads at 32768) and blocks of
# at least BLOCK_THREADS threads (several rows a block for short rows). Longer rows, or rows off the grid:
# the online kernel (v2).
HELD_COLS = 32768
HELD_FLOATS = 32
BLOCK_THREADS = 256
# Threads an SM the register cap is set for: 768 = 3 blocks of 256 at <= 85 registers a thread (the 4096
# class takes 96 unbounded: 2 blocks, 4 rows an SM); 1024-thread blocks get 64 either way.
HELD_SM_THREADS = 768
HELD_GROUPS = (1, 2, 4, 8, 16)  # 16-byte groups a thread may hold (a kernel per class)


def make_inputs(n, seed: int = 0):
    """Random logits (rows, cols): rows of very different scales (softmax of a row with spread 0.5 is
    nearly flat, of spread 1e4 nearly one-hot, so a max or sum taken from the wrong row shows) and about
    one row in four masked: -inf at random positions, one element always kept (no all -inf rows here:
    torch's row would be NaN; those are the grader's hard inputs)."""
    rows, cols = n
    rng = np.random.default_rng(seed)
    scale = np.float32(10.0) ** rng.integers(-1, 5, size=(rows, 1)).astype(np.float32)  # 0.1 .. 1e4
    x = rng.standard_normal((rows, cols), dtype=np.float32) * scale + rng.standard_normal((rows, 1)).astype(
        np.float32) * np.float32(3.0)
    x = np.clip(x, -1e4, 1e4).astype(np.float32)
    masked = rng.random(rows) < 0.25
    mask = (rng.random((rows, cols)) < 0.3) & masked[:, None]
    mask[np.arange(rows), rng.integers(0, cols, size=rows)] = False  # a finite logit in every row
    x[mask] = -np.inf
    return (x,)


def hard_inputs(kind: str, n):
    """(x,) of shape n = (rows, cols) for one of HARD_KINDS (the graders' hard inputs; day 57 uses them):
    "large" logits of +-1e4, "one-finite" rows all -inf but one element, "all-masked" rows all -inf,
    "constant" rows (every output 1 / cols), "ascending" rows (a ramp: every thread's running max grows
    at every step, so a running sum that is not rescaled shows)."""
    rows, cols = n
    rng = np.random.default_rng(cols * 7919 + rows)
    if kind == "large":
        x = rng.choice(np.array([-1e4, 1e4, 9999.0, -9999.5, 0.0], np.float32), size=(rows, cols))
    elif kind == "one-finite":
        x = np.full((rows, cols), -np.inf, np.float32)
        x[np.arange(rows), rng.integers(0, cols, size=rows)] = rng.standard_normal(rows).astype(np.float32) * 1e3
    elif kind == "all-masked":
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        x[::2] = -np.inf  # every other row fully masked, next to ordinary rows
    elif kind == "ascending":
        x = np.repeat(np.linspace(-30.0, 30.0, cols, dtype=np.float32)[None, :], rows, axis=0)
    elif kind == "constant":
        x = np.repeat(rng.standard_normal((rows, 1)).astype(np.float32) * 1e4, cols, axis=1)
    else:
        raise ValueError(f"kind: expected one of {HARD_KINDS}, got {kind!r}")
    return (np.ascontiguousarray(x, dtype=np.float32),)


HARD_KINDS = ("large", "one-finite", "all-masked", "constant", "ascending")


def reference(x):
    """Softmax along the last axis in float64; a row that is all -inf gives all 0 (see the docstring)."""
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return (e / np.where(s > 0, s, 1.0)).astype(np.float32)


def traffic(x):
    """(minimum bytes through device memory, FLOPs): x read once, out written once; ~5 FLOPs an element
    (a max, a subtraction, an exp counted as one, an add, a multiply)."""
    return 2 * x.size * 4, 5 * x.size


def check_input(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")


# ---- the pieces both versions share ----------------------------------------------------------------

@cuda.jit(device=True)
def max_or_zero(m):
    """The value exponents are taken against: m, or 0 when m is -inf (nothing seen yet, or a fully
    masked row), so that exp(-inf - 0) = 0 instead of exp(-inf - -inf) = NaN."""
    return m if m != NEG_INF else float32(0.0)


@cuda.jit(device=True)
def merge(m1, s1, m2, s2):
    """The (m, s) merge rule: two partial softmax normalisers (running max m, sum s of exp(x - m) over
    disjoint parts of a row) combine into the pair of their union,
        m = max(m1, m2),  s = s1 exp(m1 - m) + s2 exp(m2 - m),
    each sum rescaled to the new max. With m = -inf (a part that saw only -inf, s = 0) the exponent must
    be taken against max_or_zero(m): exp(-inf - -inf) would be NaN and poison the sum."""
    # EXERCISE: m = max(m1, m2); rescale both sums to it through max_or_zero; return (m, s)
    m = max(m1, m2)
    base = max_or_zero(m)
    return m, s1 * math.exp(m1 - base) + s2 * math.exp(m2 - base)


@cuda.jit(device=True)
def warp_max(v):
    """The max of v over the 32 lanes; lane 0 ends with it (day 25's warp_sum with max for +)."""
    offset = WARP // 2
    while offset > 0:
        v = max(v, cuda.shfl_down_sync(FULL_MASK, v, offset))
        offset //= 2
    return v


@cuda.jit(device=True)
def block_max(v, slots):
    """The max of v over the block's 256 threads, returned to every thread. slots: WARPS floats of
    shared memory. Each warp folds by shuffle; lane 0 leaves its warp's max in a slot; after one barrier
    every warp folds the WARPS slots itself (8 broadcast reads), so no second broadcast is needed; the
    barrier at the end frees the slots for the next reduction."""
    lane = cuda.threadIdx.x % WARP
    v = warp_max(v)
    if lane == 0:
        slots[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    v = warp_max(slots[lane] if lane < WARPS else NEG_INF)
    v = cuda.shfl_sync(FULL_MASK, v, 0)
    cuda.syncthreads()  # WAR: every warp has read the slots before the next reduction writes them
    return v


@cuda.jit(device=True)
def block_sum(v, slots):
    """The sum of v over the block, returned to every thread: block_max's shape with day 25's warp_sum."""
    lane = cuda.threadIdx.x % WARP
    v = warp_sum(v)
    if lane == 0:
        slots[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    v = warp_sum(slots[lane] if lane < WARPS else float32(0.0))
    v = cuda.shfl_sync(FULL_MASK, v, 0)
    cuda.syncthreads()
    return v


@cuda.jit(device=True)
def warp_merge(m, s):
    """The (m, s) pairs of the 32 lanes merged; lane 0 ends with the warp's pair. Both halves of the pair
    travel by shuffle (offsets 16 .. 1), each step one merge."""
    # EXERCISE: for offset 16, 8, 4, 2, 1: shuffle m and s down by offset and merge them into (m, s)
    offset = WARP // 2
    while offset > 0:
        m2 = cuda.shfl_down_sync(FULL_MASK, m, offset)
        s2 = cuda.shfl_down_sync(FULL_MASK, s, offset)
        m, s = merge(m, s, m2, s2)
        offset //= 2
    return m, s


@cuda.jit(device=True)
def block_merge(m, s, slot_m, slot_s):
    """The block's 256 (m, s) pairs merged, returned to every thread: warp_merge in each warp, lane 0's
    pair to shared slots (WARPS each), one barrier, every warp merges the slots (empty lanes (-inf, 0)),
    the result broadcast from lane 0, and a barrier before the slots are reused."""
    lane = cuda.threadIdx.x % WARP
    m, s = warp_merge(m, s)
    if lane == 0:
        slot_m[cuda.threadIdx.x // WARP] = m
        slot_s[cuda.threadIdx.x // WARP] = s
    cuda.syncthreads()
    if lane < WARPS:
        m, s = slot_m[lane], slot_s[lane]
    else:
        m, s = NEG_INF, float32(0.0)
    m, s = warp_merge(m, s)
    m = cuda.shfl_sync(FULL_MASK, m, 0)
    s = cuda.shfl_sync(FULL_MASK, s, 0)
    cuda.syncthreads()  # WAR: every warp has read the slots before the next row's merge writes them
    return m, s


# ---- v1: three passes -----------------------------------------------------------------------------

@cuda.jit
def softmax_three_pass_kernel(x, out):  # x (rows, cols), out (rows, cols)
    """Block-stride over the rows (r = blockIdx.x, then += gridDim.x), 256 threads a row; thread t takes
    the row's elements t, t + 256, ... (each step of the block reads 256 consecutive floats: coalesced).

    For each row, three passes, each reading the row from global memory:
    1. mx = the row max (each thread's max of its elements, then block_max(v, slots));
    2. s = the sum of exp(x - base) with base = max_or_zero(mx) (then block_sum);
    3. out = exp(x - base) * inv with inv = 1 / s, or 0 when s is 0 (a row all -inf gives 0s).
    Every thread reaches every barrier (the same rows for the whole block).
    """
    slots = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    cols = x.shape[1]
    r = cuda.blockIdx.x
    # EXERCISE: for each of the block's rows: a max pass, a sum-of-exp pass, a write pass (block_max, block_sum)
    while r < x.shape[0]:
        xr = x[r]
        v = NEG_INF
        k = t
        while k < cols:  # pass 1: read the row for its max
            v = max(v, xr[k])
            k += THREADS
        base = max_or_zero(block_max(v, slots))
        v = float32(0.0)
        k = t
        while k < cols:  # pass 2: read it again for the sum
            v += math.exp(xr[k] - base)
            k += THREADS
        s = block_sum(v, slots)
        inv = float32(1.0) / s if s > float32(0.0) else float32(0.0)
        k = t
        while k < cols:  # pass 3: read it a third time to write
            out[r, k] = math.exp(xr[k] - base) * inv
            k += THREADS
        r += cuda.gridDim.x


# ---- v2: the online softmax -----------------------------------------------------------------------

@cuda.jit(device=True)
def row_layout(r, cols, shift):
    """Where row r's 16-byte-aligned body lies in the flat array: (start, head, vecs). start = r * cols;
    the first `head` (0..3) elements come before the first 16-byte boundary (shift: the array's first
    element's position in its 16 bytes, 0..3), then `vecs` aligned groups of 4, then cols - head - 4 vecs
    (0..3) elements after them. A row of a multiple of 4 in an aligned array has head = 0 and no tail."""
    start = int64(r) * cols
    head = (VEC - (start + shift) % VEC) % VEC
    if head > cols:
        head = int64(cols)
    return start, head, (cols - head) // VEC


@cuda.jit
def softmax_online_kernel(xf, rows, cols, shift, outf):  # xf (rows * cols,) = x flat, outf the same
    """Block-stride over the rows as v1; x and out seen flat, so that each row's aligned body can be read
    with 16-byte loads (wide.load4 / wide.store4) whatever cols is (see row_layout).

    For each row, thread t keeps a running pair (m, s) = (-inf, 0) and reads the row ONCE:
    - trips over the body's groups of 4: groups g = t + 256 j, VECS_PER_TRIP of them loaded a trip (all
      loads first: 32 bytes in flight a thread), then m_new = max(m, the trip's 8 values) and
      s = s exp(m - b) + sum exp(v - b) with b = max_or_zero(m_new): the old sum rescaled to the new max;
    - the remaining groups one at a time, and the head and tail elements (threads t < head, t < tail)
      each as merge(m, s, v, 1);
    then (given) block_merge gives every thread the row's (m, s), and the write pass reads the row a
    second time and stores exp(v - max_or_zero(m)) * inv, inv = 1 / s or 0 when s is 0.
    """
    slot_m = cuda.shared.array(WARPS, float32)
    slot_s = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    while r < rows:
        start, head, vecs = row_layout(r, cols, shift)
        body = start + head
        tail = body + VEC * vecs
        m = NEG_INF
        s = float32(0.0)
        # EXERCISE: the read pass: trips of VECS_PER_TRIP 16-byte loads with the rescaled running sum; the rest
        g = int64(t)
        # Two independent 16-byte loads before any arithmetic: the memory system sees both at once.
        while g + THREADS < vecs:
            a0, a1, a2, a3 = wide.load4(xf, body + VEC * g)
            b0, b1, b2, b3 = wide.load4(xf, body + VEC * (g + THREADS))
            m_new = max(m, max(max(max(a0, a1), max(a2, a3)), max(max(b0, b1), max(b2, b3))))
            b = max_or_zero(m_new)
            # One exp rescales the old sum (1 when the max did not grow); eight are the new terms.
            ea = (math.exp(a0 - b) + math.exp(a1 - b)) + (math.exp(a2 - b) + math.exp(a3 - b))
            eb = (math.exp(b0 - b) + math.exp(b1 - b)) + (math.exp(b2 - b) + math.exp(b3 - b))
            s = s * math.exp(m - b) + (ea + eb)
            m = m_new
            g += VECS_PER_TRIP * THREADS
        while g < vecs:
            a0, a1, a2, a3 = wide.load4(xf, body + VEC * g)
            m_new = max(m, max(max(a0, a1), max(a2, a3)))
            b = max_or_zero(m_new)
            s = s * math.exp(m - b) + ((math.exp(a0 - b) + math.exp(a1 - b)) + (math.exp(a2 - b) + math.exp(a3 - b)))
            m = m_new
            g += THREADS
        if t < head:
            m, s = merge(m, s, xf[start + t], float32(1.0))
        if tail + t < start + cols:
            m, s = merge(m, s, xf[tail + t], float32(1.0))
        # END EXERCISE
        m, s = block_merge(m, s, slot_m, slot_s)
        b = max_or_zero(m)
        inv = float32(1.0) / s if s > float32(0.0) else float32(0.0)
        # The write pass: the row's second and last read (most likely from L2: this block just read it).
        g = int64(t)
        while g < vecs:
            a0, a1, a2, a3 = wide.load4(xf, body + VEC * g)
            wide.store4(outf, body + VEC * g, (math.exp(a0 - b) * inv, math.exp(a1 - b) * inv,
                                               math.exp(a2 - b) * inv, math.exp(a3 - b) * inv))
            g += THREADS
        if t < head:
            outf[start + t] = math.exp(xf[start + t] - b) * inv
        if tail + t < start + cols:
            outf[tail + t] = math.exp(xf[tail + t] - b) * inv
        r += cuda.gridDim.x


# ---- v3: the online softmax with the row held: one read -------------------------------------------
# The online kernel's second read is the price of not keeping what the first read brought in. A row of up
# to HELD_COLS floats fits the registers of the threads that share it: each thread keeps its part of the
# row (its groups i, i + row_threads, ... of 16 bytes), takes its own (m, s) over it as ONE trip of the
# online recurrence (m the max of its part; the values become exp(v - m) in place, s their sum), the
# pairs meet by the same (m, s) merge (shuffles in each warp, a slot a warp in shared memory, one
# barrier), and the output is written from the registers: each thread's exp(v - m) rescaled to the
# row's max by one exp(m - M). One read of x and one write, the minimum.

@functools.cache
def make_held_kernel(groups: int, row_warps: int, block_rows: int, full: bool = False):
    """The kernel for rows of up to row_warps * 32 * VEC * groups floats on the 16-byte grid: row_warps
    warps a row, block_rows rows a block, VEC * groups floats a thread (a compile-time constant, indexed
    only by unrolled loops: registers). full: every row fills the class exactly (no group past the row:
    the loads need no guard); otherwise each group is loaded only where it lies inside the row."""
    held = VEC * groups
    row_threads = WARP * row_warps  # threads sharing a row: the stride between a thread's groups
    threads = row_threads * block_rows
    # CUDA C's __launch_bounds__(threads, blocks an SM): the register cap that lets HELD_SM_THREADS threads
    # (at least one block) share an SM's 65536 registers
    bounds = {"launch_bounds": (threads, max(1, HELD_SM_THREADS // threads))} if DEVICE.kind != "sim" else {}

    @cuda.jit(**bounds)
    def softmax_held_kernel(xf, rows, cols, outf):  # xf (rows * cols,) = x flat, outf the same
        """Block b takes rows b * block_rows + q (q = threadIdx.x // row_threads; then += gridDim.x *
        block_rows). Thread i of its row's row_threads loads its groups c = VEC (i + row_threads j) into
        buf, all loads first, every one inside the row (a group past it loads the row's last group and
        holds -inf: no branch around a single load). (m, s) of its part as above; warp_merge in each warp;
        lane 0 to slot[p, q, w] (p the parity of the block's trip, w the warp within the row), ONE
        barrier, then every warp of the row merges the row_warps slots (lanes past them (-inf, 0)) and
        takes the row's (M, S) from lane 0. The slots alternate between trips, so a fast warp writing
        the next trip's pair never overwrites one a slow warp is still reading (the barrier of the trip
        between orders them). Every thread makes the same trips (the barrier needs all of them): a row
        past the end loads nothing, holds -inf and stores nothing."""
        slot_m = cuda.shared.array((2, block_rows, row_warps), float32)
        slot_s = cuda.shared.array((2, block_rows, row_warps), float32)
        buf = cuda.local.array(held, float32)  # registers
        t = cuda.threadIdx.x
        q = t // row_threads if block_rows > 1 else 0  # the block's row this thread works on
        i = t % row_threads if block_rows > 1 else t  # the thread's place among the row's threads
        lane = t % WARP
        p = 0
        first = cuda.blockIdx.x * block_rows
        while first < rows:  # the same trips for the whole block
            r = first + q
            start = int64(r) * cols
            live = block_rows == 1 or r < rows  # a row past the end: only where a block has several
            # EXERCISE: hold the groups (-inf past the row), the part's (m, s), the row's (M, S) via the slots, stores
            if full and live:
                # a row that fills the class exactly (cols = row_threads * VEC * groups: 4096, 32768):
                # every group inside the row, no branch between the loads, all in flight at once
                for j in range(groups):
                    c = VEC * (i + row_threads * j)
                    buf[VEC * j], buf[VEC * j + 1], buf[VEC * j + 2], buf[VEC * j + 3] = wide.load4(xf, start + c)
            else:
                for j in range(groups):
                    c = VEC * (i + row_threads * j)
                    if live and c < cols:  # a group lies inside the row or past it as a whole
                        buf[VEC * j], buf[VEC * j + 1], buf[VEC * j + 2], buf[VEC * j + 3] = wide.load4(xf, start + c)
                    else:
                        buf[VEC * j] = NEG_INF
                        buf[VEC * j + 1] = NEG_INF
                        buf[VEC * j + 2] = NEG_INF
                        buf[VEC * j + 3] = NEG_INF
            m = NEG_INF
            for k in range(held):
                m = max(m, buf[k])
            b = max_or_zero(m)
            s = float32(0.0)
            for k in range(held):
                buf[k] = math.exp(buf[k] - b)  # -inf (masked, or past the row) gives exactly 0
                s += buf[k]
            wm, ws = warp_merge(m, s)
            if lane == 0:
                slot_m[p, q, i // WARP] = wm
                slot_s[p, q, i // WARP] = ws
            cuda.syncthreads()
            if lane < row_warps:
                wm, ws = slot_m[p, q, lane], slot_s[p, q, lane]
            else:
                wm, ws = NEG_INF, float32(0.0)
            wm, ws = warp_merge(wm, ws)
            row_m = cuda.shfl_sync(FULL_MASK, wm, 0)
            row_s = cuda.shfl_sync(FULL_MASK, ws, 0)
            p ^= 1  # the next trip's pairs go to the other slots
            inv = float32(1.0) / row_s if row_s > float32(0.0) else float32(0.0)
            # exp(-inf) = 0 where the thread held only -inf; never exp(0 - M), which overflows at M = -1e4
            scale = math.exp(m - max_or_zero(row_m)) * inv
            if live:
                for j in range(groups):
                    c = VEC * (i + row_threads * j)
                    if c < cols:
                        wide.store4(outf, start + c, (buf[VEC * j] * scale, buf[VEC * j + 1] * scale,
                                                      buf[VEC * j + 2] * scale, buf[VEC * j + 3] * scale))
            # END EXERCISE
            first += cuda.gridDim.x * block_rows

    return softmax_held_kernel


def held_shape(cols: int) -> tuple[int, int, int]:
    """(groups, row_warps, block_rows) for a row of cols floats: the fewest warps (a power of 2, at most 32)
    whose threads hold it at HELD_FLOATS floats each, then the smallest class of groups that holds it;
    rows a block so that a block has BLOCK_THREADS threads (or one row of more)."""
    row_warps = 1
    while row_warps < WARP and row_warps * WARP * HELD_FLOATS < cols:
        row_warps *= 2
    groups = next(gr for gr in HELD_GROUPS if cols <= row_warps * WARP * VEC * gr)
    return groups, row_warps, max(1, BLOCK_THREADS // (row_warps * WARP))


_SIG_NAIVE = "void(float32[:, ::1], float32[:, ::1])"
_SIG_ONLINE = "void(float32[::1], int64, int64, int64, float32[::1])"
_SIG_HELD = "void(float32[::1], int64, int64, float32[::1])"
KERNELS = {"naive": (softmax_three_pass_kernel, _SIG_NAIVE), "online": (softmax_online_kernel, _SIG_ONLINE),
           "optimized": (make_held_kernel(*held_shape(4096), True), _SIG_HELD),
           "optimized.32768": (make_held_kernel(*held_shape(HELD_COLS)), _SIG_HELD),
           "optimized.edge": (make_held_kernel(*held_shape(4100)), _SIG_HELD)}


def _grid(rows: int) -> int:
    """A block per row, as many blocks as the GPU holds at once; each block strides over the rows."""
    return launch.grid_stride_blocks(rows * THREADS, THREADS, BLOCKS_PER_SM)


def naive(x):
    check_input(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(tuple(x.shape), np.float32)
    softmax_three_pass_kernel[_grid(x.shape[0]), THREADS](d_x, out)
    return launch.result(out, x)


def online(x):
    """The online softmax: one read pass for (m, s), one read + write pass for the output."""
    check_input(x)
    return _online(x, *launch.to_device(x))


def _online(x, d_x):
    rows, cols = x.shape
    # shift: where x's first float sits in its 16 bytes (0 for a fresh allocation; a device view such as
    # x[1:] of rows of odd length starts mid-group), so that row_layout finds each row's aligned body.
    # The output is placed at the same shift inside a slightly larger buffer: then an element's load
    # and its store are both 16-byte aligned or both not, and one layout serves the two.
    shift = (_address(d_x) // 4) % VEC
    buf = launch.empty((rows * cols + VEC,), np.float32)
    outf = buf[shift:shift + rows * cols]
    softmax_online_kernel[_grid(rows), THREADS](d_x.reshape(rows * cols), rows, cols, shift, outf)
    return launch.result(outf.reshape(rows, cols), x)


@functools.cache
def _resident_blocks(groups: int, row_warps: int, block_rows: int, full: bool) -> int:
    """Blocks of the held kernel the whole GPU runs at once (its registers decide); 2 in the simulator,
    so a block there makes several trips (and the slots' parity is exercised)."""
    if not ON_GPU:
        return 2
    kernel = make_held_kernel(groups, row_warps, block_rows, full)
    try:
        return int(kernel.compile(_SIG_HELD).max_cooperative_grid_blocks(row_warps * WARP * block_rows))
    except Exception:  # a numba-cuda without the occupancy query: one block an SM
        return launch.sm_count()


def held_takes(cols: int, aligned: bool) -> bool:
    """Whether optimized holds a row of cols floats (on the 16-byte grid, up to HELD_COLS)."""
    return aligned and cols % VEC == 0 and cols <= HELD_COLS


def optimized(x):
    """The row held where it fits (one read), the online kernel beyond (two reads)."""
    # EXERCISE: check x; where held_takes: the kernel of held_shape(cols) on a resident grid; else _online(x, d_x)
    check_input(x)
    (d_x,) = launch.to_device(x)
    rows, cols = x.shape
    if not held_takes(cols, _address(d_x) % 16 == 0):
        return _online(x, d_x)
    groups, row_warps, block_rows = shape = held_shape(cols)
    # the row fills the class: unguarded loads (not at 1024 threads: at 64 registers they spill 8 bytes,
    # and the guarded loads are day 57's block kernel, 91 % of copy at 32768)
    full = cols == row_warps * WARP * VEC * groups and row_warps * block_rows * WARP < 1024
    out = launch.empty((rows * cols,), np.float32)  # fresh: on the 16-byte grid
    grid = max(1, min(-(-rows // block_rows), _resident_blocks(*shape, full)))
    make_held_kernel(*shape, full)[grid, row_warps * WARP * block_rows](d_x.reshape(rows * cols), rows, cols, out)
    return launch.result(out.reshape(rows, cols), x)


def library(x):
    """torch.softmax(x, dim=-1) on the GPU: what a PyTorch user calls (zero-copy from a device array)."""
    import torch

    t = torch.as_tensor(x, device="cuda")
    out = torch.softmax(t, dim=-1)
    return out.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(out)
