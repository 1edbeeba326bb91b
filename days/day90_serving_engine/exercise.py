"""Day 90 exercise: capstone -- a serving engine that decodes a batch of requests through the paged KV cache.

The unit's parts meet here. A tiny transformer (seeded random weights; RMSNorm, grouped-query
attention with rotary positions, a SwiGLU MLP) decodes requests greedily. Each step, every scheduled
sequence's new tokens (a whole prompt on admission, one token when decoding) go through the model
together: per layer one launch of this day's fused kernel rotates q and k and writes k and v into
their cache slots (day 77's scatter), and attention reads the cache back: on a GPU the step's decodes
through day 89's tuned PagedAttention launch and its prompts through day 87's chunked-prefill kernel
(attention_mixed); in the simulator every new token as a query row of day 78's one-thread-a-head
kernel, with its own block table and context length (attention_per_row). Day 76's BlockManager hands
out the pages. The same architecture is a Llama's (Qwen2's with q/k/v biases): `make run ARGS="--model DIR"`
serves a Hugging Face checkpoint through this engine (solutions/llama_checkpoint.py maps its weights).

v1 naive      a contiguous cache: each admitted request reserves max_len slots up front (one page of
              max_len tokens), so the budget holds budget // max_len sequences at once whatever
              their real lengths, and never needs to preempt.
v2 optimized  a paged cache: a sequence holds ceil(tokens / block_size) pages and takes one more only
              when its last page fills; when none is free the newest sequence is preempted (its pages
              freed, its tokens recomputed when it is readmitted) so the older ones finish.

Same model, same kernels, same tokens: only the memory management differs, and with it how many
sequences share each step's launches.

Napkin math: a token's K and V take 2 x layers x kv_heads x head_dim x 4 B: 1 KB in the tiny model,
128 KB for Llama-3-8B in fp16 (32 layers x 8 KV heads x 128). An H200 with 141 GB, 16 GB of it
weights, holds ~950k such tokens: 232 sequences if each reserves 4096, ~950 if they hold their real
~1000. Decoding is memory-bound (every step reads the weights and every live K/V row once), so the
sequences sharing a step are the throughput.

What you write (each raises NotImplementedError with its hint until you do):
  rope_cache_kernel  find (t, p), load cos/sin at positions[t], rotate q into query, k into the slot's row, copy v
                     (28 lines)
  Engine.schedule    a loop over self.running with append_slot / _preempt, then a loop admitting from self.waiting
                     (16 lines)
Everything else in this file is given. Grade with:  make check DAY=90
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import math
import os
import sys
import time
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from course import DEVICE, ON_GPU, checking, cuda, launch
from course.prepared import prepare
from numba import float32
from solutions import day59_fused_add_rmsnorm as addnorm
from solutions import day78_paged_attention_v1 as pa
from solutions import day87_chunked_prefill as chunked
from solutions import day89_tuning_paged_attention as tuned
from solutions import paged_attention_common as common
from solutions.day71_fused_mlp import silu
from solutions.day76_block_tables import BlockManager, OutOfBlocksError

TITLE = "Capstone: the serving engine"
MEMORY_SPACE = "global + registers"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
THREADS = 128
MARGIN = 1e-3  # make_inputs keeps workloads whose greedy choices all win by at least this logit gap
TIE = 1e-4  # a float32 engine may pick either token when the top two logits are closer than this
DTYPES = ("float32", "float16")  # the engine's dtypes: of its weights, its activations and its KV cache
# The top-2 logit gap under which two right engines of a dtype may choose differently. fp16 rounds every
# activation between matmuls to 11 significant bits (a relative 2^-12 = 2.4e-4 per element); over a few
# layers that moves O(1) logits by ~1e-3 (the tiny models' top-2 gaps moved by up to 1.9e-3): 2e-2 is 10x that.
TIES = {"float32": TIE, "float16": 2e-2}
FP16_MAX = 65504.0  # the largest finite float16: anything that rounds past it is inf


class ModelConfig(NamedTuple):
    vocab: int = 256
    d_model: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 32  # day 78's kernels take multiples of 32
    hidden: int = 256
    max_len: int = 32  # the model's context limit: what a contiguous cache reserves per request
    rope_base: float = 10000.0
    norm_eps: float = 1e-6  # RMSNorm's epsilon


MODELS = {
    "tiny": ModelConfig(),
    "small": ModelConfig(vocab=1024, d_model=512, num_layers=4, num_heads=8, num_kv_heads=2, head_dim=64,
                         hidden=1024, max_len=1024),
}


class Workload(NamedTuple):
    """n for make_inputs: requests with prompt lengths 1..max_prompt and output lengths 1..max_new,
    served under a KV budget of num_blocks pages of block_size tokens (per layer)."""

    num_requests: int
    max_prompt: int
    max_new: int
    block_size: int
    num_blocks: int
    model: str = "tiny"


TEST_SIZES = (  # budgets of 32 token slots: one max_len sequence, the contiguous cache's unit
    Workload(1, 1, 1, 4, 8),  # one request, one prompt token, one output token
    Workload(2, 4, 4, 4, 8),  # prompts up to exactly one page
    Workload(4, 9, 6, 4, 8),  # pages fill mid-step; up to 60 tokens in 32 slots: preemption likely
    Workload(3, 7, 5, 2, 16),  # block size 2: many pages per sequence
)
BENCH_SIZES = (Workload(64, 256, 64, 16, 512, "small"),)  # 8 contiguous slots; ~50 paged sequences


# --- the model -----------------------------------------------------------------------------------


class Model:
    """Seeded random weights, scaled so activations stay O(1) through every layer."""

    def __init__(self, cfg: ModelConfig = MODELS["tiny"], seed: int = 0):
        self.cfg = cfg = ModelConfig(*cfg)
        rng = np.random.default_rng(seed)

        def w(*shape, fan_in):
            return (rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)

        qkv_cols = (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim
        self.weights = {"embed": w(cfg.vocab, cfg.d_model, fan_in=1),
                        "norm_f": (1 + 0.1 * rng.standard_normal(cfg.d_model)).astype(np.float32),
                        "lm_head": w(cfg.d_model, cfg.vocab, fan_in=cfg.d_model)}
        for i in range(cfg.num_layers):
            self.weights.update({
                f"norm1.{i}": (1 + 0.1 * rng.standard_normal(cfg.d_model)).astype(np.float32),
                f"wqkv.{i}": w(cfg.d_model, qkv_cols, fan_in=cfg.d_model),
                f"wo.{i}": w(cfg.num_heads * cfg.head_dim, cfg.d_model, fan_in=cfg.num_heads * cfg.head_dim),
                f"norm2.{i}": (1 + 0.1 * rng.standard_normal(cfg.d_model)).astype(np.float32),
                f"wgate.{i}": w(cfg.d_model, cfg.hidden, fan_in=cfg.d_model),
                f"wup.{i}": w(cfg.d_model, cfg.hidden, fan_in=cfg.d_model),
                f"wdown.{i}": w(cfg.hidden, cfg.d_model, fan_in=cfg.hidden),
            })
        self.cos_sin = rope_table(cfg)

    @classmethod
    def from_weights(cls, cfg: ModelConfig, weights: dict, cos_sin=None) -> Model:
        """A model of given weights, named and laid out as __init__ makes them, plus an optional q/k/v bias
        ``bqkv.{i}`` of (num_heads + 2 * num_kv_heads) * head_dim per layer; cos_sin defaults to
        rope_table(cfg). Norm gains and biases are float32; the matrices (see :func:`holds_fp16`) float32
        or float16 (a checkpoint loaded for the fp16 engine stays half the size on the host)."""
        cfg = ModelConfig(*cfg)
        qkv_cols = (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim
        shapes = {"embed": (cfg.vocab, cfg.d_model), "norm_f": (cfg.d_model,), "lm_head": (cfg.d_model, cfg.vocab)}
        for i in range(cfg.num_layers):
            shapes.update({f"norm1.{i}": (cfg.d_model,), f"wqkv.{i}": (cfg.d_model, qkv_cols),
                           f"wo.{i}": (cfg.num_heads * cfg.head_dim, cfg.d_model), f"norm2.{i}": (cfg.d_model,),
                           f"wgate.{i}": (cfg.d_model, cfg.hidden), f"wup.{i}": (cfg.d_model, cfg.hidden),
                           f"wdown.{i}": (cfg.hidden, cfg.d_model)})
        optional = {f"bqkv.{i}": (qkv_cols,) for i in range(cfg.num_layers)}
        missing = sorted(set(shapes) - set(weights))
        unknown = sorted(set(weights) - set(shapes) - set(optional))
        if missing or unknown:
            raise ValueError(f"weights: missing {missing}, unexpected {unknown}")
        for name, w in weights.items():
            launch.check_array(f"weights[{name!r}]", w, dtype=(np.float32, np.float16) if holds_fp16(name)
                               else np.float32, shape={**shapes, **optional}[name])
        table = rope_table(cfg) if cos_sin is None else cos_sin
        launch.check_array("cos_sin", table, dtype=np.float32, shape=(cfg.max_len, cfg.head_dim))
        model = cls.__new__(cls)
        model.cfg, model.weights, model.cos_sin = cfg, dict(weights), table
        return model

    def astype(self, dtype: str) -> Model:
        """The same model with its matrices in ``dtype`` (float16: rounded, ValueError naming a weight that
        would overflow to inf; float32: widened, exactly). Norm gains and biases stay float32. The float64
        reference decode of ``model.astype("float16")`` is what the fp16 engine approximates."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {DTYPES}, got {dtype!r}")
        conv = to_float16 if dtype == "float16" else (lambda name, a: a.astype(np.float32))
        weights = {k: conv(k, v) if holds_fp16(k) else v for k, v in self.weights.items()}
        return Model.from_weights(self.cfg, weights, self.cos_sin)

    def __repr__(self) -> str:
        return f"Model({self.describe()})"

    def describe(self) -> str:
        c = self.cfg
        return (f"{c.num_layers} layers, d_model {c.d_model}, {c.num_heads} heads over {c.num_kv_heads} KV heads "
                f"x {c.head_dim}, vocab {c.vocab}, max context {c.max_len}")


