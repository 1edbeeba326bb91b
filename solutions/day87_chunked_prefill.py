"""Day 87: chunked prefill -- long prompts cut into chunks that share each step with the decodes.

One engine step runs one attention launch over a mixed batch: sequence s brings q_len[s] new tokens
at the end of its context of ctx[s] tokens (their K/V already written into the paged cache). A decode
brings 1; a prefill chunk brings up to the step's token budget. New token i of sequence s sits at
position p = ctx[s] - q_len[s] + i and attends causally to tokens 0..p:

    out[row(s, i), h] = softmax(scale * q[row(s, i), h] . K[s, g, :p + 1]) @ V[s, g, :p + 1]

with g = h // (num_heads // num_kv_heads). The new tokens are packed: those of sequence s are rows
query_start[s] .. query_start[s + 1] - 1 of query, the varlen layout of FlashAttention.

Host side (graded by its own tests):
  OneShotScheduler  a waiting prompt is prefilled whole in one step, and that step runs no decodes:
                    every running request stalls while a long prompt goes through, and one long
                    prompt alone blows through the token budget.
  ChunkedScheduler  every step gives each decoding request its token first, then fills what is left
                    of the token budget with prompt chunks, oldest first: no decode ever waits and no
                    step is larger than the budget.

The day contract is the kernel of one mixed step:
  v1 naive      one warp per (new token, head): lanes split head_dim, a shfl_xor dot product per key,
                an online softmax; every warp reads its whole causal prefix of K/V from global
                memory, so the 16 neighbouring tokens of a chunk read the same rows 16 times.
  v2 optimized  one block per (query tile of 16 tokens of one sequence, head): the tile's queries wait
                in shared memory, 32 K/V rows at a time are staged there (float32, padded rows) and
                reused by all 16 queries; each warp owns 16 / NUM_WARPS queries and each lane one key
                (scores) or head_dim / 32 columns (P @ V); tiles run longest-context first.

Napkin math (BENCH_SIZES: 4 chunks of 512 prompt tokens at the end of 4096-token prompts plus 60
decodes at context 4096; 32 heads over 8 KV heads x 128, fp16 cache): the K/V the step must read is
64 * 4096 * 8 * 128 * 2 B * 2 = 1.07 GB, ~0.26 ms at ~4.1 TB/s. The work is 4 FLOPs per (query
token, key, head, dim): the chunks alone attend 4 * 512 * ~3840 keys * 32 heads * 512 = 129 GFLOP,
the decodes 4 GFLOP: ~125 FLOP/B, ten times past the FP32 ridge. Compute-bound: at the ~51 TFLOP/s
of cuBLAS FP32 the floor is ~2.6 ms. The naive kernel is instead bound by its shuffles and by L1/L2
re-reads; the tile divides the K/V reads by 16 and turns each row into 16 * 2 * head_dim FMAs.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from typing import NamedTuple

import numpy as np

from course import DEVICE, cuda, launch
from course.checking import to_host
from numba import float32
from solutions.day78_paged_attention_v1 import LIBRARY_RTOL, LOG2E, NO_LOGIT, dense_kv, paged_cache

TITLE = "Chunked prefill"
MEMORY_SPACE = "shared"
VERSIONS = ("naive", "optimized")
BOUND = "compute"
RTOL = 5e-4  # float32 softmax over at most a few dozen keys; a key too many or too few is off by far more
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)
VERSION_RTOL = {"library": LIBRARY_RTOL}  # the bench's re-check: SDPA computes in the cache's fp16

WARP = 32
MAX_HEAD_DIM = 128  # a lane holds head_dim / 32 columns of each of its queries in registers
MAX_COLS = MAX_HEAD_DIM // WARP
TILE_Q = 16  # optimized: query tokens per block, each staged K/V row serves all of them
KV_TILE = WARP  # optimized: K/V rows staged per trip, one per lane when scoring
NUM_WARPS = 2 if DEVICE.kind == "sim" else 4  # the simulator pays per thread
NAIVE_WARPS = 2  # naive: warps (one (token, head) each) per block


class Config(NamedTuple):
    """One mixed step for make_inputs. ``ragged``: sequence i brings (context, new tokens) cycling
    through (context, chunk), a decode, a first chunk (chunk, chunk), a one-token prompt (1, 1) and
    random ones (tests); otherwise the first ``prefills`` sequences bring a chunk of ``chunk`` tokens at
    the end of ``context`` and the rest decode at ``context`` (bench)."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    context: int
    chunk: int
    cache_dtype: str = "float16"
    prefills: int = 0
    ragged: bool = True


