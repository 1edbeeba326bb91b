"""Day 57 exercise: softmax II, one row per warp, per block -- out[r, :] = softmax(x[r, :]) along the last axis,
x float32 (rows, cols), out float32 (rows, cols): day 56's problem and its masked-row rule (a -inf logit
gives 0, a row all -inf gives all 0), with the row read from global memory ONCE and held in registers.

v1 naive       a row per thread: one thread walks its whole row, day 56's (m, s) recurrence over it, then
               a second walk to write. Neighbouring threads read addresses a row apart (every load of a
               warp touches 32 lines: uncoalesced), and the row is serial: a short row gives few threads,
               a long one a long chain.
v2 warp_rows   a row per warp, for rows of up to WARP_COLS = 1024 floats: lane l holds 16-byte groups
               l, l + 32, ... of the row in registers (a buffer of 4, 8, 16 or 32 floats, one kernel
               per size; 4-byte loads of elements l, l + 32, ... where rows are not on the 16-byte
               grid), the max and the sum by five xor shuffles each (every lane gets the result),
               no shared memory, no barrier, and no second read of x: the output is written from the
               registers. Longer rows: ValueError (a warp cannot hold them; `optimized` dispatches).
v3 block_rows  a row per block, for rows of up to BLOCK_COLS = 32768 floats: up to 1024 threads x 32
               floats hold the row; each thread's (m, s) pair from its own floats, merged by warp
               shuffles and one slot a warp in shared memory (double-buffered by the row's parity:
               one barrier a row); then the output from the registers. One read and one write.
               Longer rows: ValueError (`optimized` hands them to day 56's online kernel).
v4 optimized   the dispatch by cols: warp_rows up to 1024, block_rows up to 32768, day 56's online
               kernel beyond (rows of 128k floats: two reads, the second mostly from L2).
library        torch.softmax(x, dim=-1) on the GPU (a row of the benchmark table where torch is installed).

Held in registers means a per-thread buffer of a size known when the kernel compiles
(cuda.local.array(VEC * groups) indexed only by unrolled `for j in range(groups)` loops): a runtime
index would put it on the stack (local memory, day 12). So each size class is its own kernel, built by
a factory keyed by the groups a thread holds (day 49's make_chains_kernel), and the host picks the
smallest class that holds the row: no thread holds more than twice what its row needs.

Napkin math (H200, device copy ~4.2 TB/s read + write). Per element 4 bytes read + 4 written = 8 bytes,
the minimum (day 56's online kernel moves 12 through L1/L2: two reads and a write), ~5 FLOPs.
  (32768, 1024)  128 MB in + 128 MB out: ~64 us at the copy rate. A warp per 4 KB row: each lane issues
                 its eight 16-byte loads back to back (128 B a lane in flight; 64 warps an SM at <= 32
                 floats + ~20 registers: 256 KB in flight an SM, far past the ~40 KB the latency needs).
  (4096, 32768)  512 MB in + 512 MB out: ~0.25 ms. A block of 1024 threads x 32 floats holds a 128 KB
                 row: half the SM's register file, so one row at a time an SM, the next row's loads
                 issued as soon as this row's stores are (stores do not stall the thread). Day 56 read
                 that row twice; here the second read is gone, wherever L2 would have missed.
  > 32768        the online kernel's 12 bytes (the second read from L2 when it hits).
Each held version takes only the rows it can hold: warp_rows raises ValueError past WARP_COLS and
block_rows past BLOCK_COLS (naming the limit and `optimized`), and bench_skip() leaves warp_rows out at
(4096, 32768), so every row of the benchmark table times the kernel it is named after.
Target: >= 90 % of the copy rate at both benchmark shapes, and faster than torch.softmax (60 % of copy
at 16384 x 4096 in the guide's measurement). Measured on the H200 (device copy 4257 GB/s in the same run):
  (32768, 1024)  optimized (= warp_rows) 71.1 us, 3,777 GB/s, 88.7 % of copy (missed by 1.3 points;
                 warp_rows alone 88.9 %), 10.08x naive, 1.33x faster than torch.softmax (94.7 us,
                 66.6 %); block_rows 82.5 us, 76.4 %.
  (4096, 32768)  optimized (= block_rows) 278.9 us, 3,850 GB/s, 91.1 % (met), 34.68x naive, 1.53x faster
                 than torch (426.4 us, 59.6 %) and 1.57x faster than day 56's online kernel (437.2 us in
                 an earlier H200 run). warp_rows raises past 1024 floats, so it has no row there
                 (bench_skip names the reason).

What you write (each raises NotImplementedError with its hint until you do):
  warp_allmax                                       five xor-shuffle steps (offsets 16, 8, 4, 2, 1), each v = max(v,
                                                    the partner's v) (6 lines)
  warp_allsum                                       five xor-shuffle steps (offsets 16, 8, 4, 2, 1), each v += the
                                                    partner's v (6 lines)
  softmax_row_per_thread_kernel                     grid-stride over rows; per row, a read walk with merge(m, s, v,
                                                    1), then a write walk (12 lines)
  _hold_and_exp.hold_and_exp                        hold the row in buf (all loads first, -inf past cols), m =
                                                    reduce_max(max), exp in place, the sum (24 lines)
  make_warp_rows_kernel.softmax_warp_rows_kernel    hold the row and exp it (hold_and_exp), the warp's sum, inv, the
                                                    stores (store_scaled) (4 lines)
  make_block_rows_kernel.softmax_block_rows_kernel  warp_merge, lane 0 to the slots of parity p, one barrier, every
                                                    warp merges them; the stores (15 lines)
  optimized                                         check x; pick _warp_rows, _block_rows or online by x.shape[1]
                                                    (WARP_COLS, BLOCK_COLS) (7 lines)
Everything else in this file is given. Grade with:  make check DAY=57
"""

