"""The prefill attention problem that days 65-70 (and day 72's block) solve: its inputs, its plain
NumPy reference, its checks and its traffic. No kernel lives here.

    out[b, h, i] = softmax_j(scale * q[b, h, i] . k[b, g, j]) @ v[b, g, :],   g = h // (heads // kv_heads)

q is (batch, heads, seq_q, dim); k and v are (batch, kv_heads, seq_k, dim), heads a multiple of
kv_heads (GQA; MQA at one KV head); scale = 1 / sqrt(dim); the output has q's shape and dtype.

Causal masking is aligned bottom-right, as FlashAttention-2 and torch's `causal_lower_right` align it:
query i attends to keys j <= i + seq_k - seq_q. With seq_q == seq_k that is the familiar j <= i; with
fewer queries than keys (a chunk of a prompt appended to a cache) the last query sees every key; with
more queries than keys the first seq_q - seq_k queries see no key at all, and their output rows are
zeros (FlashAttention-2's convention: the softmax of an empty row is taken as nothing, not NaN).

A size is a tuple (batch, heads, kv_heads, seq_q, seq_k, dim, causal), optionally with an eighth
element, the kind of inputs: "normal" (standard normal q, k, v) or "large" (q and k scaled so that the
scores reach +-1e4 before scaling: exp of an unshifted score overflows float32 at 88, so only a kernel
that subtracts the running max survives them).
"""

from __future__ import annotations

import math

import numpy as np

from course import launch

HEAD_DIMS = (32, 64, 96, 128)  # head sizes the course's attention kernels take (dim % 32 == 0)
KINDS = ("normal", "large")
RTOL = {"float32": 5e-4, "float16": 2e-2}  # float32: sums of exp-weighted rows over thousands of keys
# The floor (course.checking): outputs average many random rows towards zero, so an element's error is
# held against a share of max|out|, not its own size. float16 kernels round P to float16 before P V:
# each term p_j v_j is off by up to 2^-11 of itself, an output by up to 2^-11 max|v| in the worst case
# (one dominant key), about 2^-11 rms(v) sqrt(sum p_j^2) typically. At a 1e-2 share the float16 check
# allowed 2e-4 of max|out|: at 16 queries x 8 keys day 69's kernel used 45 % of that in a typical seed,
# 86 % in the worst of 30, and failed one CI run (2.0e-4); 5e-2 allows 1e-3 of max|out|, above the worst
# case wherever max|v| <= 2 max|out|, and a hundred times below what a wrong mask, head or rescale gives.
ERROR_FLOOR = {"float32": 1e-2, "float16": 5e-2}


def geometry(n):
    """(batch, heads, kv_heads, seq_q, seq_k, dim, causal, kind) of a size tuple."""
    if not isinstance(n, (tuple, list)) or len(n) not in (7, 8):
        raise ValueError(f"size: expected (batch, heads, kv_heads, seq_q, seq_k, dim, causal[, kind]), got {n!r}")
    b, h, kvh, sq, sk, d = (int(x) for x in n[:6])
    causal = bool(n[6])
    kind = n[7] if len(n) == 8 else "normal"
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    return b, h, kvh, sq, sk, d, causal, kind


def make_inputs(n, seed: int = 0, dtype=np.float32):
    """(q, k, v, causal) for size n (see the module docstring), in ``dtype``."""
    b, h, kvh, sq, sk, d, causal, kind = geometry(n)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, sq, d), dtype=np.float32)
    k = rng.standard_normal((b, kvh, sk, d), dtype=np.float32)
    v = rng.standard_normal((b, kvh, sk, d), dtype=np.float32)
    if kind == "large":
        # scores q . k have standard deviation about c^2 sqrt(d): c = sqrt(1e4 / sqrt(d)) puts them near
        # +-1e4 (the largest well above), scale * score near +-1e3: far beyond exp's float32 range.
        c = np.float32(math.sqrt(1e4 / math.sqrt(d)))
        q *= c
        k *= c
    return q.astype(dtype), k.astype(dtype), v.astype(dtype), causal


def causal_window(i: int, seq_q: int, seq_k: int) -> int:
    """How many keys query i sees under the bottom-right causal mask: keys 0 .. i + seq_k - seq_q."""
    return max(0, min(seq_k, i + seq_k - seq_q + 1))


def pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """(query, key) pairs scored: seq_q seq_k, or the bottom-right causal triangle's share of it."""
    if not causal:
        return seq_q * seq_k
    return sum(causal_window(i, seq_q, seq_k) for i in range(seq_q))


