"""Day 62 exercise: embedding gather, a warp per token row -- out[t, :] = table[ids[t], :], table (vocab, hidden)
float32 or float16, ids (tokens,) int32 (int64 accepted), out (tokens, hidden) of the table's dtype.

The first operator of every language model: each token id picks one row of the embedding table. There
is no arithmetic at all: a gather is a copy whose source rows are chosen by an index array, so its only
questions are the ones of units 1 and 6 (how many bytes a request moves, how many are in flight) plus
one new one: how often the index itself is read. The kernels move the rows as unsigned words (uint32
for float32 and for pairs of float16, uint16 for a float16 row of odd length): the bytes, not the
values, which is also how the float16 table gets 16-byte accesses from course.wide's 4-byte load4.

ids are int32: a vocabulary fits in 2^31 (128k today), an int32 id is half the bytes of an int64 one,
and torch.nn.functional.embedding takes an IntTensor as well as a LongTensor. int64 ids (torch's
default dtype for token ids) are accepted too: the kernels compile for either.

Ids out of range: NumPy ids are checked on the host (ValueError naming the first bad id, nothing
launched). Device ids cannot be checked without a copy or a reduction (a synchronisation), so the
kernels check each id once (a compare a row, free) and fill a row whose id is outside [0, vocab) with
NaN (the rows of the others are right). torch stops the kernel with a device-side assert instead.

v1 naive        one thread per output element (t, c) = divmod(i, hidden): each thread loads ids[t]
                itself, so every id is read hidden times (a 4-byte load of ids per 4-byte element of the
                row: the L1 serves the repeats, but the load instructions double), and the element is a
                4-byte load and store (a warp's request: 4 sectors, 128 bytes).
v2 warp_per_row  a warp per token row, two rows a warp at once: every lane loads the row's id (32 lanes on
                one address: one request, one sector, a broadcast), so an id is read once; the row is
                copied in quads (16 bytes a lane: course.wide.load4/store4, a warp's request 16 sectors,
                512 bytes), two quads of each of the two rows loaded before any is stored: 64 bytes a
                lane in flight. A grid-stride loop over pairs of rows. Rows whose words are not a
                multiple of 4 (float32 hidden % 4 != 0, float16 hidden % 8 != 0) cannot start every row on
                the 16-byte grid: they take the same warp-per-row kernel with 4-byte (or 2-byte) words,
                two words of each row a lane in flight, then the row's tail.
v3 optimized    a block per token row (grid = tokens): the block scheduler starts blocks in order, so
                the grid sweeps the output front to back, ~1000 rows in flight at a time instead of
                v2's ~6000 spread over the whole output; each thread copies QUADS = 4 quads of the
                row (all four loads, then the stores: 64 bytes a lane in flight), its warp reading the
                id once (a broadcast), and the block is as wide as the row needs (row_threads: 256
                threads at hidden 4096 float32, 128 in float16). No grid-stride loop, no pair of rows:
                a thread holds 4 quads and an id, so more warps fit an SM than v2's 24. Rows off the
                16-byte grid take v2's word kernel.
library         torch.nn.functional.embedding(ids, table) on the GPU (a row of the table where torch is
                installed).

Napkin math (H200, device copy ~4.2 TB/s read + write): a token moves hidden x itemsize bytes read and
the same written (+ its 4-byte id): 32 KB a token at hidden 4096 float32.
  (32000, 4096, 16384)   256 MB read + 256 MB written: ~128 us at the copy rate.
  (128256, 4096, 4096)   64 MB + 64 MB: ~32 us (the table is 2.1 GB; 4096 of its rows are read).
  (32000, 4096, 16384, float16)  128 MB + 128 MB: ~64 us (torch measured at 84 % of copy there).
Little's law: ~4.8 TB/s x ~600 ns of latency is ~3 MB that must be in flight device-wide, ~23 KB an SM.
One quad a lane is 512 bytes a row: 4096 tokens, all in flight at once, would give 2 MB; two quads of
two rows a lane give 64 bytes a lane, 2 KB a warp: 8192 warps (16384 tokens) offer 16 MB (~6 MB resident
at once: the kernel's ~66 registers leave 3 blocks of 256 an SM), 2048 warps (4096 tokens) 4 MB. The
naive kernel has one 4-byte load a thread in flight: 128 bytes a warp, 8 KB an SM at 64 warps (a third
of what the latency asks), and twice the load instructions. v3 holds 4 quads a lane (64 bytes, as v2)
at 32 registers, so 64 warps an SM fit where v2's 66 registers let 24: ~2.7x the bytes in flight. Target:
optimized >= 90 % of the copy rate at the benchmark sizes and faster than torch.embedding. v2 on the H200
(make bench, device copy 4255 GB/s): 140.9 us (90 %), 40.8 us (78 %) and 73.1 us (86 %, float16) at the
three shapes, against torch.embedding's 147.1, 40.9 and 76.4 us. v3 on an H100 (make bench, copy
3028 GB/s): 184.7 us (96 %), 50.8 us (87 %) and 95.6 us (93 %) against torch's 189.7, 52.1 and 98.6
(v2 there: 193.5, 54.2, 99.7): faster than torch at all three.
Repeated ids (many equal tokens) hit in L2 and may beat the copy rate on reads: the benchmark
inputs have unique ids (all but the first and last, forced to 0 and vocab - 1), the bound; the tests
include inputs with repeats.

What you write (each raises NotImplementedError with its hint until you do):
  gather_naive_kernel                          i from cuda.grid(1); (t, c) from i; the id, checked against [0,
                                               vocab); the element or bad (10 lines)
  warp_rows                                    load ids[t0] (and ids[t0 + 1], or repeat the first row past the end);
                                               check each against [0, vocab) (13 lines)
  make_gather_kernel.gather_rows_kernel        two quads of each row a step (four loads, then four stores), the last
                                               quad of each row (15 lines)
  make_gather_kernel.gather_rows_words_kernel  two words of each row a step (all four loads, then the stores), then
                                               the tail word of each row (15 lines)
  gather_block_row_kernel                      QUADS quads a thread a step (the four loads, then the four stores),
                                               then the rest one at a time (13 lines)
Everything else in this file is given. Grade with:  make check DAY=62
"""

