"""Tensor parallelism for day 90's engine: one model split over N GPUs by heads, NCCL between them.

Megatron's split of a transformer layer, applied to day 90's Engine. Rank r of N holds

    wqkv   the columns of q heads r*H/N .. (r+1)*H/N - 1 and of KV heads r*G/N .. (r+1)*G/N - 1,
           cut out of the fused [q | k | v] layout and fused again ([q_r | k_r | v_r]); bqkv likewise
    wo     the matching rows: its input is the concatenation of the heads' outputs
    wgate, wup   columns r*hidden/N ..: SwiGLU is elementwise, so each rank gates its own slice
    wdown  the matching rows
    embed, norms, lm_head   replicated (lm_head split by vocab would need an all-gather of the
           logits; replicated is one matmul of (sequences, d_model) @ (d_model, vocab) per step)

and its own KV cache of G/N heads: the same block tables on every GPU, other pages' contents. A
row-split matmul leaves each rank a partial sum of the full output, so a layer needs two all-reduces
(after wo, after wdown) and nothing else: attention, RoPE and the cache writes are per head, local.
A shard is itself a day-90 Model (num_heads H/N, num_kv_heads G/N, hidden hidden/N), so the rank's
engine is day 90's Engine on it with the two sums added to the forward.

Rank 0 alone schedules: its BlockManager decides each step, and the step's rows (tokens, positions,
slots, block tables, context lengths: day 90's Engine._batch) go to every rank in one broadcast, so
every rank launches the same step. After the last all-reduce the residual stream is bitwise the same
on every rank, so are the logits, and every rank would pick the same tokens: each rank records its
picks and the launchers check that they agree.

Two communicators, one interface (:class:`Comm`): :class:`LocalComm`, N in-process ranks taking turns
in lock-step (an all-reduce is a plain NumPy/CuPy sum: the tests prove the split without GPUs), and
:class:`NcclComm` (cupy.cuda.nccl, one process per GPU). ``--gpus 1`` runs the NCCL path with a
communicator of one.

Napkin math (the lesson has more): per token per layer the wire carries 2 x d_model values: 16 KB for
Llama-3-8B in fp16 (d_model 4096). A decode step of 64 sequences all-reduces 512 KB twice a layer:
~1.2 us each at NVLink's ~450 GB/s each way, under the ~10 us a small NCCL all-reduce costs in latency; over
PCIe Gen5 (~50 GB/s) ~10 us plus latency.
"""

from __future__ import annotations

import contextlib
import pickle
import threading
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from course import ON_GPU, checking, launch
from solutions import day90_serving_engine as day90

# --- the split ------------------------------------------------------------------------------------


