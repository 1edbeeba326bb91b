"""Day 89: tuning PagedAttention -- block size, partition size and warps per block, against the roofline.

Days 78, 79 and 81 built one kernel (`attention_kernel` in solutions/paged_attention_common.py: day
78's kernel), gave each block up to MAX_GROUP query heads of one KV head (day 79) and split long
contexts into partitions merged by a reduce kernel (day 81). Today exposes what is left to choose at
launch time and measures it:
  block size   the cache's page (8, 16, 32 tokens): one table lookup per page, and the rows a warp
               loads per trip (at head_dim 128 in fp16 with four heads per block: 4 rows at block 8,
               8 at blocks 16 and 32), so the bytes each lane keeps in flight.
  partition    tokens per CUDA block (a whole number of pages): each (sequence, KV head, partition)
               is a block writing a partial (output, max, exp-sum), merged by day 81's reduce.
  warps        threads per block (32 x 1, 2, 4, 8, 16): more warps stream more of a partition at
               once but stage more partial softmaxes in shared memory, merged behind a barrier.

v1 naive      the untuned launch: day 79's schedule, one block per (sequence, KV head) over the whole
              context, DEFAULT_WARPS warps: fine for 64 sequences, starved for 8 long ones.
v2 optimized  the tuned launch: tuned_partition() splits contexts until the grid has about
              BLOCKS_PER_SM blocks per SM, then day 81's reduce; sweep() times every
              (block size, partition, warps) on the GPU and roofline_chart() plots them.

Napkin math (bench: 8 sequences x 32 heads over 8 KV heads x 128, context 32768, fp16): K and V are
8 x 32768 x 8 x 128 x 2 B x 2 = 1.07 GB, read once at 4 FLOP/B, well left of the H200's ridge
(~51 TFLOP/s / 4.1 TB/s = 12 FLOP/B): the roof is the copy rate, ~0.26 ms. With four heads per block
the v1 grid is 8 x 8 = 64 blocks for 132 SMs: over half the SMs have nothing to load, and each
block walks 2048 pages alone. Partitions of 4096 tokens make 8 per sequence, 512 blocks (~4 per
SM: two waves of the 2 an SM holds), and add 8 x 32 x 8 x (128 + 2) x 4 B = 1.1 MB of partials:
0.1 % of the traffic. At 64 x 4096 the unsplit grid is already 512 blocks: no split.

What bounds it: read_kernel is the attention's grid, walk and loads with the arithmetic taken out;
tools/paged_bound.py times it on random pages, pages in order and a dense cache, at the attention's
occupancy and at its own, beside the attention and torch SDPA (the lesson's "What bounds it").
"""

from __future__ import annotations

import argparse
import functools
import json
import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch
from numba import int64, uint32, uint64
from solutions.day78_paged_attention_v1 import (  # noqa: F401  (the day's contract is day 78's)
    ERROR_FLOOR,
    HEAD_DIMS,
    NUM_WARPS,
    RTOL,
    VERSION_RTOL,
    Config,
    check_inputs,
    library,
    make_inputs,
    reference,
    traffic,
)
from solutions.day79_paged_attention_gqa import MAX_GROUP, heads_per_block
from solutions.day81_paged_attention_v2 import KERNELS as DAY81_KERNELS
from solutions.day81_paged_attention_v2 import paged_attention_reduce_kernel
from solutions.day73_decode_attention import cache_words
from solutions.day78_paged_attention_v1 import WARP, head_layout
from solutions.paged_attention_common import SIG_PAGED, attention_kernel, launch_attention, trip_loader, trip_plan

TITLE = "Tuning PagedAttention"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

