"""Day 72 exercise: checkpoint -- one Llama transformer block (prefill), made only of the course's kernels.

x (batch, seq, hidden) float32 is the residual stream; a prefill of seq tokens of each of batch
sequences, causal attention within each sequence, grouped-query attention (heads a multiple of kv_heads):

    a   = RMSNorm(x) w_norm1                     day 59's rmsnorm_kernel (float32), cast to float16
    q   = a Wq, k = a Wk, v = a Wv               day 47's GEMM (float16 in, float32 out), three calls
    q,k = RoPE(q, k, positions)                  day 61 (in place on (tokens, heads, dim) float32, NeoX)
    o   = attention(q, k, v, causal)             day 68 (float16 (batch, heads, seq, dim), fp32 sums)
    h   = x + o Wo ; n = RMSNorm(h) w_norm2      day 47's GEMM, then day 59's fused add + RMSNorm
    out = h + MLP(n)                             day 71's fused SwiGLU (float16 in, float32 out), day 59's add

Dtypes: the residual stream (x, h, out), both norms and their weights are float32 (day 59's float32
path; the projections and the MLP return float32, so the adds need no cast); everything fed to a GEMM
or to attention is float16 (the tensor cores' input): the norms' outputs, q, k and v after RoPE, the
attention output. The glue this day writes (Numba, every access coalesced):
  to_half_kernel      float32 -> float16, flat (after each norm: day 59 writes its own dtype);
  heads_first_kernel  (tokens, heads, dim) float32 -> (batch, heads, seq, dim) float16: the
                      projections' row-major output, seen as (tokens, heads, dim) for free (a reshape),
                      is what day 61 rotates; day 67 wants each head's rows together, in float16;
  tokens_first_kernel (batch, heads, seq, dim) float16 -> (tokens, heads dim) float16: back to the
                      token-major rows the output projection multiplies.
A warp copies one dim-long row (dim a multiple of 32: every head size day 67 takes): 32 consecutive
elements a request, one 128-byte line of float32 read, 64 bytes of float16 written. The rows are
permuted, not the elements within them, so both sides stay coalesced.

Inputs, every version: (x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up,
positions, cos_sin_cache): weights as day 71 stores them, (in, out) so y = a W; w_q (hidden, heads dim),
w_k and w_v (hidden, kv_heads dim), w_o (heads dim, hidden), w_gate_up day 71's packed layout (a
load-time step); positions (batch, seq) int32; cos_sin_cache day 61's (max_positions, dim) table, whose
width is the head dim. Output (batch, seq, hidden) float32. The attention step is ATTENTION below (one
name: day 68's causal kernel has day 67's signature; switch it there).

v1 numba_block        every step through the Numba paths the simulator runs: day 47's half_loads GEMM,
                      day 59, day 61, day 67's fragments, day 71's fused, the glue. ~15 launches.
v2 tensor_core_block  the same composition with day 47's tensor-core GEMM (mma.sync), day 68's causal
                      attention (day 67's template, tiles past the diagonal skipped, longest blocks
                      first) and day 71's tensor_cores_fused MLP (GPU only).
library               the block in torch eager, float16 throughout (rms_norm, matmul, RoPE by torch ops,
                      scaled_dot_product_attention(is_causal=True, enable_gqa=True), silu), .float().

Napkin math (Llama 3 8B's block, batch 1 x seq 4096: hidden 4096, 32 heads, 8 kv heads, dim 128, inter
14336). GEMM FLOPs: 2 x 4096 x 4096 x (4096 + 1024 + 1024 + 4096) = 0.34 TFLOP for the attention's
projections, 3 x 2 x 4096 x 4096 x 14336 = 1.44 TFLOP for the MLP; attention 4 x 32 x 128 x 4096^2 / 2
= 0.14 TFLOP of causal pairs (the bench counts 1.92 TFLOP in all). At day 47's ~366 TFLOP/s the GEMMs
take ~4.9 ms; day 67's kernel visits every key tile (it masks, day 68 skips: 0.27 TFLOP of work for 0.14
counted) at ~250-300 TFLOP/s: ~1 ms (~0.5 ms with day 68's, which the block now runs). The memory-bound
steps move, per token row of 4096: norms 16-32 KB, casts 24 KB, RoPE 40 heads x 1 KB, the head reorders
4 x 6 KB x ..., adds 48 KB: ~0.4 GB in all at 4096 tokens, ~0.1 ms at 4.2 TB/s. So expect (with day 67's
attention) GEMMs ~80 %, attention ~17 %, the glue and norms a few %: the block is compute-bound, and its
time is the GEMMs' and attention's rates. torch eager runs cuBLAS (~600+ TFLOP/s on fp16 GEMMs) and
SDPA's flash backend (which skips the masked tiles): expect torch ~1.5-2x faster, the gap being day
47's GEMM rate against cuBLAS and day 67's masked tiles (day 68 removes those). kernel_shares gives each
step's time and share. (An earlier version of this estimate counted the causal pairs twice, 0.28 TFLOP,
and expected attention ~30 %.)
Measured on the H200 (make bench, cuBLAS FP16 GEMM 772 TFLOP/s in the same run; % of that peak):
  (1, 4096, 4096, 32, 8, 128, 14336)  tensor_core_block with day 68's attention 5.81 ms, 331.3 TFLOP/s,
      42.9 % of peak, 42.7x numba_block (248.3 ms); torch eager 3.09 ms, 623.5 TFLOP/s, 80.8 %: 1.88x
      faster. With day 67's attention (an earlier run, peak 760) the block took 6.34 ms against torch's
      3.12 ms (2.03x), and kernel_shares (adding up to that 6.34 ms) gave: mlp 3.765 ms (59.4 %),
      attention 1.015 (16.0 %), the four projections 0.929 (14.6 %: q and o 0.37 each, k and v 0.095
      each), the norms, casts, RoPE, reorders and adds 0.635 (10.0 %; heads_first 0.180, rms_norm_1
      0.116). Attention 16 %, as expected then; the GEMMs 74 % (expected ~80 %) because the glue and
      norms take 10 %, 6x the ~0.1 ms estimate (why: not measured apart). Day 68's attention took 0.53
      ms off the block, all of it attention's (the only step that changed): about 0.49 ms now, ~8 % of
      5.81 ms (shares not re-measured). The GEMMs run at 362-383 TFLOP/s (day 47's rate): at cuBLAS's
      ~690 (day 71) they would take ~2.6 ms, not 4.7, most of torch's remaining 2.7 ms lead.
  (4, 512, 2048, 32, 8, 64, 8192), with day 67's attention (not re-run)  tensor_core_block 0.989 ms,
      256.2 TFLOP/s, 33.7 % (peak 760), 21.6x numba_block; torch eager 0.560 ms, 452.3 TFLOP/s: 1.77x
      faster. Shares: mlp 0.577 ms (57 %), projections 0.184 (18 %), attention 0.050 (5 %), the glue
      and norms 0.196 (19 %).

Reference: float64 NumPy with the float16 roundings where the block stores float16 (the norms'
outputs, q/k/v after RoPE, the attention output, day 71's h), through day 61's, attention_common's
and day 71's references. Tolerance, against max|out| (ERROR_FLOOR = 1): each of those six roundings
can flip by one ulp (2^-11 relative) where the kernels' float32 value and the reference's float64 one
fall on either side of a rounding boundary, and day 67 rounds P to float16 (2^-11 of each weight),
each propagated by a GEMM with unit-gain weights into outputs of the same or smaller scale than the
residual stream: 4 x 2^-11 ~ 2e-3 of the output's scale covers them (the simulator's errors: ~2e-4).

What you write (each raises NotImplementedError with its hint until you do):
  heads_first_kernel   a warp per output row r: split r into (b, h, s) once, lanes stride over d by 32, cast to fp16
                       (11 lines)
  tokens_first_kernel  a warp per output row r = t heads + h: find (b, s) from the token t, lanes stride over d by
                       32 (11 lines)
  compose_block        chain the steps of the docstring, calling mark(step) after each (37 lines)
Everything else in this file is given. Grade with:  make check DAY=72
"""

