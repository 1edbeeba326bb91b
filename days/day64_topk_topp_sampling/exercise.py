"""Day 64 exercise: top-k and top-p sampling -- one token a row drawn from softmax(logits / temperature), cut to
the top_k most likely tokens, then to the shortest prefix of them holding top_p of their mass.

f(logits, top_k, top_p, temperature, uniforms): logits float32 (rows, vocab), top_k an int in
1 .. min(vocab, MAX_K = 1024), top_p a float in (0, 1], temperature a float > 0, uniforms float32 (rows,)
in [0, 1) -> int32 (rows,) token ids. The order of the cuts is vLLM's: probs = softmax(logits / T);
keep the top_k largest (ties to the lower token id); renormalise them; in descending order keep the
shortest prefix whose mass reaches top_p (at least one token); draw the first token of that prefix whose
cumulative kept mass exceeds uniforms[row] * (the kept mass). The draw is a pure function of the
uniforms: the kernels return, draw for draw, the token the float64 NumPy sampler (reference) returns.

Two facts shape the kernels.
- softmax is monotone: sorting the LOGITS sorts the probabilities. The kernels sort the logits' bits
  (day 38's descending_key, ties to the lower id through the packed pair key << 32 | id), never float32
  probabilities: exp rounds neighbouring logits to one float32 and underflows a tail to 0, inventing ties
  the float64 reference does not have.
- After the top-k cut the kept probabilities are renormalised, so softmax's row sum cancels:
  p_j / sum_top-k p = exp((x_j - M) / T) / sum_top-k exp((x_i - M) / T), M the row max = the first
  logit of the sorted top-k. The optimized version needs neither the sum nor a separate max pass: the
  row is read ONCE, by the top-k pass. (Day 56/57's (m, s) pass would be a second pass for nothing.)
  (x - M) / T, not x / T - M / T: at |x| ~ 1e4 the rounding of x / T in float32 moves a probability by
  ~1e-3; x - M is exact for the logits near the max (Sterbenz), the ones that carry the mass.

v1 naive      a block per row sorts the whole row: the (key, id) pairs of all vocab logits, padded to
              P = the next power of two, in a global-memory buffer (rows, P), a bitonic network of
              log2 P (log2 P + 1) / 2 steps with a barrier each, every step a read and a write of the
              whole buffer; then the row's softmax sum (a second read of the row), and one thread cuts
              top-k, scans top-p and draws, serially.
v2 chunk_sort per-chunk top-k in shared memory, merged, then a block scan:
              (a) chunk pass: block (c, r) loads chunk c of SPAN logits of row r (coalesced, the only
                  read of the row), packs the pairs into shared memory, sorts them by a bitonic network
                  (a barrier a step) and writes its first kc = min(top_k, SPAN) pairs: a chunk's top-k.
                  SPAN = a power of two >= 4 top_k (at most CHUNK = 2048), so each pass keeps <= 1/2
                  of its input (1/4 or less where top_k is small).
              (b) merge passes: the same kernel on the candidate pairs until one block's worth remains
                  (the global top-k is inside the union of the chunks' top-ks).
              (c) final: one block a row sorts the <= CHUNK survivors in shared memory (or the whole row
                  when vocab <= CHUNK: then pass (a) is skipped), gathers the k kept logits by id (k scattered
                  loads, not a re-read of the row), exp((x - M) / T), a block scan (warp shuffles, day 31's
                  warp_inclusive_scan, one slot a warp), the top-p count and the draw by
                  syncthreads_count.
v3 optimized  radix select of the k-th key, one compaction, then v2's final block on exactly k pairs:
              (a) PASSES = 4 histogram launches of 8-bit digits of descending_key (from the top), grid (nb,
                  rows): block (b, r) counts slice b of row r (coalesced, UNROLL loads in flight) into
                  day 22's replicated shared bins (shared atomics, conflict-free) and stores its 256
                  counts (no zeroing, no global atomics: the next launch's blocks sum the row's nb x 256,
                  a scan over the digits, and take the digit with excl < rem <= incl: the prefix grows a
                  digit, rem drops the keys below it; nothing returns to the host between passes);
              (b) compaction, the same grid: the last narrowing gives thr (the k-th smallest key) and take
                  (how many keys == thr are in); keys < thr go to slots by a warp's global atomic, keys
                  == thr by their rank in id order (the equal keys of earlier slices, from their last-pass
                  counts, plus a warp scan of the tile's ballot counts): the lowest ids, exactly k pairs;
              (c) final_sample_kernel on the (rows, k) pairs: a sort of pow2(k) pairs (64 for k = 50).
library       torch on the GPU (what vLLM's sampler does): a stable descending torch.sort of the whole
              row of logits, the top-k cut, softmax of the kept, the top-p mask by cumsum,
              searchsorted of the same uniforms.

Napkin math (H200, ~4.2 TB/s). The minimum is one read of the logits (4 B a token) plus 4 B a row
(uniforms, token): (64, 128256) 32.8 MB, ~8 us; (256, 32000) 32.8 MB, ~8 us. Neither is several x the
L2 (a decode batch is this small: it is latency, not bandwidth, that a sampler spends).
  naive      per row P = 131072 (2^17) pairs of 8 B, 153 steps each reading and writing 1 MB: ~160 MB a
             row through L2, 10 GB for 64 rows, on only 64 blocks (64 of 132 SMs busy): milliseconds.
  chunk_sort pass (a) reads the 32.8 MB once; its sorting is shared-memory work, ~36 steps (SPAN 256,
             top_k 50) of one 8-byte compare-exchange a thread: 4 B read per ~300 B of shared traffic, so
             the shared-memory pipe (~30 TB/s over the chip), not DRAM, bounds it: ~30-60 us expected.
             Candidates: 128256 / 256 x 50 = 25k pairs a row (200 KB), then 4.9k, then 1k: a few %
             of pass (a). The final block per row: a 2048-pair sort and a 1024-float scan, ~10 us.
             Measured on the H200 (make bench): (64, 128256, 50, 0.9, 0.8) naive 20.1 ms, chunk_sort
             952.2 us, torch 690.2 us; (256, 32000, 50, 0.95, 1.0) naive 5.30 ms, chunk_sort 946.0 us,
             torch 707.1 us. Nsight Compute at the first shape: pass (a) 979 us (32k blocks, each a full
             bitonic sort of 256 pairs), the second pass 200 us, the third 48 us, the final 31 us. The
             napkin's 30-60 us was wrong by 20x: the network is O(n log^2 n) compare-exchanges of 64-bit
             pairs, ~220 SM-cycles a block-step, and the chip is instruction-bound on it, not on the 33 MB.
  optimized  5 reads of the row (4 histogram passes + the compaction): 164 MB. The first from DRAM
             (~8 us); the row set is 33 MB, inside the L2 (50-60 MB), so the other four mostly from L2:
             ~3-5 us each. Per key: a load, the key, a compare, and (pass 0: every key; later passes only
             the keys in play, ~2 % of normal logits after the first digit) one shared atomic on a
             replicated bin: 8.2M atomics over 132 SMs x 32 lanes ~1 us. The merge: nb x 256 counts a block
             stored, nb^2 x 256 read a row a pass (nb = 8: 64 KB a row, 4 MB a pass, ~12 % of the row).
             The final block sorts 64 pairs, ~5 us. Six launches back to back, ~2-3 us each of gaps and
             tails. Expected ~30-50 us at both shapes: well under torch's ~690 us (which sorts every row
             whole). Measured on the H200 (make bench): 147.3 us at (64, 128256, 50), 4.7x faster than
             torch's 690.2 us and 6.5x faster than chunk_sort; 161.2 us at (256, 32000, 50), 4.4x faster
             than torch's 707.1 us. Three to five times the estimate; the split among the six launches
             is not measured yet. (The first GPU run failed: Numba types ~x and x | y of uint32 as
             uint64, so day 38's descending_key returned 64-bit keys that no key < thr test passed; day
             38 now casts each result back to uint32, and its grader checks the compiled return type.)
             Why several blocks a row: 64 rows against 132 SMs. One block a row (FlashInfer's way) would
             fuse every pass into one launch, but leaves 68 SMs idle and makes one SM stream 513 KB five
             times with the bytes one SM keeps in flight (~32-64 KB: ~50-100 GB/s, ~5-10 us a pass).
             row_blocks aims at ~4 blocks an SM over all rows (8 slices a row at (64, 128256), 3 at
             (256, 32000)), capped at 8 because each block re-reads the row's nb x 256 counts.
  All BENCH_SIZES, bound "memory" (the % of copy on the minimum bytes).

What you write (each raises NotImplementedError with its hint until you do):
  sort_row_sample_kernel  pack the pairs (PAD past vocab), barrier, bitonic_sort; S; thread 0 cuts and draws (36
                          lines)
  chunk_topk_kernel       load the chunk's pairs into shared memory (PAD past the row), barrier, bitonic_sort, write
                          the first kc (10 lines)
  final_sample_kernel     e_t from the decoded logits, block_inclusive_scan, the top-p count and the draw by
                          syncthreads_count (17 lines)
  find_bucket             merge the row's nb counts of digit t, scan over the digits, the digit with excl < rem <=
                          incl writes sel (15 lines)
  radix_hist_kernel       UNROLL coalesced loads a trip, count the keys in play in the replicated bins, barrier,
                          store the counts (17 lines)
  radix_compact_kernel    equal keys before this block; a tile: keys < thr to a warp's atomic slots, keys == thr by
                          id-order rank (41 lines)
  optimized               check; row_blocks; PASSES radix_hist_kernel launches on (nb, rows); the compaction; the
                          final kernel (13 lines)
Everything else in this file is given. Grade with:  make check DAY=64
"""

