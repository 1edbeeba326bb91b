"""Day 61: rotary embeddings (RoPE) -- q (tokens, q_heads, head_dim) and k (tokens, kv_heads, head_dim)
float32, each head's pairs turned by the angle pos * theta_i, theta_i = 10000^(-2i / head_dim), IN PLACE.

RoPE (Su et al. 2021, "RoFormer") encodes a token's position by rotating its query and key vectors: each
pair of features (x0, x1) becomes (x0 cos a - x1 sin a, x1 cos a + x0 sin a) with a = pos * theta_i,
i = 0 .. head_dim / 2 - 1. The dot product of a rotated q at position m and a rotated k at position n
then depends on m - n only. Which features make a pair is the layout, `style`:
  "neox"  GPT-NeoX, Llama, Mistral, Qwen (half-split): pair i is (x[i], x[i + head_dim / 2])
  "gptj"  GPT-J, GLM, some Cohere models (interleaved): pair i is (x[2i], x[2i + 1])
The rotation happens in place, as serving engines do it (vLLM's rotary_embedding op): with device arrays
the host functions rotate q and k where they are and return the same two arrays; with NumPy arrays they
return new rotated arrays (the NumPy inputs are left as they were). rotary_dim = head_dim (no partial
rotary), base 10000, float32 only (course.wide moves 4-byte types: an fp16 path would need 8-wide loads;
with fp16 q and k every byte count below halves). positions (tokens,) int32 are arbitrary (decode
positions, out of order, up to the cache's length - 1); a position outside [0, max_positions) is a
ValueError for NumPy positions and, for device positions (no host read: that would stall the stream),
turns that token's q and k into NaN instead of reading past the table.

Interface, every version: f(q, k, positions, cos_sin_cache, style) -> (q, k). cos_sin_cache is vLLM's
table, float32 (max_positions, head_dim): row p holds cos(p theta_0 .. p theta_{d/2-1}) and then
sin(...) of the same angles; build_cos_sin_cache makes it once, on the host, in float64 (see Pitfalls).
Its length is the model's position limit; the naive version honours that limit but recomputes the values.

v1 naive      one thread per (row, pair), q and k in separate launches: each thread computes its angle's
              pow, cos and sin in float64 (float32 angles are wrong by up to 0.004 rad at position 1e5)
              and rotates one pair with 4-byte accesses. The transcendentals run once per element of
              every head, though all heads of a token share the same head_dim / 2 angles.
v2 optimized  the cache, read once per (token, pair group) into registers, and q and k rotated in one
              launch: a thread per (token, head slot, group of 4 pairs) loads its 4 cos and 4 sin,
              then turns every S-th head of the token (S head slots, HEADS_PER_THREAD heads a slot) with
              two 16-byte loads a row: x[4g : 4g + 4] and x[d/2 + 4g : d/2 + 4g + 4]. For NeoX they
              are the first and second members of pairs 4g .. 4g + 3 (cos and sin: one load4 each);
              for GPT-J each float4 holds two whole pairs (pairs 2g, 2g + 1 and d/4 + 2g, d/4 + 2g + 1:
              four scalar cos and sin loads, once a thread). Two rows in flight a trip. No sin, cos
              or pow in the kernel. head_dim % 8 != 0 (2, 6, ...) takes a scalar kernel: a thread per
              (token, pair) over every head of the token.
library       vLLM's forward_native formula in torch ops (gather the cache rows, split, multiply, cat,
              copy back): what a PyTorch user writes without a fused kernel; a row of the benchmark.

Napkin math (H200, device copy ~4.2 TB/s read + write). q and k are read once and written once: at
(4096 tokens, 32 q heads, 8 kv heads, 128) q is 64 MB, k 16 MB: 168 MB with the writes, ~40 us at the
copy rate; at 16384 tokens 671 MB, ~160 us. The cache (128k positions x 128 floats: 64 MB, but each
token needs only its own 512-byte row) adds 1.2 % and is shared by the token's 40 heads from registers.
Arithmetic: 6 FLOPs a pair, ~40 instructions per 32 bytes moved: far below what an SM issues while HBM
delivers those bytes. The naive version moves the same bytes (two launches), 4 bytes an access, but
computes a float64 pow and sincos per pair of every head: ~100 float64 instructions a pair against the
H200's ~34 TFLOP/s of FP64, ~30-60 us of arithmetic for 10M pairs, on top of the memory time.
Target: the optimized version >= 90 % of the copy rate at both sizes, faster than the torch-ops version
(which writes the gathered table, both halves and their products: ~5x the minimum traffic). Measured on
the H200 (make bench, device copy 4254 GB/s): 47.3 us (84 %) at 4096 tokens, 170.8 us (94 %) at 16384
(NeoX; GPT-J 170.9 us), 6.6x (NeoX) and 10x (GPT-J) faster than the torch-ops row: met at 16384
tokens, missed by 6 points at 4096, where fixed launch and tail costs weigh more.
"""