import functools
import statistics
import time

import numpy as np

from course import ON_GPU, cuda, launch
from numba import float32  # noqa: F401  (numba names only after the course import)
from numba.types import float16
from solutions import attention_common
from solutions import day47_matmul_tensor_cores as day47
from solutions import day59_fused_add_rmsnorm as day59
from solutions import day61_rotary_embeddings as day61
from solutions import day67_flash_attention_tensor_cores as day67
from solutions import day68_causal_attention as day68
from solutions import day71_fused_mlp as day71

TITLE = "Checkpoint: one transformer block"
MEMORY_SPACE = "global + register"
VERSIONS = ("numba_block", "tensor_core_block")
SIM_VERSIONS = ("numba_block",)  # tensor_core_block runs CuPy RawKernels (mma.sync): gpu-marked tests
BOUND = "compute"
PEAK_DTYPE = "float16"
# (batch, seq, hidden, heads, kv_heads, dim, inter): one token, MQA (2 heads, 1 kv head), inter not a
# multiple of 16 (day 71's partial group); two sequences of 7 (not a multiple of any tile: positions
# restart at 0 in the second), GQA 4:2, hidden 48 (not heads x dim, not a power of two). Small hidden
# and inter: the simulator runs every thread of ~15 launches in Python (~10 s a block at these sizes).
TEST_SIZES = ((1, 1, 32, 2, 1, 32, 24), (2, 7, 48, 4, 2, 32, 40))
# Llama 3 8B's block at one 4096-token prefill; Llama 3.2 1B's (dim 64) at 4 x 512 tokens.
BENCH_SIZES = ((1, 4096, 4096, 32, 8, 128, 14336), (4, 512, 2048, 32, 8, 64, 8192))
EPS = day59.EPS
MAX_POSITIONS = 4096  # the cos/sin table's rows (at least seq)
STEPS = ("rms_norm_1", "cast_1", "q_proj", "k_proj", "v_proj", "rope", "heads_first", "attention",
         "tokens_first", "o_proj", "add_rms_norm_2", "cast_2", "mlp", "residual_2")

