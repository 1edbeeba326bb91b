"""Day 58: LayerNorm, Welford in one pass -- out[r, :] = (x[r, :] - mean_r) / sqrt(var_r + eps) * w + b,
w = weight and b = bias float32 (cols,), x and out float32 (rows, cols); var_r the biased variance (divided
by cols) and eps inside the square root, as torch.nn.functional.layer_norm(x, (cols,), weight, bias, eps).

naive and the block kernel give a block of 256 threads one row at a time (block-stride over the rows, a grid
sized to the GPU) and fold the block with day 25's pattern: shuffles in each warp, one slot a warp in shared
memory, one barrier, the slots folded again by every warp. warp_rows gives a warp one row.

v1 naive      three passes over the row, each reading it from global memory: the mean (a block sum), the
              variance as the mean of (x - mean)^2 (a second block sum), then a third pass that writes
              (x - mean) * rstd * weight + bias. The two-pass variance is the textbook-accurate one.
v2 warp_rows  a row per warp held in registers (day 57's layout), rows of up to WARP_COLS = 4096 floats on
              the 16-byte grid (RAGGED_COLS = 512 off it; longer: ValueError). Lane l holds 16-byte groups
              l, l + 32, ... (wide.load4, all issued before any arithmetic, no branch around them; one
              kernel per size class of 4 .. 128 floats a lane). With the row in registers a second pass
              is free: each lane takes its (count, mean, M2) in two passes over its registers (deviations
              from its first value), and the 32 triples meet by Chan's merge in a butterfly of xor
              shuffles, every lane ending with the same bits: no shared memory, no barrier. The output
              is written from the registers: ONE read of x and one write, the minimum.
v3 optimized  the dispatch by cols: warp_rows up to SPLIT_FROM = 1024 floats; from 1028 to 4096 on the
              16-byte grid the split kernel: SPLIT_WARPS = 4 warps a row (32 floats a thread instead of
              128 a lane), SPLIT_ROWS = 1 row a block, each warp's triple from the butterfly to a shared
              slot, one barrier a trip (slots double-buffered by parity), every thread merging its row's
              slots in the same order; one read and one write, as warp_rows. SPLIT_PREFETCH = True issues
              the loads of the block's next row before this row's stores (two rows' worth of registers a
              thread, best at 8 warps a row): 2 % faster on the H100, 9 % slower on the H200, so off;
              beyond, the block's Welford
              kernel: ONE read pass for the statistics: each thread keeps Welford's running (count, mean, M2) over
              its part of the row, eight floats a trip as two 16-byte loads where the rows are 16-byte
              aligned (each group of four folded in registers and merged in by Chan et al.'s rule); the
              block's 256 triples merged with the same rule by shuffles and shared memory; then ONE pass
              that reads the row again (from L2: this block has just streamed it) and writes the output
              with weight and bias fused, 16-byte loads and stores. Two reads and a write, not three and a
              write. (Chosen over holding the row in registers, day 57's route: one kernel for every row
              length; at the benchmark shapes a row of 4 or 16 KB is still in L2 when it is read again.)
library       torch.nn.functional.layer_norm on the GPU (a row of the benchmark table where torch is installed).

Why Welford. The one-pass formula var = E[x^2] - E[x]^2 subtracts two numbers of ~mean^2: at mean 1e4 those
are ~1e8, whose float32 spacing is 8, so a variance of 1 is lost entirely (it comes out anything from -50 to
50: catastrophic cancellation; tests/wrong/day58_one_pass_sum_of_squares.py). Welford's update (1962) and
Chan, Golub and LeVeque's merge (1979) only ever add squared *deviations*, never subtract large sums:
    n = na + nb,  delta = mb - ma,  mean = ma + delta nb / n,  M2 = M2a + M2b + delta^2 na nb / n,
and var = M2 / n. A constant row gives delta = 0 at every merge: mean exactly the value, M2 exactly 0, and
the output exactly bias. What float32 cannot avoid at mean 1e4: the mean itself is held to float32's
spacing there (2^-10 ~ 1e-3), so x - mean, and every float32 LayerNorm's output, torch's included, is good
to ~1e-3 of the row's spread, not to 1e-7.

Napkin math (H200, device copy ~4.2 TB/s read + write). Per element: 4 bytes read and 4 written at the least
(weight and bias, 8 bytes a column, are read once from DRAM and then from L1/L2: traffic() counts them
once), ~10 FLOPs: memory-bound.
  naive      3 reads + 1 write of x = 16 bytes an element through L1/L2, DRAM sees ~8 of them
  block      2 reads + 1 write       = 12 bytes an element through L1/L2, DRAM sees ~8
  warp_rows  1 read + 1 write        =  8 bytes an element (+ weight and bias from L1 each row)
~1056 resident blocks x a row of 16 KB = 17 MB, inside the 60 MB L2, so the re-reads come from L2 at both
benchmark shapes; they cost instructions, L2 bandwidth and a latency per row, not DRAM time.
(16384, 4096) and (65536, 1024) are 256 MB in + 256 MB out each, ~0.13 ms at the copy rate.
warp_rows in flight: the 4096 class holds 128 floats a lane (216 registers, ptxas), 2 blocks of 4 warps an
SM: 8 rows x 16 KB = 128 KB of loads issued at once an SM; the 1024 class 96 registers, 5 blocks, 20 rows x
4 KB = 80 KB. Little's law wants ~30 KB an SM (4.2 TB/s / 132 SMs x ~1 us): both classes are past it, and
a warp's row needs no barrier, so no SM waits for its slowest warp. Both benchmark shapes take warp_rows.
The split kernel (optimized at 4096): the register file bounds the rows an SM holds whatever the split (a
16 KB row is 16 KB of registers), but 4 warps a row at 79 registers (launch bound 768 threads an SM) gave
3 blocks, 6 rows and 24 warps an SM (6 a scheduler, against warp_rows' 2), each with a quarter of the
serial work a row; 96 KB of loads issued at once an SM, 3x what Little's law asks, but only while a block
loads: through its merge, barrier and stores it had none in flight. With SPLIT_PREFETCH 8 warps a row
hold 16 floats a thread of this row and 16 of the next (80 registers, 3 blocks an SM), and the next row's
loads go out right after the barrier, so every block has a row's loads in flight through its whole trip:
faster on the H100, slower on the H200 (lesson 58), so off by default. At 90 % of copy the shape takes
142 us on the H200 (128 us at the copy rate).
Target: the best version >= 90 % of the copy rate (on its 8 bytes an element) and faster than torch's
layer_norm (70 % of copy at 16384 x 4096 in the guide's measurement). Measured on the H200 (device copy
4216 GB/s in the same run; optimized = warp_rows at both shapes):
  (16384, 4096)  before the split kernel: optimized 158.9 us, 3,379 GB/s, 80.1 % of copy, 1.75x naive
                 (277.8 us), 1.15x faster than torch (182.1 us, 69.9 %); warp_rows alone 156.2 us, 81.5 %.
                 The likely reason is the 4096 class's 216 registers: 8 rows an SM, each loading,
                 reducing and storing in turn, against the 1024 class's 20 (not measured apart). With
                 the split kernel (2026-12-05, copy 4209 GB/s): 148.3 us, 86.0 %, 1.88x naive (278.4 us),
                 1.24x faster than torch (184.3 us, 69.2 %). Faster than torch: met; 90 %: missed by
                 4.0 points.
  (65536, 1024)  optimized 140.6 us, 3,819 GB/s, 90.6 % (met), 2.87x naive (403.1 us), 1.45x faster than
                 torch (204.0 us, 62.4 %): both targets met.
The previous kernel (the block's Welford kernel at every length; an earlier run, device copy 4225 GB/s)
gave 190.9 us (66.6 %) and 434.3 us (29.3 %, slower than naive): a row of 1024 floats is one 16-byte load
a thread, and the block waited out its latency, the merge and the second read with nothing else in flight.
A row per warp (several rows in flight a block, no barrier) is 1.20x and 3.09x faster.
"""

