"""Day 59 exercise: RMSNorm fused with the residual add -- new_residual = x + residual,
out = new_residual / sqrt(mean(new_residual^2) + eps) * weight, along the last axis; x, residual
(rows, cols) and weight (cols,) all float32 or all float16, both outputs in that dtype, every sum in
float32. What a transformer block does between its sublayers (vLLM's fused_add_rms_norm).

v1 naive      two kernels. An elementwise add writes new_residual to memory; then an RMSNorm kernel,
              a block per row, reads it back twice (a sum-of-squares sweep, then a sweep writing out).
              The sum makes a round trip through DRAM: 3 reads + 2 writes of the row's bytes.
v2 optimized  one kernel, a block of 256 threads per row (block-stride over the rows): x and residual
              read once and added in registers (the row held there when cols <= 16 x the block), the
              weight read once per block and kept in registers for all its rows; new_residual written,
              the sum of squares reduced in float32 (shuffles + one shared slot a warp), out written
              from the registers. 2 reads + 2 writes: the least this job can move. float32 rows whose
              length is a multiple of 4 (every real model's) go through 16-byte loads and stores
              (course.wide.load4); float16 rows of a multiple of 8 and up to 4096 halves through 16-byte
              accesses of eight halves (wide.load8 / store8, the half8 kernel); other lengths (and longer
              float16 rows) use one 2- or 4-byte access an element.
library       torch: new_residual = x + residual; torch.nn.functional.rms_norm(new_residual, (cols,),
              weight, eps) (written as torch ops where rms_norm is missing).

The rounding rule (torch's and vLLM's): new_residual is x + residual rounded to the dtype, and out is
computed from that rounded value (what the next layer will read as its residual), in float32.
float16 is why the sums must be float32: a row of values ~300 has squares of 9e4, already past
float16's largest finite 65504, and 4096 of them sum to ~4e8; in float32 both are ordinary numbers.

Row in registers: each thread holds ITEMS = 16 float32 sums and 16 weights (as 4 groups of 4 on the
16-byte path), so rows up to 16 x 256 = 4096 elements (Llama's hidden size) stay in registers (~80
registers a thread, 3 blocks an SM: 768 threads x 32 loads in flight, ~100 KB an SM). Short rows
leave most of the block idle (a row of 5 uses 5 threads): day 57's warp per row is the fix there. Longer
rows (5120, 8192) are swept in chunks of that size: new_residual is written as each chunk is added
and read back for the output, a re-read the block has just written (from L2, not DRAM, but one more
read through L1: say 3 reads + 2 writes there).

Napkin math (H200, device copy ~4.2 TB/s read + write). Per element, bytes through DRAM:
              float32   float16
  naive         20        10      x, residual read; new_residual written, read back; out written
  optimized     16         8      x, residual read; new_residual, out written (+ the weight, once)
(the naive RMSNorm's second sweep is an L1/L2 hit: the simulator's sector counts show 24 and 12 bytes
through L1). At (16384, 4096), 67M elements: float32 1.07 GB fused, ~0.26 ms at the copy rate, naive
~0.32 ms; float16 half of each. ~5 FLOPs an element: memory-bound by far.
Bytes in flight (Little's law wants ~30 KB an SM: 4.2 TB/s / 132 SMs x ~1 us). float32: 8 loads of
16 B a thread (x and residual, 4 groups each), 3 blocks x 256 threads an SM: 96 KB, past what 90 % needs;
the 2.2 points it misses are not bytes in flight (the barrier a row and the stores' tail are the suspects).
float16 before: 32 loads of 2 B a thread = 48 KB an SM but in 2-byte requests (64 B a warp): the load
instructions, not the bytes, were the limit. The half8 kernel: 4 loads of 16 B a thread (48 KB an SM,
512 B a warp request), a quarter of float32's instructions per byte.
Since the measurements below: one barrier a row (slots double-buffered by parity, day 57) in both 16-byte
kernels, and the half8 kernel at 4 blocks an SM (launch bound (256, BLOCKS_PER_SM16): 64 registers, no
spill); float32 at 4 blocks needs WEIGHT_HELD = False (the weight from L1 with each row's output, 62
registers). Re-measured with both on the H200 (2026-12-05, copy 4202 GB/s): float32 280.6 us, 91.1 %
(met), 1.30x faster than torch (365.3 us); float16 145.0 us, 88.1 % (missed by 1.9 points), 1.25x
faster than torch (181.0 us). The lesson has the table.
Targets: the optimized version >= 90 % of the copy rate at (16384, 4096) in both dtypes, faster than
torch's add + rms_norm (two kernels, at least 5 passes). Measured on the H200 (device copy 4225 GB/s in
the same run):
  float32  289.4 us, 3,711 GB/s, 87.8 % of copy (missed by 2.2 points), 2.28x naive (659.6 us), 1.27x
           faster than torch (367.6 us, 69.2 %): faster than torch met.
  float16  142.0 us, 3,780 GB/s, 89.5 % (missed by 0.5 point), 3.79x naive (538.9 us), 1.26x faster
           than torch (179.6 us, 70.8 %): faster than torch met. The half8 kernel (16-byte accesses of
           eight halves) is 1.33x faster than the previous 2-byte path (189.0 us, 67.8 %, 5 % behind
           torch, in an earlier H200 run): the load and store instructions were the limit there; float16
           now reaches float32's share of the copy rate (89.5 against 87.8 %).

What you write (each raises NotImplementedError with its hint until you do):
  add_kernel                      grid-stride loop over i: new_residual[i] = float32(x[i]) + float32(residual[i]) (4
                                  lines)
  rmsnorm_kernel                  per row: a float32 sum-of-squares sweep, block_sum, then a sweep writing out (14
                                  lines)
  add_chunk                       ITEMS loads and adds into held (no stores; unguarded when the chunk fits), then
                                  stores and squares (15 lines)
  fused_add_rmsnorm_kernel        weights into w once; per row add_chunk, block_sum, inv, then out from held and w
                                  (12 lines)
  fused_add_rmsnorm_wide_kernel   the same with 16-byte groups: wide.load4 / wide.store4 at column VEC * g (34
                                  lines)
  fused_add_rmsnorm_half8_kernel  per row: the four wide.load8 first (clamped), float16-rounded sums, store8,
                                  squares, block_sum, store8 (31 lines)
Everything else in this file is given. Grade with:  make check DAY=59
"""