H_ROUNDING = 2.0**-11  # one float16 rounding flipped: half an ulp each way
RTOL = 4 * H_ROUNDING  # ~2e-3 of max|out| (see the docstring; the simulator measures ~2e-4)
ERROR_FLOOR = 1.0  # every error held against max|out|: the sublayers add into a residual of that scale
MIN_SCALE = 1.0  # x has an rms of 2 by construction: |out| reaches well past 1
# torch rounds the residual stream, every GEMM output, the RoPE products and the adds to float16.
VERSION_RTOL = {"library": 24 * H_ROUNDING}

# The attention step, one name per path: the Numba path is day 67's fragments kernel; the tensor-core
# path day 68's causal kernel (day 67's template, tiles past the diagonal skipped, longest blocks first).
ATTENTION = {"numba_block": day67.fragments, "tensor_core_block": day68.optimized}
HEAD_DIMS = day67.HEAD_DIMS  # 32, 64, 96, 128: what the attention kernels take
ROW_THREADS = 32  # glue: a warp per dim-long row
ROW_WARPS = 8  # rows a block
CAST_THREADS = 256


def sizes(n) -> tuple[int, int, int, int, int, int, int]:
    batch, seq, hidden, heads, kv_heads, dim, inter = (int(v) for v in n)
    return batch, seq, hidden, heads, kv_heads, dim, inter


def make_inputs(n, seed: int = 0):
    """x normal of rms 2 (float32); norm weights in [0.5, 1.5] (float16 values, stored float32); the
    projections scaled by fan_in^-1/2 (unit-gain: q, k, v, o of rms ~1), day 71's MLP weights and their
    packed layout; positions 0 .. seq - 1 for every sequence (a prefill); day 61's cos/sin table."""
    batch, seq, hidden, heads, kv_heads, dim, inter = sizes(n)
    rng = np.random.default_rng(seed)

    def normal(shape, scale):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float16)

    def norm_weight():
        return rng.uniform(0.5, 1.5, hidden).astype(np.float16).astype(np.float32)

    x = 2.0 * rng.standard_normal((batch, seq, hidden), dtype=np.float32)
    w_norm1 = norm_weight()
    w_q = normal((hidden, heads * dim), hidden**-0.5)
    w_k = normal((hidden, kv_heads * dim), hidden**-0.5)
    w_v = normal((hidden, kv_heads * dim), hidden**-0.5)
    w_o = normal((heads * dim, hidden), (heads * dim) ** -0.5)
    w_norm2 = norm_weight()
    w_gate = normal((hidden, inter), hidden**-0.5)
    w_up = normal((hidden, inter), hidden**-0.5)
    w_down = normal((inter, hidden), inter**-0.5)
    positions = np.ascontiguousarray(np.tile(np.arange(seq, dtype=np.int32), (batch, 1)))  # (batch, seq)
    cache = day61.build_cos_sin_cache(max(MAX_POSITIONS, seq), dim)
    return (x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, day71.pack_gate_up(w_gate, w_up),
            positions, cache)


