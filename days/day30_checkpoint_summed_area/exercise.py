"""Day 30 exercise: checkpoint -- the summed-area table, S[i, j] = sum of img[:i + 1, :j + 1].

img float32 (rows, cols), C-contiguous, any shape (1 x n, n x 1, primes); S float32 (rows, cols). A 2-D
inclusive scan: a scan along every row, then along every column (either order gives S).

v1 naive      two passes in global memory. Rows: one thread per row walks it left to right, so the
              32 lanes of a warp touch 32 different rows, cols * 4 bytes apart: 32 sectors a load
              request and 32 a store, each carrying 4 useful bytes. Columns: one thread per column
              walks S down in place (lanes on neighbouring columns: 4 sectors a request).
v2 optimized  reduce, then scan, over 32 x 32 tiles through a padded (32, 33) shared tile (day 21):
              1. tile_sums: each tile's 32 column sums, 32 row sums and total (one read of img);
              2. scan_down: the column sums scanned down the tile rows and the row sums across the
                 tile columns (small arrays: 1/32 of the image each), and the (tiles_r, tiles_c)
                 table of tile totals turned into its own summed-area table (this same driver,
                 recursively: it is 1/1024 of the image);
              3. sat_tiles: each tile loads its 32 x 32 block, adds what lies above it (the column
                 sums) to its first row, what lies left of it (the row sums) to its first column and
                 the corner to element (0, 0), then scans its rows and its columns in shared memory
                 (each thread four elements in a row, a scan of the eight partials, days 27/28) and
                 stores S: coalesced, 4 sectors a request each way, 1 wavefront a shared request.

Napkin math: the least is one read and one write, 8 bytes an element: 8192 x 8192 moves 537 MB, about
0.13 ms at the H200's ~4.2 TB/s copy rate. Naive moves 16 bytes an element at least (S is written,
read and written again), and its row pass is worse than its bytes: a warp's request spans 32 rows, so
each sector brings 4 useful bytes per request and the L1 has to hold 32 rows' sectors until each
thread walks the other 7 floats of its sector; and 8192 rows are only 8192 threads (32 blocks) to cover
the latency of 8192 dependent steps. Optimized moves 12 bytes an element (img read twice, S written
once) plus the carries (2 x 4 bytes per 32 elements, read a few times): its floor is 8/12.3, about 65 %
of the copy rate counted against the 8-byte minimum, if both big passes stream at the copy rate.
One tile a block (65536 blocks of 256 threads at 8192 x 8192), four independent loads a thread
before the first barrier: 8 blocks an SM keep 32 KB of loads in flight, what HBM3e's latency needs.
The shared pipe: sat_tiles issues ~30 shared requests a warp a tile, each one wavefront (~240 a tile
for 8 KB moved, against the ~510 clocks an SM has per tile at the copy rate): DRAM should bind.
A single pass (8 bytes) needs a carry between tiles: decoupled look-back (day 29) in two dimensions;
Measured on the H200 at 8192 x 8192: naive 5,579 us, optimized 543 us (23 % of the copy rate,
10.3x), cupy.cumsum twice 6,491 us.

What you write (each raises NotImplementedError with its hint until you do):
  sat_rows_naive_kernel     r = cuda.grid(1); guard r < rows; running sum along row r, stored at every column (8
                            lines)
  sat_columns_naive_kernel  c = cuda.grid(1); guard c < cols; running sum down column c, written back in place (7
                            lines)
  tile_sums_kernel          stage the tile (load_tile), partial column and row sums of 4, reduce the 8 partials,
                            store coalesced (33 lines)
  scan_down_kernel          sum the thread's segment, share the 8 segment sums, rewalk the segment from the sum
                            above it (21 lines)
  sat_tiles_kernel          stage the tile with the carries added to its first row and column; scan rows, then
                            columns, 4 a thread (55 lines)
Everything else in this file is given. Grade with:  make check DAY=30
"""

import numpy as np

from course import cuda, launch
from numba import float32  # numba names only after the course import
from solutions.day20_transpose import BLOCK_ROWS, TILE
from solutions.day21_bank_conflicts import PADDED_ROW, tile_origin

TITLE = "Checkpoint: a summed-area table through shared tiles"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
# (rows, cols): one element, a single row and a single column (primes), tiles -1/+1, primes with
# interior and ragged tiles (carries from above, from the left and the corner), whole tiles last (the
# traffic counted at TEST_SIZES[-1]).
TEST_SIZES = ((1, 1), (1, 67), (67, 1), (31, 33), (33, 31), (67, 97), (64, 96))
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"
RTOL = 1e-5  # float32 against the float64 table; inputs in [0, 2), so every S[i, j] grows like (i+1)(j+1)

