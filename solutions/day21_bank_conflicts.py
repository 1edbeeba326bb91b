"""Day 21: bank conflicts -- the tiled transpose with its shared tile laid out three ways.

out = x.T as a new C-contiguous array: out[c, r] = x[r, c] for x (rows, cols) float32; the same
kernels move float64 through ``transpose_f64(x, version)``.

Every version is one tiled transpose: a block of 32 x 8 threads owns a 32 x 32 tile. Each warp reads
one 128-byte row of the tile from x (coalesced) and stores it as a row of a shared tile; after one
barrier each warp reads a *column* of the shared tile and writes it as a 128-byte row of out
(coalesced). Only the layout of the shared tile changes from version to version:

v1 naive      tile (32, 32) (day 20's tiled kernel): the 32 lanes reading a column read words 32
              apart, all in one bank: 32 wavefronts per request, the shared pipe replays the read
              32 times.
v2 padded     tile (32, 33): one spare word a row shifts row r to start at bank r % 32, so a column
              spans all 32 banks: 1 wavefront. 128 bytes of shared memory a block go unused.
v3 swizzled   tile (32, 32), element (r, c) kept at column c ^ r: each row holds a permutation of
              itself (stores stay conflict-free) and a column's 32 elements sit in 32 different
              banks. No wasted word; one XOR on every shared address.
v4 optimized  the padded tile (a thread's four shared addresses are one base plus constants that fold
              into the instruction, where the swizzle needs an XOR each), and interior tiles (every
              tile at 8192 x 8192) staged and written with unsigned indices and no guards: only the
              ragged right and bottom edges pay for bounds checks.

8-byte elements: the banks are 4 bytes wide and a float64 covers two, so 32 lanes x 8 bytes = 256
bytes = 2 wavefronts at least. In the (32, 32) float64 tile a column's elements sit 64 words apart,
every one in banks 0 and 1: 32 wavefronts. One spare *element* a row (8 bytes, 2 words) puts row r at
bank 2r % 32: each even bank then holds two of the column's elements (lanes r and r + 16), which
is 2 wavefronts, the minimum. The xor swizzle reaches the same 2 with no padding.

Napkin math (H200): 8 bytes a float32 element (read + write); 8192 x 8192 moves 537 MB, ~0.13 ms at
the ~4.2 TB/s copy rate. Per SM (132 SMs, ~1.98 GHz) that is ~16 bytes a clock: a 32 x 32 tile
(8 KB in and out) every ~510 clocks. The shared pipe serves one wavefront a clock: the padded or
swizzled tile needs 32 (row stores) + 32 (column reads) = 64 wavefronts a tile, an eighth of the
budget; the naive tile needs 32 + 32 x 32 = 1056, twice the budget: expect naive at about half the
copy rate at best, the other three bound by DRAM. float64: a tile is 16 KB (~1020 clocks) against
32 x 2 + 32 x 32 = 1088 wavefronts for the naive tile: the conflicts cost less per byte, and leave
no margin; padded or swizzled, 128. Bytes in flight: each thread issues its 4 loads before the
barrier; 8 blocks an SM (2048 threads) keep 32 KB of loads in flight an SM, about what ~4.8 TB/s
of HBM3e at ~700 ns needs (~25 KB an SM). One tile per block: a grid-stride loop over tiles would
need a second barrier per tile (the next tile overwrites this one before its columns are read).
"""

import numpy as np

from course import cuda, launch
from numba import int64, uint32, uint64  # numba names only after the course import

TITLE = "Bank conflicts: padded and swizzled tiles"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "padded", "swizzled", "optimized")
# (rows, cols): one element, a single row and a single column (primes), tiles -1/+1, a prime shape
# with interior and ragged tiles, and whole tiles last (the traffic counted at TEST_SIZES[-1]).
TEST_SIZES = ((1, 1), (1, 67), (67, 1), (31, 33), (33, 31), (67, 97), (64, 96))
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"
RTOL = 0.0  # a transpose moves bits: exact

TILE = 32  # a warp's width: one 128-byte row of float32 per warp-wide load, one bank per column
BLOCK_ROWS = 8  # 32 x 8 threads, each moving TILE // BLOCK_ROWS = 4 elements of the tile
THREADS = (TILE, BLOCK_ROWS)
PER_THREAD = TILE // BLOCK_ROWS
PADDED_ROW = TILE + 1  # words a row of the padded tile: the spare one shifts each row by a bank


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols), dtype=np.float32),)


def reference(x):
    return np.ascontiguousarray(x.T)


def traffic(x):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * x.nbytes, 0


