"""Day 63: int8 weight-only GEMV -- y = W x at decode (batch 1), W stored as int8 with one float32
scale per output channel: y[i] = scales[i] * sum_j w[i, j] * x[j]. W (out, in) int8 row-major,
scales (out,) float32, x (in,) float16 (a decode step's activation), y (out,) float32. The baseline is
the same product on the float16 weights W16 = scales[:, None] * W, (out, in) float16.

Every version takes the same inputs (w, scales, w16, x): the int8 versions read w and scales, the
float16 ones w16; w16 is what the int8 weights stand for.

v1 naive      dequantize, then multiply: a block per row writes W16 = float16(scale * w) to memory (a
              full-size copy), then the float16 GEMV below reads it. Per weight: 1 byte read, 2
              written, 2 read again -- five bytes where one would do.
v2 fp16_gemv  a good GEMV on float16 weights, the baseline: a warp per ROWS (2) rows, each lane
              reading 8 halves of each row (and of x) in one 16-byte load (uint32 words through
              course.wide.load4, split into halves by a register view), four loads a row in flight,
              float32 sums folded by shuffles. 2 bytes a weight.
v3 optimized  the int8 GEMV, dequantized in registers, split over a block: a block per ROWS (2) rows,
              its warps splitting each row's columns (a split-K inside the block, partial sums
              met in shared memory), so a long row is read by many warps at once; each 16-byte
              load 16 int8 weights, unpacked to float32 with integer ops and one FADD (no
              int->float conversion), multiplied by x in float32, the row's scale applied once to
              the finished sum. 1 byte a weight: the least this job can read.
library       torch: torch.mv(W16, x) in float16 on the GPU (cuBLAS's GEMV), cast to float32.

Why x is float16: it is what the layer before hands a decode step, it is in * 2 bytes against the
weights' out * in (28 KB against 59 MB at the benchmark's shape: noise in the traffic), and torch's
float16 GEMV takes the same x, so the library row does no extra conversion. Every sum is float32.

Napkin math (H200, device copy ~4.2 TB/s). Decode multiplies each weight once: 2 FLOPs per weight
against 1 byte (int8) or 2 (float16), far below the ~16 FLOPs a byte where the H200 turns compute-bound.
So the time is the weight bytes over the copy rate:
              weight bytes   at 4096 x 14336 (and 14336 x 4096)
  optimized   out * in        58.7 MB   ~14 us
  fp16_gemv   2 out * in     117.4 MB   ~28 us
  naive       5 out * in     293.6 MB   ~70 us
Target (issue 19): optimized >= 1.7x faster than fp16_gemv at 4096 x 14336 and at 14336 x 4096, each
near the copy rate. (The bench's GB/s counts what each row must move: version_traffic.)
Measured on the H200, v3 as a warp per row pair (device copy 4256 GB/s; % of copy on each row's bytes):
  (4096, 14336)  optimized 31.6 us, 43.7 % of copy; fp16_gemv 48.3 us, 57.1 %; torch.mv 46.0 us: 1.53x.
  (14336, 4096)  optimized 26.4 us, 52.5 %; fp16_gemv 42.3 us, 65.5 %; torch.mv 44.5 us: 1.60x.
That v3 was latency-bound: at (4096, 14336) 2048 row pairs are 15.5 warps an SM, each walking its row in
7 dependent trips (load, wait, multiply, loop), and ROWS x UNROLL sweeps (2 x 2 ... 4 x 8) never beat
31.6 us. Hence the split-K block: the same rows read by 7 warps (in = 14336) or 2 (in = 4096) at once.
Measured on the H200 with the split (make bench, one session): (4096, 14336) 28.9 us, 1.69x fp16_gemv's
48.7 us; (14336, 4096) 27.1 us, 1.56x of 42.2 us, at INT8_UNROLL 4, LANE_TRIPS 1. The sweep of the same
session (optimized alone, us): INT8_UNROLL x LANE_TRIPS at (4096, 14336) 2 x 1 29.5, 2 x 2 26.4, 4 x 1
29.0, 4 x 2 26.2; at (14336, 4096) 2 x 1 26.0, 2 x 2 25.6, 4 x 1 27.1, 4 x 2 26.9. So 2 x 2 (fewer loads
a trip, 40 registers instead of 48, more warps an SM; two trips a lane): 26.4 us and 25.6 us, 1.84x and
1.65x fp16_gemv. The 1.7x target is met at (4096, 14336) and missed by ~3 % at (14336, 4096), where
optimized streams at ~54 % of the copy rate: 7168 blocks of 2 warps, each a few microseconds long.

Instructions are the other budget: at 4.2 TB/s an SM receives ~16 int8 weights a clock. The H200's
int->float conversion (I2F) runs at 16 a clock per SM, so `float32(w)` per weight would make the
conversion unit, not the memory, the limit. Instead (as FasterTransformer and day 88 do): flip the sign
bits of a word (b + 128, unsigned), put each byte under the upper bytes of 2^23 (bits 0x4B000000 |
byte) with one byte permute (prmt), read the word as float32 (2^23 + 128 + b) and subtract MAGIC =
2^23 + 128: one integer op (plus a quarter xor) and one FADD a weight before the FMA. (A first version
built the bits by shift, mask and OR, three integer ops a weight: the same time on the H200.)

Tolerance: products are exact in float32 (8-bit weight x 11-bit half); the sums round, a random walk
of sqrt(in) roundings (day 39's argument), times KAPPA for the share the terms cancel. The test scales
carry four significant bits (m * 2^e, m in 8..15), so that W16 = scale * w is exact in float16 and one
float64 reference grades all versions; real scales (absmax / 127) are arbitrary floats, and a float16
copy of the dequantized weights rounds each one by up to 2^-12 -- another reason to keep the int8.
"""

