"""Day 09 exercise: 2D convolution -- a 5x5 filter from a constant bank over shared-memory tiles.

out[r, c] = sum_{i, j} FILTER_BANK[which, i, j] * img[r + i - MASK_RADIUS, c + j - MASK_RADIUS], zeros
outside the image (a "same" correlation, as image filters are usually written).

v1 naive      one thread per pixel, (32, 8) blocks along the rows: each of the 25 taps loads its
              weight from a global copy of the bank and its pixel from global memory: 50 load
              requests per output, all but a few served by L1.
v2 column     the bank lives in constant memory (day 07) and each thread copies its filter's 25 taps
              into registers once; each block stages a (132, 36) window of the image -- its
              (128, 32) output tile and a 2-pixel halo all round -- in shared memory with coalesced
              loads, then each thread slides a 5x5 register window down 16 rows of one column: 5
              shared loads and 25 register FMAs per output, and coalesced stores straight to out.
              Blocks whose span lies wholly inside the image (all but the outer ring of tiles) stage
              it with no clamps and unsigned indices, and threads whose 16 outputs are all inside
              store them unguarded: edges keep the clamped, guarded path. The grid is
              BLOCKS_PER_SM blocks per SM walking the tiles: each step issues the next tile's 20
              loads a thread into registers, computes the current tile while they fly, then stages
              them (two barriers a step), so every block always has a span in flight.
v3 optimized  v2 with COLS = 2 neighbouring outputs a thread along x: the window is 5 x (COLS + 4)
              registers, so a new row is 6 shared loads for 2 x 25 FMAs. WIDE_ROWS = 8 rows a
              thread: a (64, 64) tile, 16 outputs a thread as in v2, ~126 registers, one block of 256
              threads an SM. With 16 rows (a (128, 64) tile, ~160 registers) a tile's set-up, barriers
              and guards are shared by 32 outputs a thread: ~44 SASS instructions an output on the
              interior path instead of ~57 (the same count for v2), but it measured slower (below).

Napkin math: 8 bytes through DRAM per pixel (one read, one write) and 50 FLOPs: 6.25 FLOP/byte,
under the H200's ~16 FLOP/byte ridge, so the floor is the copy rate: an (8192, 8192) image moves
537 MB, ~0.13 ms at 4.1 TB/s, which is ~16 SM clocks per warp of 32 outputs, ~64 warp-instructions
over the SM's four schedulers. Naive spends ~50 L1 requests on that warp (more where a row of 32
pixels straddles two cache lines): request-bound at roughly a third of the copy rate. The 25 FMAs an
output can never go, so the rest must be small: the first tiled kernel (8 rows a thread, every
pixel clamped, signed indices) issued ~160 SASS instructions an output and reached 32 % of the copy
rate. Here an interior thread issues ~50 an output (25 FFMA, 6 LDS, ~8 for staging, ~4 for the
store, the rest set-up), inside the budget, but not by much: at the copy rate 50 instructions an output are ~78 % of the
SM's issue slots (132 SMs x 4 schedulers x 1.98 GHz), at 85 % of it ~92 %. Measured on an H200: one
block per tile 189.4 us (68 %); the pipelined grid (2 blocks per SM, ~120 registers a thread) 185.5 us
(68 %): keeping a span in flight changed nothing, so bytes in flight were not the bound; the
instruction count is (68 % of the copy rate is ~54 % of the issue slots, with a barrier every tile).
v3's ~44 an output (16 rows) need ~69 % of the issue slots at the copy rate; at the ~62 % of peak issue
v2 sustains (~57 an output in 185.5 us), ~143 us was the prediction. Measured on an H200: 16 rows
183.9 us (69 %, `make bench DAY=9`); swept in another run, 8 rows 175.0 us (72.5 %), COLS = 4 with 8
rows 216.6 us.

What you write (each raises NotImplementedError with its hint until you do):
  conv2d_naive_kernel  two nested tap loops over global memory, bounds-checked (11 lines)
  conv2d_tiled_kernel  taps to registers; loop: next span into registers, compute current tile, barrier, stage,
                       barrier (94 lines)
  conv2d_wide_kernel   as conv2d_tiled_kernel, with COLS outputs a thread along x sharing a (5, COLS + 4) window
                       (100 lines)
Everything else in this file is given. Grade with:  make check DAY=9
"""

