"""Day 86: continuous batching -- admit and retire requests every step, not every batch.

A serving engine decodes many requests at once: one step appends one token to every sequence of the
batch and runs one PagedAttention launch over all of them. Requests differ wildly in length, so how
the batch is formed decides how much of each launch is useful work.

Host side (graded by its own tests):
  StaticScheduler  the batch is fixed when it starts: up to max_batch waiting requests whose whole
                   reservation (prompt + output) fits the block budget. It runs until its longest
                   member is done; finished members keep their slot (a padded, wasted row of the
                   launch) and their pages until then.
  Scheduler        iteration-level: every step retires finished requests (their pages return at
                   once), grows each running request by one token, preempts the newest request by
                   recompute when a page is missing, and admits waiting requests, first come first
                   served, while the batch has room and the free pages cover their prompts plus one
                   page of headroom per running sequence.

The day contract serves a whole trace of requests; every step moves the new K/V rows into their
slots, gathers the batch's queries, runs day 78's PagedAttention over the batch's block tables and
scatters the outputs back. The one day-specific kernel, move_rows_kernel, does the three data
movements: one warp per row, 8-byte words, coalesced on both sides.
  v1 naive      serve(StaticScheduler): padded rows, late retirement, whole-request reservations.
  v2 optimized  serve(Scheduler): every launched row is a live request, pages return on the step a
                request finishes, and the batch is refilled from the queue on the next.
Batching must not change any request's numbers: both versions return exactly the per-token outputs
of the plain reference.

Napkin math (BENCH_SIZES: 256 requests, prompts 1..1024, outputs 1..128 tokens, 8 KV heads x 128,
fp16, 128 slots, 2048 pages of 16 tokens = a 268 MB pool): a token's K and V are 4 KB. Serving the
trace reads ~41 GB of K/V in attention, ~10 ms at ~4.1 TB/s, spread over several hundred steps. With
outputs uniform in 1..128 a static batch's rows are live about half the time it runs (the rest is
padding behind its longest member), and full-length reservations keep requests waiting that the
pool could already hold. schedule_report() counts 637 static steps against 400 continuous ones,
every continuous row live (at outputs of 1..256: 1,527 against 831).
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

from course import DEVICE, cuda, launch
from course.checking import to_host
from course.launch import as_words
from solutions.day76_block_tables import BlockManager, OutOfBlocksError
from solutions.day78_paged_attention_v1 import KERNELS as PAGED_ATTENTION_KERNELS
from solutions.day78_paged_attention_v1 import optimized as paged_attention

TITLE = "Continuous batching"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
ERROR_FLOOR = 1e-2  # attention outputs average many rows towards zero (course.checking: the floor)
WARP = 32
ROWS_PER_BLOCK = 1 if DEVICE.kind == "sim" else 4  # one warp per row; the simulator pays per thread

__all__ = ["OutOfBlocksError", "Scheduler", "StaticScheduler"]


class Config(NamedTuple):
    """A trace of ``num_requests`` requests, all waiting at step 0, with prompts of 1..max_prompt and
    outputs of 1..max_output tokens, served under ``num_blocks`` pages and ``max_batch`` slots."""

    num_requests: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    max_prompt: int
    max_output: int
    num_blocks: int
    max_batch: int
    cache_dtype: str = "float16"


TEST_SIZES = (
    Config(5, 1, 1, 32, 4, 7, 5, 7, 3, "float16"),  # the budget, not the slots, limits the batch
    Config(4, 2, 1, 32, 8, 10, 4, 12, 2, "float32"),  # two slots: a static batch waits for its longest
)
# Outputs to 128, not 256: each version's call of the trace is a few hundred steps of host work, and
# the benchmark (inputs, reference, warm-up and three samples of both) has to fit a minute of a visit.
BENCH_SIZES = (Config(256, 32, 8, 128, 16, 1024, 128, 2048, 128, "float16"),)


# --- the schedulers ---------------------------------------------------------------------------------


class Batch(NamedTuple):
    """One engine step. ``rids``: the request in each row of the launch; ``steps``: the output index
    each row computes, or -1 for a padded row (a finished request still sitting in a static batch);
    ``writes``: (request, token index, slot) K/V rows to store before attending."""

    rids: list
    steps: list
    writes: list


class _Base:
    def __init__(self, prompt_lens, output_lens, num_blocks: int, block_size: int, max_batch: int):
        self.prompt_lens = [int(n) for n in prompt_lens]
        self.output_lens = [int(n) for n in output_lens]
        self.manager = BlockManager(num_blocks, block_size)
        self.max_batch = int(max_batch)
        self.waiting = deque(range(len(self.prompt_lens)))  # first come, first served
        self.running: list[int] = []
        self.done = [0] * len(self.prompt_lens)  # outputs produced per request
        self.finish_step = [-1] * len(self.prompt_lens)
        self.num_steps = 0
        self.preemptions = 0
        self.peak_blocks = 0
        self.launched_rows = 0
        self.useful_rows = 0
        for r, (p, o) in enumerate(zip(self.prompt_lens, self.output_lens)):
            if p < 1 or o < 1:
                raise ValueError(f"request {r}: prompt and output lengths must be >= 1, got {p} and {o}")
            if self.manager.blocks_for(p + o) > num_blocks:
                raise ValueError(f"request {r} needs {self.manager.blocks_for(p + o)} blocks at full length; "
                                 f"the budget is {num_blocks}: it could never finish")

    def finished(self) -> bool:
        return not self.waiting and not self.running

    def _record(self, batch: Batch) -> Batch:
        self.num_steps += 1
        self.launched_rows += len(batch.rids)
        self.useful_rows += sum(j >= 0 for j in batch.steps)
        self.peak_blocks = max(self.peak_blocks, self.manager.num_blocks - self.manager.num_free_blocks)
        return batch

    def complete(self, batch: Batch) -> None:
        """The step ran: every live row produced its output."""
        for rid, j in zip(batch.rids, batch.steps):
            if j >= 0:
                self.done[rid] += 1
                if self.done[rid] == self.output_lens[rid]:
                    self.finish_step[rid] = self.num_steps

    def _admit_rows(self, rid) -> list:
        """Allocate a request's prompt plus the tokens it had produced (a recompute after preemption)
        plus this step's token, and list the rows to write."""
        n = self.prompt_lens[rid] + self.done[rid] + 1
        self.manager.allocate(rid, n)
        return [(rid, t, slot) for t, slot in enumerate(self.manager.slot_mapping(rid))]

    def stats(self) -> dict:
        return {"steps": self.num_steps, "launched_rows": self.launched_rows, "useful_rows": self.useful_rows,
                "row_utilization": self.useful_rows / max(1, self.launched_rows),
                "peak_blocks": self.peak_blocks, "preemptions": self.preemptions,
                "mean_finish_step": float(np.mean(self.finish_step))}