import math
import numbers

import numpy as np

from course import cuda, launch
from numba import float32, int32, int64, uint32, uint64  # numba names only after the course import
from solutions.day22_histogram import BINS, COPIES, SLOTS  # day 22's replicated shared bins
from solutions.day25_reduction_last_warp import WARP
from solutions.day31_stream_compaction import warp_inclusive_scan  # day 31's shuffle scan (any dtype)
from solutions.day38_checkpoint_topk import descending_key  # day 38's order-preserving key

TITLE = "Top-k and top-p sampling"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "chunk_sort", "optimized")
MAX_K = 1024  # the final block holds the k kept probabilities, one a thread
CHUNK = 2048  # pairs one block sorts in shared memory: 16 KB of uint64
MIN_SPAN = 64  # the smallest chunk (a power of two, two warps of compare-exchanges)
NAIVE_THREADS = 256
MARGIN = 1e-4  # make_inputs keeps every uniform and top_p this far (relative) from a boundary
PAD = 0xFFFFFFFFFFFFFFFF  # the largest pair: sorts after every real one
# The radix select (optimized): 4 passes of 8-bit digits over the 32-bit keys, from the top.
RADIX = BINS  # 256 digit values, one a thread of the histogram blocks (day 22's bins)
DIGIT_BITS = 8
PASSES = 32 // DIGIT_BITS
FULL = 0xFFFFFFFF
UNROLL = 4  # histogram: 4 coalesced loads in flight a thread before any is counted
WARPS = RADIX // WARP  # 8 warps in a histogram or compaction block
ITEMS = WARP // WARPS  # compaction: 4 keys a thread a tile; ITEMS x WARPS = 32 rank slots, one warp scans them
ROW_BLOCKS_PER_SM = 4  # the passes' grid: about 4 blocks an SM over all rows together
MAX_ROW_BLOCKS = 8  # slices a row at most: each block re-reads the row's nb x 256 counts (nb^2 a row)
MIN_SLICE = RADIX * ITEMS  # at least one compaction tile (1024 keys) a slice
# (rows, vocab, top_k, top_p, temperature). A vocab of 1; a tiny vocab all kept (top_k = vocab);
# greedy (top_k 1); a vocab not a power of two past a chunk (2101: the chunk and merge passes); top_p 1.0
# and a tiny top_p; temperatures below and above 1.
# Rows 2 and 3 (all equal, +-1e4) appear from 3 and 4 rows on.
TEST_SIZES = ((2, 1, 1, 1.0, 1.0), (3, 37, 37, 1.0, 0.7), (4, 300, 1, 0.9, 1.0),
              (4, 509, 20, 0.8, 1.3), (2, 1000, 7, 0.05, 0.9), (3, 2101, 50, 0.9, 0.8))