import math

import numpy as np

from course import cuda, launch, wide
from numba import float32, int32, uint32
from solutions.day15_gemv_registers import FULL_MASK, WARP
from solutions.day26_reduction_grid_stride import _address

TITLE = "int8 weight-only GEMV"
MEMORY_SPACE = "global + register"
VERSIONS = ("naive", "fp16_gemv", "optimized")
# (out, in): in 1, 3, 15, 17, 127, 129, 4097 take the one-element path (no 16-byte rows); in 16, 32, 1040
# and 2048 the 16-byte path, 1040 with trips of four groups a lane and a tail (65 groups of 16 int8, 130
# of 8 halves); 4112 a split-K block of three warps for optimized (257 groups: one trip, most of its
# last groups past the row's end, clamped); out 1, primes, and odd (the second row past the end). The
# last, (8, 2048), is where the traffic is counted: whole row pairs, whole trips (no clamped group).
TEST_SIZES = ((1, 1), (5, 3), (3, 15), (2, 16), (7, 17), (3, 127), (1, 129), (37, 32), (2, 4097), (3, 1040),
              (3, 4112), (8, 2048))
BENCH_SIZES = ((4096, 14336), (14336, 4096))  # Llama-3-8B's down and up projections: 59 MB int8, ~1x L2
BOUND = "memory"