class StaticScheduler(_Base):
    """v1: request-level batching. The batch is formed once and runs until its longest member ends."""

    def schedule(self) -> Batch:
        if not self.running:  # form a batch: reserve every member's full length (no preemption)
            reserved = 0
            while self.waiting and len(self.running) < self.max_batch:
                r = self.waiting[0]
                reserved += self.manager.blocks_for(self.prompt_lens[r] + self.output_lens[r])
                if reserved > self.manager.num_blocks:
                    break
                self.running.append(self.waiting.popleft())
            writes = [w for r in self.running for w in self._admit_rows(r)]
        else:
            writes = []
            for r in self.running:
                if self.done[r] < self.output_lens[r]:
                    slot = self.manager.append_slot(r)
                    writes.append((r, self.manager.num_tokens(r) - 1, slot))
        # A finished member keeps its row (padding) and its pages until the batch's longest ends.
        steps = [self.done[r] if self.done[r] < self.output_lens[r] else -1 for r in self.running]
        return self._record(Batch(list(self.running), steps, writes))

    def complete(self, batch: Batch) -> None:
        super().complete(batch)
        if all(self.done[r] == self.output_lens[r] for r in self.running):
            for r in self.running:  # the whole batch leaves together, only now
                self.manager.free(r)
            self.running = []