import math

import numpy as np

from course import DEVICE, cuda, launch, wide
from numba import float32, uint64
from numba.types import float16
from solutions.day25_reduction_last_warp import FULL_MASK, WARP, warp_sum
from solutions.day26_reduction_grid_stride import _address

TITLE = "RMSNorm fused with the residual add"
MEMORY_SPACE = "register + shared"
VERSIONS = ("naive", "optimized")
# (rows, cols[, dtype]): a row of one element; rows shorter than a warp; a block -1 and +1 (odd: the
# per-element path); a multiple of 4 (the 16-byte path); one past a row held in registers (the chunked
# path); each in float32 and float16.
TEST_SIZES = ((4, 1), (3, 3, "float16"), (5, 5), (2, 255, "float16"), (2, 257), (3, 1024),
              (2, 1024, "float16"), (1, 4097, "float16"), (1, 4100))
BENCH_SIZES = ((16384, 4096), (16384, 4096, "float16"))  # 256 MB (128 MB) an array: ~4x the 60 MB L2
BOUND = "memory"
DTYPES = (np.float32, np.float16)
EPS = 1e-5  # Llama's rms_norm_eps
THREADS = 256  # a block per row; the stride between a thread's columns, a constant
MAX_WARPS = THREADS // WARP
ITEMS = 16  # elements a thread holds: 16 sums + 16 weights in registers
VEC = wide.WIDTH  # floats in one 16-byte access
GROUPS = ITEMS // VEC  # 16-byte groups a thread holds on the wide path
VEC16 = wide.WIDTH16  # halves in one 16-byte access (wide.load8 / store8)
GROUPS16 = ITEMS // VEC16  # 16-byte groups of halves a thread holds: 2, rows up to 4096 halves
assert GROUPS16 == 2  # the half8 kernel writes its two groups' loads out by hand (all four in flight)
BLOCKS_PER_SM = 3  # 3 x 256 threads at ~80 registers a thread (ptxas): the whole grid resident at once
# CUDA C's __launch_bounds__(THREADS, BLOCKS_PER_SM) on the 16-byte kernels: the compiler keeps a thread to
# 65536 / (BLOCKS_PER_SM x 256) registers, so that many blocks fit an SM (the simulator takes none).
_BOUNDS = {"launch_bounds": (THREADS, BLOCKS_PER_SM)} if DEVICE.kind != "sim" else {}
# The float16 kernel holds the same 16 floats a thread: 4 blocks an SM fit its 64 registers with no spill
# (4 x 256 threads x 2 x 16 B = 32 KB of loads an SM at once, a third more rows in flight than 3 blocks).
BLOCKS_PER_SM16 = 4
_BOUNDS16 = {"launch_bounds": (THREADS, BLOCKS_PER_SM16)} if DEVICE.kind != "sim" else {}
# The float32 kernel's weight: held in registers for all the block's rows (True: read once a block), or
# read with each row's output from L1 (False: 16 registers a thread fewer, for BLOCKS_PER_SM = 4).
WEIGHT_HELD = True


