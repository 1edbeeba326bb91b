"""Day 10 (deliberately wrong): 3D 7-point stencil -- a shared x-y plane and a register queue along z.

MISTAKE: warp 0 loads the halo row from y0 instead of y0 - 1, so the tile's first
row sees itself as its upper neighbour.

out[z, y, x] = C * u[z, y, x] + X * (u[z, y, x - 1] + u[z, y, x + 1]) + Y * (u[z, y - 1, x] + u[z, y + 1, x])
             + Z * (u[z - 1, y, x] + u[z + 1, y, x]),  with (C, X, Y, Z) = coef and u = 0 outside the grid:
one explicit step of heat diffusion with a zero (Dirichlet) boundary.

v1 naive      one thread per point, (32, 8, 1) blocks: seven loads per output from global memory. The
              x and most y neighbours hit L1; the z neighbours were loaded by blocks one plane away,
              so they come from L2 -- or from DRAM again once a plane no longer fits in L2.
v2 optimized  each (32, 16) block marches along z through Z_CHUNK planes. Every thread keeps its own
              column's z - 1, z and z + 1 in registers (plus two planes of prefetch), writes plane z
              into a shared (18, 34) tile whose halo rows and columns three warps load, and reads its
              four x-y neighbours from there: one global load per output, each input read once.

Napkin math: 8 bytes per point through DRAM and 10 FLOPs: 1.25 FLOP/byte, deep in the memory-bound
region. A (512, 512, 512) grid moves 1.07 GB, ~0.26 ms at the H200's ~4.1 TB/s: ~16 SM clocks per
warp of 32 outputs. Naive issues 7 loads per warp of outputs, and the L2 catches its z re-reads while a
plane (1 MB) is far smaller than the 60 MB L2, so it is already within reach of the copy rate there;
with (2048, 2048) planes (16 MB each) the z neighbours fall out of L2 between uses and naive reads
most inputs from DRAM two or three times. The marching kernel reads each input once at any size.
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "3D 7-point stencil: shared x-y plane, register queue along z"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")
# (nz, ny, nx): a point; smaller than a tile; one full (16, 32) tile; 2 x 2 tiles with ragged edges.
TEST_SIZES = ((1, 1, 1), (3, 5, 7), (4, 16, 32), (3, 17, 33))
# 537 MB in and out with 1 MB planes (L2 holds the z neighbours: naive looks good), then the same
# bytes with 16 MB planes (L2 cannot: naive re-reads DRAM, the marching kernel does not).
BENCH_SIZES = ((512, 512, 512), (32, 2048, 2048))
BOUND = "memory"

NAIVE_BLOCK = (32, 8, 1)  # (x, y, z): a warp is 32 neighbours of one row
BLOCK = (32, 16)  # optimized (x, y); 2 * BLOCK[1] == BLOCK[0], so one warp loads both side columns
Z_CHUNK = 64  # planes per block: enough blocks to fill the GPU, 2 extra planes read per 64
PLANE_H = BLOCK[1] + 2  # (18, 34): the tile of plane z and a one-point halo all round
PLANE_W = BLOCK[0] + 2


def make_inputs(n, seed: int = 0):
    nz, ny, nx = (n, n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((nz, ny, nx), dtype=np.float32)  # (nz, ny, nx)
    axes = rng.uniform(0.04, 0.16, 3)  # a different weight per axis: a swapped axis shows up
    coef = np.array([1.0 - 2.0 * axes.sum(), *axes], dtype=np.float32)  # (C, X, Y, Z)
    return u, coef


def reference(u, coef):
    nz, ny, nx = u.shape
    p = np.pad(u.astype(np.float64), 1)  # zeros beyond every face
    c, cx, cy, cz = (float(v) for v in coef)
    core = p[1:-1, 1:-1, 1:-1]
    out = (c * core
           + cx * (p[1:-1, 1:-1, :-2] + p[1:-1, 1:-1, 2:])
           + cy * (p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1])
           + cz * (p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1]))
    return out.astype(np.float32)


def traffic(u, coef):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * u.nbytes + coef.nbytes, 10 * u.size


@cuda.jit(device=True)
def _value(u, z, y, x):
    """u[z, y, x], or zero outside the grid; a predicated load, never an address outside u."""
    nz, ny, nx = u.shape
    if 0 <= z < nz and 0 <= y < ny and 0 <= x < nx:
        return u[z, y, x]
    return float32(0)


@cuda.jit
def stencil_naive_kernel(u, coef, out):
    nz, ny, nx = u.shape
    x, y, z = cuda.grid(3)
    if z < nz and y < ny and x < nx:
        # Every input is loaded by seven threads: x neighbours by the same warp, y neighbours by the
        # warps above and below, z neighbours by blocks one whole plane of the grid away.
        out[z, y, x] = (coef[0] * u[z, y, x]
                        + coef[1] * (_value(u, z, y, x - 1) + _value(u, z, y, x + 1))
                        + coef[2] * (_value(u, z, y - 1, x) + _value(u, z, y + 1, x))
                        + coef[3] * (_value(u, z - 1, y, x) + _value(u, z + 1, y, x)))


@cuda.jit
def stencil_zmarch_kernel(u, coef, out):
    plane = cuda.shared.array((PLANE_H, PLANE_W), float32)  # (BLOCK_Y + 2, BLOCK_X + 2) points of plane z
    nz, ny, nx = u.shape
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x0 = cuda.blockIdx.x * BLOCK[0]
    y0 = cuda.blockIdx.y * BLOCK[1]
    x = x0 + tx
    y = y0 + ty
    z0 = cuda.blockIdx.z * Z_CHUNK
    z1 = min(z0 + Z_CHUNK, nz)
    inside = y < ny and x < nx

    # Halo duty, one per thread at most, by whole warps: warp 0 loads the row above the tile, the last
    # warp the row below (both coalesced), warp 1 the left (lanes 0-15) and right (16-31) columns.
    # (hy, hx) is the point it loads from the grid, (sy, sx) the slot it fills in `plane`.
    on_duty = ty == 0 or ty == 1 or ty == BLOCK[1] - 1
    hy, hx, sy, sx = y0, x, 0, tx + 1  # MISTAKE: halo off by one
    if ty == BLOCK[1] - 1:
        hy, sy = y0 + BLOCK[1], BLOCK[1] + 1  # the last warp: the row below
    elif ty == 1:
        side = tx // BLOCK[1]  # 0: the left column, 1: the right one
        row = tx - side * BLOCK[1]
        hy, hx, sy, sx = y0 + row, x0 - 1 + side * (BLOCK[0] + 1), row + 1, side * (BLOCK[0] + 1)
    elif ty != 0:
        hy = -1  # no duty: _value returns zero without a load

    c = coef[0]  # four warp-uniform loads, then registers for the whole march
    cx = coef[1]
    cy = coef[2]
    cz = coef[3]

    # The register queue along z. Loads are issued two planes before they are used: each thread has
    # two loads in flight through every plane's barriers and arithmetic (Little's law: at ~16 B per
    # clock per SM and ~1000 clocks of latency, an SM needs ~16 KB in flight).
    below = _value(u, z0 - 1, y, x)
    here = _value(u, z0, y, x)
    above = _value(u, z0 + 1, y, x)
    ahead = _value(u, z0 + 2, y, x) if z0 + 2 <= z1 else float32(0)
    halo_here = _value(u, z0, hy, hx)
    halo_above = _value(u, z0 + 1, hy, hx) if z0 + 1 < z1 else float32(0)
    for z in range(z0, z1):
        ahead2 = _value(u, z + 3, y, x) if z + 3 <= z1 else float32(0)  # nothing past the chunk's last need
        halo_ahead = _value(u, z + 2, hy, hx) if z + 2 < z1 else float32(0)
        cuda.syncthreads()  # every thread has finished reading plane z - 1 out of `plane`
        plane[ty + 1, tx + 1] = here
        if on_duty:
            plane[sy, sx] = halo_here
        cuda.syncthreads()  # plane z and its halo are complete
        if inside:
            out[z, y, x] = (c * here
                            + cx * (plane[ty + 1, tx] + plane[ty + 1, tx + 2])
                            + cy * (plane[ty, tx + 1] + plane[ty + 2, tx + 1])
                            + cz * (below + above))  # z neighbours: registers, never re-loaded
        below, here, above, ahead = here, above, ahead, ahead2
        halo_here, halo_above = halo_above, halo_ahead


_SIG = "void(float32[:, :, ::1], float32[::1], float32[:, :, ::1])"
KERNELS = {"naive": (stencil_naive_kernel, _SIG), "optimized": (stencil_zmarch_kernel, _SIG)}


def _check(u, coef):
    launch.check_array("u", u, dtype=np.float32, ndim=3)
    launch.check_array("coef", coef, dtype=np.float32, shape=(4,))


def naive(u, coef):
    _check(u, coef)
    d_u, d_coef = launch.to_device(u, coef)
    nz, ny, nx = u.shape
    out = launch.empty(u.shape, np.float32)
    grid = (launch.blocks(nx, NAIVE_BLOCK[0]), launch.blocks(ny, NAIVE_BLOCK[1]), nz)
    stencil_naive_kernel[grid, NAIVE_BLOCK](d_u, d_coef, out)
    return launch.result(out, u, coef)


def optimized(u, coef):
    _check(u, coef)
    d_u, d_coef = launch.to_device(u, coef)
    nz, ny, nx = u.shape
    out = launch.empty(u.shape, np.float32)
    grid = (launch.blocks(nx, BLOCK[0]), launch.blocks(ny, BLOCK[1]), launch.blocks(nz, Z_CHUNK))
    stencil_zmarch_kernel[grid, BLOCK](d_u, d_coef, out)
    return launch.result(out, u, coef)


def library(u, coef):
    """The same stencil as a 3x3x3 correlation through CuPy's ndimage (zero boundary): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    c, cx, cy, cz = (float(v) for v in coef)
    w = np.zeros((3, 3, 3), np.float32)  # (z, y, x) offsets -1..1
    w[1, 1, 1] = c
    w[1, 1, 0] = w[1, 1, 2] = cx
    w[1, 0, 1] = w[1, 2, 1] = cy
    w[0, 1, 1] = w[2, 1, 1] = cz
    return ndimage.correlate(cupy.asarray(u), cupy.asarray(w), mode="constant", cval=0.0)