def _rms64(v, w):
    return v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + EPS) * w.astype(np.float64)


def _half64(v):
    return v.astype(np.float16).astype(np.float64)


def reference(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
              cos_sin_cache):
    """float64 throughout, float16 where the block stores float16 (see the docstring)."""
    batch, seq, hidden = x.shape
    dim = cos_sin_cache.shape[1]
    heads, kv_heads = w_q.shape[1] // dim, w_k.shape[1] // dim
    tokens = batch * seq
    t = x.reshape(tokens, hidden).astype(np.float64)
    a = _half64(_rms64(t, w_norm1))
    q, k, v = (a @ w.astype(np.float64) for w in (w_q, w_k, w_v))
    q, k = day61.reference(q.reshape(tokens, heads, dim).astype(np.float32),
                           k.reshape(tokens, kv_heads, dim).astype(np.float32), positions.reshape(tokens),
                           cos_sin_cache, "neox")

    def heads_first(z, nh):
        return np.ascontiguousarray(z.reshape(batch, seq, nh, dim).transpose(0, 2, 1, 3)).astype(np.float16)

    o = attention_common.reference(heads_first(q, heads), heads_first(k, kv_heads),
                                   heads_first(v, kv_heads), True)  # float16 (batch, heads, seq, dim)
    o = o.transpose(0, 2, 1, 3).reshape(tokens, heads * dim).astype(np.float64)
    h = t + o @ w_o.astype(np.float64)
    n2 = _half64(_rms64(h, w_norm2)).astype(np.float16)
    mlp = day71.reference(n2, w_gate, w_up, w_down, w_gate_up).astype(np.float64)
    return (h + mlp).astype(np.float32).reshape(batch, seq, hidden)


def traffic(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
            cos_sin_cache):
    """(minimum bytes: every weight read once, x read and out written once, one table row a token;
    FLOPs: the seven GEMMs' 2 m n k and attention's 4 dim per causal (query, key) pair and head)."""
    batch, seq, hidden = x.shape
    dim = cos_sin_cache.shape[1]
    heads = w_q.shape[1] // dim
    tokens = batch * seq
    weights = sum(w.nbytes for w in (w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down))
    nbytes = weights + 2 * x.nbytes + positions.nbytes + 4 * dim * tokens
    gemm = 2 * tokens * hidden * (w_q.shape[1] + w_k.shape[1] + w_v.shape[1] + w_o.shape[1])
    mlp = 3 * 2 * tokens * hidden * w_gate.shape[1]
    attention = 4 * batch * heads * dim * attention_common.pairs(seq, seq, True)
    return nbytes, gemm + mlp + attention