import functools
import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch, wide
from numba import float32, int64
from solutions.day25_reduction_last_warp import FULL_MASK, WARP
from solutions.day26_reduction_grid_stride import _address
from solutions.day56_softmax_online import (  # noqa: F401  (day 56's problem: the graders read these)
    HARD_KINDS,
    NEG_INF,
    RTOL,
    check_input,
    hard_inputs,
    make_inputs,
    max_or_zero,
    merge,
    reference,
    traffic,
    warp_merge,
)
from solutions.day56_softmax_online import optimized as online

TITLE = "Softmax II: one row per warp, per block"
MEMORY_SPACE = "register + shared"
VERSIONS = ("naive", "warp_rows", "block_rows", "optimized")
VEC = wide.WIDTH  # floats in one 16-byte load
WARP_COLS = 1024  # longest row a warp holds: 32 lanes x 32 floats
BLOCK_COLS = 32768  # longest row a block holds: 1024 threads x 32 floats
WARP_GROUPS = (1, 2, 4, 8)  # 16-byte groups a lane holds: rows of up to 128, 256, 512, 1024 floats
# (threads, groups a thread): rows of up to 1024, 4096, 8192, 16384, 32768 floats. 16 floats a thread
# while the block can still grow; only the last class holds 32, at 1024 threads (64 registers at most).
BLOCK_CLASSES = ((128, 2), (256, 4), (512, 4), (1024, 4), (1024, 8))
ROW_WARPS = 8  # the warp kernel: 8 warps (8 rows) a block of 256 threads
NAIVE_THREADS = 128
# (rows, cols): one element; a row shorter than a warp (3, 31) and one longer (33); the warp limit +1
# (the first block row); the first block class's limit +1; the warp limit -1 and exactly; primes of
# rows. Odd cols take the 4-byte loads, multiples of 4 the 16-byte ones. warp_rows is graded on the
# sizes up to WARP_COLS (max_cols); the last size is one every version takes (the traffic table's).
# The block kernel's last class and the online fallback (32768 +- 1) are graded in the test file.
TEST_SIZES = ((1, 1), (5, 3), (7, 31), (3, 33), (1, 1025), (1, 4097), (2, 1023), (2, 1024))
# Attention scores of 1024 keys (4 KB rows: the warp kernel) and vocabulary rows of 32k (128 KB: the
# block kernel), 256 MB and 1 GB in all: 4x and 17x the 60 MB L2.
BENCH_SIZES = ((32768, 1024), (4096, 32768))
BOUND = "memory"


# ---- the warp's reductions: butterflies, every lane ends with the result -----------------------------

@cuda.jit(device=True)
def warp_allmax(v):
    """The max of v over the 32 lanes, in every lane: xor shuffles 16, 8, 4, 2, 1 (a butterfly: after
    the step with offset o, each lane holds the max of its aligned group of 2o lanes)."""
    raise NotImplementedError("Day 57: five xor-shuffle steps (offsets 16, 8, 4, 2, 1), each v = max(v, the partner's "
                              "v) (6 lines)")