THREADS = (TILE, BLOCK_ROWS)  # (32, 8): a warp is one row of the tile
PER_THREAD = TILE // BLOCK_ROWS  # 4 elements a thread in each phase
NAIVE_THREADS = 256


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    # Non-negative, mean 1: S[i, j] ~ (i + 1)(j + 1) stays far from zero, so a relative tolerance on
    # each element is one on the sums it adds up, and a lost carry shows.
    return ((rng.random((rows, cols), dtype=np.float32) * np.float32(2.0)),)  # (rows, cols)


def reference(img):
    return np.cumsum(np.cumsum(img.astype(np.float64), axis=0), axis=1).astype(np.float32)


def traffic(img):
    """(minimum bytes moved through device memory, operations): read img once, write S once; two adds
    an element (one along the rows, one down the columns)."""
    return 2 * img.nbytes, 2 * img.size


# --- v1: naive, two passes in global memory -------------------------------------------------------


@cuda.jit
def sat_rows_naive_kernel(img, out):  # img (rows, cols), out (rows, cols)
    """Thread r = cuda.grid(1) (guard r < rows) walks row r left to right: out[r, c] = img[r, 0] + ...
    + img[r, c], the running sum kept in a register (start it from img[r, 0] so it is float32)."""
    raise NotImplementedError("Day 30: r = cuda.grid(1); guard r < rows; running sum along row r, stored at every "
                              "column (8 lines)")


@cuda.jit
def sat_columns_naive_kernel(a):  # a (rows, cols), scanned down in place
    """Thread c = cuda.grid(1) (guard c < cols) walks column c down: a[r, c] becomes a[0, c] + ... +
    a[r, c], in place, the running sum in a register."""
    raise NotImplementedError("Day 30: c = cuda.grid(1); guard c < cols; running sum down column c, written back in "
                              "place (7 lines)")


# --- v2: reduce, then scan, over shared tiles ------------------------------------------------------


@cuda.jit(device=True)
def load_tile(img, tile, r0, c0):
    """tile[ty + 8k, tx] = img[r0 + ty + 8k, c0 + tx] for k = 0..3, 0 past the edges of img; returns
    the thread's four values. The four loads are issued before the first shared store waits on one."""
    rows, cols = img.shape
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = c0 + tx
    r = r0 + ty
    inside = c < cols
    v0 = img[r, c] if inside and r < rows else float32(0)  # a warp reads one 128-byte row of the tile
    v1 = img[r + 8, c] if inside and r + 8 < rows else float32(0)
    v2 = img[r + 16, c] if inside and r + 16 < rows else float32(0)
    v3 = img[r + 24, c] if inside and r + 24 < rows else float32(0)
    tile[ty, tx] = v0
    tile[ty + 8, tx] = v1
    tile[ty + 16, tx] = v2
    tile[ty + 24, tx] = v3
    return v0, v1, v2, v3


@cuda.jit
def tile_sums_kernel(img, colsum, rowsum_t, total):
    """One block of (32, 8) threads per 32 x 32 tile, a 1-D grid (tile_origin gives r0, c0; tile
    (tr, tc) = (r0 // 32, c0 // 32)). colsum (tiles_r, cols), rowsum_t (tiles_c, rows), total
    (tiles_r, tiles_c).

    colsum[tr, c] = the sum of column c over the tile's rows; rowsum_t[tc, r] = the sum of row r over
    the tile's columns (stored transposed so that a warp writes 32 neighbouring rows at once);
    total[tr, tc] = the tile's sum. The tile is staged in a (TILE, PADDED_ROW) shared array so that a
    thread can sum four elements along a row (lanes on 32 rows: a padded column read, 1 wavefront).
    """
    raise NotImplementedError("Day 30: stage the tile (load_tile), partial column and row sums of 4, reduce the 8 "
                              "partials, store coalesced (33 lines)")


@cuda.jit
def scan_down_kernel(a):  # a (m, n), scanned down its columns in place
    """Block b of (32, 8) threads scans columns 32 b .. 32 b + 31 of a down, in place (inclusive).
    Thread (tx, ty) owns column c = 32 b + tx and the rows of segment ty (seg = ceil(m / 8) rows each):
    it sums its segment, the eight segment sums of a column go through shared memory, and it walks
    its segment again from the sum of the segments above it. Guard c < n inside the loops: every
    thread reaches the barrier."""
    raise NotImplementedError("Day 30: sum the thread's segment, share the 8 segment sums, rewalk the segment from the "
                              "sum above it (21 lines)")


