"""Day 16: warp divergence -- even elements take one costly path, odd elements another.

out[i] = smooth(x[i]) for even i, root(x[i]) for odd i, where smooth is 64 dependent multiply-adds
(a leaky accumulator) and root is 64 Newton steps towards sqrt(1 + x^2) (a division each).

v1 naive      thread i takes element i and branches on i's parity: every warp holds 16 even and
              16 odd lanes, so it runs both paths one after the other with half its lanes masked off.
v2 optimized  the same grid and the same branch, but the thread -> element map pairs warps: warp 2p
              takes the 32 even elements of a 64-element span, warp 2p+1 the 32 odd ones. The branch
              now depends on the warp, not the lane, so no warp runs more than one path.

Napkin math: 8 bytes per element against ~130 (smooth) to ~1000 (root, IEEE division) instructions:
compute-bound by two orders of magnitude. A divergent warp pays smooth + root for every element pair
it holds; a uniform warp pays one of them, so v2 should run close to 2x faster than v1 (the root path
dominates, so a little under). Memory traffic is the same in both: the stride-2 reads of one warp
and its partner share cache lines, and L1/L2 merge them.
"""

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "Warp divergence"
MEMORY_SPACE = "register"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 31, 33, 255, 257, 1021, 2053)  # one thread, a warp -1 and +1, a block -1 and +1, primes
BENCH_SIZES = (1 << 26,)
BOUND = "compute"
THREADS = 256  # a multiple of 64, so every warp pair lives in one block
WARP = 32
STEPS = 64
DECAY = np.float32(0.9375)  # numpy scalars keep their float32 type inside kernels


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n, dtype=np.float32),)


def reference(x):
    """Even indices: the smoothing recurrence; odd ones: Newton's square root of 1 + x^2. Each half is
    computed on its own elements only (at the benchmark's 2^26 floats, half the float64 work)."""
    v = x.astype(np.float64)
    even, odd = v[0::2], v[1::2]
    smooth = np.zeros_like(even)
    root = np.ones_like(odd)
    w = 1.0 + odd * odd
    for _ in range(STEPS):  # in place: no new arrays a step
        smooth *= float(DECAY)
        smooth += even
        root += w / root
        root *= 0.5
    out = np.empty(x.size, dtype=np.float32)
    out[0::2] = smooth
    out[1::2] = root
    return out


def traffic(x):
    """(minimum bytes moved, FLOPs): 2 per smooth step (one FMA), 3 per Newton step."""
    n_even = (x.size + 1) // 2
    n_odd = x.size // 2
    return 2 * x.size * x.itemsize, n_even * 2 * STEPS + n_odd * (3 * STEPS + 2)


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
    # EXERCISE: i = cuda.grid(1); guard i < x.size; branch on i % 2 and call smooth or root
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        # Neighbouring lanes disagree here: the warp executes both bodies in turn, each with half of
        # its lanes switched off, so every lane waits for both paths.
        if i % 2 == 0:
            out[i] = smooth(v)
        else:
            out[i] = root(v)


@cuda.jit
def warp_uniform_kernel(x, out):
    """The same work and the same grid, but no warp may hold lanes of both paths.

    Give each warp elements of one parity: with t = cuda.grid(1), warp = t // WARP, lane = t % WARP,
    let warp 2p take the even elements of the span [64p, 64p + 64) and warp 2p+1 the odd ones. Each
    element must still be written exactly once; guard i < x.size.
    """
    # EXERCISE: parity = warp % 2; i = 2 * (WARP * (warp // 2) + lane) + parity; guard, then branch on parity
    t = cuda.grid(1)
    warp = t // WARP
    lane = t % WARP
    # Warps 2p and 2p+1 share the span [64p, 64p + 64): the first takes its even elements, the
    # second its odd ones. Every lane of a warp now has the same parity, so the branch below is
    # uniform across the warp and each warp runs exactly one path at full width.
    parity = warp % 2
    i = 2 * (WARP * (warp // 2) + lane) + parity
    if i < x.size:
        v = x[i]
        if parity == 0:
            out[i] = smooth(v)
        else:
            out[i] = root(v)


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