def check_split(cfg, n) -> None:
    """ValueError unless ``n`` ranks can split ``cfg``: n a positive int dividing num_heads,
    num_kv_heads (each rank holds whole KV heads and the query heads that read them) and hidden."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"ranks: expected a positive int, got {n!r}")
    for name in ("num_heads", "num_kv_heads", "hidden"):
        v = getattr(cfg, name)
        if v % n:
            raise ValueError(f"{n} ranks cannot split {name} = {v}: tensor parallelism needs N to divide "
                             f"num_heads ({cfg.num_heads}), num_kv_heads ({cfg.num_kv_heads}) and hidden "
                             f"({cfg.hidden})")


def shard_weights(model: day90.Model, rank: int, n: int) -> day90.Model:
    """Rank ``rank``'s shard of ``model`` split over ``n`` ranks: a Model of H/N heads over G/N KV heads
    and hidden/N, holding its slices of wqkv/bqkv (columns), wo (rows), wgate/wup (columns), wdown
    (rows), and the replicated embedding, norms and lm_head. Slices are contiguous copies."""
    c = model.cfg
    check_split(c, n)
    if not 0 <= rank < n:
        raise ValueError(f"rank: expected 0..{n - 1}, got {rank}")
    H, G, D, F = c.num_heads // n, c.num_kv_heads // n, c.head_dim, c.hidden // n
    q0, k0, v0 = 0, c.num_heads * D, (c.num_heads + c.num_kv_heads) * D  # where q, k, v start in [q | k | v]
    qkv_cols = np.concatenate([np.arange(q0 + rank * H * D, q0 + (rank + 1) * H * D),
                               np.arange(k0 + rank * G * D, k0 + (rank + 1) * G * D),
                               np.arange(v0 + rank * G * D, v0 + (rank + 1) * G * D)])
    heads = slice(rank * H * D, (rank + 1) * H * D)  # wo's rows: this rank's heads' outputs
    mlp = slice(rank * F, (rank + 1) * F)
    out = {}
    for name, w in model.weights.items():
        kind = name.split(".")[0]
        if kind == "wqkv":
            w = w[:, qkv_cols]
        elif kind == "bqkv":
            w = w[qkv_cols]
        elif kind == "wo":
            w = w[heads]
        elif kind in ("wgate", "wup"):
            w = w[:, mlp]
        elif kind == "wdown":
            w = w[mlp]
        out[name] = np.ascontiguousarray(w)  # replicated ones are copied too: no rank shares a buffer
    cfg = c._replace(num_heads=H, num_kv_heads=G, hidden=F)
    return day90.Model.from_weights(cfg, out, model.cos_sin)


# --- communicators --------------------------------------------------------------------------------


class Comm:
    """A rank's view of its group: ``rank``, ``size``, and two collectives every rank calls in the
    same order. ``all_reduce(x)``: the elementwise sum of every rank's x (same shape and dtype),
    returned (NCCL writes it into x in place; use the return value). ``broadcast(obj, root)``: root's
    object (any picklable value) on every rank."""

    rank: int = 0
    size: int = 1

    def all_reduce(self, x):
        raise NotImplementedError

    def broadcast(self, obj, root: int = 0):
        raise NotImplementedError


class RankFailed(RuntimeError):
    """Another rank of the group raised: this one cannot go on (its collective would never complete)."""


class _LockStep:
    """N in-process ranks that take turns: rank r runs until its next collective, leaves its value and
    hands the turn to r + 1; the last rank combines the values and hands the turn back to rank 0.
    One rank runs at a time, so the kernels launch one after another (the simulator, and one GPU
    shared by N ranks, need that), and a collective sees every rank's value of the same call."""

    def __init__(self, n: int):
        self.n, self.turn, self.values, self.result, self.error = n, 0, [None] * n, None, None
        self.cond = threading.Condition()

    def wait_turn(self, rank: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == rank or self.error is not None)
            if self.error is not None:
                raise RankFailed(f"rank {self.error[0]} failed")

    def exchange(self, rank: int, value, combine):
        with self.cond:
            self.values[rank] = value
            if rank == self.n - 1:  # every rank has left its value for this call
                self.result = combine(self.values)
                self.values = [None] * self.n
            self.turn = (rank + 1) % self.n
            self.cond.notify_all()
        self.wait_turn(rank)  # back once the others have left theirs (and, for rank 0, the result is in)
        return self.result

    def finish(self, rank: int, error=None) -> None:
        with self.cond:
            if error is not None and self.error is None:
                self.error = (rank, error)
            self.turn = (rank + 1) % self.n
            self.cond.notify_all()


class LocalComm(Comm):
    """Rank ``rank`` of N in-process ranks run in lock-step by :func:`run_local`. all_reduce sums the
    ranks' arrays in rank order (in float32 at least, rounded once to x's dtype, as NCCL's sum of two
    fp16 values is); broadcast hands every rank its own copy (pickled, as the wire would)."""

    def __init__(self, group: _LockStep, rank: int):
        self._group, self.rank, self.size = group, rank, group.n

    def all_reduce(self, x):
        def combine(xs):
            acc = xs[0].astype(np.promote_types(xs[0].dtype, np.float32))  # a copy: x itself stays the partial
            for y in xs[1:]:
                acc += y
            return acc

        return self._group.exchange(self.rank, x, combine).astype(x.dtype, copy=True)

    def broadcast(self, obj, root: int = 0):
        blob = self._group.exchange(self.rank, pickle.dumps(obj) if self.rank == root else None,
                                    lambda vals: vals[root])
        return obj if self.rank == root else pickle.loads(blob)


def run_local(n: int, fn) -> list:
    """Run fn(comm) as N in-process ranks (threads taking turns, see :class:`_LockStep`); returns each
    rank's result. The first exception of any rank is raised here (the others stop at their next
    collective)."""
    group = _LockStep(n)
    results, errors = [None] * n, [None] * n

    def body(rank):
        try:
            group.wait_turn(rank)
            results[rank] = fn(LocalComm(group, rank))
            group.finish(rank)
        except BaseException as exc:  # noqa: BLE001  (re-raised below, in the caller's thread)
            errors[rank] = exc
            group.finish(rank, exc)

    threads = [threading.Thread(target=body, args=(r,), name=f"rank {r}") for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, RankFailed)), None)
    if first is not None:
        raise first
    return results