ROWS = 2  # rows a warp: x loaded once for both, the two sums folded together
UNROLL = 4  # fp16_gemv: 16-byte groups a lane loads per row before any arithmetic: 4 x 2 rows x 16 B in flight
THREADS = 128  # 4 warps a block: small blocks keep the tail of the grid short
BLOCKS_PER_SM = 16  # up to one warp per row pair at the benchmark's shapes; the hardware schedules them
# optimized: a block per row pair, its warps splitting the row (split-K). The host gives it as many
# warps as make every lane's share of a row LANE_TRIPS trips of INT8_UNROLL groups: 7 warps at in = 14336,
# 2 at in = 4096 (4 groups a lane). Fewer loads a trip than fp16_gemv's: fewer registers, more warps.
INT8_UNROLL = 2  # optimized's groups a trip: 2 x 2 rows x 16 B of weights + 4 x 16 B of x a lane
LANE_TRIPS = 2
MAX_WARPS = 16  # the largest block (512 threads); a longer row makes more trips
SPLIT_BLOCKS_PER_SM = 64  # one block per row pair up to 8448 pairs; grid-stride past that
DEQUANT_THREADS = 256
INT8_GROUP = 16  # int8 weights in 16 bytes
FP16_GROUP = 8  # float16 weights (or x values) in 16 bytes
WORDS = wide.WIDTH  # uint32 words in one 16-byte load
W_BUF = ROWS * UNROLL * WORDS  # a trip's weight words a lane holds: (ROWS, UNROLL, 4)
X16_BUF = UNROLL * WORDS  # fp16_gemv: a trip's x words, (UNROLL, 4): 8 halves a group
W8_BUF = ROWS * INT8_UNROLL * WORDS  # optimized: a trip's weight words, (ROWS, INT8_UNROLL, 4)
X8_BUF = INT8_UNROLL * 2 * WORDS  # optimized: a trip's x words, (INT8_UNROLL, 8): 16 halves a group
PARTIALS = MAX_WARPS * ROWS  # optimized: the warps' row sums, (MAX_WARPS, ROWS) in shared memory

SIGN_BITS = np.uint32(0x80808080)  # xor: every byte b -> b + 128 (two's complement -> unsigned)
MAGIC_BITS = np.uint32(0x4B000000)  # the bits of 2^23: OR a byte into its mantissa's low 8 bits
# byte_perm's selector: result byte 0 = byte j of x (u), bytes 1-3 = bytes 5, 6, 7 of y:x (MAGIC_BITS'
# 0x00, 0x00, 0x4B): one nibble per result byte.
PERM = 0x7650
MAGIC = 8388736.0  # 2^23 + 128: the float whose low mantissa byte is (b + 128) equals b + MAGIC

SCALE_EXPONENTS = (-22, -9)  # scales m * 2^e from ~1.9e-6 to ~0.029: four decades, y inside float16
ACCUMULATION_ULPS = 8  # day 39's margin over the measured random walk
KAPPA = 2.0  # sum |w x| / |sum w x| for these inputs (weights of mean 60, x in [0.5, 1.5]): ~1.1
UNIT_ROUNDOFF = 2.0**-24


def tolerance(k: int) -> float:
    """Relative tolerance of a k-long float32 dot product (products exact, the sums rounding)."""
    return (ACCUMULATION_ULPS * math.sqrt(k) + 2) * UNIT_ROUNDOFF * KAPPA


RTOL = tolerance(max(n[1] for n in BENCH_SIZES))  # 1.1e-4 at in = 14336
# Rows differ in scale by four decades: each element is held to its own size, down to 1e-7 of the
# largest (every row's |y| lies far above that: the sums do not cancel, the weights' mean is 60).
ERROR_FLOOR = 1e-7
# torch returns float16: rounding y to 11 bits is 2^-12 of it, cuBLAS's own sums on top.
VERSION_RTOL = {"library": 2.0**-10 + RTOL}


def make_inputs(n, seed: int = 0):
    """(w, scales, w16, x) for n = (out, in). Weights of mean 60 (so sums stay away from zero and a
    relative tolerance means something) over the whole int8 range, -128 and 127 included in long rows;
    scales m * 2^e spanning four decades; w16 = scales * w exactly; x in [0.5, 1.5] float16."""
    out, cols = n
    rng = np.random.default_rng(seed)
    w = np.clip(np.rint(rng.normal(60.0, 40.0, (out, cols))), -128, 127).astype(np.int8)
    if cols >= 64:  # the extremes, where one term cannot cancel the row
        w[0, 0] = -128
        w[-1, -1] = 127
    m = rng.integers(8, 16, out).astype(np.float64)
    e = rng.integers(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, out)
    scales = np.ldexp(m, e).astype(np.float32)
    w16 = (w.astype(np.float32) * scales[:, None]).astype(np.float16)  # exact: 7 bits x 4 bits
    x = rng.uniform(0.5, 1.5, cols).astype(np.float16)
    return w, scales, w16, x


