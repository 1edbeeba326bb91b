"""Day 74: the cost of contiguous KV caches -- a fragmentation lab, and appending tokens' K/V.

The lab (host code, graded by its own tests): simulate() replays a request trace against a KV memory
of fixed capacity under three policies and measures, step by step, what the memory holds:
  "max"     contiguous, each request reserves max_len token slots at admission (first fit).
  "oracle"  contiguous, each request reserves exactly prompt + output slots (knows the future).
  "paged"   pages of block_size slots, taken one at a time as the sequence grows.
It reports the shares of memory holding real tokens, reserved for tokens not yet generated, lost to
internal fragmentation (reserved, never to be used) and to external fragmentation (free, but in holes
too small for the waiting request).

Kernel: append T new tokens' K and V to every sequence of a contiguous cache, at rows
seq_lens[s] .. seq_lens[s] + T - 1 (decode is T = 1; a prefill chunk or speculative tokens are more).
v1 naive      one thread per (K or V, sequence, token, head) copying its head_dim elements in a loop:
              neighbouring lanes are a whole head apart, so each warp store touches 32 sectors.
v2 optimized  in a contiguous cache a sequence's new tokens are one contiguous run, in the input and
              in the cache: a grid of (chunk, sequence, K or V) blocks copies each run as machine
              words, coalesced, four words in flight per thread.

Napkin math: 64 sequences x 1024 new float16 tokens x 8 KV heads x 128 = 134 MB of K, the same of V:
537 MB read + written, ~0.13 ms at the H200's ~4.1 TB/s copy rate. One decode step (T = 1) moves
0.5 MB: launch-bound, the reason the bench uses a prefill-sized append.
"""

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from course import cuda, launch
from course.launch import word_dtype

TITLE = "The cost of contiguous caches: a fragmentation lab"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
# n = num_seqs, or (num_seqs, new_tokens, max_len, num_kv_heads, head_dim, dtype).
TEST_SIZES = (1, 3, 17, (5, 1, 9, 3, 8, "float32"), (4, 6, 11, 1, 6, "float16"), (3, 5, 8, 1, 3, "float16"))
BENCH_SIZES = ((64, 1024, 2048, 8, 128, "float16"),)
BOUND = "memory"
THREADS = 256
NAIVE_THREADS = 128
UNROLL = 4


# --- the lab ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    arrival: int  # step at which it joins the queue
    prompt_len: int
    output_len: int  # tokens it will generate (unknown to every policy but "oracle")


def make_trace(num_requests: int, seed: int = 0, max_len: int = 2048, mean_prompt: float = 161.0,
               mean_output: float = 338.0, arrivals_per_step: float = 0.5) -> list[Request]:
    """Log-normal prompt and output lengths (means default to ShareGPT's: 161 and 338 tokens, the
    dataset of the vLLM paper), clipped to max_len; Poisson arrivals."""
    rng = np.random.default_rng(seed)
    sigma = 1.0

    def lognormal(mean, size):
        return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size)

    prompt = np.clip(lognormal(mean_prompt, num_requests), 1, max_len - 1).astype(int)
    output = np.clip(lognormal(mean_output, num_requests), 1, None).astype(int)
    output = np.minimum(output, max_len - prompt)
    arrival = np.cumsum(rng.poisson(1 / arrivals_per_step, num_requests))
    return [Request(int(a), int(p), int(o)) for a, p, o in zip(arrival, prompt, output)]


