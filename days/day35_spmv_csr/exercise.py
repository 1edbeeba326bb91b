"""Day 35 exercise: SpMV in CSR -- y = A x, A sparse (rows, cols) in compressed sparse rows, float32.

A is given as indptr (rows + 1,) int32, indices (nnz,) int32 and data (nnz,) float32: row r holds the
nonzeros data[indptr[r]:indptr[r + 1]] in the columns indices[indptr[r]:indptr[r + 1]] (sorted).
Rows may be empty, and one row may hold most of the matrix: the work per row is the data's, not ours.

v1 naive      scalar CSR: one thread per row walks its row. The 32 lanes of a warp walk 32 different
              rows, so one load touches up to 32 sectors; and a warp lasts as long as its longest row.
v2 vector     vector CSR: a warp per row, the lanes stride the row together (each load one coalesced
              128-byte line), then a shuffle tree sums the 32 partials. Right for rows of hundreds of
              nonzeros; a row of 5 leaves 27 lanes idle, and a row of 10^5 still keeps one warp busy
              for thousands of trips while the rest of the GPU has finished.
v3 optimized  rows binned by length, each bin with the parallelism it needs. A small kernel (run on
              the first call for an indptr array and cached: the analysis phase, not timed) lists the
              medium and long rows. Short rows (<= SHORT_MAX nonzeros): a thread per row in the
              natural order, all of its loads issued at once (clamped to the row, so none waits for a
              branch); medium rows: a warp per row, four loads in flight a lane; long rows
              (> WARP_MAX): cut into chunks of LONG_CHUNK nonzeros, a block per chunk, block sums
              added into y with one atomic per block.

Napkin math: each nonzero is 8 bytes (value + column) and 2 FLOPs, plus 4 bytes of indptr a row and
x, y: ~0.25 FLOP/byte, memory-bound. Matrix bytes = 8 nnz + 4 (rows + 1) (csr_bytes adds x and y).
The 2D Laplacian at side 4096: 16.8 M rows, 83.9 M nonzeros: 738 MB of matrix + 134 MB of x and y,
~0.21 ms at the H200's ~4.2 TB/s copy rate. The power-law matrix at 2^22 rows (~64 M nonzeros, a
few rows of ~10^5): ~530 MB, ~0.13 ms, if the gathers from x (16.8 MB: it stays in the 60 MB L2) and
the longest row do not set the time instead. The comparison is cuSPARSE (cupyx csr_matrix @ x).
Measured on the H200: Laplacian: naive 258 us, vector 4,126 us, optimized 244 us (84 % of the copy
rate), cuSPARSE 713 us; power law: naive 13,265 us, vector 2,681 us, optimized 581 us, cuSPARSE 3,822 us.

What you write (each raises NotImplementedError with its hint until you do):
  spmv_scalar_kernel  row = cuda.grid(1); guard row < y.size; loop j over the row's range; store y[row] (6 lines)
  group_sum           offset = width // 2; while offset > 0: add the shuffle from `offset` lanes down; halve (5
                      lines)
  spmv_vector_kernel  lane, warp and warp stride; for each of the warp's rows: lanes stride the row, group_sum, lane
                      0 stores (14 lines)
  spmv_short_kernel   row = cuda.grid(1); for a short row: SHORT_MAX clamped loads, keep k < n, store; long rows: 0
                      (14 lines)
  spmv_medium_kernel  warp w takes entries w, w + warps, ...; strided_dot from start + lane by WARP; group_sum; lane
                      0 stores (9 lines)
  spmv_long_kernel    strided_dot over the chunk; group_sum; warp sums to shared; barrier; warp 0 folds; atomic add;
                      barrier (17 lines)
Everything else in this file is given. Grade with:  make check DAY=35
"""

import numpy as np

from course import cuda, launch
from numba import float32

TITLE = "SpMV in CSR: scalar, vector and binned rows"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "vector", "optimized")
# (kind, size): make_inputs builds the matrix. Regular rows; a power law (short, medium rows); the hard
# inputs: every row empty but one, no nonzeros at all, one row holding most of the matrix (the long
# path, several chunks), one row, one column, empty rows between the others.
TEST_SIZES = (
    ("laplacian", 11),
    ("power_law", 97),
    ("one_row", 67),
    ("empty", 33),
    ("dominant", 45),
    ("dominant", 1),
    ("power_law", 1),
    ("one_col", 61),
    ("interleaved", 70),
)
# Side 4096: 16.8 M rows, 84 M nonzeros (738 MB); 2^22 rows of Zipf lengths (~0.5 GB): both ~9x the L2.
BENCH_SIZES = (("laplacian", 4096), ("power_law", 1 << 22))
BOUND = "memory"

