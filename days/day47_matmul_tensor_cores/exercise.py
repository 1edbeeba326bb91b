"""Day 47 exercise: matrix multiply, step 9 (tensor cores) -- C = A B, A (M, K), B (K, N) float16, C float32.

The problem is day 39's with float16 inputs (its own make_inputs, reference, tolerance and
check_inputs below; sizes, traffic shapes and the benchmark shapes are day 39's). Every product of two
float16 values is exact in float32 (11 x 11 significant bits fit in 24), so the only rounding left is
the float32 accumulation, as on day 39. The FP32 row widens the inputs and runs day 43's 2-D blocking
(the first step whose speed a tensor-core kernel is usually compared with; days 44-46 halve its time).

v1 fp32_path     what you do without tensor cores: widen A and B to float32 on the device (one pass,
                 2 bytes read and 4 written an element) and run day 43's 2-D blocking kernel on them
                 (SGEMM on CUDA cores: ~60 TFLOP/s FP32 peak on the H200).
v2 half_loads    day 43's 2-D blocking (128 x 128 tiles, 8 deep, an 8 x 8 outer product a thread), reading
                 the float16 inputs directly and widening them on the load into float32 shared tiles:
                 half the global bytes of v1 and no widening pass; the FMAs are still FP32 CUDA-core FMAs.
                 The simulator grades this kernel (it cannot run tensor cores).
v3 tensor_cores  a CuPy RawKernel in CUDA C (tensor_core_source()): 128 x 128 x 32 block tiles, 4 warps
                 of 64 x 64 (4 x 8 mma tiles of 16 x 8 each), mma.sync.aligned.m16n8k16.row.col.f32.f16
                 .f16.f32 through inline PTX on fragments loaded by ldmatrix (.x4 for A; .x4.trans for B,
                 which is (K, N) row-major), shared tiles XOR-swizzled against bank conflicts, filled by
                 cp.async.cg 16 bytes a thread in a 3-stage pipeline (commit / wait_group 1, one barrier a
                 k tile), fp32 accumulators in registers (128 a thread), output stores guarded.

Napkin math. 2MNK FLOPs on 2(MK + KN) + 4MN bytes: at 4096^3, 137 GFLOP on 101 MB. The H200's dense
fp16 tensor peak is ~990 TFLOP/s (one m16n8k16, 4096 FLOPs, a cycle an SM at ~1.8 GHz on 132 SMs);
cuBLAS HGEMM uses wgmma, the Hopper warpgroup MMA that reads its operands straight from shared memory
(the library row below, astype included, measured 518 TFLOP/s at 4096^3). mma.sync is the Ampere
instruction: on Hopper it issues to the same tensor cores but a warp at a time, with both operands
staged through registers, and microbenchmarks put its ceiling near two thirds of the wgmma rate
(~600-660 TFLOP/s); that is this kernel's roof. Inside the kernel: per 16-deep k step a warp issues
4 ldmatrix.x4 for B (8 n-tiles of 8) and 4 for A (4 m-tiles of 16), 8 x 512 bytes = 32 shared
wavefronts, for 32 mma: one wavefront an mma, and the cp.async stores add 16 KB per 128 x 128 x 32
tile (128 wavefronts per 256 mma). So shared memory serves
~0.67 mma a cycle at most, about the mma.sync ceiling (a 64 x 32 warp tile, 6 ldmatrix per 16 mma,
would cap it at 0.5: the reason for 4 warps of 64 x 64 rather than 8 of 64 x 32). Global side: a
128 x 128 x 32 tile reads 16 KB for 1 MFLOP, 64 FLOPs per byte from L2 (day 43: 32); tiles run in
groups of 8 tile rows so a wave of blocks reuses B from L2. Registers: 128 accumulators + 16 (B) + 4
(A) fragment registers + addresses, under 255 with no spills (the nvcc test checks); 128 threads x
<= 256 registers and 48 KB of shared memory (3 stages x 16 KB) a block: two blocks an SM, 8 warps,
each with 32 independent mma a k step to cover the tensor pipe's latency. The target: over 50 % of
cuBLAS HGEMM at 4096^3 (aim 70 %). Measured on the H200 (make bench, the library row in the same run
at each shape): 375.6 us at 4096^3, 366 TFLOP/s, 70.6 % of the library row (265 us, 518 TFLOP/s,
which includes its astype to float32), 22x half_loads: the target met; at 4093 x 4099 x 1021 223.5 us,
153 TFLOP/s, 1.39x faster than cuBLAS's 311 us there. The two FP32 paths are bound by the FP32 FMA
rate (~60 TFLOP/s peak): measured 16.6 TFLOP/s each at 4096^3 (8.3 ms, 3.2 % of the library row) and
16.0-16.4 at 4093 x 4099 x 1021 (about 15 % of a library row that reaches only 110 TFLOP/s there).

Edges: cp.async moves aligned 16-byte chunks (8 halves), so each row of A and of B must start on 16
bytes: when K or N is not a multiple of 8 (or an input is not 16-byte aligned) the host copies A to
(M, ceil8(K)) or B to (K, ceil8(N)) with zeros (cupy.zeros plus a slice copy). At 4096^3 nothing is
copied; at 4093 x 4099 x 1021 both are (K = 1021, N = 4099): 8.4 MB each, ~40 MB moved by four small
kernels, ~10-15 us by the napkin math, inside the 223.5 us the whole call measures (34 GFLOP; the
copies' share is not measured separately). Inside the kernel every chunk past M, N or K is zero-filled
by cp.async's src-size operand (0 bytes read), so the k loop runs ceil(K / 32) tiles with no guard in
the mma loop, and only outputs inside C are stored.

library: cupy.matmul on the float16 inputs (cuBLAS, fp32 accumulation by CuPy's default compute type),
whose output is float16: cast to float32 (.astype), which rounds every output to fp16 (2^-11 of it:
VERSION_RTOL) and adds one pass over C (6 bytes an element, ~25 us at 4096^2) to the row.

What you write (each raises NotImplementedError with its hint until you do):
  matmul_half_loads_kernel  zero acc; per k step load 4 of each tile as float32 (0.0 past edges), sync, outer
                            products, sync (29 lines)
  tensor_core_source        write tc_gemm: 3-stage swizzled cp.async tiles, ldmatrix (.trans for B), mma.sync,
                            guarded stores (128 lines)
Everything else in this file is given. Grade with:  make check DAY=47
"""