import functools
import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch, wide
from numba import float32, int64
from solutions.day25_reduction_last_warp import FULL_MASK, THREADS, WARP, WARPS
from solutions.day26_reduction_grid_stride import _address
from solutions.day56_softmax_online import block_sum

TITLE = "LayerNorm: Welford in one pass"
MEMORY_SPACE = "register + shared"
VERSIONS = ("naive", "warp_rows", "optimized")
# (rows, cols): one element; rows of length 1; a row shorter than a warp; a block -1 and +1 (odd: the
# per-element path); a multiple of 4 (the 16-byte path, one trip and a remainder); a prime number of rows
# of a multiple of 4; a long odd row.
# The last size is one every version takes (the no-GPU traffic table runs there).
TEST_SIZES = ((1, 1), (3, 1), (5, 3), (3, 255), (2, 257), (3, 512), (1, 4097), (2, 1028))
# The warp kernel's own sizes (its classes hold 128 x 1, 2, 4, ... 32 floats a row): a class's limit -1, exactly
# and +1 in both layouts; more rows than a block has warps (9, 13: the row loop); its limit 4096. For
# optimized, the split kernel's side: 1028 and 2052 (a class +1), 4096, and (9, 1032): more trips than
# one (the slots' parity) and a block whose second row lies past the end.
WARP_TEST_SIZES = ((1, 1), (9, 3), (13, 33), (3, 127), (2, 128), (5, 132), (2, 509), (3, 1020), (1, 2052),
                   (2, 4096), (9, 1032))
# Hidden 4096 over 16k tokens; hidden 1024 over 64k tokens: 256 MB each way, ~4x the L2.
BENCH_SIZES = ((16384, 4096), (65536, 1024))
BOUND = "memory"
RTOL = 1e-4
EPS = 1e-5  # torch's default
VEC = wide.WIDTH  # floats in one 16-byte load
VECS_PER_TRIP = 2  # two 16-byte loads a thread a trip: 1024 threads an SM x 32 B = 32 KB in flight
BLOCKS_PER_SM = 4  # 4 x 256 threads resident per SM at up to 64 registers a thread: one wave
# CUDA C's __launch_bounds__(256, 4): the compiler keeps a thread to 65536 / (4 x 256) = 64 registers, so
# four blocks fit on an SM (unbounded, the Welford kernel takes ~78 and only three fit). The simulator's
# jit takes no launch bounds: it has no registers to budget.
_BOUNDS = {"launch_bounds": (THREADS, BLOCKS_PER_SM)} if DEVICE.kind != "sim" else {}
# v2: a row per warp held in registers. Classes of 4, 8, ... 128 floats a lane (rows of up to 128 .. 4096);
# past WARP_COLS the block kernel (v3). ROW_WARPS warps (rows) a block: 128 threads, so a class of ~160
# registers a thread still fits 3 blocks (12 rows) an SM.
WARP_COLS = 4096
WARP_GROUPS = (1, 2, 4, 8, 16, 32)  # 16-byte groups a lane holds
# Rows off the 16-byte grid (cols not a multiple of 4, or a device view such as x[1:]) take 4-byte loads,
# each with its own address: past 16 floats a lane the compiler runs out of registers (~250 at 32
# floats, a stack frame at 128), so the warp kernel holds those rows up to RAGGED_COLS only.
RAGGED_COLS = 512
ROW_WARPS = 4
# optimized gives rows on the 16-byte grid longer than SPLIT_FROM floats (up to WARP_COLS) to the split
# kernel: SPLIT_WARPS warps a row (4: 32 floats a thread at 4096), SPLIT_ROWS rows a block (1: 128
# threads). SPLIT_PREFETCH: the next row's loads issued before this row's stores, best at SPLIT_WARPS = 8
# (16 floats a thread of each of two rows): on an H100 2 % faster than the form without it (93.6 against
# 91.6 % of copy), on the H200 9 % slower (79.9 against 87.3 %, lesson 58): off, the form that holds on both.
SPLIT_FROM = 1024
SPLIT_WARPS = 4
SPLIT_ROWS = 1
SPLIT_PREFETCH = False
# Threads an SM the split kernel's register cap is set for: 512 caps a thread at 128 registers (the kernel
# takes ~92 at 4 warps a row, 80 prefetching at 8: ptxas on an H100). At 768 (a cap of 85) the prefetching
# kernel spills 8 bytes a thread for the same time; 1024 would cap either at 64.
SPLIT_SM_THREADS = 512
ZERO = float32(0.0)
ONE = float32(1.0)
QUARTER = float32(0.25)
FOUR = float32(4.0)
# The large-mean hard input: float32 holds a mean of 1e4 to its spacing there (2^-10), so any float32
# LayerNorm's output (torch's too) is good to a few of those spacings times rstd: the grader allows
# LARGE_MEAN_ATOL of the spread (E[x^2] - E[x]^2 in float32 misses by 1 to 50 spreads, or gives NaN).
LARGE_MEAN = 1e4
LARGE_MEAN_ATOL = 1e-2


