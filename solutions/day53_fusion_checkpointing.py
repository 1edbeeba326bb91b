"""Day 53: fusion and long-lived intermediates -- an MLP block y = GELU(x W1 + b1) W2 + b2, and a stack
of them whose activations are kept or recomputed (checkpointing).

x (T, d) tokens, W1 (d, h), b1 (h,), W2 (h, d), b2 (d,), float32; GELU is the tanh approximation
GELU(z) = z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))) (GPT-2's, torch's approximate="tanh").
The GEMMs are day 43's (the course's best FP32 GEMM: 128 x 128 tiles, 8 x 8 outputs a thread).

v1 naive      unfused: day 43's blocking_2d for x W1, a bias kernel, a GELU kernel, blocking_2d for
              H W2, a bias kernel: five launches, and the intermediate H (T, h) written by the GEMM,
              read and written by the bias, read and written by the GELU, read by the second GEMM.
v2 epilogue   fused epilogues: one new GEMM kernel, day 43's with an epilogue: bias (and, for the
              first GEMM, the GELU) applied to the 64 accumulators in registers before the one
              store. Two launches; H is written once and read once. The main loop is day 43's.
v3 optimized  the whole block in one kernel (where y's width fits one tile, d <= 128): a block per
              64 tokens computes a 128-wide chunk of H = GELU(x W1 + b1) in registers, keeps it in
              shared memory (transposed, 34 KB) and multiplies it into y's accumulators, chunk after
              chunk: H never reaches device memory. Day 44's 16-byte shared fragment loads, 4 x 8
              outputs a thread in each GEMM. Wider d takes v2's two launches.

Checkpointing (host functions over a stack of L blocks, all with v2's kernel: backward needs H): forward_keep
keeps every block's input a_i (T, d) and hidden g_i = GELU(a_i W1 + b1) (T, h), what backward needs,
L T (d + h) 4 bytes; forward_recompute(every=k) keeps only a_0, a_k, a_2k, ... and recompute(i)
rebuilds (a_i, g_i) from the checkpoint at or before i: memory L/k T d 4 + k T (d + h) 4 bytes (the
checkpoints, plus one segment alive while backward walks it), time one more forward. The curve
(memory_time_curve, GPU only) is the notebook's plot; k ~ sqrt(L d / (d + h)) minimises the memory.

Napkin math. FLOPs 4 T d h (two GEMMs). Bytes through device memory, per token, 4-byte floats:
  fused    x read, H written, H read, y written:           4 (2d + 2h)   (weights: L2-resident)
  unfused  + H by the bias (r+w) and the GELU (r+w), y by the bias (r+w):  + 4 (4h + 2d)
(bytes_through_memory gives both: at d = h = 128, 2048 against 5120 bytes a token, 2.5x; at 128 x 512
and 1024 x 4096, 2.8x). So the unfused block moves E = 4 (4h + 2d) T bytes more. The GEMMs take
G = 4 T d h / R at a GEMM rate R; the extra passes E / B at the elementwise rate B; fusion saves a
share E / G = (R / B) (4/d + 2/h) of the fused time. Day 43 runs R ~ 17 TFLOP/s on the H200 (8.16 ms
at 4096^3) and grid-stride elementwise kernels B ~ 2.9 TB/s (the course's 68 % of the ~4.2 TB/s
copy): R / B ~ 5.9 FLOPs a byte.
  d = h = 128, T = 2^20 (the width of a NeRF / tiny-cuda-nn MLP; H = 512 MB, 9x the L2): G = 68.7
      GFLOP / R ~ 4.0 ms, E = 3.2 GB ~ 1.1 ms: 5.9 x 6/128 = 0.27, ~1.27x. The first benchmark size.
  d = 128, h = 512, T = 2^18 (MLP ratio 4, H = 512 MB): 5.9 (4/128 + 2/512) = 0.21, ~1.2x.
  d = 1024, h = 4096, T = 16384 (a real transformer width, H = 268 MB): 0.026, ~1.03x: at real widths
      the GEMMs dominate and an epilogue saves almost none of the time (but all the same bytes).
The epilogue is not free either: bias + tanh + store are ~25 instructions an output against K = d
FMAs (plus 0.25 shared loads each) in the main loop, ~15 % more issue for x W1 at d = 128 and ~8 %
for the block, which takes the estimate at d = h = 128 to ~1.2x. So the issue's 1.5x is out of reach
with this GEMM: it needs (4/d + 2/h) > 0.5 / 5.9, d = h <= ~70, and below 128 the 128 x 128 tiles
compute idle columns that grow G as fast as E shrinks it. The share grows with the GEMM's rate: at
cuBLAS's 51 TFLOP/s (R / B ~ 18) the same saving would be ~0.8 of the time at d = h = 128 (~1.8x):
the faster the matmul, the more the elementwise passes around it cost (and the more they are worth
fusing). Measured on the H200 (unfused -> fused epilogues): 5.70 -> 4.66 ms (1.22x) at (2^20, 128, 128), 5.27 ->
4.58 ms (1.15x) at (2^18, 128, 512), 16.7 -> 17.4 ms (0.96x) at (16384, 1024, 4096): the epilogues alone
cannot reach 1.5x, as the napkin math says. Bytes (bytes_through_memory): 5.37 -> 2.15 GB, 3.76 -> 1.34
GB, 1.91 -> 0.70 GB.

v3, the whole block in one kernel, removes the rest: H is never written, so at d = h = 128 a token moves
its 512 bytes of x in and 512 of y out (1.07 GB at 2^20 tokens, ~0.25 ms at the copy rate) and the time
is the 68.7 GFLOP of the two GEMMs at whatever rate the kernel computes. Its GEMMs are day 44's float4
shared fragments with 4 x 8 outputs a thread (both accumulator sets, 64 registers, must stay alive
across hidden chunks), the x and weight tiles prefetched a k step ahead in registers (day 45's idea:
their L2 latency hidden behind the outer products), warps shaped 8 x 4 threads so that a fragment load
is one shared-memory wavefront, and MLP_BK = 4 with launch bounds (256, 2): 127 registers, two blocks
(16 warps) an SM, no spill. At 25 TFLOP/s that is ~2.8 ms, 2x the unfused block. Measured on the H200:
2.89 ms at (2^20, 128, 128), 23.8 TFLOP/s (46 % of cuBLAS FP32), 1.97x the unfused 5.69 ms of the same
session (first versions of it: 7.3 ms at one block an SM with 16 x 2-thread warps and no prefetch,
4.5 ms at two blocks). d = 1024 is wider than one tile of y: there optimized takes v2's two launches.
memory_time_curve at (65536, 128, 512), 16 blocks: keep all 2.68 GB
in 18.9 ms; every 1: 0.67 GB, 28.6 ms; 2: 0.57 GB, 33.2 ms; 4: 0.77 GB, 35.5 ms; 8: 1.38 GB, 36.7 ms;
16: 2.68 GB, 37.2 ms (the pool's peak equals the napkin activation bytes).
"""

