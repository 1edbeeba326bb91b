"""Day 03 exercise: host <-> device transfers -- `steps` SAXPY updates y <- a * x + y on NumPy data.

Write the kernel and the optimized host function below; the naive host function is given: it is
the pattern to avoid (a round trip over PCIe at every step).
Grade with:  make check DAY=3
"""

import contextlib  # noqa: F401  (contextlib.ExitStack: for the optimized host function)

import numpy as np

from course import cuda, launch

TITLE = "Host <-> device transfers: keep the data where the work is"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
STEPS = 8
THREADS = 256
UNROLL = 4



@cuda.jit
def saxpy_kernel(a, x, y, out):
    """out[i] = a * x[i] + y[i] for every i, with a grid-stride loop (the grid is sized to the GPU,
    not to n). `out` may be the same array as `y`: each element is read before it is written by the
    same thread, so updating in place is safe.

    Stretch: four elements per trip (i, i + stride, i + 2*stride, i + 3*stride), all eight loads
    before the four stores, then a tail loop.
    """
    raise NotImplementedError("Day 03: a grid-stride loop writing out[i] = a * x[i] + y[i] "
                              "(5 lines; 15 with the four-way unroll)")


_SIG = "void(float32, float32[::1], float32[::1], float32[::1])"
KERNELS = {"naive": (saxpy_kernel, _SIG), "optimized": (saxpy_kernel, _SIG)}


def _check(x, y, a, steps):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    launch.check_array("y", y, dtype=np.float32, shape=x.shape)
    if not isinstance(a, (float, int, np.floating, np.integer)):
        raise ValueError(f"a: expected a real scalar, got {type(a).__name__}")
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")


def _grid(n: int) -> int:
    return launch.grid_stride_blocks(launch.blocks(n, UNROLL), THREADS)


def naive(x, y, a, steps):
    _check(x, y, a, steps)
    a = np.float32(a)
    for _ in range(steps):
        # A library call that takes and returns NumPy arrays hides this round trip in every call.
        d_x, d_y = launch.to_device(x, y)
        out = launch.empty(x.shape, np.float32)
        saxpy_kernel[_grid(x.size), THREADS](a, d_x, d_y, out)
        y = launch.result(out, x, y)
    return y


def optimized(x, y, a, steps):
    """The same result as naive, with the data resident on the device between steps.

    - copy x and y to the device once (launch.to_device), allocate out with launch.empty;
    - launch saxpy_kernel `steps` times: the first reads d_y, the others read and write out;
    - NumPy inputs: return a NumPy result, copied back once with out.copy_to_host(result), where
      result = np.empty_like(y); device inputs: return out (it stays on the device);
    - page-lock the host arrays (x, y, result) while they are copied, with cuda.pinned(array) for
      each (a contextlib.ExitStack holds several), so the copies run at the DMA rate.
    Never write into the caller's y.
    """
    _check(x, y, a, steps)
    raise NotImplementedError("Day 03: upload once, `steps` launches on device data, download once "
                              "into a page-locked result (15 lines)")
