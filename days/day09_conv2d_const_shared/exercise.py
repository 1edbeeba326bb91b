"""Day 09 exercise: 2D convolution -- a 5x5 filter from a constant bank over shared-memory tiles.

out[r, c] = sum_{i, j} FILTER_BANK[which, i, j] * img[r + i - MASK_RADIUS, c + j - MASK_RADIUS], zeros
outside the image; `which` picks a filter of the bank at run time. Write the two kernels; the host
functions and the bank are given.
Grade with:  make check DAY=9
"""

import numpy as np

from course import cuda, launch
from numba import float32, int64, uint64  # noqa: F401  (you will need them; numba names only after the course import)

TITLE = "2D convolution: constant-memory filter bank, shared-memory tiles"
MEMORY_SPACE = "shared + constant"
VERSIONS = ("naive", "optimized")

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


@cuda.jit
def conv2d_naive_kernel(img, bank, which, out):
    """One thread per pixel: c, r = cuda.grid(2) (x walks the columns), guard r < rows and c < cols.
    out[r, c] = sum over i, j in range(MASK_WIDTH) of bank[which, i, j] * img[r + i - MASK_RADIUS,
    c + j - MASK_RADIUS], skipping pixels outside the image. `bank` is a global (NUM_FILTERS, 5, 5) array."""
    raise NotImplementedError("Day 09: two nested tap loops over global memory, bounds-checked (10 lines)")


@cuda.jit
def conv2d_tiled_kernel(img, which, out):
    """Block (bx, by) of BLOCK = (32, 8) threads owns the (TILE_H, TILE_W) = (128, 32) output tile whose
    first pixel is (row0, col0) = (by * TILE_H, bx * TILE_W).

    1. bank = cuda.const.array_like(FILTER_BANK); copy the 25 taps bank[which, i, j] into
       m = cuda.local.array((5, 5), float32) first (their latency hides behind the staging).
    2. tile = cuda.shared.array(SPAN_SLOTS, float32), row-major (SPAN_H, SPAN_W), holds
       img[row0 - 2 .. row0 + 129, col0 - 2 .. col0 + 33] (zero outside the image). Stage it with
       coalesced loads: warp ty loads span rows ty, ty + 8, ... (ROW_PASSES of them) of span columns
       0..31; then the last 4 span columns, spread over all THREADS threads (EDGE_PASSES passes).
       If the whole span is inside the image (most blocks), load with uint64 indices and no clamp;
       otherwise clamp the index into the image and write zero outside it. cuda.syncthreads().
    3. Thread (tx, ty) computes column col0 + tx of rows row0 + 16 ty .. row0 + 16 ty + 15: keep a 5x5
       window of tile values in registers (cuda.local.array, constant indices only) and, per output
       row, shift it up one row and read only the new bottom row from shared memory. Index the tile
       from one uint64 base per thread plus constants.
    4. Store the outputs straight to out: unguarded (uint64 indices) when all 16 rows are inside the
       image, else guard r < rows and c < cols. A warp writes 32 neighbours.
    """
    raise NotImplementedError("Day 09: stage tile + halo (clamp, zero), taps from const into registers, "
                              "barrier, slide a 5x5 register window down 16 rows (60 lines)")


KERNELS = {
    "naive": (conv2d_naive_kernel, "void(float32[:, ::1], float32[:, :, ::1], int64, float32[:, ::1])"),
    "optimized": (conv2d_tiled_kernel, "void(float32[:, ::1], int64, float32[:, ::1])"),
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


def optimized(img, which):
    _check(img, which)
    (d_img,) = launch.to_device(img)
    rows, cols = img.shape
    out = launch.empty(img.shape, np.float32)
    grid = (launch.blocks(cols, TILE_W), launch.blocks(rows, TILE_H))
    conv2d_tiled_kernel[grid, BLOCK](d_img, int(which), out)
    return launch.result(out, img)


def library(img, which):
    """The same filter through CuPy's ndimage (zero padding, centred mask): a benchmark row."""
    import cupy
    from cupyx.scipy import ndimage

    return ndimage.correlate(cupy.asarray(img), cupy.asarray(FILTER_BANK[which]), mode="constant", cval=0.0)