def make_inputs(n, seed: int = 0):
    """(x, weight, bias, eps): rows of different means (around +-3) and spreads (0.3 .. 10), so statistics
    taken from the wrong row show; weight around 1 and bias around 0, both random per column, so a weight
    or bias indexed by the wrong column (or applied before normalising) shows."""
    rows, cols = n
    rng = np.random.default_rng(seed)
    spread = np.float32(10.0) ** rng.uniform(-0.5, 1.0, size=(rows, 1)).astype(np.float32)
    mean = rng.standard_normal((rows, 1)).astype(np.float32) * np.float32(3.0)
    x = (rng.standard_normal((rows, cols), dtype=np.float32) * spread + mean).astype(np.float32)
    weight = (1.0 + 0.5 * rng.standard_normal(cols)).astype(np.float32)
    bias = (0.5 * rng.standard_normal(cols)).astype(np.float32)
    return x, weight, bias, EPS


def hard_inputs(kind: str, n, seed: int = 0):
    """(x, weight, bias, eps) of shape n = (rows, cols) for one of HARD_KINDS:
    "large-mean" rows of mean ~1e4 and spread ~1 (E[x^2] - E[x]^2 cancels catastrophically in float32),
    "constant" rows (variance 0: out = bias; values whose float32 sums are exact, 1e4 among them, so the
    two-pass mean is exact too), "any-constant" rows of arbitrary constant values (Welford's merge gives
    the mean exactly and M2 = 0; a float32 sum divided by cols does not, and rstd = 1 / sqrt(eps) ~ 316
    amplifies its rounding: the optimized version's own test)."""
    rows, cols = n
    rng = np.random.default_rng(seed * 7919 + cols * 31 + rows)
    weight = (1.0 + 0.5 * rng.standard_normal(cols)).astype(np.float32)
    bias = (0.5 * rng.standard_normal(cols)).astype(np.float32)
    if kind == "large-mean":
        mean = LARGE_MEAN * (1.0 + 0.01 * rng.standard_normal((rows, 1)))
        x = mean + rng.standard_normal((rows, cols))
    elif kind == "constant":
        x = np.repeat(rng.choice(np.array([1e4, -2.5, 0.75, 3.0, -1e4, 0.0]), size=(rows, 1)), cols, axis=1)
    elif kind == "any-constant":
        x = np.repeat(rng.standard_normal((rows, 1)) * 10.0 ** rng.integers(-2, 5, size=(rows, 1)), cols, axis=1)
    else:
        raise ValueError(f"kind: expected one of {HARD_KINDS}, got {kind!r}")
    return np.ascontiguousarray(x, dtype=np.float32), weight, bias, EPS


HARD_KINDS = ("large-mean", "constant", "any-constant")


