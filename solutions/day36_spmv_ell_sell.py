"""Day 36: SpMV in ELL and sliced ELL (SELL-C-sigma) -- y = A x with A given in CSR, float32.

The input is day 35's: indptr (rows + 1,) int32, indices (nnz,) int32, data (nnz,) float32, x (cols,)
float32; rows may be empty and one row may hold most of the matrix. The versions convert A into their
own format first, once per indptr array (cached like day 35's row bins: not timed, the analysis phase
of a library). The plan (a width, a permutation) is made on the host for NumPy inputs and on the
device for device inputs (day 22's histogram, day 34's stable radix sort); the formats themselves are
always built by this day's fill kernels on the device.

v1 csr        day 35's best version (rows binned by length: a thread, a warp or blocks a row),
              imported: the row to beat.
v2 hyb        ELL + CSR (Bell and Garland's HYB, the CSR rows taking the place of their COO part):
              an ELL of width K stored column-major (slot k * rows + r), a thread per row, so lane l
              reads slot k of row r0 + l next to lane l + 1's: every load one 128-byte line, no
              row offsets read at all. K minimises a byte count made from the row-length histogram
              (rows x K slots against a warp's line for each row left out) and is capped at
              (4 nnz + 8 rows) / rows; rows longer than K keep an empty ELL row and go whole to day
              35's medium (a warp a row) and long (a block per chunk, atomics) kernels. On the
              Laplacian K = 5 = the longest row: pure ELL. On the power law K is small and the
              padding of every row to K is still paid by all of them.
v3 optimized  SELL-C-sigma, C = 32 (a warp), sigma = 256 C: rows sorted by length (ascending, stable)
              within windows of sigma rows, cut into slices of 32 consecutive sorted rows, each slice
              padded to ITS longest row and stored column-major inside the slice (slot
              slice_ptr[s] + 32 k + lane). A warp per slice, lane = row: coalesced like ELL, padded
              like CSR (a slice's rows have near-equal lengths after the sort), no shuffles; y written
              back through the permutation. Rows longer than SELL_MAX are left out of the slices (an
              empty row there) and handled by day 35's medium and long kernels, so a row of 10^5 does
              not make its slice 10^5 wide.

Napkin math: every stored slot costs 8 bytes (4 value + 4 column) and an x gather (4 bytes, from L2
when x fits its 60 MB: 16.8 MB for the power law, 67 MB for the Laplacian at side 4096, about the L2
size, and the stencil's gathers reuse neighbours); per row CSR reads 4 bytes of indptr, ELL nothing,
SELL 4 bytes of the permutation (the y scatter). So bytes = 8 slots + 4 rows (+ x, y) and slots/nnz
is the padding factor: the Laplacian at side 4096 (16.8 M rows, 83.9 M nonzeros): ELL 1.0002, SELL
1.0001 (sorted windows leave a few padded slices at the grid's edges): 0.87 GB moved, ~0.21 ms at the
H200's ~4.2 TB/s copy rate, the same as CSR, but with no indptr chain before the first load. The
power law at 2^22 rows (61.2 M nonzeros): ELL at the longest row would store 4.2e11 slots (6857x);
hyb's K = 4 stores 16.8 M slots for 5.3 M nonzeros (3.2x) and leaves 55.9 M to the CSR kernels; the
slices hold 19.2 M nonzeros in 21.5 M slots (1.12x), and the 18 K rows over SELL_MAX (42.0 M
nonzeros) go to day 35's kernels as in csr. So SELL's gain there is on the third of the matrix that
day 35 read with a thread (uncoalesced) or a warp (idle lanes) per short row. `padding()` computes
these on the host (the lesson's table). Measured on the H200: Laplacian: csr 244 us, hyb 225 us
(92 % of the copy rate), SELL 265 us, cuSPARSE 954 us; power law: csr 575 us, hyb 572 us, SELL 558 us,
cuSPARSE 3,733 us.
"""

import numpy as np

