"""Day 78 exercise: PagedAttention v1 -- one decode step of attention over a paged KV cache.

For each sequence s and query head h (KV head g = h // (num_heads // num_kv_heads)):

    out[s, h] = softmax(scale * q[s, h] . K[s, g, :ctx]) @ V[s, g, :ctx]

where token t of sequence s lives in physical block block_tables[s, t // block_size], at row
t % block_size. Nothing past context_lens[s] may be read: those slots hold other sequences'
tokens, stale data or garbage.

v1 naive      one thread per (sequence, head) walks the block table token by token, three passes
              (max logit, exp-sum with out += p * v in global memory, divide): each warp's 32 lanes
              read 32 different heads' rows, and 2048 threads cannot keep HBM busy.
v2 optimized  one block per (sequence, head); its warps take 16-row trips (a page at block 16) in
              turn. The caches are read as flat 8-byte words (four fp16 per load, unsigned offsets,
              no negative-index wraparound) by a kernel compiled per shape, so every loop bound is a
              constant; a group of lanes (8 at head_dim 128) shares one token, each lane holding 16
              columns of q and of the output, its words interleaved with its neighbours' so one warp
              instruction reads whole sectors; 16 rows per warp trip with every load issued first;
              online softmax in base 2; warps merged once through a few KB of shared memory that
              does not grow with the context.

Head sizes: exactly vLLM's 32, 64, 80, 96, 112, 120, 128, 192 and 256 (HEAD_DIMS; any other is a
ValueError naming them). head_layout gives a token as many lanes (a power of two) as keep a lane at
16 elements or fewer, so every size has 128's registers; where the lanes do not divide the row
(fp16 80, 112, 120) the last word slot is masked on the lanes past the row's end.

Load width: LOAD_WORDS (1) 8-byte words per load instruction. At 2 a lane holds pairs of adjacent
words and reads each pair with one 16-byte load (course.wide.load4), where every row starts on a
16-byte boundary (load_width: an even number of words a row); day 89's lesson has the napkin math.

Napkin math (64 seqs x 32 heads over 8 KV heads x head_dim 128, context 4096, fp16 cache): the K and
V pages are 64 * 4096 * 8 * 128 * 2 B * 2 = 1.07 GB, the queries and outputs 1 MB. Per KV element
read there are 4 FLOPs per query head sharing it (a multiply-add for q.k, one for p*v), so 8 FLOPs
per 2-byte element: 4 FLOP/B, far below the H200's ~12 FLOP/B FP32 ridge. Memory-bound: at
~4.1 TB/s the floor is ~0.26 ms.

What you write (each raises NotImplementedError with its hint until you do):
  paged_attention_naive_kernel             guard i < num_seqs * num_heads, then three loops over the tokens through
                                           the block table (31 lines)
  attention_kernel.paged_attention_kernel  thread groups over tokens, word loads first, shfl_xor dots, online
                                           softmax, fold, merge (117 lines)
Everything else in this file is given. Grade with:  make check DAY=78
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from course import DEVICE, cuda, launch, wide
from course.checking import to_host
from numba import float32, int32, uint32, uint64
from solutions.day73_decode_attention import (  # day 73's trip length, words and softmax base, paged here
    LOG2E,
    ROW_STEP,
    cache_words,
)

TITLE = "PagedAttention v1"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
RTOL = 5e-4  # float32 sums of exp-weighted rows over thousands of tokens
ERROR_FLOOR = 1e-2  # outputs average thousands of random rows towards zero (course.checking: the floor)
LIBRARY_RTOL = 5e-2  # SDPA works in the cache's fp16 (probabilities, P @ V, output): ~1e-2 of the output's scale
VERSION_RTOL = {"library": LIBRARY_RTOL}  # the benchmark's re-check of each row (course.bench.version_rtol)

WARP = 32
# optimized: 128 threads per (sequence, head) block; 64 in the simulator, which pays per thread
NUM_WARPS = 2 if DEVICE.kind == "sim" else 4
# The head sizes vLLM's PagedAttention supports (phi-2 uses 80, Gemma 256). Each is a multiple of 8,
# so a row is whole 8-byte words at 1, 2 or 4 bytes an element; any other size is refused up front.
HEAD_DIMS = (32, 64, 80, 96, 112, 120, 128, 192, 256)
MAX_HEAD_DIM = HEAD_DIMS[-1]  # q and the accumulator live in registers: a fixed list, not any size
LANE_ELEMS = 16  # optimized: elements of a row (of q, of the accumulator) per lane, at most; 4 fp16 words
TRIP_ELEMS = 64  # optimized: K elements (and as many V) a lane loads per trip: 16 rows x 128 columns / 32
# optimized: 8-byte words per load instruction. 1: one ld.global.u64 a word. 2: two adjacent words in
# one 16-byte load (course.wide.load4 on a uint32 view of the cache, ld.global.v4.u32): half the load
# instructions and their address arithmetic, twice the bytes each keeps in flight; a lane then holds
# pairs of words 2 gl, 2 gl + 1, 2 gl + 2G, ... A row of an odd number of words (an int8 row of 120:
# 15) starts every other row off a 16-byte boundary: that specialization keeps 1 (load_width).
LOAD_WORDS = 1
NO_LOGIT = -1.0e30  # the running max before any token: finite, far below any real logit
NAIVE_THREADS = 64


class Config(NamedTuple):
    """A problem for make_inputs. ``ragged``: context lengths cycle through context, 1, block_size,
    block_size + 1 and random ones (tests); otherwise every sequence has ``context`` tokens (bench)."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    context: int
    cache_dtype: str = "float16"
    ragged: bool = True