def reference(x, weight, bias, eps):
    """LayerNorm over the last axis in float64: biased variance, eps inside the square root."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps) * weight.astype(np.float64) + bias.astype(np.float64)
    return out.astype(np.float32)


def traffic(x, weight, bias, eps):
    """(minimum bytes through device memory, FLOPs): x read once, out written once, weight and bias read
    once; ~10 FLOPs an element (the statistics ~6, the normalise and the affine 4)."""
    return 2 * x.size * 4 + 2 * x.shape[1] * 4, 10 * x.size


def check_inputs(x, weight, bias, eps):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")
    launch.check_array("weight", weight, dtype=np.float32, shape=(cols,))
    launch.check_array("bias", bias, dtype=np.float32, shape=(cols,))
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise ValueError(f"eps: expected a number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps}")


# ---- the pieces both versions share ----------------------------------------------------------------

@cuda.jit(device=True)
def block_stat_sum(v, slots, cols):
    """The block sum of v (day 56's block_sum: every thread gets it) divided by cols, in float32."""
    return block_sum(v, slots) / float32(cols)


# ---- v1: three passes -----------------------------------------------------------------------------

@cuda.jit(**_BOUNDS)
def layernorm_three_pass_kernel(x, weight, bias, eps, out):  # x (rows, cols), weight, bias (cols,), out (rows, cols)
    """Block-stride over the rows (r = blockIdx.x, then += gridDim.x), 256 threads a row; thread t takes the
    row's elements t, t + 256, ... (each step of the block reads 256 consecutive floats: coalesced).

    For each row, three passes, each reading the row from global memory:
    1. mean = block_stat_sum(each thread's sum of its elements, slots, cols);
    2. var = block_stat_sum(each thread's sum of (x - mean)^2, ...): the biased variance, two-pass;
    3. out[r, k] = (x - mean) * rstd * weight[k] + bias[k] with rstd = 1 / sqrt(var + eps).
    All arithmetic in float32 (float32(...) constants: a Python float would make it float64). Every
    thread reaches every barrier (the same rows for the whole block).
    """
    slots = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    cols = x.shape[1]
    r = cuda.blockIdx.x
    # EXERCISE: for each of the block's rows: a mean pass, a variance pass, a write pass (block_stat_sum twice)
    while r < x.shape[0]:
        xr = x[r]
        v = ZERO
        k = t
        while k < cols:  # pass 1: read the row for its sum
            v += xr[k]
            k += THREADS
        mean = block_stat_sum(v, slots, cols)
        q = ZERO
        k = t
        while k < cols:  # pass 2: read it again for the squared deviations
            d = xr[k] - mean
            q += d * d
            k += THREADS
        var = block_stat_sum(q, slots, cols)
        rstd = ONE / math.sqrt(var + eps)
        k = t
        while k < cols:  # pass 3: read it a third time to write
            out[r, k] = (xr[k] - mean) * rstd * weight[k] + bias[k]
            k += THREADS
        r += cuda.gridDim.x


# ---- v2: Welford in one pass ----------------------------------------------------------------------

@cuda.jit(device=True)
def chan_merge(na, ma, m2a, nb, mb, m2b):
    """Chan, Golub and LeVeque's merge of two (count, mean, M2) triples over disjoint parts of a row into
    the triple of their union (M2: the sum of squared deviations from the mean):
        n = na + nb,  delta = mb - ma,  mean = ma + delta nb / n,  M2 = M2a + M2b + delta^2 na nb / n.
    The last term is the spread BETWEEN the two parts' means. Counts are float32 (exact to 2^24). An empty
    part (n = 0, mean 0, M2 0) must leave the other unchanged: divide by max(n, 1) so that two empty parts
    give (0, 0, 0) and not 0 / 0."""
    # EXERCISE: n = na + nb; delta = mb - ma; f = nb / max(n, 1); mean = ma + delta f; M2 = M2a + M2b + delta^2 na f
    n = na + nb
    delta = mb - ma
    f = nb / max(n, ONE)
    m2 = m2a + m2b + delta * delta * na * f
    return n, ma + delta * f, m2


@cuda.jit(device=True)
def welford_update(n, mean, m2, v):
    """Welford's update (1962) with one value v: n += 1, mean += (v - mean) / n, M2 += (v - mean_old)
    (v - mean_new). Chan's merge with (1, v, 0), written out."""
    n += ONE
    d = v - mean
    mean += d / n
    return n, mean, m2 + d * (v - mean)


@cuda.jit(device=True)
def quad_stats(a0, a1, a2, a3):
    """The (count, mean, M2) of four values held in registers (one 16-byte load), taken relative to the
    first: the differences from a0 are exact for values within a factor 2 of each other (Sterbenz), so a
    quad of values near 1e4 loses nothing before its mean is formed; four equal values give (4, a0, 0)."""
    d1 = a1 - a0
    d2 = a2 - a0
    d3 = a3 - a0
    s = (d1 + d2 + d3) * QUARTER  # mean - a0
    e1 = d1 - s
    e2 = d2 - s
    e3 = d3 - s
    return FOUR, a0 + s, s * s + e1 * e1 + e2 * e2 + e3 * e3


@cuda.jit(device=True)
def warp_merge(n, mean, m2):
    """The 32 lanes' triples merged; lane 0 ends with the warp's. The three values travel by shuffle
    (offsets 16 .. 1), each step one chan_merge."""
    # EXERCISE: for offset 16, 8, 4, 2, 1: shuffle n, mean and M2 down by offset and chan_merge them in
    offset = WARP // 2
    while offset > 0:
        nb = cuda.shfl_down_sync(FULL_MASK, n, offset)
        mb = cuda.shfl_down_sync(FULL_MASK, mean, offset)
        m2b = cuda.shfl_down_sync(FULL_MASK, m2, offset)
        n, mean, m2 = chan_merge(n, mean, m2, nb, mb, m2b)
        offset //= 2
    return n, mean, m2


@cuda.jit(device=True)
def block_merge(n, mean, m2, slot_n, slot_mean, slot_m2):
    """The block's 256 triples merged, returned to every thread: warp_merge in each warp, lane 0's triple
    to shared slots (WARPS each), one barrier, every warp merges the slots (empty lanes (0, 0, 0)), the
    result broadcast from lane 0, and a barrier before the slots are reused by the next row."""
    lane = cuda.threadIdx.x % WARP
    n, mean, m2 = warp_merge(n, mean, m2)
    if lane == 0:
        w = cuda.threadIdx.x // WARP
        slot_n[w] = n
        slot_mean[w] = mean
        slot_m2[w] = m2
    cuda.syncthreads()
    if lane < WARPS:
        n, mean, m2 = slot_n[lane], slot_mean[lane], slot_m2[lane]
    else:
        n, mean, m2 = ZERO, ZERO, ZERO
    n, mean, m2 = warp_merge(n, mean, m2)
    n = cuda.shfl_sync(FULL_MASK, n, 0)
    mean = cuda.shfl_sync(FULL_MASK, mean, 0)
    m2 = cuda.shfl_sync(FULL_MASK, m2, 0)
    cuda.syncthreads()  # WAR: every warp has read the slots before the next row's merge writes them
    return n, mean, m2


@cuda.jit(**_BOUNDS)
def layernorm_welford_kernel(x, weight, bias, eps, wide_rows, out):  # x (rows, cols), weight, bias (cols,)
    """Block-stride over the rows as v1. wide_rows = 1 when cols is a multiple of 4 and x, weight, bias and
    out start on 16-byte boundaries: then every row is cols / 4 aligned groups of four (wide.load4(x, r, c)
    with c a multiple of 4); otherwise 0 and the row is read one float a thread a step.

    For each row, thread t keeps a running (n, mean, M2) = (0, 0, 0) and reads the row ONCE:
    - wide rows: groups g = t + 256 j; VECS_PER_TRIP of them loaded a trip (both loads first: 32 bytes in
      flight a thread), each folded by quad_stats and merged in with chan_merge; then a last single group;
    - other rows: elements k = t + 256 j, each by welford_update;
    then (given) block_merge gives every thread the row's triple, rstd = 1 / sqrt(M2 / n + eps), and the
    write pass reads the row a second time and stores (x - mean) * rstd * weight + bias.
    """
    slot_n = cuda.shared.array(WARPS, float32)
    slot_mean = cuda.shared.array(WARPS, float32)
    slot_m2 = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    rows, cols = x.shape
    vecs = cols // VEC
    r = cuda.blockIdx.x
    while r < rows:
        n = ZERO
        mean = ZERO
        m2 = ZERO
        # EXERCISE: the read pass: trips of VECS_PER_TRIP 16-byte loads (quad_stats, chan_merge), else welford_update
        if wide_rows:
            g = int64(t)
            # Two independent 16-byte loads before any arithmetic: the memory system sees both at once.
            while g + THREADS < vecs:
                a0, a1, a2, a3 = wide.load4(x, r, VEC * g)
                b0, b1, b2, b3 = wide.load4(x, r, VEC * (g + THREADS))
                qn, qm, qm2 = quad_stats(a0, a1, a2, a3)
                n, mean, m2 = chan_merge(n, mean, m2, qn, qm, qm2)
                qn, qm, qm2 = quad_stats(b0, b1, b2, b3)
                n, mean, m2 = chan_merge(n, mean, m2, qn, qm, qm2)
                g += VECS_PER_TRIP * THREADS
            if g < vecs:
                a0, a1, a2, a3 = wide.load4(x, r, VEC * g)
                qn, qm, qm2 = quad_stats(a0, a1, a2, a3)
                n, mean, m2 = chan_merge(n, mean, m2, qn, qm, qm2)
        else:
            k = t
            while k < cols:
                n, mean, m2 = welford_update(n, mean, m2, x[r, k])
                k += THREADS
        # END EXERCISE
        n, mean, m2 = block_merge(n, mean, m2, slot_n, slot_mean, slot_m2)
        rstd = ONE / math.sqrt(m2 / n + eps)
        # The write pass: the row's second and last read (most likely from L2: this block just read it);
        # weight and bias are the same for every row: after the first row they come from L1/L2.
        if wide_rows:
            g = int64(t)
            while g < vecs:
                c = VEC * g
                a0, a1, a2, a3 = wide.load4(x, r, c)
                w0, w1, w2, w3 = wide.load4(weight, c)
                b0, b1, b2, b3 = wide.load4(bias, c)
                wide.store4(out, r, c, ((a0 - mean) * rstd * w0 + b0, (a1 - mean) * rstd * w1 + b1,
                                        (a2 - mean) * rstd * w2 + b2, (a3 - mean) * rstd * w3 + b3))
                g += THREADS
        else:
            k = t
            while k < cols:
                out[r, k] = (x[r, k] - mean) * rstd * weight[k] + bias[k]
                k += THREADS
        r += cuda.gridDim.x


# ---- v2: a row per warp, held in registers ----------------------------------------------------------
# Lane l holds the row's 16-byte groups l, l + 32, ... (wide rows) or its elements l, l + 32, ... (other
# rows) in a buffer of a size fixed when the kernel compiles (day 57's size classes), indexed only by
# unrolled loops: registers, not the stack. With the row in registers a second pass costs no memory, so
# each lane takes its part's (count, mean, M2) in two passes over its registers (exact: no division per
# element, and deviations from the lane's first value, exact by Sterbenz near a large mean), and the 32
# triples meet by Chan's merge in a butterfly of xor shuffles: no shared memory, no barrier.

@cuda.jit(device=True)
def xor_merge(n, mean, m2, offset):
    """One butterfly step: the triple of lane ^ offset by three xor shuffles, merged with chan_merge. The
    lower lane's triple goes first in BOTH lanes (lane & offset tells which is which), so the two compute
    the same bits and the whole warp ends with one (n, mean, M2), not 32 that differ in the last place."""
    nb = cuda.shfl_xor_sync(FULL_MASK, n, offset)
    mb = cuda.shfl_xor_sync(FULL_MASK, mean, offset)
    m2b = cuda.shfl_xor_sync(FULL_MASK, m2, offset)
    if cuda.threadIdx.x & offset:  # the partner is the lower lane (offset < 32: lane & offset)
        return chan_merge(nb, mb, m2b, n, mean, m2)
    return chan_merge(n, mean, m2, nb, mb, m2b)


@cuda.jit(device=True)
def warp_allmerge(n, mean, m2):
    """The 32 lanes' triples merged, the row's triple in every lane: xor_merge with offsets 16, 8, 4, 2, 1."""
    # EXERCISE: five xor_merge steps, offsets 16, 8, 4, 2, 1
    n, mean, m2 = xor_merge(n, mean, m2, 16)
    n, mean, m2 = xor_merge(n, mean, m2, 8)
    n, mean, m2 = xor_merge(n, mean, m2, 4)
    n, mean, m2 = xor_merge(n, mean, m2, 2)
    n, mean, m2 = xor_merge(n, mean, m2, 1)
    return n, mean, m2


def _load_row(wide_access: bool, groups: int, stride: int = WARP):
    """A device function for one size class: (xf, start, cols, lane, buf) loads the lane's share of the row
    xf[start : start + cols] (x flat: day 57's layout, an offset a load off one address) into buf.
    Element k of buf is the row's column col(k): lane + stride k (4-byte loads), or column
    4 (lane + stride (k // 4)) + k % 4 (16-byte group k // 4 of the lane). stride: the threads that share
    the row (32 for a warp's row; SPLIT_WARPS * 32 for the split kernel, lane then the thread's index
    among them)."""
    held = VEC * groups

    @cuda.jit(device=True)
    def load_row(xf, start, cols, lane, buf):
        """Every load first and none behind a branch (a branch ends the run of loads the compiler keeps in
        flight): past the row a lane loads the row's last group (or element) again, an L1 hit, and keeps
        0 in buf."""
        # EXERCISE: the loads, clamped to the row, 0 kept past it
        if wide_access:
            last = cols - VEC
            for j in range(groups):
                c = VEC * (lane + stride * j)
                a0, a1, a2, a3 = wide.load4(xf, start + min(c, last))
                keep = c < cols
                buf[VEC * j] = a0 if keep else ZERO
                buf[VEC * j + 1] = a1 if keep else ZERO
                buf[VEC * j + 2] = a2 if keep else ZERO
                buf[VEC * j + 3] = a3 if keep else ZERO
        else:
            for k in range(held):
                c = lane + stride * k
                buf[k] = xf[start + min(c, cols - 1)]
                if c >= cols:
                    buf[k] = ZERO

    return load_row


def _row_stats(wide_access: bool, groups: int, stride: int = WARP):
    """A device function for one size class: (cols, lane, buf) -> the lane's (n, mean, M2) over the
    elements of buf inside the row (buf as _load_row fills it)."""
    held = VEC * groups

    @cuda.jit(device=True)
    def row_stats(cols, lane, buf):
        """Two passes over the lane's registers: n the elements inside the row, s = the sum of (v - a0) over
        them (a0 = buf[0], the lane's first value), off = s / max(n, 1), mean = a0 + off, M2 = the sum of
        ((v - a0) - off)^2 over them. A lane with no element: (0, 0, 0)."""
        # EXERCISE: n, the shifted sum, mean and M2 over the lane's registers
        a0 = buf[0]
        n = ZERO
        s = ZERO
        if wide_access:  # a group lies inside the row or past it as a whole
            for j in range(groups):
                if VEC * (lane + stride * j) < cols:
                    n += FOUR
                    s += (((buf[VEC * j] - a0) + (buf[VEC * j + 1] - a0))
                          + ((buf[VEC * j + 2] - a0) + (buf[VEC * j + 3] - a0)))
        else:
            for k in range(held):
                if lane + stride * k < cols:
                    n += ONE
                    s += buf[k] - a0
        off = s / max(n, ONE)
        m2 = ZERO
        if wide_access:
            for j in range(groups):
                if VEC * (lane + stride * j) < cols:
                    e0 = (buf[VEC * j] - a0) - off
                    e1 = (buf[VEC * j + 1] - a0) - off
                    e2 = (buf[VEC * j + 2] - a0) - off
                    e3 = (buf[VEC * j + 3] - a0) - off
                    m2 += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)
        else:
            for k in range(held):
                if lane + stride * k < cols:
                    e = (buf[k] - a0) - off
                    m2 += e * e
        return n, a0 + off, m2

    return row_stats


