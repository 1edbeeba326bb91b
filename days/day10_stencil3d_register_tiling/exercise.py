"""Day 10 exercise: 3D 7-point stencil -- a shared x-y plane and a register queue along z.

out[z, y, x] = C * u[z, y, x] + X * (u[z, y, x - 1] + u[z, y, x + 1]) + Y * (u[z, y - 1, x] + u[z, y + 1, x])
             + Z * (u[z - 1, y, x] + u[z + 1, y, x]),  with (C, X, Y, Z) = coef and u = 0 outside the grid:
one explicit step of heat diffusion with a zero (Dirichlet) boundary.

v1 naive      one thread per point, (32, 8, 1) blocks: seven loads per output from global memory. The
              x and most y neighbours hit L1; the z neighbours were loaded by blocks one plane away,
              so they come from L2 -- or from DRAM again once a plane no longer fits in L2.
v2 zmarch     each (32, 16) block marches along z through Z_CHUNK planes. Every thread keeps its own
              column's z - 1, z and z + 1 in registers (plus LEAD planes of prefetch), writes plane z
              into a shared (18, 34) tile whose halo rows and columns three warps load, and reads its
              four x-y neighbours from there: one global load per output, each input read once. The
              tile is double-buffered by z's parity, so a plane needs one barrier, not two.
              Every x-y bounds test is decided once before the march; the grids are passed as flat
              arrays so each load is a running unsigned offset that grows by one plane a step; only
              the chunk's last planes test z. ~40 SASS instructions an output instead of ~127.
v3 optimized  the same march with ROWS = 4 adjacent outputs a thread along y: a (32, 16) block owns
              64 x 32 outputs on a (66, 34) plane. A thread's four rows share one barrier, one loop step
              and one set of running offsets, and each other's y neighbours from registers: 10 shared
              loads for 4 outputs instead of 16. The main march is written out two planes a trip, so
              each plane's half of the buffer is a constant. ~28 SASS instructions an output (225 for
              two planes of four outputs), 56 registers, no stack.

Napkin math: 8 bytes per point through DRAM and 10 FLOPs: 1.25 FLOP/byte, deep in the memory-bound
region. A (512, 512, 512) grid moves 1.07 GB, ~0.26 ms at the H200's ~4.1 TB/s: ~16 SM clocks per
warp of 32 outputs. Naive issues 7 loads per warp of outputs, and the L2 catches its z re-reads while a
plane (1 MB) is far smaller than the 60 MB L2, so DRAM sees each input about once there (it still
measures only 22 % of the copy rate: bound by its L1 and L2 requests, not by DRAM);
with (2048, 2048) planes (16 MB each) the z neighbours fall out of L2 between uses and naive reads
most inputs from DRAM two or three times. The marching kernel reads each input once at any size.
Sixteen clocks on four schedulers are ~64 warp-instructions per warp of 32 outputs. The first march
(a bounds-checked 3D index on every load, six compares each) issued ~127 SASS instructions an output
and reached 42 % of the copy rate; here the loop issues ~45 a plane (2 loads, 2 barriers, 2 shared
stores, 4 shared loads, 7 FP, 1 store, ~12 address adds, the rest predicates and loop control;
one of those barriers is gone with the double-buffered tile; the SASS of today's loop, unrolled four
planes a trip by the compiler, counts 159 for 4 planes, ~40).
At the copy rate those ~45 instructions an output are ~71 % of the SM's issue slots (132 SMs x 4
schedulers x 1.98 GHz), at 85 % of it ~83 %. Measured on an H200 at 512^3: LEAD = 2 357.5 us (71 %),
LEAD = 3 390.7 us (65 %: 34 registers, 3 blocks an SM instead of 4), LEAD = 4 355.6 us (71 %): more
loads in flight changed nothing, so latency is not the bound; the instruction count (with a barrier
every plane) is. v3 cuts it: ~33 SASS instructions an output with ROWS = 2, ~28 with ROWS = 4. Swept on
an H200 at 512^3: ROWS = 1 409.5 us, ROWS = 2 334.2 us (76.7 %), ROWS = 4 298.5 us (84.9 %).

What you write (each raises NotImplementedError with its hint until you do):
  stencil_naive_kernel   one thread per point, the formula with _value for neighbours (7 lines)
  _stencil_plane         store here (and the halo point if on duty) into the plane, barrier, then the stencil if
                         inside (9 lines)
  stencil_zmarch_kernel  halo duty, z queue in registers, per plane: prefetch, _stencil_plane, switch half, rotate
                         (73 lines)
  _stencil_rows          ROWS points (and the halo point) into the plane, barrier, ROWS outputs sharing their y
                         neighbours (16 lines)
  _tall_step             prefetch into q[r, LEAD + 2] and hq[LEAD], _stencil_rows, rotate both queues by one (9
                         lines)
  stencil_tall_kernel    halo duty by linear index, nrows, offsets, (ROWS, LEAD + 3) queue; main march two planes a
                         trip, tail (65 lines)
Everything else in this file is given. Grade with:  make check DAY=10
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

TITLE = "3D 7-point stencil: shared x-y plane, register queue along z"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "zmarch", "optimized")
# (nz, ny, nx): a point; smaller than a tile; one full (16, 32) tile; 2 x 2 tiles with ragged edges; two
# (64, 32) tiles of the optimized kernel, the last thread row with one of its ROWS rows inside.
TEST_SIZES = ((1, 1, 1), (3, 5, 7), (4, 16, 32), (3, 17, 33), (2, 65, 33))
# 537 MB in and out with 1 MB planes (L2 holds the z neighbours: naive looks good), then the same
# bytes with 16 MB planes (L2 cannot: naive re-reads DRAM, the marching kernel does not).
BENCH_SIZES = ((512, 512, 512), (32, 2048, 2048))
BOUND = "memory"

NAIVE_BLOCK = (32, 8, 1)  # (x, y, z): a warp is 32 neighbours of one row
BLOCK = (32, 16)  # optimized (x, y); 2 * BLOCK[1] == BLOCK[0], so one warp loads both side columns
Z_CHUNK = 64  # planes per block: enough blocks to fill the GPU, 2 extra planes read per 64
LEAD = 2  # planes the z queue loads ahead of plane z + 1 (>= 1): LEAD + 1 loads in flight a thread
QUEUE = LEAD + 2  # the column's queue: planes z - 1 .. z + LEAD
PLANE_H = BLOCK[1] + 2  # (18, 34): the tile of plane z and a one-point halo all round
PLANE_W = BLOCK[0] + 2
PLANE_SLOTS = PLANE_H * PLANE_W  # the shared plane, flat
BUFFER_SLOTS = 2 * PLANE_SLOTS  # two planes: z's parity picks one
ROWS = 4  # optimized: outputs a thread along y (adjacent rows), sharing a barrier, a loop step, the offsets
TILE_H = BLOCK[1] * ROWS  # rows of outputs a block owns; needs 2 * BLOCK[0] + 2 * TILE_H halo duties
TALL_H = TILE_H + 2  # (66, 34) with ROWS = 4: 64 x 32 outputs and their halo
TALL_SLOTS = TALL_H * PLANE_W
TALL_BUFFER = 2 * TALL_SLOTS  # double-buffered by z's parity, as in the z march
TALL_QUEUE = (ROWS, LEAD + 3)  # per row planes z - 1 .. z + LEAD, and the slot plane z + LEAD + 1 lands in
TALL_HALO_QUEUE = LEAD + 1  # the halo point's planes z .. z + LEAD - 1, and the slot of plane z + LEAD


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
    """One thread per point: x, y, z = cuda.grid(3), guard z < nz and y < ny and x < nx. Seven loads
    from global memory: u[z, y, x] and its six neighbours through _value (zero outside the grid)."""
    raise NotImplementedError("Day 10: one thread per point, the formula with _value for neighbours (7 lines)")


@cuda.jit(device=True)
def _stencil_plane(plane, flat_out, at, mine, duty, on_duty, inside, here, below, above, halo_here,
                   c, cx, cy, cz):
    """One step of the march: plane z into its half of the shared buffer, then the outputs of plane z.

    ``mine`` and ``duty`` already point into that half (z's parity picks it): ``mine`` is the slot of
    the thread's own point, ``duty`` the halo slot it fills when ``on_duty``. ``here``, ``below`` and
    ``above`` are the thread's column at z, z - 1 and z + 1 (registers), ``halo_here`` its halo
    point of plane z, ``at`` the offset of its point of plane z in flat_out, ``inside`` whether that
    point is in the grid, (c, cx, cy, cz) the coefficients. Store here (and the halo point) into the
    plane, cuda.syncthreads(), then, if inside, flat_out[at] = the stencil: the x neighbours at
    slots mine - 1 and mine + 1, the y neighbours at mine - PLANE_W and mine + PLANE_W, the z
    neighbours from below and above. Every thread must reach the barrier: guard the store to
    flat_out, not the call.
    """
    raise NotImplementedError("Day 10: store here (and the halo point if on duty) into the plane, barrier, then the "
                              "stencil if inside (9 lines)")


@cuda.jit
def stencil_zmarch_kernel(flat_u, coef, flat_out, nz, ny, nx):
    """Block (bx, by, bz) of BLOCK = (32, 16) threads owns columns x0 = 32 bx .., y0 = 16 by .. and
    planes z0 = bz * Z_CHUNK .. z1 - 1 (z1 = min(z0 + Z_CHUNK, nz)); thread (tx, ty) owns (y0 + ty, x0 + tx).
    flat_u and flat_out are the (nz, ny, nx) grids as flat arrays: point (z, y, x) is at (z * ny + y) * nx + x.

    1. plane = cuda.shared.array(BUFFER_SLOTS, float32): two planes, row-major (PLANE_H, PLANE_W)
       each; plane z uses the half at offset half = 0 or PLANE_SLOTS, switched every z. In a half,
       slot (ty + 1) * PLANE_W + tx + 1 holds the thread's own point of plane z; row 0 / row 17 /
       column 0 / column 33 hold the halo. Halo duty: warp 0 loads the row above the tile, the last
       warp the row below, warp 1 the left (lanes 0-15) and right (lanes 16-31) columns; other threads
       load none.
    2. Decide every x-y bounds test once, before the march (inside the grid? halo point inside?), and
       keep uint64 offsets: one for the thread's point of plane z, one per prefetch; each grows by
       ny * nx a plane. Points outside the grid are zero.
    3. Keep the column in registers: a queue q = cuda.local.array(QUEUE, float32) of planes z - 1
       (below), z (here), z + 1 (above) and LEAD planes of prefetch, so LEAD + 1 loads are in flight
       through the barriers; the halo point keeps a queue hq of planes z .. z + LEAD - 1. Index both
       only with constants (loops over range(constant) that unroll): registers, no stack.
    4. For each z: issue the prefetch loads of planes z + LEAD + 1 and (halo) z + LEAD (test z only
       near the chunk's end: split the march into a main loop and a tail of the last planes); call
       _stencil_plane (you write it too: plane z into its half, barrier, the outputs; every thread
       calls it); switch the half; rotate the queues.
       One barrier a plane is enough: the half written at z last held plane z - 2, which every
       thread finished reading before the barrier of plane z - 1.
    """
    raise NotImplementedError("Day 10: halo duty, z queue in registers, per plane: prefetch, _stencil_plane, switch "
                              "half, rotate (73 lines)")


@cuda.jit(device=True)
def _stencil_rows(plane, flat_out, at, rstep, mine, duty, on_duty, nrows, q, halo_here, c, cx, cy, cz):
    """One plane of the tall march: the thread's ROWS points of plane z into z's half of the plane,
    then their outputs.

    q is the (ROWS, LEAD + 3) register queue: q[r, 0], q[r, 1], q[r, 2] are row r's column at z - 1,
    z, z + 1. ``mine`` is the slot of the thread's first row in z's half (row r at mine + r * PLANE_W),
    ``duty`` the halo slot it fills when ``on_duty``, ``at`` the offset of its first row's point of
    plane z in flat_out (row r at at + r * rstep), rows r < nrows inside the grid. Store the ROWS points
    (and the halo point), cuda.syncthreads(), then for each inside row the stencil: x neighbours from
    the plane; the y neighbours from the plane only above the first and below the last row, the rest
    from the queue (the neighbouring row is the thread's own); z neighbours from the queue.
    """
    raise NotImplementedError("Day 10: ROWS points (and the halo point) into the plane, barrier, ROWS outputs sharing "
                              "their y neighbours (16 lines)")


@cuda.jit(device=True)
def _tall_step(plane, flat_u, flat_out, q, hq, at, ahead_at, halo_ahead_at, rstep, mine, duty, on_duty,
               nrows, nahead, halo_ahead_in, c, cx, cy, cz):
    """One step of the tall march: the prefetch of plane z + LEAD + 1 for rows r < nahead (and of the
    halo point's plane z + LEAD if halo_ahead_in) into the queues' landing slots, _stencil_rows for
    plane z, then both queues rotate by one plane. Offsets as in _stencil_rows; ``ahead_at`` and
    ``halo_ahead_at`` are the prefetches' offsets (row r at ahead_at + r * rstep).
    """
    raise NotImplementedError("Day 10: prefetch into q[r, LEAD + 2] and hq[LEAD], _stencil_rows, rotate both queues by "
                              "one (9 lines)")


@cuda.jit
def stencil_tall_kernel(flat_u, coef, flat_out, nz, ny, nx):
    """The z march with ROWS outputs a thread along y. Block (bx, by, bz) of BLOCK = (32, 16) threads
    owns columns x0 = 32 bx .., rows y0 = TILE_H by .. (TILE_H = 16 ROWS) and planes z0 = bz * Z_CHUNK ..
    z1 - 1; thread (tx, ty) owns the ROWS adjacent points (y0 + ROWS ty + r, x0 + tx), r < ROWS.

    1. plane = cuda.shared.array(TALL_BUFFER, float32): two (TALL_H, PLANE_W) planes, by z's parity.
       Halo duty by the thread's linear index t = 32 ty + tx: t < 32 the row above the tile, t < 64 the
       row below, then TILE_H threads the left column and TILE_H the right one (whole warps when
       TILE_H is a multiple of 32); the rest load none (2 * BLOCK[0] + 2 * TILE_H <= threads a block).
    2. Bounds once: nrows = how many of the thread's rows are inside the grid (0 when x >= nx); one
       uint64 offset for the first row's point of plane z, rows r further at + r * nx; one offset per
       prefetch; each grows by ny * nx a plane.
    3. Registers: q = cuda.local.array(TALL_QUEUE, float32): per row planes z - 1 .. z + LEAD and
       one slot the prefetch of plane z + LEAD + 1 lands in; the halo queue hq of LEAD + 1. Constant
       indices only.
    4. Per z: _tall_step (the prefetches: ROWS + 1 loads, z tested only in the tail; _stencil_rows;
       rotate both queues), then advance the offsets. The main march takes two planes a trip, written
       out, so each plane's half is a constant; the tail takes one and switches the half.
    """
    raise NotImplementedError("Day 10: halo duty by linear index, nrows, offsets, (ROWS, LEAD + 3) queue; main march "
                              "two planes a trip, tail (65 lines)")


KERNELS = {
    "naive": (stencil_naive_kernel, "void(float32[:, :, ::1], float32[::1], float32[:, :, ::1])"),
    # (u, coef, out) as flat views of the same (nz, ny, nx) grids, and the shape
    "zmarch": (stencil_zmarch_kernel, "void(float32[::1], float32[::1], float32[::1], int64, int64, int64)"),
    "optimized": (stencil_tall_kernel, "void(float32[::1], float32[::1], float32[::1], int64, int64, int64)"),
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


def zmarch(u, coef):
    _check(u, coef)
    d_u, d_coef = launch.to_device(u, coef)
    nz, ny, nx = u.shape
    out = launch.empty(u.shape, np.float32)
    grid = (launch.blocks(nx, BLOCK[0]), launch.blocks(ny, BLOCK[1]), launch.blocks(nz, Z_CHUNK))
    # Flat views of the same memory: the march addresses points by one offset that grows a plane a step.
    stencil_zmarch_kernel[grid, BLOCK](d_u.reshape(u.size), d_coef, out.reshape(u.size), nz, ny, nx)
    return launch.result(out, u, coef)


def optimized(u, coef):
    _check(u, coef)
    d_u, d_coef = launch.to_device(u, coef)
    nz, ny, nx = u.shape
    out = launch.empty(u.shape, np.float32)
    grid = (launch.blocks(nx, BLOCK[0]), launch.blocks(ny, TILE_H), launch.blocks(nz, Z_CHUNK))
    stencil_tall_kernel[grid, BLOCK](d_u.reshape(u.size), d_coef, out.reshape(u.size), nz, ny, nx)
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
