"""Day 13 exercise: thread coarsening -- a vertical 9-tap filter on an image, rows clamped at the edges.

    out[r, c] = sum_k w[k] * x[clamp(r + k - 4), c]

v1 naive      one output per thread: 9 loads of x and 9 of w for each output written.
v2 optimized  each thread computes COARSEN = 8 outputs down its column: it loads the 8 + 8 = 16 rows
              those outputs share once into registers, and the 9 weights once, and reuses them:
              25 loads for 8 outputs (~3 per output instead of 18). Interior tiles skip the row
              clamps and the store guard and index with unsigned integers: only the first and last
              tile of a column pay for the edges.

Napkin math: 8 bytes per output through DRAM (the neighbours' rows are re-read from L1/L2 in v1).
(8192, 8192) moves 537 MB, ~0.13 ms at the H200's ~4.1 TB/s copy rate; 18 FLOPs per output. At
4.1 TB/s an SM moves ~16 bytes per clock, so a warp of 32 outputs (256 bytes) has ~16 clocks, ~64
warp-instructions over the SM's 4 schedulers. Measured on an H200: naive 811 us (~156 instructions an
output in the PTX); coarsened with every row clamped 224 us (3.6x, 56 % of the copy rate, ~75 SASS
instructions an output: the clamps and Numba's wrap-around checks on signed indices). The interior
path here is ~22 SASS instructions an output (9 FFMA, 2 loads, 1 store, address adds): under the
budget, so DRAM is the bound again. `make inspect DAY=13` counts the loads each kernel issues.

What you write (each raises NotImplementedError with its hint until you do):
  vfilter_naive_kernel   cuda.grid(2), guard, a loop over the taps with a clamped row (9 lines)
  vfilter_coarse_kernel  weights and the 16-row window loaded once, 8 outputs from registers; unclamped interior,
                         clamped edges (28 lines)
Everything else in this file is given. Grade with:  make check DAY=13
"""

import numpy as np

from course import cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import float32, uint64

TITLE = "Thread coarsening"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
RADIUS = 4
TAPS = 2 * RADIUS + 1
COARSEN = 8  # outputs per thread down a column
WINDOW = COARSEN + 2 * RADIUS  # rows those outputs read: 16
TEST_SIZES = ((1, 1), (3, 31), (17, 33), (41, 57), (23, 97))  # (rows, cols): tiny, < and > a tile, primes
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: ~9x the 60 MB L2
BOUND = "memory"
BLOCK = (32, 8)  # 32 columns wide so a warp reads 128 contiguous bytes of a row


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)  # (rows, cols)
    taps = np.exp(-0.5 * (np.arange(TAPS) - RADIUS) ** 2 / 4.0) * rng.uniform(0.5, 1.5, TAPS)
    w = (taps / taps.sum()).astype(np.float32)  # (TAPS,)
    return x, w


def reference(x, w):
    rows = x.shape[0]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = np.zeros(x.shape, dtype=np.float64)
    for k in range(TAPS):
        src = np.clip(np.arange(rows) + k - RADIUS, 0, rows - 1)
        out += w64[k] * x64[src, :]
    return out.astype(np.float32)


def traffic(x, w):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes + w.nbytes, 2 * TAPS * x.size


@cuda.jit
def vfilter_naive_kernel(x, w, out):
    """One output per thread: (c, r) = cuda.grid(2) (x is the column, so a warp reads a row).

    Guard r < rows and c < cols; sum w[k] * x[src, c] over the TAPS taps, with
    src = r + k - RADIUS clamped to [0, rows - 1].
    """
    raise NotImplementedError("Day 13: cuda.grid(2), guard, a loop over the taps with a clamped row (9 lines)")


@cuda.jit
def vfilter_coarse_kernel(x, w, out):
    """COARSEN outputs per thread, rows r0 .. r0 + COARSEN - 1 with r0 = ty * COARSEN, (c, ty) = cuda.grid(2).
    Threads with c >= cols or r0 >= rows do nothing.

    Load the TAPS weights into cuda.local.array(TAPS, float32) and the WINDOW rows the outputs
    need (r0 - RADIUS .. r0 + COARSEN + RADIUS - 1, clamped) into cuda.local.array(WINDOW, float32),
    each exactly once. Then output i is sum_k wk[k] * win[i + k]; store it only if r0 + i < rows.
    Use loops with constant trip counts only, so both arrays unroll into registers.
    Interior tiles (RADIUS <= r0 and r0 + COARSEN + RADIUS <= rows: all but the edge tiles) skip
    the clamps and the guard and index with unsigned integers (top = uint64(r0 - RADIUS),
    x[top + uint64(j), uint64(c)]): a signed index costs a wrap-around check per access.
    """
    raise NotImplementedError("Day 13: weights and the 16-row window loaded once, 8 outputs from registers; unclamped "
                              "interior, clamped edges (28 lines)")


_SIG = "void(float32[:, ::1], float32[::1], float32[:, ::1])"
KERNELS = {"naive": (vfilter_naive_kernel, _SIG), "optimized": (vfilter_coarse_kernel, _SIG)}


def _check(x, w):
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    launch.check_array("w", w, dtype=np.float32, shape=(TAPS,))


def naive(x, w):
    _check(x, w)
    d_x, d_w = launch.to_device(x, w)
    rows, cols = x.shape
    out = launch.empty(x.shape, np.float32)
    grid = (launch.blocks(cols, BLOCK[0]), launch.blocks(rows, BLOCK[1]))
    vfilter_naive_kernel[grid, BLOCK](d_x, d_w, out)
    return launch.result(out, x, w)


def optimized(x, w):
    _check(x, w)
    d_x, d_w = launch.to_device(x, w)
    rows, cols = x.shape
    out = launch.empty(x.shape, np.float32)
    grid = (launch.blocks(cols, BLOCK[0]), launch.blocks(rows, BLOCK[1] * COARSEN))
    vfilter_coarse_kernel[grid, BLOCK](d_x, d_w, out)
    return launch.result(out, x, w)


def library(x, w):
    """The same filter through cupyx.scipy.ndimage.correlate1d (a row of the benchmark table)."""
    import cupy
    import cupyx.scipy.ndimage as ndi

    return ndi.correlate1d(cupy.asarray(x), cupy.asarray(w), axis=0, mode="nearest")