def reference(w, scales, w16, x):
    """scales * (W x) in float64 (w16 holds the same values: make_inputs builds it exactly)."""
    return (scales.astype(np.float64) * (w.astype(np.float64) @ x.astype(np.float64))).astype(np.float32)


def traffic(w, scales, w16, x):
    """(minimum bytes through device memory, FLOPs): the int8 weights once, x, the scales and y."""
    out, cols = w.shape
    return out * cols + 2 * cols + 4 * out + 4 * out, 2 * out * cols


def version_traffic(version, w, scales, w16, x):
    """The bytes each version must move by design, for the bench's GB/s: the float16 rows read 2 bytes
    a weight (fp16_gemv, torch's GEMV), naive 5 (1 read, 2 written, 2 read back); optimized the int8
    minimum (traffic). So every row's % of the copy rate says how well it streams what it reads."""
    out, cols = w.shape
    per_weight = {"naive": 5, "fp16_gemv": 2, "library": 2}.get(version)
    if per_weight is None:
        return None
    return per_weight * out * cols + 2 * cols + 4 * out + 4 * out, 2 * out * cols


def check_inputs(w, scales, w16, x):
    launch.check_array("w", w, dtype=np.int8, ndim=2)
    out, cols = w.shape
    if out == 0 or cols == 0:
        raise ValueError(f"w: expected at least one row and one column, got shape {tuple(w.shape)}")
    launch.check_array("scales", scales, dtype=np.float32, shape=(out,))
    launch.check_array("w16", w16, dtype=np.float16, shape=(out, cols))
    launch.check_array("x", x, dtype=np.float16, shape=(cols,))


# ---- pieces every GEMV shares ----------------------------------------------------------------------

@cuda.jit(device=True)
def warp_sum_rows(acc):
    """Fold acc[0 : ROWS] over the 32 lanes of the warp: after shfl_down_sync by 16, 8, 4, 2, 1 lane 0
    holds each row's total (the other lanes: partial sums). Every lane must call it (full mask)."""
    # EXERCISE: for offset 16, 8, 4, 2, 1: every acc[i] += cuda.shfl_down_sync(FULL_MASK, acc[i], offset)
    offset = WARP // 2
    while offset > 0:
        for i in range(ROWS):
            acc[i] += cuda.shfl_down_sync(FULL_MASK, acc[i], offset)
        offset //= 2


@cuda.jit
def gemv_rows_kernel(w, scales, x, y):  # w (out, in) int8 or float16, scales (out,), x (in,) f16, y (out,)
    """Any in (no 16-byte rows): a warp per ROWS rows, grid-stride; lanes take k = lane, lane + 32, ...
    one element at a time, float32 sums, warp_sum_rows, y = sum * scale (ones for float16 weights)."""
    rows, cols = w.shape
    lane = cuda.threadIdx.x % WARP
    r0 = cuda.grid(1) // WARP * ROWS
    acc = cuda.local.array(ROWS, float32)
    while r0 < rows:  # the same trip count for the whole warp: the shuffles see all 32 lanes
        for i in range(ROWS):
            acc[i] = float32(0.0)
        k = lane
        while k < cols:
            xk = float32(x[k])
            for i in range(ROWS):
                acc[i] += float32(w[min(r0 + i, rows - 1), k]) * xk  # a row past the end re-reads the last
            k += WARP
        warp_sum_rows(acc)
        if lane == 0:
            for i in range(ROWS):
                if r0 + i < rows:
                    y[r0 + i] = acc[i] * scales[r0 + i]
        r0 += cuda.gridsize(1) // WARP * ROWS


# ---- v1 naive: dequantize to memory -----------------------------------------------------------------