from course import cuda, launch
from numba import float32, int32, uint32  # noqa: F401  (numba names only after the course import)
from solutions.day22_histogram import optimized as byte_histogram  # day 22: 256 bins of bytes
from solutions.day34_radix_sort import sort_pairs  # day 34: stable radix sort of (key, value) pairs
from solutions.day27_scan_kogge_stone import scan_blocks  # day 27: inclusive scan of any length
from solutions.day35_spmv_csr import (  # noqa: F401  (the days' problem: the graders read these)
    BENCH_SIZES,
    HARD_ROW,
    LONG_CHUNK,
    THREADS,
    WARP,
    WARP_MAX,
    _cached,
    _check,
    _csr_from_lengths,
    csr_bytes,
    laplacian_2d,
    power_law,
    reference,
    spmv_long_kernel,
    spmv_medium_kernel,
    strided_dot,
)
from solutions.day35_spmv_csr import KERNELS as DAY35_KERNELS
from solutions.day35_spmv_csr import TEST_SIZES as DAY35_TEST_SIZES
from solutions.day35_spmv_csr import make_inputs as day35_inputs
from solutions.day35_spmv_csr import optimized as day35_optimized

TITLE = "SpMV in ELL, HYB and sliced ELL (SELL-C-sigma)"
MEMORY_SPACE = "global"
VERSIONS = ("csr", "hyb", "optimized")
# Day 35's matrices and hard inputs (every row empty but one, nnz 0, one row holding most of the
# matrix, one row, one column, empty rows interleaved; no row count a multiple of 32), plus
# "three_paths": short rows, one medium row (a warp) and one long row (blocks) in one matrix.
TEST_SIZES = (
    *(size for size in DAY35_TEST_SIZES if size[0] != "laplacian"),
    ("three_paths", 75),
    ("laplacian", 11),  # last: the traffic table (bench without a GPU) shows whole-line loads here
)
BOUND = "memory"

C = WARP  # rows a slice: a warp, lane = row
SIGMA = 256 * C  # rows a sorting window: 8192 (sorting further would scatter x and y more)
SELL_MAX = 256  # rows longer than this leave the slices for day 35's warp and block kernels
KEY_BITS = 16  # sort key = window << KEY_BITS | length: lengths <= SELL_MAX fit below
ELL_CAP_SLOTS = 4  # ELL may store at most 4 nnz + 8 rows slots ...
ELL_CAP_ROW = 8  # ... beyond that its padding costs more than the matrix itself
HIST_BINS = 256  # day 22's bins: row lengths clipped to 255 for planning K


def make_inputs(n, seed: int = 0):
    """Day 35's make_inputs (its (kind, size) kinds), plus "three_paths": size rows of 0-40 nonzeros,
    one row of SELL_MAX + 45 (day 35's warp-per-row kernel here) and one of HARD_ROW (its blocks)."""
    kind, size = n
    if kind != "three_paths":
        return day35_inputs(n, seed)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 41, size)
    mid, big = rng.choice(size, 2, replace=False)
    lengths[mid], lengths[big] = SELL_MAX + 45, HARD_ROW
    cols = HARD_ROW + 7
    csr = _csr_from_lengths(lengths, cols, rng)
    return (*csr, rng.uniform(0.5, 1.5, cols).astype(np.float32))


def traffic(indptr, indices, data, x):
    """(minimum bytes, FLOPs): the CSR matrix once, x and y (csr_bytes), a multiply-add a nonzero. The
    padded formats move more: padding() says how much."""
    return csr_bytes(indptr, indices, data, x), 2 * indices.size


# ---- the plan, on the host: what each format stores (also the lesson's padding table) -----------