DEFAULT_WARPS = NUM_WARPS  # day 78's: 4 on a GPU, 2 in the simulator (it pays per thread)
WARP_CHOICES = (1, 2, 4, 8, 16)
# The tuned grid's target: ~2 waves of the 2 blocks of 4 warps an SM holds at 254 registers. Measured on
# the H200: at 64 x 4096 (512 blocks unsplit, ~3.9 per SM) the unsplit launch ran 309 us and two
# partitions 325 us (the reduce and a second prologue buy nothing once the grid fills two waves); at
# 8 x 32k the sweep's best at pages of 16 was 4096-token partitions (512 blocks) ahead of 2048 (1024).
BLOCKS_PER_SM = 4
# The shortest partition the tuned launch picks: 256 tokens at block 16 are 32 eight-row trips, 8 per
# warp of 4; shorter, each block's prologue (q into registers) and warp merge weigh on few loads.
MIN_PARTITION = 256 if ON_GPU else 8

TEST_SIZES = (
    Config(2, 2, 1, 32, 8, 37, "float32"),  # contexts 37, 1; tuned (1 SM here): 37 in 2 partitions
    Config(3, 2, 2, 64, 16, 50, "float16"),  # block 16, head_dim 64, one head per block; contexts 50, 1, 16
    Config(1, 4, 2, 32, 4, 29, "float16"),  # one sequence, pages of 4: partitions of 16 tokens
    Config(2, 8, 1, 32, 8, 45, "float32"),  # MQA, group 8 (two blocks of 4 heads); contexts 45, 1
)
BENCH_SIZES = (Config(8, 32, 8, 128, 16, 32768, "float16", ragged=False),)
SWEEP_BLOCK_SIZES = (8, 16, 32)
SWEEP_PARTITIONS = (0, 256, 512, 1024, 2048, 4096, 8192)  # 0: no split (v1)
SWEEP_WARPS = (2, 4, 8)


def num_partitions(max_context: int, partition: int) -> int:
    return 1 if partition <= 0 else max(1, math.ceil(max_context / partition))


def tuned_partition(num_seqs: int, num_heads: int, num_kv_heads: int, max_context: int, block_size: int,
                    sm_count: int) -> int:
    """Tokens per partition (0: no split): the smallest power of two >= MIN_PARTITION and a multiple of
    the page for which the grid has about BLOCKS_PER_SM blocks per SM, never split past that target.

    One partition's grid has num_seqs x num_heads // heads blocks, heads =
    heads_per_block(num_heads, num_kv_heads, MAX_GROUP): one per (sequence, KV head, chunk of the
    group), not one per query head. Partitions wanted per sequence: sm_count x BLOCKS_PER_SM // blocks,
    rounded down (a grid already near the target is not split: each split costs the reduce and
    another prologue per block); if that is 1 or less, return 0. Otherwise start at
    max(MIN_PARTITION, block_size) and double while size x wanted < max_context; a size covering the
    whole context means no split (0).
    """
    # EXERCISE: blocks per partition from heads_per_block, the partitions wanted, then double from MIN_PARTITION
    heads = heads_per_block(num_heads, num_kv_heads, MAX_GROUP)
    blocks = num_seqs * num_heads // heads  # per partition: seqs x KV heads x chunks of each group
    want = sm_count * BLOCKS_PER_SM // blocks  # partitions per sequence, rounded down
    if want <= 1:
        return 0
    size = max(MIN_PARTITION, block_size)
    while size * want < max_context:
        size *= 2
    return 0 if size >= max_context else size


# --- the kernels: the shared attention kernel (day 79's heads per block), day 81's reduce ------------

KERNELS = {  # the benchmark's shape: head_dim 128, fp16, pages of 16, four heads of a group per block
    "naive": (attention_kernel(128, "float16", 16, MAX_GROUP, 4), SIG_PAGED),
    "optimized": (attention_kernel(128, "float16", 16, MAX_GROUP, 4), SIG_PAGED),
    "optimized.reduce": DAY81_KERNELS["optimized.reduce"],
    "optimized.warps2": (attention_kernel(128, "float16", 16, MAX_GROUP, 2), SIG_PAGED),
    "optimized.warps8": (attention_kernel(128, "float16", 16, MAX_GROUP, 8), SIG_PAGED),
}


# --- what bounds it: the attention's walk with nothing but the loads (tools/paged_bound.py) ------------


