"""Day 21 exercise: bank conflicts -- the tiled transpose with its shared tile laid out three ways.

out = x.T as a new C-contiguous array: out[c, r] = x[r, c] for x (rows, cols) float32; the same
kernels move float64 through ``transpose_f64(x, version)``.

Versions 1-3 are one tiled transpose: a block of 32 x 8 threads owns a 32 x 32 tile. Each warp reads
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
v4 optimized  16-byte accesses both ways (course.wide) through a tile kept *transposed*: a thread
              loads 4 consecutive floats of a row of x (ld.global.v4), stores them down a column of
              tile[c, s] (4 scalar st.shared), and after the barrier reads 4 consecutive floats of a
              tile row (ld.shared.v4) and writes them as 4 consecutive floats of a row of out
              (st.global.v4). Padding cannot serve a 16-byte read (a 33-word row does not start on a
              16-byte boundary): the swizzle moves whole 16-byte chunks instead, element (c, s) at
              column s ^ (c & 28). Blocks of 256 threads move 64 x 32 regions (2 loads in flight a
              thread). Shapes whose rows or columns are not a multiple of 4 (rows off the 16-byte
              grid), and float64, take the padded kernel.

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
v4: a 32 x 32 tile takes 8 + 32 + 8 + 8 = 56 memory instructions a block (16-byte global loads,
scalar shared stores, 16-byte shared reads, 16-byte global stores) instead of 128; 32 bytes in
flight a thread, 64 KB an SM; the same 64 wavefronts a tile. Measured on the H200: one tile a block
(16 bytes in flight a thread) 153 us, two 141 us (89 % of the copy rate), four no better. Taking the
blocks in bands down x (so that the blocks in flight write longer runs of out's rows) gained nothing:
the ~8 MB those blocks write at a time sit in the 50 MB L2, which drains them to DRAM in its own order.

What you write (each raises NotImplementedError with its hint until you do):
  transpose_naive_kernel      day 20's tiled transpose: rows of x into a (TILE, TILE) tile, barrier, its columns out
                              as rows (15 lines)
  transpose_padded_kernel     the naive kernel with a (TILE, PADDED_ROW) tile (15 lines)
  transpose_swizzled_kernel   the naive kernel with element (r, c) kept at tile[r, c ^ r], written and read there
                              (15 lines)
  transpose_optimized_kernel  16-byte loads of x, their 4 elements into a transposed, chunk-swizzled tile, barrier,
                              16-byte stores out (32 lines)
Everything else in this file is given. Grade with:  make check DAY=21
"""

import numpy as np

from course import cuda, launch, wide
from numba import float32, int64, uint32  # numba names only after the course import

TITLE = "Bank conflicts: padded and swizzled tiles"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "padded", "swizzled", "optimized")
# (rows, cols): one element, a single row and a single column (primes), tiles -1/+1, a prime shape
# with interior and ragged tiles, multiples of 4 with ragged regions (optimized's 16-byte path: one
# row of chunks, one chunk a row, both edges ragged), and whole tiles last (the traffic counted at
# TEST_SIZES[-1]).
TEST_SIZES = ((1, 1), (1, 67), (67, 1), (31, 33), (33, 31), (67, 97), (4, 36), (100, 4), (36, 100), (64, 96))
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"
RTOL = 0.0  # a transpose moves bits: exact

TILE = 32  # a warp's width: one 128-byte row of float32 per warp-wide load, one bank per column
BLOCK_ROWS = 8  # 32 x 8 threads, each moving TILE // BLOCK_ROWS = 4 elements of the tile
THREADS = (TILE, BLOCK_ROWS)
PER_THREAD = TILE // BLOCK_ROWS
PADDED_ROW = TILE + 1  # words a row of the padded tile: the spare one shifts each row by a bank

# optimized: 16-byte accesses (course.wide), float32 shapes whose rows and columns are multiples of 4.
VEC = 4  # float32 elements a 16-byte access: a warp's request moves 512 bytes instead of 128
OPT_TILES = 2  # 32 x 32 tiles a block, stacked down x's rows: a block's region is OPT_ROWS x TILE
OPT_ROWS = OPT_TILES * TILE
OPT_THREADS = 256  # threads a block, 1-D; 8 blocks an SM fill its 2048 threads
LOAD_STEPS = OPT_ROWS * TILE // VEC // OPT_THREADS  # 16-byte loads a thread, all in flight at once
assert LOAD_STEPS * OPT_THREADS * VEC == OPT_ROWS * TILE and OPT_THREADS % 32 == 0, "threads must split the region"
# The order the blocks take the regions in: 0, row by row (the blocks running at once read whole rows
# of x and write 256-byte pieces of every row of out); g > 0, g columns of regions down every band
# first, so that both sides come in runs (day 54's grouped order).
REGION_GROUP = 0


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
    raise NotImplementedError("Day 21: day 20's tiled transpose: rows of x into a (TILE, TILE) tile, barrier, its "
                              "columns out as rows (15 lines)")


@cuda.jit
def transpose_padded_kernel(x, out):
    """The naive kernel with the tile declared (TILE, PADDED_ROW), PADDED_ROW = TILE + 1: row r of
    the tile starts one bank further on than row r - 1, so the 32 words of a column fall in 32
    different banks."""
    raise NotImplementedError("Day 21: the naive kernel with a (TILE, PADDED_ROW) tile (15 lines)")