class Scheduler(_Base):
    """v2: iteration-level batching under a block budget."""

    def schedule(self) -> Batch:
        """One step's batch, in three phases:

        1. grow: every running request, oldest first, gets a slot for this step's token
           (self.manager.append_slot) and a write (rid, token index, slot); when OutOfBlocksError is
           raised, preempt the newest running request (self._preempt(self.running[-1])), which may be
           the request itself, and retry;
        2. admit, first come first served, while len(self.running) < self.max_batch and the head of
           self.waiting fits: blocks_for(prompt + done + 1) plus one page of headroom per running
           request must not exceed the free pages; self._admit_rows(r) allocates and lists its writes;
        3. return self._record(Batch(running rids, their output index self.done[r], writes)).
        Every row is live: finished requests left in complete().
        """
        # EXERCISE: grow each running request (preempt the newest on OutOfBlocksError), then admit FCFS
        # Grow every running request by this step's token, oldest first; when no page is left, the
        # newest request is preempted (its pages freed, recomputed on readmission), maybe itself.
        writes = []
        for r in list(self.running):
            while r in self.running:
                try:
                    slot = self.manager.append_slot(r)
                except OutOfBlocksError:
                    self._preempt(self.running[-1])
                    continue
                writes.append((r, self.manager.num_tokens(r) - 1, slot))
                break
        # Admit, first come first served: a slot, the request's pages, and one page of headroom per
        # running request (each may open a page next step) so admission does not force a preemption.
        while self.waiting and len(self.running) < self.max_batch:
            r = self.waiting[0]
            need = self.manager.blocks_for(self.prompt_lens[r] + self.done[r] + 1)
            if need + len(self.running) > self.manager.num_free_blocks:
                break
            self.waiting.popleft()
            writes += self._admit_rows(r)
            self.running.append(r)
        return self._record(Batch(list(self.running), [self.done[r] for r in self.running], writes))

    def complete(self, batch: Batch) -> None:
        """The step ran: count the outputs (super().complete), then retire every running request that
        has all its outputs: free its pages and drop it from self.running, now, not when others end."""
        # EXERCISE: super().complete(batch), then free and remove each finished running request
        super().complete(batch)
        # Retire: a finished request leaves at once; its pages are free for the very next step.
        for r in [r for r in self.running if self.done[r] == self.output_lens[r]]:
            self.manager.free(r)
            self.running.remove(r)

    def _preempt(self, rid) -> None:
        self.manager.free(rid)
        self.running.remove(rid)
        self.waiting.appendleft(rid)
        self.preemptions += 1


def simulate(scheduler) -> dict:
    """Run a scheduler to the end without any kernel: the step counts and memory it would use."""
    while not scheduler.finished():
        scheduler.complete(scheduler.schedule())
    return scheduler.stats()


# --- the day contract: serve a trace ------------------------------------------------------------------


def trace_lengths(cfg: Config, rng) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths (int32) of the trace's requests, uniform in 1..max."""
    prompts = rng.integers(1, cfg.max_prompt + 1, size=cfg.num_requests).astype(np.int32)
    outputs = rng.integers(1, cfg.max_output + 1, size=cfg.num_requests).astype(np.int32)
    outputs[0] = cfg.max_output  # one long request: the one a static batch waits for
    return prompts, outputs


def make_inputs(cfg, seed: int = 0):
    """(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch).

    Request r has prompt_lens[r] + output_lens[r] tokens: kv_rows (2, total_rows, num_kv_heads,
    head_dim) holds their K and V in request order, and queries (total_outputs, num_heads, head_dim)
    the query of each output step, in request order. Output step j of request r appends the K/V of
    token prompt_lens[r] + j and attends over tokens 0..prompt_lens[r] + j.
    """
    cfg = Config(*cfg)
    rng = np.random.default_rng(seed)
    prompts, outputs = trace_lengths(cfg, rng)
    rows = int(np.sum(prompts + outputs))
    dtype = np.dtype(cfg.cache_dtype)
    kv = rng.standard_normal((2, rows, cfg.num_kv_heads, cfg.head_dim), dtype=np.float32).astype(dtype)
    queries = rng.standard_normal((int(outputs.sum()), cfg.num_heads, cfg.head_dim), dtype=np.float32)
    return (queries, kv, prompts, outputs, 1.0 / math.sqrt(cfg.head_dim), cfg.num_blocks, cfg.block_size,
            cfg.max_batch)


