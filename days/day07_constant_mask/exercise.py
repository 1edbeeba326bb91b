"""Day 07 exercise: constant memory -- 1D convolution with a filter bank in constant memory.

out[i] = sum_j FILTER_BANK[which, j] * x[i + j - MASK_RADIUS], zeros outside x; `which` picks a row
of the bank at run time. Write the naive kernel and the constant-memory tap reader that day 06's window
kernel (imported from its solution) calls; the host functions and the bank are given.
Grade with:  make check DAY=7
"""

import numpy as np

from course import cuda, launch
from numba import float32  # noqa: F401  (you will need it; numba names only after the course import)
from solutions.day06_conv1d_registers import MASK_RADIUS, MASK_WIDTH, launch_window, window_kernel

TITLE = "Constant memory: a broadcast filter bank"
MEMORY_SPACE = "constant"
VERSIONS = ("naive", "optimized")

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


@cuda.jit
def conv1d_global_mask_kernel(x, bank, which, out):
    """One thread per output i = cuda.grid(1), guard i < n; the bank is a global array
    (NUM_FILTERS, MASK_WIDTH): out[i] = sum_j bank[which, j] * x[i + j - MASK_RADIUS], zero outside x."""
    raise NotImplementedError("Day 07: day 06's naive loop with bank[which, j] as the tap (8 lines)")


@cuda.jit(device=True, inline=True)
def taps_from_constant_bank(m, which):
    """Fill m (MASK_WIDTH floats, the thread's registers) with row `which` of the filter bank, read from
    constant memory: bank = cuda.const.array_like(FILTER_BANK) compiles the module-level array into
    the kernel's constant bank, and since every thread asks for the same tap at once, one read serves
    the whole warp. Day 06's window kernel calls this once per thread."""
    raise NotImplementedError("Day 07: bank = cuda.const.array_like(FILTER_BANK), then m[j] = bank[which, j] "
                              "for every tap (3 lines)")


# Day 06's window kernel (given, from its solution) with its taps from the constant bank.
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