def sizes(n):
    """(rows, cols, dtype) from n = (rows, cols) (float32) or (rows, cols, "float16")."""
    rows, cols = n[0], n[1]
    return rows, cols, np.dtype(n[2] if len(n) > 2 else np.float32)


def make_inputs(n, seed: int = 0):
    """(x, residual, weight, eps). Rows of very different scales (the sum's rms from ~1e-3, where eps
    matters, to ~300 in float16, whose squares overflow float16), a weight around 1 with random signs."""
    rows, cols, dtype = sizes(n)
    rng = np.random.default_rng(seed)
    top = 300.0 if dtype == np.float16 else 1e3
    scale = np.exp(rng.uniform(np.log(1e-3), np.log(top), size=(rows, 1)))
    x = (rng.standard_normal((rows, cols)) * scale).astype(dtype)
    residual = (rng.standard_normal((rows, cols)) * scale).astype(dtype)
    weight = (rng.uniform(0.5, 1.5, cols) * rng.choice([-1.0, 1.0], cols)).astype(dtype)
    return x, residual, weight, EPS


def hard_inputs(kind: str, n):
    """(x, residual, weight, eps) in float16 of shape n = (rows, cols): "overflow" rows whose sum is
    ~+-300 everywhere (300^2 = 9e4 > 65504: a square or a sum of squares taken in float16 is inf, yet
    every output is an ordinary number); "tiny" rows of ~1e-3 (mean square 1e-6 < eps: where eps
    goes matters); "cancel" rows where residual = -x (new_residual 0, out 0, no NaN)."""
    rows, cols = n
    rng = np.random.default_rng(cols * 7919 + rows)
    if kind == "overflow":
        x = rng.uniform(140.0, 160.0, (rows, cols)) * rng.choice([-1.0, 1.0], (rows, cols))
        residual = x * rng.uniform(0.9, 1.1, (rows, cols))
    elif kind == "tiny":
        x = rng.standard_normal((rows, cols)) * 1e-3
        residual = rng.standard_normal((rows, cols)) * 1e-3
    elif kind == "cancel":
        x = rng.standard_normal((rows, cols)) * 10.0
        residual = -x
    else:
        raise ValueError(f"kind: expected one of {HARD_KINDS}, got {kind!r}")
    weight = rng.uniform(0.5, 1.5, cols)
    return x.astype(np.float16), residual.astype(np.float16), weight.astype(np.float16), EPS


HARD_KINDS = ("overflow", "tiny", "cancel")


def reference(x, residual, weight, eps):
    """(out, new_residual): the sum rounded to the dtype (as torch stores it), then RMSNorm in float64."""
    new_residual = (x.astype(np.float64) + residual.astype(np.float64)).astype(x.dtype)
    v = new_residual.astype(np.float64)
    inv = 1.0 / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)
    out = (v * inv * weight.astype(np.float64)).astype(x.dtype)
    return out, new_residual


def traffic(x, residual, weight, eps):
    """(minimum bytes through device memory, FLOPs): x and residual read once, new_residual and out
    written once, the weight read once; ~5 FLOPs an element (add, square-add, two multiplies)."""
    return 4 * x.size * x.dtype.itemsize + weight.size * weight.dtype.itemsize, 5 * x.size