import functools

import numpy as np

from course import cuda, launch, wide
from solutions.day25_reduction_last_warp import WARP
from solutions.day26_reduction_grid_stride import _address

TITLE = "Embedding gather: a warp, then a block, per token row"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "warp_per_row", "optimized")
VEC = wide.WIDTH  # words in one 16-byte access
THREADS = 256  # 8 warps a block
BLOCKS_PER_SM = 8  # 64 warps an SM at most; fewer where the registers do not fit them
QUADS = 4  # optimized: 16-byte quads a thread copies of its block's row, all four loads before a store
assert QUADS == 4, "QUADS: gather_block_row_kernel's copy loop is written out for four quads a step"
ROWS = 2  # token rows a warp copies at once: the kernels copy a pair (warp_rows), so 2 only
assert ROWS == 2, "ROWS: the gather kernels copy a pair of rows a trip (warp_rows); no other count"
DTYPES = ("float32", "float16")
# (vocab, hidden, tokens[, "float16"][, "repeats"]): a single element; hidden 3, 5, 127, 129, 4097 (the
# 4-byte path and its tail), 4 and 128 (16-byte rows); tokens 1 and primes (an odd last row of a pair;
# 131 > the simulator's 128 rows a grid step: the grid-stride loop); "repeats": ids from 3 values.
# float16: hidden 3 (uint16 words), 6 (uint32 words, 4-byte path), 8 and 136 (16-byte rows).
TEST_SIZES = (
    (1, 1, 1), (7, 3, 5), (11, 4, 13), (5, 5, 2), (97, 127, 7), (13, 129, 3), (10, 4097, 2),
    (40, 128, 37, "repeats"), (6, 4, 131),
    (9, 3, 5, "float16"), (9, 6, 7, "float16"), (20, 8, 11, "float16"), (9, 136, 3, "float16", "repeats"),
    (7, 520, 3), (5, 2048, 2), (9, 1040, 3, "float16"),  # v3: 4 quads a thread, then the row's last quads
    (64, 256, 16),  # last: the traffic table's size (whole warps, 2 quads a lane a row)
)
# Llama-2's vocabulary and a long batch (512 MB moved: 9x the L2), Llama-3's 128k vocabulary with a
# shorter one (a 2.1 GB table, 4096 rows of it read), and the first in float16 (torch's guide row).
BENCH_SIZES = ((32000, 4096, 16384), (128256, 4096, 4096), (32000, 4096, 16384, "float16"))
BOUND = "memory"
# The bit patterns written where a device id is out of range: float32 NaN; two float16 NaNs; one.
BAD_WORD = {4: 0x7FC00000, 2: 0x7E00}
BAD_WORD_F16_PAIR = 0x7E007E00