@cuda.jit(device=True)
def warp_allsum(v):
    """The sum of v over the 32 lanes, in every lane (warp_allmax's butterfly with + for max)."""
    raise NotImplementedError("Day 57: five xor-shuffle steps (offsets 16, 8, 4, 2, 1), each v += the partner's v (6 "
                              "lines)")


# ---- v1: a row per thread ---------------------------------------------------------------------------

@cuda.jit
def softmax_row_per_thread_kernel(x, out):  # x (rows, cols), out (rows, cols)
    """Thread r = cuda.grid(1) (then += cuda.gridsize(1)) owns row r alone: one walk over the row with
    the running pair (m, s) = merge(m, s, x[r, k], 1) from (-inf, 0), then a second walk writing
    exp(x - max_or_zero(m)) * inv, inv = 1 / s or 0 when s is 0. (The contrast: a warp's 32 loads of a
    step lie a row apart, 32 lines for 128 useful bytes.)"""
    raise NotImplementedError("Day 57: grid-stride over rows; per row, a read walk with merge(m, s, v, 1), then a "
                              "write walk (12 lines)")


# ---- holding a row: the pieces both register kernels share -------------------------------------------
# Element k of a thread's buffer: with 16-byte loads, group j = k // 4 of the thread is the row's group
# (thread + stride j), its 4 floats in buf[4 j .. 4 j + 3]; with 4-byte loads (rows not on the 16-byte
# grid: cols not a multiple of 4, or a device view such as x[1:]) element k is the row's element
# thread + stride k. Either way a step of the warp reads consecutive addresses (coalesced), and every
# index into buf is a constant once the loops are unrolled.

def _hold_and_exp(wide_access: bool, groups: int, stride: int, reduce_max):
    """A device function for one size class: (xf, start, cols, i0, buf) -> (m, s). Loads the row's
    elements of the thread whose first index is i0 (lane or thread index) into buf, all loads first
    (-inf past the row); m = reduce_max(the thread's max) (the warp's max, or the thread's own);
    then every held value becomes exp(v - max_or_zero(m)) in place and s is the thread's sum of them."""
    held = VEC * groups

    @cuda.jit(device=True)
    def hold_and_exp(xf, start, cols, i0, buf):
        raise NotImplementedError("Day 57: hold the row in buf (all loads first, -inf past cols), m = reduce_max(max), "
                                  "exp in place, the sum (24 lines)")

    return hold_and_exp


def _store_scaled(wide_access: bool, groups: int, stride: int):
    """A device function (outf, start, cols, i0, buf, scale): buf * scale back to the elements it was
    loaded from (16-byte stores for the 16-byte layout), nothing past the row."""
    held = VEC * groups

    @cuda.jit(device=True)
    def store_scaled(outf, start, cols, i0, buf, scale):
        if wide_access:
            for j in range(groups):
                c = VEC * (i0 + stride * j)
                if c < cols:
                    wide.store4(outf, start + c, (buf[VEC * j] * scale, buf[VEC * j + 1] * scale,
                                                  buf[VEC * j + 2] * scale, buf[VEC * j + 3] * scale))
        else:
            for k in range(held):
                c = i0 + stride * k
                if c < cols:
                    outf[start + c] = buf[k] * scale

    return store_scaled


@cuda.jit(device=True)
def own_max(m):
    """The block kernel's first max is the thread's own (the block merges (m, s) pairs afterwards)."""
    return m


# ---- v2: a row per warp, held in registers ----------------------------------------------------------

@functools.cache
def make_warp_rows_kernel(groups: int, wide_access: bool = True):
    """The warp kernel for rows of up to WARP * VEC * groups floats: each lane holds VEC * groups floats
    (a compile-time constant: with constant indices after unrolling, the buffer is registers).
    wide_access: 16-byte loads and stores (every row on the 16-byte grid), else 4-byte ones."""
    held = VEC * groups  # floats a lane holds (a Python int: the kernel sees a constant)
    hold_and_exp = _hold_and_exp(wide_access, groups, WARP, warp_allmax)
    store_scaled = _store_scaled(wide_access, groups, WARP)

    @cuda.jit
    def softmax_warp_rows_kernel(xf, rows, cols, outf):  # xf (rows * cols,) = x flat, outf the same
        """Warp w of block b takes row r = b * ROW_WARPS + w (then += gridDim.x * ROW_WARPS); the whole
        warp has the same row, so its shuffles run with every lane. Lane l holds its share of the row
        in buf = cuda.local.array(held, float32) (hold_and_exp with warp_allmax: every lane gets the
        row max m, its buffer becomes exp(v - max_or_zero(m)), s its sum); s = warp_allsum(s); the
        output is stored from the registers, times inv = 1 / s or 0 when s is 0 (a row all -inf).
        x is read once; nothing is shared; no barrier."""
        buf = cuda.local.array(held, float32)  # constant size, constant indices: registers
        lane = cuda.threadIdx.x % WARP
        r = cuda.blockIdx.x * ROW_WARPS + cuda.threadIdx.x // WARP
        while r < rows:
            start = int64(r) * cols
            raise NotImplementedError("Day 57: hold the row and exp it (hold_and_exp), the warp's sum, inv, the stores "
                                      "(store_scaled) (4 lines)")
            r += cuda.gridDim.x * ROW_WARPS

    return softmax_warp_rows_kernel