def check_inputs(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
                 cos_sin_cache) -> None:
    """ValueError before any launch unless every array is C-contiguous with the dtype and shape of the
    docstring: x (batch, seq, hidden) float32; dim (the table's width) one of HEAD_DIMS; heads a multiple
    of kv_heads; NumPy positions within the table."""
    launch.check_array("x", x, dtype=np.float32, ndim=3)
    batch, seq, hidden = x.shape
    if min(batch, seq, hidden) < 1:
        raise ValueError(f"x: expected batch, seq, hidden >= 1, got shape {tuple(x.shape)}")
    launch.check_array("cos_sin_cache", cos_sin_cache, dtype=np.float32, ndim=2)
    dim = cos_sin_cache.shape[1]
    if dim not in HEAD_DIMS:
        raise ValueError(f"cos_sin_cache: its width is the head dim, expected one of {HEAD_DIMS}, got {dim}")
    for name, w in (("w_norm1", w_norm1), ("w_norm2", w_norm2)):
        launch.check_array(name, w, dtype=np.float32, shape=(hidden,))
    launch.check_array("w_q", w_q, dtype=np.float16, shape=(hidden, None))
    launch.check_array("w_k", w_k, dtype=np.float16, shape=(hidden, None))
    launch.check_array("w_v", w_v, dtype=np.float16, shape=tuple(w_k.shape))
    heads, kv_heads = w_q.shape[1] // dim, w_k.shape[1] // dim
    if w_q.shape[1] % dim or w_k.shape[1] % dim or kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"w_q, w_k: expected heads x {dim} and kv_heads x {dim} columns with heads a multiple "
                         f"of kv_heads, got {w_q.shape[1]} and {w_k.shape[1]}")
    launch.check_array("w_o", w_o, dtype=np.float16, shape=(heads * dim, hidden))
    launch.check_array("w_gate", w_gate, dtype=np.float16, shape=(hidden, None))
    inter = w_gate.shape[1]
    if inter < 1:
        raise ValueError(f"w_gate: expected inter >= 1, got shape {tuple(w_gate.shape)}")
    launch.check_array("w_up", w_up, dtype=np.float16, shape=(hidden, inter))
    launch.check_array("w_down", w_down, dtype=np.float16, shape=(inter, hidden))
    launch.check_array("w_gate_up", w_gate_up, dtype=np.float16, shape=(hidden, day71.packed_columns(inter)))
    launch.check_array("positions", positions, dtype=np.int32, shape=(batch, seq))
    if isinstance(positions, np.ndarray):
        bad = np.flatnonzero((positions < 0) | (positions >= cos_sin_cache.shape[0]))
        if bad.size:
            raise ValueError(f"positions: expected every position in [0, {cos_sin_cache.shape[0]}) (the table's "
                             f"rows), got {int(positions.reshape(-1)[bad[0]])}")


# ---- the glue: casts and head reorders (this day's kernels) ------------------------------------------