def _hold_row(wide_access: bool, groups: int, stride: int = WARP):
    """(xf, start, cols, lane, buf) -> the lane's (n, mean, M2): _load_row's loads, then _row_stats."""
    load_row = _load_row(wide_access, groups, stride)
    row_stats = _row_stats(wide_access, groups, stride)

    @cuda.jit(device=True)
    def hold_row(xf, start, cols, lane, buf):
        load_row(xf, start, cols, lane, buf)
        return row_stats(cols, lane, buf)

    return hold_row


def _store_row(wide_access: bool, groups: int, stride: int = WARP):
    """A device function (outf, weight, bias, start, cols, lane, buf, mean, rstd): out at the lane's columns,
    (buf - mean) * rstd * weight + bias from the registers (16-byte stores for wide rows), nothing past
    the row. weight and bias are read here every row: after the first row, L1 hits."""
    held = VEC * groups

    @cuda.jit(device=True)
    def store_row(outf, weight, bias, start, cols, lane, buf, mean, rstd):
        if wide_access:
            for j in range(groups):
                c = VEC * (lane + stride * j)
                if c < cols:
                    w0, w1, w2, w3 = wide.load4(weight, c)
                    b0, b1, b2, b3 = wide.load4(bias, c)
                    wide.store4(outf, start + c, ((buf[VEC * j] - mean) * rstd * w0 + b0,
                                                  (buf[VEC * j + 1] - mean) * rstd * w1 + b1,
                                                  (buf[VEC * j + 2] - mean) * rstd * w2 + b2,
                                                  (buf[VEC * j + 3] - mean) * rstd * w3 + b3))
        else:
            for k in range(held):
                c = lane + stride * k
                if c < cols:
                    outf[start + c] = (buf[k] - mean) * rstd * weight[c] + bias[c]

    return store_row