def _offsets(lens) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def reference(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    """Each request alone against a plain contiguous float64 cache: batching must not matter.

    Batched per request and KV head: the queries of all of a request's output steps (and of the heads
    that share the KV head) against its whole K/V in one matmul, a causal mask (step j sees tokens
    0..prompt + j) and one softmax; the same numbers as one step and one head at a time."""
    num_heads, head_dim = queries.shape[1:]
    num_kv_heads = kv_rows.shape[2]
    group = num_heads // num_kv_heads
    row0, out0 = _offsets(prompt_lens + output_lens), _offsets(output_lens)
    out = np.empty(queries.shape, dtype=np.float32)
    for r, (p, o) in enumerate(zip(prompt_lens, output_lens)):
        k = kv_rows[0, row0[r]:row0[r + 1]].astype(np.float64)  # (tokens, kv_heads, dim): the request's cache
        v = kv_rows[1, row0[r]:row0[r + 1]].astype(np.float64)
        q = queries[out0[r]:out0[r] + o].astype(np.float64)  # (o steps, heads, dim)
        hidden = np.arange(p + o)[None, :] > p + np.arange(o)[:, None]  # (o, tokens): step j sees 0..p + j
        hidden = np.repeat(hidden, group, axis=0)  # a row per (step, head of the group)
        for g in range(num_kv_heads):
            heads = slice(g * group, (g + 1) * group)  # the heads that read KV head g
            logits = scale * (q[:, heads].reshape(o * group, head_dim) @ k[:, g].T)  # (o * group, tokens)
            logits[hidden] = -np.inf
            w = np.exp(logits - logits.max(axis=-1, keepdims=True))
            w /= w.sum(axis=-1, keepdims=True)
            out[out0[r]:out0[r] + o, heads] = (w @ v[:, g]).reshape(o, group, head_dim)
    return out


def traffic(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    """The minimum: every output step reads its context's K/V once; rows and queries moved once."""
    p, o = to_host(prompt_lens).astype(np.int64), to_host(output_lens).astype(np.int64)
    token_bytes = 2 * int(np.prod(kv_rows.shape[2:])) * np.dtype(kv_rows.dtype).itemsize
    attended = int(np.sum(o * p + o * (o + 1) // 2))  # sum over steps j of (p + j + 1)
    heads, dim = queries.shape[1:]
    return attended * token_bytes + 2 * kv_rows.nbytes + 2 * queries.nbytes, 4 * attended * heads * dim


@cuda.jit
def move_rows_kernel(src, src_rows, dst, dst_rows):
    """Row i of the plan copies src[src_rows[i]] to dst[dst_rows[i]]; src (n_src, words) and dst
    (n_dst, words) are 8-byte words. One warp per row: row i = blockIdx.x * warps per block + warp;
    lane l moves words l, l + 32, l + 64, ... Rows past src_rows.shape[0] do nothing. Two words per
    lane per trip, both loads issued before either store, then the last word.
    """
    # src: (n_src, words), dst: (n_dst, words); row i of the plan copies src[src_rows[i]] to
    # dst[dst_rows[i]]. One warp per row: the two index loads are one broadcast each, and the 32
    # lanes move 256 contiguous bytes per instruction on both sides.
    # EXERCISE: find this warp's row and lane, then copy the row's words in steps of 32
    lane = cuda.threadIdx.x % WARP
    i = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
    if i >= src_rows.shape[0]:
        return
    s = src_rows[i]
    d = dst_rows[i]
    words = src.shape[1]
    w = lane
    # Two words per lane per trip, both loads before either store: more bytes in flight per warp.
    while w + WARP < words:
        a0 = src[s, w]
        a1 = src[s, w + WARP]
        dst[d, w] = a0
        dst[d, w + WARP] = a1
        w += 2 * WARP
    if w < words:
        dst[d, w] = src[s, w]


_MOVE_SIG = "void(uint64[:, ::1], int64[::1], uint64[:, ::1], int64[::1])"
KERNELS = {
    "naive.move_rows": (move_rows_kernel, _MOVE_SIG),
    "naive.attention": PAGED_ATTENTION_KERNELS["optimized"],
    "optimized.move_rows": (move_rows_kernel, _MOVE_SIG),
    "optimized.attention": PAGED_ATTENTION_KERNELS["optimized"],
}


def _check(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    launch.check_array("queries", queries, dtype=np.float32, ndim=3)
    launch.check_array("kv_rows", kv_rows, dtype=(np.float16, np.float32), ndim=4)
    launch.check_array("prompt_lens", prompt_lens, dtype=np.int32, ndim=1)
    launch.check_array("output_lens", output_lens, dtype=np.int32, shape=prompt_lens.shape)
    for name, value in (("num_blocks", num_blocks), ("block_size", block_size), ("max_batch", max_batch)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    if kv_rows.shape[0] != 2:
        raise ValueError(f"kv_rows: expected shape (2, rows, num_kv_heads, head_dim), got {tuple(kv_rows.shape)}")
    p, o = to_host(prompt_lens), to_host(output_lens)
    if p.size == 0 or p.min() < 1 or o.min() < 1:
        raise ValueError("prompt_lens, output_lens: expected at least one request, every length >= 1")
    if kv_rows.shape[1] != int(np.sum(p) + np.sum(o)):
        raise ValueError(f"kv_rows: expected {int(np.sum(p) + np.sum(o))} rows (prompt + output tokens of "
                         f"every request), got {kv_rows.shape[1]}")
    heads, dim = queries.shape[1:]
    if queries.shape[0] != int(np.sum(o)) or dim != kv_rows.shape[3] or heads % kv_rows.shape[2]:
        raise ValueError(f"queries: expected ({int(np.sum(o))}, a multiple of {kv_rows.shape[2]}, "
                         f"{kv_rows.shape[3]}), got {tuple(queries.shape)}")
    need = max(-(-int(a + b) // block_size) for a, b in zip(p, o))
    if need > num_blocks:
        raise ValueError(f"num_blocks: the longest request needs {need} blocks, the budget is {num_blocks}")
    return p, o


def _move(src, dst, pairs) -> None:
    """Launch move_rows_kernel for (src row, dst row) pairs; src and dst are (rows, words) views."""
    if not pairs:
        return
    idx = np.array(pairs, dtype=np.int64).T.copy()  # (2, rows): source rows, destination rows
    src_rows, dst_rows = cuda.to_device(idx[0]), cuda.to_device(idx[1])
    blocks = launch.blocks(len(pairs), ROWS_PER_BLOCK)
    move_rows_kernel[blocks, ROWS_PER_BLOCK * WARP](src, src_rows, dst, dst_rows)


def serve(scheduler_cls, queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    """Serve the trace with a scheduler; returns (outputs like ``queries``, the scheduler's stats)."""
    p, o = _check(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch)
    sched = scheduler_cls(p, o, int(num_blocks), int(block_size), int(max_batch))
    d_q, d_rows = launch.to_device(queries, kv_rows)
    _, total_rows, kv_heads, dim = kv_rows.shape
    heads = queries.shape[1]
    cache = launch.empty((2, int(num_blocks), int(block_size), kv_heads, dim), kv_rows.dtype)
    slots = int(num_blocks) * int(block_size)
    k_rows, v_rows = as_words(d_rows[0], total_rows), as_words(d_rows[1], total_rows)
    k_slots, v_slots = as_words(cache[0], slots), as_words(cache[1], slots)
    q_words = as_words(d_q, queries.shape[0])
    out = launch.empty(queries.shape, np.float32)  # (total_outputs, heads, dim)
    out_words = as_words(out, queries.shape[0])
    row0, out0 = _offsets(p + o), _offsets(o)
    max_pages = -(-int(np.max(p + o)) // int(block_size))
    while not sched.finished():
        batch = sched.schedule()
        if not batch.rids:
            raise RuntimeError(f"{scheduler_cls.__name__} returned an empty batch with {len(sched.waiting)} "
                               "requests waiting: it stalled (pages never freed?)")
        # 1. the new K/V rows into their slots, before any attention reads them
        pairs = [(int(row0[r]) + t, slot) for r, t, slot in batch.writes]
        _move(k_rows, k_slots, pairs)
        _move(v_rows, v_slots, pairs)
        # 2. the batch's queries, row by row (a padded row re-reads its request's last query)
        q_index = [int(out0[r]) + (j if j >= 0 else int(o[r]) - 1) for r, j in zip(batch.rids, batch.steps)]
        batch_q = launch.empty((len(batch.rids), heads, dim), np.float32)
        _move(q_words, as_words(batch_q, len(batch.rids)), [(i, b) for b, i in enumerate(q_index)])
        # 3. one PagedAttention launch over the batch's block tables
        tables = np.zeros((len(batch.rids), max_pages), dtype=np.int32)
        for b, r in enumerate(batch.rids):
            table = sched.manager.block_table(r)
            tables[b, :len(table)] = table
        lens = np.array([sched.manager.num_tokens(r) for r in batch.rids], dtype=np.int32)
        res = paged_attention(batch_q, cache[0], cache[1], tables, lens, scale)  # (batch, heads, dim)
        # 4. live rows' outputs to their place in the trace; padded rows are dropped
        live = [(b, int(out0[r]) + j) for b, (r, j) in enumerate(zip(batch.rids, batch.steps)) if j >= 0]
        _move(as_words(res, len(batch.rids)), out_words, live)
        sched.complete(batch)
    return launch.result(out, queries, kv_rows), sched.stats()


def naive(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    """v1: static batches, each waiting for its longest request."""
    return serve(StaticScheduler, queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size,
                 max_batch)[0]


def optimized(queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size, max_batch):
    """v2: continuous batching: admit and retire every step."""
    return serve(Scheduler, queries, kv_rows, prompt_lens, output_lens, scale, num_blocks, block_size,
                 max_batch)[0]


def schedule_report(cfg, seed: int = 0) -> dict:
    """Both schedulers on the trace of ``cfg``, without kernels: steps, row utilization, pages, preemptions."""
    cfg = Config(*cfg)
    p, o = trace_lengths(cfg, np.random.default_rng(seed))  # the lengths make_inputs(cfg, seed) serves
    return {cls.__name__: simulate(cls(p, o, cfg.num_blocks, cfg.block_size, cfg.max_batch))
            for cls in (StaticScheduler, Scheduler)}