import functools
import math

import numpy as np

from course import ON_GPU, cuda, launch
from numba import float32  # numba names only after the course import
from solutions.day39_matmul_naive import (  # noqa: F401  (the unit's shapes: graders and bench read these)
    BENCH_SIZES,
    BOUND,
    ERROR_FLOOR,
    MIN_SCALE,
    TEST_SIZES,
    UNIT_ROUNDOFF,
    sizes,
)
from solutions.day43_matmul_2d_blocking import (  # the FP32 step this day builds on (day 46's, later)
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

PEAK_DTYPE = "float16"  # course.bench: the peak row is cuBLAS FP16 GEMM (tensor cores), not FP32
TITLE = "Matrix multiply 9: tensor cores"
MEMORY_SPACE = "shared + register"
VERSIONS = ("fp32_path", "half_loads", "tensor_cores")

# Tolerance. Every float16 x float16 product is exact in float32, so day 39's argument holds for the
# CUDA-core paths: a K-long float32 accumulation, errors a random walk of sqrt(K) roundings. Tensor
# cores add a bias: inside an mma the products are aligned to the largest exponent and the sum is
# truncated, not rounded (measured on Volta to Hopper: Fasi et al. 2021), one truncation of up to an
# ulp per 16-deep mma, always towards zero, so those errors add up linearly: K / 16 ulps. One dropped k
# term is ~1/sqrt(K) of the output's scale: 0.016 at K = 4096, 340 times the tolerance of 4.6e-5.
ACCUMULATION_ULPS = 8
MMA_K = 16  # the k depth of one m16n8k16 mma: one truncated sum per MMA_K terms


def tolerance(k: int) -> float:
    """Relative tolerance (against max|C|) of a K-long fp32 accumulation of exact fp16 products:
    day 39's 8 sqrt(K) + 2 ulps plus K / 16 for the tensor cores' truncated sums, times 2^-24."""
    return (ACCUMULATION_ULPS * math.sqrt(k) + k / MMA_K + 2) * UNIT_ROUNDOFF


RTOL = tolerance(max(sizes(n)[2] for n in BENCH_SIZES))  # 4.6e-5 at K = 4096
# cuBLAS through CuPy writes float16: each output rounded once more, by up to 2^-11 of itself.
VERSION_RTOL = {"library": 2.0**-11 + 2 * RTOL}


def make_inputs(n, seed: int = 0):
    """A (M, K) and B (K, N) float16, standard normal scaled by K^-1/4 each (rounded to fp16): every
    product has variance 1/K and C is O(1) at any K. The inputs stay far inside fp16's range (|x| <
    6 K^-1/4 against a largest fp16 of 65504, a smallest normal of 6e-5: at most a few subnormals)."""
    m, n_cols, k = sizes(n)
    rng = np.random.default_rng(seed)
    scale = k**-0.25
    a = (rng.standard_normal((m, k)) * scale).astype(np.float16)  # (M, K)
    b = (rng.standard_normal((k, n_cols)) * scale).astype(np.float16)  # (K, N)
    return a, b


def reference(a, b):
    """The float64 product of the float16 values, rounded once to float32."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)  # (M, N)


def traffic(a, b):
    """(minimum bytes through device memory: fp16 A and B read once, fp32 C written once; FLOPs)."""
    m, k = a.shape
    n = b.shape[1]
    return 2 * (m * k + k * n) + 4 * m * n, 2 * m * n * k


def check_inputs(a, b) -> None:
    """ValueError unless a (M, K) and b (K, N) are C-contiguous float16 with M, N, K >= 1."""
    launch.check_array("a", a, dtype=np.float16, ndim=2)
    launch.check_array("b", b, dtype=np.float16, ndim=2)
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b: expected shape ({a.shape[1]}, any): its rows must equal a's columns "
                         f"(K = {a.shape[1]}), got shape {tuple(b.shape)}")
    if 0 in a.shape or b.shape[1] == 0:
        raise ValueError(f"a, b: expected M, N, K >= 1, got a {tuple(a.shape)} and b {tuple(b.shape)}")


# ---- v1: widen, then FP32 SGEMM (day 43) --------------------------------------------------------------

WIDEN_THREADS = 256


@cuda.jit
def widen_kernel(src, dst):  # src (rows, cols) float16, dst (rows, cols) float32
    """dst = float32(src), a grid-stride loop over the flat elements (row-major)."""
    cols = src.shape[1]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < src.size:
        r = i // cols
        c = i - r * cols
        dst[r, c] = float32(src[r, c])  # a warp reads 64 bytes and writes 128: coalesced both ways
        i += stride


def _widen(x):
    out = launch.empty(x.shape, np.float32)
    widen_kernel[launch.grid_stride_blocks(x.size, WIDEN_THREADS), WIDEN_THREADS](x, out)
    return out


def fp32_path(a, b):
    check_inputs(a, b)
    d_a, d_b = launch.to_device(a, b)
    c = blocking_2d(_widen(d_a), _widen(d_b))  # device in, device out
    return launch.result(c, a, b)


# ---- v2: day 43's blocking, float16 loads widened into float32 tiles ----------------------------------

@cuda.jit
def matmul_half_loads_kernel(a, b, c):  # a (M, K) float16, b (K, N) float16, c (M, N) float32
    """Day 43's 2-D blocking on float16 inputs. One block of 256 threads (1-D) per 128 x 128 tile of C
    (tr, tc = divmod(cuda.blockIdx.x, ceil(N / 128))); thread t, ty, tx = divmod(t, 16), owns the 8 x 8
    outputs c[128 tr + ty + 16 i, 128 tc + tx + 16 j]. Shared tiles are float32, flat:
    a_tile = cuda.shared.array(A_TILE, float32) (element (r, k) at r * BK + k), b_tile =
    cuda.shared.array(B_TILE, float32) (element (k, col) at k * BN + col). Per k0 = 0, 8, ... < K: four
    passes p = 0..3 load A tile (t // 8 + 32 p, t % 8) = float32(a[128 tr + t // 8 + 32 p, k0 + t % 8])
    and B tile (t // 128 + 2 p, t % 128) = float32(b[k0 + t // 128 + 2 p, 128 tc + t % 128]), 0.0 past
    M, N or K; cuda.syncthreads(); per kk in range(BK) load a_frag[i] (A tile row ty + 16 i) and
    b_frag[j] (B tile column tx + 16 j) and add their outer product into acc[i * TN + j] (float32
    cuda.local.arrays indexed only in range(TM) / range(TN) loops); cuda.syncthreads(). Store the
    outputs with row < M and column < N."""
    a_tile = cuda.shared.array(A_TILE, float32)  # (BM, BK) row-major, widened on the load
    b_tile = cuda.shared.array(B_TILE, float32)  # (BK, BN) row-major
    m, k_dim = a.shape
    n = b.shape[1]
    tiles_n = (n + BN - 1) // BN
    tr = cuda.blockIdx.x // tiles_n  # consecutive blocks share a row panel of A: L2 reuse
    tc = cuda.blockIdx.x - tr * tiles_n
    t = cuda.threadIdx.x
    row0 = tr * BM
    col0 = tc * BN
    a_row = t // BK  # loader of A: a warp reads 4 rows x 8 halves a pass (16 bytes of each row)
    a_k = t - a_row * BK
    b_k = t // BN  # loader of B: a warp reads 32 consecutive halves of a row of B (64 bytes, 2 sectors)
    b_col = t - b_k * BN
    ty = t // THREAD_COLS
    tx = t - ty * THREAD_COLS
    acc = cuda.local.array(OUTPUTS, float32)
    a_frag = cuda.local.array(TM, float32)
    b_frag = cuda.local.array(TN, float32)
    raise NotImplementedError("Day 47: zero acc; per k step load 4 of each tile as float32 (0.0 past edges), sync, "
                              "outer products, sync (29 lines)")
    for i in range(TM):
        row = row0 + ty + i * THREAD_ROWS
        if row < m:
            for j in range(TN):
                col = col0 + tx + j * THREAD_COLS
                if col < n:
                    c[row, col] = acc[i * TN + j]


_SIG32 = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
KERNELS = {
    "fp32_path.widen": (widen_kernel, "void(float16[:, ::1], float32[:, ::1])"),
    "fp32_path": (matmul_blocking_2d_kernel, _SIG32),
    "half_loads": (matmul_half_loads_kernel, "void(float16[:, ::1], float16[:, ::1], float32[:, ::1])"),
}


def half_loads(a, b):
    check_inputs(a, b)
    m, n = a.shape[0], b.shape[1]
    d_a, d_b = launch.to_device(a, b)
    c = launch.empty((m, n), np.float32)
    matmul_half_loads_kernel[launch.blocks(m, BM) * launch.blocks(n, BN), THREADS_2D](d_a, d_b, c)
    return launch.result(c, a, b)


# ---- v3: tensor cores, CUDA C through CuPy -------------------------------------------------------------

TC_BM = 128  # rows of C a block
TC_BN = 128  # columns of C a block
TC_BK = 32  # k a pipeline stage: two 16-deep mma steps
TC_THREADS = 128  # 4 warps, 2 x 2, each a 64 x 64 tile of C
TC_GROUP_M = 8  # tile rows per group in the launch order (L2 reuse of B)
CHUNK = 8  # halves in one 16-byte cp.async: rows of A and B must start on 16 bytes


def tensor_core_source() -> str:
    """The CUDA C of the tensor-core kernel: extern "C" __global__ void tc_gemm(const unsigned short*
    A, const unsigned short* B, float* C, int M, int N, int K, int lda, int ldb), launched with 128
    threads (4 warps) per 128 x 128 tile of C on a 1-D grid of ceil(M/128) ceil(N/128) blocks.

    A is (M, K) row-major with row stride lda, B is (K, N) row-major with row stride ldb (halves, the
    bits of float16); lda and ldb are multiples of 8 and both pointers 16-byte aligned, and the
    columns K..lda of A and N..ldb of B are zeros (the host pads). C is (M, N) float32, row stride N.

    Tile order: blocks in groups of 8 tile rows (group = blockIdx.x / (8 tiles_n); within a group the
    tile row runs fastest). Warp w owns rows 64 (w / 2) and columns 64 (w % 2) of the tile: 4 x 8 mma
    tiles of 16 x 8, float acc[4][8][4] in registers, zeroed.

    Shared memory: 3 stages of A (128 x 32 halves, 8 KB) and B (32 x 128 halves, 8 KB), 48 KB static.
    Swizzles (16-byte chunk indices, so the 8 rows one ldmatrix phase reads fall in 8 different bank
    groups): A's chunk c (0..3) of row r sits at chunk c ^ ((r >> 1) & 3); B's chunk c (0..15) of row
    k at c ^ (k & 7).

    Loads: per k tile kt (k0 = 32 kt), each thread issues 4 cp.async.cg.shared.global 16-byte copies
    of A (chunk q = tid + 128 i: row q >> 2, chunk q & 3) and 4 of B (row q >> 4, chunk q & 15), with
    src-size 0 (a zero fill, the pointer clamped to the matrix's start) for A chunks with row >= M or
    k >= K and B chunks with k >= K or column >= N.

    Pipeline: load tiles 0 and 1 (commit a group after each, loaded or not); for each kt < ceil(K/32):
    cp.async.wait_group 1 (this thread's copies of tile kt landed), __syncthreads() (everyone's did,
    and everyone finished computing tile kt - 1), load tile kt + 2 into stage (kt + 2) % 3 (the one
    tile kt - 1 used) and commit, then compute stage kt % 3: for each 16-deep step ks, 4
    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 for B (lane l addresses row k = 16 ks + l % 16,
    column chunk 8 (w % 2) + 2 np + l / 16: registers 0, 1 are the b0, b1 of n-tile 2 np, 2, 3 those of
    n-tile 2 np + 1) and per m-tile mt one ldmatrix.sync.aligned.m8n8.x4.shared.b16 for A (row
    64 (w / 2) + 16 mt + l % 16, chunk 2 ks + l / 16: a0..a3), then 8
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.

    Store: lane l (g = l / 4, t = l % 4) holds acc[mt][nt][0..1] at row 16 mt + g, columns 8 nt + 2 t,
    2 t + 1 of the warp tile, and [2..3] 8 rows below; store those inside C (float2 where N is even).
    """
    raise NotImplementedError("Day 47: write tc_gemm: 3-stage swizzled cp.async tiles, ldmatrix (.trans for B), "
                              "mma.sync, guarded stores (128 lines)")


@functools.cache
def _tensor_core_kernel(source: str):
    import cupy  # lazily: CuPy cannot import without a GPU

    return cupy.RawModule(code=source, options=("-std=c++17",)).get_function("tc_gemm")


def _aligned_rows(x, rows: int, cols: int):
    """x (rows, cols) as a C-contiguous CuPy array whose rows start on 16 bytes: itself if cols is a
    multiple of 8 and x is 16-byte aligned, else a zero-padded copy (rows, ceil8(cols))."""
    import cupy

    padded = -(-cols // CHUNK) * CHUNK
    if padded == cols and x.data.ptr % 16 == 0:
        return x, cols
    out = cupy.zeros((rows, padded), dtype=cupy.float16)
    out[:, :cols] = x
    return out, padded


def tensor_cores(a, b):
    check_inputs(a, b)
    if not ON_GPU:
        raise RuntimeError("tensor_cores needs a CUDA GPU: the simulator cannot run tensor cores "
                           "(tests/test_day47_matmul_tensor_cores.py compiles its source with nvcc instead)")
    import cupy

    m, k = a.shape
    n = b.shape[1]
    kernel = _tensor_core_kernel(tensor_core_source())
    d_a, lda = _aligned_rows(cupy.asarray(a), m, k)
    d_b, ldb = _aligned_rows(cupy.asarray(b), k, n)
    c = launch.empty((m, n), np.float32)
    tiles = launch.blocks(m, TC_BM) * launch.blocks(n, TC_BN)
    kernel((tiles,), (TC_THREADS,), (d_a, d_b, cupy.asarray(c), np.int32(m), np.int32(n), np.int32(k),
                                     np.int32(lda), np.int32(ldb)))
    return launch.result(c, a, b)


# The unit's fixed interface (day 47: float16 in, float32 out): the best step of the day; the
# starting point is the FP32 path.
naive = fp32_path
optimized = tensor_cores


def library(a, b):
    """cuBLAS through CuPy on the float16 inputs (fp32 accumulation; float16 output, cast to float32)."""
    import cupy

    return cupy.matmul(cupy.asarray(a), cupy.asarray(b)).astype(cupy.float32)