@functools.cache
def make_warp_rows_kernel(groups: int, wide_access: bool = True):
    """The warp kernel for rows of up to WARP * VEC * groups floats, each lane holding VEC * groups of
    them (a compile-time constant). wide_access: 16-byte loads and stores (cols a multiple of 4, every
    array 16-byte aligned), else 4-byte ones."""
    held = VEC * groups
    hold_row = _hold_row(wide_access, groups)
    store_row = _store_row(wide_access, groups)

    @cuda.jit
    def layernorm_warp_rows_kernel(xf, rows, cols, weight, bias, eps, outf):  # xf, outf (rows * cols,): x, out flat
        """Warp w of block b takes row r = b * ROW_WARPS + w (then += gridDim.x * ROW_WARPS): the whole warp
        has the same row, so its shuffles run with every lane. hold_row loads the lane's share of the row
        into buf = cuda.local.array(held, float32) and gives the lane's (n, mean, M2); warp_allmerge gives
        every lane the row's; rstd = 1 / sqrt(M2 / n + eps); store_row writes out from the registers.
        x is read once; no shared memory; no barrier."""
        buf = cuda.local.array(held, float32)  # constant size, constant indices: registers
        lane = cuda.threadIdx.x % WARP
        r = cuda.blockIdx.x * ROW_WARPS + cuda.threadIdx.x // WARP
        while r < rows:
            start = int64(r) * cols
            # EXERCISE: hold_row, warp_allmerge, rstd, store_row
            n, mean, m2 = hold_row(xf, start, cols, lane, buf)
            n, mean, m2 = warp_allmerge(n, mean, m2)
            rstd = ONE / math.sqrt(m2 / n + eps)
            store_row(outf, weight, bias, start, cols, lane, buf, mean, rstd)  # x is not read again
            # END EXERCISE
            r += cuda.gridDim.x * ROW_WARPS

    return layernorm_warp_rows_kernel


# ---- the split kernel (optimized, rows of 1028 .. 4096 floats): a few warps a row, several rows a block ----
# A row of 4096 floats held by one warp is 128 floats a lane (216 registers): 8 warps an SM, 2 a scheduler,
# each running ~400 dependent instructions over its registers between its loads and its stores, with little
# else to issue. Shared by SPLIT_WARPS warps the row is 32 floats a thread (~64 registers): the same 8 rows
# (128 KB) in flight an SM, but 32 warps to hide each other's latency and a quarter of the serial work a
# row. The price: the warps' triples meet in shared memory, one barrier a trip of the block.