import functools
import math

import numpy as np

from course import cuda, launch, wide
from numba import float32  # numba names only after the course import

TITLE = "Rotary embeddings (RoPE)"
MEMORY_SPACE = "global + register"
VERSIONS = ("naive", "optimized")
STYLES = ("neox", "gptj")  # half-split (GPT-NeoX, Llama) and interleaved (GPT-J)
ROPE_BASE = 10000.0
DEFAULT_MAX_POSITIONS = 4096
# (tokens, q_heads, kv_heads, head_dim, style[, max_positions]): head_dim 2 and 6 (the scalar kernel),
# 16 (two pair groups a row), 64 and 128 (Llama's); heads 1 and 3; tokens 1 and primes; a 128k-position
# table with random positions up to 131071; last, the traffic size (whole warps: 32 threads a token).
_SHAPES = ((1, 1, 1, 2), (5, 3, 1, 6), (3, 1, 1, 16), (13, 3, 1, 64), (2, 3, 3, 128), (11, 2, 1, 64, 1 << 17))
TEST_SIZES = tuple(s[:4] + (style,) + s[4:] for s in _SHAPES for style in STYLES) + ((4, 8, 4, 128, "neox"),)
# Llama-3-8B's heads (32 q, 8 kv, 128) at 4k and 16k tokens, positions anywhere in a 128k context:
# 168 MB and 671 MB through HBM, 2.8x and 11x the L2.
BENCH_SIZES = ((4096, 32, 8, 128, "neox", 1 << 17), (16384, 32, 8, 128, "neox", 1 << 17),
               (16384, 32, 8, 128, "gptj", 1 << 17))
BOUND = "memory"
MUTATES_INPUTS = True  # device q and k are rotated in place: a re-check needs fresh copies (see the lesson)

THREADS = 256
PAIRS_PER_GROUP = 4  # a thread's pairs: two float4 of each row it turns
HEADS_PER_THREAD = 4  # rows of q a thread turns with one load of its cos and sin (k: about a quarter of that)
NAN = float32(np.nan)


def sizes(n) -> tuple[int, int, int, int, str, int]:
    """(tokens, q_heads, kv_heads, head_dim, style, max_positions) of a problem size; an int n is n tokens
    of Llama-3-8B's heads."""
    if isinstance(n, int):
        return n, 32, 8, 128, "neox", 1 << 17
    tokens, q_heads, kv_heads, head_dim, *rest = n
    style = rest[0] if rest else "neox"
    max_positions = int(rest[1]) if len(rest) > 1 else DEFAULT_MAX_POSITIONS
    return int(tokens), int(q_heads), int(kv_heads), int(head_dim), style, max_positions


