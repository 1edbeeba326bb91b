"""Day 16 exercise: warp divergence -- out[i] = smooth(x[i]) for even i, root(x[i]) for odd i.

The two costly paths (smooth, root) and the host functions are given. Write the two kernels: first
the plain one-element-per-thread version, then one whose branch is the same for every lane of a warp.
Grade with:  make check DAY=16
"""

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "Warp divergence"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
THREADS = 256  # a multiple of 64, so every warp pair lives in one block
WARP = 32
STEPS = 64
DECAY = np.float32(0.9375)  # numpy scalars keep their float32 type inside kernels


@cuda.jit(device=True)
def smooth(v):
    """Even elements: a leaky accumulator, STEPS dependent multiply-adds."""
    y = float32(0.0)
    for _ in range(STEPS):
        y = y * DECAY + v
    return y


@cuda.jit(device=True)
def root(v):
    """Odd elements: Newton's iteration for sqrt(1 + v^2), STEPS dependent divisions."""
    w = float32(1.0) + v * v
    y = float32(1.0)
    for _ in range(STEPS):
        y = float32(0.5) * (y + w / y)
    return y


@cuda.jit
def divergent_kernel(x, out):
    """One thread per element: thread i (cuda.grid(1)) handles element i, guarded by i < x.size.

    Even i: out[i] = smooth(x[i]); odd i: out[i] = root(x[i]). Lanes of one warp alternate between
    the two paths, which is the point: this is the version whose warps diverge.
    """
    raise NotImplementedError("Day 16: i = cuda.grid(1); guard i < x.size; branch on i % 2 and call "
                              "smooth or root (7 lines)")


@cuda.jit
def warp_uniform_kernel(x, out):
    """The same work and the same grid, but no warp may hold lanes of both paths.

    Give each warp elements of one parity: with t = cuda.grid(1), warp = t // WARP, lane = t % WARP,
    let warp 2p take the even elements of the span [64p, 64p + 64) and warp 2p+1 the odd ones. Each
    element must still be written exactly once; guard i < x.size.
    """
    raise NotImplementedError("Day 16: parity = warp % 2; i = 2 * (WARP * (warp // 2) + lane) + parity; "
                              "guard, then branch on parity (11 lines)")


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"naive": (divergent_kernel, _SIG), "optimized": (warp_uniform_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=1)


def naive(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    divergent_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    # The same grid as v1: only the thread -> element map differs. With a whole number of blocks of
    # 256 (a multiple of 64), the map is a permutation of [0, blocks * 256), so every element is covered.
    warp_uniform_kernel[launch.blocks(x.size, THREADS), THREADS](d_x, out)
    return launch.result(out, x)