def hyb_width(hist, rows: int, nnz: int) -> int:
    """ELL width K from hist[j] = rows of length j (j < 255; the last bin: 255 or more): growing K to k
    costs `rows` slots and saves a warp's line (max(k, WARP) slots) for each row of length k that
    leaves the CSR part. The first minimum, capped so rows * K <= 4 nnz + 8 rows."""
    if rows == 0:
        return 0
    k = np.arange(1, HIST_BINS - 1)
    saved = np.concatenate([[0], np.cumsum(hist[1:HIST_BINS - 1] * np.maximum(k, WARP))])
    cost = rows * np.arange(HIST_BINS - 1) - saved
    return int(min(np.argmin(cost), (ELL_CAP_SLOTS * nnz + ELL_CAP_ROW * rows) // rows))


def _host_hist(lengths):
    return np.bincount(np.minimum(lengths, HIST_BINS - 1), minlength=HIST_BINS)


def sell_lengths(lengths):
    """The row lengths inside the slices: rows longer than SELL_MAX are stored elsewhere (0 here)."""
    return np.where(lengths <= SELL_MAX, lengths, 0)


def sell_keys(lengths, sigma: int = SIGMA):
    """uint32 sort keys: (row // sigma) << KEY_BITS | slice length, so a stable sort orders rows by
    length within each window of sigma rows and keeps the windows in place."""
    r = np.arange(lengths.size, dtype=np.uint64)
    return ((r // sigma) << KEY_BITS | sell_lengths(lengths).astype(np.uint64)).astype(np.uint32)


def padding(fmt: str, indptr, sigma: int = SIGMA) -> dict:
    """Stored slots of a format against the matrix's nonzeros, computed with NumPy from indptr alone:
    {"slots", "nnz", "factor" (slots / nnz of the part it stores), "rest" (nonzeros left to the CSR
    kernels)}. fmt: "ell" (width = the longest row), "hyb", "sell" (C = 32, sigma)."""
    lengths = np.diff(np.asarray(indptr)).astype(np.int64)
    rows, nnz = lengths.size, int(lengths.sum())
    if fmt == "ell":
        slots, stored = rows * int(lengths.max(initial=0)), nnz
    elif fmt == "hyb":
        k = hyb_width(_host_hist(lengths), rows, nnz)
        slots, stored = rows * k, int(lengths[lengths <= k].sum())
    elif fmt == "sell":
        eff = sell_lengths(lengths)[np.argsort(sell_keys(lengths, sigma), kind="stable")]
        eff = np.concatenate([eff, np.zeros(-rows % C, np.int64)]).reshape(-1, C)
        slots, stored = C * int(eff.max(axis=1).sum()), int(eff.sum())
    else:
        raise ValueError(f"fmt: expected 'ell', 'hyb' or 'sell', got {fmt!r}")
    return {"slots": slots, "nnz": stored, "factor": slots / stored if stored else 1.0, "rest": nnz - stored}


# ---- the conversion kernels (run once per matrix) ------------------------------------------------

@cuda.jit
def list_rows_kernel(indptr, lo, medium, long_rows, counts):  # medium (cap,), long_rows (cap, 3), counts (2,)
    """Thread r (grid-stride): a row of lo < length <= WARP_MAX goes to medium[atomic slot of
    counts[0]], a longer one to long_rows[atomic slot of counts[1]] = (row, start, end)."""
    r = cuda.grid(1)
    while r < indptr.size - 1:
        start = indptr[r]
        end = indptr[r + 1]
        if end - start > WARP_MAX:
            slot = cuda.atomic.add(counts, 1, 1)
            long_rows[slot, 0] = r
            long_rows[slot, 1] = start
            long_rows[slot, 2] = end
        elif end - start > lo:
            medium[cuda.atomic.add(counts, 0, 1)] = r
        r += cuda.gridsize(1)


@cuda.jit
def row_lengths_kernel(indptr, lengths):  # lengths (rows,) uint8: min(length, 255), for day 22's histogram
    r = cuda.grid(1)
    while r < lengths.size:
        lengths[r] = min(indptr[r + 1] - indptr[r], HIST_BINS - 1)
        r += cuda.gridsize(1)


@cuda.jit
def sell_keys_kernel(indptr, sigma, keys, order):  # keys (rows,) uint32, order (rows,) int32 = 0, 1, ...
    """keys[r] = (r // sigma) << KEY_BITS | (length if length <= SELL_MAX else 0); order[r] = r."""
    r = cuda.grid(1)
    while r < keys.size:
        n = indptr[r + 1] - indptr[r]
        keys[r] = uint32((r // sigma) << KEY_BITS) | uint32(n if n <= SELL_MAX else 0)
        order[r] = r
        r += cuda.gridsize(1)


@cuda.jit
def ell_fill_kernel(indptr, indices, data, width, ell_cols, ell_vals):  # ell_* (width * rows,)
    """Thread r (grid-stride over rows = indptr.size - 1) writes its row into the column-major ELL:
    slot k * rows + r for k < width holds (indices[start + k], data[start + k]) for k < n, and the
    padding (column 0, value 0: it gathers x[0], a cached line, and adds 0) for n <= k < width. A row
    longer than width is left to the CSR kernels: all of its slots are padding."""
    # EXERCISE: rows, r = cuda.grid(1) grid-stride; n = the row's length (0 when n > width); fill the width slots
    rows = indptr.size - 1
    r = cuda.grid(1)
    while r < rows:
        start = indptr[r]
        n = indptr[r + 1] - start
        if n > width:
            n = 0
        for k in range(width):  # consecutive threads, consecutive slots: coalesced stores
            slot = k * rows + r
            if k < n:
                ell_cols[slot] = indices[start + k]
                ell_vals[slot] = data[start + k]
            else:
                ell_cols[slot] = 0
                ell_vals[slot] = float32(0.0)
        r += cuda.gridsize(1)


@cuda.jit
def spmv_ell_kernel(ell_cols, ell_vals, width, x, y):  # ell_* (width * rows,), y (rows,)
    """ELL SpMV: thread r (grid-stride over rows = y.size) sums ell_vals[k * rows + r] *
    x[ell_cols[k * rows + r]] for k < width with strided_dot (four loads in flight) and stores y[r]:
    lanes read neighbouring slots, one 128-byte line a warp a load."""
    # EXERCISE: r = cuda.grid(1) grid-stride; y[r] = strided_dot(cols, vals, x, r, width * rows, rows)
    rows = y.size
    r = cuda.grid(1)
    while r < rows:
        y[r] = strided_dot(ell_cols, ell_vals, x, r, width * rows, rows)
        r += cuda.gridsize(1)


@cuda.jit
def slice_widths_kernel(indptr, perm, slice_len):  # perm (rows,), slice_len (slices,)
    """Thread s (grid-stride over slices) sets slice_len[s] = C * (the LONGEST slice length among the
    rows perm[C s .. C s + C) that exist), where a row's slice length is its length, or 0 if it is
    longer than SELL_MAX. The sort makes the rows of a slice alike, not the first one the longest."""
    # EXERCISE: for each slice: w = max over its (up to C) rows of the slice length; slice_len[s] = C * w
    s = cuda.grid(1)
    rows = perm.size
    while s < slice_len.size:
        w = 0
        for i in range(s * C, min(s * C + C, rows)):
            r = perm[i]
            n = indptr[r + 1] - indptr[r]
            if n <= SELL_MAX:
                w = max(w, n)
        slice_len[s] = C * w
        s += cuda.gridsize(1)


@cuda.jit
def sell_fill_kernel(indptr, indices, data, perm, slice_ptr, cols, vals):  # slice_ptr (slices + 1,)
    """Thread i (grid-stride over slices * C sorted positions): slice s = i // C, lane = i % C, width
    w = (slice_ptr[s + 1] - slice_ptr[s]) // C. Slot slice_ptr[s] + C k + lane, k < w, holds element
    k of row perm[i] while k < its slice length (0 for a row longer than SELL_MAX), padding (column 0,
    value 0) after it; positions past the last row (i >= rows) are all padding."""
    # EXERCISE: i grid-stride over slice_len * C; row perm[i] when i < rows; fill the slice's w slots of this lane
    rows = perm.size
    i = cuda.grid(1)
    while i < (slice_ptr.size - 1) * C:
        s = i // C
        base = slice_ptr[s] + i % C
        w = (slice_ptr[s + 1] - slice_ptr[s]) // C
        start = 0
        n = 0
        if i < rows:
            r = perm[i]
            start = indptr[r]
            n = indptr[r + 1] - start
            if n > SELL_MAX:
                n = 0
        for k in range(w):  # the lanes of a warp write C consecutive slots: coalesced
            if k < n:
                cols[base + C * k] = indices[start + k]
                vals[base + C * k] = data[start + k]
            else:
                cols[base + C * k] = 0
                vals[base + C * k] = float32(0.0)
        i += cuda.gridsize(1)


# ---- the SpMV kernel of v3 -----------------------------------------------------------------------

@cuda.jit
def spmv_sell_kernel(slice_ptr, cols, vals, perm, x, y):  # slice_ptr (slices + 1,), perm (rows,)
    """SELL-C-sigma: a warp per slice (one slice each, not grid-stride: the block scheduler hands the
    next slices to whichever SM is free). Thread i = cuda.grid(1), slice s = i // C, lane = i % C:
    acc = strided_dot(cols, vals, x, slice_ptr[s] + lane, slice_ptr[s + 1], C) (the lane's row, its
    slots C apart, four loads in flight) and, for i < rows, y[perm[i]] = acc: the sorted position's
    result back to its row."""
    # EXERCISE: i = cuda.grid(1); s = i // C; guard s < slices; strided_dot from slice_ptr[s] + lane by C; y[perm[i]]
    i = cuda.grid(1)
    s = i // C
    if s < slice_ptr.size - 1:
        acc = strided_dot(cols, vals, x, slice_ptr[s] + i % C, slice_ptr[s + 1], C)
        if i < perm.size:
            y[perm[i]] = acc  # scattered within a window of sigma rows: those lines stay in L2


_I, _F = "int32[::1]", "float32[::1]"
KERNELS = {
    **{"csr" + k[len("optimized"):]: v for k, v in DAY35_KERNELS.items() if k.startswith("optimized")},
    "hyb": (spmv_ell_kernel, f"void({_I}, {_F}, int64, {_F}, {_F})"),
    "hyb.fill": (ell_fill_kernel, f"void({_I}, {_I}, {_F}, int64, {_I}, {_F})"),
    "hyb.list": (list_rows_kernel, f"void({_I}, int64, {_I}, int32[:, ::1], {_I})"),
    "hyb.lengths": (row_lengths_kernel, f"void({_I}, uint8[::1])"),
    "optimized": (spmv_sell_kernel, f"void({_I}, {_I}, {_F}, {_I}, {_F}, {_F})"),
    "optimized.keys": (sell_keys_kernel, f"void({_I}, int64, uint32[::1], {_I})"),
    "optimized.widths": (slice_widths_kernel, f"void({_I}, {_I}, {_I})"),
    "optimized.fill": (sell_fill_kernel, f"void({_I}, {_I}, {_F}, {_I}, {_I}, {_I}, {_F})"),
    "optimized.medium": DAY35_KERNELS["optimized.medium"],
    "optimized.long": DAY35_KERNELS["optimized.long"],
}


# ---- host side -----------------------------------------------------------------------------------

def _csr_lists(d_indptr, rows: int, nnz: int, lo: int):
    """Rows longer than lo for day 35's kernels: (medium list, counts, how many, chunks of the long rows
    as (n_chunks, 3) (row, start, end) or None). Chunks planned on the host, as day 35 does."""
    medium = cuda.device_array(nnz // (lo + 1) + 1, dtype=np.int32)
    long_rows = cuda.device_array((nnz // (WARP_MAX + 1) + 1, 3), dtype=np.int32)
    counts = cuda.to_device(np.zeros(2, dtype=np.int32))
    list_rows_kernel[launch.grid_stride_blocks(rows, THREADS), THREADS](d_indptr, lo, medium, long_rows, counts)
    n_medium, n_long = (int(c) for c in counts.copy_to_host())
    spans = long_rows[:n_long].copy_to_host() if n_long else np.zeros((0, 3), np.int32)
    pieces = [(r, s, min(s + LONG_CHUNK, e)) for r, s0, e in spans.tolist() for s in range(s0, e, LONG_CHUNK)]
    chunks = cuda.to_device(np.array(pieces, dtype=np.int32).reshape(-1, 3)) if pieces else None
    return medium, counts, n_medium, chunks


def _run_csr_lists(lists, d_indptr, d_indices, d_data, d_x, y):
    """Day 35's medium and long kernels on the rows the padded format left out (their y: 0 so far)."""
    medium, counts, n_medium, chunks = lists
    if n_medium:
        blocks = launch.grid_stride_blocks(n_medium * WARP, THREADS)
        spmv_medium_kernel[blocks, THREADS](d_indptr, medium, counts, d_indices, d_data, d_x, y)
    if chunks is not None:
        blocks = launch.grid_stride_blocks(chunks.shape[0] * THREADS, THREADS)
        spmv_long_kernel[blocks, THREADS](chunks, d_indices, d_data, d_x, y)


def _hyb_format(indptr, d_indptr, d_indices, d_data, rows: int, nnz: int):
    """(ELL columns, values, width K, CSR lists). K from the row-length histogram: NumPy's for NumPy
    inputs, day 22's kernel on the device otherwise."""
    if isinstance(indptr, np.ndarray):
        hist = _host_hist(np.diff(indptr))
    else:
        lengths = cuda.device_array(rows, dtype=np.uint8)
        row_lengths_kernel[launch.grid_stride_blocks(rows, THREADS), THREADS](d_indptr, lengths)
        hist = np.asarray(byte_histogram(lengths).copy_to_host(), dtype=np.int64)
    width = hyb_width(hist, rows, nnz)
    ell_cols = cuda.device_array(max(1, width * rows), dtype=np.int32)
    ell_vals = cuda.device_array(max(1, width * rows), dtype=np.float32)
    grid = launch.grid_stride_blocks(rows, THREADS)
    ell_fill_kernel[grid, THREADS](d_indptr, d_indices, d_data, width, ell_cols, ell_vals)
    return ell_cols, ell_vals, width, _csr_lists(d_indptr, rows, nnz, width)


def hyb(indptr, indices, data, x):
    rows = _check(indptr, indices, data, x)
    d_indptr, d_indices, d_data, d_x = launch.to_device(indptr, indices, data, x)
    y = launch.empty((rows,), np.float32)
    if rows:
        ell_cols, ell_vals, width, lists = _cached(
            "hyb", indptr, lambda: _hyb_format(indptr, d_indptr, d_indices, d_data, rows, indices.shape[0]))
        spmv_ell_kernel[launch.grid_stride_blocks(rows, THREADS), THREADS](ell_cols, ell_vals, width, d_x, y)
        _run_csr_lists(lists, d_indptr, d_indices, d_data, d_x, y)
    return launch.result(y, indptr, indices, data, x)


def sell_format(indptr, indices, data, sigma: int = SIGMA):
    """The SELL-C-sigma format of a CSR matrix: (slice_ptr (slices + 1,), cols, vals (slice_ptr[-1],),
    perm (rows,), CSR lists), device arrays. The permutation: a stable sort of sell_keys, by NumPy for
    NumPy inputs, by day 34's radix sort on the device otherwise; the rest by the kernels above."""
    rows, nnz = indptr.shape[0] - 1, indices.shape[0]
    if (rows - 1) // sigma >= 1 << (32 - KEY_BITS):
        raise ValueError(f"sigma: {rows} rows need at most {1 << (32 - KEY_BITS)} windows, got sigma = {sigma}")
    d_indptr, d_indices, d_data = launch.to_device(indptr, indices, data)
    grid = launch.grid_stride_blocks(rows, THREADS)
    if isinstance(indptr, np.ndarray):
        perm = cuda.to_device(np.argsort(sell_keys(np.diff(indptr), sigma), kind="stable").astype(np.int32))
    else:
        keys = cuda.device_array(rows, dtype=np.uint32)
        order = cuda.device_array(rows, dtype=np.int32)
        sell_keys_kernel[grid, THREADS](d_indptr, sigma, keys, order)
        _, perm = sort_pairs(keys, order)
    slices = launch.blocks(rows, C)
    slice_ptr = cuda.to_device(np.zeros(slices + 1, dtype=np.int32))
    slice_len = cuda.device_array(slices, dtype=np.int32)
    slice_widths_kernel[launch.grid_stride_blocks(slices, THREADS), THREADS](d_indptr, perm, slice_len)
    scan_blocks(slice_len, slice_ptr[1:])  # inclusive: slice_ptr[s + 1] = slots of slices 0..s
    slots = int(slice_ptr[slices:].copy_to_host()[0])
    cols = cuda.device_array(max(1, slots), dtype=np.int32)
    vals = cuda.device_array(max(1, slots), dtype=np.float32)
    fill_grid = launch.grid_stride_blocks(slices * C, THREADS)
    sell_fill_kernel[fill_grid, THREADS](d_indptr, d_indices, d_data, perm, slice_ptr, cols, vals)
    return slice_ptr, cols, vals, perm, _csr_lists(d_indptr, rows, nnz, SELL_MAX)


def sell_c_sigma(indptr, indices, data, x, sigma: int = SIGMA):
    """SELL-C-sigma SpMV with windows of sigma rows (optimized uses SIGMA)."""
    rows = _check(indptr, indices, data, x)
    if sigma < 1:
        raise ValueError(f"sigma: expected a window of at least 1 row, got {sigma}")
    d_indptr, d_indices, d_data, d_x = launch.to_device(indptr, indices, data, x)
    y = launch.empty((rows,), np.float32)
    if rows:
        slice_ptr, cols, vals, perm, lists = _cached(f"sell{sigma}", indptr,
                                                     lambda: sell_format(indptr, indices, data, sigma))
        slices = slice_ptr.shape[0] - 1
        spmv_sell_kernel[launch.blocks(slices * C, THREADS), THREADS](slice_ptr, cols, vals, perm, d_x, y)
        _run_csr_lists(lists, d_indptr, d_indices, d_data, d_x, y)
    return launch.result(y, indptr, indices, data, x)


def csr(indptr, indices, data, x):
    return day35_optimized(indptr, indices, data, x)


naive = csr  # the day's starting point, by the course's name for it: day 35's binned CSR, not a strawman


def optimized(indptr, indices, data, x):
    return sell_c_sigma(indptr, indices, data, x, SIGMA)


def library(indptr, indices, data, x):
    """cuSPARSE through CuPy: cupyx.scipy.sparse.csr_matrix((data, indices, indptr)) @ x."""
    import cupy
    from cupyx.scipy import sparse

    shape = (indptr.shape[0] - 1, x.shape[0])
    a = sparse.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=shape)
    return a @ cupy.asarray(x)