def check_inputs(x, residual, weight, eps):
    launch.check_array("x", x, dtype=DTYPES, ndim=2)
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(x.shape)}")
    launch.check_array("residual", residual, dtype=x.dtype, shape=(rows, cols))
    launch.check_array("weight", weight, dtype=x.dtype, shape=(cols,))
    if not isinstance(eps, (float, int, np.floating)) or not eps >= 0:
        raise ValueError(f"eps: expected a number >= 0, got {eps!r}")


# ---- the pieces both versions share ----------------------------------------------------------------

@cuda.jit(device=True)
def block_sum(v, slots):
    """The sum of v over the block (a whole number of warps, at most MAX_WARPS), returned to every
    thread: day 25's warp_sum in each warp, lane 0's total to a shared slot, one barrier, every warp
    folds the slots itself, the total broadcast from lane 0, and a barrier before the slots are reused."""
    lane = cuda.threadIdx.x % WARP
    v = warp_sum(v)
    if lane == 0:
        slots[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    v = warp_sum(slots[lane] if lane < cuda.blockDim.x // WARP else float32(0.0))
    v = cuda.shfl_sync(FULL_MASK, v, 0)
    cuda.syncthreads()  # WAR: every warp has read the slots before the next row's sum writes them
    return v


@cuda.jit(device=True)
def block_sum_parity(v, slots, p):
    """block_sum with ONE barrier: slots (2, MAX_WARPS), the row's sums in slots[p] with p the parity of
    the block's row count. A fast warp writing the next row's sum goes to the other half, so it never
    overwrites a slot a slow warp is still reading (the next row's barrier orders the reads of this half
    before the row after next writes it again): day 57's double-buffered slots."""
    lane = cuda.threadIdx.x % WARP
    v = warp_sum(v)
    if lane == 0:
        slots[p, cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    v = warp_sum(slots[p, lane] if lane < cuda.blockDim.x // WARP else float32(0.0))
    return cuda.shfl_sync(FULL_MASK, v, 0)


@cuda.jit(device=True)
def inv_rms(ss, cols, eps):
    """1 / sqrt(ss / cols + eps): the row's reciprocal root mean square, eps inside the root (torch's
    and Llama's definition: it bounds the scale of a row of near-zeros at 1 / sqrt(eps))."""
    return float32(1.0) / math.sqrt(ss / float32(cols) + eps)


# ---- v1: the add, then RMSNorm ---------------------------------------------------------------------

@cuda.jit
def add_kernel(x, residual, new_residual):  # all (size,), one dtype
    """Grid-stride elementwise: new_residual[i] = float32(x[i]) + float32(residual[i]), the store
    rounding it to the arrays' dtype (float16 arithmetic is a library call in Numba: the add is float32)."""
    raise NotImplementedError("Day 59: grid-stride loop over i: new_residual[i] = float32(x[i]) + float32(residual[i]) "
                              "(4 lines)")


@cuda.jit
def rmsnorm_kernel(h, weight, eps, out):  # h (rows, cols), weight (cols,), out (rows, cols)
    """A block per row (block-stride over the rows); thread t takes the elements t, t + blockDim, ...
    Sweep 1 sums float32(h)^2 (block_sum), inv = 1 / sqrt(sum / cols + eps); sweep 2 reads h again
    and writes out = float32(h) * inv * float32(weight)."""
    slots = cuda.shared.array(MAX_WARPS, float32)
    t = cuda.threadIdx.x
    cols = h.shape[1]
    r = cuda.blockIdx.x
    raise NotImplementedError("Day 59: per row: a float32 sum-of-squares sweep, block_sum, then a sweep writing out "
                              "(14 lines)")


# ---- v2: one kernel --------------------------------------------------------------------------------

@cuda.jit(device=True)
def rounded(s, half):
    """s rounded to the arrays' dtype, as torch stores x + residual: to float16 and back when half
    (cvt.rn.f16.f32, cvt.f32.f16), else s. half is the same for the whole grid: a uniform branch."""
    return float32(float16(s)) if half else s


@cuda.jit(device=True)
def add_chunk(xr, rr, nr, k0, cols, half, held):
    """Elements k0 + j * THREADS (j < ITEMS, those < cols; k0 and cols uint64) of one row: held[j] = the float32 sum
    float32(xr[k]) + float32(rr[k]) rounded to the arrays' dtype (rounded(s, half); 0 past the row);
    store nr[k] = held[j]; return the float32 sum of held[j]^2. All loads before any store: a store
    might alias a later load (the compiler cannot know), so loads placed after stores would wait for
    them, and only one pair would be in flight. And no branch around a load where the chunk lies inside
    the row (a branch ends the run of loads the compiler keeps in flight; the constant stride folds
    each j * THREADS into the load's offset, one address register an array); a thread whose chunk runs
    past the row's end guards each load instead."""
    raise NotImplementedError("Day 59: ITEMS loads and adds into held (no stores; unguarded when the chunk fits), then "
                              "stores and squares (15 lines)")


@cuda.jit
def fused_add_rmsnorm_kernel(x, residual, weight, eps, half, out, new_residual):  # (rows, cols) x4, weight (cols,)
    """One kernel, a block of THREADS per row (block-stride over the rows), float32 or float16 (half:
    True for float16) and any cols; thread t owns the columns t + j * THREADS (j < ITEMS), the same in
    every row. Indices are uint64 (k = ut + uint64(j * THREADS), compared with ucols = uint64(cols)).

    Rows of up to ITEMS * THREADS elements (a uniform branch): the weight of the thread's columns is
    read once, before the row loop, into w = cuda.local.array(ITEMS, float32) (constant-trip loops
    unroll, so it stays in registers); for each row, add_chunk(...) adds x and residual into held
    (another ITEMS registers) and writes new_residual; block_sum gives the row's sum of squares;
    inv = 1 / sqrt(sum / cols + eps); out = held * inv * w. Longer rows (given): add_chunk over chunks of
    ITEMS * THREADS columns, then a sweep reading new_residual back for out.
    """
    slots = cuda.shared.array(MAX_WARPS, float32)
    held = cuda.local.array(ITEMS, float32)
    w = cuda.local.array(ITEMS, float32)
    ut = uint64(cuda.threadIdx.x)
    rows, cols = x.shape
    ucols = uint64(cols)
    r = cuda.blockIdx.x
    if cols <= ITEMS * THREADS:
        raise NotImplementedError("Day 59: weights into w once; per row add_chunk, block_sum, inv, then out from held "
                                  "and w (12 lines)")
    else:
        while r < rows:
            nr = new_residual[r]
            ss = float32(0.0)
            k0 = ut
            while k0 < ucols:
                ss += add_chunk(x[r], residual[r], nr, k0, ucols, half, held)
                k0 += uint64(ITEMS * THREADS)
            inv = inv_rms(block_sum(ss, slots), cols, eps)
            orow = out[r]
            k = ut
            while k < ucols:  # new_residual read back: this block wrote it a moment ago (L2)
                orow[k] = float32(nr[k]) * inv * float32(weight[k])
                k += uint64(THREADS)
            r += cuda.gridDim.x


@cuda.jit(**_BOUNDS)
def fused_add_rmsnorm_wide_kernel(x, residual, weight, eps, out, new_residual):  # float32, cols % 4 == 0
    """fused_add_rmsnorm_kernel with 16-byte accesses: float32, cols a multiple of 4 and every array
    16-byte aligned (the host checks), so each row is vecs = cols / 4 aligned groups; thread t owns the
    groups g = t + j * THREADS (j < GROUPS), ITEMS floats in all, at column VEC * g.

    Rows of up to GROUPS * THREADS groups: the weight's groups once into w (wide.load4), then per row:
    all 2 * GROUPS loads of x and residual (wide.load4) into held before any store, with no branch
    around them (past the row: load group min(g, vecs - 1) and keep 0); the sums to
    new_residual (wide.store4) while summing squares; block_sum; out = held * inv * w (wide.store4).
    Longer rows (given): chunks of that size, new_residual read back for out.
    """
    slots = cuda.shared.array((2, MAX_WARPS), float32)  # double-buffered: one barrier a row
    held = cuda.local.array(ITEMS, float32)
    w = cuda.local.array(ITEMS, float32)
    ut = uint64(cuda.threadIdx.x)
    rows, cols = x.shape
    vecs = uint64(cols // VEC)
    last = vecs - uint64(1)
    r = cuda.blockIdx.x
    p = 0  # the parity of the block's row count: which half of the slots this row's sum uses
    if vecs <= GROUPS * THREADS:
        raise NotImplementedError("Day 59: the same with 16-byte groups: wide.load4 / wide.store4 at column VEC * g "
                                  "(34 lines)")
    else:
        while r < rows:
            ss = float32(0.0)
            g0 = ut
            while g0 < vecs:  # a chunk: up to GROUPS groups a thread, loads before stores
                for j in range(GROUPS):
                    g = g0 + uint64(j * THREADS)
                    gg = min(g, last)
                    a0, a1, a2, a3 = wide.load4(x, r, VEC * gg)
                    b0, b1, b2, b3 = wide.load4(residual, r, VEC * gg)
                    keep = g < vecs
                    held[VEC * j] = a0 + b0 if keep else float32(0.0)
                    held[VEC * j + 1] = a1 + b1 if keep else float32(0.0)
                    held[VEC * j + 2] = a2 + b2 if keep else float32(0.0)
                    held[VEC * j + 3] = a3 + b3 if keep else float32(0.0)
                for j in range(GROUPS):
                    g = g0 + uint64(j * THREADS)
                    if g < vecs:
                        h0, h1, h2, h3 = held[VEC * j], held[VEC * j + 1], held[VEC * j + 2], held[VEC * j + 3]
                        wide.store4(new_residual, r, VEC * g, (h0, h1, h2, h3))
                        ss += (h0 * h0 + h1 * h1) + (h2 * h2 + h3 * h3)
                g0 += uint64(GROUPS * THREADS)
            inv = inv_rms(block_sum_parity(ss, slots, p), cols, eps)
            p ^= 1
            g = ut
            while g < vecs:
                h0, h1, h2, h3 = wide.load4(new_residual, r, VEC * g)
                w0, w1, w2, w3 = wide.load4(weight, VEC * g)
                wide.store4(out, r, VEC * g, (h0 * inv * w0, h1 * inv * w1, h2 * inv * w2, h3 * inv * w3))
                g += uint64(THREADS)
            r += cuda.gridDim.x


@cuda.jit(**_BOUNDS16)
def fused_add_rmsnorm_half8_kernel(x, residual, weight, eps, out, new_residual):  # float16, cols % 8 == 0
    """fused_add_rmsnorm_wide_kernel for float16: 16-byte accesses of eight halves (wide.load8 /
    wide.store8), cols a multiple of 8, every array 16-byte aligned and cols <= ITEMS * THREADS (the host
    checks): thread t owns the groups g = t + j * THREADS (j < GROUPS16) at column VEC16 * g.

    The weight's groups once into w (float32); per row: all 2 * GROUPS16 loads of x and residual first
    (no branch: past the row, the last group again, its sums dropped), each sum rounded to float16
    (rounded(s, True): what torch stores and the next layer reads); new_residual (wide.store8) while
    summing the float32 squares; block_sum; out = held * inv * w (wide.store8)."""
    slots = cuda.shared.array((2, MAX_WARPS), float32)  # double-buffered: one barrier a row
    held = cuda.local.array(ITEMS, float32)
    w = cuda.local.array(ITEMS, float32)
    ut = uint64(cuda.threadIdx.x)
    rows, cols = x.shape
    vecs = uint64(cols // VEC16)
    last = vecs - uint64(1)
    r = cuda.blockIdx.x
    p = 0  # the parity of the block's row count: which half of the slots this row's sum uses
    for j in range(GROUPS16):
        g = ut + uint64(j * THREADS)
        gg = min(g, last)
        v = wide.load8(weight, VEC16 * gg)
        for e in range(VEC16):
            w[VEC16 * j + e] = float32(v[e])
    raise NotImplementedError("Day 59: per row: the four wide.load8 first (clamped), float16-rounded sums, store8, "
                              "squares, block_sum, store8 (31 lines)")


_SIG_NAIVE_ADD = "void({t}[::1], {t}[::1], {t}[::1])"
_SIG_NAIVE_NORM = "void({t}[:, ::1], {t}[::1], float32, {t}[:, ::1])"
_SIG_FUSED = "void({t}[:, ::1], {t}[:, ::1], {t}[::1], float32, {t}[:, ::1], {t}[:, ::1])"
_SIG_FUSED_ANY = "void({t}[:, ::1], {t}[:, ::1], {t}[::1], float32, boolean, {t}[:, ::1], {t}[:, ::1])"
KERNELS = {
    "naive.add": (add_kernel, _SIG_NAIVE_ADD.format(t="float32")),
    "naive.rmsnorm": (rmsnorm_kernel, _SIG_NAIVE_NORM.format(t="float32")),
    "naive.add.fp16": (add_kernel, _SIG_NAIVE_ADD.format(t="float16")),
    "naive.rmsnorm.fp16": (rmsnorm_kernel, _SIG_NAIVE_NORM.format(t="float16")),
    "optimized": (fused_add_rmsnorm_wide_kernel, _SIG_FUSED.format(t="float32")),
    "optimized.fp16": (fused_add_rmsnorm_half8_kernel, _SIG_FUSED.format(t="float16")),
    "optimized.any": (fused_add_rmsnorm_kernel, _SIG_FUSED_ANY.format(t="float16")),
}


def _grid(rows: int, blocks_per_sm: int = BLOCKS_PER_SM) -> int:
    """A block per row, as many blocks as the GPU holds at once; each block strides over the rows."""
    return launch.grid_stride_blocks(rows * THREADS, THREADS, blocks_per_sm)


def naive(x, residual, weight, eps):
    check_inputs(x, residual, weight, eps)
    d_x, d_res, d_w = launch.to_device(x, residual, weight)
    rows, cols = x.shape
    new_residual = launch.empty((rows, cols), x.dtype)
    out = launch.empty((rows, cols), x.dtype)
    size = rows * cols
    add_kernel[launch.grid_stride_blocks(size, THREADS), THREADS](
        d_x.reshape(size), d_res.reshape(size), new_residual.reshape(size))
    rmsnorm_kernel[_grid(rows), THREADS](new_residual, d_w, np.float32(eps), out)
    return launch.result(out, x), launch.result(new_residual, x)


def optimized(x, residual, weight, eps):
    check_inputs(x, residual, weight, eps)
    d_x, d_res, d_w = launch.to_device(x, residual, weight)
    rows, cols = x.shape
    new_residual = launch.empty((rows, cols), x.dtype)
    out = launch.empty((rows, cols), x.dtype)
    arrays = (d_x, d_res, d_w, out, new_residual)
    aligned = all(_address(a) % 16 == 0 for a in arrays)
    if x.dtype == np.float32 and cols % VEC == 0 and aligned:
        fused_add_rmsnorm_wide_kernel[_grid(rows), THREADS](
            d_x, d_res, d_w, np.float32(eps), out, new_residual)
    elif x.dtype == np.float16 and cols % VEC16 == 0 and cols <= ITEMS * THREADS and aligned:
        fused_add_rmsnorm_half8_kernel[_grid(rows, BLOCKS_PER_SM16), THREADS](
            d_x, d_res, d_w, np.float32(eps), out, new_residual)
    else:  # rows off the 16-byte grid, longer float16 rows: one 2- or 4-byte access an element
        fused_add_rmsnorm_kernel[_grid(rows), THREADS](
            d_x, d_res, d_w, np.float32(eps), bool(x.dtype == np.float16), out, new_residual)
    return launch.result(out, x), launch.result(new_residual, x)


def library(x, residual, weight, eps):
    """torch on the GPU: new_residual = x + residual, then torch.nn.functional.rms_norm (two kernels,
    what a PyTorch model runs unfused); zero-copy from device arrays."""
    import torch

    tx, tr, tw = (torch.as_tensor(a, device="cuda") for a in (x, residual, weight))
    h = tx + tr
    rms_norm = getattr(torch.nn.functional, "rms_norm", None)
    if rms_norm is not None:
        out = rms_norm(h, (h.shape[-1],), tw, eps)
    else:  # torch < 2.4: the same in float32 ops
        hf = h.float()
        out = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * tw.float()).to(h.dtype)
    if isinstance(x, np.ndarray):
        return out.cpu().numpy(), h.cpu().numpy()
    return cuda.as_cuda_array(out), cuda.as_cuda_array(h)