THREADS = 256
WARP = 32
WARPS = THREADS // WARP
FULL_MASK = 0xFFFFFFFF
SHORT_MAX = 6  # rows up to this long: a thread each, every load in flight (H200: 6 beat 8 by 19 % on the
# 5-nonzero Laplacian rows, 244 against 300 us: each clamped repeat is still a load instruction)
WARP_MAX = 2048  # rows up to this long: a warp each (64 lane trips at most); longer rows: blocks
LONG_CHUNK = 4096  # nonzeros per block on a long row: 16 a thread, 4 loads in flight
LONG_ROW_LIMIT = 100_000  # the power law's longest rows at the bench size
HARD_ROW = 2 * LONG_CHUNK + 5  # the hard inputs' one full row: three chunks on the long path


def laplacian_2d(side: int):
    """The 5-point Laplacian on a side x side grid, as CSR: row p * side + q holds 4 on the diagonal
    and -1 for each of its (up to four) grid neighbours, columns sorted. (indptr, indices, data)."""
    n = side * side
    p, q = np.divmod(np.arange(n, dtype=np.int64), side)
    # The five candidates in column order: up, left, centre, right, down.
    cols = np.stack([np.where(p > 0, np.arange(n) - side, -1), np.where(q > 0, np.arange(n) - 1, -1),
                     np.arange(n), np.where(q < side - 1, np.arange(n) + 1, -1),
                     np.where(p < side - 1, np.arange(n) + side, -1)], axis=1)
    vals = np.tile(np.array([-1, -1, 4, -1, -1], dtype=np.float32), (n, 1))
    keep = cols >= 0
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    return indptr, cols[keep].astype(np.int32), vals[keep]