import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch, wide
from numba import float32  # numba names only after the course import
from solutions.day39_matmul_naive import check_inputs as check_gemm_inputs
from solutions.day39_matmul_naive import tolerance as gemm_tolerance
from solutions.day43_matmul_2d_blocking import (
    A_ROWS_PER_PASS,
    A_TILE,
    B_ROWS_PER_PASS,
    B_TILE,
    BK,
    BM,
    BN,
    LOADS_PER_THREAD,
    OUTPUTS,
    THREAD_COLS,
    THREAD_ROWS,
    THREADS_2D,
    TM,
    TN,
    blocking_2d,
    matmul_blocking_2d_kernel,
)
from solutions.day44_matmul_vectorized import HALF, QUADS, VEC

TITLE = "Fusion and long-lived intermediates"
MEMORY_SPACE = "global + register"
VERSIONS = ("naive", "epilogue", "optimized")  # five launches -> fused epilogues (two) -> one launch
# (T, d, h): one token of width 1; a ragged tile (every side prime, two k steps each); two tile
# rows of tokens; d past one tile (K = 130 in x W1, two tile columns in H W2, the second 2 wide:
# the bias read only where a column exists); tile-aligned last (whole warps: the traffic counts).
# h past one tile is the grader's own test (the epilogue's only: 17 k steps cost the simulator 2 s).
TEST_SIZES = ((1, 1, 1), (33, 13, 11), (129, 9, 6), (3, 130, 6), (64, 32, 64))
BENCH_SIZES = ((1 << 20, 128, 128), (1 << 18, 128, 512), (16384, 1024, 4096))  # see the napkin math
BOUND = "compute"  # the benchmark's peak: cuBLAS FP32 GEMM measured in the same run

ELEMENT_THREADS = 256  # the elementwise kernels: 8 warps a block, a grid that fills the GPU once
# v3, the whole block in one kernel: 64 tokens a block (256 threads, 4 x 8 outputs each, in both GEMMs),
# hidden chunks of 128 (BN) columns; the static shared memory (48 KB at most) holds the hidden chunk
# transposed (128 x 68 floats, 34 KB) and one k step of the x and weight tiles.
MLP_BK = 4  # k a step in both GEMMs: 4 keeps the block to 128 registers with no spill (8: 24 bytes spilled)
MLP_TM = 4  # rows of outputs a thread (day 44's 8, halved: both accumulator sets fit in registers)
MLP_THREADS = THREADS_2D  # 256
MLP_BM = QUADS * MLP_TM  # 64 tokens a block
MLP_OUTPUTS = MLP_TM * TN  # 32 accumulators a set: hacc (the hidden chunk) and yacc (y)
XT_STRIDE = MLP_BM + VEC  # 68: a transposed tile's row, padded so 8 lanes' k land in distinct banks
XT_TILE = MLP_BK * XT_STRIDE
WT_TILE = MLP_BK * BN
HT_TILE = BN * XT_STRIDE
X_LOADS = MLP_BM * MLP_BK // MLP_THREADS  # 2 elements of the x tile a thread a k step
W_LOADS = MLP_BK * BN // MLP_THREADS  # 4 of the weight tile
MLP_BLOCKS_PER_SM = 2  # launch_bounds: ptxas keeps a thread to 65536 / 512 = 128 registers (1: ~157, 8 warps an SM)
_MLP_BOUNDS = {"launch_bounds": (MLP_THREADS, MLP_BLOCKS_PER_SM)} if DEVICE.kind != "sim" else {}
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715

# Inputs: x ~ N(0, 1); W1 ~ N(0, 1/d) so each pre-activation is O(1) (variance 1 + 0.25 with b1);
# W2 ~ N(0, 1/h) times W2_GAIN, which puts E[GELU(z)^2] (0.55 at that variance) back to 1, so a block's
# output is O(1) like its input and a stack of blocks neither grows nor fades. b1 ~ N(0, 0.5^2): a
# bias large enough to move GELU's bend (added after the GELU instead of before, it is off by ~0.1).
B1_SCALE = 0.5
B2_SCALE = 0.1
W2_GAIN = 1.35