@cuda.jit
def to_half_kernel(src, out):  # src (size,) float32, out (size,) float16
    """out[i] = float16(src[i]), a grid-stride loop: consecutive threads, consecutive elements."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < src.size:
        out[i] = float16(src[i])  # a warp: 128 bytes read, 64 written, one request each
        i += stride


@cuda.jit
def heads_first_kernel(src, out):  # src (tokens, heads, dim) float32, out (batch, heads, seq, dim) float16
    """out[b, h, s, d] = float16(src[b seq + s, h, d]). Block (32, ROW_WARPS): warp y copies output row
    r = (b heads + h) seq + s (rows in output order, grid-stride over all batch heads seq of them), lane x
    the elements d = x, x + 32, ... of it (dim a multiple of 32): each request 32 consecutive elements of
    one src row and one out row."""
    raise NotImplementedError("Day 72: a warp per output row r: split r into (b, h, s) once, lanes stride over d by "
                              "32, cast to fp16 (11 lines)")


@cuda.jit
def tokens_first_kernel(src, out):  # src (batch, heads, seq, dim) float16, out (tokens, heads, dim) float16
    """out[b seq + s, h, d] = src[b, h, s, d], the inverse reorder: warp y copies output row r = t heads + h
    (token t = b seq + s), lanes over d by 32, as heads_first_kernel."""
    raise NotImplementedError("Day 72: a warp per output row r = t heads + h: find (b, s) from the token t, lanes "
                              "stride over d by 32 (11 lines)")


KERNELS = {
    "numba_block.to_half": (to_half_kernel, "void(float32[::1], float16[::1])"),
    "numba_block.heads_first": (heads_first_kernel, "void(float32[:, :, ::1], float16[:, :, :, ::1])"),
    "numba_block.tokens_first": (tokens_first_kernel, "void(float16[:, :, :, ::1], float16[:, :, ::1])"),
}
# The tensor-core block runs the same glue between its CuPy kernels.
KERNELS.update({"tensor_core_block" + label[len("numba_block"):]: kernel for label, kernel in KERNELS.items()})


def _row_grid(rows: int) -> int:
    return launch.grid_stride_blocks(rows * ROW_THREADS, ROW_THREADS * ROW_WARPS)


def to_half(d_src):
    """A float16 copy of a float32 device array (any shape, C-contiguous)."""
    out = launch.empty(d_src.shape, np.float16)
    flat_src, flat_out = d_src.reshape(d_src.size), out.reshape(d_src.size)
    to_half_kernel[launch.grid_stride_blocks(d_src.size, CAST_THREADS), CAST_THREADS](flat_src, flat_out)
    return out


def heads_first(d_src, batch: int, seq: int):
    """(tokens, heads, dim) float32 -> (batch, heads, seq, dim) float16."""
    _, heads, dim = d_src.shape
    out = launch.empty((batch, heads, seq, dim), np.float16)
    heads_first_kernel[_row_grid(batch * heads * seq), (ROW_THREADS, ROW_WARPS)](d_src, out)
    return out


def tokens_first(d_src):
    """(batch, heads, seq, dim) float16 -> (tokens, heads dim) float16."""
    batch, heads, seq, dim = d_src.shape
    out = launch.empty((batch * seq, heads, dim), np.float16)
    tokens_first_kernel[_row_grid(batch * seq * heads), (ROW_THREADS, ROW_WARPS)](d_src, out)
    return out.reshape(batch * seq, heads * dim)


# ---- the earlier days' kernels, as the block calls them ------------------------------------------------

def rms_norm(d_x, d_w):
    """Day 59's RMSNorm kernel (its naive version's second kernel: no residual to add yet), float32."""
    out = launch.empty(d_x.shape, np.float32)
    grid = launch.grid_stride_blocks(d_x.shape[0] * day59.THREADS, day59.THREADS, day59.BLOCKS_PER_SM)
    day59.rmsnorm_kernel[grid, day59.THREADS](d_x, d_w, np.float32(EPS), out)
    return out


def add(d_a, d_b):
    """Day 59's elementwise add kernel, float32: the block's last residual add."""
    out = launch.empty(d_a.shape, np.float32)
    size = d_a.size
    day59.add_kernel[launch.grid_stride_blocks(size, day59.THREADS), day59.THREADS](
        d_a.reshape(size), d_b.reshape(size), out.reshape(size))
    return out


def _no_mark(step: str) -> None:
    pass


def compose_block(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
                  cos_sin_cache, *, gemm, attention, mlp, mark=_no_mark):
    """The block on device arrays (validated), returning out (batch, seq, hidden) float32 on the device.
    gemm(a, b) (float16 (m, k), (k, n) -> float32 (m, n)), attention(q, k, v, causal) and mlp(x, w_gate,
    w_up, w_down, w_gate_up) (float16 x -> float32) are the path's kernels. After each step call
    mark(name) with the names of STEPS, in that order:
      rms_norm_1      a = rms_norm(x as (tokens, hidden), w_norm1)          float32
      cast_1          to_half(a)
      q_proj, k_proj, v_proj   gemm(a16, w_q / w_k / w_v)                   float32 (tokens, * dim)
      rope            day61.optimized on q, k seen as (tokens, heads, dim), positions as (tokens,), "neox"
      heads_first     q, k, v -> float16 (batch, heads, seq, dim)
      attention       attention(q, k, v, True)
      tokens_first    -> float16 (tokens, heads dim)
      o_proj          gemm(., w_o)                                          float32 (tokens, hidden)
      add_rms_norm_2  day59.optimized(o, x, w_norm2, EPS) -> (n2, h = x + o)
      cast_2          to_half(n2)
      mlp             mlp(n2 16, w_gate, w_up, w_down, w_gate_up)
      residual_2      add(mlp out, h), reshaped to (batch, seq, hidden)."""
    raise NotImplementedError("Day 72: chain the steps of the docstring, calling mark(step) after each (37 lines)")


def _run(path: str, inputs, gemm, mlp, mark=_no_mark):
    check_inputs(*inputs)
    d_inputs = launch.to_device(*inputs)
    out = compose_block(*d_inputs, gemm=gemm, attention=ATTENTION[path], mlp=mlp, mark=mark)
    return launch.result(out, *inputs)


def numba_block(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
                cos_sin_cache):
    inputs = (x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions, cos_sin_cache)
    return _run("numba_block", inputs, day47.half_loads, day71.fused)


def _need_gpu(what: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{what} needs a CUDA GPU: the simulator cannot run tensor cores (numba_block is "
                           "the same block on the Numba paths)")


def tensor_core_block(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
                      cos_sin_cache, mark=_no_mark):
    inputs = (x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions, cos_sin_cache)
    check_inputs(*inputs)
    _need_gpu("tensor_core_block")
    return _run("tensor_core_block", inputs, day47.tensor_cores, day71.tensor_cores_fused, mark)


naive = numba_block
optimized = tensor_core_block


def kernel_shares(n=BENCH_SIZES[0], repeats: int = 10) -> dict:
    """{step: (ms, share of the block)} for tensor_core_block at size n on the GPU: a CUDA event after
    each step of STEPS (compose_block's marks), L2 flushed before each run (course.bench's Timer), the
    median over the runs. The shares sum to 1; the steps' ms sum to the block's time."""
    if not ON_GPU:
        raise RuntimeError("kernel_shares times kernels with CUDA events: it needs a CUDA GPU")
    from course import bench

    inputs = tuple(launch.to_device(a)[0] for a in make_inputs(n, seed=0))
    timer = bench.Timer()
    events: list = []

    def mark(step: str) -> None:
        e = cuda.event()
        e.record()
        events.append((step, e))

    def marked_block():
        events.clear()
        mark("start")
        tensor_core_block(*inputs, mark=mark)

    samples = {step: [] for step in STEPS}
    with launch.no_poison():
        tensor_core_block(*inputs)  # compile and warm up
        cuda.synchronize()
        # The spin kernel in front of each sample must outlast the host's enqueueing of the whole
        # block (as course.bench's Timer.time sets it), or the events time the GPU waiting for launches.
        t = time.perf_counter()
        marked_block()
        host_s = time.perf_counter() - t
        cuda.synchronize()
        timer.spin_ns = int(min(bench.MAX_SPIN_NS, max(bench.SPIN_NS, 4 * host_s * 1e9)))
        for _ in range(repeats):
            timer.sample(marked_block)  # flushes L2, synchronizes at the end
            for (_, e0), (step, e1) in zip(events, events[1:]):
                samples[step].append(cuda.event_elapsed_time(e0, e1))
    ms = {step: statistics.median(samples[step]) for step in STEPS}
    total = sum(ms.values())
    return {step: (ms[step], ms[step] / total) for step in STEPS}


@functools.cache
def _torch_rms_norm():
    import torch

    return getattr(torch.nn.functional, "rms_norm", None)


def library(x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions,
            cos_sin_cache):
    """The block in torch eager, float16 on the GPU, the same weights: what a PyTorch Llama runs
    without fused kernels (cuBLAS GEMMs, SDPA's flash backend, elementwise ops)."""
    import torch
    import torch.nn.functional as F

    inputs = (x, w_norm1, w_q, w_k, w_v, w_o, w_norm2, w_gate, w_up, w_down, w_gate_up, positions, cos_sin_cache)
    check_inputs(*inputs)
    t = [torch.as_tensor(a, device="cuda") for a in inputs]
    tx, tn1, tq, tk, tv, to, tn2, tg, tu, td, _, tpos, tcache = t
    batch, seq, hidden = x.shape
    dim = cos_sin_cache.shape[1]
    half = dim // 2
    rms_norm = _torch_rms_norm()

    def norm(v, w):
        w = w.half()
        if rms_norm is not None:
            return rms_norm(v, (hidden,), w, EPS)
        vf = v.float()  # torch < 2.4
        return (vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + EPS)).half() * w

    cos_sin = tcache[tpos.long()].half()  # (batch, seq, dim)
    cos, sin = cos_sin[..., None, :half], cos_sin[..., None, half:]  # (batch, seq, 1, dim / 2)

    def rope(z):  # (batch, seq, heads, dim), NeoX halves
        z0, z1 = z[..., :half], z[..., half:]
        return torch.cat((z0 * cos - z1 * sin, z1 * cos + z0 * sin), dim=-1)

    h0 = tx.half()
    a = norm(h0, tn1)
    q = rope((a @ tq).view(batch, seq, -1, dim)).transpose(1, 2)
    k = rope((a @ tk).view(batch, seq, -1, dim)).transpose(1, 2)
    v = (a @ tv).view(batch, seq, -1, dim).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    h = h0 + o.transpose(1, 2).reshape(batch, seq, -1) @ to
    n2 = norm(h, tn2)
    out = (h + (F.silu(n2 @ tg) * (n2 @ tu)) @ td).float()
    return out.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(out)