NAIVE_SIZES = TEST_SIZES[:5]  # the naive version's global bitonic network: the whole row, many barriers
# Llama 3's vocabulary at a decode batch; Llama 2's at a larger batch.
BENCH_SIZES = ((64, 128256, 50, 0.9, 0.8), (256, 32000, 50, 0.95, 1.0))
BOUND = "memory"


# ---- the problem: the plain NumPy sampler ---------------------------------------------------------------

def _row_plan(x_row, top_k, top_p, temperature):
    """One row in float64: (order of the top_k ids, descending; the renormalised top-k probabilities in
    that order; keep = how many of them the top-p cut keeps)."""
    z = x_row.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")[:top_k]  # ties: the lower token id first
    pk = p[order] / p[order].sum()
    c = np.cumsum(pk)
    keep = min(int(np.searchsorted(c, top_p, side="left")) + 1, top_k)  # the first prefix reaching top_p
    return order, pk, c, keep


def reference(logits, top_k, top_p, temperature, uniforms):
    """The sampler in float64: softmax, a stable argsort, the top-k cut, the top-p cut by cumsum and
    searchsorted, the draw by searchsorted of u * (the kept mass) (the first cumulative mass > it)."""
    out = np.empty(logits.shape[0], np.int32)
    for r in range(logits.shape[0]):
        order, pk, _, keep = _row_plan(logits[r], top_k, top_p, temperature)
        ck = np.cumsum(pk[:keep])
        j = min(int(np.searchsorted(ck, float(uniforms[r]) * ck[-1], side="right")), keep - 1)
        out[r] = order[j]
    return out