@cuda.jit
def transpose_swizzled_kernel(x, out):
    """The naive kernel with a (TILE, TILE) tile in which element (r, c) of the tile is kept at
    tile[r, c ^ r]: store x's element at tile[ty + j, tx ^ (ty + j)], and read element (tx, ty + j)
    back from tile[tx, (ty + j) ^ tx]. XOR with a fixed r permutes 0..31, so every row still holds
    32 distinct words, and down a column the 32 lanes land in 32 distinct banks."""
    raise NotImplementedError("Day 21: the naive kernel with element (r, c) kept at tile[r, c ^ r], written and read "
                              "there (15 lines)")


@cuda.jit(device=True)
def region_origin(rows, cols):
    """(r0, c0): the first row and column of x in this block's OPT_ROWS x TILE region, over a 1-D grid.
    REGION_GROUP = 0: the regions numbered row by row, as tile_origin numbers the tiles. REGION_GROUP
    = g: g columns of regions at a time, walked down every band of OPT_ROWS rows before the next g
    (the last group as wide as what is left), day 54's grouped order."""
    tiles_c = uint32((cols + TILE - 1) // TILE)
    b = uint32(cuda.blockIdx.x)
    if REGION_GROUP == 0:  # a constant: the compiler keeps one branch
        tr = b // tiles_c  # a 32-bit divide, once a thread
        return int64(tr) * OPT_ROWS, int64(b - tr * tiles_c) * TILE
    bands = uint32((rows + OPT_ROWS - 1) // OPT_ROWS)
    per_group = uint32(REGION_GROUP) * bands
    group = b // per_group
    first = group * uint32(REGION_GROUP)
    width = min(uint32(REGION_GROUP), tiles_c - first)
    k = b - group * per_group
    band = k // width
    return int64(band) * OPT_ROWS, int64(first + k - band * width) * TILE


@cuda.jit
def transpose_optimized_kernel(x, out):
    """16-byte accesses both ways (course.wide), through a tile kept transposed and swizzled in
    16-byte chunks. Threads (OPT_THREADS,), t = threadIdx.x; the block's region of x is OPT_ROWS =
    OPT_TILES * TILE rows by TILE columns at (r0, c0) = region_origin(cols); rows and cols are
    multiples of 4 (the host sends other shapes to the padded kernel), so a 4-element chunk is either
    wholly inside x or wholly outside.

    1. tile = cuda.shared.array((TILE, OPT_ROWS), float32, alignment=16): tile[c, s] holds
       x[r0 + (s ^ (c & 28)), c0 + c]: the region transposed, each row's 16-byte chunks permuted by
       c & 28 (an xor on bits 2..4 of s, so chunks stay whole).
    2. Load: chunk k = t + OPT_THREADS * step, for step in range(LOAD_STEPS), is row r = k // 8,
       columns q = 4 (k % 8) .. q + 3 of the region: v = wide.load4(x, r0 + r, c0 + q) (clamped to
       the last row / chunk on edge regions). All the loads first, then the stores:
       tile[q + i, r ^ q] = v[i] for i = 0..3.
    3. cuda.syncthreads().
    4. Store: chunk k is row c = k // (OPT_ROWS // 4) of out's region, its elements s = 4 (k % (OPT_ROWS
       // 4)) .. s + 3: wide.store4(out, c0 + c, r0 + s, wide.load4(tile, c, s ^ (c & 28))), guarded
       (c0 + c < cols and r0 + s < rows).
    """
    raise NotImplementedError("Day 21: 16-byte loads of x, their 4 elements into a transposed, chunk-swizzled tile, "
                              "barrier, 16-byte stores out (32 lines)")


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
    # the same kernels on 8-byte elements; optimized's 16-byte path is float32 only, float64 takes
    # the padded kernel (one 8-byte element a lane is already 256 bytes a request)
    **{f"{v}.f64": (k, _SIG64) for v, k in _KERNEL.items() if v != "optimized"},
}


def _aligned16(d) -> bool:
    """True when a device array starts on a 16-byte boundary (the simulator's stand-in keeps a NumPy
    array, whose address it checks wide accesses against)."""
    cai = getattr(d, "__cuda_array_interface__", None)
    return (cai["data"][0] if cai is not None else d.__array_interface__["data"][0]) % 16 == 0


def _transpose(version, x, dtype):
    launch.check_array("x", x, dtype=dtype, ndim=2)
    (d_x,) = launch.to_device(x)
    rows, cols = x.shape
    out = launch.empty((cols, rows), x.dtype)  # (cols, rows)
    if not (rows and cols):
        return launch.result(out, x)
    wide_ok = (version == "optimized" and dtype == np.float32 and rows % VEC == 0 and cols % VEC == 0
               and _aligned16(d_x) and _aligned16(out))
    if wide_ok:
        # one block an OPT_ROWS x TILE region, 1-D: any shape fits the grid
        regions = launch.blocks(rows, OPT_ROWS) * launch.blocks(cols, TILE)
        transpose_optimized_kernel[regions, OPT_THREADS](d_x, out)
    else:
        # A row of x or of out whose length is not a multiple of 4 elements starts rows off the
        # 16-byte grid, and float64 has no 4-wide access: the padded tile, 4-byte or 8-byte lanes.
        kernel = transpose_padded_kernel if version == "optimized" else _KERNEL[version]
        tiles = launch.blocks(rows, TILE) * launch.blocks(cols, TILE)
        kernel[tiles, THREADS](d_x, out)  # one block a tile: 1-D, so any shape fits the grid
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
    kernels, their tile float64 because x is (8-byte words: two banks an element); optimized takes
    the padded kernel, its 16-byte path being float32 only."""
    if version not in _KERNEL:
        raise ValueError(f"version: expected one of {', '.join(_KERNEL)}, got {version!r}")
    return _transpose(version, x, np.float64)


def library(x):
    """What a CuPy user writes: a strided view made contiguous by CuPy's copy kernel."""
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(x).T)