def holds_fp16(name: str) -> bool:
    """Whether the fp16 engine holds weight ``name`` in float16: every matrix (embedding, projections,
    lm_head). Norm gains and q/k/v biases stay float32: d_model-sized, a rounding saved for free, and they
    act on the float32 residual stream and RMSNorm."""
    return not name.startswith(("norm", "bqkv"))


def to_float16(name: str, a) -> np.ndarray:
    """``a`` rounded to float16 (round to nearest even). A finite value past float16's range (|x| > 65504,
    rounding to inf) raises ValueError naming the tensor: an inf weight would turn a whole row of
    activations into inf or NaN several layers later, far from its cause. Values under float16's smallest
    normal (6.1e-5) lose bits, down to 0 under 6e-8: precision, not a wrong number, so they pass."""
    wide = np.asarray(a).astype(np.float32)  # bfloat16 and float16 widen exactly
    with np.errstate(over="ignore"):  # the overflow is reported below, by name
        half = wide.astype(np.float16)
    bad = ~np.isfinite(half) & np.isfinite(wide)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name}: value {float(wide[at]):g} at index {at} is outside float16's range "
                         f"(|x| <= {FP16_MAX:g}): refusing to store it as inf (serve this model in float32)")
    return half


def rope_table(cfg: ModelConfig, inv_freq=None):
    """RoPE table (max_len, head_dim) float32: cos of each pair's angle in the first half, sin in the
    second; pair p turns by pos * inv_freq[p], by default rope_base ** (-p / half) (rotate-half RoPE)."""
    half = cfg.head_dim // 2
    freq = cfg.rope_base ** (-np.arange(half) / half) if inv_freq is None else np.asarray(inv_freq, np.float64)
    if freq.shape != (half,):
        raise ValueError(f"inv_freq: expected ({half},), one frequency per pair, got {freq.shape}")
    angle = np.arange(cfg.max_len)[:, None] * freq[None, :]
    return np.concatenate([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)


# --- the reference: a plain float64 decode, each request on its own dense cache ------------------------


def _rope64(x, pos, cos_sin):
    """Rotate x (..., heads, head_dim) at position pos (an int, or one per leading row of x)."""
    half = x.shape[-1] // 2
    c = cos_sin[pos, :half].astype(np.float64)[..., None, :]  # one row per position, broadcast over heads
    s = cos_sin[pos, half:].astype(np.float64)[..., None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def _rmsnorm64(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def _attend64(q, keys, values, start: int):
    """Causal float64 attention of new tokens q (n, heads, head_dim) at positions start.. over cache
    rows keys / values (start + n, kv_heads, head_dim). Batched per KV head: all its heads and tokens in
    one matmul, new token t masked to keys 0..start + t."""
    n, H, D = q.shape
    group = H // keys.shape[1]
    hidden = np.repeat(np.arange(start + n)[None, :] > start + np.arange(n)[:, None], group, axis=0)
    o = np.empty((n, H, D))
    for g in range(keys.shape[1]):
        heads = slice(g * group, (g + 1) * group)  # the heads that read KV head g
        logits = q[:, heads].reshape(n * group, D) @ keys[:, g].T / math.sqrt(D)  # (n * group, start + n)
        logits[hidden] = -np.inf
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        o[:, heads] = ((p / p.sum(axis=-1, keepdims=True)) @ values[:, g]).reshape(n, group, D)
    return o


def _forward64(model: Model, W: dict, batch):
    """The float64 model on a batch of new tokens. ``batch``: per sequence (its new tokens, the
    position of the first, its dense cache (2, layers, max tokens, kv_heads, head_dim) of K and V),
    the new K/V rows written into it. Returns every new token's hidden state (tokens, d_model). The
    matmuls take the batch's tokens together; attention runs one sequence at a time, on its own cache."""
    c = model.cfg
    H, G, D = c.num_heads, c.num_kv_heads, c.head_dim
    lens = [len(tokens) for tokens, _, _ in batch]
    ends = np.cumsum(lens)
    pos = np.concatenate([start + np.arange(n) for (_, start, _), n in zip(batch, lens)])
    x = W["embed"][np.concatenate([np.asarray(tokens, dtype=np.int64) for tokens, _, _ in batch])]
    for i in range(c.num_layers):
        qkv = _rmsnorm64(x, W[f"norm1.{i}"], c.norm_eps) @ W[f"wqkv.{i}"]
        if f"bqkv.{i}" in W:  # Qwen2-style q/k/v biases
            qkv = qkv + W[f"bqkv.{i}"]
        q = _rope64(qkv[:, :H * D].reshape(-1, H, D), pos, model.cos_sin)
        k = _rope64(qkv[:, H * D:(H + G) * D].reshape(-1, G, D), pos, model.cos_sin)
        v = qkv[:, (H + G) * D:].reshape(-1, G, D)
        o = np.empty((len(pos), H, D))
        for (_, start, cache), n, end in zip(batch, lens, ends):
            rows = slice(end - n, end)  # this sequence's new tokens
            cache[0, i, start:start + n], cache[1, i, start:start + n] = k[rows], v[rows]
            o[rows] = _attend64(q[rows], cache[0, i, :start + n], cache[1, i, :start + n], start)
        x = x + o.reshape(-1, H * D) @ W[f"wo.{i}"]
        h_ = _rmsnorm64(x, W[f"norm2.{i}"], c.norm_eps)
        gate = h_ @ W[f"wgate.{i}"]
        x = x + (gate / (1 + np.exp(-gate)) * (h_ @ W[f"wup.{i}"])) @ W[f"wdown.{i}"]
    return x


def _decode64(model: Model, prompts, nums):
    """Greedy tokens of several requests and, for each, the gap between its logit and the runner-up's.

    The requests go side by side: the first step puts every whole prompt through the model (causal
    attention within each prompt), each later step the newest token of every unfinished request. A
    request attends only to its own dense cache, so its tokens are what it would get alone; batching
    only shares each step's weight matmuls."""
    c, W = model.cfg, {k: v.astype(np.float64) for k, v in model.weights.items()}
    caches = [np.zeros((2, c.num_layers, len(p) + n - 1, c.num_kv_heads, c.head_dim)) for p, n in zip(prompts, nums)]
    tokens = [[int(t) for t in p] for p in prompts]
    out, margins = [[] for _ in prompts], [[] for _ in prompts]
    batch = {r: (tokens[r], 0, caches[r]) for r in range(len(prompts)) if nums[r] > 0}
    while batch:
        x = _forward64(model, W, list(batch.values()))
        last = np.cumsum([len(t) for t, _, _ in batch.values()]) - 1  # each request's newest token
        logits = _rmsnorm64(x[last], W["norm_f"], c.norm_eps) @ W["lm_head"]
        for r, row in zip(list(batch), logits):
            top2 = np.sort(row)[-2:]
            nxt = int(np.argmax(row))
            out[r].append(nxt)
            margins[r].append(float(top2[1] - top2[0]))
            tokens[r].append(nxt)
            if len(out[r]) == nums[r]:
                del batch[r]
            else:
                batch[r] = ([nxt], len(tokens[r]) - 1, caches[r])
    return out, margins


def reference_decode(model: Model, prompt, num_new: int):
    """Greedy tokens of one request and, for each, the gap between its logit and the runner-up's."""
    out, margins = _decode64(model, [prompt], [int(num_new)])
    return out[0], margins[0]


def _decode_all(model, prompts, prompt_lens, output_lens):
    width = int(np.max(output_lens))
    tokens = np.full((len(prompt_lens), width), -1, dtype=np.int32)
    margins = np.full((len(prompt_lens), width), np.inf)
    out, gaps = _decode64(model, [prompts[r, :p] for r, p in enumerate(prompt_lens)], [int(n) for n in output_lens])
    for r, n in enumerate(output_lens):
        tokens[r, :n], margins[r, :n] = out[r], gaps[r]
    return tokens, margins


# --- the day contract ------------------------------------------------------------------------------


def make_requests(prompt_lens, output_lens, *, model: str = "tiny", seed: int = 0):
    """(model, prompts, prompt_lens, output_lens) for the given lengths, prompts (num_requests,
    max prompt) int32 with -1 past each prompt's length.

    For small workloads the weights are redrawn until every greedy choice of the float64 decode wins
    by at least MARGIN, so a float32 engine that is right can only produce the reference's tokens.
    """
    cfg = MODELS[model]
    rng = np.random.default_rng(seed)
    prompt_lens = np.asarray(prompt_lens, dtype=np.int32)
    output_lens = np.asarray(output_lens, dtype=np.int32)
    prompts = np.full((len(prompt_lens), int(prompt_lens.max())), -1, dtype=np.int32)
    for r, p in enumerate(prompt_lens):
        prompts[r, :p] = rng.integers(0, cfg.vocab, size=p)
    small = int(np.sum(prompt_lens + output_lens)) <= 600
    for _ in range(40):
        weights = Model(cfg, seed=int(rng.integers(1 << 31)))
        if not small or np.min(_decode_all(weights, prompts, prompt_lens, output_lens)[1]) >= MARGIN:
            break
    return weights, prompts, prompt_lens, output_lens


def make_inputs(n, seed: int = 0):
    """(model, prompts, prompt_lens, output_lens, block_size, num_blocks) for a :class:`Workload`
    (an int n: n requests of a small shape). See :func:`make_requests`."""
    wl = Workload(*n) if isinstance(n, (tuple, list)) else Workload(int(n), 6, 5, 4, max(8, 2 * int(n) + 4))
    max_len = MODELS[wl.model].max_len
    rng = np.random.default_rng(seed)
    prompt_lens = rng.integers(1, wl.max_prompt + 1, size=wl.num_requests)
    output_lens = rng.integers(1, wl.max_new + 1, size=wl.num_requests)
    if wl.num_requests > 1:  # the lengths' extremes always occur
        prompt_lens[0], output_lens[-1] = wl.max_prompt, wl.max_new
    prompt_lens = np.minimum(prompt_lens, max_len - output_lens)
    return (*make_requests(prompt_lens, output_lens, model=wl.model, seed=int(rng.integers(1 << 31))),
            wl.block_size, wl.num_blocks)


def reference(model, prompts, prompt_lens, output_lens, block_size, num_blocks):
    """Greedy tokens (num_requests, max output) int32, -1 past each request's output length."""
    prompts, prompt_lens, output_lens = (checking.to_host(a) for a in (prompts, prompt_lens, output_lens))
    return _decode_all(model, prompts, prompt_lens, output_lens)[0]


def traffic(model, prompts, prompt_lens, output_lens, block_size, num_blocks):
    """(bytes, FLOPs) at the minimum: each token's K/V written once, attention reading every earlier
    row once per token, the weights once per step of a perfectly batched schedule."""
    c = model.cfg
    kv_row = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4
    lens = checking.to_host(prompt_lens).astype(np.int64) + checking.to_host(output_lens) - 1
    rows_read = int(np.sum(lens * (lens + 1) // 2))  # token t attends over t + 1 rows
    weight_bytes = sum(w.nbytes for w in model.weights.values())
    steps = int(np.max(checking.to_host(output_lens)))
    params = sum(w.size for w in model.weights.values()) - c.vocab * c.d_model  # the embedding is a lookup
    flops = 2 * params * int(np.sum(lens)) + 4 * rows_read * c.num_heads * c.head_dim * c.num_layers
    return kv_row * (int(np.sum(lens)) + rows_read) + weight_bytes * steps, flops


# --- the fused kernel: RoPE on q and k, k and v into their cache slots ------------------------------


@cuda.jit
def rope_cache_kernel(qkv, positions, slot_mapping, cos_sin, query, key_cache, value_cache):
    """One thread per (token t, pair p), p < head_dim // 2, t = i // half.

    qkv: (tokens, (num_heads + 2 * num_kv_heads) * head_dim), each row [q heads | k heads | v heads];
    query: (tokens, num_heads, head_dim); caches: (num_blocks, block_size, num_kv_heads, head_dim);
    cos_sin: (max_len, head_dim) with c = cos_sin[pos, p], s = cos_sin[pos, half + p], pos = positions[t].

    For every q head and k head, rotate the pair (x1, x2) = (x[p], x[p + half]):
        out[p] = x1 * c - x2 * s        out[p + half] = x2 * c + x1 * s
    q goes to query[t]; k and v (v unrotated) go to the cache row of slot slot_mapping[t]
    (page slot // block_size, offset slot % block_size). Guard threads past tokens * half.

    qkv and the caches are float32, or float16 for the fp16 engine (query stays float32: day 78 reads it):
    widen each load to float32, rotate in float32; a store into a float16 cache rounds to float16.
    """
    # One thread per (token, pair p): it rotates (x[p], x[p + half]) of every head, so a warp's lanes
    # read consecutive words of each head (coalesced) and the position's cos/sin are loaded once.
    raise NotImplementedError("Day 90: find (t, p), load cos/sin at positions[t], rotate q into query, k into the "
                              "slot's row, copy v (28 lines)")


_ROPE_SIG = ("void(float32[:, ::1], int32[::1], int32[::1], float32[:, ::1], float32[:, :, ::1], "
             "float32[:, :, :, ::1], float32[:, :, :, ::1])")
_ROPE_SIG_FP16 = ("void(float16[:, ::1], int32[::1], int32[::1], float32[:, ::1], float32[:, :, ::1], "
                  "float16[:, :, :, ::1], float16[:, :, :, ::1])")  # the fp16 engine: fp16 qkv in, fp16 cache
KERNELS = {
    "naive": (rope_cache_kernel, _ROPE_SIG),
    "optimized": (rope_cache_kernel, _ROPE_SIG),
    "optimized.fp16": (rope_cache_kernel, _ROPE_SIG_FP16),
}


def rope_and_cache(qkv, positions, slot_mapping, cos_sin, key_cache, value_cache, num_heads: int):
    """Rotate the step's q and k, write k and v into the cache (in place); return q (tokens, heads, dim)
    float32. qkv and the caches are all float32 or all float16 (Numba compiles one kernel for each)."""
    launch.check_array("key_cache", key_cache, dtype=(np.float32, np.float16), ndim=4)
    launch.check_array("qkv", qkv, dtype=key_cache.dtype, ndim=2)
    launch.check_array("value_cache", value_cache, dtype=key_cache.dtype, shape=key_cache.shape)
    tokens = qkv.shape[0]
    _, _, kv_heads, head_dim = key_cache.shape
    if qkv.shape[1] != (num_heads + 2 * kv_heads) * head_dim or head_dim % 2:
        raise ValueError(f"qkv: expected {(num_heads + 2 * kv_heads) * head_dim} columns "
                         f"({num_heads} q heads + 2 x {kv_heads} KV heads of {head_dim}), got {qkv.shape[1]}")
    launch.check_array("positions", positions, dtype=np.int32, shape=(tokens,))
    launch.check_array("slot_mapping", slot_mapping, dtype=np.int32, shape=(tokens,))
    launch.check_array("cos_sin", cos_sin, dtype=np.float32, shape=(None, head_dim))
    d_qkv, d_pos, d_slots, d_cs = launch.to_device(qkv, positions, slot_mapping, cos_sin)
    query = launch.empty((tokens, num_heads, head_dim), np.float32)
    n = tokens * (head_dim // 2)
    rope_cache_kernel[launch.blocks(n, THREADS), THREADS](d_qkv, d_pos, d_slots, d_cs, query, key_cache,
                                                          value_cache)
    return launch.result(query, qkv)


@cuda.jit
def swiglu_kernel(gate_up, out):
    """The SwiGLU between the MLP's two GEMMs, on one GEMM's output: gate_up (rows, 2 * hidden) holds x Wg
    in its first hidden columns and x Wu in the rest (the engine concatenates the two weights), and
    out[r, c] = silu(gate) * up (day 71's silu) in float32, stored in out's dtype (float16 rounds once, as
    the down projection's input would be). A grid-stride loop over out's flat index."""
    hidden = out.shape[1]
    i = cuda.grid(1)
    while i < out.size:
        r = i // hidden
        c = i - r * hidden
        out[r, c] = silu(float32(gate_up[r, c])) * float32(gate_up[r, hidden + c])
        i += cuda.gridsize(1)


_SWIGLU_SIG = "void({t}[:, ::1], {t}[:, ::1])"
KERNELS["optimized.swiglu"] = (swiglu_kernel, _SWIGLU_SIG.format(t="float32"))
KERNELS["optimized.swiglu.fp16"] = (swiglu_kernel, _SWIGLU_SIG.format(t="float16"))
# The engine's attention on a GPU at the benchmark's model ("small": head 64, 8 query heads over 2 KV
# heads, a float32 cache of 16-token pages): day 89's decode kernel and day 87's prefill kernel for that
# shape, built as DecodePlan and attention_mixed build them at the first step, so that make inspect shows
# the kernels the engine runs and bench_all's workers compile them ahead.
_SMALL = MODELS["small"]
_SMALL_HEADS = tuned.heads_per_block(_SMALL.num_heads, _SMALL.num_kv_heads, tuned.MAX_GROUP)


def _small_decode(block_size: int):
    """The decode launch DecodePlan builds for the small model over float32 pages of block_size tokens."""
    cache = np.empty((1, block_size, _SMALL.num_kv_heads, _SMALL.head_dim), np.float32)
    return common.attention_launch(1, _SMALL.num_heads, _SMALL.head_dim, 1, cache, heads=_SMALL_HEADS,
                                   num_warps=tuned.DEFAULT_WARPS)


_DECODE = _small_decode(16)
KERNELS["optimized.decode"] = (_DECODE.kernel, _DECODE.signature)
KERNELS["optimized.prefill"] = (chunked.prefill_kernel(_SMALL.head_dim),
                                chunked.SIG_TILED.replace("float16", "float32"))
# v1's contiguous cache is the same kernel over pages of max_len tokens: one page a sequence.
_DECODE_V1 = _small_decode(_SMALL.max_len)
KERNELS["naive.decode"] = (_DECODE_V1.kernel, _DECODE_V1.signature)


# --- the engine -----------------------------------------------------------------------------------


class StepRows(NamedTuple):
    """What one step feeds through the model (Engine._batch): a row per new token, sequence by sequence."""

    tokens: np.ndarray  # (rows,) int32: each new token's id
    positions: np.ndarray  # (rows,) int32: its position in its sequence
    slots: np.ndarray  # (rows,) int32: the cache slot its K/V go to
    tables: np.ndarray  # (seqs, max pages) int32: each sequence's block table, -1 past its pages
    query_start: np.ndarray  # (seqs + 1,) int32: sequence s's rows are query_start[s] .. query_start[s + 1] - 1
    context_lens: np.ndarray  # (seqs,) int32: the tokens each sequence attends over, its new ones included
    last: list  # the row of each sequence's last new token (where its logits are taken)

    def row_tables(self):
        """(rows, max pages): every row of a sequence with its sequence's table (day 78's layout: a row is
        a query with its own table and context length, positions + 1)."""
        return np.repeat(self.tables, np.diff(self.query_start), axis=0), self.positions + 1


def attention_per_row(kernel=None):
    """An Engine attention (a function of a step's rows returning the step's attend(q, key_cache,
    value_cache, scale), called once a layer): every new token a query row of a day-78-style ``kernel``
    (query, key_cache, value_cache, block_tables, context_lens, scale) with its sequence's table and a
    context of position + 1. A prompt of n tokens is n rows each reading its own prefix: n (n + 1) / 2
    row reads where one pass over the prompt's K/V would do. By default day 78's naive kernel, one
    thread a head: the simulator pays per thread."""
    kernel = kernel or pa.naive

    def step(rows: StepRows):
        tables, lens = rows.row_tables()
        if ON_GPU:  # once a step, not once a layer: every layer reads the same tables and lengths
            tables, lens = launch.to_device(tables, lens)
        return lambda q, key_cache, value_cache, scale: kernel(q, key_cache, value_cache, tables, lens, scale)

    return step


# --- a decode step's attention, planned once a step ------------------------------------------------

_WORDS: dict = {}  # id(cache) -> {load words: the cache's flat word view}, dropped with the cache


def _cache_words(cache, load_words: int):
    """Day 78's kernel_words view of a layer's cache, made once per cache (each view is a Numba array
    object, tens of microseconds of Python to build), not once per layer per step."""
    views = _WORDS.get(id(cache))
    if views is None:
        try:  # forgotten with the cache, so that a new array at the same address gets its own views
            weakref.finalize(cache, _WORDS.pop, id(cache), None)
        except TypeError:  # an array type without weak references (CuPy's): no memo, a view each call
            return pa.kernel_words(cache, load_words)
        views = _WORDS[id(cache)] = {}
    if load_words not in views:
        views[load_words] = pa.kernel_words(cache, load_words)
    return views[load_words]


class DecodePlan:
    """Day 89's tuned launch (tuned.optimized) for one decode step, worked out once for all its layers.

    Every layer of a step launches attention on the same tables, lengths and shapes; only q and the
    layer's caches change. tuned.optimized would check the six inputs twice, pick the partition, fetch
    the compiled kernel, build two word views of the caches and three output arrays, and let Numba's
    dispatcher type eleven arguments, at every layer: hundreds of microseconds of host time around a
    kernel of a few dozen. Here the first layer does the checks and the choices, the partition buffers
    are allocated once and reused by every layer (one stream runs the layers in order: a layer's
    outputs are consumed before the next layer's kernel overwrites them), the word views are made once
    per cache, and each layer is one prepared launch (course.prepared), two where the context is split.
    """

    def __init__(self, q, key_cache, value_cache, tables, context_lens, scale, width: int):
        tuned.check_inputs(q, key_cache, value_cache, tables, context_lens, scale)
        self.tables, self.lens = tables, context_lens
        num_seqs, num_heads, head_dim = q.shape
        _, block_size, kv_heads, _ = key_cache.shape
        heads = tuned.heads_per_block(num_heads, kv_heads, tuned.MAX_GROUP)
        partition = tuned.tuned_partition(num_seqs, num_heads, kv_heads, width * block_size, block_size,
                                          launch.sm_count())
        # day 89's launch, as launch_attention works it out
        plan = common.attention_launch(num_seqs, num_heads, head_dim, width, key_cache, heads=heads,
                                       part_pages=partition // block_size or None, num_warps=tuned.DEFAULT_WARPS)
        self.part_pages, self.load_words, parts = plan.part_pages, plan.load_words, plan.parts
        self.attend = prepare(plan.kernel, plan.signature)[plan.grid, plan.threads]
        # On a GPU, CuPy arrays (the prepared launches read them in place, and the engine's next GEMM takes
        # the output as it is); in the simulator, day outputs poisoned as usual.
        def empty(shape):
            return _xp().empty(shape, np.float32) if ON_GPU else launch.empty(shape, np.float32)

        self.part_out = empty((num_seqs, num_heads, parts, head_dim))
        self.part_max = empty((num_seqs, num_heads, parts))
        self.part_sum = empty((num_seqs, num_heads, parts))
        self.scale = float32(scale * pa.LOG2E)
        self.kv_heads = kv_heads
        if parts == 1:  # one partition: its normalized output is the answer, seen in q's shape
            self.out, self.reduce = self.part_out.reshape(q.shape), None
        else:
            self.out = empty(q.shape)
            reduce_kernel, reduce_sig = tuned.DAY81_KERNELS["optimized.reduce"]
            self.reduce = prepare(reduce_kernel, reduce_sig)[(num_heads, num_seqs), head_dim]
            self.partition = partition

    def __call__(self, q, key_cache, value_cache):
        self.attend(self.part_out, self.part_max, self.part_sum, q, _cache_words(key_cache, self.load_words),
                    _cache_words(value_cache, self.load_words), self.tables, self.lens, self.scale, self.kv_heads,
                    self.part_pages)
        if self.reduce is not None:
            self.reduce(self.out, self.part_out, self.part_max, self.part_sum, self.lens, self.partition)
        return self.out


def decode_attention(tables, context_lens):
    """An Engine attention's attend for a step of decodes only: the tables and lengths uploaded once, the
    launch planned at the first layer (DecodePlan) and repeated by the others. Its output array is the
    step's, reused by every layer: read it before the next layer's attention, as the engine does."""
    d_tables, d_lens = launch.to_device(tables, context_lens)
    width = tables.shape[1]
    plan = None

    def attend(q, key_cache, value_cache, scale):
        nonlocal plan
        if plan is None:
            plan = DecodePlan(q, key_cache, value_cache, d_tables, d_lens, scale, width)
        return plan(q, key_cache, value_cache)

    return attend


def attention_mixed(rows: StepRows):
    """The Engine's attention on a GPU. Decodes go through day 89's tuned PagedAttention launch (a block
    per KV head's group of query heads, long contexts split into partitions), prompts through day 87's
    chunked-prefill kernel (16 new tokens of a sequence a block, each K/V row staged once for all 16).
    The step's decoding sequences come first (Engine.schedule appends what it admits): the leading
    sequences with one new token take the decode kernel, the rest the prefill kernel, and their outputs
    stand in row order. A head size day 87 does not take (past 128, or not a multiple of 32) sends
    the prompts through day 89 a row at a time. Tables, lengths and the prefill tile list are uploaded
    once a step; each layer launches one or two kernels on them (plus day 89's reduce where it splits)."""
    q_lens = np.diff(rows.query_start)
    n_dec = len(q_lens) if (q_lens == 1).all() else int(np.argmax(q_lens > 1))  # leading one-token sequences
    if n_dec == len(q_lens):  # decodes only (or one-token prompts): one table and one length a row already
        return decode_attention(rows.tables, rows.context_lens)
    # the decodes through the same planned launch as a decode-only step's (their rows lead: q[:n_dec])
    dec_attend = decode_attention(rows.tables[:n_dec], rows.context_lens[:n_dec]) if n_dec else None
    split = int(rows.query_start[n_dec])  # the first prompt row
    query_start = np.ascontiguousarray(rows.query_start[n_dec:] - split)
    ctx = rows.context_lens[n_dec:]
    pre = launch.to_device(rows.tables[n_dec:], query_start, ctx, chunked.tile_list(query_start, ctx))
    row_tables = None

    def attend(q, key_cache, value_cache, scale):
        nonlocal row_tables
        head_dim = q.shape[2]
        if head_dim % chunked.WARP or head_dim > chunked.MAX_HEAD_DIM:  # day 87's kernels do not take it
            if row_tables is None:
                row_tables = launch.to_device(*rows.row_tables())
            return tuned.optimized(q, key_cache, value_cache, *row_tables, scale)
        out = _xp().empty(q.shape, dtype=np.float32)
        if n_dec:  # copied out at once: the plan's output array is the next layer's too
            out[:n_dec] = _to_xp(dec_attend(q[:n_dec], key_cache, value_cache, scale))
        out[split:] = _to_xp(chunked.launch_prefill(q[split:], key_cache, value_cache, *pre, scale))
        return out

    return attend


@dataclass
class Sequence:
    rid: int
    prompt: list
    max_new: int
    out: list = field(default_factory=list)
    cached: int = 0  # tokens whose K/V are in the cache
    new_tokens: int = 0  # tokens this step feeds through the model

    @property
    def tokens(self) -> list:
        return self.prompt + self.out

    def tail(self, n: int) -> list:
        """The last n of tokens, without building the whole list."""
        n_out = len(self.out)
        if n <= n_out:
            return self.out[n_out - n:]
        return self.prompt[len(self.prompt) - (n - n_out):] + self.out


@dataclass
class Stats:
    steps: int = 0
    generated: int = 0
    preemptions: int = 0
    peak_running: int = 0
    peak_blocks: int = 0
    peak_blocks_running: int = 0  # sequences running when the peak was reached
    seconds: float = 0.0
    attention_seconds: float = 0.0
    margins: dict = field(default_factory=dict)  # rid -> the top-2 logit gap of each generated token
    # Engine(profile=True): seconds per phase of a step (PHASES), the device synchronised at each
    # boundary so that a phase's kernels are counted in it; what is left of `seconds` is Python between.
    phases: dict = field(default_factory=dict)


PHASES = ("schedule", "batch + uploads", "matmuls + norms", "rope + cache", "attention", "all-reduce",
          "sampling")


def _xp():
    if ON_GPU:
        import cupy

        return cupy
    return np


def _to_xp(a):
    if isinstance(a, np.ndarray) or not ON_GPU:
        return checking.to_host(a)
    import cupy

    return cupy.asarray(a)


def _sync():
    if ON_GPU:
        cuda.synchronize()


class SpanTimer:
    """Device seconds inside marked spans of a step (``with timer.span(): ...``) without stalling the host.

    On a GPU each span is a pair of CUDA events recorded on the stream, queued behind the kernels like
    any launch, so the host runs on ahead; :meth:`collect` sums their elapsed times once the stream has
    passed them (after the step's device-to-host copy, which waits for everything queued before it). A
    span so measured holds its kernels and any gaps where the GPU waited for the host to launch them.
    A host synchronisation around each span would measure the same, but would also stop the host
    from queueing the next kernels while the GPU runs: the step would cost host + device time instead
    of the longer of the two. In the simulator every launch runs to completion before it returns:
    the wall clock of the span."""

    def __init__(self):
        self._pairs: list = []  # (start, end) events, reused from step to step
        self._used = 0
        self._wall = 0.0

    @contextlib.contextmanager
    def span(self):
        if not ON_GPU:
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self._wall += time.perf_counter() - t0
            return
        if self._used == len(self._pairs):
            self._pairs.append((cuda.event(), cuda.event()))
        start, end = self._pairs[self._used]
        self._used += 1
        start.record()
        try:
            yield
        finally:
            end.record()

    def collect(self) -> float:
        """Seconds inside the spans since the last collect (on a GPU: waits until the last one has ended)."""
        if not ON_GPU:
            total, self._wall = self._wall, 0.0
            return total
        if not self._used:
            return 0.0
        self._pairs[self._used - 1][1].synchronize()  # one stream: the last end is the last to complete
        total = sum(cuda.event_elapsed_time(a, b) for a, b in self._pairs[:self._used]) / 1e3
        self._used = 0
        return total


class Engine:
    """Continuous batching over a KV cache of ``num_blocks`` pages of ``block_size`` tokens per layer.

    ``contiguous=True`` is v1: the same budget carved into max_len-token slots, one per sequence
    (a page of max_len tokens). ``attention``: a function of a step's rows (StepRows) that returns the
    step's attend(q, key_cache, value_cache, scale), called once a layer: by default attention_mixed on
    a GPU (day 89 for the decodes, day 87 for the prompts) and attention_per_row() in the simulator
    (day 78's one-thread-a-head kernel: the simulator pays per thread, and the tuned kernels have 64
    or more of them per head).

    ``dtype="float16"``: the matrices are held in fp16 on the device (rounded once, here), the activations
    between matmuls are fp16 (each matmul reads fp16 operands and accumulates in fp32: cuBLAS does on a
    GPU; on the host a float32 BLAS product of the fp16 values does the same ~100x faster than NumPy's
    fp16 matmul loop), the KV cache is fp16, and the logits come out fp32. RMSNorm, SwiGLU's sigmoid,
    attention's softmax (day 78 widens the cache on load) and the residual stream stay float32. The
    residual is a choice: Hugging Face and vLLM keep it in the model's dtype (half the activation bytes,
    fused with the norm); this engine keeps it in float32, because it is the running sum of every layer's
    update, and rounding that sum to 11 bits at each of 2 x layers adds is the error that compounds. It
    costs 4 B x d_model per token row, nothing next to the weights a step reads.
    """

    def __init__(self, model: Model, block_size: int, num_blocks: int, *, contiguous: bool = False,
                 attention=None, dtype: str = "float32", profile: bool = False, fused: bool | None = None):
        if dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {DTYPES}, got {dtype!r}")
        c = model.cfg
        self.model, self.cfg, self.dtype = model, c, np.dtype(dtype)
        self.profile = profile
        self.contiguous = contiguous
        budget = num_blocks * block_size
        if contiguous:
            block_size, num_blocks = c.max_len, budget // c.max_len
            if num_blocks == 0:
                raise ValueError(f"a budget of {budget} token slots holds no max_len ({c.max_len}) reservation")
        self.block_size, self.num_blocks = block_size, num_blocks
        self.blocks = BlockManager(num_blocks, block_size)
        self.attention = attention or (attention_mixed if ON_GPU else attention_per_row())
        xp = _xp()
        self.W = {k: xp.asarray(v) for k, v in model.astype(dtype).weights.items()}
        # The sublayers' edges fused (on a GPU by default; the simulator's engine keeps NumPy there, where a
        # launch of day 59's 256-thread blocks costs far more than the arithmetic, and a test turns it on):
        # each residual add and the RMSNorm after it in one kernel (day 59), and the MLP's gate and up
        # projections one GEMM over their concatenated weights with SwiGLU in one kernel after it: a
        # layer's ~20 small CuPy kernels between the GEMMs become three launches.
        self.fused = ON_GPU if fused is None else bool(fused)
        if self.fused:
            for i in range(c.num_layers):
                self.W[f"wgu.{i}"] = xp.concatenate([self.W.pop(f"wgate.{i}"), self.W.pop(f"wup.{i}")], axis=1)
            wide = c.d_model % addnorm.VEC == 0  # every array is a whole allocation: 16-byte aligned
            any_sig = addnorm._SIG_FUSED_ANY.format(t="float32")
            self._add_norm_kernel = (prepare(*addnorm.KERNELS["optimized"]) if wide else
                                     prepare(addnorm.fused_add_rmsnorm_kernel, any_sig))
            self._add_norm_wide = wide
            self._swiglu = prepare(swiglu_kernel, _SWIGLU_SIG.format(t=self.dtype.name))
        # The host has no fp16 BLAS: keep float32 copies of the fp16 values (exact) for float32 GEMMs.
        self._W32 = ({k: v.astype(np.float32) for k, v in self.W.items() if holds_fp16(k)}
                     if dtype == "float16" and not ON_GPU else None)
        self.cos_sin = launch.to_device(model.cos_sin)[0] if ON_GPU else model.cos_sin  # Numba's: no view a layer
        # The fused RoPE + cache write, typed once for this engine's dtype: each layer's launch is then a
        # prepared one (course.prepared), its qkv a CuPy array read in place (rope_and_cache checks and
        # converts its arguments at every call, as a day's host function must).
        self._rope = prepare(rope_cache_kernel, _ROPE_SIG_FP16 if self.dtype == np.float16 else _ROPE_SIG)
        shape = (num_blocks, block_size, c.num_kv_heads, c.head_dim)
        # NaN everywhere no token was written: a read past a context length cannot go unnoticed.
        nan = np.full(shape, np.nan, dtype=self.dtype)
        self.key_cache = [cuda.to_device(nan) for _ in range(c.num_layers)]
        self.value_cache = [cuda.to_device(nan) for _ in range(c.num_layers)]
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []  # admission order: the newest last
        self.finished: dict[int, Sequence] = {}
        self.stats = Stats()
        self.attention_time = SpanTimer()  # Stats.attention_seconds, collected once a step

    def add_request(self, rid: int, prompt, max_new: int) -> None:
        prompt = [int(t) for t in prompt]
        if not prompt or max_new < 1 or len(prompt) + max_new > self.cfg.max_len:
            raise ValueError(f"request {rid}: prompt of {len(prompt)} tokens + {max_new} new must be 1..."
                             f"{self.cfg.max_len}")
        if self.blocks.blocks_for(len(prompt) + max_new) > self.num_blocks:
            raise ValueError(f"request {rid} needs {self.blocks.blocks_for(len(prompt) + max_new)} blocks at its "
                             f"longest; the whole cache has {self.num_blocks}")
        self.waiting.append(Sequence(rid, prompt, int(max_new)))

    # --- scheduling: which sequences run this step, and where their new tokens go ------------------

    def _preempt(self, seq: Sequence) -> None:
        """Free the sequence's pages; it waits at the front and recomputes its tokens when readmitted."""
        self.blocks.free(seq.rid)
        seq.cached = 0
        self.waiting.appendleft(seq)
        self.stats.preemptions += 1

    def schedule(self) -> list[Sequence]:
        """Reserve one slot for every running sequence's next token, oldest first, preempting the newest
        when the pages run out; then admit waiting requests, first come first served, while their
        tokens fit. Returns the step's sequences, each with ``new_tokens`` set.

        - running sequences (self.running, oldest first) each need one slot: self.blocks.append_slot(rid)
          raises OutOfBlocksError, changing nothing, when no page is free; then preempt the newest
          running sequence (self._preempt) and try again; if that was the sequence itself, stop.
          A sequence that got its slot feeds 1 new token.
        - then, while the first waiting request's tokens (prompt, plus its output so far if it was
          preempted) fit (self.blocks.can_allocate), allocate them, set new_tokens to all of them
          (a preempted sequence recomputes its K/V) and append it to self.running.
        """
        raise NotImplementedError("Day 90: a loop over self.running with append_slot / _preempt, then a loop admitting "
                                  "from self.waiting (16 lines)")

    # --- one step of the model over every scheduled token ------------------------------------------

    def _batch(self, seqs) -> StepRows:
        """The step's rows (StepRows): per new token its id, position and slot; per sequence its block
        table, where its rows start and the context it attends over (its new tokens included).

        Built with whole-array NumPy, not a loop of small assignments per sequence: a decode step of 256
        sequences would spend about a millisecond of host time in such a loop (measured on a CPU),
        and a prefill step carries a row per prompt token. Positions and slots come from the tables
        as reshape-and-cache reads them (day 77): slot = table[pos // block_size] * block_size +
        pos % block_size."""
        n_seqs, bs = len(seqs), self.block_size
        counts = np.fromiter((seq.new_tokens for seq in seqs), np.int64, n_seqs)
        lens = np.fromiter((len(seq.prompt) + len(seq.out) for seq in seqs), np.int64, n_seqs)
        tables = [self.blocks.block_table(seq.rid) for seq in seqs]
        widths = np.fromiter(map(len, tables), np.int64, n_seqs)
        block_tables = np.full((n_seqs, int(widths.max())), -1, dtype=np.int32)  # -1: unused
        # Row-major order of the mask is the tables' concatenated order.
        block_tables[np.arange(block_tables.shape[1])[None, :] < widths[:, None]] = np.fromiter(
            itertools.chain.from_iterable(tables), np.int32, int(widths.sum()))
        query_start = np.zeros(n_seqs + 1, dtype=np.int32)
        np.cumsum(counts, out=query_start[1:])
        rows = int(query_start[-1])
        seq_of_row = np.repeat(np.arange(n_seqs), counts)
        positions = np.arange(rows) - query_start[seq_of_row] + (lens - counts)[seq_of_row]
        page = positions // bs
        if (page >= widths[seq_of_row]).any():  # the scheduler reserved fewer slots than the step feeds
            raise RuntimeError("a step's token has no page in its sequence's block table")
        slots = block_tables[seq_of_row, page] * bs + positions % bs
        if rows == n_seqs:  # a decode step: each sequence's newest token
            tokens = np.fromiter((seq.out[-1] if seq.out else seq.prompt[-1] for seq in seqs), np.int32, rows)
        else:
            tokens = np.fromiter(itertools.chain.from_iterable(seq.tail(n) for seq, n in zip(seqs, counts)),
                                 np.int32, rows)
        return StepRows(tokens, positions.astype(np.int32), slots.astype(np.int32), block_tables, query_start,
                        lens.astype(np.int32), (query_start[1:] - 1).tolist())

    def _mm(self, a, name, out=None):
        """a @ W[name]: in float32, or fp16 operands with fp32 accumulation and an fp16 result (``out``
        float32: an fp32 result, for the logits)."""
        w = self.W[name]
        if self.dtype == np.float32:
            return a @ w
        a = a.astype(np.float16, copy=False)  # the activation between matmuls: rounded to fp16
        if self._W32 is not None:  # the host: exact fp16 products, summed in float32
            y = a.astype(np.float32) @ self._W32[name]
            return y if out is not None else y.astype(np.float16)
        return a @ w if out is None else _gemm_fp16_fp32(a, w)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Count the enclosed work in stats.phases[name] when profiling (the device synchronised on the
        way in and out, so the phase's kernels land in it); nothing at all otherwise."""
        if not self.profile:
            yield
            return
        _sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            _sync()
            self.stats.phases[name] = self.stats.phases.get(name, 0.0) + time.perf_counter() - t0

    def reduce(self, partial):
        """The sum over the GPUs holding a slice of a row-split projection: on one GPU the partial sum
        is the whole sum. Tensor parallelism (solutions/tensor_parallel.py) all-reduces here."""
        return partial

    def _add_norm(self, x, part, name: str, grid: int):
        """(RMSNorm(x + part) * W[name], x + part) with the residual x float32; part None: nothing to add.
        Fused: day 59's kernel, part widened to float32 first (the fp16 engine's GEMM output)."""
        eps, g = self.cfg.norm_eps, self.W[name]
        if part is None or not self.fused:
            x = x if part is None else x + part  # fp16 + float32 -> float32
            return _rmsnorm(x, g, eps), x
        xp = _xp()
        part = part.astype(np.float32, copy=False)
        h, new_x = xp.empty(x.shape, np.float32), xp.empty(x.shape, np.float32)
        args = (part, x, g, np.float32(eps)) + (() if self._add_norm_wide else (False,)) + (h, new_x)
        self._add_norm_kernel[grid, addnorm.THREADS](*args)
        return h, new_x

    def _mlp(self, h, i: int, grid: int):
        """SwiGLU's down projection input from h, then the projection: (silu(h Wg) * (h Wu)) Wd."""
        if not self.fused:
            # SwiGLU's sigmoid in float32: exp(-gate) overflows fp16 for gate < -11
            gate = self._mm(h, f"wgate.{i}").astype(np.float32, copy=False)
            return self._mm(gate / (1 + _xp().exp(-gate)) * self._mm(h, f"wup.{i}"), f"wdown.{i}")
        gate_up = self._mm(h, f"wgu.{i}")  # (rows, 2 * hidden) in the engine's dtype
        a = _xp().empty((h.shape[0], gate_up.shape[1] // 2), self.dtype)
        self._swiglu[grid, THREADS](gate_up, a)
        return self._mm(a, f"wdown.{i}")

    def forward(self, seqs):
        """Logits (len(seqs), vocab) float32 at each sequence's last new token."""
        with self.phase("batch + uploads"):
            rows = self._batch(seqs)
        return self.forward_rows(rows)

    def forward_rows(self, rows):
        """The model over a step's rows (``_batch``'s tuple): logits at each sequence's last new token."""
        c, W, xp = self.cfg, self.W, _xp()
        tokens, positions, slots, last = rows.tokens, rows.positions, rows.slots, rows.last
        with self.phase("batch + uploads"):
            d_pos, d_slots = launch.to_device(positions, slots) if ON_GPU else (positions, slots)
            attend = self.attention(rows)  # the step's tables and lengths, uploaded once for every layer
            # Every layer's rotated q goes to the same array in turn: a layer's attention reads it before
            # the next layer's RoPE launch, behind it on the one stream, overwrites it.
            q = launch.empty((len(tokens), c.num_heads, c.head_dim), np.float32)
            rope = self._rope[launch.blocks(len(tokens) * (c.head_dim // 2), THREADS), THREADS]
            if self.fused:  # the step's grids, worked out once (each asks the device for its SM count)
                norm_grid = addnorm._grid(len(tokens))
                swiglu_grid = launch.grid_stride_blocks(len(tokens) * c.hidden, THREADS)
            else:
                norm_grid = swiglu_grid = 0
        with self.phase("matmuls + norms"):
            x = W["embed"][xp.asarray(tokens)].astype(np.float32, copy=False)  # (rows, d_model): the residual
        scale = 1.0 / math.sqrt(c.head_dim)
        part = None  # the last sublayer's output, added to the residual x by the next norm
        for i in range(c.num_layers):
            with self.phase("matmuls + norms"):
                h, x = self._add_norm(x, part, f"norm1.{i}", norm_grid)
                qkv = self._mm(h, f"wqkv.{i}")  # (rows, (H + 2 KVH) * D)
                if f"bqkv.{i}" in W:  # Qwen2-style q/k/v biases
                    qkv = (qkv + W[f"bqkv.{i}"]).astype(self.dtype, copy=False)
            with self.phase("rope + cache"):  # rope_and_cache's kernel, launched as prepared above
                rope(qkv, d_pos, d_slots, self.cos_sin, q, self.key_cache[i], self.value_cache[i])
            with self.phase("attention"), self.attention_time.span():
                o = attend(q, self.key_cache[i], self.value_cache[i], scale)
            with self.phase("matmuls + norms"):
                part = self.reduce(self._mm(_to_xp(o).reshape(len(tokens), -1), f"wo.{i}"))
                h, x = self._add_norm(x, part, f"norm2.{i}", norm_grid)
                part = self.reduce(self._mlp(h, i, swiglu_grid))
        with self.phase("matmuls + norms"):
            rows_out = xp.asarray(last)  # only each sequence's last row reaches the head
            x = x[rows_out] + part[rows_out]  # fp16 + float32 -> float32
            return self._mm(_rmsnorm(x, W["norm_f"], c.norm_eps), "lm_head", out=np.float32)

    def step(self) -> None:
        with self.phase("schedule"):
            seqs = self.schedule()
        if not seqs:
            return
        logits = self.forward(seqs)
        with self.phase("sampling"):
            picks, gaps = greedy_picks(logits)
        s = self.stats
        s.attention_seconds += self.attention_time.collect()  # the copy above waited for the step's kernels
        s.steps += 1
        s.peak_running = max(s.peak_running, len(seqs))
        used = self.num_blocks - self.blocks.num_free_blocks
        if used > s.peak_blocks:
            s.peak_blocks, s.peak_blocks_running = used, len(seqs)
        done = False
        for seq, tok, gap in zip(seqs, picks.tolist(), gaps.tolist()):
            seq.cached = len(seq.prompt) + len(seq.out)  # every token fed so far is in the cache now
            seq.out.append(tok)
            s.margins.setdefault(seq.rid, []).append(gap)
            if len(seq.out) == seq.max_new:
                self.blocks.free(seq.rid)
                self.finished[seq.rid] = seq
                done = True
        s.generated += len(seqs)
        if done:  # one pass over the running list, not a remove() per finished sequence
            self.running = [seq for seq in self.running if seq.rid not in self.finished]

    def run(self) -> dict[int, list[int]]:
        """Serve every request to completion; returns rid -> generated tokens."""
        start = time.perf_counter()
        # On a GPU the kernels' outputs are not poisoned: every launch.empty would add a fill kernel and
        # its conversion (five a layer). The simulator keeps poisoning, so an output a kernel leaves
        # unwritten still shows up as NaN tokens in the engine's tests.
        with launch.no_poison() if ON_GPU else contextlib.nullcontext():
            while self.waiting or self.running:
                self.step()
        _sync()
        self.stats.seconds += time.perf_counter() - start
        self.stats.attention_seconds += self.attention_time.collect()  # spans outside a step (none in day 90's)
        return {rid: seq.out for rid, seq in sorted(self.finished.items())}


def _gemm_fp16_fp32(a, w):
    """a (m, k) @ w (k, n), both fp16 CuPy arrays, accumulated and returned in float32: one cuBLAS
    gemmEx. CuPy's own fp16 matmul also accumulates in fp32 but rounds its result to fp16, which at
    |logit| ~ 10 is a step of 2^-7: enough to tie greedy choices that float32 tells apart."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = w.shape[1]
    out = cupy.empty((m, n), dtype=np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)  # host scalars: the handle's default mode
    # Row-major out = a @ w is column-major out^T = w^T a^T: cuBLAS reads w as (n, k) and a as (k, m).
    cublas.gemmEx(cupy.cuda.device.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                  one.ctypes.data, w.data.ptr, cupy.cuda.runtime.CUDA_R_16F, n,
                  a.data.ptr, cupy.cuda.runtime.CUDA_R_16F, k,
                  zero.ctypes.data, out.data.ptr, cupy.cuda.runtime.CUDA_R_32F, n,
                  cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT)
    return out


def greedy_picks(logits):
    """(picks, gaps) on the host for float32 logits (rows, vocab): each row's argmax (the first, on a tie)
    and its lead over the row's second-largest logit (0 on a tie), in one device-to-host copy. The
    argmax, its logit, then the max with that one entry masked: a few passes over the logits, where a
    sort of every row for its top two would cost a real vocabulary (128k) far more each step."""
    xp = _xp()
    logits = xp.asarray(logits)  # a host array too (a grader's): on a GPU, one upload
    rows = xp.arange(logits.shape[0])
    picks = xp.argmax(logits, axis=1)
    best = logits[rows, picks]
    second = xp.where(xp.arange(logits.shape[1])[None, :] == picks[:, None], -np.inf, logits).max(axis=1)
    both = checking.to_host(xp.stack([picks.astype(np.float64), (best - second).astype(np.float64)]))
    return both[0].astype(np.int64), both[1]


def _rmsnorm(x, g, eps):
    xp = _xp()
    return x / xp.sqrt(xp.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * g


# --- host functions ---------------------------------------------------------------------------------


def _check(model, prompts, prompt_lens, output_lens, block_size, num_blocks):
    if not (hasattr(model, "cfg") and hasattr(model, "weights")):  # any Model: graders build their own
        raise ValueError(f"model: expected a Model, got {type(model).__name__}")
    launch.check_array("prompts", prompts, dtype=np.int32, ndim=2)
    launch.check_array("prompt_lens", prompt_lens, dtype=np.int32, shape=(prompts.shape[0],))
    launch.check_array("output_lens", output_lens, dtype=np.int32, shape=(prompts.shape[0],))
    for name, v in (("block_size", block_size), ("num_blocks", num_blocks)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    prompts, prompt_lens, output_lens = (checking.to_host(a) for a in (prompts, prompt_lens, output_lens))
    c = model.cfg
    if prompts.shape[0] == 0:
        raise ValueError("prompts: expected at least one request")
    if prompt_lens.min() < 1 or prompt_lens.max() > prompts.shape[1]:
        raise ValueError(f"prompt_lens: expected 1..{prompts.shape[1]} (the prompts' width), "
                         f"got {prompt_lens.min()}..{prompt_lens.max()}")
    if output_lens.min() < 1:
        raise ValueError(f"output_lens: expected >= 1, got {output_lens.min()}")
    total = prompt_lens.astype(np.int64) + output_lens
    if total.max() > c.max_len:
        r = int(np.argmax(total))
        raise ValueError(f"request {r}: {prompt_lens[r]} prompt + {output_lens[r]} output tokens exceed the "
                         f"model's max_len {c.max_len}")
    for r, p in enumerate(prompt_lens):
        bad = (prompts[r, :p] < 0) | (prompts[r, :p] >= c.vocab)
        if bad.any():
            raise ValueError(f"prompts[{r}, {int(np.argmax(bad))}] = {prompts[r, int(np.argmax(bad))]}: "
                             f"expected a token id in 0..{c.vocab - 1}")
    if num_blocks * block_size < c.max_len:
        raise ValueError(f"num_blocks: {num_blocks} x {block_size} = {num_blocks * block_size} token slots hold no "
                         f"max_len ({c.max_len}) sequence, the contiguous cache's unit")
    need = -(-int(total.max()) // block_size)
    if need > num_blocks:
        raise ValueError(f"num_blocks: the longest request needs {need} blocks of {block_size}; the budget is "
                         f"{num_blocks}: it could never finish")
    return prompts, prompt_lens, output_lens


def serve(model, prompts, prompt_lens, output_lens, block_size, num_blocks, *, contiguous=False, attention=None,
          dtype="float32", profile=False, fused=None):
    """Run an engine over the requests; returns (tokens (num_requests, max output) int32, engine)."""
    prompts, prompt_lens, output_lens = _check(model, prompts, prompt_lens, output_lens, block_size, num_blocks)
    engine = Engine(model, int(block_size), int(num_blocks), contiguous=contiguous, attention=attention,
                    dtype=dtype, profile=profile, fused=fused)
    for r, (p, n) in enumerate(zip(prompt_lens, output_lens)):
        engine.add_request(r, prompts[r, :p], int(n))
    outputs = engine.run()
    tokens = np.full((len(prompt_lens), int(output_lens.max())), -1, dtype=np.int32)
    for r, out in outputs.items():
        tokens[r, :len(out)] = out
    return tokens, engine


def naive(model, prompts, prompt_lens, output_lens, block_size, num_blocks):
    """v1: a contiguous cache, max_len slots reserved per admitted request."""
    return serve(model, prompts, prompt_lens, output_lens, block_size, num_blocks, contiguous=True)[0]


def optimized(model, prompts, prompt_lens, output_lens, block_size, num_blocks):
    """v2: the paged cache, pages taken as tokens arrive, preemption when they run out."""
    return serve(model, prompts, prompt_lens, output_lens, block_size, num_blocks)[0]


# --- make run: the tour of the destination ------------------------------------------------------------


def first_divergence(a, b):
    """Index of the first differing token of two token lists (None when equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_tokens(got, expected, margins, tie: float = TIE, tie_notes: list | None = None
                   ) -> tuple[int, int, list[str]]:
    """(identical requests, requests that diverge only at a near-tie, notes on real mismatches).

    Two float32 engines may differ in summation order; where the top two logits are within ``tie``
    (TIE; TIES["float16"] for an fp16 engine), either choice is right, and everything after it is a
    different (equally valid) continuation. Ties are counted, never silently passed: each is described
    in ``tie_notes`` when given, for the caller to report."""
    same, ties, bad = 0, 0, []
    for r in range(expected.shape[0]):
        i = first_divergence(list(got[r]), list(expected[r]))
        if i is None:
            same += 1
        elif margins[r][i] < tie:
            ties += 1
            if tie_notes is not None:
                tie_notes.append(f"request {r} diverges at output token {i} at a near-tie: {got[r][i]} vs "
                                 f"{expected[r][i]} (logit gap {margins[r][i]:.2e} < {tie:g})")
        else:
            bad.append(f"request {r} differs at output token {i}: {got[r][i]} vs {expected[r][i]} "
                       f"(logit gap {margins[r][i]:.2e})")
    return same, ties, bad


def default_args() -> dict:
    if ON_GPU:
        return dict(requests=256, max_prompt=64, max_output=512, block_size=16, kv_blocks=4096, model="small")
    return dict(requests=8, max_prompt=10, max_output=10, block_size=4, kv_blocks=16, model="tiny")


PRESET_ONLY = ("requests", "max_prompt", "max_output", "seed")  # a checkpoint's requests are its prompts
CHECKPOINT_ONLY = ("prompt", "prompts", "max_new", "max_len")


def build_parser() -> argparse.ArgumentParser:
    d = default_args()
    p = argparse.ArgumentParser(
        prog="python -m solutions.day90_serving_engine",
        description="Serve a batch of requests through the paged KV cache and PagedAttention, and compare with a "
                    "contiguous (max-length reservation) cache under the same budget. By default a seeded random "
                    "model decodes random token ids; --model DIR serves text prompts through a Hugging Face "
                    "Llama or Qwen2 checkpoint read from disk (no network access: download it beforehand).")
    p.add_argument("--model", default=d["model"], metavar="{" + ",".join(sorted(MODELS)) + "} or DIR",
                   help="a preset of random weights, or a checkpoint directory holding config.json, "
                        "*.safetensors (fp32, fp16 or bf16) and tokenizer.json, read from disk: nothing is downloaded "
                        "(default %(default)s)")
    preset = p.add_argument_group("with a preset model (seeded random weights and token ids)")
    preset.add_argument("--requests", type=int, help=f"number of requests (default {d['requests']})")
    preset.add_argument("--max-prompt", type=int, help=f"prompt lengths are drawn from 1..this (default "
                                                       f"{d['max_prompt']})")
    preset.add_argument("--max-output", type=int, help=f"output lengths are drawn from 1..this (default "
                                                       f"{d['max_output']})")
    preset.add_argument("--seed", type=int, help="seed of the weights and the requests (default 0)")
    ckpt = p.add_argument_group("with --model DIR (a Hugging Face checkpoint)")
    ckpt.add_argument("--prompt", action="append", metavar="TEXT", help="a prompt (repeat for several)")
    ckpt.add_argument("--prompts", metavar="FILE", help="a text file, one prompt a line, served as one batch")
    ckpt.add_argument("--max-new", type=int, help="tokens generated per prompt (default 32)")
    ckpt.add_argument("--max-len", type=int, help="serve a context of this many tokens (default: the checkpoint's "
                                                  "max_position_embeddings)")
    p.add_argument("--dtype", choices=DTYPES,
                   help="the engine's weights, activations and KV cache (default float16 on a GPU with --model "
                        "DIR, float32 otherwise; float16 in the simulator is slow but works for tiny models)")
    p.add_argument("--block-size", type=int, default=d["block_size"], help="tokens per page (default %(default)s)")
    p.add_argument("--kv-blocks", type=int,
                   help=f"KV budget in pages per layer (default {d['kv_blocks']}; with --model DIR, room for every "
                        f"prompt at once and at least one max-length sequence)")
    p.add_argument("--gpus", type=int, metavar="N",
                   help="split the paged engine over N GPUs by heads (tensor parallel: one process per GPU, NCCL "
                        "through CuPy; --gpus 1 runs the same path on one GPU) and check its tokens against the "
                        "one-GPU engine's (solutions/tensor_parallel.py)")
    return p


def _preset_inputs(parser, a):
    d = default_args()
    for name in PRESET_ONLY[:-1] + ("kv_blocks",):
        if getattr(a, name) is None:
            setattr(a, name, d[name])
    a.seed = 0 if a.seed is None else a.seed
    for name in CHECKPOINT_ONLY:
        if getattr(a, name) is not None:
            parser.error(f"--{name.replace('_', '-')} needs --model DIR (a checkpoint with a tokenizer)")
    cfg = MODELS[a.model]
    for name in ("requests", "max_prompt", "max_output", "block_size", "kv_blocks"):
        if getattr(a, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    if a.max_prompt + a.max_output > cfg.max_len:
        parser.error(f"--max-prompt + --max-output must fit the {a.model} model's context of {cfg.max_len} tokens")
    wl = Workload(a.requests, a.max_prompt, a.max_output, a.block_size, a.kv_blocks, a.model)
    try:
        inputs = make_inputs(wl, seed=a.seed)
        _check(*inputs)
    except ValueError as exc:
        parser.error(str(exc))
    return inputs, f"model: {inputs[0].describe()} (seed {a.seed})"


def _read_prompts(parser, a) -> list[str]:
    texts = list(a.prompt or [])
    if a.prompts is not None:
        try:
            with open(a.prompts, encoding="utf-8") as f:
                texts += [line.rstrip("\r\n") for line in f if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"--prompts {a.prompts}: {exc}")
    if not texts:
        parser.error("--model DIR needs --prompt TEXT or --prompts FILE (one prompt a line)")
    return texts


def _checkpoint_inputs(parser, a):
    from solutions import llama_checkpoint

    for name in PRESET_ONLY:
        if getattr(a, name) is not None:
            parser.error(f"--{name.replace('_', '-')} applies to the preset models; with --model DIR the requests "
                         f"are the prompts")
    a.max_new = 32 if a.max_new is None else a.max_new
    for name in ("max_new", "block_size") + (("kv_blocks",) if a.kv_blocks is not None else ()):
        if getattr(a, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    texts = _read_prompts(parser, a)
    try:
        ckpt = llama_checkpoint.load(a.model, max_len=a.max_len, dtype=a.dtype)
        ids = llama_checkpoint.encode_prompts(ckpt, texts, a.max_new)
    except ValueError as exc:
        parser.error(str(exc))
    model, bs = ckpt.model, a.block_size
    prompt_lens = np.array([len(t) for t in ids], dtype=np.int32)
    prompts = np.full((len(ids), int(prompt_lens.max())), -1, dtype=np.int32)
    for r, t in enumerate(ids):
        prompts[r, :len(t)] = t
    output_lens = np.full(len(ids), a.max_new, dtype=np.int32)
    if a.kv_blocks is None:  # everyone at once in pages, and one max_len reservation for the contiguous cache
        a.kv_blocks = max(-(-model.cfg.max_len // bs), int(np.sum(-(-(prompt_lens + output_lens) // bs))))
    inputs = (model, prompts, prompt_lens, output_lens, bs, a.kv_blocks)
    try:
        _check(*inputs)
    except ValueError as exc:
        parser.error(str(exc))
    a.requests, a.texts, a.checkpoint = len(ids), texts, ckpt
    return inputs, f"model: {ckpt.path} ({ckpt.architecture}): {model.describe()}"


def print_split(*stats, rerun: bool = False) -> None:
    """Where each engine's time went, from Stats.phases (Engine(profile=True)): % of its run per phase,
    the rest ("other") being Python between the phases. Phases nobody timed are left out. ``rerun``:
    the stats are a second, synchronised run's (make run on a GPU), whose tokens/s the header gives."""
    names = [n for n in PHASES if any(n in s.phases for s in stats)]
    if not names:
        return
    if rerun:
        rates = " and ".join(f"{s.generated / s.seconds:,.1f}" for s in stats if s.seconds)
        print(f"\ntime split (a second run of each engine, the device synchronised at each phase's edges so that "
              f"each phase holds its kernels; those runs' tokens/s: {rates}):")
    else:
        print("\ntime split (the device synchronised at each phase's edges, so each phase holds its kernels):")
    for name in [*names, "other"]:
        cells = []
        for s in stats:
            t = s.phases.get(name, 0.0) if name != "other" else s.seconds - sum(s.phases.values())
            cells.append(f"{1e3 * t / max(s.steps, 1):7.2f} ms/step {100 * t / s.seconds:4.0f} %" if s.seconds
                         else "")
        print(f"  {name:24s} " + "   ".join(f"{c:>22s}" for c in cells))


def main(argv=None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    a.checkpoint = None
    if a.gpus is not None:  # before a checkpoint is read: say at once what is missing
        from solutions import tensor_parallel

        why = f"must be >= 1, got {a.gpus}" if a.gpus < 1 else tensor_parallel.nccl_problem(a.gpus)
        if why:
            print(f"{parser.prog}: error: --gpus {a.gpus}: {why}", file=sys.stderr)
            return 2
    if a.dtype is None:
        a.dtype = "float16" if ON_GPU and a.model not in MODELS else "float32"
    if a.model in MODELS:
        inputs, described = _preset_inputs(parser, a)
    elif os.path.isdir(a.model):
        inputs, described = _checkpoint_inputs(parser, a)
    else:
        parser.error(f"--model: expected {' or '.join(sorted(MODELS))} or a checkpoint directory on disk, got "
                     f"{a.model!r} (not a directory; nothing is downloaded)")
    model, prompts, prompt_lens, output_lens, bs, nb = inputs
    cfg = model.cfg
    where = "on " + DEVICE.describe() if ON_GPU else "in the CUDA simulator (times are the simulator's)"
    budget = nb * bs
    print(f"serving {a.requests} requests {where}")
    print(described + f"; engine dtype {a.dtype}")
    contiguous_slots = budget // cfg.max_len
    print(f"KV budget: {nb} pages x {bs} tokens = {budget} token slots per layer; reserving max_len "
          f"{cfg.max_len} per request, all {a.requests} at once would need {a.requests * cfg.max_len}")

    # On a GPU a synchronisation stops the host from queueing work while the device runs, so tokens/s
    # come from runs without them and the split from a second run of each engine; the simulator runs
    # every launch to completion anyway, and profiles its one run.
    profiled = not ON_GPU
    first = None  # on a GPU: the warm-up passes' stats (paged, contiguous), reported beside the timed ones
    if ON_GPU:
        # The first pass over a workload pays what a running server pays once: Numba compiles each kernel
        # at its first launch (a specialisation per engine: the contiguous cache's pages are max_len
        # tokens), CuPy compiles (or loads from its disk cache) a kernel for each new reduction shape,
        # and the memory pools grow to the largest step's arrays. A request of two tokens warms only
        # the first of these: the paged engine's first pass measured a third slower than its second.
        # So both engines serve the whole workload once, untimed, and the timed runs are the second
        # passes: the rate a server keeps up, as serving engines measure after their warm-up.
        if a.gpus is None:
            first = (serve(*inputs, dtype=a.dtype)[1].stats, serve(*inputs, contiguous=True, dtype=a.dtype)[1].stats)
        else:  # the paged engine runs in fresh processes, one a GPU, that no pass here warms: its rate
            # includes their first pass, so the contiguous one gets only the two-token warm-up too
            one = (model, prompts[:1], prompt_lens[:1], np.minimum(output_lens[:1], 2), bs, nb)
            serve(*one, contiguous=True, dtype=a.dtype)
    if a.gpus is None:
        paged_tokens, paged = serve(*inputs, dtype=a.dtype, profile=profiled)
    else:  # the paged engine split over the GPUs; the contiguous one and the reference stay on one
        try:
            tensor_parallel.check_split(cfg, a.gpus)
        except ValueError as exc:
            print(f"{parser.prog}: error: --gpus {a.gpus}: {exc}", file=sys.stderr)
            return 2
        print(f"paged engine: tensor parallel over {a.gpus} GPU(s), {cfg.num_heads // a.gpus} heads over "
              f"{cfg.num_kv_heads // a.gpus} KV heads per GPU")
        paged_tokens, paged = tensor_parallel.serve_nccl(*inputs, a.gpus, dtype=a.dtype)
    dense_tokens, dense = serve(*inputs, contiguous=True, dtype=a.dtype, profile=profiled)

    if a.checkpoint is not None:
        from solutions import llama_checkpoint

        for r, text in enumerate(a.texts):
            out, used = llama_checkpoint.decode(a.checkpoint, paged_tokens[r, :output_lens[r]])
            stop = f", end of text after {used}" if used < output_lens[r] else ""
            print(f"\nrequest {r} ({prompt_lens[r]} prompt tokens, {output_lens[r]} generated{stop})")
            print(f"{text}\033[1m{out}\033[0m" if sys.stdout.isatty() else f"{text}{out}")
    elif a.requests <= 16:
        print("\nrequest  prompt  output  generated tokens")
        for r in range(a.requests):
            out = paged_tokens[r, :output_lens[r]].tolist()
            print(f"{r:7d}  {prompt_lens[r]:6d}  {output_lens[r]:6d}  {out}")
    else:
        print(f"\n(first 4 of {a.requests} requests)")
        for r in range(4):
            print(f"request {r}: prompt {prompt_lens[r]}, output {paged_tokens[r, :output_lens[r]].tolist()[:16]}...")

    p, d = paged.stats, dense.stats
    rows = [
        ("sequences at once (peak)", f"{p.peak_running}", f"{d.peak_running} (budget // max_len = {contiguous_slots})"),
        ("engine steps", f"{p.steps}", f"{d.steps}"),
        ("preemptions", f"{p.preemptions}", f"{d.preemptions}"),
        ("tokens/s", f"{p.generated / p.seconds:,.1f}", f"{d.generated / d.seconds:,.1f}"),
        ("time in attention", f"{100 * p.attention_seconds / p.seconds:.0f} %",
         f"{100 * d.attention_seconds / d.seconds:.0f} %"),
    ]
    if first is not None:
        rows.append(("tokens/s, first pass", f"{first[0].generated / first[0].seconds:,.1f}",
                     f"{first[1].generated / first[1].seconds:,.1f} (compiling, pools growing: untimed warm-up)"))
    print(f"\n{'':26s} {'paged (v2)':>14s}   {'contiguous (v1)':>14s}")
    for name, x, y in rows:
        print(f"{name:26s} {x:>14s}   {y}")
    if profiled:
        print_split(p, d)
    else:
        split_p = serve(*inputs, dtype=a.dtype, profile=True)[1].stats if a.gpus is None else p
        print_split(split_p, serve(*inputs, contiguous=True, dtype=a.dtype, profile=True)[1].stats, rerun=True)
    if not ON_GPU:
        print("(the simulator pays per thread, shared launch or not, so its tokens/s cannot reward batching; "
              "on a GPU a decode step costs about the same for 1 or 100 sequences)")
    reserved = p.peak_blocks_running * cfg.max_len
    print(f"\npeak KV used by the paged cache: {p.peak_blocks} pages = {p.peak_blocks * bs} token slots, "
          f"for {p.peak_blocks_running} sequences; a contiguous cache would have reserved {reserved} slots "
          f"({p.peak_blocks_running} x {cfg.max_len}) for them: {reserved / (p.peak_blocks * bs):.1f}x more")

    margins = [dense.stats.margins[r] for r in range(a.requests)]
    tie, tie_notes = TIES[a.dtype], []
    same, ties, bad = compare_tokens(paged_tokens, dense_tokens, margins, tie, tie_notes)
    ok = not bad
    line = f"generated tokens: paged == dense-cache decode (contiguous) for {same}/{a.requests} requests"
    if ties:
        line += f"; {ties} diverge at a near-tie (top-2 logit gap < {tie:g}), where either token is right"
    if not ON_GPU:  # the float64 decode of the weights the engine holds (fp16-rounded for --dtype float16)
        expected, ref_margins = _decode_all(model.astype(a.dtype), prompts, prompt_lens, output_lens)
        same_ref, ties_ref, bad_ref = compare_tokens(paged_tokens, expected, ref_margins, tie, tie_notes)
        line += f"; == float64 NumPy decode for {same_ref}/{a.requests}"
        if ties_ref:
            line += f" ({ties_ref} near-ties)"
        ok &= not bad_ref
        bad += bad_ref
    print(("OK   " if ok else "FAIL ") + line)
    for note in bad + tie_notes:
        print("     " + note)
    if a.gpus is not None:
        single_tokens, single = serve(*inputs, dtype=a.dtype)
        ok &= tensor_parallel.report_against_single(paged_tokens, paged, single_tokens, single, tie)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