def tolerance(d: int, h: int) -> float:
    """Relative tolerance (against max|y|) of the block: day 39's K-long accumulation bound for each
    GEMM, summed (x W1's error reaches y through GELU, slope <= 1.13, and W2, which keeps its scale:
    each hidden error enters y once, with weight W2_GAIN / sqrt(h), h of them adding as a random walk),
    plus a few units for tanh in float32. Measured with a float32 emulation of the kernels' sums:
    below a tenth of this from d = h = 1 to 1024 x 4096 (day 39 too keeps a margin of ten)."""
    return W2_GAIN * gemm_tolerance(d) + gemm_tolerance(h) + 4 * 2.0**-24


def sizes(n) -> tuple[int, int, int]:
    """(T, d, h) of a problem size: an int n is (n, n, n)."""
    return (n, n, n) if isinstance(n, int) else tuple(int(v) for v in n)


RTOL = tolerance(*sizes(BENCH_SIZES[-1])[1:])  # the benchmark re-checks every size with the widest one's
ERROR_FLOOR = 1.0  # every element against max|y|: the error comes from partial sums (see day 39)
MIN_SCALE = 0.1  # a 1 x 1 x 1 block's one output can cancel towards 0 (|y| < 0.003 in 1 % of draws, median 0.17)


def make_weights(d: int, h: int, rng) -> tuple:
    """(W1 (d, h), b1 (h,), W2 (h, d), b2 (d,)) float32, scaled as above."""
    w1 = (rng.standard_normal((d, h), dtype=np.float32) * np.float32(d**-0.5))
    b1 = rng.standard_normal(h, dtype=np.float32) * np.float32(B1_SCALE)
    w2 = (rng.standard_normal((h, d), dtype=np.float32) * np.float32(W2_GAIN * h**-0.5))
    b2 = rng.standard_normal(d, dtype=np.float32) * np.float32(B2_SCALE)
    return w1, b1, w2, b2


def make_inputs(n, seed: int = 0):
    """x (T, d) standard normal and one block's weights (make_weights)."""
    t, d, h = sizes(n)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d), dtype=np.float32)
    return (x, *make_weights(d, h, rng))


def gelu_reference(z):
    return 0.5 * z * (1.0 + np.tanh(SQRT_2_OVER_PI * (z + GELU_CUBIC * z * z * z)))


def reference(x, w1, b1, w2, b2):
    """The block in float64, rounded once to float32."""
    f = np.float64
    g = gelu_reference(x.astype(f) @ w1.astype(f) + b1.astype(f))  # (T, h)
    return (g @ w2.astype(f) + b2.astype(f)).astype(np.float32)  # (T, d)


def traffic(x, w1, b1, w2, b2):
    """(minimum bytes through device memory: x, the weights and y once, H never (a fully fused MLP
    keeps it on chip; day 71); FLOPs: 4 T d h)."""
    t, d = x.shape
    h = w1.shape[1]
    return 4 * (2 * t * d + 2 * d * h + d + h), 4 * t * d * h


def bytes_through_memory(n) -> dict:
    """Napkin bytes each version moves through device memory at size n (each array once per pass; the
    weights once; tile re-reads served by the L2 not counted), and the problem's minimum (traffic)."""
    t, d, h = sizes(n)
    weights = 4 * (2 * d * h + d + h)
    fused = 4 * t * (2 * d + 2 * h) + weights
    minimum = 4 * 2 * t * d + weights
    return {"naive": fused + 4 * t * (4 * h + 2 * d), "epilogue": fused,
            "optimized": minimum if d <= BN else fused, "minimum": minimum}


def check_block(x, w1, b1, w2, b2) -> None:
    """ValueError unless x (T, d), w1 (d, h), b1 (h,), w2 (h, d), b2 (d,) are C-contiguous float32,
    T, d, h >= 1."""
    launch.check_array("x", x, dtype=np.float32, ndim=2)
    t, d = x.shape
    launch.check_array("w1", w1, dtype=np.float32, ndim=2, shape=(d, None))
    h = w1.shape[1]
    launch.check_array("b1", b1, dtype=np.float32, shape=(h,))
    launch.check_array("w2", w2, dtype=np.float32, shape=(h, d))
    launch.check_array("b2", b2, dtype=np.float32, shape=(d,))
    if 0 in (t, d, h):
        raise ValueError(f"x, w1: expected T, d, h >= 1, got x {tuple(x.shape)} and w1 {tuple(w1.shape)}")


@cuda.jit(device=True, inline=True)
def gelu(z):
    """The tanh approximation in float32, written as z sigmoid(2u) = z / (1 + exp(-2u)), u = sqrt(2/pi)
    (z + 0.044715 z^3): the same function (1 + tanh(u) = 2 / (1 + exp(-2u))). expf is a few
    instructions where tanhf is a longer routine: with tanhf the epilogue kernel needs 134 registers
    (one block of 256 an SM), with expf 128 (two, day 43's). Large |z| is safe: exp overflows to inf
    (z / inf = -0) or underflows to 0 (z)."""
    u = float32(SQRT_2_OVER_PI) * (z + float32(GELU_CUBIC) * z * z * z)
    return z / (float32(1.0) + math.exp(float32(-2.0) * u))


# ---- v1: the unfused block's elementwise passes (each a full read and write of its array) -----------

@cuda.jit
def add_bias_kernel(c, bias):  # c (M, N) in place, bias (N,)
    """c[r, col] += bias[col], grid-stride over the M N elements (consecutive threads, consecutive
    columns: a warp reads and writes 128 contiguous bytes)."""
    m, n = c.shape
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < m * n:
        r = i // n
        col = i - r * n
        c[r, col] += bias[col]
        i += step