import numpy as np

from course import DEVICE, cuda, launch
from numba import float32, int64, uint64  # numba names only after the course import

TITLE = "2D convolution: constant-memory filter bank, shared-memory tiles"
MEMORY_SPACE = "shared + constant"
VERSIONS = ("naive", "column", "optimized")
# (rows, cols): a pixel; smaller than the mask; a tile -1 each way; a tile +1 each way (2 x 2 blocks,
# every tile edge crossed); primes (1 x 4 blocks, a ragged last tile).
TEST_SIZES = ((1, 1), (3, 4), (127, 31), (129, 33), (37, 101))
BENCH_SIZES = ((8192, 8192),)  # 268 MB in, 268 MB out: nine times the 60 MB L2
BOUND = "memory"

MASK_RADIUS = 2
MASK_WIDTH = 2 * MASK_RADIUS + 1  # 5 x 5 = 25 taps
BLOCK = (32, 8)  # (x = columns, y = rows): a warp is 32 pixels of one row
THREADS = BLOCK[0] * BLOCK[1]
ROWS_PER_THREAD = 16  # each thread slides its window down this many rows of its column
TILE_W = BLOCK[0]  # (128, 32) outputs per block
TILE_H = BLOCK[1] * ROWS_PER_THREAD
SPAN_W = TILE_W + 2 * MASK_RADIUS  # (132, 36) inputs staged: the tile and its halo
SPAN_H = TILE_H + 2 * MASK_RADIUS
SPAN_SLOTS = SPAN_H * SPAN_W  # the shared tile, flat
ROW_PASSES = -(-SPAN_H // BLOCK[1])  # 17 passes stage the span's first TILE_W columns, one row per warp
EDGE_PASSES = -(-SPAN_H * 2 * MASK_RADIUS // THREADS)  # 3 passes stage its last 2R columns
STAGE_LOADS = ROW_PASSES + EDGE_PASSES  # a thread's loads per span: 20
BLOCKS_PER_SM = 2  # the pipelined grids: blocks per SM that walk the tiles (~120 registers a thread: 2 fit)
COLS = 2  # optimized: neighbouring outputs a thread along x; a window row of COLS + 4 pixels feeds all
WIDE_ROWS = 8  # optimized: rows a thread slides its window down
WIDE_BLOCKS_PER_SM = 1  # optimized: its grid and the blocks ptxas must fit an SM (~126 registers: 2 fit; 1 timed)
_WIDE_BOUNDS = {} if DEVICE.kind == "sim" else {"launch_bounds": (THREADS, WIDE_BLOCKS_PER_SM)}
WIDE_W = BLOCK[0] * COLS  # (64, 64) outputs per block with COLS = 2, WIDE_ROWS = 8
WIDE_H = BLOCK[1] * WIDE_ROWS
WIN_W = COLS + 2 * MASK_RADIUS  # a window row: the taps of COLS outputs overlap in all but COLS - 1 + 1 pixels
WSPAN_W = WIDE_W + 2 * MASK_RADIUS  # (68, 68) inputs staged
WSPAN_H = WIDE_H + 2 * MASK_RADIUS
WSPAN_SLOTS = WSPAN_H * WSPAN_W
WROW_PASSES = -(-WSPAN_H // BLOCK[1])  # row passes over the span's first WIDE_W columns, COLS loads each
WEDGE_PASSES = -(-WSPAN_H * 2 * MASK_RADIUS // THREADS)  # its last 2R columns, spread over the block
WSTAGE_LOADS = WROW_PASSES * COLS + WEDGE_PASSES  # a thread's loads per span


def _filter_bank() -> np.ndarray:
    t = np.arange(-MASK_RADIUS, MASK_RADIUS + 1, dtype=np.float64)
    g1 = np.exp(-0.5 * t**2)
    gaussian = np.outer(g1, g1) / np.outer(g1, g1).sum()
    box = np.full((MASK_WIDTH, MASK_WIDTH), 1.0 / MASK_WIDTH**2)
    sharpen = -gaussian
    sharpen[MASK_RADIUS, MASK_RADIUS] += 2.0  # 2 * identity - blur: keeps the mean, boosts edges
    smooth = np.array([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
    edge_x = np.outer(smooth, np.array([-1.0, -2.0, 0.0, 2.0, 1.0]) / 8.0)  # odd in x: a flip changes sign
    # No symmetry at all: a kernel that flips or transposes the mask cannot pass with this one.
    lopsided = np.random.default_rng(9).uniform(-0.5, 1.0, (MASK_WIDTH, MASK_WIDTH))
    lopsided /= lopsided.sum()
    return np.stack([gaussian, box, sharpen, edge_x, lopsided]).astype(np.float32)


FILTER_BANK = _filter_bank()  # (NUM_FILTERS, MASK_WIDTH, MASK_WIDTH), compiled into the constant bank
NUM_FILTERS = FILTER_BANK.shape[0]
FILTER_NAMES = ("gaussian", "box", "sharpen", "edge-x", "lopsided")


def make_inputs(n, seed: int = 0):
    rows, cols = (n, n) if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    img = rng.standard_normal((rows, cols), dtype=np.float32)  # (rows, cols)
    which = int(rng.integers(NUM_FILTERS))
    return img, which


def reference(img, which):
    rows, cols = img.shape
    padded = np.pad(img.astype(np.float64), MASK_RADIUS)  # zeros beyond every edge
    out = np.zeros((rows, cols))
    for i in range(MASK_WIDTH):
        for j in range(MASK_WIDTH):
            out += float(FILTER_BANK[which, i, j]) * padded[i:i + rows, j:j + cols]
    return out.astype(np.float32)


def traffic(img, which):
    """(minimum bytes moved through device memory, floating-point operations)."""
    return 2 * img.nbytes, 2 * MASK_WIDTH * MASK_WIDTH * img.size


@cuda.jit
def conv2d_naive_kernel(img, bank, which, out):
    """One thread per pixel: c, r = cuda.grid(2) (x walks the columns), guard r < rows and c < cols.
    out[r, c] = sum over i, j in range(MASK_WIDTH) of bank[which, i, j] * img[r + i - MASK_RADIUS,
    c + j - MASK_RADIUS], skipping pixels outside the image. `bank` is a global (NUM_FILTERS, 5, 5) array."""
    raise NotImplementedError("Day 09: two nested tap loops over global memory, bounds-checked (11 lines)")


@cuda.jit
def conv2d_tiled_kernel(img, which, out):
    """A grid of a few blocks per SM; block b of BLOCK = (32, 8) threads walks the (TILE_H, TILE_W) =
    (128, 32) output tiles b, b + gridDim, ... (row-major over the image's tiles, so the blocks
    resident together cover a few rows of tiles and share their halo rows in L2). Tile `id` has its
    first output pixel at (row0, col0) = ((id // tiles_x) * TILE_H, (id % tiles_x) * TILE_W).

    1. bank = cuda.const.array_like(FILTER_BANK); copy the 25 taps bank[which, i, j] into
       m = cuda.local.array((5, 5), float32) once (constant indices: registers).
    2. Each step loads the NEXT tile's (SPAN_H, SPAN_W) = (132, 36) span, img[row0 - 2 .. row0 + 129,
       col0 - 2 .. col0 + 33] (zero outside the image), into pre = cuda.local.array(STAGE_LOADS,
       float32): warp ty loads span rows ty, ty + 8, ... (ROW_PASSES) of span columns 0 .. 31, then
       the last 4 span columns spread over all THREADS threads (EDGE_PASSES). Interior spans: uint64
       indices, no clamp; edge spans: clamp into the image, zero outside it.
    3. While those loads fly, the block computes the CURRENT tile from shared memory: thread (tx, ty)
       slides a 5x5 register window down rows 16 ty .. 16 ty + 15 of column tx, reading only each new
       row from shared memory, and stores its 16 outputs (unguarded when all are inside the image).
    4. Barrier (every thread is done reading the tile), pre -> tile (shared, row-major (SPAN_H,
       SPAN_W)), barrier (a window spans pixels other warps staged); the next tile becomes current.

    The grader checks the idea (taps through ld.const, pixels staged in shared memory behind a
    barrier, no local memory), not this exact scheme: another correct tiling passes too.
    """
    raise NotImplementedError("Day 09: taps to registers; loop: next span into registers, compute current tile, "
                              "barrier, stage, barrier (94 lines)")


@cuda.jit(**_WIDE_BOUNDS)
def conv2d_wide_kernel(img, which, out):
    """conv2d_tiled_kernel with COLS neighbouring outputs a thread along x: block b walks the (WIDE_H,
    WIDE_W) = (64, 64) output tiles b, b + gridDim, ...; thread (tx, ty) owns columns COLS tx ..
    COLS tx + COLS - 1 of tile rows WIDE_ROWS ty .. WIDE_ROWS ty + WIDE_ROWS - 1.

    1. Taps into registers m[5, 5] from the constant bank, as in conv2d_tiled_kernel.
    2. The next tile's (WSPAN_H, WSPAN_W) span into pre = cuda.local.array(WSTAGE_LOADS, float32):
       pass k, column pass kc loads span (row ty + 8 k, column tx + 32 kc) for kc < COLS (coalesced,
       and conflict-free when staged), then the last 4 span columns over all threads (WEDGE_PASSES).
       Interior spans unclamped with uint64 indices; edge spans clamped, zero outside the image.
    3. The current tile: the window is (5, WIN_W) registers, WIN_W = COLS + 4: each new row is WIN_W
       shared loads that feed 5 x COLS taps of COLS outputs (5 loads an output in the one-column
       kernel, (COLS + 4) / COLS here); the outputs wait in registers and are stored after.
    4. Barrier, pre -> tile, barrier, as in conv2d_tiled_kernel.
    """
    raise NotImplementedError("Day 09: as conv2d_tiled_kernel, with COLS outputs a thread along x sharing a (5, COLS + "
                              "4) window (100 lines)")


KERNELS = {
    "naive": (conv2d_naive_kernel, "void(float32[:, ::1], float32[:, :, ::1], int64, float32[:, ::1])"),
    "column": (conv2d_tiled_kernel, "void(float32[:, ::1], int64, float32[:, ::1])"),
    "optimized": (conv2d_wide_kernel, "void(float32[:, ::1], int64, float32[:, ::1])"),
}

_bank_on_device = None


def _check(img, which):
    launch.check_array("img", img, dtype=np.float32, ndim=2)
    if not isinstance(which, (int, np.integer)) or isinstance(which, bool) or not 0 <= which < NUM_FILTERS:
        raise ValueError(f"which: expected an int filter index in 0..{NUM_FILTERS - 1} "
                         f"({', '.join(FILTER_NAMES)}), got {which!r}")


def naive(img, which):
    global _bank_on_device
    _check(img, which)
    if _bank_on_device is None:
        _bank_on_device = cuda.to_device(FILTER_BANK)  # (NUM_FILTERS, MASK_WIDTH, MASK_WIDTH) in global memory
    (d_img,) = launch.to_device(img)
    rows, cols = img.shape
    out = launch.empty(img.shape, np.float32)
    grid = (launch.blocks(cols, BLOCK[0]), launch.blocks(rows, BLOCK[1]))
    conv2d_naive_kernel[grid, BLOCK](d_img, _bank_on_device, int(which), out)
    return launch.result(out, img)


def column(img, which):
    _check(img, which)
    (d_img,) = launch.to_device(img)
    rows, cols = img.shape
    out = launch.empty(img.shape, np.float32)
    tiles = launch.blocks(cols, TILE_W) * launch.blocks(rows, TILE_H)
    grid = min(tiles, launch.sm_count() * BLOCKS_PER_SM)  # a few blocks per SM walk all the tiles
    conv2d_tiled_kernel[grid, BLOCK](d_img, int(which), out)
    return launch.result(out, img)


def optimized(img, which):
    _check(img, which)
    (d_img,) = launch.to_device(img)
    rows, cols = img.shape
    out = launch.empty(img.shape, np.float32)
    tiles = launch.blocks(cols, WIDE_W) * launch.blocks(rows, WIDE_H)
    grid = min(tiles, launch.sm_count() * BLOCKS_PER_SM)  # a few blocks per SM walk all the tiles
    conv2d_wide_kernel[grid, BLOCK](d_img, int(which), out)
    return launch.result(out, img)


def library(img, which):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate(cupy.asarray(img), cupy.asarray(FILTER_BANK[which]), mode="constant", cval=0.0)