def _csr_from_lengths(lengths, cols: int, rng):
    """Random sorted, distinct columns for rows of the given lengths (each <= cols), values in [0.5, 1.5)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    indptr = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    nnz = int(indptr[-1])
    row = np.repeat(np.arange(lengths.size), lengths)
    rank = np.arange(nnz) - indptr[row]  # 0, 1, ... within each row
    # Sorted uniforms per row from cumulative exponential gaps; column = floor(u (cols - len + 1)) + rank
    # is strictly increasing within a row and below cols.
    gaps = rng.exponential(size=nnz + lengths.size)
    csum = np.cumsum(gaps)
    first = indptr[:-1] + np.arange(lengths.size)  # each row owns len + 1 gaps
    base = np.concatenate([[0.0], csum])[first]
    total = csum[first + lengths] - base
    u = (csum[np.arange(nnz) + row] - base[row]) / total[row]
    indices = (np.floor(u * (cols - lengths[row] + 1)).astype(np.int64).clip(0, cols - lengths[row]) + rank)
    data = rng.uniform(0.5, 1.5, nnz).astype(np.float32)
    return indptr.astype(np.int32), indices.astype(np.int32), data


def power_law(rows: int, seed: int = 0, *, cols: int | None = None, alpha: float = 1.9,
              max_len: int = LONG_ROW_LIMIT):
    """Row lengths from a Zipf law (P(len = k) ~ k^-alpha, k >= 1, capped at min(max_len, cols)): most
    rows a few nonzeros; at 2^22 rows and alpha 1.9: ~62 M nonzeros, ~2800 rows over WARP_MAX holding
    about half of them, ~80 at the cap of 10^5. Columns uniform and sorted within a row, values in
    [0.5, 1.5). cols defaults to rows. (indptr, indices, data), int32, int32, float32."""
    cols = rows if cols is None else cols
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.zipf(alpha, rows), min(max_len, cols))
    return _csr_from_lengths(lengths, cols, rng)


def csr_bytes(indptr, indices, data, x) -> int:
    """Bytes SpMV must move at least: the matrix (indptr, indices, data) once, x once, y once."""
    rows = indptr.shape[0] - 1
    return (indptr.size * 4 + indices.size * 4 + data.size * 4) + x.size * 4 + rows * 4


def make_inputs(n, seed: int = 0):
    """n = (kind, size). "laplacian": side; "power_law": rows; the hard inputs, size = rows:
    "one_row" (every row empty but one full row of HARD_ROW), "empty" (nnz 0), "dominant" (one row of
    HARD_ROW, the others 0-3), "one_col" (cols = 1), "interleaved" (even rows empty, odd rows 1-60).
    x in [0.5, 1.5). Except the Laplacian's, the values are positive, so |y[r]| = sum_j |a_rj x_j| and
    the grader's relative tolerance is one on that sum; the Laplacian's rows are checked against it
    in its grader."""
    kind, size = n
    rng = np.random.default_rng(seed)
    if kind == "laplacian":
        csr, cols = laplacian_2d(size), size * size
    elif kind == "power_law":
        csr, cols = power_law(size, seed), size
    else:
        cols = {"one_col": 1}.get(kind, HARD_ROW + 7)
        lengths = np.zeros(size, dtype=np.int64)
        if kind == "one_row":
            lengths[rng.integers(size)] = HARD_ROW
        elif kind == "dominant":
            lengths = rng.integers(0, 4, size)
            lengths[rng.integers(size)] = HARD_ROW
        elif kind == "one_col":
            lengths = rng.integers(0, 2, size)
        elif kind == "interleaved":
            lengths[1::2] = rng.integers(1, 61, size // 2)
        elif kind != "empty":
            raise ValueError(f"make_inputs: unknown matrix kind {kind!r}")
        csr = _csr_from_lengths(lengths, cols, rng)
    x = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    return (*csr, x)


def reference(indptr, indices, data, x):
    """y = A x, accumulated in float64."""
    rows = indptr.size - 1
    row = np.repeat(np.arange(rows), np.diff(indptr))
    prod = data.astype(np.float64) * x.astype(np.float64)[indices]
    return np.bincount(row, weights=prod, minlength=rows).astype(np.float32)


def traffic(indptr, indices, data, x):
    """(minimum bytes moved through device memory, FLOPs): csr_bytes, and a multiply-add a nonzero."""
    return csr_bytes(indptr, indices, data, x), 2 * indices.size


@cuda.jit
def spmv_scalar_kernel(indptr, indices, data, x, y):  # indptr (rows+1,), indices, data (nnz,), x (cols,), y (rows,)
    """Scalar CSR: thread row = cuda.grid(1) computes y[row] = sum of data[j] * x[indices[j]] over
    j in [indptr[row], indptr[row + 1]); threads with row >= y.size do nothing. An empty row gets 0.
    Accumulate in float32."""
    raise NotImplementedError("Day 35: row = cuda.grid(1); guard row < y.size; loop j over the row's range; store "
                              "y[row] (6 lines)")


@cuda.jit(device=True)
def group_sum(v, width):
    """The sum of v over each aligned group of `width` lanes (a power of two, <= 32): after the tree
    the first lane of each group holds its group's total (the others: anything). Every lane of the warp
    must call it. cuda.shfl_down_sync(FULL_MASK, v, offset) for offset = width / 2, ..., 2, 1."""
    raise NotImplementedError("Day 35: offset = width // 2; while offset > 0: add the shuffle from `offset` lanes "
                              "down; halve (5 lines)")


@cuda.jit
def spmv_vector_kernel(indptr, indices, data, x, y):
    """Vector CSR: a warp per row, grid-stride over rows: warp w = cuda.grid(1) // WARP takes rows
    w, w + cuda.gridsize(1) // WARP, ... Lane l sums elements start + l, start + l + 32, ... of the
    row, group_sum(acc, WARP) folds the 32 partials and lane 0 stores y[row]. The row is the same for
    the whole warp, so every lane reaches every shuffle."""
    raise NotImplementedError("Day 35: lane, warp and warp stride; for each of the warp's rows: lanes stride the row, "
                              "group_sum, lane 0 stores (14 lines)")


@cuda.jit
def bin_rows_kernel(indptr, medium, long_rows, counts):  # medium (cap,), long_rows (cap, 3), counts (2,)
    """The analysis pass: thread r (grid-stride) measures row r. Rows of SHORT_MAX or fewer nonzeros
    are left to the short kernel (no list); a row of up to WARP_MAX goes to medium[atomic slot of
    counts[0]]; a longer one to long_rows[atomic slot of counts[1]] = (row, start, end)."""
    r = cuda.grid(1)
    while r < indptr.size - 1:
        start = indptr[r]
        end = indptr[r + 1]
        length = end - start
        if length > WARP_MAX:
            slot = cuda.atomic.add(counts, 1, 1)
            long_rows[slot, 0] = r
            long_rows[slot, 1] = start
            long_rows[slot, 2] = end
        elif length > SHORT_MAX:
            medium[cuda.atomic.add(counts, 0, 1)] = r
        r += cuda.gridsize(1)


@cuda.jit
def spmv_short_kernel(indptr, indices, data, x, y):
    """A thread per row, in row order (consecutive lanes, consecutive rows). A row of n <= SHORT_MAX
    nonzeros: load its SHORT_MAX elements start + min(k, n - 1), k = 0 .. SHORT_MAX - 1 (unconditional:
    the compiler issues them all before the first returns; the repeats hit the same cache line) and add
    only those with k < n; store y[row] (0 for an empty row). A long row (> WARP_MAX) gets y[row] = 0:
    the long kernel adds its chunks there. A medium row is left alone: the medium kernel stores it."""
    raise NotImplementedError("Day 35: row = cuda.grid(1); for a short row: SHORT_MAX clamped loads, keep k < n, "
                              "store; long rows: 0 (14 lines)")


@cuda.jit(device=True)
def strided_dot(indices, data, x, j, end, step):
    """sum of data[k] * x[indices[k]] for k = j, j + step, ... < end, four loads in flight a trip."""
    acc = float32(0.0)
    while j + 3 * step < end:
        a0 = data[j] * x[indices[j]]
        a1 = data[j + step] * x[indices[j + step]]
        a2 = data[j + 2 * step] * x[indices[j + 2 * step]]
        a3 = data[j + 3 * step] * x[indices[j + 3 * step]]
        acc += (a0 + a1) + (a2 + a3)
        j += 4 * step
    while j < end:
        acc += data[j] * x[indices[j]]
        j += step
    return acc


@cuda.jit
def spmv_medium_kernel(indptr, medium, count, indices, data, x, y):  # medium (cap,), count (2,)
    """A warp per row of the medium list medium[0 .. count[0]), grid-stride by warps: lanes stride the
    row with strided_dot (four coalesced loads in flight a lane), group_sum(acc, WARP), lane 0 stores."""
    raise NotImplementedError("Day 35: warp w takes entries w, w + warps, ...; strided_dot from start + lane by WARP; "
                              "group_sum; lane 0 stores (9 lines)")


@cuda.jit
def spmv_long_kernel(chunks, indices, data, x, y):  # chunks (n_chunks, 3): row, start, end
    """A block per chunk of a long row (grid-stride over chunks): thread t sums elements start + t,
    start + t + THREADS, ... < end with strided_dot; each warp folds with group_sum, lane 0 writes a
    slot of a shared array of WARPS floats, one barrier, warp 0 folds the slots and its lane 0 adds the
    chunk's sum into y[row] with cuda.atomic.add (y[row] starts at 0: the short kernel wrote it). A
    second barrier before the next chunk overwrites the slots."""
    raise NotImplementedError("Day 35: strided_dot over the chunk; group_sum; warp sums to shared; barrier; warp 0 "
                              "folds; atomic add; barrier (17 lines)")


_CSR = "int32[::1], int32[::1], float32[::1], float32[::1], float32[::1]"
KERNELS = {
    "naive": (spmv_scalar_kernel, f"void({_CSR})"),
    "vector": (spmv_vector_kernel, f"void({_CSR})"),
    "optimized.bin": (bin_rows_kernel, "void(int32[::1], int32[::1], int32[:, ::1], int32[::1])"),
    "optimized.short": (spmv_short_kernel, f"void({_CSR})"),
    "optimized.medium": (spmv_medium_kernel, "void(int32[::1], int32[::1], int32[::1], int32[::1], float32[::1], "
                                             "float32[::1], float32[::1])"),
    "optimized.long": (spmv_long_kernel, "void(int32[:, ::1], int32[::1], float32[::1], float32[::1], float32[::1])"),
}

# One cache entry per purpose, for the last indptr array seen (held, so its id cannot be reused):
# its nonzero count (read from the device once) and its bins. Change a matrix in place and pass the
# same indptr object again, and the cached bins are stale: pass a new array.
_CACHE: dict = {}


def _cached(what: str, indptr, make):
    entry = _CACHE.get(what)
    if entry is None or entry[0] is not indptr:
        entry = (indptr, make())
        _CACHE[what] = entry
    return entry[1]


def _last(a) -> int:
    if isinstance(a, np.ndarray):
        return int(a[-1])
    (d,) = launch.to_device(a)
    return int(d[d.shape[0] - 1:].copy_to_host()[0])


def _check(indptr, indices, data, x) -> int:
    """Validate the CSR matrix and x; the number of rows."""
    launch.check_array("indptr", indptr, dtype=np.int32, ndim=1)
    if indptr.shape[0] < 1:
        raise ValueError("indptr: expected rows + 1 >= 1 entries (indptr[0] = 0), got an empty array")
    launch.check_array("indices", indices, dtype=np.int32, ndim=1)
    launch.check_array("data", data, dtype=np.float32, shape=(indices.shape[0],))
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    nnz = _cached("nnz", indptr, lambda: _last(indptr))
    if nnz != indices.shape[0]:
        raise ValueError(f"indices, data: expected indptr[-1] = {nnz} entries, got {indices.shape[0]}")
    if isinstance(indptr, np.ndarray) and (indptr[0] != 0 or np.any(np.diff(indptr) < 0)):
        raise ValueError("indptr: expected indptr[0] = 0 and non-decreasing offsets")
    if isinstance(indices, np.ndarray) and indices.size and (indices.min() < 0 or indices.max() >= x.shape[0]):
        raise ValueError(f"indices: expected columns in [0, {x.shape[0]}) (x has {x.shape[0]} entries), "
                         f"got [{indices.min()}, {indices.max()}]")
    return indptr.shape[0] - 1


def naive(indptr, indices, data, x):
    rows = _check(indptr, indices, data, x)
    d = launch.to_device(indptr, indices, data, x)
    y = launch.empty((rows,), np.float32)
    if rows:
        spmv_scalar_kernel[launch.blocks(rows, THREADS), THREADS](*d, y)
    return launch.result(y, indptr, indices, data, x)


def vector(indptr, indices, data, x):
    rows = _check(indptr, indices, data, x)
    d = launch.to_device(indptr, indices, data, x)
    y = launch.empty((rows,), np.float32)
    if rows:
        spmv_vector_kernel[launch.grid_stride_blocks(rows * WARP, THREADS), THREADS](*d, y)
    return launch.result(y, indptr, indices, data, x)


def _bins(d_indptr, rows: int, nnz: int):
    """The analysis pass (once per indptr array): (medium list, counts, number of medium rows, chunks
    of the long rows as a (n_chunks, 3) device array, n_chunks)."""
    medium = cuda.device_array(nnz // (SHORT_MAX + 1) + 1, dtype=np.int32)  # at most this many medium rows
    long_rows = cuda.device_array((nnz // (WARP_MAX + 1) + 1, 3), dtype=np.int32)
    counts = cuda.to_device(np.zeros(2, dtype=np.int32))
    bin_rows_kernel[launch.grid_stride_blocks(rows, THREADS), THREADS](d_indptr, medium, long_rows, counts)
    n_medium, n_long = (int(c) for c in counts.copy_to_host())
    spans = long_rows[:n_long].copy_to_host() if n_long else np.zeros((0, 3), np.int32)
    # Chunks of LONG_CHUNK nonzeros: (row, start, end) each, planned on the host (a few per long row).
    pieces = [(r, s, min(s + LONG_CHUNK, e)) for r, s0, e in spans.tolist() for s in range(s0, e, LONG_CHUNK)]
    chunks = cuda.to_device(np.array(pieces, dtype=np.int32).reshape(-1, 3)) if pieces else None
    return medium, counts, n_medium, chunks


def optimized(indptr, indices, data, x):
    rows = _check(indptr, indices, data, x)
    d_indptr, d_indices, d_data, d_x = launch.to_device(indptr, indices, data, x)
    y = launch.empty((rows,), np.float32)
    if rows:
        medium, counts, n_medium, chunks = _cached("bins", indptr, lambda: _bins(d_indptr, rows, indices.shape[0]))
        spmv_short_kernel[launch.blocks(rows, THREADS), THREADS](d_indptr, d_indices, d_data, d_x, y)
        if n_medium:
            blocks = launch.grid_stride_blocks(n_medium * WARP, THREADS)
            spmv_medium_kernel[blocks, THREADS](d_indptr, medium, counts, d_indices, d_data, d_x, y)
        if chunks is not None:
            blocks = launch.grid_stride_blocks(chunks.shape[0] * THREADS, THREADS)
            spmv_long_kernel[blocks, THREADS](chunks, d_indices, d_data, d_x, y)
    return launch.result(y, indptr, indices, data, x)


def library(indptr, indices, data, x):
    """cuSPARSE through CuPy: cupyx.scipy.sparse.csr_matrix((data, indices, indptr)) @ x."""
    import cupy
    from cupyx.scipy import sparse

    shape = (indptr.shape[0] - 1, x.shape[0])
    a = sparse.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=shape)
    return a @ cupy.asarray(x)
