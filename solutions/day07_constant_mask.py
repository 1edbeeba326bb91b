"""Day 07: constant memory -- the 1D convolution of day 06 with its mask in the constant cache.

out[i] = sum_j FILTER_BANK[which, j] * x[i + j - MASK_RADIUS], zeros outside x.

v1 naive      the filter bank is an ordinary global array: every tap of every thread issues a load
              through L1, 17 mask loads per output next to the 17 loads of x.
v2 optimized  day 06's register window (window_kernel: a lane owns 8 consecutive outputs, loads its
              inputs as 8-byte words, takes its neighbours' by shuffle) with its taps read from
              cuda.const.array_like(FILTER_BANK): every lane reads the same address per tap, which
              the constant cache broadcasts, and no mask array is passed or copied.

API: Numba bakes a const array into the compiled module (there is no cudaMemcpyToSymbol), so its
values must be known when the kernel compiles. Rather than recompile per mask, the module carries a
small bank of filters and the caller picks one by index at run time. (With a single fixed mask the
compiler folds the taps into the multiply-add instructions as immediates: no memory space left to
teach; the lesson shows the run-time-updatable CUDA C way.)

Napkin math: as day 06, 8 bytes and 34 FLOPs per output, 537 MB for n = 2^26 (~0.13 ms at the copy
rate). Moving the mask of the naive loop into constant memory halves its load requests per output,
from 34 to 17, but the 17 loads of x remain: a warp's 32 consecutive floats usually straddle two
128-byte lines, ~34 L1 line accesses per warp of 32 outputs against ~16 clocks of DRAM time, so such
a kernel stays under about half of the copy rate (measured 32 %). Day 06's window already removed
x's re-reads; in it the taps are read once per thread, so the bank changes little in speed (86 %
against day 06's 85 %): what it buys is a read-only bank, picked at run time, that every block
reads through its own cache.
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import
from solutions.day06_conv1d_registers import MASK_RADIUS, MASK_WIDTH, launch_window, window_kernel

TITLE = "Constant memory: a broadcast filter bank"
MEMORY_SPACE = "constant"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 9, 255, 257, 1021, 4099)
BENCH_SIZES = (1 << 26,)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

THREADS = 256  # naive


def _filter_bank() -> np.ndarray:
    t = np.arange(-MASK_RADIUS, MASK_RADIUS + 1, dtype=np.float64)

    def gaussian(sigma):
        g = np.exp(-0.5 * (t / sigma) ** 2)
        return g / g.sum()

    box = np.full(MASK_WIDTH, 1.0 / MASK_WIDTH)
    sharpen = -gaussian(3.0)
    sharpen[MASK_RADIUS] += 2.0  # 2 * identity - blur: keeps the mean, boosts edges
    return np.stack([gaussian(2.0), gaussian(4.0), box, sharpen]).astype(np.float32)


FILTER_BANK = _filter_bank()  # (NUM_FILTERS, MASK_WIDTH), compiled into the kernel's constant bank
NUM_FILTERS = FILTER_BANK.shape[0]
FILTER_NAMES = ("gaussian-2", "gaussian-4", "box", "sharpen")


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    which = int(rng.integers(NUM_FILTERS))
    return x, which


def reference(x, which):
    n = x.size
    padded = np.pad(x.astype(np.float64), MASK_RADIUS)  # zeros beyond both ends
    out = np.zeros(n)
    for j in range(MASK_WIDTH):
        out += float(FILTER_BANK[which, j]) * padded[j:j + n]
    return out.astype(np.float32)


def traffic(x, which):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.size * x.itemsize, 2 * MASK_WIDTH * x.size


@cuda.jit
def conv1d_global_mask_kernel(x, bank, which, out):
    """One thread per output i = cuda.grid(1), guard i < n; the bank is a global array
    (NUM_FILTERS, MASK_WIDTH): out[i] = sum_j bank[which, j] * x[i + j - MASK_RADIUS], zero outside x."""
    # EXERCISE: day 06's naive loop with bank[which, j] as the tap
    n = x.size
    i = cuda.grid(1)
    if i < n:
        acc = float32(0)
        for j in range(MASK_WIDTH):
            k = i + j - MASK_RADIUS
            if 0 <= k < n:
                acc += bank[which, j] * x[k]  # one address for all 32 lanes, still one L1 request
        out[i] = acc


@cuda.jit(device=True, inline=True)
def taps_from_constant_bank(m, which):
    """Fill m (MASK_WIDTH floats, the thread's registers) with row `which` of the filter bank, read from
    constant memory: bank = cuda.const.array_like(FILTER_BANK) compiles the module-level array into
    the kernel's constant bank. `which` arrives at run time, so the compiler cannot fold the taps away
    and reads them with ld.const; every thread asks for the same tap at once, one address per warp,
    and the constant cache serves the whole warp with one read. Day 06's window kernel calls this once
    per thread."""
    # EXERCISE: bank = cuda.const.array_like(FILTER_BANK), then m[j] = bank[which, j] for every tap
    bank = cuda.const.array_like(FILTER_BANK)  # (NUM_FILTERS, MASK_WIDTH)
    for j in range(MASK_WIDTH):
        m[j] = bank[which, j]


# Day 06's window kernel (lanes own 8 consecutive outputs, 8-byte words, shuffles between neighbours)
# with its taps from the constant bank instead of a mask argument.
conv1d_const_mask_kernel = window_kernel(taps_from_constant_bank)

KERNELS = {
    "naive": (conv1d_global_mask_kernel, "void(float32[::1], float32[:, ::1], int64, float32[::1])"),
    "optimized": (conv1d_const_mask_kernel, "void(float32[::1], uint64[::1], int64, float32[::1], uint64[::1])"),
}

_bank_on_device = None


def _check(x, which):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if not isinstance(which, (int, np.integer)) or isinstance(which, bool) or not 0 <= which < NUM_FILTERS:
        raise ValueError(f"which: expected an int filter index in 0..{NUM_FILTERS - 1} "
                         f"({', '.join(FILTER_NAMES)}), got {which!r}")


def naive(x, which):
    global _bank_on_device
    _check(x, which)
    if _bank_on_device is None:
        _bank_on_device = cuda.to_device(FILTER_BANK)  # (NUM_FILTERS, MASK_WIDTH) in global memory
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    conv1d_global_mask_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, _bank_on_device, int(which), out)
    return launch.result(out, x)


def optimized(x, which):
    _check(x, which)
    (d_x,) = launch.to_device(x)
    return launch.result(launch_window(conv1d_const_mask_kernel, d_x, int(which)), x)


def library(x, which):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate1d(cupy.asarray(x), cupy.asarray(FILTER_BANK[which]), mode="constant", cval=0.0)