@cuda.jit
def gelu_kernel(c):  # c (M, N) in place
    """c = GELU(c), grid-stride over the elements: memory-bound (a tanh is ~20 instructions, an SM
    gets ~2 elements a cycle from HBM)."""
    m, n = c.shape
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < m * n:
        r = i // n
        col = i - r * n
        c[r, col] = gelu(c[r, col])
        i += step


def _elementwise(kernel, c, *args) -> None:
    size = c.shape[0] * c.shape[1]
    kernel[launch.grid_stride_blocks(size, ELEMENT_THREADS), ELEMENT_THREADS](c, *args)


# ---- v2: day 43's GEMM with an epilogue ------------------------------------------------------------

@cuda.jit
def matmul_epilogue_kernel(a, b, bias, c, apply_gelu):  # a (M, K), b (K, N), bias (N,), c (M, N)
    """c = act(a @ b + bias) with act = GELU if apply_gelu else the identity: day 43's
    matmul_blocking_2d_kernel (one block of 256 threads per 128 x 128 tile of C, a 1-D grid, tile
    columns fastest; thread t = 16 ty + tx owns c[128 tr + ty + 16 i, 128 tc + tx + 16 j], i, j =
    0..7, summed in acc[i * TN + j]), changed only after its main loop: the epilogue.

    Epilogue (what to write), after the main loop: b_frag[j] = bias[col0 + tx + 16 j] for the
    thread's 8 columns (0.0 where the column is >= N: bias has N entries); acc[i * TN + j] += b_frag[j]
    (the bias before the GELU: GELU(z + b), not GELU(z) + b); if apply_gelu, acc[q] = gelu(acc[q])
    for every q in range(OUTPUTS) (one flat loop: inside the guarded store loops 64 inlined GELUs keep
    the compiler from unrolling them and acc goes to the stack); then day 43's store of the outputs
    with row < M and column < N. Index acc only in loops with constant trip counts.
    """
    # The main loop: day 43's, unchanged (its comments give the reasons).
    a_tile = cuda.shared.array(A_TILE, float32)  # (BM, BK) row-major
    b_tile = cuda.shared.array(B_TILE, float32)  # (BK, BN) row-major
    m, k_dim = a.shape
    n = b.shape[1]
    tiles_n = (n + BN - 1) // BN
    tr = cuda.blockIdx.x // tiles_n
    tc = cuda.blockIdx.x - tr * tiles_n
    t = cuda.threadIdx.x
    row0 = tr * BM
    col0 = tc * BN
    a_row = t // BK
    a_k = t - a_row * BK
    b_k = t // BN
    b_col = t - b_k * BN
    ty = t // THREAD_COLS
    tx = t - ty * THREAD_COLS
    acc = cuda.local.array(OUTPUTS, float32)
    a_frag = cuda.local.array(TM, float32)
    b_frag = cuda.local.array(TN, float32)
    for q in range(OUTPUTS):
        acc[q] = float32(0.0)
    for k0 in range(0, k_dim, BK):
        ka = k0 + a_k
        for p in range(LOADS_PER_THREAD):
            r = a_row + p * A_ROWS_PER_PASS
            i = row0 + r
            if i < m and ka < k_dim:
                a_tile[r * BK + a_k] = a[i, ka]
            else:
                a_tile[r * BK + a_k] = float32(0.0)
        j = col0 + b_col
        for p in range(LOADS_PER_THREAD):
            r = b_k + p * B_ROWS_PER_PASS
            kb = k0 + r
            if kb < k_dim and j < n:
                b_tile[r * BN + b_col] = b[kb, j]
            else:
                b_tile[r * BN + b_col] = float32(0.0)
        cuda.syncthreads()
        for kk in range(BK):
            for i in range(TM):
                a_frag[i] = a_tile[(ty + i * THREAD_ROWS) * BK + kk]
            for j in range(TN):
                b_frag[j] = b_tile[kk * BN + tx + j * THREAD_COLS]
            for i in range(TM):
                for j in range(TN):
                    acc[i * TN + j] += a_frag[i] * b_frag[j]
        cuda.syncthreads()
    # EXERCISE: the 8 columns' biases into b_frag (0.0 past N), add to acc, GELU all acc if apply_gelu, store
    # The epilogue: the accumulators are still in registers, so the bias and the GELU cost no memory
    # traffic at all; the unfused block pays a full read and a full write of c for each of them.
    for j in range(TN):  # the fragment's registers are free now: the thread's 8 biases
        col = col0 + tx + j * THREAD_COLS
        if col < n:  # bias has N entries: a column past N has none to read
            b_frag[j] = bias[col]
        else:
            b_frag[j] = float32(0.0)
    for i in range(TM):
        for j in range(TN):
            acc[i * TN + j] += b_frag[j]  # the bias before the activation: GELU(z + b)
    if apply_gelu:  # uniform across the grid: no divergence
        # One flat loop with no guards: 64 inlined GELUs inside the guarded store loops make them too
        # big for the compiler to unroll, and acc, indexed by a loop counter, would go to the stack.
        for q in range(OUTPUTS):
            acc[q] = gelu(acc[q])
    for i in range(TM):
        row = row0 + ty + i * THREAD_ROWS
        if row < m:
            for j in range(TN):
                col = col0 + tx + j * THREAD_COLS
                if col < n:
                    c[row, col] = acc[i * TN + j]
    # END EXERCISE