_NCCL_TYPES = {"float32": "NCCL_FLOAT32", "float16": "NCCL_FLOAT16", "int64": "NCCL_INT64", "uint8": "NCCL_UINT8"}


class NcclComm(Comm):
    """Rank ``rank`` of ``size`` processes, one GPU each (the device current when it is made), joined by
    NCCL through ``uid`` (cupy.cuda.nccl.get_unique_id(), made once by the launcher). Collectives run on
    CuPy's current stream: the same legacy default stream Numba's launches and CuPy's matmuls use, so
    they queue behind the kernels that produce their input with no host synchronisation."""

    def __init__(self, rank: int, size: int, uid):
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl, self.rank, self.size = cupy, nccl, rank, size
        self._comm = nccl.NcclCommunicator(size, uid, rank)

    def _stream(self) -> int:
        return self._cupy.cuda.get_current_stream().ptr

    def all_reduce(self, x):
        x = self._cupy.ascontiguousarray(x)  # a matmul's fresh result already is: then this is x itself
        self._comm.allReduce(x.data.ptr, x.data.ptr, x.size, getattr(self._nccl, _NCCL_TYPES[x.dtype.name]),
                             self._nccl.NCCL_SUM, self._stream())
        return x

    def broadcast(self, obj, root: int = 0):
        cp, nccl = self._cupy, self._nccl
        blob = np.frombuffer(pickle.dumps(obj), np.uint8) if self.rank == root else None
        size = cp.asarray(np.array([0 if blob is None else blob.size], np.int64))
        self._comm.bcast(size.data.ptr, 1, nccl.NCCL_INT64, root, self._stream())
        buf = cp.asarray(blob) if blob is not None else cp.empty(int(size.get()[0]), np.uint8)
        self._comm.bcast(buf.data.ptr, buf.size, nccl.NCCL_UINT8, root, self._stream())
        return obj if self.rank == root else pickle.loads(buf.get().tobytes())


# --- the rank's engine ----------------------------------------------------------------------------


class TPEngine(day90.Engine):
    """Day 90's Engine on one rank's shard (:func:`shard_weights`), joined to the others by ``comm``.

    Rank 0 takes the requests (add_request), schedules every step with its BlockManager and broadcasts
    the step's rows; every rank runs the layers on its heads and sums the two row-split projections
    with ``comm.all_reduce``. Rank 0 samples (day 90's step); every rank records its own picks in
    ``picks`` (one array a step) so a launcher can check the ranks agree. ``reduce_seconds``: device time
    in the all-reduces (day 90's SpanTimer, as for attention: events on the stream, no synchronisation)."""

    def __init__(self, shard: day90.Model, block_size: int, num_blocks: int, comm: Comm, *,
                 contiguous: bool = False, attention=None, dtype: str = "float32", profile: bool = False):
        super().__init__(shard, block_size, num_blocks, contiguous=contiguous, attention=attention, dtype=dtype,
                         profile=profile)
        self.comm = comm
        self.picks: list[np.ndarray] = []
        self.reduce_seconds = 0.0
        self.reduce_time = day90.SpanTimer()

    def add_request(self, rid: int, prompt, max_new: int) -> None:
        if self.comm.rank != 0:
            raise ValueError(f"add_request on rank {self.comm.rank}: rank 0 holds the requests and schedules")
        super().add_request(rid, prompt, max_new)

    def forward(self, seqs):
        """Rank 0 (called by day 90's step): the step's rows to every rank, then the sharded layers."""
        rows = self._batch(seqs)
        self.comm.broadcast(rows)
        return self.forward_rows(rows)

    def reduce(self, partial):
        """Day 90's hook after each row-split projection (wo, wdown): this rank's partial sum of the
        full output, summed over the ranks."""
        with self.phase("all-reduce"), self.reduce_time.span():
            return self.comm.all_reduce(partial)

    def forward_rows(self, rows):
        """Day 90's layers over the step's rows on this rank's heads (its forward_rows, which calls
        :meth:`reduce` after wo and after wdown); every rank records its argmax picks."""
        logits = super().forward_rows(rows)
        # x is the same on every rank after the sums, so are the logits of the replicated lm_head
        self.picks.append(checking.to_host(day90._xp().argmax(logits, axis=1)).astype(np.int32))
        self.reduce_seconds += self.reduce_time.collect()  # the copy above waited for the step's kernels
        if self.comm.rank != 0:  # rank 0's day-90 step collects its own
            self.stats.attention_seconds += self.attention_time.collect()
        return logits

    def run(self) -> dict[int, list[int]]:
        """Rank 0: day 90's run, then ``None`` to every rank (the end). Other ranks: run each step rank 0
        broadcasts until that ``None``; they return {} (rank 0 holds the outputs)."""
        if self.comm.rank == 0:
            try:
                return super().run()
            finally:
                self.comm.broadcast(None)
        start = time.perf_counter()
        with launch.no_poison() if ON_GPU else contextlib.nullcontext():  # as day 90's run
            while (rows := self.comm.broadcast(None)) is not None:
                self.forward_rows(rows)
                self.stats.steps += 1
        day90._sync()
        self.stats.seconds += time.perf_counter() - start
        return {}