@cuda.jit
def dequantize_kernel(w, scales, w16):  # w (out, in) int8, scales (out,), w16 (out, in) float16
    """A block per row (block-stride over the rows): threads t, t + blockDim, ... of row r write
    w16[r, k] = float32(w[r, k]) * scales[r], rounded to float16 by the store. The whole copy goes
    to memory: 2 bytes written for every byte read, and read back by the GEMV after."""
    # EXERCISE: block-stride over rows, threads stride along the row: w16[r, k] = float32(w[r, k]) * scales[r]
    rows, cols = w.shape
    r = cuda.blockIdx.x
    while r < rows:
        s = scales[r]
        k = cuda.threadIdx.x
        while k < cols:
            w16[r, k] = float32(w[r, k]) * s
            k += cuda.blockDim.x
        r += cuda.gridDim.x


# ---- v2 fp16_gemv: the baseline -----------------------------------------------------------------------

@cuda.jit
def fp16_gemv_kernel(w_words, x_words, y):  # w_words (out, in / 2) uint32, x_words (in / 2,) uint32, y (out,)
    """y = W16 x with W16 and x seen as uint32 words (two halves each, the lower one first: little-
    endian), in a multiple of 8. A warp per ROWS (2) rows r0, r0 + 1 (r0 = warp * 2, grid-stride by
    the grid's warps * 2; a second row past the end is clamped onto the last row and not stored).

    groups = w_words.shape[1] // 4: 8 halves each. Lane l takes the groups g = l, l + 32, ...: per
    group one wide.load4(x_words, 4 * g) and, per row, one wide.load4(w_words, r, 4 * g) (16 bytes,
    8 halves), into cuda.local.array buffers of uint32 read back through buf.view(np.float16), each
    half converted with float32(...) and multiplied into a float32 accumulator per row. Full trips of
    UNROLL (4) groups load everything first (4 x-loads + 8 row loads in flight), then multiply; the
    groups left over go one at a time. Then warp_sum_rows, and lane 0 stores y. No local memory
    (constant indices only, so the buffers live in registers).
    """
    # EXERCISE: UNROLL-group trips (every load4 first, then FMAs), a one-group tail, warp_sum_rows, lane 0 stores
    rows = w_words.shape[0]
    groups = w_words.shape[1] // WORDS
    lane = cuda.threadIdx.x % WARP
    acc = cuda.local.array(ROWS, float32)
    wbuf = cuda.local.array(W_BUF, uint32)  # (ROWS, UNROLL, 4) words as loaded
    xbuf = cuda.local.array(X16_BUF, uint32)  # (UNROLL, 4)
    wh = wbuf.view(np.float16)  # the same registers as (ROWS, UNROLL, 8) halves
    xh = xbuf.view(np.float16)
    r0 = cuda.grid(1) // WARP * ROWS
    while r0 < rows:
        for i in range(ROWS):
            acc[i] = float32(0.0)
        g = lane
        while g + (UNROLL - 1) * WARP < groups:
            # Every load of the trip before the first multiply: 12 independent 16-byte loads a lane.
            for u in range(UNROLL):
                gu = g + u * WARP
                xbuf[u * 4], xbuf[u * 4 + 1], xbuf[u * 4 + 2], xbuf[u * 4 + 3] = wide.load4(x_words, WORDS * gu)
                for i in range(ROWS):
                    r = min(r0 + i, rows - 1)
                    b = (i * UNROLL + u) * WORDS
                    wbuf[b], wbuf[b + 1], wbuf[b + 2], wbuf[b + 3] = wide.load4(w_words, r, WORDS * gu)
            for u in range(UNROLL):
                for i in range(ROWS):
                    part = float32(0.0)  # one chain per (row, group): independent FMAs
                    for e in range(FP16_GROUP):
                        part += float32(wh[(i * UNROLL + u) * FP16_GROUP + e]) * float32(xh[u * FP16_GROUP + e])
                    acc[i] += part
            g += UNROLL * WARP
        while g < groups:  # the last few groups of the row, one at a time
            xbuf[0], xbuf[1], xbuf[2], xbuf[3] = wide.load4(x_words, WORDS * g)
            for i in range(ROWS):
                b = i * UNROLL * WORDS
                wbuf[b], wbuf[b + 1], wbuf[b + 2], wbuf[b + 3] = wide.load4(w_words, min(r0 + i, rows - 1), WORDS * g)
            for i in range(ROWS):
                for e in range(FP16_GROUP):
                    acc[i] += float32(wh[i * UNROLL * FP16_GROUP + e]) * float32(xh[e])
            g += WARP
        warp_sum_rows(acc)
        if lane == 0:
            for i in range(ROWS):
                if r0 + i < rows:
                    y[r0 + i] = acc[i]
        r0 += cuda.gridsize(1) // WARP * ROWS