@cuda.jit
def sat_tiles_kernel(img, top, left_t, corner, out):
    """One block of (32, 8) threads per 32 x 32 tile (tile_origin; tr = r0 // 32, tc = c0 // 32).
    top (tiles_r, cols) holds the column sums scanned down (top[tr - 1, c]: column c's sum above the
    tile), left_t (tiles_c, rows) the row sums scanned across (left_t[tc - 1, r]: row r's sum left of
    the tile), corner (tiles_r, tiles_c) the summed-area table of the tile totals (corner[tr - 1,
    tc - 1]: everything above and to the left).

    1. Stage the tile in tile = cuda.shared.array((TILE, PADDED_ROW), float32), after adding top[tr - 1,
       c] to its first row (tr > 0), left_t[tc - 1, r] to its first column (tc > 0), corner[tr - 1,
       tc - 1] to element (0, 0) (both > 0). A 2-D scan of that tile is S itself.
    2. Barrier. Rows: thread (tx, ty) scans row tx, columns 4ty..4ty+3 (a padded column read), writes
       the segment's sum to sums[ty, tx]; barrier; adds the sums of segments 0..ty-1 and writes its
       four elements back.
    3. Barrier. Columns: thread (tx, ty) scans column tx, rows 4ty..4ty+3, the same way through
       sums; after the barrier it adds the segments above and stores out[r0 + 4ty + i, c0 + tx]
       (a warp writes four 128-byte rows), guarded against the edges of img.
    Every barrier is outside the ifs: a thread past the edge still scans its zeros.
    """
    raise NotImplementedError("Day 30: stage the tile with the carries added to its first row and column; scan rows, "
                              "then columns, 4 a thread (55 lines)")


_SIG2 = "void(float32[:, ::1], float32[:, ::1])"
KERNELS = {
    "naive": (sat_rows_naive_kernel, _SIG2),
    "naive.columns": (sat_columns_naive_kernel, "void(float32[:, ::1])"),
    "optimized": (sat_tiles_kernel, "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], "
                                    "float32[:, ::1], float32[:, ::1])"),
    "optimized.tile_sums": (tile_sums_kernel, "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], "
                                              "float32[:, ::1])"),
    "optimized.scan_down": (scan_down_kernel, "void(float32[:, ::1])"),
}


def _check(img):
    launch.check_array("img", img, dtype=np.float32, ndim=2)
    if img.size == 0:
        raise ValueError(f"img: expected at least one element, got shape {tuple(img.shape)}")


def naive(img):
    _check(img)
    rows, cols = img.shape
    (d_img,) = launch.to_device(img)
    out = launch.empty((rows, cols), np.float32)
    sat_rows_naive_kernel[launch.blocks(rows, NAIVE_THREADS), NAIVE_THREADS](d_img, out)
    sat_columns_naive_kernel[launch.blocks(cols, NAIVE_THREADS), NAIVE_THREADS](out)
    return launch.result(out, img)


def summed_area(d_img, out):
    """The optimized summed-area table of device array d_img (rows, cols) into out (rows, cols):
    tile sums, their scans, the table of tile totals (this function, recursively: 1024 times smaller
    each level), then one pass over the tiles. A single tile needs no carries: one launch."""
    rows, cols = d_img.shape
    tiles_r = launch.blocks(rows, TILE)
    tiles_c = launch.blocks(cols, TILE)
    tiles = tiles_r * tiles_c
    if tiles == 1:
        unused = launch.empty((1, 1), np.float32)  # read only by tiles below or right of another
        sat_tiles_kernel[1, THREADS](d_img, unused, unused, unused, out)
        return out
    top = launch.empty((tiles_r, cols), np.float32)  # (tiles_r, cols)
    left_t = launch.empty((tiles_c, rows), np.float32)  # (tiles_c, rows)
    total = launch.empty((tiles_r, tiles_c), np.float32)
    tile_sums_kernel[tiles, THREADS](d_img, top, left_t, total)
    if tiles_r > 1:
        scan_down_kernel[launch.blocks(cols, TILE), THREADS](top)
    if tiles_c > 1:
        scan_down_kernel[launch.blocks(rows, TILE), THREADS](left_t)
    corner = total
    if tiles_r > 1 and tiles_c > 1:
        corner = summed_area(total, launch.empty((tiles_r, tiles_c), np.float32))
    sat_tiles_kernel[tiles, THREADS](d_img, top, left_t, corner, out)
    return out


def optimized(img):
    _check(img)
    (d_img,) = launch.to_device(img)
    out = launch.empty(img.shape, np.float32)
    return launch.result(summed_area(d_img, out), img)


def library(img):
    """What a CuPy user writes: two cumulative sums (CUB scans underneath), a benchmark row."""
    import cupy

    return cupy.cumsum(cupy.cumsum(cupy.asarray(img), axis=0), axis=1)