# ---- v3: the whole block in one kernel (d <= 128): H never leaves the chip ---------------------------

@cuda.jit(device=True, inline=True)
def load_x_step(x, row0, k0, t, xr):
    """The thread's X_LOADS elements of a k step of the x tile into registers xr: element e = t + 256 p
    is x[row0 + e // MLP_BK, k0 + e % MLP_BK] (0.0 past T or d). A warp reads 4 rows x 32 bytes."""
    for p in range(X_LOADS):
        e = t + p * MLP_THREADS
        r = e // MLP_BK
        kq = e - r * MLP_BK
        if row0 + r < x.shape[0] and k0 + kq < x.shape[1]:
            xr[p] = x[row0 + r, k0 + kq]
        else:
            xr[p] = float32(0.0)


@cuda.jit(device=True, inline=True)
def load_w_step(w, k0, c0, t, wr):
    """The thread's W_LOADS elements of a k step of a weight tile into registers wr: element
    e = t + 256 p is w[k0 + e // 128, c0 + e % 128] (0.0 past w's rows or columns): a warp reads 128
    contiguous bytes of a row."""
    for p in range(W_LOADS):
        e = t + p * MLP_THREADS
        kr = e // BN
        c = e - kr * BN
        if k0 + kr < w.shape[0] and c0 + c < w.shape[1]:
            wr[p] = w[k0 + kr, c0 + c]
        else:
            wr[p] = float32(0.0)


@cuda.jit(device=True, inline=True)
def store_steps(xt, xr, wt, wr, t, with_x):
    """The registers of a k step to shared memory: x TRANSPOSED, xt[k * XT_STRIDE + row] (lanes in 32
    distinct banks: 8 k 68 words apart, 4 rows), the weights as wt[k * 128 + col]."""
    if with_x:
        for p in range(X_LOADS):
            e = t + p * MLP_THREADS
            r = e // MLP_BK
            xt[(e - r * MLP_BK) * XT_STRIDE + r] = xr[p]
    for p in range(W_LOADS):
        wt[t + p * MLP_THREADS] = wr[p]  # e = t + 256 p is (e // 128) * 128 + e % 128: the same index