# ---- v3 optimized: dequantize in registers ------------------------------------------------------------

@cuda.jit(device=True)
def unpack_int8x4(word, bits, at):
    """The four int8 of a uint32 word (byte 0 = the lowest, the first in memory) as float32 bit
    patterns of MAGIC + b in bits[at : at + 4]; the caller reads them through bits.view(np.float32)
    and subtracts MAGIC, exactly b. No int->float conversion: u = word ^ SIGN_BITS turns each signed
    byte b into b + 128 (0..255); then one byte permute a weight (PTX prmt, libdevice's byte_perm,
    reached as cuda.libdevice.byte_perm(x, y, selector) on int32 values) assembles byte j of u under
    the three upper bytes of MAGIC_BITS: bits[at + j] = byte_perm(u, MAGIC_BITS, PERM + j). (The same
    word by shift, mask and OR costs three integer instructions a weight instead of one: at the copy
    rate an SM must unpack ~16 weights a clock, and instructions, not bytes, become the limit.)"""
    # EXERCISE: flip the sign bits (u = word ^ SIGN_BITS), then byte_perm byte j of u under MAGIC_BITS' upper bytes
    u = int32(word ^ SIGN_BITS)
    for j in range(4):
        bits[at + j] = cuda.libdevice.byte_perm(u, int32(MAGIC_BITS), int32(PERM + j))