TEST_SIZES = (
    Config(4, 2, 1, 32, 8, 21, 17, "float32"),  # a chunk of a tile + 1 at context 21, a decode; 2 heads : 1
    Config(3, 2, 2, 32, 16, 24, 16, "float16"),  # a chunk of exactly one tile; a first chunk (16, 16)
    Config(2, 2, 2, 64, 4, 23, 5, "float16"),  # head_dim 64, pages of 4: a chunk spans two pages
)
BENCH_SIZES = (Config(64, 32, 8, 128, 16, 4096, 512, "float16", prefills=4, ragged=False),)


# --- the schedulers ---------------------------------------------------------------------------------


class Step(NamedTuple):
    """One engine step: row k computes tokens starts[k] .. starts[k] + q_lens[k] - 1 of request
    rids[k] (the new tokens of a chunk or a decode); ``outputs[k]`` is the output index the row's last
    token yields, or -1 for a chunk that does not reach the end of its prompt yet."""

    rids: list
    starts: list
    q_lens: list
    outputs: list

    @property
    def num_tokens(self) -> int:
        return sum(self.q_lens)


class _Base:
    """Request r has a prompt of prompt_lens[r] tokens and wants output_lens[r] outputs. Computing the
    last prompt token yields output 0; each later output costs one decode token, so a request computes
    prompt + output - 1 tokens in all. Pages for a request's whole length are reserved when it is
    admitted (day 86 shows growing them instead), so neither scheduler ever preempts."""

    def __init__(self, prompt_lens, output_lens, token_budget: int, num_blocks: int, block_size: int,
                 max_batch: int):
        self.prompt_lens = [int(n) for n in prompt_lens]
        self.output_lens = [int(n) for n in output_lens]
        self.token_budget, self.num_blocks = int(token_budget), int(num_blocks)
        self.block_size, self.max_batch = int(block_size), int(max_batch)
        if self.token_budget < self.max_batch:
            raise ValueError(f"token_budget ({token_budget}) must cover one decode token per batch row "
                             f"(max_batch {max_batch})")
        for r, (p, o) in enumerate(zip(self.prompt_lens, self.output_lens)):
            if p < 1 or o < 1:
                raise ValueError(f"request {r}: prompt and output lengths must be >= 1, got {p} and {o}")
            if self.pages(r) > self.num_blocks:
                raise ValueError(f"request {r} needs {self.pages(r)} pages, the pool has {num_blocks}")
        self.waiting = deque(range(len(self.prompt_lens)))
        self.running: list[int] = []  # admitted, oldest first
        self.computed = [0] * len(self.prompt_lens)  # tokens whose K/V are in the cache
        self.free_blocks = self.num_blocks
        self.num_steps = 0
        self.max_step_tokens = 0
        self.decode_stalls = 0  # (step, request) pairs where a decoding request got no token
        self.first_output_step = [-1] * len(self.prompt_lens)
        self.output_steps: list[list[int]] = [[] for _ in self.prompt_lens]

    def pages(self, rid) -> int:
        return -(-(self.prompt_lens[rid] + self.output_lens[rid]) // self.block_size)

    def total_tokens(self, rid) -> int:
        return self.prompt_lens[rid] + self.output_lens[rid] - 1

    def decoding(self, rid) -> bool:
        return self.computed[rid] >= self.prompt_lens[rid]

    def finished(self) -> bool:
        return not self.waiting and not self.running

    def _try_admit(self) -> bool:
        """The queue's head, first come first served, if a batch row and its pages are free."""
        if not self.waiting or len(self.running) >= self.max_batch or self.pages(self.waiting[0]) > self.free_blocks:
            return False
        rid = self.waiting.popleft()
        self.free_blocks -= self.pages(rid)
        self.running.append(rid)
        return True

    def _row(self, rows, rid, n) -> None:
        start = self.computed[rid]
        end = start + n
        out = end - self.prompt_lens[rid] if end >= self.prompt_lens[rid] else -1
        rows.append((rid, start, n, out))

    def _record(self, rows) -> Step:
        step = Step(*(list(c) for c in zip(*rows))) if rows else Step([], [], [], [])
        in_step = set(step.rids)
        self.decode_stalls += sum(1 for r in self.running if self.decoding(r) and r not in in_step)
        self.num_steps += 1
        self.max_step_tokens = max(self.max_step_tokens, step.num_tokens)
        return step

    def complete(self, step: Step) -> None:
        """The step ran: its tokens are in the cache, its outputs produced; finished requests leave."""
        for rid, n, out in zip(step.rids, step.q_lens, step.outputs):
            self.computed[rid] += n
            if out >= 0:
                self.output_steps[rid].append(self.num_steps)
                if out == 0:
                    self.first_output_step[rid] = self.num_steps
        for rid in [r for r in self.running if self.computed[r] == self.total_tokens(r)]:
            self.running.remove(rid)
            self.free_blocks += self.pages(rid)

    def stats(self) -> dict:
        gaps = [b - a for steps in self.output_steps for a, b in zip(steps, steps[1:])]
        return {"steps": self.num_steps, "max_step_tokens": self.max_step_tokens,
                "decode_stalls": self.decode_stalls, "max_output_gap": max(gaps, default=0),
                "mean_first_output_step": float(np.mean(self.first_output_step))}


class OneShotScheduler(_Base):
    """v1: prefill first. A step that admits requests prefills their whole prompts and nothing else;
    prompts are added while they fit the token budget, but the first always goes, however long."""

    def schedule(self) -> Step:
        rows, tokens = [], 0
        while self.waiting and (not rows or tokens + self.prompt_lens[self.waiting[0]] <= self.token_budget):
            if not self._try_admit():
                break
            rid = self.running[-1]
            self._row(rows, rid, self.prompt_lens[rid])
            tokens += self.prompt_lens[rid]
        if not rows:  # nothing to prefill: a decode step for everyone
            for rid in self.running:
                self._row(rows, rid, 1)
        return self._record(rows)


class ChunkedScheduler(_Base):
    """v2: decodes first, then prompt chunks under the token budget."""

    def schedule(self) -> Step:
        """Build the rows of one step (self._row(rows, rid, n) appends one) and return self._record(rows).

        1. every running request that is decoding (self.decoding(rid)) gets 1 token;
        2. running requests still in their prompt continue, oldest first, each with
           min(tokens of prompt left, budget left);
        3. while budget is left, self._try_admit() admits the queue's head (it becomes self.running[-1])
           with a first chunk of min(its prompt, budget left).
        """
        # EXERCISE: decodes first, then prompt chunks, then admissions, all under the token budget
        rows = []
        budget = self.token_budget
        # 1. Every decoding request gets its token: max_batch <= budget, so there is always room.
        for rid in self.running:
            if self.decoding(rid):
                self._row(rows, rid, 1)
                budget -= 1
        # 2. Prompts already started continue, oldest first, each as big a chunk as the budget allows.
        for rid in self.running:
            if budget > 0 and not self.decoding(rid):
                n = min(self.prompt_lens[rid] - self.computed[rid], budget)
                self._row(rows, rid, n)
                budget -= n
        # 3. What is left admits new requests, first come first served, with their first chunk.
        while budget > 0 and self._try_admit():
            rid = self.running[-1]
            n = min(self.prompt_lens[rid], budget)
            self._row(rows, rid, n)
            budget -= n
        return self._record(rows)


def simulate(scheduler) -> dict:
    """Run a scheduler to the end without any kernel: its steps and the latency they imply."""
    for _ in range(1_000_000):
        if scheduler.finished():
            return scheduler.stats()
        step = scheduler.schedule()
        if not step.rids:
            raise RuntimeError(f"{type(scheduler).__name__} scheduled an empty step with requests waiting")
        scheduler.complete(step)
    raise RuntimeError("the scheduler did not finish")


def schedule_report(num_requests=64, max_prompt=2048, max_output=256, token_budget=512, max_batch=32,
                    num_blocks=4096, block_size=16, seed=0) -> dict:
    """Both schedulers on one seeded trace (prompts 1..max_prompt, outputs 1..max_output tokens)."""
    rng = np.random.default_rng(seed)
    p = rng.integers(1, max_prompt + 1, size=num_requests)
    o = rng.integers(1, max_output + 1, size=num_requests)
    return {cls.__name__: simulate(cls(p, o, token_budget, num_blocks, block_size, max_batch))
            for cls in (OneShotScheduler, ChunkedScheduler)}


# --- inputs and the plain reference -------------------------------------------------------------------


def step_lengths(cfg: Config, rng) -> tuple[np.ndarray, np.ndarray]:
    """(q_lens, context_lens) int32 of the step's sequences; q_len <= context always."""
    if not cfg.ragged:
        q = np.where(np.arange(cfg.num_seqs) < cfg.prefills, cfg.chunk, 1)
        return q.astype(np.int32), np.full(cfg.num_seqs, cfg.context, dtype=np.int32)
    c, n = cfg.context, min(cfg.chunk, cfg.context)
    pattern = [(c, n), (int(rng.integers(1, c + 1)), 1), (n, n), (1, 1)]
    pairs = []
    for i in range(cfg.num_seqs):
        if i < len(pattern):
            pairs.append(pattern[i])
        else:
            q = int(rng.integers(1, n + 1))
            pairs.append((int(rng.integers(q, c + 1)), q))
    ctx, q = (np.array(col, dtype=np.int32) for col in zip(*pairs))
    return q, ctx


def step_inputs(q_lens, context_lens, cfg: Config, rng):
    """The kernel's inputs for given lengths: (query, key_cache, value_cache, block_tables,
    query_start, context_lens, scale). Pages are random and non-contiguous; every slot no sequence
    owns is NaN and unused block-table entries are garbage (day 78's paged_cache)."""
    q_lens = np.asarray(q_lens, dtype=np.int32)
    context_lens = np.asarray(context_lens, dtype=np.int32)
    dtype = np.dtype(cfg.cache_dtype)
    shape = (cfg.num_kv_heads, cfg.head_dim)
    keys = [rng.standard_normal((n, *shape), dtype=np.float32).astype(dtype) for n in context_lens]
    values = [rng.standard_normal((n, *shape), dtype=np.float32).astype(dtype) for n in context_lens]
    cfg = cfg._replace(context=int(context_lens.max()))
    key_cache, value_cache, tables = paged_cache(keys, values, cfg, rng)
    query_start = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)  # (num_seqs + 1,)
    query = rng.standard_normal((int(query_start[-1]), cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return query, key_cache, value_cache, tables, query_start, context_lens, 1.0 / math.sqrt(cfg.head_dim)


def make_inputs(cfg, seed=0):
    """(query, key_cache, value_cache, block_tables, query_start, context_lens, scale) for a Config."""
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    q_lens, ctx = step_lengths(cfg, rng)
    return step_inputs(q_lens, ctx, cfg, rng)


def reference(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """Gather each sequence's context through its block table, then a float64 causal softmax.

    Batched per sequence and KV head: all of the sequence's new tokens (and the heads that share the
    KV head) against its whole context in one matmul, with new token i masked to keys 0..pos(i); the
    same numbers as one token and one head at a time."""
    num_heads, head_dim = query.shape[1:]
    bs, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = np.empty(query.shape, dtype=np.float32)
    for s in range(len(context_lens)):
        ctx, q0, q1 = int(context_lens[s]), int(query_start[s]), int(query_start[s + 1])
        n, t = q1 - q0, np.arange(ctx)
        pages, slots = block_tables[s, t // bs], t % bs  # token t's page and slot
        k = key_cache[pages, slots].astype(np.float64)  # (ctx, kv_heads, dim)
        v = value_cache[pages, slots].astype(np.float64)
        pos = ctx - n + np.arange(n)  # each new token's place in its sequence: it sees 0..pos
        hidden = np.repeat(t[None, :] > pos[:, None], group, axis=0)  # a row per (new token, head of the group)
        for g in range(num_kv_heads):
            heads = slice(g * group, (g + 1) * group)  # the heads that read KV head g
            q = query[q0:q1, heads].astype(np.float64).reshape(n * group, head_dim)
            logits = scale * (q @ k[:, g].T)  # (n * group, ctx)
            logits[hidden] = -np.inf
            w = np.exp(logits - logits.max(axis=-1, keepdims=True))
            w /= w.sum(axis=-1, keepdims=True)
            out[q0:q1, heads] = (w @ v[:, g]).reshape(n, group, head_dim)
    return out


def traffic(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """(minimum bytes, FLOPs): each sequence's K/V once, queries and outputs once; 4 FLOPs per (new
    token, visible key, head, dim)."""
    qs, ctx = to_host(query_start).astype(np.int64), to_host(context_lens).astype(np.int64)
    q_lens = np.diff(qs)
    num_heads, head_dim = query.shape[1:]
    kv_bytes = 2 * int(ctx.sum()) * key_cache.shape[2] * head_dim * np.dtype(key_cache.dtype).itemsize
    visible = int(np.sum(q_lens * (ctx - q_lens) + q_lens * (q_lens + 1) // 2))  # sum over tokens of pos + 1
    return kv_bytes + 2 * query.size * 4 + block_tables.size * 4, 4 * visible * num_heads * head_dim


# --- validation ----------------------------------------------------------------------------------------


def check_inputs(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """ValueError, before any launch, unless the inputs describe a valid mixed step. Contents of
    query_start, context_lens and block_tables are checked when they are NumPy arrays."""
    launch.check_array("query", query, dtype=np.float32, ndim=3)
    launch.check_array("key_cache", key_cache, dtype=(np.float32, np.float16), ndim=4)
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    total_q, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_dim = key_cache.shape
    if cache_dim != head_dim:
        raise ValueError(f"key_cache: expected head_dim {head_dim} (from query), got {cache_dim}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if head_dim % WARP or not 0 < head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be a multiple of {WARP} up to {MAX_HEAD_DIM}, got {head_dim}")
    launch.check_array("block_tables", block_tables, dtype=np.int32, ndim=2)
    num_seqs = block_tables.shape[0]
    launch.check_array("query_start", query_start, dtype=np.int32, shape=(num_seqs + 1,))
    launch.check_array("context_lens", context_lens, dtype=np.int32, shape=(num_seqs,))
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    if isinstance(query_start, np.ndarray) and isinstance(context_lens, np.ndarray):
        q_lens = np.diff(query_start)
        if query_start[0] != 0 or query_start[-1] != total_q:
            raise ValueError(f"query_start: expected 0 .. {total_q} (the rows of query), got "
                             f"{int(query_start[0])} .. {int(query_start[-1])}")
        capacity = block_tables.shape[1] * block_size
        bad = np.flatnonzero((q_lens < 1) | (q_lens > context_lens) | (context_lens > capacity))
        if bad.size:
            s = int(bad[0])
            raise ValueError(f"sequence {s}: {int(q_lens[s])} new tokens in a context of {int(context_lens[s])}: "
                             f"expected 1 <= new tokens <= context <= {capacity} (the block table's capacity)")
        if isinstance(block_tables, np.ndarray):
            for s in range(num_seqs):
                used = block_tables[s, :-(-int(context_lens[s]) // block_size)]
                out = np.flatnonzero((used < 0) | (used >= num_blocks))
                if out.size:
                    i = int(out[0])
                    raise ValueError(f"block_tables[{s}, {i}] = {int(used[i])}: not a block of the cache "
                                     f"(0..{num_blocks - 1})")


# --- v1 naive: one warp per (new token, head) ----------------------------------------------------------


@cuda.jit(fastmath=True)
def prefill_naive_kernel(out, query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """One warp per (new token, head): warp_id = global thread id // 32 -> row = warp_id // num_heads,
    head = warp_id % num_heads; whole warps past total_q * num_heads return.

    - The row's sequence: binary search for the last s with query_start[s] <= row. Its position is
      pos = ctx - q_len + (row - query_start[seq]); it attends to tokens 0..pos (causal).
    - Lane owns columns d = e * 32 + lane, e < MAX_COLS (guard d < head_dim): keep q * scale and the
      accumulator in cuda.local.array(MAX_COLS, float32) with constant-trip loops (registers).
    - Per token t: K row at block_tables[seq, t // block_size], row t % block_size; a partial dot
      product per lane, summed with shfl_xor_sync over 16, 8, 4, 2, 1; an online softmax with running
      max m (start at NO_LOGIT) and sum l, rescaled by exp2(m - m_new). scale includes log2(e): exp2.
    - Write out[row, head, d] = acc / l.
    """
    # EXERCISE: find the row's sequence and position, then a shfl_xor dot product + online softmax per key
    warp_id = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // WARP
    lane = cuda.threadIdx.x % WARP
    total_q, num_heads, head_dim = query.shape
    if warp_id >= total_q * num_heads:
        return  # whole warps leave together: the shuffles below always see 32 lanes
    row = warp_id // num_heads
    head = warp_id % num_heads
    # The row's sequence: the last s with query_start[s] <= row (binary search, uniform per warp).
    lo = 0
    hi = context_lens.shape[0]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if query_start[mid] <= row:
            lo = mid
        else:
            hi = mid
    seq = lo
    ctx = context_lens[seq]
    pos = ctx - (query_start[seq + 1] - query_start[seq]) + (row - query_start[seq])
    block_size = key_cache.shape[1]
    kv_head = head // (num_heads // key_cache.shape[2])

    # Lane owns columns lane, lane + 32, ...: every load of a row is 32 consecutive elements.
    q = cuda.local.array(MAX_COLS, float32)
    acc = cuda.local.array(MAX_COLS, float32)
    for e in range(MAX_COLS):  # constant trip count: unrolled, the arrays stay in registers
        d = e * WARP + lane
        q[e] = query[row, head, d] * scale if d < head_dim else float32(0.0)
        acc[e] = 0.0
    m = float32(NO_LOGIT)
    l = float32(0.0)
    for t in range(pos + 1):  # causal: this token sees itself and everything before it
        block = block_tables[seq, t // block_size]
        r = t % block_size
        s = float32(0.0)
        for e in range(MAX_COLS):
            d = e * WARP + lane
            if d < head_dim:
                s += q[e] * float32(key_cache[block, r, kv_head, d])
        for o in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(0xFFFFFFFF, s, o)
        m_new = max(m, s)
        c = math.exp2(m - m_new)
        p = math.exp2(s - m_new)
        l = l * c + p
        for e in range(MAX_COLS):
            d = e * WARP + lane
            if d < head_dim:
                acc[e] = acc[e] * c + p * float32(value_cache[block, r, kv_head, d])
        m = m_new
    for e in range(MAX_COLS):
        d = e * WARP + lane
        if d < head_dim:
            out[row, head, d] = acc[e] / l


# --- v2 optimized: one block per (16-token query tile, head), K/V staged in shared memory ----------------


@functools.cache
def prefill_kernel(head_dim: int):
    """The optimized kernel for one head_dim: the shared tiles get fixed shapes and every per-lane
    loop unrolls, so the query/accumulator arrays stay in registers."""
    HD = head_dim
    VEC = HD // WARP  # columns a lane owns in P @ V: lane, lane + 32, ...
    QPW = TILE_Q // NUM_WARPS  # queries a warp owns
    ACC = QPW * VEC  # accumulator registers per lane: (QPW, VEC)
    NT = NUM_WARPS * WARP
    ROW = HD + 1  # padded K/V rows: lane j reading row j, column d hits bank (j + d) % 32, no conflicts

    @cuda.jit(fastmath=True)
    def prefill_tiled_kernel(out, query, key_cache, value_cache, block_tables, query_start, context_lens,
                             tiles, scale):
        """One block per (head = blockIdx.x, tile = blockIdx.y): tiles[tile] = (seq, t0), the tile's
        first new token within its sequence; NUM_WARPS warps; scale includes log2(e).

        - past = ctx - q_len; the tile has n_q = min(TILE_Q, q_len - t0) tokens and needs keys
          0 .. n_keys - 1 with n_keys = past + t0 + n_q.
        - Stage the tile's queries (times scale) into cuda.shared.array((TILE_Q, HD), float32), zeros
          past n_q. Warp w owns queries w * QPW .. w * QPW + QPW - 1: m, l, s and acc (ACC = QPW * VEC)
          in cuda.local.array.
        - Per trip of KV_TILE keys from k0: syncthreads; stage K and V rows (float32, padded rows of
          ROW = HD + 1) with consecutive threads on consecutive columns, zeros for rows >= n_keys (never
          read them); syncthreads.
        - Scores: lane j computes key k0 + j for each of the warp's queries from shared memory; mask
          key > position to -inf; warp max and sum by shfl_xor_sync; online-softmax update; write p to
          cuda.shared.array((NUM_WARPS, QPW, KV_TILE), float32); syncwarp.
        - P @ V: lane owns columns e * 32 + lane: acc[qq, e] += p[qq, j] * V[j, col] over the trip's keys.
        - Finally out[q0 + t0 + r, head, col] = acc / l for the warp's rows r < n_q.
        """
        # EXERCISE: stage the query tile; per trip of 32 keys: K/V between two syncthreads, causal scores, P @ V
        head = cuda.blockIdx.x
        seq = tiles[cuda.blockIdx.y, 0]
        t0 = tiles[cuda.blockIdx.y, 1]  # the tile's first new token, counted within its sequence
        tid = cuda.threadIdx.x
        warp = tid // WARP
        lane = tid % WARP
        q0 = query_start[seq]
        q_len = query_start[seq + 1] - q0
        past = context_lens[seq] - q_len  # tokens before this step's new ones
        n_q = min(TILE_Q, q_len - t0)
        n_keys = past + t0 + n_q  # the tile's last token sees keys 0 .. n_keys - 1, nothing later
        block_size = key_cache.shape[1]
        kv_head = head // (query.shape[1] // key_cache.shape[2])

        q_sh = cuda.shared.array((TILE_Q, HD), float32)  # read as broadcasts: one address per warp
        k_sh = cuda.shared.array((KV_TILE, ROW), float32)
        v_sh = cuda.shared.array((KV_TILE, ROW), float32)
        p_sh = cuda.shared.array((NUM_WARPS, QPW, KV_TILE), float32)  # each warp's probabilities
        for i in range(tid, TILE_Q * HD, NT):
            r = i // HD
            q_sh[r, i % HD] = query[q0 + t0 + r, head, i % HD] * scale if r < n_q else float32(0.0)

        acc = cuda.local.array(ACC, float32)  # (QPW, VEC)
        m = cuda.local.array(QPW, float32)
        l = cuda.local.array(QPW, float32)
        s = cuda.local.array(QPW, float32)
        for qq in range(QPW):
            m[qq] = NO_LOGIT  # finite: a query with every key of a trip masked rescales by exp2(0) = 1
            l[qq] = 0.0
            for e in range(VEC):
                acc[qq * VEC + e] = 0.0
        my_pos = past + t0 + warp * QPW  # position of the warp's first query

        for k0 in range(0, n_keys, KV_TILE):
            cuda.syncthreads()  # every warp is done with the previous trip's rows before they change
            # Stage KV_TILE rows: consecutive threads take consecutive columns of a row, so each warp
            # load is one contiguous run. Rows past n_keys are never read from the cache (they may
            # be NaN, and NaN * 0 is NaN): zeros, masked below.
            for i in range(tid, KV_TILE * HD, NT):
                r = i // HD
                d = i % HD
                t = k0 + r
                if t < n_keys:
                    block = block_tables[seq, t // block_size]
                    k_sh[r, d] = float32(key_cache[block, t % block_size, kv_head, d])
                    v_sh[r, d] = float32(value_cache[block, t % block_size, kv_head, d])
                else:
                    k_sh[r, d] = 0.0
                    v_sh[r, d] = 0.0
            cuda.syncthreads()

            # Scores: lane j takes key k0 + j for all the warp's queries; each K element loaded
            # from shared memory feeds QPW FMAs.
            for qq in range(QPW):
                s[qq] = 0.0
            for d in range(HD):
                kd = k_sh[lane, d]
                for qq in range(QPW):
                    s[qq] += q_sh[warp * QPW + qq, d] * kd
            for qq in range(QPW):
                x = s[qq] if k0 + lane <= my_pos + qq else -math.inf  # the causal mask
                mx = x
                for o in (16, 8, 4, 2, 1):
                    mx = max(mx, cuda.shfl_xor_sync(0xFFFFFFFF, mx, o))
                m_new = max(m[qq], mx)
                p = math.exp2(x - m_new)
                ps = p
                for o in (16, 8, 4, 2, 1):
                    ps += cuda.shfl_xor_sync(0xFFFFFFFF, ps, o)
                c = math.exp2(m[qq] - m_new)
                l[qq] = l[qq] * c + ps
                m[qq] = m_new
                for e in range(VEC):
                    acc[qq * VEC + e] *= c
                p_sh[warp, qq, lane] = p
            cuda.syncwarp()  # the warp's probabilities are visible to all its lanes
            # P @ V: lane owns columns lane + 32 e; each V element loaded feeds QPW FMAs.
            for j in range(KV_TILE):
                for e in range(VEC):
                    vd = v_sh[j, e * WARP + lane]
                    for qq in range(QPW):
                        acc[qq * VEC + e] += p_sh[warp, qq, j] * vd

        for qq in range(QPW):
            r = warp * QPW + qq
            if r < n_q:
                inv = 1.0 / l[qq]
                for e in range(VEC):
                    out[q0 + t0 + r, head, e * WARP + lane] = acc[qq * VEC + e] * inv

    return prefill_tiled_kernel


_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
        "int32[:, ::1], int32[::1], int32[::1], float32)")
SIG_TILED = ("void(float32[:, :, ::1], float32[:, :, ::1], float16[:, :, :, ::1], float16[:, :, :, ::1], "
              "int32[:, ::1], int32[::1], int32[::1], int32[:, ::1], float32)")
KERNELS = {
    "naive": (prefill_naive_kernel, _SIG),
    "optimized": (prefill_kernel(128), SIG_TILED),  # the benchmark's head_dim
}


def tile_list(query_start, context_lens) -> np.ndarray:
    """(num_tiles, 2) int32: (sequence, first new token) of every 16-token query tile, the tiles
    that see the most keys first, so the longest blocks do not start last and leave SMs idle at the end."""
    qs, ctx = to_host(query_start).astype(np.int64), to_host(context_lens).astype(np.int64)
    tiles, work = [], []
    for s in range(len(ctx)):
        q_len = int(qs[s + 1] - qs[s])
        for t0 in range(0, q_len, TILE_Q):
            tiles.append((s, t0))
            work.append(int(ctx[s]) - q_len + min(q_len, t0 + TILE_Q))
    order = np.argsort(-np.array(work), kind="stable")
    return np.ascontiguousarray(np.array(tiles, dtype=np.int32).reshape(-1, 2)[order])


def naive(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    check_inputs(query, key_cache, value_cache, block_tables, query_start, context_lens, scale)
    args = launch.to_device(query, key_cache, value_cache, block_tables, query_start, context_lens)
    out = launch.empty(query.shape, np.float32)  # (total_q, num_heads, head_dim)
    warps = query.shape[0] * query.shape[1]
    grid = launch.blocks(warps, NAIVE_WARPS)
    prefill_naive_kernel[grid, NAIVE_WARPS * WARP](out, *args, float32(scale * LOG2E))
    return launch.result(out, query, key_cache)


def optimized(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """The tile list is built on the host from query_start and context_lens: a serving engine has them
    there already (its scheduler wrote them); device arrays are read back (a few hundred bytes)."""
    check_inputs(query, key_cache, value_cache, block_tables, query_start, context_lens, scale)
    tiles = tile_list(query_start, context_lens)
    out = launch_prefill(query, key_cache, value_cache, *launch.to_device(block_tables, query_start, context_lens,
                                                                          tiles), scale)
    return launch.result(out, query, key_cache)


def launch_prefill(query, key_cache, value_cache, block_tables, query_start, context_lens, tiles, scale):
    """The tiled kernel on checked inputs and their tile_list; returns the output (a device array). A serving
    engine that runs every layer over the same step uploads the tables, lengths and tiles once (day 90)."""
    q, kc, vc = launch.to_device(query, key_cache, value_cache)
    out = launch.empty(query.shape, np.float32)
    kernel = prefill_kernel(query.shape[2])
    grid = (query.shape[1], tiles.shape[0])  # heads fastest: a GQA group's heads read the same rows together
    kernel[grid, NUM_WARPS * WARP](out, q, kc, vc, block_tables, query_start, context_lens, tiles,
                                   float32(scale * LOG2E))
    return out


# --- the library row: PyTorch's fused attention on a dense copy, one call per chunk length -------------


def library(query, key_cache, value_cache, block_tables, query_start, context_lens, scale):
    """torch.nn.functional.scaled_dot_product_attention(enable_gqa=True) over day 78's dense gather of
    the cache, one call per distinct number of new tokens (decodes together, equal chunks together)."""
    import torch

    k, v, _ = dense_kv(key_cache, value_cache, block_tables, context_lens)  # (seqs, kv_heads, max_ctx, dim)
    qs, ctx = to_host(query_start).astype(np.int64), to_host(context_lens).astype(np.int64)
    q_lens = np.diff(qs)
    q_all = torch.as_tensor(query, device="cuda")
    out = torch.empty_like(q_all)
    for n in np.unique(q_lens):
        seqs = np.flatnonzero(q_lens == n)
        rows = torch.as_tensor(qs[seqs][:, None] + np.arange(n)[None, :], device="cuda")  # (b, n)
        q = q_all[rows].permute(0, 2, 1, 3).to(k.dtype)  # (b, heads, n, dim)
        pos = torch.as_tensor(ctx[seqs][:, None] - n + np.arange(n)[None, :], device="cuda")  # (b, n)
        keys = torch.arange(k.shape[2], device="cuda")
        mask = keys[None, None, :] <= pos[:, :, None]  # (b, n, max_ctx): causal within each context
        idx = torch.as_tensor(seqs, device="cuda")
        o = torch.nn.functional.scaled_dot_product_attention(q, k[idx], v[idx], attn_mask=mask[:, None],
                                                             scale=float(scale), enable_gqa=True)
        out[rows] = o.permute(0, 2, 1, 3).float()
    return out.cpu().numpy() if isinstance(query, np.ndarray) else cuda.as_cuda_array(out)