# ---- v3: a row per block, held in registers ---------------------------------------------------------

@functools.cache
def make_block_rows_kernel(threads: int, groups: int, wide_access: bool = True):
    """The block kernel for rows of up to threads * VEC * groups floats. launch_bounds tells the
    compiler the block size (CUDA C's __launch_bounds__): at 1024 threads a thread may use 64
    registers at most (65536 an SM), or the launch fails for want of registers."""
    warps = threads // WARP
    held = VEC * groups  # floats a thread holds
    hold_and_exp = _hold_and_exp(wide_access, groups, threads, own_max)
    store_scaled = _store_scaled(wide_access, groups, threads)
    # (the simulator's jit takes no launch bounds: it has no registers to budget)
    bounds = {"launch_bounds": threads} if DEVICE.kind != "sim" else {}

    @cuda.jit(**bounds)
    def softmax_block_rows_kernel(xf, rows, cols, outf):  # xf (rows * cols,) = x flat, outf the same
        """Block b takes row r = b (then += gridDim.x). Thread t holds its share of the row in buf and
        its own pair (m, s) from it (hold_and_exp with own_max: buf becomes exp(v - max_or_zero(m))).

        The block's pairs: warp_merge (day 56) in each warp, lane 0 writes the warp's pair to
        slot_m[p, warp], slot_s[p, warp] with p the parity of the block's row count, ONE barrier, then
        every warp merges the `warps` slots of p itself (lanes past them (-inf, 0)) and takes the
        result from lane 0: the row's (M, S). The slots alternate between rows, so a fast warp writing
        the next row's pair never overwrites one a slow warp is still reading (the barrier of the row
        between orders them), and no second barrier is needed.

        Output: buf * exp(m - max_or_zero(M)) * inv, inv = 1 / S or 0 when S is 0 (the thread's
        exp(v - max_or_zero(m)) rescaled to the row max: one exp per element in all).
        """
        slot_m = cuda.shared.array((2, warps), float32)
        slot_s = cuda.shared.array((2, warps), float32)
        buf = cuda.local.array(held, float32)  # registers, as in the warp kernel
        t = cuda.threadIdx.x
        lane = t % WARP
        warp = t // WARP
        p = 0
        r = cuda.blockIdx.x
        while r < rows:
            start = int64(r) * cols
            m, s = hold_and_exp(xf, start, cols, t, buf)
            raise NotImplementedError("Day 57: warp_merge, lane 0 to the slots of parity p, one barrier, every warp "
                                      "merges them; the stores (15 lines)")
            r += cuda.gridDim.x

    return softmax_block_rows_kernel


_SIG_NAIVE = "void(float32[:, ::1], float32[:, ::1])"
_SIG_FLAT = "void(float32[::1], int64, int64, float32[::1])"
KERNELS = {
    "naive": (softmax_row_per_thread_kernel, _SIG_NAIVE),
    "warp_rows": (make_warp_rows_kernel(WARP_GROUPS[-1]), _SIG_FLAT),
    "warp_rows.ragged": (make_warp_rows_kernel(WARP_GROUPS[-1], False), _SIG_FLAT),
    "block_rows": (make_block_rows_kernel(*BLOCK_CLASSES[-1]), _SIG_FLAT),
    "block_rows.ragged": (make_block_rows_kernel(*BLOCK_CLASSES[-1], False), _SIG_FLAT),
}


def warp_groups(cols: int) -> int:
    """The smallest warp class holding a row of cols floats."""
    return next(gr for gr in WARP_GROUPS if cols <= WARP * VEC * gr)