def ranks_disagree(picks_per_rank) -> str | None:
    """None when every rank picked rank 0's tokens at every step, else where they first differ."""
    ref = picks_per_rank[0]
    for r, picks in enumerate(picks_per_rank[1:], start=1):
        if len(picks) != len(ref):
            return f"rank {r} ran {len(picks)} steps, rank 0 {len(ref)}"
        for s, (a, b) in enumerate(zip(ref, picks)):
            if not np.array_equal(a, b):
                return f"rank {r} picked {b.tolist()} at step {s}, rank 0 {a.tolist()}"
    return None


def _tokens(outputs: dict, width: int, num_requests: int) -> np.ndarray:
    tokens = np.full((num_requests, width), -1, dtype=np.int32)
    for r, out in outputs.items():
        tokens[r, :len(out)] = out
    return tokens


def _requests(prompts, prompt_lens, output_lens):
    return [(r, [int(t) for t in prompts[r, :p]], int(m)) for r, (p, m) in enumerate(zip(prompt_lens, output_lens))]


def serve_local(model, prompts, prompt_lens, output_lens, block_size, num_blocks, n: int, *, contiguous=False,
                attention=None, dtype="float32"):
    """Day 90's serve over ``n`` in-process ranks (:class:`LocalComm`): (tokens, the ranks' engines).
    RuntimeError if the ranks' picks ever disagree."""
    prompts, prompt_lens, output_lens = day90._check(model, prompts, prompt_lens, output_lens, block_size, num_blocks)
    check_split(model.cfg, n)
    shards = [shard_weights(model, r, n) for r in range(n)]
    requests = _requests(prompts, prompt_lens, output_lens)

    def rank_main(comm):
        eng = TPEngine(shards[comm.rank], int(block_size), int(num_blocks), comm, contiguous=contiguous,
                       attention=attention, dtype=dtype)
        if comm.rank == 0:
            for rid, prompt, m in requests:
                eng.add_request(rid, prompt, m)
        return eng, eng.run()

    ranks = run_local(n, rank_main)
    engines = [eng for eng, _ in ranks]
    why = ranks_disagree([e.picks for e in engines])
    if why:
        raise RuntimeError(f"the ranks' logits differ: {why}")
    return _tokens(ranks[0][1], int(output_lens.max()), len(prompt_lens)), engines


# --- one process per GPU: the NCCL launcher -------------------------------------------------------


def nccl_problem(n: int) -> str | None:
    """Why ``n`` NCCL ranks cannot run here (one line), or None."""
    if not ON_GPU:
        return f"tensor parallelism over NCCL needs {n} CUDA GPU(s); this is the simulator (the split itself " \
               f"is checked in-process by tests/test_tensor_parallel.py)"
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as exc:
        return f"cupy.cuda.nccl cannot be imported ({exc})"
    if not getattr(nccl, "available", False):
        return 'cupy.cuda.nccl has no NCCL library: pip install "nvidia-nccl-cu12>=2.18.1,<3"'
    count = cupy.cuda.runtime.getDeviceCount()
    if count < n:
        return f"{n} ranks need {n} GPUs, one each; this machine has {count}"
    return None


@dataclass
class TPRun:
    """What the launcher brings back: rank 0's stats, each rank's time in all-reduce and whether every
    rank picked the same tokens at every step (``disagree`` says where not)."""

    stats: day90.Stats
    ranks: int
    reduce_seconds: list = field(default_factory=list)
    disagree: str | None = None