@functools.cache
def read_kernel(head_dim: int, cache_dtype: str, block_size: int, heads: int = MAX_GROUP,
                num_warps: int = DEFAULT_WARPS, dense: bool = False):
    """The attention kernel's grid, trips and loads with the softmax and the dot products taken out:
    each lane adds the two 32-bit halves of every K and V word it loads (live rows only), and the
    block writes one uint64 sum. Timed beside the attention it measures what reading these pages on
    this schedule costs; exact integer sums make it checkable against NumPy.

    Launch: grid (num_heads // heads, num_seqs, partitions), num_warps * 32 threads; arguments (sums
    (num_heads // heads, num_seqs, partitions) uint64, key_words, value_words, block_tables,
    context_lens, num_kv_heads, part_pages). ``dense``: the cache is (num_seqs, num_kv_heads, capacity,
    head_dim), capacity = block_tables.shape[1] * block_size, as a dense-cache library reads it: the
    same trips over logical pages of block_size rows, no table lookup, each block's rows contiguous."""
    PW, ROW_WORDS, G, WL, VEC = head_layout(head_dim, np.dtype(cache_dtype).itemsize)
    FULL, TAIL = ROW_WORDS // G, ROW_WORDS % G
    TOK, PREFETCH = trip_plan(heads, block_size, G, VEC)  # the attention's rows in flight per lane
    NG = WARP // G
    TRIP = NG * TOK
    TRIPS = (block_size + TRIP - 1) // TRIP
    BS, HG, NW, DENSE = block_size, heads, num_warps, dense
    KW = TOK * WL
    LOW = uint64(0xFFFFFFFF)  # two 32-bit halves summed: at most 2^33 a word, no wraparound to model

    load_trip = trip_loader(TOK, WL, NG, G, FULL, TAIL)  # the attention's loads, 8 bytes each

    @cuda.jit(device=True, inline=True)
    def add_trip(total, kbuf, vbuf, t0, n_tok, grp):
        # Where the attention does its dot products and softmax: one integer add per 32 bits loaded.
        for u in range(TOK):
            if t0 + u * NG + grp < n_tok:  # the dead row's re-read adds nothing, as its p = 0 does
                for i in range(u * WL, (u + 1) * WL):
                    total += (kbuf[i] & LOW) + (kbuf[i] >> uint64(32)) + (vbuf[i] & LOW) + (vbuf[i] >> uint64(32))
        return total

    @cuda.jit
    def read_pages_kernel(sums, key_words, value_words, block_tables, context_lens, num_kv_heads, part_pages):
        seq = cuda.blockIdx.y
        h0 = cuda.blockIdx.x * HG
        part = cuda.blockIdx.z
        tid = cuda.threadIdx.x
        warp = tid // WARP
        lane = tid % WARP
        grp = lane // G
        gl = lane % G
        group = (HG * cuda.gridDim.x) // num_kv_heads  # query heads per KV head
        kv_head = h0 // group
        ctx = context_lens[seq]
        first = part * part_pages
        end = min(first + part_pages, (ctx + BS - 1) // BS)
        if first >= end:
            if tid == 0:
                sums[cuda.blockIdx.x, seq, part] = uint64(0)  # a partition past the context reads nothing
            return
        if DENSE:  # (num_seqs, num_kv_heads, capacity, head_dim): a KV head's rows follow each other
            row_words = uint32(ROW_WORDS)
            page_words = uint64(BS * ROW_WORDS)
            lane_words = uint64(seq * num_kv_heads + kv_head) * uint64(block_tables.shape[1]) * page_words \
                + uint64(gl)
        else:  # pages (num_blocks, block_size, num_kv_heads, head_dim): a row holds every KV head
            row_words = uint32(num_kv_heads * ROW_WORDS)
            page_words = uint64(BS) * uint64(row_words)
            lane_words = uint64(kv_head * ROW_WORDS + gl)
        kbuf = cuda.local.array(KW, uint64)
        vbuf = cuda.local.array(KW, uint64)
        total = uint64(0)
        if PREFETCH:  # the attention's double buffer: the next trip's loads out before this trip's adds
            kn = cuda.local.array(KW, uint64)
            vn = cuda.local.array(KW, uint64)
            end_trip = end * TRIPS
            trip = first * TRIPS + warp
            if trip < end_trip:
                page = trip // TRIPS
                base = (uint64(page) if DENSE else uint64(block_tables[seq, page])) * page_words + lane_words
                load_trip(kbuf, vbuf, key_words, value_words, base, (trip % TRIPS) * TRIP,
                          min(BS, ctx - page * BS), grp, gl, row_words)
            while trip < end_trip:
                nxt = trip + NW
                if nxt < end_trip:
                    page = nxt // TRIPS
                    base = (uint64(page) if DENSE else uint64(block_tables[seq, page])) * page_words + lane_words
                    load_trip(kn, vn, key_words, value_words, base, (nxt % TRIPS) * TRIP,
                              min(BS, ctx - page * BS), grp, gl, row_words)
                page = trip // TRIPS
                t0 = (trip % TRIPS) * TRIP
                n_tok = min(BS, ctx - page * BS)
                if t0 < n_tok:
                    total = add_trip(total, kbuf, vbuf, t0, n_tok, grp)
                for i in range(KW):
                    kbuf[i] = kn[i]
                    vbuf[i] = vn[i]
                trip = nxt
        else:
            for trip in range(first * TRIPS + warp, end * TRIPS, NW):
                page = trip // TRIPS
                t0 = (trip % TRIPS) * TRIP
                n_tok = min(BS, ctx - page * BS)
                if t0 < n_tok:
                    base = (uint64(page) if DENSE else uint64(block_tables[seq, page])) * page_words + lane_words
                    load_trip(kbuf, vbuf, key_words, value_words, base, t0, n_tok, grp, gl, row_words)
                    total = add_trip(total, kbuf, vbuf, t0, n_tok, grp)
        # A warp's lanes fold by shuffles, the warps meet in shared memory behind one barrier: the
        # attention's merge, one number wide.
        # (shfl.sync moves signed or float words: the sum, far below 2^63, crosses as an int64)
        o = 16
        while o > 0:
            total += uint64(cuda.shfl_xor_sync(0xFFFFFFFF, int64(total), o))
            o //= 2
        sm = cuda.shared.array(NW, uint64)
        if lane == 0:
            sm[warp] = total
        cuda.syncthreads()
        if tid == 0:
            block_sum = uint64(0)
            for w in range(NW):
                block_sum += sm[w]
            sums[cuda.blockIdx.x, seq, part] = block_sum

    return read_pages_kernel


def read_pages(key_cache, value_cache, block_tables, context_lens, num_heads: int, *, partition: int = 0,
               num_warps: int = DEFAULT_WARPS, dense: bool = False, shared_bytes: int = 0, heads: int = 0):
    """Launch read_kernel as paged_attention(partition=, num_warps=) launches the attention (inputs
    already checked): heads per block from heads_per_block, the same grid. Returns the uint64 sums,
    (num_heads // heads, num_seqs, partitions). ``dense``: key_cache and value_cache are (num_seqs,
    num_kv_heads, capacity, head_dim). ``shared_bytes``: dynamic shared memory reserved per block and
    never used (tools/paged_bound.py: it caps the blocks an SM holds at the attention's count).
    ``heads``: query heads per block if not day 79's choice (1: day 78's grid, each page asked for once
    per query head, the repeats served by L2)."""
    if dense:
        num_seqs, num_kv_heads, capacity, head_dim = key_cache.shape
        block_size = capacity // block_tables.shape[1]
    else:
        _, block_size, num_kv_heads, head_dim = key_cache.shape
    kc, vc, tables, lens = launch.to_device(key_cache, value_cache, block_tables, context_lens)
    heads = heads or heads_per_block(num_heads, num_kv_heads, MAX_GROUP)
    part_pages = partition // block_size or block_tables.shape[1]
    parts = math.ceil(block_tables.shape[1] / part_pages)
    sums = launch.empty((num_heads // heads, block_tables.shape[0], parts), np.uint64)
    kernel = read_kernel(head_dim, np.dtype(key_cache.dtype).name, block_size, heads, num_warps, dense)
    kernel[(num_heads // heads, block_tables.shape[0], parts), num_warps * WARP, 0, shared_bytes](
        sums, cache_words(kc), cache_words(vc), tables, lens, num_kv_heads, part_pages)
    return launch.result(sums, key_cache)


def read_reference(key_cache, value_cache, block_tables, context_lens, num_heads: int, *, partition: int = 0,
                   dense: bool = False, heads: int = 0):
    """read_pages in NumPy: per (chunk of heads, sequence, partition), the halves of every live K and V
    word of its KV head, summed. Partitions past a context hold 0."""
    if dense:
        num_seqs, num_kv_heads, capacity, head_dim = key_cache.shape
        block_size = capacity // block_tables.shape[1]
    else:
        _, block_size, num_kv_heads, head_dim = key_cache.shape
    heads = heads or heads_per_block(num_heads, num_kv_heads, MAX_GROUP)
    group = num_heads // num_kv_heads
    part_tokens = (partition // block_size or block_tables.shape[1]) * block_size
    parts = math.ceil(block_tables.shape[1] * block_size / part_tokens)

    def row_sums(cache):  # (..., head_dim) elements -> one uint64 per row: both halves of its words
        words = np.ascontiguousarray(cache).reshape(*cache.shape[:-1], -1).view(np.uint64)
        return ((words & np.uint64(0xFFFFFFFF)) + (words >> np.uint64(32))).sum(axis=-1, dtype=np.uint64)

    rows = row_sums(key_cache) + row_sums(value_cache)  # paged (blocks, bs, kv); dense (seqs, kv, capacity)
    sums = np.zeros((num_heads // heads, len(context_lens), parts), np.uint64)
    for s, ctx in enumerate(int(c) for c in context_lens):
        if dense:
            per_token = rows[s].T[:ctx]  # (ctx, kv_heads)
        else:
            pages = -(-ctx // block_size)
            per_token = rows[block_tables[s, :pages]].reshape(-1, num_kv_heads)[:ctx]
        for p in range(parts):
            chunk = per_token[p * part_tokens:(p + 1) * part_tokens].sum(axis=0, dtype=np.uint64)  # (kv_heads,)
            for x in range(num_heads // heads):
                sums[x, s, p] = chunk[x * heads // group]
    return sums


# make inspect: the read-only walk's registers, beside the attention's 254 (it fits more blocks an SM)
KERNELS["optimized.read"] = (read_kernel(128, "float16", 16, MAX_GROUP, 4),
                         "void(uint64[:, :, ::1], uint64[::1], uint64[::1], int32[:, ::1], int32[::1], int32, int32)")


# --- host functions ----------------------------------------------------------------------------------


def paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale, *, partition: int = 0,
                    num_warps: int = DEFAULT_WARPS):
    """Day 78's contract with the knobs exposed: ``partition`` tokens per block (0: no split, a
    multiple of the block size otherwise), ``num_warps`` warps per block (one of WARP_CHOICES).

    1. check_inputs, then ValueError for a partition that is not an int, negative, or not a multiple
       of the block size, and for num_warps not in WARP_CHOICES: all before any launch.
    2. launch.to_device the five arrays; heads = heads_per_block(num_heads, num_kv_heads, MAX_GROUP).
    3. launch_attention(..., heads=heads, part_pages=partition // block_size or None,
       num_warps=num_warps) returns (part_out (seqs, heads, partitions, head_dim), part_max, part_sum).
       The number of partitions comes from the table's capacity, never from reading context_lens.
    4. One partition: part_out reshaped to query's shape is the answer. More: day 81's
       paged_attention_reduce_kernel on a (num_heads, num_seqs) grid of head_dim threads into a fresh
       launch.empty output, told the partition in tokens.
    Return launch.result(out, query, key_cache).
    """
    # EXERCISE: check the knobs, heads per block, launch_attention over partition // block_size pages, day 81's reduce
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    block_size = key_cache.shape[1]
    if not isinstance(partition, (int, np.integer)) or partition < 0 or partition % block_size:
        raise ValueError(f"partition: expected 0 or a multiple of the block size {block_size}, got {partition!r}")
    if num_warps not in WARP_CHOICES:
        raise ValueError(f"num_warps: expected one of {WARP_CHOICES}, got {num_warps!r}")
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    num_seqs, num_heads, head_dim = query.shape
    heads = heads_per_block(num_heads, key_cache.shape[2], MAX_GROUP)
    # The split is sized by the table's capacity: the lengths may live on the device, unread.
    part_out, part_max, part_sum = launch_attention(q, kc, vc, tables, lens, scale, heads=heads,
                                                    part_pages=partition // block_size or None,
                                                    num_warps=num_warps)
    if part_out.shape[2] == 1:  # one partition: its normalized output is the answer
        return launch.result(part_out.reshape(query.shape), query, key_cache)
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    paged_attention_reduce_kernel[(num_heads, num_seqs), head_dim](out, part_out, part_max, part_sum, lens,
                                                                   np.int32(partition))
    return launch.result(out, query, key_cache)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The untuned launch: one block per (sequence, KV head) over the whole context."""
    return paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The tuned launch: split long contexts until the grid fills the GPU."""
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)  # shapes before use
    num_seqs, num_heads = query.shape[:2]
    block_size = key_cache.shape[1]
    partition = tuned_partition(num_seqs, num_heads, key_cache.shape[2], block_tables.shape[1] * block_size,
                                block_size, launch.sm_count())
    return paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale, partition=partition)


# --- the sweep and the roofline (GPU) -----------------------------------------------------------------


def sweep(cfg: Config = BENCH_SIZES[0], block_sizes=SWEEP_BLOCK_SIZES, partitions=SWEEP_PARTITIONS,
          warps=SWEEP_WARPS, repeats: int = 20, progress=print) -> dict:
    """Time every (block size, partition, warps) at ``cfg`` on the GPU; each row is re-checked.

    Returns {"device", "copy_gbps", "gemm_tflops", "rows": [...], "library": {...}}; GB/s counts the
    minimum traffic (every live K/V row once), as the roofline does."""
    if not ON_GPU:
        raise RuntimeError("the sweep times kernels: it needs a CUDA GPU")
    from course import bench, checking

    cfg = Config(*cfg)  # a Config or a plain tuple of its fields

    timer = bench.Timer()
    copy = bench.copy_peak_gbps(timer)
    gemm = bench.gemm_peak_tflops(timer)
    rows, lib = [], {}
    for bs in block_sizes:
        inputs = make_inputs(cfg._replace(block_size=bs), seed=89)
        expected = reference(*inputs) if cfg.num_seqs * cfg.context <= 1 << 16 else None
        nbytes, flops = traffic(*inputs)
        dev = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)
        if expected is None:  # a reference in float64 NumPy is too slow here: check against the v1 launch
            expected = checking.to_host(paged_attention(*dev, num_warps=4))
        for part in partitions:
            for nw in warps:
                fn = functools.partial(paged_attention, partition=part, num_warps=nw)
                with launch.no_poison():
                    ms, spread = timer.time(fn, *dev, repeats=repeats)
                ok = checking.compare(fn(*dev), expected, rtol=RTOL, floor=ERROR_FLOOR).ok
                rows.append(dict(block_size=bs, partition=part, warps=nw, ms=ms, spread_ms=spread,
                                 gbps=nbytes / ms / 1e6, tflops=flops / ms / 1e9,
                                 pct_copy=100 * nbytes / ms / 1e6 / copy, intensity=flops / nbytes, ok=ok))
                r = rows[-1]
                progress(f"block {bs:2d}  partition {part:5d}  warps {nw}  {ms * 1e3:8.1f} us  "
                         f"{r['gbps']:7.0f} GB/s  {r['pct_copy']:5.1f} % of copy  {'ok' if ok else 'WRONG'}")
        if bs == 16:
            try:
                ms, _ = timer.time(library, *dev, repeats=repeats)
                lib = dict(block_size=bs, ms=ms, gbps=nbytes / ms / 1e6, pct_copy=100 * nbytes / ms / 1e6 / copy)
                progress(f"torch SDPA on a dense cache: {ms * 1e3:.1f} us, {lib['pct_copy']:.1f} % of copy")
            except ImportError:
                progress("torch is not installed: no SDPA row")
    return dict(device=str(DEVICE.describe()), config=list(cfg), copy_gbps=copy, gemm_tflops=gemm, rows=rows,
                library=lib)


def roofline_chart(result: dict, path=None):
    """Achieved TFLOP/s against arithmetic intensity, under the copy-rate and FP32 roofs."""
    import matplotlib.pyplot as plt

    copy, gemm = result["copy_gbps"], result["gemm_tflops"]
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.logspace(-1, 3, 200)
    ax.loglog(x, np.minimum(x * copy / 1e3, gemm), "k-", lw=1, label=f"roof: {copy:,.0f} GB/s, {gemm:.0f} TFLOP/s")
    colours = {8: "#d95f02", 16: "#3b7dd8", 32: "#1b9e77"}
    for bs in sorted({r["block_size"] for r in result["rows"]}):
        pts = [r for r in result["rows"] if r["block_size"] == bs]
        ax.scatter([r["intensity"] for r in pts], [r["tflops"] for r in pts], s=[8 * r["warps"] for r in pts],
                   color=colours.get(bs), alpha=0.7, label=f"block {bs} (size: warps)")
    best = max(result["rows"], key=lambda r: r["tflops"])
    ax.annotate(f"best: block {best['block_size']}, partition {best['partition']}, {best['warps']} warps, "
                f"{best['pct_copy']:.0f} % of copy", (best["intensity"], best["tflops"]), fontsize=7,
                xytext=(10, -25), textcoords="offset points", arrowprops=dict(arrowstyle="->", lw=0.5))
    ax.set_xlabel("arithmetic intensity (FLOP per byte of minimum traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"PagedAttention decode sweep, {result['device'][:60]}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def table(result: dict) -> str:
    """Block size x partition: the best warps' share of the copy rate, one line per block size."""
    parts = sorted({r["partition"] for r in result["rows"]})
    lines = ["block \\ partition " + "".join(f"{p or 'none':>9}" for p in parts)]
    for bs in sorted({r["block_size"] for r in result["rows"]}):
        cells = []
        for p in parts:
            pts = [r for r in result["rows"] if r["block_size"] == bs and r["partition"] == p]
            best = max(pts, key=lambda r: r["pct_copy"])
            cells.append(f"{best['pct_copy']:6.1f}%w{best['warps']}")
        lines.append(f"{bs:>18} " + "".join(f"{c:>9}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m solutions.day89_tuning_paged_attention",
                                description="Sweep PagedAttention's block size, partition size and warps on a GPU.")
    p.add_argument("--plot", metavar="PNG", help="write the roofline plot here")
    p.add_argument("--json", metavar="FILE", help="write every row here")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    if not ON_GPU:
        print("the sweep needs a CUDA GPU. It would time, at", BENCH_SIZES[0])
        print(f"  block sizes {SWEEP_BLOCK_SIZES} x partitions {SWEEP_PARTITIONS} x warps {SWEEP_WARPS}")
        from course import compiler

        for label, r in compiler.reports(__import__(__name__)).items():
            print(f"  {label:18s} registers {r.registers:3d}  shared {r.shared_bytes:5d} B  stack {r.stack_bytes} B")
        return 0
    result = sweep(repeats=args.repeats)
    print(table(result))
    best = max(result["rows"], key=lambda r: r["pct_copy"])
    print(f"best: block {best['block_size']}, partition {best['partition']}, {best['warps']} warps: "
          f"{best['ms'] * 1e3:.1f} us, {best['pct_copy']:.1f} % of the copy rate")
    if result["library"]:
        print(f"torch SDPA on a dense cache: {result['library']['ms'] * 1e3:.1f} us; best paged / SDPA time = "
              f"{best['ms'] / result['library']['ms']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        roofline_chart(result, args.plot)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