def make_inputs(n, seed: int = 0):
    """n = (rows, vocab, top_k, top_p, temperature) -> (logits, top_k, top_p, temperature, uniforms).

    Logits like a language model's: a long normal tail plus a few large logits (a handful of likely
    tokens); row 1 has ties (logits rounded to a grid of 0.5, the largest repeated at three ids); row 2 is
    all equal (the top-k is the lowest ids); row 3 has magnitudes of +-1e4.

    Float32 sums and float64 sums differ near a boundary, so two moves make the draw well defined:
    - top_p: if any row's cumulative top-k mass lies within MARGIN of top_p, top_p is lowered in steps
      of MARGIN (raised if it would reach 0) until none does (top_p = 1.0 is kept: its boundary is the
      whole top-k mass, which both precisions reach);
    - uniforms: one that lies within MARGIN x (the kept mass) of a boundary of the cumulative kept mass
      moves to the middle of its token's interval (to the first token's, the widest, where its own
      interval is narrower than 4 MARGIN).
    Both moves are deterministic; after them the float32 kernels and the float64 reference agree."""
    rows, vocab, top_k, top_p, temperature = n
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, vocab)).astype(np.float32) * np.float32(2.0)
    heads = rng.integers(0, vocab, size=(rows, 4))
    x[np.arange(rows)[:, None], heads] += rng.uniform(4.0, 9.0, size=(rows, 4)).astype(np.float32)
    if rows > 1:
        x[1] = np.round(x[1] * 2.0) / 2.0
        x[1, rng.integers(0, vocab, size=3)] = x[1].max()
    if rows > 2:
        x[2] = np.float32(1.5)
    if rows > 3:
        x[3] = np.clip(x[3] * np.float32(2500.0), -1e4, 1e4)
    x = np.ascontiguousarray(x, dtype=np.float32)
    top_p = float(top_p)
    plans = [_row_plan(x[r], top_k, top_p, temperature) for r in range(rows)]
    if top_p < 1.0:
        cums = np.concatenate([c for _, _, c, _ in plans])
        step = -MARGIN
        while np.abs(cums - top_p).min() < MARGIN:
            if top_p + step <= MARGIN:
                step = MARGIN
            top_p = round(top_p + step, 12)
        plans = [_row_plan(x[r], top_k, top_p, temperature) for r in range(rows)]
    u = rng.random(rows)
    for r, (_, pk, _, keep) in enumerate(plans):
        ck = np.cumsum(pk[:keep])
        total = ck[-1]
        edges = np.concatenate(([0.0], ck))
        v = u[r] * total
        if np.abs(edges - v).min() < MARGIN * total:
            j = min(int(np.searchsorted(ck, v, side="right")), keep - 1)
            if edges[j + 1] - edges[j] < 4 * MARGIN * total:
                j = 0
            u[r] = (edges[j] + edges[j + 1]) / 2 / total
    return x, int(top_k), top_p, float(temperature), np.ascontiguousarray(u, dtype=np.float32)


def traffic(logits, top_k, top_p, temperature, uniforms):
    """(minimum bytes, FLOPs): the logits read once, a uniform read and a token written a row; ~2 FLOPs
    a logit (a key, a comparison) (the sort's compare-exchanges are not counted)."""
    return logits.size * 4 + logits.shape[0] * 8, 2 * logits.size


def _check(logits, top_k, top_p, temperature, uniforms):
    launch.check_array("logits", logits, dtype=np.float32, ndim=2)
    rows, vocab = logits.shape
    if rows == 0 or vocab == 0:
        raise ValueError(f"logits: expected at least one row and one column, got shape {tuple(logits.shape)}")
    if rows > 65535:
        raise ValueError(f"logits: expected at most 65535 rows (the grid's y dimension), got {rows}")
    launch.check_array("uniforms", uniforms, dtype=np.float32, shape=(rows,))
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral):
        raise ValueError(f"top_k: expected an integer, got {type(top_k).__name__}")
    if not 1 <= top_k <= min(vocab, MAX_K):
        raise ValueError(f"top_k: expected 1 <= top_k <= min(vocab = {vocab}, MAX_K = {MAX_K}), got {top_k}")
    if isinstance(top_p, (bool, np.bool_)) or not isinstance(top_p, numbers.Real) or not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p: expected a float in (0, 1], got {top_p!r}")
    if (isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, numbers.Real)
            or not temperature > 0.0 or not np.isfinite(temperature)):
        raise ValueError(f"temperature: expected a finite float > 0, got {temperature!r}")
    return int(top_k), np.float32(top_p), np.float32(temperature)


# ---- pieces both versions share --------------------------------------------------------------------------

@cuda.jit(device=True)
def pack(bits, i):
    """The pair of a logit (its float32 bits) and its id: descending_key << 32 | id. Ascending pairs are
    descending logits, equal logits by ascending id."""
    return (uint64(descending_key(bits)) << uint64(32)) | uint64(i)