@functools.cache
def make_split_rows_kernel(groups: int, row_warps: int, block_rows: int, prefetch: bool = True):
    """The kernel that gives each row row_warps warps (a thread holding VEC * groups floats of it, 16-byte
    groups only: rows on the 16-byte grid) and each block block_rows rows. prefetch: the loads of the
    block's next row go out before this row's stores (two rows a thread in registers); else each trip
    loads its own row first."""
    held = VEC * groups
    row_threads = WARP * row_warps  # threads sharing a row: the stride between a thread's groups
    threads = row_threads * block_rows
    load_row = _load_row(True, groups, row_threads)
    row_stats = _row_stats(True, groups, row_threads)
    store_row = _store_row(True, groups, row_threads)
    # CUDA C's __launch_bounds__(threads, blocks an SM): the register cap that lets SPLIT_SM_THREADS threads
    # (at least one block) share an SM's 65536 registers
    bounds = {"launch_bounds": (threads, max(1, SPLIT_SM_THREADS // threads))} if DEVICE.kind != "sim" else {}

    @cuda.jit(device=True)
    def split_trip(xf, rows, cols, weight, bias, eps, outf, first, step, p, buf, nxt, slot_n, slot_mean, slot_m2):
        """One trip of the block: its rows first + s (s = threadIdx.x // row_threads), the thread's share of
        its row in buf. Without prefetch, load_row fills buf first. Then row_stats, warp_allmerge, lane 0
        of each warp writes the warp's triple to slot[p, s, w] (w the warp within the row), ONE barrier,
        and every thread merges its row's row_warps slots in the same order (the same bits in every warp of
        the row). With prefetch, load_row now fills nxt with the thread's share of the next trip's row (first +
        step + s, clamped to the last row; none on the block's last trip): those loads fly while this row is
        normalised and stored. Then rstd, and store_row from buf (nothing for a row past the end, which loaded
        the last row again). The slots alternate with p between trips, so a fast warp writing the next trip's
        triple never overwrites one a slow warp is still reading: the barrier of the trip between orders
        them (day 57's block kernel)."""
        t = cuda.threadIdx.x
        s = t // row_threads
        i = t % row_threads  # the thread's place among the row's threads
        r = first + s
        start = int64(min(r, rows - 1)) * cols
        # EXERCISE: (load buf), stats, warp merge, slots of parity p, barrier, merge slots, (load nxt), store_row
        if not prefetch:
            load_row(xf, start, cols, i, buf)
        n, mean, m2 = row_stats(cols, i, buf)
        n, mean, m2 = warp_allmerge(n, mean, m2)
        if t % WARP == 0:
            slot_n[p, s, i // WARP] = n
            slot_mean[p, s, i // WARP] = mean
            slot_m2[p, s, i // WARP] = m2
        cuda.syncthreads()
        n, mean, m2 = slot_n[p, s, 0], slot_mean[p, s, 0], slot_m2[p, s, 0]
        for k in range(1, row_warps):  # unrolled: row_warps is a constant
            n, mean, m2 = chan_merge(n, mean, m2, slot_n[p, s, k], slot_mean[p, s, k], slot_m2[p, s, k])
        if prefetch and first + step < rows:  # the next trip's row, before this one's stores (if there is one)
            load_row(xf, int64(min(first + step + s, rows - 1)) * cols, cols, i, nxt)
        rstd = ONE / math.sqrt(m2 / n + eps)
        if r < rows:
            store_row(outf, weight, bias, start, cols, i, buf, mean, rstd)  # x is not read again

    @cuda.jit(**bounds)
    def layernorm_split_rows_kernel(xf, rows, cols, weight, bias, eps, outf):  # xf, outf (rows * cols,)
        """Block b takes rows b * block_rows + s, then += gridDim.x * block_rows (a trip each), every
        thread of the block making the same trips (the barrier needs all of them). The loop runs two trips
        a turn, the first from buffer a (prefetching into b), the second from b (into a): with constant
        indices into two named buffers both stay registers, where swapping two arrays would not."""
        slot_n = cuda.shared.array((2, block_rows, row_warps), float32)
        slot_mean = cuda.shared.array((2, block_rows, row_warps), float32)
        slot_m2 = cuda.shared.array((2, block_rows, row_warps), float32)
        a = cuda.local.array(held, float32)  # constant size, constant indices: registers
        b = cuda.local.array(held, float32)
        step = cuda.gridDim.x * block_rows
        first = cuda.blockIdx.x * block_rows
        if prefetch:  # the first trip's row
            load_row(xf, int64(min(first + cuda.threadIdx.x // row_threads, rows - 1)) * cols, cols,
                     cuda.threadIdx.x % row_threads, a)
        while first < rows:  # the same trips for the whole block
            split_trip(xf, rows, cols, weight, bias, eps, outf, first, step, 0, a, b, slot_n, slot_mean, slot_m2)
            first += step
            if first >= rows:
                break
            split_trip(xf, rows, cols, weight, bias, eps, outf, first, step, 1, b, a, slot_n, slot_mean, slot_m2)
            first += step

    return layernorm_split_rows_kernel


_SIG_NAIVE = "void(float32[:, ::1], float32[::1], float32[::1], float32, float32[:, ::1])"
_SIG_WELFORD = "void(float32[:, ::1], float32[::1], float32[::1], float32, int64, float32[:, ::1])"
_SIG_WARP = "void(float32[::1], int64, int64, float32[::1], float32[::1], float32, float32[::1])"
KERNELS = {"naive": (layernorm_three_pass_kernel, _SIG_NAIVE),
           "warp_rows": (make_warp_rows_kernel(WARP_GROUPS[-1]), _SIG_WARP),
           "warp_rows.ragged": (make_warp_rows_kernel(4, False), _SIG_WARP),
           "warp_rows.1024": (make_warp_rows_kernel(8), _SIG_WARP),
           "optimized.split": (make_split_rows_kernel(
               next(gr for gr in WARP_GROUPS if WARP_COLS <= WARP * SPLIT_WARPS * VEC * gr), SPLIT_WARPS, SPLIT_ROWS,
               SPLIT_PREFETCH), _SIG_WARP),
           "optimized": (layernorm_welford_kernel, _SIG_WELFORD)}


def warp_groups(cols: int) -> int:
    """The smallest warp class holding a row of cols floats."""
    return next(gr for gr in WARP_GROUPS if cols <= WARP * VEC * gr)


def split_groups(cols: int) -> int:
    """The smallest class of the split kernel (SPLIT_WARPS warps a row) holding a row of cols floats."""
    return next(gr for gr in WARP_GROUPS if cols <= WARP * SPLIT_WARPS * VEC * gr)


def split_takes(cols: int, aligned: bool) -> bool:
    """Whether optimized gives a row of cols floats to the split kernel."""
    return aligned and SPLIT_FROM < cols <= WARP_COLS


@functools.cache
def _split_resident_blocks(groups: int) -> int:
    """Blocks of the split kernel the whole GPU runs at once; 2 in the simulator (the slots' parity)."""
    if not ON_GPU:
        return 2
    kernel = make_split_rows_kernel(groups, SPLIT_WARPS, SPLIT_ROWS, SPLIT_PREFETCH)
    try:
        return int(kernel.compile(_SIG_WARP).max_cooperative_grid_blocks(SPLIT_WARPS * SPLIT_ROWS * WARP))
    except Exception:  # a numba-cuda without the occupancy query
        return launch.sm_count() * 4


@functools.cache
def _resident_blocks(groups: int, wide_access: bool) -> int:
    """Blocks of ROW_WARPS warps of the class that the whole GPU runs at once (its registers decide); 2 in
    the simulator, so a block there takes several rows (the row loop is exercised)."""
    if not ON_GPU:
        return 2
    kernel = make_warp_rows_kernel(groups, wide_access)
    try:
        return int(kernel.compile(_SIG_WARP).max_cooperative_grid_blocks(ROW_WARPS * WARP))
    except Exception:  # a numba-cuda without the occupancy query: as many as 16 warps an SM
        return launch.sm_count() * 4


def _grid(rows: int) -> int:
    """A block per row, as many blocks as the GPU holds at once; each block strides over the rows."""
    return launch.grid_stride_blocks(rows * THREADS, THREADS, BLOCKS_PER_SM)


def naive(x, weight, bias, eps):
    check_inputs(x, weight, bias, eps)
    d_x, d_w, d_b = launch.to_device(x, weight, bias)
    out = launch.empty(tuple(x.shape), np.float32)
    layernorm_three_pass_kernel[_grid(x.shape[0]), THREADS](d_x, d_w, d_b, np.float32(eps), out)
    return launch.result(out, x)


def _aligned(cols, *arrays) -> bool:
    """16-byte accesses need 16-byte addresses: every row a multiple of 4 floats and every array starting
    on a 16-byte boundary (a fresh allocation does; a device view such as x[1:] or weight[1:] may not)."""
    return cols % VEC == 0 and all(_address(a) % 16 == 0 for a in arrays)


def _warp_rows(x, weight, bias, eps, dispatch: bool = False):
    """The warp kernel; a row it cannot hold: ValueError (warp_rows), or the block kernel (dispatch)."""
    d_x, d_w, d_b = launch.to_device(x, weight, bias)
    rows, cols = x.shape
    out = launch.empty((rows, cols), np.float32)
    wide_access = _aligned(cols, d_x, d_w, d_b, out)
    if not warp_takes(cols, wide_access):
        if dispatch:
            return _welford_block(x, weight, bias, eps)
        raise ValueError(f"warp_rows: holds rows of up to {max_cols('warp_rows', wide_access)} floats "
                         f"{'on' if wide_access else 'off'} the 16-byte grid, got cols = {cols}; use optimized, "
                         "which dispatches by cols")
    if dispatch and split_takes(cols, wide_access):
        groups = split_groups(cols)
        kernel = make_split_rows_kernel(groups, SPLIT_WARPS, SPLIT_ROWS, SPLIT_PREFETCH)
        grid = max(1, min(-(-rows // SPLIT_ROWS), _split_resident_blocks(groups)))
        kernel[grid, SPLIT_WARPS * SPLIT_ROWS * WARP](d_x.reshape(rows * cols), rows, cols, d_w, d_b,
                                                      np.float32(eps), out.reshape(rows * cols))
        return launch.result(out, x)
    groups = warp_groups(cols)
    kernel = make_warp_rows_kernel(groups, wide_access)
    grid = max(1, min(-(-rows // ROW_WARPS), _resident_blocks(groups, wide_access)))
    kernel[grid, ROW_WARPS * WARP](d_x.reshape(rows * cols), rows, cols, d_w, d_b, np.float32(eps),
                                   out.reshape(rows * cols))
    return launch.result(out, x)


def _welford_block(x, weight, bias, eps):
    d_x, d_w, d_b = launch.to_device(x, weight, bias)
    out = launch.empty(tuple(x.shape), np.float32)
    aligned = _aligned(x.shape[1], d_x, d_w, d_b, out)
    layernorm_welford_kernel[_grid(x.shape[0]), THREADS](d_x, d_w, d_b, np.float32(eps), int(aligned), out)
    return launch.result(out, x)


def max_cols(version: str, aligned: bool = True) -> int | None:
    """The longest row a version takes (None: any length); aligned: rows on the 16-byte grid."""
    if version != "warp_rows":
        return None
    return WARP_COLS if aligned else RAGGED_COLS


def warp_takes(cols: int, aligned: bool) -> bool:
    """Whether the warp kernel holds a row of cols floats (on the 16-byte grid or off it)."""
    return cols <= max_cols("warp_rows", aligned)


def bench_skip(version: str, n) -> str | None:
    """Why course.bench leaves a version out at size n (rows, cols), or None (both benchmark shapes fit
    every version)."""
    limit = max_cols(version, n[1] % VEC == 0)
    if limit is not None and n[1] > limit:
        return f"{version} holds rows of up to {limit} floats; optimized dispatches longer ones"
    return None


def warp_rows(x, weight, bias, eps):
    """A warp per row, held in registers, up to WARP_COLS floats (RAGGED_COLS off the 16-byte grid);
    longer rows: ValueError (a warp cannot hold them; optimized dispatches)."""
    check_inputs(x, weight, bias, eps)
    return _warp_rows(x, weight, bias, eps)


def optimized(x, weight, bias, eps):
    """The dispatch by cols: a warp per row where it holds the row (up to WARP_COLS floats on the 16-byte
    grid, RAGGED_COLS off it), the block's Welford kernel beyond."""
    # EXERCISE: check the inputs; _warp_rows(..., dispatch=True) up to WARP_COLS columns, _welford_block beyond
    check_inputs(x, weight, bias, eps)
    if x.shape[1] <= WARP_COLS:
        return _warp_rows(x, weight, bias, eps, dispatch=True)
    return _welford_block(x, weight, bias, eps)


def library(x, weight, bias, eps):
    """torch.nn.functional.layer_norm on the GPU: what a PyTorch user calls (zero-copy from device arrays)."""
    import torch

    t, w, b = (torch.as_tensor(a, device="cuda") for a in (x, weight, bias))
    out = torch.nn.functional.layer_norm(t, (t.shape[-1],), weight=w, bias=b, eps=float(eps))
    return out.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(out)