def _rank_main(rank, n, uid, shard, requests, block_size, num_blocks, contiguous, dtype, conn):
    """One process, one GPU: the rank's device for CuPy and Numba, its communicator, its engine."""
    try:
        import cupy

        from course import cuda

        # CuPy first (the matmuls, NCCL, and Numba's allocations through CuPy's pool), then Numba's context
        # on the same device: Numba refuses to switch a thread's context once it has one.
        cupy.cuda.Device(rank).use()
        cuda.select_device(rank)
        comm = NcclComm(rank, n, uid)
        eng = TPEngine(shard, block_size, num_blocks, comm, contiguous=contiguous, dtype=dtype)
        if rank == 0:
            for rid, prompt, m in requests:
                eng.add_request(rid, prompt, m)
        outputs = eng.run()
        conn.send(("ok", outputs, eng.stats if rank == 0 else None, eng.picks, eng.reduce_seconds))
    except BaseException:  # noqa: BLE001  (sent to the launcher, which stops the other ranks)
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def serve_nccl(model, prompts, prompt_lens, output_lens, block_size, num_blocks, n: int, *, contiguous=False,
               dtype="float32"):
    """Day 90's serve over ``n`` GPUs, one spawned process each, NCCL between them: (tokens, TPRun).
    Each process receives only its shard. A rank that fails stops the others; its traceback is raised
    here as RuntimeError."""
    import multiprocessing
    from multiprocessing.connection import wait

    prompts, prompt_lens, output_lens = day90._check(model, prompts, prompt_lens, output_lens, block_size, num_blocks)
    check_split(model.cfg, n)
    why = nccl_problem(n)
    if why:
        raise RuntimeError(why)
    from cupy.cuda import nccl

    uid = nccl.get_unique_id()  # the rendezvous every rank joins: made once, handed to each process
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per GPU: no CUDA state forked
    requests = _requests(prompts, prompt_lens, output_lens)
    procs, conns = [], []
    for r in range(n):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_rank_main, name=f"rank {r}", args=(r, n, uid, shard_weights(model, r, n), requests,
                        int(block_size), int(num_blocks), contiguous, dtype, send))
        p.start()  # the shard is pickled to the process here: the launcher never holds N shards at once
        send.close()
        procs.append(p)
        conns.append(recv)
    replies, failure = {}, None
    try:
        while len(replies) < n and failure is None:
            for c in wait([c for r, c in enumerate(conns) if r not in replies]):
                r = conns.index(c)
                try:
                    msg = c.recv()
                except EOFError:
                    msg = ("error", f"the process exited (code {procs[r].exitcode}) without a reply")
                if msg[0] == "error":
                    failure = f"rank {r} failed:\n{msg[1]}"
                    break
                replies[r] = msg
    finally:
        for p in procs:
            if failure is not None and p.is_alive():
                p.terminate()  # a rank blocked in a collective its failed peer never joins
            p.join()
    if failure is not None:
        raise RuntimeError(failure)
    _, outputs, stats, _, _ = replies[0]
    run = TPRun(stats, n, [replies[r][4] for r in range(n)], ranks_disagree([replies[r][3] for r in range(n)]))
    return _tokens(outputs, int(output_lens.max()), len(prompt_lens)), run


def report_against_single(tp_tokens, run: TPRun, single_tokens, single, tie: float) -> bool:
    """make run --gpus N: print the ranks' agreement and the tokens against the one-GPU engine's;
    True when both hold (divergences at a near-tie of the one-GPU run's logits are counted, not failed)."""
    n = tp_tokens.shape[0]
    margins = [single.stats.margins[r] for r in range(n)]
    notes = []
    same, ties, bad = day90.compare_tokens(tp_tokens, single_tokens, margins, tie, notes)
    reduce_s = max(run.reduce_seconds)
    timed = (f"all-reduce {reduce_s:.3f} s of {run.stats.seconds:.3f} s on the rank that waited longest "
             f"({100 * reduce_s / run.stats.seconds:.0f} %)")
    print(f"tensor parallel over {run.ranks} GPU(s): {run.stats.steps} steps, {timed}; the one-GPU paged engine "
          f"took {single.stats.seconds:.3f} s")
    ok = run.disagree is None and not bad
    line = f"tensor parallel == one-GPU engine for {same}/{n} requests"
    if ties:
        line += f"; {ties} diverge at a near-tie (top-2 logit gap < {tie:g})"
    line += "; every rank picked the same tokens" if run.disagree is None else f"; ranks disagree: {run.disagree}"
    print(("OK   " if ok else "FAIL ") + line)
    for note in bad + notes:
        print("     " + note)
    return ok
