"""The PagedAttention kernel days 79, 81 and 89 launch: day 78's kernel, grown by what they add.

Day 78's kernel (one block per (sequence, query head), thread groups over tokens, interleaved 8-byte
words, online softmax in base 2, warps merged through shared memory) with three compile-time knobs:

  heads      query heads of one KV head per block (day 79): every per-head quantity gets a leading
             axis, and each K/V element is loaded and converted once for all of them; trip_plan
             trades rows in flight for the registers those heads take, and prefetches at 3-4 heads.
  page range blockIdx.z selects pages [z * part_pages, (z + 1) * part_pages) of a sequence, and the
             block writes that range's normalized output with its max and exp-sum (day 81's
             partitions, merged by day 81's reduce); one range spanning the table is the answer.
  num_warps  warps per block (day 89's knob; day 78's NUM_WARPS by default).
  load_words 8-byte words per load instruction (day 78's LOAD_WORDS, 1 by default): 2 reads each
             lane's pairs of adjacent words with one 16-byte load (course.wide.load4), where the row
             allows it (day 78's load_width). The launch reads this module's LOAD_WORDS.
  lane_elems elements of a row a lane holds (day 78's head_layout cap, LANE_ELEMS = 16 by default):
             8 spreads a row of 128 over 16 lanes instead of 8, so four heads' q and accumulators take
             64 registers, not 128, one more butterfly step a dot product; with 16-byte loads the
             kernel at four heads then takes 168 registers (3 blocks of 4 warps an SM), not 254 (2).
             The launch reads this module's LANE_ELEMS (None: day 78's; off: on an H100 row h of
             tools/paged_bound.py measured 1.33x slower than the default at 4k and 32k; the H200,
             whose bound is the occupancy, is still to be measured: day 89's lesson).
  lazy_rescale  rescale the running sums only on a trip where some lane of the warp saw a new max
             (a vote, then a warp-uniform branch); elsewhere the correction is exp2(0) = 1 exactly, so
             the output is the same (to the last bit in the simulator; on a GPU an ulp or so apart,
             where the eager multiply by 1 was fused into the next add) with fewer instructions a
             trip. The launch reads this module's LAZY_RESCALE (off until measured: tools/paged_bound.py's
             row g).

At heads = 1 with one range it computes what day 78's kernel computes, on the same schedule.
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from course import cuda, launch, wide
from numba import float32, int32, uint32, uint64
from solutions.day73_decode_attention import ROW_STEP
from solutions.day78_paged_attention_v1 import (
    LOAD_WORDS,
    LOG2E,
    NO_LOGIT,
    NUM_WARPS,
    TRIP_ELEMS,
    WARP,
    head_layout,
    kernel_words,
    load_width,
)

STATIC_SHARED = 48 * 1024  # bytes of static shared memory a block may declare (sm_90 without opt-in)
# Rescale the accumulators only where the warp saw a new max (attention_kernel's lazy_rescale): read
# by the launch at each call, as LOAD_WORDS is.
LAZY_RESCALE = False
# Elements of a row a lane holds (attention_kernel's lane_elems), read by the launch at each call:
# None keeps day 78's LANE_ELEMS.
LANE_ELEMS = None


def trip_plan(heads: int, block_size: int, lanes: int, vec: int = 16) -> tuple[int, bool]:
    """(rows per thread group per trip, prefetch): what fits in registers, chosen by measurement on
    the H200 at head_dim 128 (day 79's lesson has the numbers): with one or two heads per block, four
    rows per group (a 16-token trip) and no prefetch; with three or four heads, q and the
    accumulators take 128 registers, so two rows per group and the next trip's loads issued before
    this trip's arithmetic. ``vec``: elements of a row per lane; the rows are capped at TRIP_ELEMS
    elements a lane, so a head of 256 (16 lanes a row) keeps 128's registers in flight, not twice."""
    groups = WARP // lanes
    cap = 1 << (max(1, TRIP_ELEMS // vec).bit_length() - 1)  # a power of two: trips tile the page
    rows = max(1, min(min(ROW_STEP, block_size) // groups, cap))
    if heads <= 2:
        return rows, False
    return max(1, rows // 2), True


def trip_loader(TOK: int, WL: int, NG: int, G: int, FULL: int, TAIL: int, LW: int = 1):
    """The device function that issues one trip's K and V loads for a lane (the attention's, and day
    89's read-only kernel's, so both read exactly the same words): TOK rows of the trip per thread
    group, WL words of a row per lane in slots of LW words (1: 8-byte loads into a uint64 buffer; 2:
    16-byte loads into a uint32 buffer), a ragged row's last slot on lanes gl < TAIL only."""

    @cuda.jit(device=True, inline=True)
    def load_trip(kbuf, vbuf, key_words, value_words, base, t0, n_tok, grp, gl, row_words):
        # Every load of a trip first: 2 * TOK * WL independent 8-byte words per lane in flight. Rows
        # past the context are never read (they may hold NaN, and NaN * 0 is NaN): a dead row
        # re-reads the page's last live row, an L1 hit, and is masked out of the softmax.
        # A ragged row's last slot (w == FULL) exists on lanes gl < TAIL only: the others read nothing
        # (the words past the row are the next head's, or past the cache) and hold zeros, which add
        # nothing to a dot or to acc. With no tail, FULL == WL and the test compiles away.
        for u in range(TOK):
            row = min(t0 + u * NG + grp, n_tok - 1)
            off = base + uint64(uint32(row) * row_words)
            if LW == 1:  # LW is a constant: Numba compiles only one of these branches
                for w in range(WL):
                    if w < FULL or gl < TAIL:
                        kbuf[u * WL + w] = key_words[off + uint64(G * w)]
                        vbuf[u * WL + w] = value_words[off + uint64(G * w)]
                    else:
                        kbuf[u * WL + w] = uint64(0)
                        vbuf[u * WL + w] = uint64(0)
            else:
                # Slot p is words 2 (gl + G p) and + 1: one 16-byte load of four uint32 halves (rows
                # start 16-byte aligned, ROW_WORDS being even), kept as loaded: at LW 2 the buffer is uint32.
                for p in range(WL // 2):
                    i = 4 * (u * (WL // 2) + p)  # the slot's four uint32 halves in the buffer
                    if p < FULL or gl < TAIL:
                        at = uint64(2) * (off + uint64(2 * G * p))  # in uint32 elements
                        kbuf[i], kbuf[i + 1], kbuf[i + 2], kbuf[i + 3] = wide.load4(key_words, at)
                        vbuf[i], vbuf[i + 1], vbuf[i + 2], vbuf[i + 3] = wide.load4(value_words, at)
                    else:
                        for j in range(4):
                            kbuf[i + j] = uint32(0)
                            vbuf[i + j] = uint32(0)

    return load_trip


@functools.cache
def attention_kernel(head_dim: int, cache_dtype: str, block_size: int, heads: int = 1,
                     num_warps: int = NUM_WARPS, prefetch=None, load_words: int = 1, lazy_rescale: bool = False,
                     lane_elems: int | None = None):
    """The kernel for one (head_dim, cache dtype, block size, heads per block, warps per block, words
    per load: 2 where load_width allows it, the word arrays then uint32 views, kernel_words).
    Numba compiles the closure's Python ints as constants, as on day 78: the per-lane arrays get fixed
    sizes, every loop over them unrolls, and the word offsets inside a row fold into the loads.

    Launch: grid (num_heads // heads, num_seqs, partitions), num_warps * 32 threads; arguments
    (part_out (seqs, heads, partitions, head_dim), part_max, part_sum (seqs, heads, partitions),
    query, key_words, value_words (flat uint64 views of the caches), block_tables, context_lens,
    scale * log2(e), num_kv_heads, part_pages). Each block writes its partition's normalized output
    with the partition's running max and exp-sum (base 2): with one partition that is the answer."""
    elem = np.dtype(cache_dtype).type
    LW = load_width(head_dim, np.dtype(cache_dtype).itemsize, load_words)  # words per load instruction
    PW, ROW_WORDS, G, WL, VEC = head_layout(head_dim, np.dtype(cache_dtype).itemsize, LW, lane_elems)
    # Slots of LW words: every lane holds FULL of them, lanes gl < TAIL one more (a ragged row).
    FULL, TAIL = (ROW_WORDS // LW) // G, (ROW_WORDS // LW) % G
    TOK, PREFETCH = trip_plan(heads, block_size, G, VEC)
    PREFETCH = PREFETCH if prefetch is None else prefetch
    NG = WARP // G  # rows a warp works on side by side, one per thread group
    TRIP = NG * TOK  # rows per warp trip
    TRIPS = (block_size + TRIP - 1) // TRIP  # trips per page
    BS, HG, NW, HEAD_DIM = block_size, heads, num_warps, head_dim
    KW = TOK * WL  # words of K (and of V) a lane holds per trip
    # The load buffer as the loads fill it: KW uint64 words, or at LW 2 twice as many uint32 halves
    # (wide.load4's four values go straight into registers; the element view reads either alike).
    BUF, KB = (uint64, KW) if LW == 1 else (uint32, 2 * KW)
    QN, SN, SMN = HG * VEC, HG * TOK, HG * head_dim  # array sizes must be plain constants for Numba

    load_trip = trip_loader(TOK, WL, NG, G, FULL, TAIL, LW)
    LAZY = bool(lazy_rescale)  # a closure constant: Numba keeps one branch of `if LAZY`

    @cuda.jit(device=True, inline=True)
    def attend(q, acc, m, l, s, k, v, t0, n_tok, grp):
        # Dot products of the trip's rows with each head's q slice, then the online softmax update.
        for hh in range(HG):
            for u in range(TOK):
                dot = float32(0.0)
                for e in range(VEC):
                    dot += q[hh * VEC + e] * float32(k[u * VEC + e])
                s[hh * TOK + u] = dot
        o = G // 2  # a token's G lanes hold pieces of one dot product: log2(G) butterfly steps
        while o > 0:
            for i in range(SN):
                s[i] += cuda.shfl_xor_sync(0xFFFFFFFF, s[i], o)
            o //= 2
        for hh in range(HG):
            m_new = m[hh]
            for u in range(TOK):
                if t0 + u * NG + grp >= n_tok:
                    s[hh * TOK + u] = -math.inf  # exp2(-inf) = 0: the dead row drops out
                m_new = max(m_new, s[hh * TOK + u])
            if LAZY:
                # Only where a lane of the warp saw a new max; elsewhere the correction would be
                # exp2(0) = 1 exactly. The vote makes the branch warp-uniform: the multiplies it skips
                # are not issued (a lane's own `if` would predicate them, issuing them anyway).
                if cuda.any_sync(0xFFFFFFFF, m_new > m[hh]):
                    correction = math.exp2(m[hh] - m_new)
                    l[hh] *= correction
                    for e in range(VEC):
                        acc[hh * VEC + e] *= correction
            else:
                correction = math.exp2(m[hh] - m_new)
                l[hh] *= correction
                for e in range(VEC):
                    acc[hh * VEC + e] *= correction
            for u in range(TOK):
                p = math.exp2(s[hh * TOK + u] - m_new)
                l[hh] += p
                for e in range(VEC):
                    acc[hh * VEC + e] += p * float32(v[u * VEC + e])
            m[hh] = m_new

    @cuda.jit(fastmath=True)
    def paged_attention_kernel(part_out, part_max, part_sum, query, key_words, value_words, block_tables,
                               context_lens, scale, num_kv_heads, part_pages):
        seq = cuda.blockIdx.y
        h0 = cuda.blockIdx.x * HG  # this block's first query head; all HG share one KV head
        part = cuda.blockIdx.z
        tid = cuda.threadIdx.x
        warp = tid // WARP
        lane = tid % WARP
        grp = lane // G  # the row of each trip step this lane's group takes
        gl = lane % G  # the slots of the row it holds: gl, gl + G, gl + 2G, ... (LW words each)
        kv_head = h0 // (query.shape[1] // num_kv_heads)
        ctx = context_lens[seq]
        first = part * part_pages
        end = min(first + part_pages, (ctx + BS - 1) // BS)
        if first >= end:
            return  # a partition past this sequence's context: the reduce never reads it
        row_words = uint32(num_kv_heads * ROW_WORDS)  # one token's K row of every KV head
        page_words = uint64(BS) * uint64(row_words)
        lane_words = uint64(kv_head * ROW_WORDS + gl * LW)

        # Fixed-size arrays indexed only by unrolled constant loops: LLVM keeps them in registers.
        q = cuda.local.array(QN, float32)
        acc = cuda.local.array(QN, float32)
        m = cuda.local.array(HG, float32)  # per head: the group's running max and exp-sum
        l = cuda.local.array(HG, float32)
        s = cuda.local.array(SN, float32)
        kbuf = cuda.local.array(KB, BUF)  # (TOK, WL) words as loaded
        vbuf = cuda.local.array(KB, BUF)
        k = kbuf.view(elem)  # the same registers read as (TOK, VEC) cache elements
        v = vbuf.view(elem)
        for hh in range(HG):
            for w in range(WL):
                for j in range(PW):
                    if w // LW < FULL or gl < TAIL:  # a dead slot of a ragged row: q 0, nothing to add
                        q[hh * VEC + w * PW + j] = query[seq, h0 + hh, ((gl + G * (w // LW)) * LW + w % LW) * PW + j] \
                            * scale
                    else:
                        q[hh * VEC + w * PW + j] = 0.0
                    acc[hh * VEC + w * PW + j] = 0.0
            # Finite, so a group with no token yet rescales by exp2(0) = 1, not exp2(-inf + inf).
            m[hh] = NO_LOGIT
            l[hh] = 0.0

        if PREFETCH:
            # Trips numbered across the partition's pages, warps taking them in turn; the next
            # trip's loads go out before this trip's arithmetic, so each warp always waits on one.
            kn = cuda.local.array(KB, BUF)
            vn = cuda.local.array(KB, BUF)
            end_trip = end * TRIPS
            trip = first * TRIPS + warp
            if trip < end_trip:
                page = trip // TRIPS
                base = uint64(block_tables[seq, page]) * page_words + lane_words
                load_trip(kbuf, vbuf, key_words, value_words, base, (trip % TRIPS) * TRIP,
                          min(BS, ctx - page * BS), grp, gl, row_words)
            while trip < end_trip:
                nxt = trip + NW
                if nxt < end_trip:
                    page = nxt // TRIPS
                    base = uint64(block_tables[seq, page]) * page_words + lane_words
                    load_trip(kn, vn, key_words, value_words, base, (nxt % TRIPS) * TRIP,
                              min(BS, ctx - page * BS), grp, gl, row_words)
                page = trip // TRIPS
                t0 = (trip % TRIPS) * TRIP
                n_tok = min(BS, ctx - page * BS)
                if t0 < n_tok:
                    attend(q, acc, m, l, s, k, v, t0, n_tok, grp)
                for i in range(KB):
                    kbuf[i] = kn[i]
                    vbuf[i] = vn[i]
                trip = nxt
        else:
            # Warps take trips round-robin: at block 16 a trip is a page; a page of many trips (a
            # contiguous cache is one page of max_len rows) is still shared by every warp.
            for trip in range(first * TRIPS + warp, end * TRIPS, NW):
                page = trip // TRIPS  # TRIPS is a constant: a shift, or nothing at one trip a page
                t0 = (trip % TRIPS) * TRIP
                n_tok = min(BS, ctx - page * BS)
                if t0 < n_tok:
                    base = uint64(block_tables[seq, page]) * page_words + lane_words  # 64-bit once a trip
                    load_trip(kbuf, vbuf, key_words, value_words, base, t0, n_tok, grp, gl, row_words)
                    attend(q, acc, m, l, s, k, v, t0, n_tok, grp)

        # Fold the warp's NG groups (lanes gl, gl + G, ... hold the same columns): log2(NG) steps.
        o = G
        while o < WARP:
            for hh in range(HG):
                m_o = cuda.shfl_xor_sync(0xFFFFFFFF, m[hh], o)
                l_o = cuda.shfl_xor_sync(0xFFFFFFFF, l[hh], o)
                m_new = max(m[hh], m_o)
                a = math.exp2(m[hh] - m_new)
                b = math.exp2(m_o - m_new)
                l[hh] = l[hh] * a + l_o * b
                for e in range(VEC):
                    acc[hh * VEC + e] = acc[hh * VEC + e] * a \
                        + cuda.shfl_xor_sync(0xFFFFFFFF, acc[hh * VEC + e], o) * b
                m[hh] = m_new
            o *= 2

        # Merge the warps through a (NW, heads * head_dim) staging area: it does not grow with ctx.
        sm_acc = cuda.shared.array((NW, SMN), float32)
        sm_m = cuda.shared.array((NW, HG), float32)
        sm_l = cuda.shared.array((NW, HG), float32)
        if grp == 0:
            for hh in range(HG):
                for w in range(WL):
                    if w // LW < FULL or gl < TAIL:  # a dead slot's columns are past head_dim
                        for j in range(PW):
                            col = ((gl + G * (w // LW)) * LW + w % LW) * PW + j  # word w's row word, at LW 1: gl + G w
                            sm_acc[warp, hh * HEAD_DIM + col] = acc[hh * VEC + w * PW + j]
        if lane == 0:
            for hh in range(HG):
                sm_m[warp, hh] = m[hh]
                sm_l[warp, hh] = l[hh]
        cuda.syncthreads()
        for i in range(tid, SMN, NW * WARP):
            hh = i // HEAD_DIM
            d = i % HEAD_DIM
            m_all = sm_m[0, hh]
            for w in range(1, NW):
                m_all = max(m_all, sm_m[w, hh])
            total = float32(0.0)
            o_d = float32(0.0)
            for w in range(NW):
                c = math.exp2(sm_m[w, hh] - m_all)  # a warp that saw no page: l = 0, acc = 0
                total += sm_l[w, hh] * c
                o_d += sm_acc[w, i] * c
            part_out[seq, h0 + hh, part, d] = o_d / total
            if d == 0:
                part_max[seq, h0 + hh, part] = m_all
                part_sum[seq, h0 + hh, part] = total

    return paged_attention_kernel


def launched_kernel(head_dim: int, cache_dtype: str, block_size: int, heads: int, num_warps: int,
                    load_words: int | None = None):
    """(the dispatcher launch_attention runs for these, its words per load): attention_kernel is cached
    by its exact arguments, so a tool asking the driver about the launched kernel (occupancy, registers)
    must ask for it this way. LOAD_WORDS (where load_words is None), LAZY_RESCALE and LANE_ELEMS are
    read now."""
    lw = load_width(head_dim, np.dtype(cache_dtype).itemsize, LOAD_WORDS if load_words is None else load_words)
    return attention_kernel(head_dim, cache_dtype, block_size, heads, num_warps, load_words=lw,
                            lazy_rescale=LAZY_RESCALE, lane_elems=LANE_ELEMS), lw


def launch_attention(query, key_cache, value_cache, block_tables, context_lens, scale, *, heads: int = 1,
                     part_pages: int | None = None, num_warps: int = NUM_WARPS, load_words: int | None = None):
    """Run the kernel (inputs already checked); returns (part_out, part_max, part_sum), the first
    (num_seqs, num_heads, partitions, head_dim). part_pages=None: one partition, the whole table.
    load_words=None: this module's LOAD_WORDS, read at the call (set it to time 16-byte loads)."""
    num_seqs, num_heads, head_dim = query.shape
    plan = attention_launch(num_seqs, num_heads, head_dim, block_tables.shape[1], key_cache, heads=heads,
                            part_pages=part_pages, num_warps=num_warps, load_words=load_words)
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    part_out = launch.empty((num_seqs, num_heads, plan.parts, head_dim), np.float32)
    part_max = launch.empty((num_seqs, num_heads, plan.parts), np.float32)
    part_sum = launch.empty((num_seqs, num_heads, plan.parts), np.float32)
    plan.kernel[plan.grid, plan.threads](part_out, part_max, part_sum, q, kernel_words(kc, plan.load_words),
                                         kernel_words(vc, plan.load_words), tables, lens, float32(scale * LOG2E),
                                         int32(key_cache.shape[2]), int32(plan.part_pages))
    return part_out, part_max, part_sum


class AttentionLaunch(NamedTuple):
    """What launch_attention launches, worked out without launching (attention_launch)."""

    kernel: object  # the compiled-per-shape kernel (attention_kernel's dispatcher)
    load_words: int  # 8-byte words per load: kernel_words' view of the caches (1: uint64, 2: uint32)
    signature: str  # SIG_PAGED or SIG_PAGED_WIDE, as the load width makes the word arrays
    grid: tuple  # (num_heads // heads, num_seqs, parts): heads fastest, a group's blocks share pages in L2
    threads: int
    part_pages: int  # pages a partition
    parts: int  # partitions a sequence: from the table's capacity, which bounds every context


def attention_launch(num_seqs: int, num_heads: int, head_dim: int, width: int, key_cache, *, heads: int = 1,
                     part_pages: int | None = None, num_warps: int = NUM_WARPS,
                     load_words: int | None = None) -> AttentionLaunch:
    """launch_attention's choices for a step of ``num_seqs`` sequences over block tables ``width`` pages
    wide (a serving engine plans them once and repeats the launch in every layer). ValueError where the
    warps' staging would not fit the static shared memory."""
    if num_warps * heads * head_dim * 4 > STATIC_SHARED:
        # The warps' staging area is a static shared array, and sm_90 caps those at 48 KB a block.
        raise ValueError(f"num_warps {num_warps} x {heads} heads x head_dim {head_dim} floats of staging: "
                         f"{num_warps * heads * head_dim * 4} B of shared memory, over {STATIC_SHARED} B")
    part_pages = part_pages or width
    parts = math.ceil(width / part_pages)
    kernel, lw = launched_kernel(head_dim, np.dtype(key_cache.dtype).name, key_cache.shape[1], heads, num_warps,
                                 load_words)
    return AttentionLaunch(kernel, lw, SIG_PAGED if lw == 1 else SIG_PAGED_WIDE, (num_heads // heads, num_seqs, parts),
                           num_warps * WARP, part_pages, parts)


SIG_PAGED = ("void(float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
             "uint64[::1], uint64[::1], int32[:, ::1], int32[::1], float32, int32, int32)")
SIG_PAGED_WIDE = SIG_PAGED.replace("uint64", "uint32")  # load_words 2: kernel_words' uint32 views