@cuda.jit(device=True)
def tile_origin(cols):
    """(r0, c0): the first row and column of x in this block's tile. The tiles are numbered row by row
    over one 1-D grid (a 2-D grid's y stops at 65535 blocks: a 4M x 1 matrix would not fit)."""
    tiles_c = uint32((cols + TILE - 1) // TILE)
    b = uint32(cuda.blockIdx.x)
    tr = b // tiles_c  # a 32-bit divide, once a thread: a 64-bit one is a long software routine
    return int64(tr) * TILE, int64(b - tr * tiles_c) * TILE


@cuda.jit
def transpose_naive_kernel(x, out):
    """Block b owns the tile of x at rows r0 = (b // tiles_c) * TILE, cols c0 = (b % tiles_c) * TILE
    (tiles_c = column tiles, rounded up: tile_origin gives both); its threads are (TILE, BLOCK_ROWS),
    tx = threadIdx.x, ty = threadIdx.y.

    1. tile = cuda.shared.array((TILE, TILE), x.dtype). For j = 0, BLOCK_ROWS, 2 * BLOCK_ROWS, ...:
       tile[ty + j, tx] = x[r0 + ty + j, c0 + tx] (a warp reads a row), the indices clamped to
       rows - 1 and cols - 1 so that every load is legal and a thread's four loads leave together.
    2. cuda.syncthreads(): a thread writes elements that other threads loaded.
    3. For the same j: out[c0 + ty + j, r0 + tx] = tile[tx, ty + j] where that element exists (a
       warp reads a tile column and writes a row of out: coalesced).
    x.dtype makes the tile float32 or float64 to match x.
    """
    # EXERCISE: day 20's tiled transpose: rows of x into a (TILE, TILE) tile, barrier, its columns out as rows
    tile = cuda.shared.array((TILE, TILE), x.dtype)  # a column of it: 32 words 32 apart, one bank
    rows, cols = x.shape
    r0, c0 = tile_origin(cols)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    for j in range(0, TILE, BLOCK_ROWS):
        r = min(r0 + ty + j, rows - 1)  # clamped: every load is legal, so all four leave at once
        c = min(c0 + tx, cols - 1)
        tile[ty + j, tx] = x[r, c]  # slots past the edge hold a copy: they are never written out
    cuda.syncthreads()  # the column a warp reads was loaded by all 8 warps of the block
    for j in range(0, TILE, BLOCK_ROWS):
        r = c0 + ty + j  # a row of out is a column of x
        c = r0 + tx
        if r < cols and c < rows:
            out[r, c] = tile[tx, ty + j]  # lane tx reads word 32 tx + k: bank k for every lane


@cuda.jit
def transpose_padded_kernel(x, out):
    """The naive kernel with the tile declared (TILE, PADDED_ROW), PADDED_ROW = TILE + 1: row r of
    the tile starts one bank further on than row r - 1, so the 32 words of a column fall in 32
    different banks."""
    # EXERCISE: the naive kernel with a (TILE, PADDED_ROW) tile
    tile = cuda.shared.array((TILE, PADDED_ROW), x.dtype)  # one spare word a row: row r starts at bank r % 32
    rows, cols = x.shape
    r0, c0 = tile_origin(cols)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    for j in range(0, TILE, BLOCK_ROWS):
        r = min(r0 + ty + j, rows - 1)  # clamped: every load is legal, so all four leave at once
        c = min(c0 + tx, cols - 1)
        tile[ty + j, tx] = x[r, c]  # slots past the edge hold a copy: they are never written out
    cuda.syncthreads()  # the padded column a warp reads was loaded by all 8 warps
    for j in range(0, TILE, BLOCK_ROWS):
        r = c0 + ty + j
        c = r0 + tx
        if r < cols and c < rows:
            out[r, c] = tile[tx, ty + j]  # word 33 tx + k: bank (tx + k) % 32, 32 banks


@cuda.jit
def transpose_swizzled_kernel(x, out):
    """The naive kernel with a (TILE, TILE) tile in which element (r, c) of the tile is kept at
    tile[r, c ^ r]: store x's element at tile[ty + j, tx ^ (ty + j)], and read element (tx, ty + j)
    back from tile[tx, (ty + j) ^ tx]. XOR with a fixed r permutes 0..31, so every row still holds
    32 distinct words, and down a column the 32 lanes land in 32 distinct banks."""
    # EXERCISE: the naive kernel with element (r, c) kept at tile[r, c ^ r], written and read there
    tile = cuda.shared.array((TILE, TILE), x.dtype)  # no padding: the swizzle spreads a column over the banks
    rows, cols = x.shape
    r0, c0 = tile_origin(cols)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    for j in range(0, TILE, BLOCK_ROWS):
        r = min(r0 + ty + j, rows - 1)  # clamped: every load is legal, so all four leave at once
        c = min(c0 + tx, cols - 1)
        tile[ty + j, tx ^ (ty + j)] = x[r, c]  # a row permuted within itself: still 32 banks
    cuda.syncthreads()  # the swizzled column a warp reads was loaded by all 8 warps
    for j in range(0, TILE, BLOCK_ROWS):
        r = c0 + ty + j
        c = r0 + tx
        if r < cols and c < rows:
            out[r, c] = tile[tx, (ty + j) ^ tx]  # bank (ty + j) ^ tx: distinct for the 32 lanes


@cuda.jit
def transpose_optimized_kernel(x, out):
    """The padded kernel, and when the whole tile lies inside x (r0 + TILE <= rows and
    c0 + TILE <= cols: every tile but the ragged right and bottom edges) staged and written back with
    uint64 indices and no clamps or guards; edge tiles take the padded kernel's clamped loads and
    guarded stores. One barrier between the two halves."""
    # EXERCISE: the padded tile; interior tiles with unsigned indices and no guards, edge tiles as in padded
    tile = cuda.shared.array((TILE, PADDED_ROW), x.dtype)  # padded: fixed offsets, no XOR per access
    rows, cols = x.shape
    r0, c0 = tile_origin(cols)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    interior = r0 + TILE <= rows and c0 + TILE <= cols  # the same for every thread of the block
    # Unsigned indices spare Numba's negative-index fix-up on every access: each address is one base
    # plus a constant (j * BLOCK_ROWS rows), so the unrolled loop is a load, a store, an add.
    src_r = uint64(r0 + ty)
    src_c = uint64(c0 + tx)
    ut = uint64(tx)
    uy = uint64(ty)
    if interior:
        for j in range(PER_THREAD):
            tile[uy + uint64(j * BLOCK_ROWS), ut] = x[src_r + uint64(j * BLOCK_ROWS), src_c]
    else:
        for j in range(0, TILE, BLOCK_ROWS):
            tile[ty + j, tx] = x[min(r0 + ty + j, rows - 1), min(c0 + tx, cols - 1)]
    cuda.syncthreads()  # the tile column a warp writes back was staged by every warp of the block
    if interior:
        dst_r = uint64(c0 + ty)
        dst_c = uint64(r0 + tx)
        for j in range(PER_THREAD):
            out[dst_r + uint64(j * BLOCK_ROWS), dst_c] = tile[ut, uy + uint64(j * BLOCK_ROWS)]
    else:
        for j in range(0, TILE, BLOCK_ROWS):
            r = c0 + ty + j
            c = r0 + tx
            if r < cols and c < rows:
                out[r, c] = tile[tx, ty + j]


_SIG = "void(float32[:, ::1], float32[:, ::1])"
_SIG64 = "void(float64[:, ::1], float64[:, ::1])"
_KERNEL = {
    "naive": transpose_naive_kernel,
    "padded": transpose_padded_kernel,
    "swizzled": transpose_swizzled_kernel,
    "optimized": transpose_optimized_kernel,
}
KERNELS = {
    **{v: (k, _SIG) for v, k in _KERNEL.items()},
    **{f"{v}.f64": (k, _SIG64) for v, k in _KERNEL.items()},  # the same kernel on 8-byte elements
}


def _transpose(version, x, dtype):
    launch.check_array("x", x, dtype=dtype, ndim=2)
    (d_x,) = launch.to_device(x)
    rows, cols = x.shape
    out = launch.empty((cols, rows), x.dtype)  # (cols, rows)
    tiles = launch.blocks(rows, TILE) * launch.blocks(cols, TILE) if rows and cols else 0
    if tiles:
        _KERNEL[version][tiles, THREADS](d_x, out)  # one block a tile: 1-D, so any shape fits the grid
    return launch.result(out, x)


def naive(x):
    return _transpose("naive", x, np.float32)


def padded(x):
    return _transpose("padded", x, np.float32)


def swizzled(x):
    return _transpose("swizzled", x, np.float32)


def optimized(x):
    return _transpose("optimized", x, np.float32)


def transpose_f64(x, version="optimized"):
    """x.T for x float64 (rows, cols), through the kernel of ``version`` (one of VERSIONS): the same
    kernels, their tile float64 because x is (8-byte words: two banks an element)."""
    if version not in _KERNEL:
        raise ValueError(f"version: expected one of {', '.join(_KERNEL)}, got {version!r}")
    return _transpose(version, x, np.float64)


def library(x):
    """What a CuPy user writes: a strided view made contiguous by CuPy's copy kernel."""
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(x).T)