def simulate(trace, policy: str, capacity: int, max_len: int = 2048, block_size: int = 16) -> dict:
    """Replay ``trace``; return time-averaged shares of the KV memory (they sum to 1) and counts.

    Each step: admit waiting requests first come first served (the prompt's K/V is written at
    admission), record what the memory holds, then every running request generates one token, and
    finished requests free their memory. When the paged pool cannot give every running request the
    page its next token needs, the newest request is preempted (recompute, as in vLLM; a later day's
    subject) and admission pauses until a request finishes.
    """
    if policy not in ("max", "oracle", "paged"):
        raise ValueError(f"policy must be 'max', 'oracle' or 'paged', got {policy!r}")
    if any(r.prompt_len + r.output_len > max_len for r in trace):
        raise ValueError(f"a request is longer than max_len={max_len}")
    if capacity < max_len + block_size:
        raise ValueError(f"capacity={capacity} cannot hold one request of max_len={max_len}")
    pending = deque(sorted(trace, key=lambda r: r.arrival))
    free_segments = [[0, capacity]]  # contiguous policies: [start, length], sorted by start
    free_blocks = capacity // block_size
    running = []  # [request, tokens held, reserved slots (contiguous) or pages (paged), segment start]
    totals = dict.fromkeys(("useful", "reserved", "internal", "external", "free"), 0.0)
    step = steps = 0
    preemptions = 0
    hold = False  # after a preemption, admit nobody until a request finishes (no livelock)

    def need(r):
        return max_len if policy == "max" else r.prompt_len + r.output_len

    while pending or running:
        # admission, first come first served: the head blocks everyone behind it
        while pending and pending[0].arrival <= step and not hold:
            r = pending[0]
            if policy == "paged":
                pages = -(-r.prompt_len // block_size)
                if pages > free_blocks:
                    break
                free_blocks -= pages
                running.append([r, r.prompt_len, pages, None])
            else:
                start = first_fit(free_segments, need(r))
                if start is None:
                    break
                running.append([r, r.prompt_len, need(r), start])
            pending.popleft()
        # what the memory holds at this step
        if running:
            steps += 1
            held = sum(x[1] for x in running)
            if policy == "paged":
                allocated = sum(x[2] for x in running) * block_size
                internal, reserved = allocated - held, 0
            else:
                reserved = sum(x[0].prompt_len + x[0].output_len - x[1] for x in running)
                internal = sum(x[2] - x[0].prompt_len - x[0].output_len for x in running)
            external = 0
            if policy != "paged" and pending and pending[0].arrival <= step:
                # the head waits: free slots in holes too small for it are external fragmentation
                external = sum(seg[1] for seg in free_segments if seg[1] < need(pending[0]))
            parts = dict(useful=held, reserved=reserved, internal=internal, external=external)
            parts["free"] = capacity - sum(parts.values())
            for k, v in parts.items():
                totals[k] += v / capacity
        # decode one token each, then retire finished requests
        if policy == "paged":
            # Like vLLM: make room for every running request's next token first, preempting the newest
            # request until the pages suffice. Its pages go back; it returns to the head of the queue
            # and, on readmission, prefills its prompt and the tokens it had generated (recompute).
            while running and sum(x[1] == x[2] * block_size for x in running) > free_blocks:
                r, held, pages, _ = running.pop()
                free_blocks += pages
                pending.appendleft(replace(r, prompt_len=held, output_len=r.output_len - (held - r.prompt_len)))
                preemptions += 1
                hold = True
        for x in running:
            if policy == "paged" and x[1] == x[2] * block_size:
                free_blocks -= 1
                x[2] += 1
            x[1] += 1
        for x in [x for x in running if x[1] == x[0].prompt_len + x[0].output_len]:
            running.remove(x)
            hold = False
            if policy == "paged":
                free_blocks += x[2]
            else:
                free_segments = release(free_segments, x[3], x[2])
        step += 1
    shares = {k: v / max(steps, 1) for k, v in totals.items()}
    used = shares["useful"] + shares["reserved"] + shares["internal"] + shares["external"]
    shares["useful_of_used"] = shares["useful"] / used if used else 0.0
    shares["steps"] = step
    shares["preemptions"] = preemptions
    return shares


def first_fit(free_segments: list, size: int):
    """Carve ``size`` slots from the first free segment ([start, length], sorted) that holds them.

    Returns the start of the carved range, or None when no single segment is large enough (even if
    the segments together are: that shortfall is external fragmentation).
    """
    # EXERCISE: the first segment with length >= size: take size slots from its front, return the old start; else None
    for seg in free_segments:
        if seg[1] >= size:
            start = seg[0]
            seg[0] += size
            seg[1] -= size
            return start
    return None


def release(free_segments: list, start: int, length: int) -> list:
    """Return [start, start + length) to the free list, merging it with free neighbours.

    Returns the new list: sorted by start, no empty segments, no two segments that touch.
    """
    # EXERCISE: add [start, length], sort by start, merge where one ends where the next begins; drop empty ones
    segments = sorted([s for s in free_segments if s[1] > 0] + [[start, length]])
    merged = [segments[0]]
    for seg_start, seg_length in segments[1:]:
        if merged[-1][0] + merged[-1][1] == seg_start:  # adjacent: one larger hole
            merged[-1][1] += seg_length
        else:
            merged.append([seg_start, seg_length])
    return merged


# --- the kernel: append new tokens to a contiguous cache ----------------------------------------------

def _geometry(n):
    if isinstance(n, (tuple, list)):
        seqs, new, max_len, heads, head_dim, dtype = n
        return int(seqs), int(new), int(max_len), int(heads), int(head_dim), np.dtype(dtype)
    return int(n), 2, 12, 2, 8, np.dtype(np.float16)


def make_inputs(n, seed: int = 0):
    """Sequences of random lengths; the rows the new tokens go to hold NaN, every other row data."""
    seqs, new, max_len, heads, head_dim, dtype = _geometry(n)
    rng = np.random.default_rng(seed)
    seq_lens = rng.integers(0, max_len - new + 1, size=seqs).astype(np.int32)
    seq_lens[0] = max_len - new  # one sequence fills its reservation to the last row
    new_kv = rng.standard_normal((2, seqs, new, heads, head_dim)).astype(dtype)
    kv_cache = rng.standard_normal((2, seqs, max_len, heads, head_dim)).astype(dtype)
    for s, length in enumerate(seq_lens):
        kv_cache[:, s, length:length + new] = np.nan
    return new_kv, kv_cache, seq_lens


def reference(new_kv, kv_cache, seq_lens):
    out = kv_cache.copy()
    new = new_kv.shape[2]
    for s, length in enumerate(seq_lens):
        out[:, s, length:length + new] = new_kv[:, s]
    return out


def traffic(new_kv, kv_cache, seq_lens):
    return 2 * new_kv.nbytes + seq_lens.nbytes, 0


@cuda.jit
def append_naive_kernel(new_kv, kv_cache, seq_lens):
    # new_kv: (2, num_seqs, T, heads, head_dim); kv_cache: (2, num_seqs, max_len, heads, head_dim)
    """One thread per (K or V, sequence, new token, head): i = ((kv * num_seqs + s) * T + t) * heads + h.
    Guard i, then copy the head's head_dim elements to kv_cache[kv, s, seq_lens[s] + t, h, :] in a loop."""
    # EXERCISE: split i into kv, s, t, h; guard; row = seq_lens[s] + t; loop d over head_dim copying the head
    i = cuda.grid(1)
    seqs, new, heads = new_kv.shape[1], new_kv.shape[2], new_kv.shape[3]
    if i >= 2 * seqs * new * heads:
        return
    h = i % heads
    t = (i // heads) % new
    s = (i // (heads * new)) % seqs
    kv = i // (heads * new * seqs)
    row = seq_lens[s] + t
    # One head's vector per thread: lane k of a warp writes 2-byte element d of head k, a whole head
    # (256 bytes at head_dim 128) away from lane k + 1, so every store instruction touches 32 sectors.
    for d in range(new_kv.shape[4]):
        kv_cache[kv, s, row, h, d] = new_kv[kv, s, t, h, d]


@cuda.jit
def append_kernel(new_words, cache_words, seq_lens, row_words):
    # new_words: (2, num_seqs, T * row_words); cache_words: (2, num_seqs, max_len * row_words)
    """Grid (chunks, num_seqs, 2): s = blockIdx.y, kv = blockIdx.z. Sequence s's T new rows are one run
    of new_words.shape[2] words; in the cache the run starts at word seq_lens[s] * row_words: a plain,
    coalesced copy. Block x covers words x * 4 * blockDim.x onwards: thread w = that + threadIdx.x
    handles w, w + blockDim.x, w + 2 * blockDim.x and w + 3 * blockDim.x, each only if it is < the run
    length. Stretch: in a full chunk, issue the four loads before the four stores."""
    # EXERCISE: start = seq_lens[s] * row_words; this chunk's words, 4 a thread, to cache_words[kv, s, start + w]
    s = cuda.blockIdx.y
    kv = cuda.blockIdx.z
    run = new_words.shape[2]
    start = seq_lens[s] * row_words  # one address for the whole block: a broadcast load
    step = cuda.blockDim.x
    w = cuda.blockIdx.x * step * 4 + cuda.threadIdx.x
    if w + 3 * step < run:  # a full chunk: four independent loads, then four stores
        a0 = new_words[kv, s, w]
        a1 = new_words[kv, s, w + step]
        a2 = new_words[kv, s, w + 2 * step]
        a3 = new_words[kv, s, w + 3 * step]
        cache_words[kv, s, start + w] = a0
        cache_words[kv, s, start + w + step] = a1
        cache_words[kv, s, start + w + 2 * step] = a2
        cache_words[kv, s, start + w + 3 * step] = a3
    else:
        while w < run:
            cache_words[kv, s, start + w] = new_words[kv, s, w]
            w += step


_NAIVE_SIG = "void(float16[:, :, :, :, ::1], float16[:, :, :, :, ::1], int32[::1])"
_OPT_SIG = "void(uint64[:, :, ::1], uint64[:, :, ::1], int32[::1], int64)"
KERNELS = {"naive": (append_naive_kernel, _NAIVE_SIG), "optimized": (append_kernel, _OPT_SIG)}


def _check(new_kv, kv_cache, seq_lens):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    two, seqs, max_len, heads, head_dim = kv_cache.shape
    if two != 2:
        raise ValueError("kv_cache: expected shape (2, num_seqs, max_len, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    launch.check_array("new_kv", new_kv, dtype=kv_cache.dtype, shape=(2, seqs, None, heads, head_dim))
    launch.check_array("seq_lens", seq_lens, dtype=np.int32, shape=(seqs,))
    if isinstance(seq_lens, np.ndarray) and seqs:  # device lengths are trusted: checking costs a copy
        if seq_lens.min() < 0 or seq_lens.max() + new_kv.shape[2] > max_len:
            raise ValueError(f"seq_lens: each length + {new_kv.shape[2]} new tokens must fit in "
                             f"0..{max_len} (the reservation), got lengths {seq_lens.min()}..{seq_lens.max()}")


def naive(new_kv, kv_cache, seq_lens):
    _check(new_kv, kv_cache, seq_lens)
    d_new, d_cache, d_lens = launch.to_device(new_kv, kv_cache, seq_lens)
    threads = 2 * new_kv.shape[1] * new_kv.shape[2] * new_kv.shape[3]
    if threads:
        append_naive_kernel[launch.blocks(threads, NAIVE_THREADS), NAIVE_THREADS](d_new, d_cache, d_lens)
    return launch.result(d_cache, new_kv, kv_cache, seq_lens)


def optimized(new_kv, kv_cache, seq_lens):
    _check(new_kv, kv_cache, seq_lens)
    d_new, d_cache, d_lens = launch.to_device(new_kv, kv_cache, seq_lens)
    _, seqs, max_len, heads, head_dim = d_cache.shape
    new, row = new_kv.shape[2], heads * head_dim
    if seqs and new:
        word = word_dtype(row * d_cache.dtype.itemsize)  # a row boundary is always a word boundary
        new_words = d_new.reshape(2, seqs, new * row).view(word)
        cache_words = d_cache.reshape(2, seqs, max_len * row).view(word)
        row_words = cache_words.shape[2] // max_len
        run = new_words.shape[2]
        threads = min(THREADS, 32 * -(-run // 32))
        chunks = launch.blocks(run, threads * UNROLL)
        append_kernel[(chunks, seqs, 2), threads](new_words, cache_words, d_lens, row_words)
    return launch.result(d_cache, new_kv, kv_cache, seq_lens)


def library(new_kv, kv_cache, seq_lens):
    """The same append as one CuPy fancy-index assignment."""
    import cupy

    cache, new, lens = cupy.asarray(kv_cache), cupy.asarray(new_kv), cupy.asarray(seq_lens)
    seqs, t = new.shape[1], new.shape[2]
    rows = lens[:, None] + cupy.arange(t)[None, :]  # (num_seqs, T)
    cache[:, cupy.arange(seqs)[:, None], rows] = new
    return cache
