"""Day 10 exercise: 3D 7-point stencil -- a shared x-y plane and a register queue along z.

out[z, y, x] = C * u[z, y, x] + X * (u[z, y, x - 1] + u[z, y, x + 1]) + Y * (u[z, y - 1, x] + u[z, y + 1, x])
             + Z * (u[z - 1, y, x] + u[z + 1, y, x]),  with (C, X, Y, Z) = coef and u = 0 outside the grid.
Write the two kernels; the helper _value, the host functions and the launch shapes are given.
Grade with:  make check DAY=10
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # noqa: F401  (numba names only after the course import)

TITLE = "3D 7-point stencil: shared x-y plane, register queue along z"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "optimized")

NAIVE_BLOCK = (32, 8, 1)  # (x, y, z): a warp is 32 neighbours of one row
BLOCK = (32, 16)  # optimized (x, y); 2 * BLOCK[1] == BLOCK[0], so one warp loads both side columns
Z_CHUNK = 64  # planes per block: enough blocks to fill the GPU, 2 extra planes read per 64
PLANE_H = BLOCK[1] + 2  # (18, 34): the tile of plane z and a one-point halo all round
PLANE_W = BLOCK[0] + 2
PLANE_SLOTS = PLANE_H * PLANE_W  # the shared plane, flat
BUFFER_SLOTS = 2 * PLANE_SLOTS  # two planes: z's parity picks one


@cuda.jit(device=True)
def _value(u, z, y, x):
    """u[z, y, x], or zero outside the grid; a predicated load, never an address outside u."""
    nz, ny, nx = u.shape
    if 0 <= z < nz and 0 <= y < ny and 0 <= x < nx:
        return u[z, y, x]
    return float32(0)


@cuda.jit
def stencil_naive_kernel(u, coef, out):
    """One thread per point: x, y, z = cuda.grid(3), guard z < nz and y < ny and x < nx. Seven loads
    from global memory: u[z, y, x] and its six neighbours through _value (zero outside the grid)."""
    raise NotImplementedError("Day 10: one thread per point, the formula with _value for neighbours (8 lines)")


@cuda.jit
def stencil_zmarch_kernel(flat_u, coef, flat_out, nz, ny, nx):
    """Block (bx, by, bz) of BLOCK = (32, 16) threads owns columns x0 = 32 bx .., y0 = 16 by .. and
    planes z0 = bz * Z_CHUNK .. z1 - 1 (z1 = min(z0 + Z_CHUNK, nz)); thread (tx, ty) owns (y0 + ty, x0 + tx).
    flat_u and flat_out are the (nz, ny, nx) grids as flat arrays: point (z, y, x) is at (z * ny + y) * nx + x.

    1. plane = cuda.shared.array(BUFFER_SLOTS, float32): two planes, row-major (PLANE_H, PLANE_W)
       each; plane z uses the half at offset half = 0 or PLANE_SLOTS, switched every z. In a half,
       slot (ty + 1) * PLANE_W + tx + 1 holds the thread's own point of plane z; row 0 / row 17 /
       column 0 / column 33 hold the halo. Halo duty: warp 0 loads the row above the tile, the last warp the row
       below, warp 1 the left (lanes 0-15) and right (lanes 16-31) columns; other threads load none.
    2. Decide every x-y bounds test once, before the march (inside the grid? halo point inside?), and
       keep uint64 offsets: one for the thread's point of plane z, one per prefetch; each grows by
       ny * nx a plane. Points outside the grid are zero.
    3. Keep the column in registers: below (z - 1), here (z), above (z + 1), and prefetch two planes
       ahead so loads are in flight through the barriers; the halo point keeps a shorter queue.
    4. For each z: issue the prefetch loads (test z only near the chunk's end: split the march into a
       main loop and a tail of the last planes); store `here` (and the halo point) into plane z's
       half; cuda.syncthreads(); out from here, four plane neighbours, below and above (guard inside;
       never guard the barrier); switch the half; rotate the queues. One barrier a plane is enough:
       the half written at z last held plane z - 2, which every thread finished reading before the
       barrier of plane z - 1. A device function for this per-plane step keeps one copy of it for
       both loops.
    """
    raise NotImplementedError("Day 10: halo duty, z queue in registers, per plane: prefetch, store into "
                              "this plane's half, barrier, stencil, switch half, rotate (72 lines)")


KERNELS = {
    "naive": (stencil_naive_kernel, "void(float32[:, :, ::1], float32[::1], float32[:, :, ::1])"),
    # (u, coef, out) as flat views of the same (nz, ny, nx) grids, and the shape
    "optimized": (stencil_zmarch_kernel, "void(float32[::1], float32[::1], float32[::1], int64, int64, int64)"),
}


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
    # Flat views of the same memory: the march addresses points by one offset that grows a plane a step.
    stencil_zmarch_kernel[grid, BLOCK](d_u.reshape(u.size), d_coef, out.reshape(u.size), nz, ny, nx)
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