@cuda.jit
def int8_gemv_kernel(w_words, scales, x_words, y):  # (out, in / 4) uint32, (out,), (in / 2,) uint32, (out,)
    """y = scales * (W x) with the int8 W seen as uint32 words (four weights each) and x as uint32
    words (two halves each), in a multiple of 16. A BLOCK per ROWS rows r0, r0 + 1 (r0 = block * 2,
    grid-stride by the grid's blocks * 2; a second row past the end is clamped onto the last row and
    not stored), its threads splitting each row's groups: a split-K inside the block, so a long row is
    read by many warps at once (the host sizes the block: every lane makes about LANE_TRIPS trips).

    groups = w_words.shape[1] // 4: 16 int8 each, one wide.load4 of w_words at 4 * g per row, and x's
    16 halves for it two wide.load4 of x_words at 8 * g, 8 * g + 4. Thread t takes the groups
    g = t, t + T, t + 2 T, ... (T = blockDim.x) in trips of INT8_UNROLL (2): g, g + T, ...,
    g + (INT8_UNROLL - 1) T.
    A group past the row's end is loaded from the row's last group (min: every address is valid, no
    branch splits the loads) and its sum multiplied by 0.0: every trip is a full one, all its loads
    issued before the first multiply. Per group the 16 halves of x to float32 once (used by both
    rows), and per row unpack_int8x4 on each of the four words into a 16-word bits buffer, read as
    float32 through bits.view(np.float32): weight e is f[e] - float32(MAGIC), times x's e-th value,
    summed in float32. Then warp_sum_rows; lane 0 of every warp writes its ROWS sums to a shared
    (MAX_WARPS, ROWS) array; after a barrier thread i < ROWS adds the warps' sums of row r0 + i and
    stores y = total * scales (the scale once a row, not once a weight); a second barrier before the
    shared sums are reused. No local memory.
    """
    # EXERCISE: split-K trips of INT8_UNROLL clamped groups (loads, x to float32, unpack, FMAs); warp, then block sum
    rows = w_words.shape[0]
    groups = w_words.shape[1] // WORDS
    t = cuda.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    threads = cuda.blockDim.x
    partial = cuda.shared.array(PARTIALS, float32)  # (MAX_WARPS, ROWS): each warp's row sums
    acc = cuda.local.array(ROWS, float32)
    wbuf = cuda.local.array(W8_BUF, uint32)  # (ROWS, INT8_UNROLL, 4) words: 16 int8 each
    xbuf = cuda.local.array(X8_BUF, uint32)  # (INT8_UNROLL, 8) words: 16 halves each
    xh = xbuf.view(np.float16)
    xf = cuda.local.array(INT8_GROUP, float32)  # one group's x in float32, shared by the rows
    bits = cuda.local.array(INT8_GROUP, uint32)  # one row's group as float bit patterns MAGIC + b
    f = bits.view(np.float32)
    magic = float32(MAGIC)
    r0 = cuda.blockIdx.x * ROWS
    while r0 < rows:  # the same trip count for the whole block: every thread reaches both barriers
        for i in range(ROWS):
            acc[i] = float32(0.0)
        g = t
        while g < groups:
            # ROWS x INT8_UNROLL row loads (16 bytes of weights each) and 2 x INT8_UNROLL x loads in flight.
            for u in range(INT8_UNROLL):
                gu = min(g + u * threads, groups - 1)  # past the end: the last group again, weighted 0
                b = u * 2 * WORDS
                xbuf[b], xbuf[b + 1], xbuf[b + 2], xbuf[b + 3] = wide.load4(x_words, 2 * WORDS * gu)
                xbuf[b + 4], xbuf[b + 5], xbuf[b + 6], xbuf[b + 7] = wide.load4(x_words, 2 * WORDS * gu + WORDS)
                for i in range(ROWS):
                    r = min(r0 + i, rows - 1)
                    b = (i * INT8_UNROLL + u) * WORDS
                    wbuf[b], wbuf[b + 1], wbuf[b + 2], wbuf[b + 3] = wide.load4(w_words, r, WORDS * gu)
            for u in range(INT8_UNROLL):
                keep = float32(1.0) if g + u * threads < groups else float32(0.0)
                for e in range(INT8_GROUP):
                    xf[e] = float32(xh[u * INT8_GROUP + e])
                for i in range(ROWS):
                    for q in range(WORDS):
                        unpack_int8x4(wbuf[(i * INT8_UNROLL + u) * WORDS + q], bits, 4 * q)
                    part = float32(0.0)
                    for e in range(INT8_GROUP):
                        part += (f[e] - magic) * xf[e]  # exact: the weight itself, as float32
                    acc[i] += part * keep  # one FMA a group: a clamped (repeated) group counts 0
            g += INT8_UNROLL * threads
        warp_sum_rows(acc)
        if lane == 0:
            for i in range(ROWS):
                partial[warp * ROWS + i] = acc[i]
        cuda.syncthreads()  # every warp's sums in shared memory
        if t < ROWS and r0 + t < rows:
            total = float32(0.0)
            for v in range(threads // WARP):
                total += partial[v * ROWS + t]
            y[r0 + t] = total * scales[r0 + t]  # the row's scale, once
        cuda.syncthreads()  # the sums are read before the next row pair overwrites them
        r0 += cuda.gridDim.x * ROWS


_SIG_ROWS = "void({w}[:, ::1], float32[::1], float16[::1], float32[::1])"
KERNELS = {
    "naive": (dequantize_kernel, "void(int8[:, ::1], float32[::1], float16[:, ::1])"),
    "naive.gemv": (fp16_gemv_kernel, "void(uint32[:, ::1], uint32[::1], float32[::1])"),
    "fp16_gemv": (fp16_gemv_kernel, "void(uint32[:, ::1], uint32[::1], float32[::1])"),
    "fp16_gemv.rows": (gemv_rows_kernel, _SIG_ROWS.format(w="float16")),
    "optimized": (int8_gemv_kernel, "void(uint32[:, ::1], float32[::1], uint32[::1], float32[::1])"),
    "optimized.rows": (gemv_rows_kernel, _SIG_ROWS.format(w="int8")),
}


# ---- host ---------------------------------------------------------------------------------------------

def _grid(rows: int) -> int:
    """One warp per row pair where the GPU holds them (BLOCKS_PER_SM blocks an SM), grid-stride past that."""
    return launch.grid_stride_blocks(-(-rows // ROWS) * WARP, THREADS, BLOCKS_PER_SM)


def _split_threads(groups: int) -> int:
    """The split-K block of optimized: enough warps that each lane covers its share of a row's groups
    in LANE_TRIPS trips of INT8_UNROLL (at least one warp, at most MAX_WARPS)."""
    warps = -(-groups // (WARP * INT8_UNROLL * LANE_TRIPS))
    return WARP * max(1, min(MAX_WARPS, warps))


def _wide(group: int, *arrays) -> bool:
    """16-byte rows: in a multiple of the group, and every array starting on a 16-byte boundary."""
    return arrays[0].shape[1] % group == 0 and all(_address(a) % 16 == 0 for a in arrays)


def _fp16_gemv(d_w16, d_x, y):
    """W16 x into y (float32): 16-byte loads where the rows allow, else one element at a time."""
    rows = d_w16.shape[0]
    if _wide(FP16_GROUP, d_w16, d_x):
        fp16_gemv_kernel[_grid(rows), THREADS](d_w16.view(np.uint32), d_x.view(np.uint32), y)
    else:  # in not a multiple of 8 (no real model's): unscaled, so scales of one
        (ones,) = launch.to_device(np.ones(rows, np.float32))
        gemv_rows_kernel[_grid(rows), THREADS](d_w16, ones, d_x, y)


def naive(w, scales, w16, x):
    check_inputs(w, scales, w16, x)
    d_w, d_s, d_x = launch.to_device(w, scales, x)
    rows, cols = w.shape
    w16_copy = launch.empty((rows, cols), np.float16)  # the full-size intermediate the int8 was to avoid
    dequantize_kernel[launch.grid_stride_blocks(rows * DEQUANT_THREADS, DEQUANT_THREADS), DEQUANT_THREADS](
        d_w, d_s, w16_copy)
    y = launch.empty((rows,), np.float32)
    _fp16_gemv(w16_copy, d_x, y)
    return launch.result(y, w, scales, x)


def fp16_gemv(w, scales, w16, x):
    check_inputs(w, scales, w16, x)
    d_w16, d_x = launch.to_device(w16, x)
    y = launch.empty((w16.shape[0],), np.float32)
    _fp16_gemv(d_w16, d_x, y)
    return launch.result(y, w16, x)


def optimized(w, scales, w16, x):
    check_inputs(w, scales, w16, x)
    d_w, d_s, d_x = launch.to_device(w, scales, x)
    rows = w.shape[0]
    y = launch.empty((rows,), np.float32)
    if _wide(INT8_GROUP, d_w, d_x):
        threads = _split_threads(w.shape[1] // INT8_GROUP)
        blocks = launch.grid_stride_blocks(-(-rows // ROWS), 1, SPLIT_BLOCKS_PER_SM)
        int8_gemv_kernel[blocks, threads](d_w.view(np.uint32), d_s, d_x.view(np.uint32), y)
    else:  # in not a multiple of 16: one weight at a time (float32(int8): the slow conversion, rare here)
        gemv_rows_kernel[_grid(rows), THREADS](d_w, d_s, d_x, y)
    return launch.result(y, w, scales, x)


def library(w, scales, w16, x):
    """torch on the GPU: torch.mv(W16, x) in float16 (cuBLAS's GEMV), then .float() for a float32 y;
    zero-copy from device arrays. What a PyTorch model runs for an unquantized layer at batch 1."""
    import torch

    check_inputs(w, scales, w16, x)
    tw, tx = (torch.as_tensor(a, device="cuda") for a in (w16, x))
    y = torch.mv(tw, tx).float()
    return y.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(y)