TEST_SIZES = (
    Config(4, 4, 2, 32, 8, 37, "float32"),  # contexts 37, 1, 8, 9 (max, 1, block, block + 1); GQA 2:1
    Config(2, 8, 2, 32, 16, 40, "float16"),  # GQA 4:1 (8 query heads over 2 KV heads); contexts 40, 1
    Config(3, 2, 1, 64, 32, 70, "float16"),  # MQA, block 32, head_dim 64: contexts 70, 1, 32
    Config(2, 2, 2, 32, 16, 17, "float32"),  # plain multi-head; contexts 17 (block + 1), 1
)
BENCH_SIZES = (Config(64, 32, 8, 128, 16, 4096, "float16", ragged=False),)


# --- inputs and the plain reference -------------------------------------------------------------


def context_lengths(cfg: Config, rng) -> np.ndarray:
    if not cfg.ragged:
        return np.full(cfg.num_seqs, cfg.context, dtype=np.int32)
    pattern = [cfg.context, 1, cfg.block_size, cfg.block_size + 1]
    lens = [pattern[i] if i < 4 else int(rng.integers(1, cfg.context + 1)) for i in range(cfg.num_seqs)]
    return np.minimum(np.array(lens, dtype=np.int32), cfg.context)


def paged_cache(keys, values, cfg: Config, rng, spare_blocks=None):
    """Scatter per-sequence K/V rows into random, non-contiguous pages.

    keys, values: lists of (ctx_s, num_kv_heads, head_dim) arrays. Returns key_cache, value_cache
    (num_blocks, block_size, num_kv_heads, head_dim) with every slot no sequence owns set to NaN, and
    block_tables (num_seqs, max_blocks_per_seq) int32 whose unused entries are garbage (negative or
    past the cache), so a kernel that reads past a context length finds NaN or faults.
    """
    bs = cfg.block_size
    counts = [math.ceil(len(k) / bs) for k in keys]
    max_blocks = math.ceil(cfg.context / bs) + (1 if cfg.ragged else 0)  # a spare column of garbage
    spare = spare_blocks if spare_blocks is not None else max(2, sum(counts) // 4)
    num_blocks = sum(counts) + spare
    dtype = np.dtype(cfg.cache_dtype)
    shape = (num_blocks, bs, cfg.num_kv_heads, cfg.head_dim)
    key_cache = np.full(shape, np.nan, dtype=dtype)
    value_cache = np.full(shape, np.nan, dtype=dtype)
    tables = rng.integers(-(1 << 30), 1 << 30, size=(len(keys), max_blocks)).astype(np.int32)
    physical = rng.permutation(num_blocks).astype(np.int32)
    used = 0
    for s, (k, v) in enumerate(zip(keys, values)):
        blocks = physical[used:used + counts[s]]
        used += counts[s]
        tables[s, :counts[s]] = blocks
        for t in range(len(k)):
            key_cache[blocks[t // bs], t % bs] = k[t]
            value_cache[blocks[t // bs], t % bs] = v[t]
    return key_cache, value_cache, tables


def make_inputs(cfg, seed=0):
    """(query, key_cache, value_cache, block_tables, context_lens, scale) for a :class:`Config`."""
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    lens = context_lengths(cfg, rng)
    dtype = np.dtype(cfg.cache_dtype)
    shape = (cfg.num_kv_heads, cfg.head_dim)
    keys = [rng.standard_normal((n, *shape), dtype=np.float32).astype(dtype) for n in lens]
    values = [rng.standard_normal((n, *shape), dtype=np.float32).astype(dtype) for n in lens]
    key_cache, value_cache, tables = paged_cache(keys, values, cfg, rng)
    query = rng.standard_normal((cfg.num_seqs, cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return query, key_cache, value_cache, tables, lens, 1.0 / math.sqrt(cfg.head_dim)


def reference(query, key_cache, value_cache, block_tables, context_lens, scale):
    """Gather each token through the block table, then a float64 softmax. Deliberately plain."""
    num_seqs, num_heads, head_dim = query.shape
    bs, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = np.empty(query.shape, dtype=np.float32)
    for s in range(num_seqs):
        ctx = int(context_lens[s])
        rows = [(int(block_tables[s, t // bs]), t % bs) for t in range(ctx)]
        k = np.stack([key_cache[b, r] for b, r in rows]).astype(np.float64)  # (ctx, kv_heads, dim)
        v = np.stack([value_cache[b, r] for b, r in rows]).astype(np.float64)
        for h in range(num_heads):
            logits = scale * (k[:, h // group] @ query[s, h].astype(np.float64))  # (ctx,)
            p = np.exp(logits - logits.max())
            out[s, h] = (p / p.sum()) @ v[:, h // group]
    return out


def traffic(query, key_cache, value_cache, block_tables, context_lens, scale):
    """(minimum bytes through device memory, FLOPs): every live K/V row once, queries, outputs."""
    lens = to_host(context_lens)
    num_seqs, num_heads, head_dim = query.shape
    kv_heads = key_cache.shape[2]
    tokens = int(np.sum(lens))
    kv_bytes = 2 * tokens * kv_heads * head_dim * np.dtype(key_cache.dtype).itemsize
    q_bytes = 2 * num_seqs * num_heads * head_dim * 4 + block_tables.size * 4
    return kv_bytes + q_bytes, 4 * tokens * num_heads * head_dim


# --- validation (days 79-89 reuse it) -----------------------------------------------------------


def check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale):
    """ValueError, before any launch, unless the six inputs describe a valid decode step over a float32
    or float16 cache (the element types this day's kernels read).

    Shapes and dtypes are always checked. The contents of block_tables and context_lens are checked
    when they are NumPy arrays; device arrays are trusted (reading them back would stall the launch
    queue; serving engines trust the scheduler's metadata the same way).
    """
    launch.check_array("key_cache", key_cache, dtype=(np.float32, np.float16), ndim=4)
    check_decode_step(query, key_cache, value_cache, block_tables, context_lens, scale)


def check_decode_step(query, key_cache, value_cache, block_tables, context_lens, scale):
    """check_inputs whatever the cache's element type: the shapes, the head grouping, head_dim, the
    scale, and what block_tables and context_lens hold."""
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    launch.check_array("key_cache", key_cache, ndim=4)
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    num_seqs, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_dim = key_cache.shape
    if cache_dim != head_dim:
        raise ValueError(f"key_cache: expected head_dim {head_dim} (from query), got {cache_dim}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {', '.join(map(str, HEAD_DIMS))}, got {head_dim}")
    launch.check_array("block_tables", block_tables, dtype=np.int32, ndim=2)
    if block_tables.shape[0] != num_seqs:
        raise ValueError(f"block_tables: expected {num_seqs} rows (one per sequence), "
                         f"got shape {tuple(block_tables.shape)}")
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(num_seqs,))
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    if isinstance(context_lens, np.ndarray):
        capacity = block_tables.shape[1] * block_size
        bad = np.flatnonzero((context_lens < 1) | (context_lens > capacity))
        if bad.size:
            s = int(bad[0])
            raise ValueError(f"context_lens[{s}] = {int(context_lens[s])}: expected 1..{capacity} "
                             f"(block_tables has {block_tables.shape[1]} blocks of {block_size})")
        if isinstance(block_tables, np.ndarray):
            # Every (sequence, page) a context reaches, at once: a serving step may carry thousands of
            # rows (one per prefill token), and a Python loop over them would cost more than the kernel.
            pages = -(-context_lens.astype(np.int64) // block_size)  # (num_seqs,)
            live = np.arange(block_tables.shape[1])[None, :] < pages[:, None]  # (num_seqs, max_blocks)
            bad = live & ((block_tables < 0) | (block_tables >= num_blocks))
            if bad.any():
                s, i = (int(v) for v in np.argwhere(bad)[0])
                raise ValueError(f"block_tables[{s}, {i}] = {int(block_tables[s, i])}: not a block of the cache "
                                 f"(0..{num_blocks - 1})")


# --- v1 naive: one thread per (sequence, head) ----------------------------------------------------


@cuda.jit
def paged_attention_naive_kernel(out, query, key_cache, value_cache, block_tables, context_lens, scale):
    """One thread per (sequence, head): i = cuda.grid(1) -> seq = i // num_heads, head = i % num_heads.

    Walk the tokens t = 0 .. ctx-1 through the block table (block = block_tables[seq, t // block_size],
    row t % block_size). Three passes: (1) the largest logit m = max_t scale * q.k_t; (2) zero the
    output row, then for each token p = exp(logit - m), total += p, out[seq, head, :] += p * v_t;
    (3) divide the row by total. Convert cache elements with float32(...): the cache may be float16.
    """
    raise NotImplementedError("Day 78: guard i < num_seqs * num_heads, then three loops over the tokens through the "
                              "block table (31 lines)")


# --- v2 optimized: one block per (sequence, head), thread groups over tokens -----------------------


def load_width(head_dim: int, itemsize: int, load_words: int = 1) -> int:
    """Words per load for this row: ``load_words`` (1 or 2) where every row starts on a multiple of
    that many words (an even ROW_WORDS for 16-byte loads), else 1."""
    if load_words not in (1, 2):
        raise ValueError(f"load_words: expected 1 (8-byte loads) or 2 (16-byte loads), got {load_words!r}")
    row_words = head_dim // (8 // itemsize)
    return load_words if row_words % load_words == 0 else 1


def head_layout(head_dim: int, itemsize: int, load_words: int = 1,
                lane_elems: int | None = None) -> tuple[int, int, int, int, int]:
    """How one cache row (one token of one KV head) is shared out: (elements per 8-byte word PW, words
    per row ROW_WORDS, lanes per token G, word slots per lane WL, elements per lane VEC = WL * PW).

    G is the fewest lanes, a power of two (the butterfly needs one), that leave each lane at most
    LANE_ELEMS elements: registers for q and the accumulator stay those of head_dim 128 at every size.
    Lane gl holds words gl, gl + G, ...; where G does not divide the row (fp16 80: 20 words over 8
    lanes, 3 slots each), the last slot is live only on lanes gl < ROW_WORDS % G and the others
    neither load nor store it. At 32, 64 and 128 this is day 73's lane_layout.

    ``load_words`` 2 (16-byte loads; load_width falls back to 1 where the row does not allow them):
    the row is shared out in units of two adjacent words, lane gl holding units gl, gl + G, ..., so
    words 2 gl, 2 gl + 1, 2 gl + 2G, ...; WL counts words (even), a ragged row's last unit is live on
    lanes gl < (ROW_WORDS / 2) % G (fp16 96: 12 units over 8 lanes, 2 each).

    ``lane_elems``: the cap instead of LANE_ELEMS (day 79's GQA kernel may spread a row wider, so that
    four heads' q and accumulators take half the registers)."""
    cap = LANE_ELEMS if lane_elems is None else lane_elems
    lw = load_width(head_dim, itemsize, load_words)
    per_word = 8 // itemsize
    row_words = head_dim // per_word
    units = row_words // lw
    lanes = 1
    while -(-units // lanes) * lw * per_word > cap and lanes < WARP:
        lanes *= 2
    words = -(-units // lanes) * lw
    return per_word, row_words, lanes, words, words * per_word


@functools.cache
def attention_kernel(head_dim: int, cache_dtype: str, block_size: int):
    """The optimized kernel for one (head_dim, cache dtype, block size). Numba compiles the closure's
    Python ints as constants: the per-lane arrays get fixed sizes, every loop over them unrolls, and
    the word offsets inside a row fold into the load instructions.

    Launch: grid (num_heads, num_seqs), NUM_WARPS * 32 threads; arguments (out (num_seqs, num_heads,
    head_dim), query, key_words, value_words (flat views of the caches: uint64, or uint32 where
    LOAD_WORDS = 2 applies, kernel_words), block_tables, context_lens, scale * log2(e), num_kv_heads)."""
    elem = np.dtype(cache_dtype).type
    LW = load_width(head_dim, np.dtype(cache_dtype).itemsize, LOAD_WORDS)  # words per load instruction
    PW, ROW_WORDS, G, WL, VEC = head_layout(head_dim, np.dtype(cache_dtype).itemsize, LW)
    # Slots of LW words: every lane holds FULL of them, lanes gl < TAIL one more (a ragged row).
    FULL, TAIL = (ROW_WORDS // LW) // G, (ROW_WORDS // LW) % G
    NG = WARP // G  # rows a warp works on side by side, one per thread group
    # Rows per group per trip: 16-row trips, capped so a lane keeps at most TRIP_ELEMS elements in
    # flight, a power of two of rows so trips tile a page (head_dim 256: 2 groups of 16 lanes, 4 rows
    # each, an 8-row trip holding the registers of 128's 16 rows; 192: 4 rows of 12, not 5).
    TOK = max(1, min(min(ROW_STEP, block_size) // NG, 1 << (max(1, TRIP_ELEMS // VEC).bit_length() - 1)))
    TRIP = NG * TOK  # rows per warp trip (a page at block 16)
    TRIPS = (block_size + TRIP - 1) // TRIP  # trips per page
    BS, HEAD_DIM = block_size, head_dim
    KW = TOK * WL  # words of K (and of V) a lane holds per trip
    # The load buffer as the loads fill it: KW uint64 words, or at LW 2 twice as many uint32 halves
    # (wide.load4's four values go straight into registers; the element view reads either alike).
    BUF, KB = (uint64, KW) if LW == 1 else (uint32, 2 * KW)

    @cuda.jit(fastmath=True)
    def paged_attention_kernel(out, query, key_words, value_words, block_tables, context_lens, scale,
                               num_kv_heads):
        """One block per (sequence, head): blockIdx.x = head, blockIdx.y = seq; NUM_WARPS warps.

        key_words / value_words: the caches as flat uint64 words of PW elements (cache_words); the row
        of token slot r of physical block b, KV head h, starts at word (b * BS + r) * num_kv_heads *
        ROW_WORDS + h * ROW_WORDS. scale already includes log2(e): use math.exp2 throughout.

        - Lane `lane` is in thread group grp = lane // G (its row of each trip step) and holds words
          gl, gl + G, gl + 2G, ... (gl = lane % G) of that row: WL words, VEC elements, element j of
          word w being column (gl + G * w) * PW + j. Interleaved, one warp load reads whole sectors of
          each row. q * scale and the accumulator for those columns: cuda.local.array(VEC, float32);
          loaded words: cuda.local.array(KW, uint64) (at LW = 2: 2 * KW uint32, as wide.load4 returns
          them), read as elements through buf.view(elem).
        - LOAD_WORDS = 2 (LW, where load_width allows it): a slot is LW adjacent words, lane gl
          holding slots gl, gl + G, ..., so word w is row word (gl + G * (w // LW)) * LW + w % LW, and
          a slot is one wide.load4 of the uint32 view (two words). At LW = 1 all of this is as above.
        - A ragged row (G does not divide ROW_WORDS: head_dim 80, 112, 120 in fp16): slot w is live
          when w < FULL or gl < TAIL. A dead slot never loads (it would read the next head's row, or
          past the cache): its q is 0 and its words are 0, so it adds 0 to every dot and to acc, and
          it is not stored. With no tail (FULL == WL) the test is a constant and compiles away.
        - Warps take trips round-robin: trip = warp, warp + NUM_WARPS, ... < num_pages * TRIPS, page
          trip // TRIPS, rows from t0 = (trip % TRIPS) * TRIP. Once a trip, in 64 bits: base =
          block id * page_words (BS * num_kv_heads * ROW_WORDS) + kv_head * ROW_WORDS + gl; a row adds
          uint32(row) * row_words, every term unsigned (Numba makes uint64 + int64 a float64).
          Group grp takes rows t0 + u * NG + grp, u < TOK: issue every K and V load first, a dead
          row clamped onto row n_tok - 1 (never read past the context), its logit -inf.
        - Dot products: partial sums per lane, then shfl_xor_sync over offsets G/2, ..., 1.
        - Online softmax per group: running max m (from float32(NO_LOGIT)) and exp-sum l; rescale l
          and acc by exp2(m - m_new) before adding exp2(s - m_new) * v.
        - Fold the NG groups with shfl_xor_sync over offsets G, 2G, ..., 16 (m, l and each acc[e]),
          then merge the warps through cuda.shared.array((NUM_WARPS, HEAD_DIM), float32) plus their
          m and l, one cuda.syncthreads(): out[d] = sum_w acc_w[d] 2^(m_w - M) / sum_w l_w 2^(m_w - M).
        """
        raise NotImplementedError("Day 78: thread groups over tokens, word loads first, shfl_xor dots, online softmax, "
                                  "fold, merge (117 lines)")

    return paged_attention_kernel


_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
        "int32[:, ::1], int32[::1], float32)")
_WORD = "uint32" if LOAD_WORDS == 2 else "uint64"  # kernel_words' view (every fp16 row below is even)
_SIG_WORDS = (f"void(float32[:, :, ::1], float32[:, :, ::1], {_WORD}[::1], {_WORD}[::1], int32[:, ::1], "
              "int32[::1], float32, int32)")
KERNELS = {
    "naive": (paged_attention_naive_kernel, _SIG),
    "optimized": (attention_kernel(128, "float16", 16), _SIG_WORDS),  # the benchmark's shape
    # make inspect: a ragged row (80 = 20 fp16 words over 8 lanes) and the widest (256 over 16 lanes)
    "optimized.head80": (attention_kernel(80, "float16", 16), _SIG_WORDS),
    "optimized.head256": (attention_kernel(256, "float16", 16), _SIG_WORDS),
}


def kernel_words(cache, load_words: int = 1):
    """The flat view of a cache the optimized kernels read: uint64 words, or (load_words 2, as
    load_width gives it) uint32 halves for course.wide.load4. A 16-byte load needs a 16-byte aligned
    address: device allocations start on 256 bytes, and every row then starts on 16 (ROW_WORDS even)."""
    if load_words == 1:
        return cache_words(cache)
    ptr = cache.__cuda_array_interface__["data"][0] if hasattr(cache, "__cuda_array_interface__") \
        else cache.__array_interface__["data"][0]
    if ptr % 16:
        raise ValueError(f"LOAD_WORDS = 2 needs a 16-byte aligned cache, this one starts at {ptr:#x}")
    return cache_words(cache, np.uint32)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    n = query.shape[0] * query.shape[1]
    paged_attention_naive_kernel[launch.blocks(n, NAIVE_THREADS), NAIVE_THREADS](out, *args, float32(scale))
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    num_seqs, num_heads, head_dim = query.shape
    kernel = attention_kernel(head_dim, np.dtype(key_cache.dtype).name, key_cache.shape[1])
    grid = (num_heads, num_seqs)  # heads fastest: a group's blocks share pages in L2
    lw = load_width(head_dim, key_cache.dtype.itemsize, LOAD_WORDS)
    kernel[grid, NUM_WARPS * WARP](out, q, kernel_words(kc, lw), kernel_words(vc, lw), tables, lens,
                                   float32(scale * LOG2E), int32(key_cache.shape[2]))
    return launch.result(out, query, key_cache)


# --- the library row: PyTorch's fused attention on a dense, contiguous copy of the cache -----------

_dense = {}


def dense_kv(key_cache, value_cache, block_tables, context_lens):
    """Gather the pages into (num_seqs, num_kv_heads, max_context, head_dim) torch tensors plus a
    (num_seqs, 1, 1, max_context) mask, once per cache: the library row times attention, not this."""
    import torch

    ptr = key_cache.__cuda_array_interface__["data"][0] if not isinstance(key_cache, np.ndarray) else None
    key = (id(key_cache), ptr, id(block_tables), id(context_lens))
    if key in _dense:
        return _dense[key]
    kc, vc = (torch.as_tensor(a, device="cuda") for a in (key_cache, value_cache))
    tables = torch.as_tensor(block_tables, device="cuda").long()
    lens = torch.as_tensor(context_lens, device="cuda").long()
    bs = kc.shape[1]
    max_ctx = int(lens.max())
    pages = math.ceil(max_ctx / bs)
    pos = torch.arange(pages * bs, device="cuda")
    live = pos[None, :] < lens[:, None]  # (num_seqs, pages * bs)
    ids = tables[:, :pages].clamp(0, kc.shape[0] - 1)  # garbage entries -> any valid block, masked
    result = []
    for cache in (kc, vc):
        dense = cache[ids].flatten(1, 2)  # (num_seqs, pages * bs, kv_heads, dim)
        dense = torch.where(live[:, :, None, None], dense, torch.zeros((), dtype=dense.dtype, device="cuda"))
        result.append(dense.transpose(1, 2)[:, :, :max_ctx].contiguous())
    mask = None if bool(live[:, :max_ctx].all()) else live[:, None, None, :max_ctx]
    _dense[key] = (*result, mask)
    return _dense[key]


def library(query, key_cache, value_cache, block_tables, context_lens, scale):
    """torch.nn.functional.scaled_dot_product_attention(enable_gqa=True) on a dense cache."""
    import torch

    k, v, mask = dense_kv(key_cache, value_cache, block_tables, context_lens)
    q = torch.as_tensor(query, device="cuda").to(k.dtype)[:, :, None, :]  # (seqs, heads, 1, dim)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=float(scale),
                                                         enable_gqa=True)
    out = o[:, :, 0, :].float().contiguous()
    return out.cpu().numpy() if isinstance(query, np.ndarray) else cuda.as_cuda_array(out)