@cuda.jit(device=True)
def id_of(pair):
    """The token id a pair was packed with (its low 32 bits)."""
    return int32(pair & uint64(0xFFFFFFFF))


@cuda.jit(device=True)
def bitonic_sort(buf, size_p):
    """Sort buf[0:size_p] ascending (size_p a power of two) by the block's threads: stages 2 .. size_p,
    distances size / 2 .. 1, thread t doing the compare-exchanges q = t, t + blockDim, ... of the
    size_p / 2, a barrier after every step (the next step reads what other threads wrote). buf is
    shared (optimized) or a row of a global array (naive): the same network."""
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    size = 2
    while size <= size_p:
        d = size // 2
        while d >= 1:
            for q in range(t, size_p // 2, nt):
                i = 2 * q - (q & (d - 1))  # the lower element of pair q at distance d
                a = buf[i]
                b = buf[i + d]
                if (a > b) == ((i & size) == 0):  # this run of the stage sorts ascending
                    buf[i] = b
                    buf[i + d] = a
            cuda.syncthreads()
            d //= 2
        size *= 2


# ---- v1: sort the whole row -----------------------------------------------------------------------------

@cuda.jit
def sort_row_sample_kernel(xf, xbits, vocab, buf, top_k, top_p, temp, u, out):
    """Block r = blockIdx.x takes row r: xbits (rows * vocab,) uint32 (the logits' bits), buf (rows, P)
    uint64 with P the next power of two >= vocab. Every pair pack(bits, id) into buf[r] (PAD past
    vocab), a barrier, bitonic_sort(buf[r], P) in global memory; M = xf[the id of buf[r, 0]]; the softmax
    sum S = sum exp((x - M) / temp) over the whole row (each thread's share, one slot a thread in
    shared memory, a barrier, thread 0 adds them). Thread 0 then walks the first top_k pairs: p_j =
    exp((x_j - M) / temp) / S, their total, the keep = 1 + the count of renormalised cumulative masses
    < top_p (at most top_k), and out[r] = the id of the first kept pair whose cumulative kept mass
    > u[r] x (the kept mass) (the last kept one if rounding leaves none)."""
    sums = cuda.shared.array(NAIVE_THREADS, float32)
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    r = cuda.blockIdx.x
    size_p = buf.shape[1]
    row = buf[r]
    base = int64(r) * vocab
    raise NotImplementedError("Day 64: pack the pairs (PAD past vocab), barrier, bitonic_sort; S; thread 0 cuts and "
                              "draws (36 lines)")


# ---- v2: per-chunk top-k, merged, a block scan ------------------------------------------------------------

@cuda.jit
def chunk_topk_kernel(xbits, vocab, cand_in, width, span, kc, cand_out):
    """Block (c, r) = (blockIdx.x, blockIdx.y): chunk c of row r, span elements (a power of two <= CHUNK).
    Source: with width == 0, the logits (xbits (rows * vocab,) uint32: elements c * span + j of row r,
    packed by pack); else the pairs cand_in[r, c * span + j] of an earlier pass (width of them a row).
    PAD past the row. The span pairs go to shared memory (thread t loads j = t, t + blockDim, ...: a warp
    reads consecutive addresses), a barrier, bitonic_sort(buf, span), then cand_out[r, c * kc + j] =
    buf[j] for j < kc: the chunk's kc smallest pairs (its top-kc logits), in order."""
    buf = cuda.shared.array(CHUNK, uint64)  # 16 KB: the chunk, packed
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    c = cuda.blockIdx.x
    r = cuda.blockIdx.y
    start = c * span
    raise NotImplementedError("Day 64: load the chunk's pairs into shared memory (PAD past the row), barrier, "
                              "bitonic_sort, write the first kc (10 lines)")


@cuda.jit(device=True)
def block_inclusive_scan(v, warp_tot):
    """v summed over threads 0 .. t of the block, in thread t: day 31's warp_inclusive_scan, lane 31's
    total to warp_tot[warp] (shared), a barrier, warp 0 scans the totals in place, a barrier, each warp
    adds the totals of the warps before it."""
    t = cuda.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    v = warp_inclusive_scan(v, lane)
    if lane == WARP - 1:
        warp_tot[warp] = v
    cuda.syncthreads()
    if warp == 0:
        w = warp_tot[lane] if lane < cuda.blockDim.x // WARP else float32(0.0)
        w = warp_inclusive_scan(w, lane)
        if lane < cuda.blockDim.x // WARP:
            warp_tot[lane] = w
    cuda.syncthreads()
    if warp > 0:
        v += warp_tot[warp - 1]
    return v


@cuda.jit
def final_sample_kernel(xf, xbits, vocab, cand, width, top_k, top_p, temp, u, out):
    """Block r = blockIdx.x (xf (rows * vocab,) float32 and xbits its uint32 bits, the same memory):
    row r's survivors to shared memory, from the logits (width == 0: the whole
    row, vocab <= CHUNK) or from cand[r, :width] (width <= CHUNK), PAD up to P = the next power of two,
    a barrier, bitonic_sort. Thread t < top_k (blockDim >= top_k) reads its logit x_t = xf[row base + id_of(buf[t])],
    e_t = exp((x_t - M) / temp) with M the logit of buf[0] (the row max), and its inclusive prefix c_t by
    block_inclusive_scan (e = 0 for t >= top_k). With total = c_{top_k - 1} (shared):
    keep = 1 + syncthreads_count(c_t < top_p x total) (at most top_k), kept = c_{keep - 1} (shared);
    pick = syncthreads_count(t < keep and c_t <= u[r] x kept) (at most keep - 1); thread 0 writes
    out[r] = the id of buf[pick]."""
    buf = cuda.shared.array(CHUNK, uint64)
    warp_tot = cuda.shared.array(WARP, float32)
    mass = cuda.shared.array(2, float32)  # the top-k mass, then the kept mass
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    r = cuda.blockIdx.x
    n = vocab if width == 0 else width
    size_p = 1
    while size_p < n:
        size_p *= 2
    for j in range(t, size_p, nt):
        if j >= n:
            buf[j] = uint64(PAD)
        elif width == 0:
            buf[j] = pack(xbits[int64(r) * vocab + j], j)
        else:
            buf[j] = cand[r, j]
    cuda.syncthreads()
    bitonic_sort(buf, size_p)
    raise NotImplementedError("Day 64: e_t from the decoded logits, block_inclusive_scan, the top-p count and the draw "
                              "by syncthreads_count (17 lines)")


# ---- v3: radix select of the threshold, one compaction, the final block ------------------------------------

@cuda.jit(device=True)
def find_bucket(hist, p, r, nb, prefix, rem, shift, wsum, sel):
    """Called by all RADIX threads of a block (thread t = digit t): the digit of pass p that holds the
    rem-th smallest key in play of row r. c_t = sum over the row's nb blocks of hist[p, r, b, t] (the
    merge: each block stored its own counts); the inclusive scan of c over the digits (day 31's
    warp_inclusive_scan, the warp totals through wsum, a barrier); the one digit d with
    excl < rem <= incl (excl = incl - c_d) writes sel = (prefix | d << shift, rem - excl, c_d): the
    prefix grows by a digit, rem drops the keys of the lower digits (all taken), c_d is how many keys in
    play share the new prefix. A barrier; every thread returns sel."""
    t = cuda.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    raise NotImplementedError("Day 64: merge the row's nb counts of digit t, scan over the digits, the digit with excl "
                              "< rem <= incl writes sel (15 lines)")
    cuda.syncthreads()
    return sel[0], int32(sel[1]), int32(sel[2])


@cuda.jit
def radix_hist_kernel(xbits, vocab, per, k, p, state, hist, cnt):
    """Pass p (0 .. PASSES - 1) of the radix select, block (b, r) = (blockIdx.x, blockIdx.y): the
    digit histogram of its slice [b per, min((b + 1) per, vocab)) of row r (nb = gridDim.x slices).

    First the prefix: pass 0 starts with (prefix 0, rem = k); pass p > 0 takes (prefix, rem) from
    state[r, p - 1] and narrows them by find_bucket on pass p - 1's counts (every block of the row does
    the same, from the same counts: no host round trip, no extra launch). Block 0 stores the result in
    state[r, p] for the next launch (and zeroes the row's compaction counter cnt[r] in pass 0).
    Then the count: keys key = descending_key(xbits[r vocab + i]) in play ((key & himask) == prefix,
    himask = the top 8 p bits; every key in pass 0) add 1 to digit (key >> shift) & 255, shift =
    24 - 8 p, in day 22's replicated shared bins (copy lane of bin d at d COPIES + lane: a warp's 32
    atomics hit 32 banks however the digits fall), UNROLL coalesced loads in flight a thread before the
    first atomic. A barrier; thread t sums digit t's 32 copies (rotated: conflict-free) and stores the
    block's count in hist[p, r, b, t] (a plain store: the merge is the consumer's sum over b)."""
    bins = cuda.shared.array(SLOTS, int32)  # (RADIX, COPIES) flattened: 32 KB
    wsum = cuda.shared.array(WARPS, int32)
    sel = cuda.shared.array(3, uint32)
    t = cuda.threadIdx.x
    lane = t % WARP
    b = cuda.blockIdx.x
    r = cuda.blockIdx.y
    nb = cuda.gridDim.x
    for j in range(t, SLOTS, RADIX):
        bins[j] = 0
    prefix = uint32(0)
    rem = int32(k)
    if p > 0:
        prefix, rem, _ = find_bucket(hist, p - 1, r, nb, state[r, p - 1, 0], int32(state[r, p - 1, 1]),
                                     DIGIT_BITS * (PASSES - p), wsum, sel)
    cuda.syncthreads()  # the bins zeroed before any lane counts into them
    if b == 0 and t == 0:
        state[r, p, 0] = prefix
        state[r, p, 1] = uint32(rem)
        if p == 0:
            cnt[r] = 0
    shift = uint32(DIGIT_BITS * (PASSES - 1 - p))
    himask = uint32(0) if p == 0 else uint32((FULL << (shift + uint32(DIGIT_BITS))) & FULL)
    start = b * per
    end = min(start + per, vocab)
    base = int64(r) * vocab
    raise NotImplementedError("Day 64: UNROLL coalesced loads a trip, count the keys in play in the replicated bins, "
                              "barrier, store the counts (17 lines)")


@cuda.jit
def radix_compact_kernel(xbits, vocab, per, k, state, hist, cnt, cand):
    """Block (b, r), the slices of radix_hist_kernel: the last narrowing (find_bucket on the last
    pass's counts) gives the threshold key thr (the k-th smallest key of row r), take = how many keys
    == thr the top-k holds and less = k - take (every key < thr is in). Each slice of RADIX x ITEMS
    elements (element tile + it RADIX + t for it < ITEMS: coalesced):
    - a key < thr goes to cand[r, slot] (pack(bits, id)), the warp's slots taken by one global atomic
      on cnt[r] (lane 0 adds popc(ballot), shuffles the old value to the warp): at most less < k of them,
      in any order (the final kernel sorts);
    - a key == thr has rank e among the row's equal keys in id order: the equal keys of the blocks
      before b (their last-pass counts of thr's digit, hist[PASSES - 1, r, b', thr & 255]), plus those of
      this block's earlier tiles, plus, in the tile, the popcounts of the ballots before its (it, warp)
      (a warp scan of the ITEMS x WARPS = 32 counts, the order of the ids) and popc(ballot &
      lanemask_lt); it goes to cand[r, less + e] if e < take: the lowest ids first, exactly k pairs.
    A block whose equal keys are all past take (or has none) skips the ranks (a block-uniform test)."""
    eq_cnt = cuda.shared.array(WARP, int32)  # slot it * WARPS + warp: the id order
    wsum = cuda.shared.array(WARPS, int32)
    sel = cuda.shared.array(3, uint32)
    tile_tot = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    b = cuda.blockIdx.x
    r = cuda.blockIdx.y
    nb = cuda.gridDim.x
    thr, take, _ = find_bucket(hist, PASSES - 1, r, nb, state[r, PASSES - 1, 0],
                               int32(state[r, PASSES - 1, 1]), 0, wsum, sel)
    less = k - take
    d = thr & uint32(RADIX - 1)
    start = b * per
    end = min(start + per, vocab)
    base = int64(r) * vocab
    below = cuda.lanemask_lt()
    me = uint32(1) << uint32(lane)
    bits = cuda.local.array(ITEMS, uint32)
    ems = cuda.local.array(ITEMS, uint32)
    raise NotImplementedError("Day 64: equal keys before this block; a tile: keys < thr to a warp's atomic slots, keys "
                              "== thr by id-order rank (41 lines)")


_X = "float32[::1], uint32[::1], int64"  # the logits flat, their bits, vocab
_SIG_FINAL = f"void({_X}, uint64[:, ::1], int64, int64, float32, float32, float32[::1], int32[::1])"
KERNELS = {
    "naive": (sort_row_sample_kernel,
              f"void({_X}, uint64[:, ::1], int64, float32, float32, float32[::1], int32[::1])"),
    "chunk_sort": (chunk_topk_kernel,
                   "void(uint32[::1], int64, uint64[:, ::1], int64, int64, int64, uint64[:, ::1])"),
    "chunk_sort.final": (final_sample_kernel, _SIG_FINAL),
    "optimized": (radix_hist_kernel,
                  "void(uint32[::1], int64, int64, int64, int64, uint32[:, :, ::1], int32[:, :, :, ::1], int32[::1])"),
    "optimized.compact": (radix_compact_kernel,
                          "void(uint32[::1], int64, int64, int64, uint32[:, :, ::1], int32[:, :, :, ::1], int32[::1], "
                          "uint64[:, ::1])"),
    "optimized.final": (final_sample_kernel, _SIG_FINAL),
}


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _device_inputs(logits, uniforms):
    d_x, d_u = launch.to_device(logits, uniforms)
    rows, vocab = logits.shape
    xf = d_x.reshape(rows * vocab)
    return xf, xf.view(np.uint32), d_u, rows, vocab  # the floats and their bits: the same memory


def naive(logits, top_k, top_p, temperature, uniforms):
    k, p, temp = _check(logits, top_k, top_p, temperature, uniforms)
    xf, xbits, d_u, rows, vocab = _device_inputs(logits, uniforms)
    buf = cuda.device_array((rows, _pow2(vocab)), dtype=np.uint64)  # the whole row's pairs, padded
    out = launch.empty((rows,), np.int32)
    sort_row_sample_kernel[rows, NAIVE_THREADS](xf, xbits, vocab, buf, k, p, temp, d_u, out)
    return launch.result(out, logits)


def _final_threads(k, n):
    threads = max(WARP, _pow2(k))  # a thread a kept probability: the scan
    return min(MAX_K, max(threads, min(_pow2(n) // 2, 256)))  # and enough for the final sort


def chunk_sort(logits, top_k, top_p, temperature, uniforms):
    """The chunk passes while the row (or its candidates) exceeds one block's CHUNK, then the final block
    a row. The logits are read once (by the first pass, or by the final kernel when vocab <= CHUNK)."""
    k, p, temp = _check(logits, top_k, top_p, temperature, uniforms)
    xf, xbits, d_u, rows, vocab = _device_inputs(logits, uniforms)
    span = min(CHUNK, max(MIN_SPAN, _pow2(4 * k)))
    kc = min(k, span)
    cand = cuda.device_array((rows, 1), dtype=np.uint64)  # a placeholder while the source is the logits
    width = 0  # 0: the source is the logits themselves
    n = vocab
    while n > CHUNK:
        chunks = -(-n // span)
        nxt = cuda.device_array((rows, chunks * kc), dtype=np.uint64)
        chunk_topk_kernel[(chunks, rows), span // 2](xbits, vocab, cand, width, span, kc, nxt)
        cand, width, n = nxt, chunks * kc, chunks * kc
    out = launch.empty((rows,), np.int32)
    final_sample_kernel[rows, _final_threads(k, n)](xf, xbits, vocab, cand, width, k, p, temp, d_u, out)
    return launch.result(out, logits)


def row_blocks(rows, vocab):
    """(nb, per): the slices a row is cut into and their length (a multiple of RADIX). About
    ROW_BLOCKS_PER_SM blocks an SM over all rows, at most MAX_ROW_BLOCKS a row, at least MIN_SLICE keys a
    slice: (64, 128256) on 132 SMs -> 8 slices of 16,128; (256, 32000) -> 3 of 10,752."""
    nb = max(1, min(MAX_ROW_BLOCKS, math.ceil(launch.sm_count() * ROW_BLOCKS_PER_SM / rows),
                    math.ceil(vocab / MIN_SLICE)))
    per = math.ceil(math.ceil(vocab / nb) / RADIX) * RADIX
    return math.ceil(vocab / per), per


def optimized(logits, top_k, top_p, temperature, uniforms):
    """PASSES histogram launches and one compaction over a grid of (nb, rows) blocks, then the final block
    a row on the k candidates. Nothing comes back to the host between them: each launch finds its digit
    from the previous one's counts."""
    raise NotImplementedError("Day 64: check; row_blocks; PASSES radix_hist_kernel launches on (nb, rows); the "
                              "compaction; the final kernel (13 lines)")


def library(logits, top_k, top_p, temperature, uniforms):
    """What vLLM's sampler does in torch on the GPU: a stable descending sort of the whole row of
    logits (vLLM sorts logits, not probabilities: float32 exp would tie logits that differ), the top-k
    cut, the softmax of the kept (x - max) / T (the full row's denominator cancels in the
    renormalisation), the top-p mask by cumsum, and searchsorted of the same uniforms in the cumulative
    kept mass (the same draw as reference)."""
    import torch

    top_k, top_p, temperature = _check(logits, top_k, top_p, temperature, uniforms)
    x = torch.as_tensor(logits, device="cuda")
    u = torch.as_tensor(uniforms, device="cuda")
    sx, si = torch.sort(x, dim=-1, descending=True, stable=True)
    sx = sx[:, :top_k]
    si = si[:, :top_k]
    sp = torch.softmax((sx - sx[:, :1]) / float(temperature), dim=-1)
    c = torch.cumsum(sp, dim=-1)
    total = c[:, -1:]
    below = (c < float(top_p) * total).sum(dim=-1, keepdim=True)
    keep = torch.clamp(below + 1, max=top_k)
    mask = torch.arange(top_k, device=x.device)[None, :] < keep
    ck = torch.cumsum(sp * mask, dim=-1)
    kept = torch.gather(ck, 1, keep - 1)
    pick = torch.searchsorted(ck.contiguous(), (u[:, None] * kept).contiguous(), right=True)
    pick = torch.minimum(pick, keep - 1)
    out = torch.gather(si, 1, pick).squeeze(1).to(torch.int32)
    return out.cpu().numpy() if isinstance(logits, np.ndarray) else cuda.as_cuda_array(out)
