"""Day 20: matrix transpose -- out = x.T as a new C-contiguous array, out[c, r] = x[r, c].

x (rows, cols) float32, C-contiguous, any shape (1 x n, n x 1, primes); out (cols, rows).

v1 naive      one thread per element in (32, 8) blocks, x along the columns: a warp reads 32
              neighbouring floats of a row of x (coalesced, 4 sectors) and writes them down a column
              of out, rows * 4 bytes apart: 32 sectors a store request, each carrying 4 useful bytes.
v2 optimized  a 32 x 32 tile through shared memory: a block of (32, 8) threads loads its tile of x by
              rows (each thread 4 rows, 8 apart: four coalesced loads in flight), one barrier, then
              writes the tile's columns as rows of out (four coalesced stores). The transpose happens
              in the shared-memory read tile[tx, ty + 8k], which walks down a column of the tile.

Napkin math: 8 bytes an element, no FLOPs; 8192 x 8192 moves 537 MB, ~0.13 ms at the H200's ~4.2 TB/s
copy rate. Naive: every store request is 32 sector writes into L2 for 128 useful bytes, 8x the
sector traffic of a copy; L2 merges the partial sectors before DRAM sees them, but the request and
sector rate at the L1 and L2 bind, not DRAM. Tiled: global traffic is a copy's (4 sectors a request
both ways), but the unpadded tile's column read is a 32-way bank conflict: the 32 lanes of a warp
read words tx * 32 + j, all in bank j, so the read takes 32 wavefronts (the simulator counts 32 a
load request, 1 a store). Per 4 KB tile an SM spends 32 x 32 + 32 = 1056 shared-memory cycles:
132 SMs at ~1.9 GHz move ~1 TB/s through it, i.e. ~2 TB/s of copy traffic, about half the copy
rate. Day 21 pads the tile to 32 x 33 (and swizzles it), which makes that read one wavefront.
"""

import numpy as np

from course import cuda, launch
from numba import float32, uint64  # numba names only after the course import

TITLE = "Matrix transpose through a shared tile"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# (rows, cols): one element; a row and a column of a prime length; primes around a tile; tile-aligned
# last (the traffic counts are read at the last size: whole tiles, rows of out on sector boundaries).
TEST_SIZES = ((1, 1), (1, 257), (257, 1), (31, 33), (61, 67), (64, 96))
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

TILE = 32  # a warp's width: a tile row is one coalesced 128-byte request
BLOCK_ROWS = 8  # threads along y: (32, 8) = 256 threads a block
ROWS_PER_THREAD = TILE // BLOCK_ROWS  # 4 elements a thread each way
BLOCK = (TILE, BLOCK_ROWS)
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols), dtype=np.float32),)  # (rows, cols)


def reference(x):
    return np.ascontiguousarray(x.T)  # (cols, rows): a copy, exact


def traffic(x):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes, 0


@cuda.jit
def transpose_naive_kernel(x, out):  # x (rows, cols), out (cols, rows)
    """(32, 8) blocks, x along the columns: c, r = cuda.grid(2), so a warp reads 32 neighbouring
    floats of one row of x. Guard c < cols; rows from r in steps of cuda.gridsize(2)[1] (the grid's y
    is capped at 65535 blocks); write out[c, r] = x[r, c]."""
    # EXERCISE: c, r = cuda.grid(2); guard c < cols; rows from r in steps of gridsize y; out[c, r] = x[r, c]
    rows, cols = x.shape
    c, r = cuda.grid(2)
    step_r = cuda.gridsize(2)[1]
    if c < cols:
        while r < rows:
            # Lane c + 1 writes the next row of out, rows * 4 bytes further: one sector per lane.
            out[c, r] = x[r, c]
            r += step_r