def reference(q, k, v, causal):
    """Attention in float64, one (batch, KV head) at a time: the group's query heads together (group x
    seq_q x seq_k scores, never every head at once), cast to q's dtype; rows that see no key are zeros."""
    b, h, sq, d = q.shape
    kvh, sk = k.shape[1], k.shape[2]
    group = h // kvh
    scale = 1.0 / math.sqrt(d)
    out = np.zeros(q.shape, dtype=np.float64)
    # The keys a query may not see (causal): masked in place through a broadcast `where`, not boolean
    # indexing, which builds index arrays (5x slower at 4096 x 4096 on a CPU, the same values).
    blocked = np.arange(sk)[None, :] > (np.arange(sq)[:, None] + (sk - sq)) if causal else None
    for bi in range(b):
        for g in range(kvh):
            kk = k[bi, g].astype(np.float64)  # (seq_k, dim)
            vv = v[bi, g].astype(np.float64)
            heads = slice(g * group, (g + 1) * group)
            s = q[bi, heads].astype(np.float64) @ kk.T  # (group, seq_q, seq_k)
            s *= scale
            if causal:
                np.copyto(s, -np.inf, where=blocked)
            m = s.max(axis=2, keepdims=True)
            live = np.isfinite(m)
            s -= np.where(live, m, 0.0)
            np.exp(s, out=s)
            total = s.sum(axis=2, keepdims=True)
            o = (s @ vv) / np.where(total > 0, total, 1.0)
            out[bi, heads] = np.where(live, o, 0.0)
    return out.astype(q.dtype)


def traffic(q, k, v, causal):
    """(minimum bytes, FLOPs): q, k, v read once and the output written once; 4 dim FLOPs per scored
    (query, key) pair and head (2 dim for q . k, 2 dim for p v), as FlashAttention counts them."""
    b, h, sq, d = q.shape
    nbytes = 2 * q.nbytes + k.nbytes + v.nbytes
    return nbytes, 4 * b * h * d * pairs(sq, k.shape[2], bool(causal))


def scores_bytes(q, k, itemsize: int = 4) -> int:
    """Bytes of the full score matrix, batch x heads x seq_q x seq_k: what a version that writes the
    scores to memory must allocate (and write, and read back)."""
    b, h, sq, _ = q.shape
    return b * h * sq * k.shape[2] * itemsize


def check_inputs(q, k, v, causal, dtype=np.float32, head_dims=HEAD_DIMS):
    """ValueError naming the argument unless q, k, v are C-contiguous 4-D arrays of ``dtype`` with
    matching batch, dim and key lengths, heads a multiple of kv_heads, dim in ``head_dims``, every
    length at least 1, and causal a bool."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        launch.check_array(name, a, dtype=dtype, ndim=4)
    b, h, sq, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k, v: expected the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k: expected shape ({b}, kv_heads, seq_k, {d}) to match q {tuple(q.shape)}, "
                         f"got {tuple(k.shape)}")
    kvh, sk = k.shape[1], k.shape[2]
    if min(b, h, sq, kvh, sk) < 1:
        raise ValueError(f"q, k: expected every length >= 1, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    if h % kvh:
        raise ValueError(f"heads: expected a multiple of kv_heads ({kvh}), got {h}")
    if d not in head_dims:
        raise ValueError(f"dim: expected one of {tuple(head_dims)}, got {d}")
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal: expected a bool, got {type(causal).__name__}")


def torch_sdpa(q, k, v, causal, backend: str | None = "flash"):
    """torch.nn.functional.scaled_dot_product_attention on the GPU, zero-copy from device arrays (NumPy
    in: NumPy out), through one backend ("flash", "cudnn", "efficient" or "math"); GQA by
    enable_gqa; backend None lets torch choose (float32 inputs: the flash backend takes only 16-bit
    types). Causal with seq_q != seq_k goes through torch's causal_lower_right (bottom-right, as
    here); with equal lengths is_causal=True is the same mask."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from course import cuda

    tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
    sq, sk = tq.shape[2], tk.shape[2]
    mask, is_causal = None, False
    if causal and sq != sk:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(sq, sk)
    else:
        is_causal = bool(causal)
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    with sdpa_kernel(list(backends.values()) if backend is None else [backends[backend]]):
        out = scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, is_causal=is_causal,
                                           enable_gqa=tq.shape[1] != tk.shape[1])
    return out.cpu().numpy() if isinstance(q, np.ndarray) else cuda.as_cuda_array(out)