def sizes(n) -> tuple[int, int, int, str, bool]:
    """(vocab, hidden, tokens, dtype name, repeats) of a problem size."""
    vocab, hidden, tokens = (int(v) for v in n[:3])
    extra = tuple(n[3:])
    dtype = next((e for e in extra if e in DTYPES), "float32")
    return vocab, hidden, tokens, dtype, "repeats" in extra


def make_inputs(n, seed: int = 0):
    """(table (vocab, hidden), ids (tokens,) int32). ids are distinct where tokens <= vocab (the bound's
    case: no row read twice), drawn with replacement beyond, or from 3 values with "repeats"; the first
    is always 0 and the last vocab - 1 (the table's two end rows)."""
    vocab, hidden, tokens, dtype, repeats = sizes(n)
    rng = np.random.default_rng(seed)
    table = rng.random((vocab, hidden), dtype=np.float32)  # uniform, not normal: 2 GB tables build fast
    table -= np.float32(0.5)
    table = table.astype(np.dtype(dtype), copy=False)
    if repeats:
        ids = rng.choice(np.array([0, vocab // 2, vocab - 1]), tokens)
    else:
        ids = rng.choice(vocab, tokens, replace=tokens > vocab)
    ids = ids.astype(np.int32)
    if tokens >= 2:
        ids[0], ids[-1] = 0, vocab - 1
    return table, ids


def reference(table, ids):
    return table[np.asarray(ids, dtype=np.int64)]


def traffic(table, ids):
    """(minimum bytes: each row read once and written once, each id read once; FLOPs: none)."""
    tokens, (_, hidden) = ids.shape[0], table.shape
    return 2 * tokens * hidden * table.dtype.itemsize + ids.nbytes, 0


# ---- v1: one thread per output element --------------------------------------------------------------

@cuda.jit
def gather_naive_kernel(table, ids, out, bad):  # table (vocab, hidden), out (tokens, hidden): words
    """Thread i = cuda.grid(1) < tokens * hidden writes element (t, c) = divmod(i, hidden):
    out[t, c] = table[ids[t], c], reading ids[t] itself (so every id is read hidden times), or bad
    where ids[t] is outside [0, vocab)."""
    raise NotImplementedError("Day 62: i from cuda.grid(1); (t, c) from i; the id, checked against [0, vocab); the "
                              "element or bad (10 lines)")


# ---- v2: a warp per token row, the id read once, 16-byte accesses ------------------------------------

@cuda.jit(device=True, inline=True)
def warp_rows(ids, vocab, t0):
    """The pair of rows a warp copies from token t0: (src_a, dst_a, ok_a, src_b, dst_b, ok_b). Each id is
    loaded once, by every lane (one address: a broadcast, one request). An id outside [0, vocab) reads
    row 0 (a safe address: the caller overwrites the row with bad afterwards, ok False). Past the last
    token, the second row repeats the first (the same lane writes the same bytes twice: no branch in
    the copy loop for an odd last row)."""
    raise NotImplementedError("Day 62: load ids[t0] (and ids[t0 + 1], or repeat the first row past the end); check "
                              "each against [0, vocab) (13 lines)")


@cuda.jit(device=True, inline=True)
def fill_bad(out, dst, lane, words, bad):
    """out[dst, :] = bad (the rare row whose id is out of range), word c by lane c % 32: the words the
    lane itself copied, so its own program order puts the fill after the copy (no other lane's)."""
    c = lane
    while c < words:
        out[dst, c] = bad
        c += WARP


@cuda.jit(device=True, inline=True)
def fill_bad_quads(out, dst, lane, nq, bad):
    """fill_bad for the 16-byte kernel: quad q by lane q % 32, as the copy stored them."""
    q = lane
    while q < nq:
        wide.store4(out, dst, VEC * q, (bad, bad, bad, bad))
        q += WARP


@functools.cache
def make_gather_kernel(wide_access: bool):
    """The warp-per-row kernel; wide_access: 16-byte quads (every row a multiple of 4 words, the arrays
    16-byte aligned), else single words (4 or 2 bytes)."""
    if wide_access:
        @cuda.jit
        def gather_rows_kernel(table, ids, out, bad):  # table (vocab, words), out (tokens, words): uint32
            """Warp w (of `warps` in the grid) copies rows t0 = ROWS w, ROWS (w + warps), ...: the pair
            from warp_rows, then quads q = lane, lane + 32, ... below nq = words / 4 of both rows: while
            q + 32 < nq, four wide.load4 first (quads q and q + 32 of each row: 64 bytes a lane in flight),
            then the four wide.store4; then the last single quad of each row if q < nq. Afterwards a
            row whose id was out of range is overwritten with bad (fill_bad_quads)."""
            vocab, words = table.shape
            tokens = ids.shape[0]
            nq = words // VEC
            lane = cuda.threadIdx.x % WARP
            warps = cuda.gridsize(1) // WARP
            t0 = ROWS * (cuda.grid(1) // WARP)
            while t0 < tokens:
                src_a, dst_a, ok_a, src_b, dst_b, ok_b = warp_rows(ids, vocab, t0)
                q = lane
                raise NotImplementedError("Day 62: two quads of each row a step (four loads, then four stores), the "
                                          "last quad of each row (15 lines)")
                if not ok_a:
                    fill_bad_quads(out, dst_a, lane, nq, bad)
                if not ok_b:
                    fill_bad_quads(out, dst_b, lane, nq, bad)
                t0 += ROWS * warps

        return gather_rows_kernel

    @cuda.jit
    def gather_rows_words_kernel(table, ids, out, bad):  # table (vocab, words), out (tokens, words)
        """gather_rows_kernel with single words: words c = lane, lane + 32, ... of both rows, while
        c + 32 < words two of each row loaded before the four stores, then the row's tail: the last word
        of the lane in each row if c < words."""
        vocab, words = table.shape
        tokens = ids.shape[0]
        lane = cuda.threadIdx.x % WARP
        warps = cuda.gridsize(1) // WARP
        t0 = ROWS * (cuda.grid(1) // WARP)
        while t0 < tokens:
            src_a, dst_a, ok_a, src_b, dst_b, ok_b = warp_rows(ids, vocab, t0)
            c = lane
            raise NotImplementedError("Day 62: two words of each row a step (all four loads, then the stores), then "
                                      "the tail word of each row (15 lines)")
            if not ok_a:
                fill_bad(out, dst_a, lane, words, bad)
            if not ok_b:
                fill_bad(out, dst_b, lane, words, bad)
            t0 += ROWS * warps

    return gather_rows_words_kernel


# ---- v3: a block per token row, the rows in order ---------------------------------------------------

@cuda.jit
def gather_block_row_kernel(table, ids, out, bad):  # table (vocab, words), out (tokens, words): uint32
    """Block t copies token row t (grid = tokens: the block scheduler starts the rows in order, so the
    grid sweeps the output front to back). Every thread loads ids[t] (a warp's 32 lanes on one address:
    one request, a broadcast) and checks it; thread i then copies quads q = i, i + T, i + 2T, i + 3T
    (T = blockDim.x) while q + 3T < nq: the QUADS loads first, then the QUADS stores; then the row's
    remaining quads one at a time (q < nq). A row whose id is outside [0, vocab) reads row 0 and is
    then overwritten with bad by the same threads (their own program order puts the fill last)."""
    vocab, words = table.shape
    nq = words // VEC
    t = cuda.blockIdx.x
    step = cuda.blockDim.x
    tok = ids[t]
    ok = 0 <= tok < vocab
    src = tok if ok else 0
    q = cuda.threadIdx.x
    raise NotImplementedError("Day 62: QUADS quads a thread a step (the four loads, then the four stores), then the "
                              "rest one at a time (13 lines)")
    if not ok:
        q = cuda.threadIdx.x
        while q < nq:
            wide.store4(out, t, VEC * q, (bad, bad, bad, bad))
            q += step


def row_threads(nq: int) -> int:
    """The block size for rows of nq quads: QUADS quads a thread, in whole warps, 32 to THREADS."""
    return min(THREADS, max(WARP, (nq // QUADS) // WARP * WARP))


_SIG = "void(uint32[:, ::1], int32[::1], uint32[:, ::1], uint32)"
KERNELS = {
    "naive": (gather_naive_kernel, _SIG),
    "naive.fp16": (gather_naive_kernel, "void(uint16[:, ::1], int32[::1], uint16[:, ::1], uint32)"),  # an fp16 element
    "warp_per_row": (make_gather_kernel(True), _SIG),
    "optimized": (gather_block_row_kernel, _SIG),
    "optimized.words": (make_gather_kernel(False), _SIG),  # both versions' rows off the 16-byte grid
}


def check_inputs(table, ids) -> None:
    """ValueError unless table is a C-contiguous float32 or float16 (vocab, hidden), vocab and hidden
    >= 1, ids a contiguous int32 or int64 (tokens,); NumPy ids must lie in [0, vocab)."""
    launch.check_array("table", table, dtype=(np.float32, np.float16), ndim=2)
    launch.check_array("ids", ids, dtype=(np.int32, np.int64), ndim=1)
    vocab, hidden = table.shape
    if vocab < 1 or hidden < 1:
        raise ValueError(f"table: expected at least one row and one column, got shape {tuple(table.shape)}")
    if isinstance(ids, np.ndarray) and ids.size:
        bad = np.flatnonzero((ids < 0) | (ids >= vocab))
        if bad.size:
            raise ValueError(f"ids: expected token ids in [0, {vocab}) (the table's rows), got ids[{bad[0]}] = "
                             f"{ids[bad[0]]} ({bad.size} out of range)")


def _words(a, dtype):
    """A contiguous device array (rows, cols) seen as (rows, cols * itemsize / word size) words (no copy)."""
    return a.view(np.dtype(dtype))


def naive(table, ids):
    check_inputs(table, ids)
    d_table, d_ids = launch.to_device(table, ids)
    hidden, tokens = table.shape[1], ids.shape[0]
    out = launch.empty((tokens, hidden), table.dtype)
    if tokens == 0:
        return launch.result(out, table, ids)
    word = np.uint32 if table.dtype.itemsize == 4 else np.uint16  # one element: the naive unit
    gather_naive_kernel[launch.blocks(tokens * hidden, THREADS), THREADS](
        _words(d_table, word), d_ids, _words(out, word), np.uint32(BAD_WORD[table.dtype.itemsize]))
    return launch.result(out, table, ids)


def _gather(table, ids, block_rows: bool):
    """warp_per_row (block_rows False) or optimized (True): the same checks, output and word view; rows
    off the 16-byte grid take the warp-per-row word kernel in both."""
    check_inputs(table, ids)
    d_table, d_ids = launch.to_device(table, ids)
    hidden, tokens = table.shape[1], ids.shape[0]
    out = launch.empty((tokens, hidden), table.dtype)
    if tokens == 0:
        return launch.result(out, table, ids)
    row_bytes = hidden * table.dtype.itemsize
    if row_bytes % 4 == 0:  # float32, or float16 pairs: 4-byte words
        word, bad = np.uint32, (BAD_WORD[4] if table.dtype.itemsize == 4 else BAD_WORD_F16_PAIR)
    else:  # a float16 row of odd length: 2-byte words
        word, bad = np.uint16, BAD_WORD[2]
    words = row_bytes // np.dtype(word).itemsize
    # Every row on the 16-byte grid: a row a multiple of 16 bytes and the table (a device view may start
    # anywhere) 16-byte aligned; the output is a fresh allocation.
    wide_access = words % VEC == 0 and word == np.uint32 and _address(d_table) % 16 == 0
    args = (_words(d_table, word), d_ids, _words(out, word), np.uint32(bad))  # uint32, as KERNELS compiles it
    if block_rows and wide_access:
        gather_block_row_kernel[tokens, row_threads(words // VEC)](*args)
        return launch.result(out, table, ids)
    warps = -(-tokens // ROWS)
    threads = min(THREADS, WARP * warps)
    kernel = make_gather_kernel(wide_access)
    # No more blocks an SM than its registers let in (3 of 256 threads at 66 registers): a grid of 8 an
    # SM would run as waves, the last one part-full.
    per_sm = launch.resident_blocks(kernel, threads, *args, most=BLOCKS_PER_SM)
    kernel[launch.grid_stride_blocks(WARP * warps, threads, per_sm), threads](*args)
    return launch.result(out, table, ids)


def warp_per_row(table, ids):
    return _gather(table, ids, block_rows=False)


def optimized(table, ids):
    return _gather(table, ids, block_rows=True)


def library(table, ids):
    """torch.nn.functional.embedding(ids, table) on the GPU (int32 or int64 ids, as given)."""
    import torch

    check_inputs(table, ids)
    tt = torch.as_tensor(table, device="cuda")
    ti = torch.as_tensor(ids, device="cuda")
    out = torch.nn.functional.embedding(ti, tt)
    return out.cpu().numpy() if isinstance(table, np.ndarray) else cuda.as_cuda_array(out)