def inverse_frequencies(head_dim: int, base: float = ROPE_BASE) -> np.ndarray:
    """theta_i = base^(-2i / head_dim), i = 0 .. head_dim / 2 - 1, float64 (pair 0 turns fastest)."""
    return base ** (-np.arange(head_dim // 2, dtype=np.float64) * 2.0 / head_dim)


@functools.lru_cache(maxsize=8)
def _cos_sin_table(max_positions: int, head_dim: int, base: float) -> np.ndarray:
    angles = np.arange(max_positions, dtype=np.float64)[:, None] * inverse_frequencies(head_dim, base)[None, :]
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    table.flags.writeable = False  # shared between calls (the graders build many inputs)
    return table


def build_cos_sin_cache(max_positions: int, head_dim: int, base: float = ROPE_BASE) -> np.ndarray:
    """vLLM's cos_sin_cache, float32 (max_positions, head_dim): row p = [cos(p theta_i) for i < d/2] then
    [sin(p theta_i)]. Built once, on the host, with the angles in float64: p theta_i reaches 1e5 radians,
    and a float32 angle of that size is off by up to half its unit in the last place, 0.004 rad."""
    return _cos_sin_table(int(max_positions), int(head_dim), float(base))


def make_inputs(n, seed: int = 0):
    """(q, k, positions, cos_sin_cache, style): q and k standard normal, positions uniform over the
    table (out of order, repeats possible, large ones when the table is long)."""
    tokens, q_heads, kv_heads, head_dim, style, max_positions = sizes(n)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((tokens, q_heads, head_dim), dtype=np.float32)
    k = rng.standard_normal((tokens, kv_heads, head_dim), dtype=np.float32)
    positions = rng.integers(0, max_positions, size=tokens).astype(np.int32)
    return q, k, positions, build_cos_sin_cache(max_positions, head_dim), style


def reference(q, k, positions, cos_sin_cache, style):
    """(q rotated, k rotated), float64 angles and products from ROPE_BASE (not from the table), float32."""
    head_dim = q.shape[-1]
    half = head_dim // 2
    angles = positions.astype(np.float64)[:, None] * inverse_frequencies(head_dim)[None, :]  # (tokens, d/2)
    cos = np.cos(angles)[:, None, :]  # (tokens, 1, d/2): every head of a token turns by the same angles
    sin = np.sin(angles)[:, None, :]

    def rotate(x):
        x = x.astype(np.float64)
        out = np.empty_like(x)
        first, second = (slice(0, half), slice(half, None)) if style == "neox" else (slice(0, None, 2),
                                                                                        slice(1, None, 2))
        x0, x1 = x[..., first], x[..., second]
        out[..., first] = x0 * cos - x1 * sin
        out[..., second] = x1 * cos + x0 * sin
        return out.astype(np.float32)

    return rotate(q), rotate(k)


def traffic(q, k, positions, cos_sin_cache, style):
    """(minimum bytes through device memory: q and k read and written once, the positions once, one
    table row per distinct position; FLOPs: 6 a pair, 3 an element)."""
    rows = len(np.unique(positions))
    return 2 * (q.nbytes + k.nbytes) + positions.nbytes + rows * 4 * cos_sin_cache.shape[1], 3 * (q.size + k.size)


# ---- the rotation of one pair (every version) --------------------------------------------------------

@cuda.jit(device=True, inline=True)
def rotate_pair(x0, x1, c, s):
    """The pair (x0, x1) turned by the angle whose cosine is c and sine is s: (x0 c - x1 s, x1 c + x0 s),
    a 2-D rotation (counter-clockwise for positive angles)."""
    # EXERCISE: return the rotated pair as a tuple
    return x0 * c - x1 * s, x1 * c + x0 * s


# ---- v1: everything recomputed per element, q and k in separate launches -----------------------------

@cuda.jit
def rope_naive_kernel(x, positions, heads, max_positions, neox):
    # x (tokens * heads, head_dim): the rows of q or of k; positions (tokens,); neox: 1 half-split, 0 GPT-J
    """Grid-stride over the rows * head_dim / 2 pairs; pair w is pair j = w % (d/2) of row r = w // (d/2),
    whose token is r // heads. Per pair: theta_j = ROPE_BASE^(-2j / d) (math.pow), the angle
    positions[token] * theta_j, its cos and sin, all in float64, then cast to float32 (NaN when the
    position is outside [0, max_positions)); the pair's indices (j, j + d/2) if neox else (2j, 2j + 1);
    read both, rotate_pair, write both back (the same thread reads and writes them: no race)."""
    # EXERCISE: a grid-stride loop over pairs: float64 angle, cos, sin; the pair's indices by style; rotate in place
    rows, head_dim = x.shape
    half = head_dim // 2
    w = cuda.grid(1)
    step = cuda.gridsize(1)
    while w < rows * half:
        r = w // half
        j = w - r * half
        pos = positions[r // heads]
        # recomputed for every element of every head, in float64: pos * theta_j reaches 1e5 radians
        angle = pos * math.pow(ROPE_BASE, -2.0 * j / head_dim)
        c = float32(math.cos(angle))
        s = float32(math.sin(angle))
        if pos < 0 or pos >= max_positions:  # past the model's table: loud, not a wrong rotation
            c = NAN
            s = NAN
        if neox:
            i0 = j
            i1 = j + half
        else:
            i0 = 2 * j
            i1 = i0 + 1
        x[r, i0], x[r, i1] = rotate_pair(x[r, i0], x[r, i1], c, s)
        w += step


# ---- v2: the table in registers, q and k in one launch, 16 bytes an access --------------------------

@cuda.jit(device=True, inline=True)
def rope_quads(a, b, c, s, neox):
    """Rotate the 8 values of two float4 of one row: a = x[4g : 4g + 4], b = x[d/2 + 4g : d/2 + 4g + 4].
    NeoX: (a[j], b[j]) is pair 4g + j, turned by (c[j], s[j]). GPT-J: a holds pairs (a[0], a[1]) and
    (a[2], a[3]), turned by (c[0], s[0]) and (c[1], s[1]); b holds two more, turned by c[2], c[3].
    Returns the rotated (a, b)."""
    # EXERCISE: four rotate_pair calls per style: across a and b for NeoX, within each quad for GPT-J
    if neox:  # a: the pairs' first members, b: their partners d/2 further on
        a0, b0 = rotate_pair(a[0], b[0], c[0], s[0])
        a1, b1 = rotate_pair(a[1], b[1], c[1], s[1])
        a2, b2 = rotate_pair(a[2], b[2], c[2], s[2])
        a3, b3 = rotate_pair(a[3], b[3], c[3], s[3])
    else:  # each float4 holds two whole pairs: neighbours (x[2i], x[2i + 1])
        a0, a1 = rotate_pair(a[0], a[1], c[0], s[0])
        a2, a3 = rotate_pair(a[2], a[3], c[1], s[1])
        b0, b1 = rotate_pair(b[0], b[1], c[2], s[2])
        b2, b3 = rotate_pair(b[2], b[3], c[3], s[3])
    return (a0, a1, a2, a3), (b0, b1, b2, b3)


@cuda.jit(device=True, inline=True)
def rotate_rows(x, row, end, step, col, half, c, s, neox):
    """Rows row, row + step, ... < end of x (rows, head_dim): load x[r, col : col + 4] and
    x[r, half + col : half + col + 4] (wide.load4), rope_quads, store both (wide.store4). Two rows a
    trip, all four loads issued before the first store, then the last row alone."""
    # EXERCISE: two rows a trip (four wide.load4 before any wide.store4), then the last row alone
    while row + step < end:
        # four independent 16-byte loads in flight: a store first would make the next row's loads wait
        a, b = wide.load4(x, row, col), wide.load4(x, row, half + col)
        a2, b2 = wide.load4(x, row + step, col), wide.load4(x, row + step, half + col)
        a, b = rope_quads(a, b, c, s, neox)
        a2, b2 = rope_quads(a2, b2, c, s, neox)
        wide.store4(x, row, col, a)
        wide.store4(x, row, half + col, b)
        wide.store4(x, row + step, col, a2)
        wide.store4(x, row + step, half + col, b2)
        row += 2 * step
    if row < end:
        a, b = rope_quads(wide.load4(x, row, col), wide.load4(x, row, half + col), c, s, neox)
        wide.store4(x, row, col, a)
        wide.store4(x, row, half + col, b)


@cuda.jit
def rope_cached_kernel(q, k, positions, cache, q_heads, kv_heads, slots, neox):
    # q (tokens * q_heads, d), k (tokens * kv_heads, d): row views; cache (max_positions, d); d % 8 == 0
    """Thread j: token t = j // (slots * groups), head slot s, pair group g (groups = d / 8, g fastest:
    a warp's lanes cover whole rows). Load the token's position p and this group's cos and sin into
    registers, once: NeoX c = cache[p, 4g : 4g + 4], s = cache[p, d/2 + 4g : ...] (wide.load4 each);
    GPT-J, for pairs 2g, 2g + 1, d/4 + 2g, d/4 + 2g + 1, the four cos at those columns and the four sin
    d/2 further (scalar loads); all NaN when p is outside [0, max_positions). Then rotate_rows over the
    token's q rows t q_heads + s, + slots, ... and its k rows t kv_heads + s, + slots, ..."""
    head_dim = q.shape[1]
    half = head_dim // 2
    groups = half // PAIRS_PER_GROUP
    j = cuda.grid(1)
    t = j // (slots * groups)
    if t >= positions.shape[0]:
        return
    r = j - t * slots * groups
    slot = r // groups
    col = PAIRS_PER_GROUP * (r - slot * groups)
    # EXERCISE: the position, this thread's 4 cos and 4 sin (NaN past the table); rotate its q rows, then its k rows
    p = positions[t]
    if p < 0 or p >= cache.shape[0]:  # past the table: NaN, never a read outside it
        c = (NAN, NAN, NAN, NAN)
        s = (NAN, NAN, NAN, NAN)
    elif neox:  # pairs col .. col + 3: their cos and sin are 4 neighbours each, 16-byte aligned
        c = wide.load4(cache, p, col)
        s = wide.load4(cache, p, half + col)
    else:  # the float4 at col holds pairs col/2, col/2 + 1; the one at half + col, pairs half/2 + col/2 ...
        i = col // 2
        i2 = half // 2 + i
        c = (cache[p, i], cache[p, i + 1], cache[p, i2], cache[p, i2 + 1])
        s = (cache[p, half + i], cache[p, half + i + 1], cache[p, half + i2], cache[p, half + i2 + 1])
    # every head of the token turns by the same angles: the 8 registers serve all of this slot's rows
    rotate_rows(q, t * q_heads + slot, (t + 1) * q_heads, slots, col, half, c, s, neox)
    rotate_rows(k, t * kv_heads + slot, (t + 1) * kv_heads, slots, col, half, c, s, neox)
    # END EXERCISE


@cuda.jit
def rope_cached_scalar_kernel(q, k, positions, cache, q_heads, kv_heads, neox):
    # q (tokens * q_heads, d), k (tokens * kv_heads, d); d % 8 != 0: rows not made of whole float4 groups
    """Thread j: pair i = j % (d/2) of token t = j // (d/2). Its cos and sin, cache[p, i] and
    cache[p, d/2 + i], read once (NaN outside the table), then the pair (i, i + d/2) if neox else
    (2i, 2i + 1) rotated in each of the token's q rows, then its k rows, 4-byte accesses."""
    # EXERCISE: the token, the pair, its cos and sin once; the pair's indices by style; every q row, then every k row
    half = q.shape[1] // 2
    j = cuda.grid(1)
    t = j // half
    if t >= positions.shape[0]:
        return
    i = j - t * half
    p = positions[t]
    if p < 0 or p >= cache.shape[0]:
        c = NAN
        s = NAN
    else:
        c = cache[p, i]
        s = cache[p, half + i]
    i0 = i if neox else 2 * i
    i1 = i + half if neox else 2 * i + 1
    for r in range(t * q_heads, (t + 1) * q_heads):
        q[r, i0], q[r, i1] = rotate_pair(q[r, i0], q[r, i1], c, s)
    for r in range(t * kv_heads, (t + 1) * kv_heads):
        k[r, i0], k[r, i1] = rotate_pair(k[r, i0], k[r, i1], c, s)


_ROWS = "float32[:, ::1]"
KERNELS = {
    "naive": (rope_naive_kernel, f"void({_ROWS}, int32[::1], int64, int64, int32)"),
    "optimized": (rope_cached_kernel,
                  f"void({_ROWS}, {_ROWS}, int32[::1], {_ROWS}, int64, int64, int64, int32)"),
    "optimized.scalar": (rope_cached_scalar_kernel,
                         f"void({_ROWS}, {_ROWS}, int32[::1], {_ROWS}, int64, int64, int32)"),
}


# ---- host side ---------------------------------------------------------------------------------------

def check_inputs(q, k, positions, cos_sin_cache, style) -> None:
    """ValueError unless q (tokens, q_heads, d) and k (tokens, kv_heads, d) are C-contiguous float32 with
    d even, positions (tokens,) int32, cos_sin_cache float32 (max_positions, d), style "neox" or
    "gptj"; NumPy positions must lie in [0, max_positions) (device ones are not read back: see the
    module's docstring)."""
    if not isinstance(style, str) or style not in STYLES:
        raise ValueError(f"style: expected one of {STYLES}, got {style!r}")
    launch.check_array("q", q, dtype=np.float32, ndim=3)
    tokens, _, head_dim = q.shape
    launch.check_array("k", k, dtype=np.float32, shape=(tokens, None, head_dim))
    if head_dim % 2:
        raise ValueError(f"q: expected an even head_dim (features rotate in pairs), got shape {tuple(q.shape)}")
    if q is k:
        raise ValueError("k: expected an array of its own, got q itself (it would be rotated twice)")
    launch.check_array("positions", positions, dtype=np.int32, shape=(tokens,))
    launch.check_array("cos_sin_cache", cos_sin_cache, dtype=np.float32, shape=(None, head_dim))
    max_positions = cos_sin_cache.shape[0]
    if isinstance(positions, np.ndarray) and tokens:
        bad = np.flatnonzero((positions < 0) | (positions >= max_positions))
        if bad.size:
            t = int(bad[0])
            raise ValueError(f"positions: expected every position in [0, {max_positions}) (the cos_sin_cache's "
                             f"rows), got {int(positions[t])} at token {t} ({bad.size} out of range)")


def _rows(d_x):
    """A (tokens, heads, d) device array as (tokens * heads, d) rows (a view: no copy)."""
    tokens, heads, head_dim = d_x.shape
    return d_x.reshape(tokens * heads, head_dim)


def _returned(d_q, d_k, q, k):
    """(q, k) as the caller expects them: new NumPy arrays for NumPy inputs, else the same device arrays."""
    if isinstance(q, np.ndarray) or isinstance(k, np.ndarray):
        return d_q.copy_to_host(), d_k.copy_to_host()
    return d_q, d_k


def naive(q, k, positions, cos_sin_cache, style):
    check_inputs(q, k, positions, cos_sin_cache, style)
    d_q, d_k, d_pos = launch.to_device(q, k, positions)
    neox = 1 if style == "neox" else 0
    for d_x in (d_q, d_k):  # two launches: the angles computed again for k
        rows = _rows(d_x)
        if rows.size:
            grid = launch.grid_stride_blocks(rows.size // 2, THREADS)
            rope_naive_kernel[grid, THREADS](rows, d_pos, d_x.shape[1], cos_sin_cache.shape[0], np.int32(neox))
    return _returned(d_q, d_k, q, k)


def head_slots(q_heads: int) -> int:
    """Head slots a token's threads split its q rows into: each slot turns HEADS_PER_THREAD of them."""
    return max(1, -(-q_heads // HEADS_PER_THREAD))


def optimized(q, k, positions, cos_sin_cache, style):
    check_inputs(q, k, positions, cos_sin_cache, style)
    d_q, d_k, d_pos, d_cache = launch.to_device(q, k, positions, cos_sin_cache)
    tokens, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    if tokens == 0 or q_heads + kv_heads == 0:
        return _returned(d_q, d_k, q, k)
    neox = np.int32(1 if style == "neox" else 0)  # int32, as KERNELS compiles the kernels
    rows_q, rows_k = _rows(d_q), _rows(d_k)
    if head_dim % (2 * PAIRS_PER_GROUP) == 0:  # whole float4 groups in both halves of every row
        slots = head_slots(q_heads)
        threads = tokens * slots * (head_dim // (2 * PAIRS_PER_GROUP))
        rope_cached_kernel[launch.blocks(threads, THREADS), THREADS](
            rows_q, rows_k, d_pos, d_cache, q_heads, kv_heads, slots, neox)
    else:
        threads = tokens * (head_dim // 2)
        rope_cached_scalar_kernel[launch.blocks(threads, THREADS), THREADS](
            rows_q, rows_k, d_pos, d_cache, q_heads, kv_heads, neox)
    return _returned(d_q, d_k, q, k)


def library(q, k, positions, cos_sin_cache, style):
    """vLLM's RotaryEmbedding.forward_native in torch ops on the GPU (torch has no RoPE operator): gather
    the table's rows, split them into cos and sin, rotate both halves (or the even and odd features),
    cat them and copy the result back into q and k (in place for device arrays, zero-copy)."""
    import torch

    check_inputs(q, k, positions, cos_sin_cache, style)
    half = q.shape[-1] // 2
    cos_sin = torch.as_tensor(cos_sin_cache, device="cuda")[torch.as_tensor(positions, device="cuda").long()]
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:]  # (tokens, 1, d/2): broadcast over heads
    outs = []
    for x in (q, k):
        t = torch.as_tensor(x, device="cuda")
        if style == "neox":
            x0, x1 = t[..., :half], t[..., half:]
            rotated = torch.cat((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)
        else:
            x0, x1 = t[..., 0::2], t[..., 1::2]
            rotated = torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1).flatten(-2)
        if isinstance(x, np.ndarray):
            outs.append(rotated.cpu().numpy())
        else:
            t.copy_(rotated)  # into the caller's buffer
            outs.append(x)
    return tuple(outs)