@cuda.jit
def transpose_tiled_kernel(x, out):  # x (rows, cols), out (cols, rows)
    """One block of (32, 8) threads per 32 x 32 tile; a 1-D grid of tiles, tile columns fastest:
    tr, tc = divmod(cuda.blockIdx.x, tiles_c) with tiles_c = ceil(cols / 32); r0 = 32 tr, c0 = 32 tc.

    1. tile = cuda.shared.array((TILE, TILE), float32). Thread (tx, ty) loads
       tile[ty + 8k, tx] = x[r0 + ty + 8k, c0 + tx] for k = 0..3: a warp reads a row of the tile.
    2. cuda.syncthreads(): a thread is about to read values that other threads loaded.
    3. out[c0 + ty + 8k, r0 + tx] = tile[tx, ty + 8k] for k = 0..3: the block's tile lands at tile
       position (tc, tr) of out (the tile indices swap), and a warp writes a row of out from a
       column of the tile.
    A tile that lies wholly inside x (r0 + 32 <= rows and c0 + 32 <= cols) needs no guards: take that
    path with uint64 indices. A partial tile at the right or bottom edge guards each element against
    x's shape on the load and out's on the store. The barrier is outside both paths.
    """
    # EXERCISE: find the tile, load it by rows, one barrier, store its columns as rows of out (tile indices swapped)
    tile = cuda.shared.array((TILE, TILE), float32)  # (32, 32): unpadded, so a column sits in one bank
    rows, cols = x.shape
    tiles_c = (cols + TILE - 1) // TILE
    tr = cuda.blockIdx.x // tiles_c
    tc = cuda.blockIdx.x - tr * tiles_c
    r0 = tr * TILE
    c0 = tc * TILE
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    ux = uint64(tx)
    uy = uint64(ty)
    whole = r0 + TILE <= rows and c0 + TILE <= cols  # the same answer for every thread of the block
    if whole:
        # Unsigned indices and no guards: each of the four loads is one address plus a constant, and
        # the four are independent, so all are in flight before the first shared store waits.
        src_r = uint64(r0) + uy
        src_c = uint64(c0) + ux
        for k in range(ROWS_PER_THREAD):
            tile[uy + uint64(k * BLOCK_ROWS), ux] = x[src_r + uint64(k * BLOCK_ROWS), src_c]
    else:
        c = c0 + tx
        for k in range(ROWS_PER_THREAD):
            r = r0 + ty + k * BLOCK_ROWS
            if r < rows and c < cols:
                tile[ty + k * BLOCK_ROWS, tx] = x[r, c]
    cuda.syncthreads()  # thread (tx, ty) reads tile column tx, loaded by 32 different threads
    if whole:
        dst_r = uint64(c0) + uy  # rows of out are columns of x
        dst_c = uint64(r0) + ux
        for k in range(ROWS_PER_THREAD):
            # Lane tx reads word tx * 32 + ty + 8k: all 32 lanes in one bank, 32 wavefronts (day 21).
            out[dst_r + uint64(k * BLOCK_ROWS), dst_c] = tile[ux, uy + uint64(k * BLOCK_ROWS)]
    else:
        oc = r0 + tx
        for k in range(ROWS_PER_THREAD):
            orow = c0 + ty + k * BLOCK_ROWS
            if orow < cols and oc < rows:
                out[orow, oc] = tile[tx, ty + k * BLOCK_ROWS]


_SIG = "void(float32[:, ::1], float32[:, ::1])"
KERNELS = {"naive": (transpose_naive_kernel, _SIG), "optimized": (transpose_tiled_kernel, _SIG)}


def _check(x):
    launch.check_array("x", x, dtype=np.float32, ndim=2)


def naive(x):
    _check(x)
    rows, cols = x.shape
    (d_x,) = launch.to_device(x)
    out = launch.empty((cols, rows), np.float32)
    if x.size:
        grid = (launch.blocks(cols, BLOCK[0]), min(launch.blocks(rows, BLOCK[1]), MAX_GRID_Y))
        transpose_naive_kernel[grid, BLOCK](d_x, out)
    return launch.result(out, x)


def optimized(x):
    _check(x)
    rows, cols = x.shape
    (d_x,) = launch.to_device(x)
    out = launch.empty((cols, rows), np.float32)
    if x.size:
        tiles = launch.blocks(rows, TILE) * launch.blocks(cols, TILE)
        transpose_tiled_kernel[tiles, BLOCK](d_x, out)
    return launch.result(out, x)


def library(x):
    """What a CuPy user writes: a transposed view copied into a new C-contiguous array (a benchmark row)."""
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(x).T)