def block_class(cols: int) -> tuple[int, int]:
    """The smallest (threads, groups) block class holding a row of cols floats."""
    return next(c for c in BLOCK_CLASSES if cols <= c[0] * VEC * c[1])


@functools.cache
def _resident_blocks(threads: int, groups: int, wide_access: bool) -> int:
    """Blocks of the class the whole GPU runs at once (its registers decide); 2 in the simulator, so a
    block there takes several rows (and the slots' parity is exercised)."""
    if not ON_GPU:
        return 2
    kernel = make_block_rows_kernel(threads, groups, wide_access)
    try:
        return int(kernel.compile(_SIG_FLAT).max_cooperative_grid_blocks(threads))
    except Exception:  # a numba-cuda without the occupancy query: one block an SM
        return launch.sm_count()


def _flat(x):
    """x flat on the device, a fresh flat output, and whether 16-byte accesses fit: every row starts on
    the 16-byte grid when cols is a multiple of 4 and x's first float sits on it (a fresh allocation
    does; a device view such as x[1:] may not). The output is fresh: aligned."""
    (d_x,) = launch.to_device(x)
    rows, cols = x.shape
    wide_access = cols % VEC == 0 and _address(d_x) % 16 == 0
    return d_x.reshape(rows * cols), rows, cols, launch.empty((rows * cols,), np.float32), wide_access


def naive(x):
    check_input(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(tuple(x.shape), np.float32)
    softmax_row_per_thread_kernel[launch.grid_stride_blocks(x.shape[0], NAIVE_THREADS), NAIVE_THREADS](d_x, out)
    return launch.result(out, x)


def _warp_rows(x):
    xf, rows, cols, outf, wide_access = _flat(x)
    kernel = make_warp_rows_kernel(warp_groups(cols), wide_access)
    # 8 blocks of 256 an SM (2048 threads) where registers allow; more rows than that stride.
    grid = launch.grid_stride_blocks(rows * WARP, ROW_WARPS * WARP, 8)
    kernel[grid, ROW_WARPS * WARP](xf, rows, cols, outf)
    return launch.result(outf.reshape(rows, cols), x)


def _block_rows(x):
    xf, rows, cols, outf, wide_access = _flat(x)
    threads, groups = block_class(cols)
    kernel = make_block_rows_kernel(threads, groups, wide_access)
    grid = max(1, min(rows, _resident_blocks(threads, groups, wide_access)))
    kernel[grid, threads](xf, rows, cols, outf)
    return launch.result(outf.reshape(rows, cols), x)


def max_cols(version: str) -> int | None:
    """The longest row a version takes (None: any length)."""
    return {"warp_rows": WARP_COLS, "block_rows": BLOCK_COLS}.get(version)


def _check_limit(version: str, x) -> None:
    """ValueError past the version's limit: a held kernel never hands a row to another kernel (a
    benchmark row named after it would time that kernel)."""
    limit = max_cols(version)
    if x.shape[1] > limit:
        raise ValueError(f"{version}: holds rows of up to {limit} floats, got cols = {x.shape[1]}; "
                         "use optimized, which dispatches by cols")


def bench_skip(version: str, n) -> str | None:
    """Why course.bench leaves a version out at size n (rows, cols), or None."""
    limit = max_cols(version)
    if limit is not None and n[1] > limit:
        return f"{version} holds rows of up to {limit} floats; optimized dispatches longer ones"
    return None


def warp_rows(x):
    """A warp per row, up to WARP_COLS floats; longer rows: ValueError (optimized dispatches)."""
    check_input(x)
    _check_limit("warp_rows", x)
    return _warp_rows(x)


def block_rows(x):
    """A block per row, up to BLOCK_COLS floats (short rows too: the contrast with warp_rows); longer
    rows: ValueError (optimized hands them to day 56's online kernel)."""
    check_input(x)
    _check_limit("block_rows", x)
    return _block_rows(x)


def optimized(x):
    """The dispatch: a warp per row up to 1024 floats, a block per row up to 32768, the online kernel
    beyond (a row too long to hold in registers)."""
    raise NotImplementedError("Day 57: check x; pick _warp_rows, _block_rows or online by x.shape[1] (WARP_COLS, "
                              "BLOCK_COLS) (7 lines)")


def library(x):
    """torch.softmax(x, dim=-1) on the GPU: what a PyTorch user calls (zero-copy from a device array)."""
    import torch

    t = torch.as_tensor(x, device="cuda")
    out = torch.softmax(t, dim=-1)
    return out.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(out)