@cuda.jit(**_MLP_BOUNDS)
def fused_mlp_kernel(x, w1, b1, w2, b2, y):  # x (T, d), w1 (d, h), b1 (h,), w2 (h, d), b2 (d,), y (T, d)
    """y = GELU(x W1 + b1) W2 + b2 for d <= 128: one block of 256 threads per MLP_BM (64) tokens does
    both GEMMs, the hidden tile living in shared memory between them. Thread t (lane t % 32 of warp
    t // 32) has tx = 8 (warp % 2) + lane % 8 and ty = 4 (warp // 2) + lane // 8, both 0..15, and owns
    the 4 x 8 outputs of rows 4 ty + r (r = 0..3) and columns 4 tx + q + 64 w (q = 0..3, w = 0, 1) of
    both products (day 44's layout, half as many rows): hacc (its chunk of H) and yacc (its y).

    For each chunk of HC (128) hidden columns hc0 = 0, 128, ... < h:
      1. hacc = x W1[:, hc0 : hc0 + 128], in k steps of MLP_BK (8). A step's tile elements come
         from registers loaded during the step before (load_x_step, load_w_step: a register
         prefetch): store_steps puts them in shared memory (the x tile TRANSPOSED, xt[k * XT_STRIDE
         + row], the W1 tile as wt[k * 128 + col]); sync; the next step's loads are issued (in the
         last step, W2's first); per kk one float4 of xt (the thread's 4 rows) and two of wt (its 8
         columns) and the 4 x 8 outer product; sync.
      2. The epilogue on the registers: hacc += b1 (0.0 past h), hacc = gelu(hacc), then each of the
         thread's 8 columns goes to shared memory as one float4 of its 4 rows, TRANSPOSED:
         ht[col * XT_STRIDE + 4 ty : +4] (col the chunk's column, the second GEMM's k); the
         barrier of step 3's first k step orders these writes before any read.
      3. yacc += ht W2[hc0 : hc0 + 128, :], k steps over the chunk's min(128, h - hc0) columns: the W2
         tile prefetched as the W1 tile (rows hc0 + k, columns < d), the A fragment a float4 of ht.
    Then y = yacc + b2, rows < T and columns < d stored one by one. H is never written: the
    intermediate that made five launches and 6 passes lives and dies in shared memory.
    """
    # EXERCISE: per 128-wide hidden chunk: x W1 in k steps (transposed x tile), bias + GELU, H^T to shared, += H W2; y
    xt = cuda.shared.array(XT_TILE, float32, alignment=16)  # (MLP_BK, XT_STRIDE): x tile transposed
    wt = cuda.shared.array(WT_TILE, float32, alignment=16)  # (MLP_BK, 128): a k step of W1 or W2
    ht = cuda.shared.array(HT_TILE, float32, alignment=16)  # (128, XT_STRIDE): the hidden chunk, transposed
    t_dim, d = x.shape
    h = w1.shape[1]
    row0 = cuda.blockIdx.x * MLP_BM
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    # A warp is 8 column threads x 4 row threads (warps 2 across, 4 down): its B fragment loads then
    # read 128 contiguous bytes and its A fragment loads 4 float4 of one 64-byte run, one wavefront
    # each (16 x 2 threads, day 44's shape, reads 256 bytes: two). 3 wavefronts per 32 FMAs, not 5.
    tx = (warp % 2) * 8 + lane % 8
    ty = (warp // 2) * 4 + lane // 8
    hacc = cuda.local.array(MLP_OUTPUTS, float32)  # (4, 8): this chunk's GELU(x W1 + b1)
    yacc = cuda.local.array(MLP_OUTPUTS, float32)  # (4, 8): y's sums, alive across every chunk
    a_frag = cuda.local.array(MLP_TM, float32)
    b_frag = cuda.local.array(TN, float32)
    xr = cuda.local.array(X_LOADS, float32)  # the next k step of the x tile, in flight
    wr = cuda.local.array(W_LOADS, float32)  # the next k step of W1 or W2
    zero = float32(0.0)
    for q in range(MLP_OUTPUTS):
        yacc[q] = zero
    for hc0 in range(0, h, BN):
        for q in range(MLP_OUTPUTS):
            hacc[q] = zero
        # Register prefetch (day 45's idea): the next k step's elements are loaded before this step's
        # outer products, so their L2 latency hides behind 256 FMAs instead of stalling the block.
        load_x_step(x, row0, 0, t, xr)
        load_w_step(w1, 0, hc0, t, wr)
        for k0 in range(0, d, MLP_BK):
            store_steps(xt, xr, wt, wr, t, True)
            cuda.syncthreads()
            if k0 + MLP_BK < d:
                load_x_step(x, row0, k0 + MLP_BK, t, xr)
                load_w_step(w1, k0 + MLP_BK, hc0, t, wr)
            else:  # the first k step of H W2, in flight through the epilogue
                load_w_step(w2, hc0, 0, t, wr)
            for kk in range(MLP_BK):
                a_frag[0], a_frag[1], a_frag[2], a_frag[3] = wide.load4(xt, kk * XT_STRIDE + ty * VEC)
                b_frag[0], b_frag[1], b_frag[2], b_frag[3] = wide.load4(wt, kk * BN + tx * VEC)
                b_frag[4], b_frag[5], b_frag[6], b_frag[7] = wide.load4(wt, kk * BN + HALF + tx * VEC)
                for r in range(MLP_TM):
                    for q in range(TN):
                        hacc[r * TN + q] += a_frag[r] * b_frag[q]
            cuda.syncthreads()
        # The epilogue of x W1, on the registers, then the chunk of H to shared memory (never to HBM).
        for q in range(TN):
            col = hc0 + (q // VEC) * HALF + tx * VEC + q % VEC
            b_frag[q] = b1[col] if col < h else zero  # a column past h: z = 0, GELU(0) = 0 for GEMM2
        for q in range(TN):  # column by column: 4 GELUs live at a time, not 32 (registers)
            col = (q // VEC) * HALF + tx * VEC + q % VEC
            bq = b_frag[q]
            wide.store4(ht, col * XT_STRIDE + ty * VEC, (gelu(hacc[q] + bq), gelu(hacc[TN + q] + bq),
                                                         gelu(hacc[2 * TN + q] + bq), gelu(hacc[3 * TN + q] + bq)))
        # No barrier of its own: the first k step's below, after its W2 tile is stored, also orders
        # these writes of H (by all 8 warps) before any warp's reads.
        k_end = min(BN, h - hc0)
        for k0 in range(0, k_end, MLP_BK):
            store_steps(xt, xr, wt, wr, t, False)
            cuda.syncthreads()
            if k0 + MLP_BK < k_end:
                load_w_step(w2, hc0 + k0 + MLP_BK, 0, t, wr)
            for kk in range(MLP_BK):
                a_frag[0], a_frag[1], a_frag[2], a_frag[3] = wide.load4(ht, (k0 + kk) * XT_STRIDE + ty * VEC)
                b_frag[0], b_frag[1], b_frag[2], b_frag[3] = wide.load4(wt, kk * BN + tx * VEC)
                b_frag[4], b_frag[5], b_frag[6], b_frag[7] = wide.load4(wt, kk * BN + HALF + tx * VEC)
                for r in range(MLP_TM):
                    for q in range(TN):
                        yacc[r * TN + q] += a_frag[r] * b_frag[q]
            cuda.syncthreads()  # wt (and, after the last step, ht) is free for the next chunk
    for q in range(TN):
        col = (q // VEC) * HALF + tx * VEC + q % VEC
        b_frag[q] = b2[col] if col < d else zero
    for q in range(MLP_OUTPUTS):
        yacc[q] += b_frag[q % TN]
    if d % VEC == 0:  # 16-byte rows: each of the thread's 4 rows as two float4 (a warp: 2 x 256 bytes)
        for r in range(MLP_TM):
            row = row0 + ty * VEC + r
            for w in range(TN // VEC):
                col = w * HALF + tx * VEC
                if row < t_dim and col < d:  # d a multiple of 4: the float4 is wholly inside
                    s = r * TN + w * VEC
                    wide.store4(y, row, col, (yacc[s], yacc[s + 1], yacc[s + 2], yacc[s + 3]))
    else:
        for r in range(MLP_TM):
            row = row0 + ty * VEC + r
            if row < t_dim:
                for q in range(TN):
                    col = (q // VEC) * HALF + tx * VEC + q % VEC
                    if col < d:
                        y[row, col] = yacc[r * TN + q]


_GEMM_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {
    "naive": (matmul_blocking_2d_kernel, _GEMM_SIG),  # day 43's, both GEMMs
    "naive.bias": (add_bias_kernel, "void(float32[:, ::1], float32[::1])"),
    "naive.gelu": (gelu_kernel, "void(float32[:, ::1])"),
    "epilogue": (matmul_epilogue_kernel,
                 "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1], int32)"),
    "optimized": (fused_mlp_kernel, "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1], "
                                    "float32[::1], float32[:, ::1])"),
}


def gemm_epilogue(a, b, bias, apply_gelu: bool):
    """act(a @ b + bias) through matmul_epilogue_kernel: NumPy in, NumPy out; device in, device out."""
    check_gemm_inputs(a, b)
    launch.check_array("bias", bias, dtype=np.float32, shape=(b.shape[1],))
    m, n = a.shape[0], b.shape[1]
    d_a, d_b, d_bias = launch.to_device(a, b, bias)
    c = launch.empty((m, n), np.float32)
    matmul_epilogue_kernel[launch.blocks(m, BM) * launch.blocks(n, BN), THREADS_2D](
        d_a, d_b, d_bias, c, np.int32(1 if apply_gelu else 0))  # int32, as KERNELS compiles it
    return launch.result(c, a, b, bias)


def naive(x, w1, b1, w2, b2):
    """Unfused: blocking_2d, bias, GELU, blocking_2d, bias (five launches; H through memory 6 times)."""
    check_block(x, w1, b1, w2, b2)
    d_x, d_w1, d_b1, d_w2, d_b2 = launch.to_device(x, w1, b1, w2, b2)
    hidden = blocking_2d(d_x, d_w1)  # (T, h) written
    _elementwise(add_bias_kernel, hidden, d_b1)  # read + written
    _elementwise(gelu_kernel, hidden)  # read + written
    y = blocking_2d(hidden, d_w2)  # H read, (T, d) written
    _elementwise(add_bias_kernel, y, d_b2)  # read + written
    return launch.result(y, x, w1, b1, w2, b2)


def block_forward(x, w1, b1, w2, b2):
    """(g, y): the hidden GELU(x W1 + b1) (T, h) and the output (T, d), two fused launches (device
    arrays in, device arrays out; validated by the caller)."""
    g = gemm_epilogue(x, w1, b1, True)
    return g, gemm_epilogue(g, w2, b2, False)


def epilogue(x, w1, b1, w2, b2):
    """Fused epilogues: the bias and GELU in the first GEMM's epilogue, the bias in the second's (two
    launches)."""
    check_block(x, w1, b1, w2, b2)
    _, y = block_forward(*launch.to_device(x, w1, b1, w2, b2))
    return launch.result(y, x, w1, b1, w2, b2)


def optimized(x, w1, b1, w2, b2):
    """The whole block in one launch where y's width fits one tile (d <= 128): H stays on the chip.
    Wider blocks (a transformer's d = 1024 x 4096) take the fused epilogues: there a token's 4 d bytes
    of x and y are small against its 4 d h FLOPs, and a hidden chunk would be recomputed per y tile."""
    check_block(x, w1, b1, w2, b2)
    t, d = x.shape
    if d > BN:
        return epilogue(x, w1, b1, w2, b2)
    d_x, d_w1, d_b1, d_w2, d_b2 = launch.to_device(x, w1, b1, w2, b2)
    y = launch.empty((t, d), np.float32)
    fused_mlp_kernel[launch.blocks(t, MLP_BM), MLP_THREADS](d_x, d_w1, d_b1, d_w2, d_b2, y)
    return launch.result(y, x, w1, b1, w2, b2)


def library(x, w1, b1, w2, b2):
    """What a CuPy user writes: cuBLAS FP32 GEMMs with elementwise passes between them (unfused)."""
    import cupy

    x, w1, b1, w2, b2 = (cupy.asarray(v) for v in (x, w1, b1, w2, b2))
    z = x @ w1 + b1
    g = 0.5 * z * (1.0 + cupy.tanh(np.float32(SQRT_2_OVER_PI) * (z + np.float32(GELU_CUBIC) * z * z * z)))
    return g @ w2 + b2


# ---- checkpointing: a stack of L blocks, forward only -----------------------------------------------

def make_stack(n, layers: int, seed: int = 0):
    """(x (T, d), params): params a list of `layers` tuples (W1, b1, W2, b2), each as make_inputs'."""
    t, d, h = sizes(n)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d), dtype=np.float32)
    return x, [make_weights(d, h, rng) for _ in range(layers)]


def reference_stack(x, params):
    """The stack's output, each block in float64 (rounded to float32 between blocks, as stored)."""
    for p in params:
        x = reference(x, *p)
    return x


def _check_stack(x, params) -> None:
    if not params:
        raise ValueError("params: expected at least one block's (W1, b1, W2, b2), got an empty list")
    for i, p in enumerate(params):
        if len(p) != 4:
            raise ValueError(f"params[{i}]: expected (W1, b1, W2, b2), got {len(p)} arrays")
        check_block(x, *p)


def _to_device_stack(x, params):
    return launch.to_device(x)[0], [launch.to_device(*p) for p in params]


def _out(a, x):
    return launch.result(a, x) if launch.is_device_array(a) else a


def forward_keep(x, params, probe=None):
    """(out, saved): the stack's output and, for every block i, saved[i] = (a_i, g_i): its input
    (T, d) and its hidden GELU(a_i W1 + b1) (T, h), all kept, as training keeps them for backward:
    L T (d + h) 4 bytes. probe(), if given, is called after each block (a memory sample)."""
    _check_stack(x, params)
    a, d_params = _to_device_stack(x, params)
    saved = []
    for p in d_params:
        g, nxt = block_forward(a, *p)
        saved.append((a, g))
        a = nxt
        if probe:
            probe()
    return _out(a, x), [(_out(s, x), _out(g, x)) for s, g in saved]


def forward_recompute(x, params, every: int, probe=None):
    """(out, checkpoints): the output and {i: a_i for i = 0, every, 2 every, ... < L}, block inputs
    only; each hidden is dropped as soon as its block is done: ceil(L / every) T d 4 bytes kept."""
    _check_stack(x, params)
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every: expected an int >= 1, got {every!r}")
    a, d_params = _to_device_stack(x, params)
    checkpoints = {}
    for i, p in enumerate(d_params):
        if i % every == 0:
            checkpoints[i] = a
        _, a = block_forward(a, *p)  # the hidden dies here
        if probe:
            probe()
    return _out(a, x), {i: _out(c, x) for i, c in checkpoints.items()}


def recompute(checkpoints, params, i: int, every: int):
    """(a_i, g_i), block i's input and hidden, rebuilt from the nearest checkpoint at or before i:
    the checkpoint s = every * (i // every) holds a_s; blocks s, ..., i - 1 are run again to reach a_i,
    then block i's first GEMM (with its bias and GELU) gives g_i. Bitwise what forward_keep saved
    (the same kernels on the same inputs). Arrays as the checkpoints are (NumPy or device)."""
    if not 0 <= i < len(params):
        raise ValueError(f"i: expected a block index in [0, {len(params)}), got {i}")
    # EXERCISE: start from checkpoints[every * (i // every)]; run blocks up to i - 1; g_i from block i's first GEMM
    start = every * (i // every)
    a = checkpoints[start]
    for j in range(start, i):
        _, a = block_forward(a, *params[j])
    w1, b1, _, _ = params[i]
    return a, gemm_epilogue(a, w1, b1, True)
    # END EXERCISE


def replay(x, params, every=None, probe=None):
    """Forward, then every block's (a_i, g_i) visited last block first, as backward would use them,
    each freed after its use: every=None keeps them all (forward_keep); every=k keeps checkpoints and
    rebuilds one segment of k blocks at a time (recompute). Returns the output. probe() is called
    whenever a block's arrays were allocated (the peak of the pool's bytes in use lies at one of them)."""
    if every is None:
        out, saved = forward_keep(x, params, probe)
        while saved:
            saved.pop()  # backward through the last block: its activations are done with
        return out
    out, checkpoints = forward_recompute(x, params, every, probe)
    d_params = [launch.to_device(*p) for p in params]
    for start in reversed(range(0, len(params), every)):
        stop = min(start + every, len(params))
        segment = []  # the segment's (a_j, g_j), alive while backward walks it
        a = checkpoints[start]
        for j in range(start, stop):
            w1, b1, w2, b2 = d_params[j]
            g = gemm_epilogue(a, w1, b1, True)
            segment.append((a, g))
            if j + 1 < stop:  # a_stop is the next segment's checkpoint: backward is done with it
                a = gemm_epilogue(g, w2, b2, False)
            if probe:
                probe()
        del segment, a
        del checkpoints[start]  # backward is past it
    return out


def activation_bytes(n, layers: int, every=None) -> int:
    """Napkin bytes of activations alive at replay's peak, above the input x: all L (a_i, g_i) kept
    (a_1 ... a_L, the last the output, and g_0 ... g_{L-1}); or, a checkpoint every k, the
    ceil(L / k) - 1 checkpoints past x, the output, and one segment's k hiddens and k - 1 inputs
    past its checkpoint: minimal near k = sqrt(L d / (d + h))."""
    t, d, h = sizes(n)
    if every is None:
        return 4 * t * layers * (d + h)
    k = min(every, layers)
    return 4 * t * (math.ceil(layers / every) * d + (k - 1) * d + k * h)


CURVE_SIZE = (1 << 16, 128, 512)  # 65536 tokens: a block's (a_i, g_i) is 160 MB, the stack's 2.7 GB
CURVE_LAYERS = 16
CURVE_EVERY = (None, 1, 2, 4, 8, 16)


def memory_time_curve(n=CURVE_SIZE, layers: int = CURVE_LAYERS, everys=CURVE_EVERY, repeats: int = 5):
    """GPU only. For each policy (None: keep all; k: a checkpoint every k blocks), the peak bytes in
    use in CuPy's memory pool (Numba allocates from it: course.gpu_memory) above what the inputs
    hold, the napkin activation bytes, and the median time of replay (forward + recomputation). Self-
    checking: every policy's output must equal the keep-all output bitwise. Returns a list of dicts."""
    if not ON_GPU:
        raise RuntimeError("memory_time_curve needs a CUDA GPU (CuPy's memory pool and CUDA events)")
    import cupy

    from course import bench

    pool = cupy.get_default_memory_pool()
    x, params = make_stack(n, layers)
    d_x, d_params = _to_device_stack(x, params)
    timer = bench.Timer()
    want = None
    rows = []
    for every in everys:
        cuda.synchronize()
        base = pool.used_bytes()
        peak = [base]

        def probe(peak=peak):
            peak[0] = max(peak[0], pool.used_bytes())

        with launch.no_poison():
            out = replay(d_x, d_params, every, probe).copy_to_host()
            ms, spread = timer.time(replay, d_x, d_params, every, repeats=repeats, warmup=1)
        if want is None:
            want = out
        if not np.array_equal(out, want):
            raise AssertionError(f"every={every}: the output differs from keeping every activation")
        rows.append({"every": every, "peak_bytes": peak[0] - base,
                     "activation_bytes": activation_bytes(n, layers, every), "ms": ms, "spread_ms": spread})
    return rows
