"""Day 71: the fused MLP -- Llama's SwiGLU feed-forward, out = (silu(x Wg) * (x Wu)) Wd.

x (tokens, hidden) float16, w_gate and w_up (hidden, inter) float16, w_down (inter, hidden) float16;
the intermediate h = silu(x Wg) * (x Wu) (tokens, inter) is stored as float16 (the down GEMM's input,
on tensor cores), the output (tokens, hidden) is float32 (the residual stream the block adds it to).
silu(g) = g sigmoid(g) = g / (1 + exp(-g)). Every version takes all five arrays (x, w_gate, w_up,
w_down, w_gate_up) and uses the ones it needs, as day 63 does with its int8 and fp16 weights.

w_gate_up = pack_gate_up(w_gate, w_up) is the gate and up weights side by side in the column order the
fused kernels want, a load-time step (done once when the model is loaded, like a checkpoint's layout
conversion; never per call): groups of GROUP = 16 columns, [g0..g15, u0..u15, g16..g31, u16..u31, ...],
inter padded with zero columns to a multiple of 16, so (hidden, 2 ceil16(inter)). Why 16: in day 47's
half_loads kernel a thread owns the columns tx + 16 j of its tile, so its accumulators j = 2p (gate)
and 2p + 1 (up) are the same output column; in day 47's tensor-core tile a warp's n-tiles nt and
nt + 2 (nt in 0, 1, 4, 5) are, for the same lane. Both kernels then compute silu(g) * u in registers
and write half the columns they computed. (Groups of 8 would pair n-tiles 2j and 2j + 1 on tensor
cores but split a half_loads thread's pair across threads: 16 serves both, one packed array.)

v1 unfused              the textbook: day 47's half_loads GEMM for x Wg and for x Wu (float32 gate and
                        up written to memory), an elementwise kernel h = float16(silu(gate) * up),
                        half_loads again for h Wd. Four launches; gate and up cross memory twice.
v2 fused                one GEMM over w_gate_up with silu * up in its epilogue: day 47's half_loads
                        kernel derived with only its store replaced (course.days.derive_kernel: a
                        checked edit of its Python source; the k loop is day 47's, untouched), writing float16 h
                        directly; then half_loads for the down projection. gate and up never leave
                        registers. The simulator grades v1 and v2 (it cannot run tensor cores).
v3 tensor_cores_unfused day 47's tensor-core GEMM (mma.sync) three times plus the elementwise kernel.
v4 tensor_cores_fused   day 47's CUDA C with its store section replaced by a SwiGLU epilogue
                        (fused_tensor_core_source(): checked substitutions, each text occurring once
                        in day 47's source) writing float16 h as pairs (half2), then day 47's
                        tensor-core GEMM for the down projection. Two launches.
library                 torch in fp16: (F.silu(x @ Wg) * (x @ Wu)) @ Wd, .float().

Napkin math (Llama 3 8B's MLP: hidden 4096, inter 14336). FLOPs 2 tokens hidden inter x 3. The weights
are 3 x 4096 x 14336 x 2 bytes = 352 MB, read once per call whatever the token count.
At 4096 tokens (prefill): 1.44 TFLOP. Day 47's kernel measured 366 TFLOP/s at 4096^3, so the three
GEMMs take ~3.9 ms. The intermediates: tokens inter = 58.7 M elements. unfused writes gate and up as
float32 (day 47's GEMM output: 4 bytes each, 470 MB written, 470 MB read back) and h as float16 (117 MB
written, 117 MB read by the down GEMM); fused writes and reads h only (235 MB). The ~940 MB saved are
~0.22 ms at 4.2 TB/s, plus one launch: ~5 % of 4 ms. (torch's unfused path writes gate and up in
float16, 2 bytes each: 470 MB saved by fusing there.) So at prefill the GEMMs dominate and fusion buys
a modest gain; the GEMM's own rate sets the time. At 64 tokens (a decode batch): 22.5 GFLOP, ~0.06 ms
at 366 TFLOP/s, but the 352 MB of weights take ~84 us at the copy rate: the MLP is bound by reading
the weights, and the intermediates (0.9 M elements, 15 MB round trip) are small. Here the fusion's
share comes from the launches and the grid: day 47's 128 x 128 tiles give x Wg and x Wu 112 blocks
each (less than one block per SM on 132 SMs, two launches), the fused GEMM 224 blocks in one launch,
and each launch saved is a few us of a ~100 us call. (The down GEMM at 64 tokens has only 32 blocks for
K = 14336: split-K would help it in every version; not today's subject.) Expect fused faster than
unfused at both sizes, by a larger share at 64 tokens.
Measured on the H200 (cuBLAS FP16 GEMM 755 TFLOP/s in the same run; % of that peak):
  4096 tokens  tensor_cores_fused 3,784.8 us, 381.3 TFLOP/s, 50.5 % of peak, 1.08x tensor_cores_unfused
               (4,093.6 us, 352.5 TFLOP/s; 0.31 ms saved against the ~0.22 ms + a launch above), 23.0x
               unfused (86.9 ms; the Numba fused 86.5 ms, 1.01x). torch 2,078.5 us, 694.3 TFLOP/s, 92.0 %:
               1.8x faster than tensor_cores_fused.
  64 tokens    tensor_cores_fused 335.7 us, 67.2 TFLOP/s, 8.9 %, 1.11x tensor_cores_unfused (373.1 us),
               22.1x unfused (7.42 ms; the Numba fused 1.06x). torch 119.6 us, 188.6 TFLOP/s (its weights
               read at 2.96 TB/s, the course's at 1.05): 2.8x faster.
The expectation holds: fused faster at both sizes, by a larger share at 64 tokens. torch's lead is the
GEMM: day 47's mma.sync kernel reaches ~380 TFLOP/s here against cuBLAS's wgmma ~700; at 64 tokens the
down GEMM's 32 blocks (no split-K) are the likely reason its weights stream at a quarter of the copy rate.

Reference: float64 NumPy with h rounded to float16 as the kernels store it. Tolerance (RTOL): one
float16 rounding of h flips by an ulp (2^-11 of h) wherever the kernel's float32 gate and up fall on
the other side of a rounding boundary; bounded by 2^-11 of the output's scale, plus day 47's fp32
accumulation tolerance over K = inter for the down GEMM.
"""

import math

import numpy as np

from course import ON_GPU, cuda, days, launch
from numba import float32  # numba names only after the course import
from numba.types import float16
from solutions import day47_matmul_tensor_cores as day47
from solutions.day47_matmul_tensor_cores import (  # day 43's tile shape, as day 47's half_loads uses it
    BM,
    BN,
    THREAD_COLS,
    THREAD_ROWS,
    THREADS_2D,
    TM,
    TN,
    half_loads,
    matmul_half_loads_kernel,
    tensor_cores,
)

TITLE = "The fused MLP (SwiGLU)"
MEMORY_SPACE = "register + global"
VERSIONS = ("unfused", "fused", "tensor_cores_unfused", "tensor_cores_fused")
SIM_VERSIONS = ("unfused", "fused")  # the tensor-core versions are CuPy RawKernels: gpu-marked tests
PEAK_DTYPE = "float16"  # the peak row is cuBLAS FP16 GEMM
BOUND = "compute"
# (tokens, hidden, inter): one token; hidden not a multiple of 8 (x's rows not 16 bytes: day 47's host
# pads them for cp.async); inter not a multiple of 16 (a partial last group, a partial last column
# tile of the packed weights); two row tiles.
TEST_SIZES = ((1, 8, 16), (3, 17, 20), (5, 16, 70), (130, 9, 12))
# Llama 3 8B's MLP: a 4096-token prefill and a 64-token batch.
BENCH_SIZES = ((4096, 4096, 14336), (64, 4096, 14336))

GROUP = THREAD_COLS  # 16: a half_loads thread's columns are 16 apart (and a warp's n-tiles nt, nt + 2)
assert GROUP == 16 and BN % (2 * GROUP) == 0 and TN % 2 == 0

H_ROUNDING = 2.0**-11  # one float16 rounding of h, flipped: half an ulp each way
RTOL = H_ROUNDING + day47.tolerance(max(n[2] for n in BENCH_SIZES))  # ~6e-4
ERROR_FLOOR = 1.0  # errors held against max|out| (course.checking)
MIN_SCALE = 0.5  # out has an rms of ~0.5 by construction (make_inputs)
# torch rounds gate, up, silu, h and out to float16: a few 2^-11 of the output's scale.
VERSION_RTOL = {"library": 8 * H_ROUNDING}


def sizes(n) -> tuple[int, int, int]:
    tokens, hidden, inter = (int(v) for v in n)
    return tokens, hidden, inter


def packed_columns(inter: int) -> int:
    """Columns of w_gate_up: inter padded to whole groups of 16, twice."""
    return 2 * GROUP * (-(-inter // GROUP))


def pack_gate_up(w_gate, w_up):
    """w_gate, w_up (hidden, inter) -> (hidden, packed_columns(inter)): groups of 16 columns, gate then
    up, [g0..g15, u0..u15, g16..g31, u16..u31, ...], zero columns past inter. A load-time step (NumPy,
    once per model), so the fused kernels read one weight matrix and pair columns in registers."""
    w_gate, w_up = np.asarray(w_gate), np.asarray(w_up)
    hidden, inter = w_gate.shape
    groups = packed_columns(inter) // (2 * GROUP)
    packed = np.zeros((hidden, groups, 2, GROUP), dtype=w_gate.dtype)
    for half, w in enumerate((w_gate, w_up)):
        padded = np.zeros((hidden, groups * GROUP), dtype=w.dtype)
        padded[:, :inter] = w
        packed[:, :, half, :] = padded.reshape(hidden, groups, GROUP)
    return packed.reshape(hidden, 2 * groups * GROUP)


def make_inputs(n, seed: int = 0):
    """x standard normal; w_gate, w_up scaled by hidden^-1/2 (gate and up of unit variance), w_down by
    inter^-1/2 (out of rms ~0.5); all rounded to float16; and w_gate_up packed from them."""
    tokens, hidden, inter = sizes(n)
    rng = np.random.default_rng(seed)

    def normal(shape, scale):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float16)

    x = normal((tokens, hidden), 1.0)  # (tokens, hidden)
    w_gate = normal((hidden, inter), hidden**-0.5)  # (hidden, inter)
    w_up = normal((hidden, inter), hidden**-0.5)
    w_down = normal((inter, hidden), inter**-0.5)  # (inter, hidden)
    return x, w_gate, w_up, w_down, pack_gate_up(w_gate, w_up)


def reference(x, w_gate, w_up, w_down, w_gate_up):
    """float64 throughout, except h rounded to float16 as every version stores it."""
    x64 = x.astype(np.float64)
    gate = x64 @ w_gate.astype(np.float64)
    up = x64 @ w_up.astype(np.float64)
    h = (gate / (1.0 + np.exp(-gate)) * up).astype(np.float16)  # (tokens, inter)
    return (h.astype(np.float64) @ w_down.astype(np.float64)).astype(np.float32)  # (tokens, hidden)


def traffic(x, w_gate, w_up, w_down, w_gate_up):
    """(minimum bytes: x and the three weight matrices read once, out written once; FLOPs: 3 GEMMs)."""
    tokens, hidden = x.shape
    inter = w_gate.shape[1]
    return 2 * tokens * hidden + 3 * 2 * hidden * inter + 4 * tokens * hidden, 3 * 2 * tokens * hidden * inter


def check_inputs(x, w_gate, w_up, w_down, w_gate_up) -> None:
    """ValueError unless all five are C-contiguous float16 of consistent shapes, w_gate_up the packed
    layout's shape (its contents are trusted: checking the layout would cost a pass over the weights)."""
    launch.check_array("x", x, dtype=np.float16, ndim=2)
    tokens, hidden = x.shape
    launch.check_array("w_gate", w_gate, dtype=np.float16, ndim=2, shape=(hidden, None))
    inter = w_gate.shape[1]
    if 0 in (tokens, hidden, inter):
        raise ValueError(f"x, w_gate: expected tokens, hidden, inter >= 1, got x {tuple(x.shape)} and w_gate "
                         f"{tuple(w_gate.shape)}")
    launch.check_array("w_up", w_up, dtype=np.float16, shape=(hidden, inter))
    launch.check_array("w_down", w_down, dtype=np.float16, shape=(inter, hidden))
    launch.check_array("w_gate_up", w_gate_up, dtype=np.float16, shape=(hidden, packed_columns(inter)))


# ---- the SwiGLU arithmetic, shared by the elementwise kernel and the Numba epilogue ---------------------

@cuda.jit(device=True, inline=True)
def silu(g):
    """g sigmoid(g) in float32: exp(-g) overflows to inf for g < -88 and g / inf is -0, the limit."""
    return g / (float32(1.0) + math.exp(-g))


# ---- v1: two GEMMs, then an elementwise kernel ------------------------------------------------------------

SILU_THREADS = 256


@cuda.jit
def silu_mul_kernel(gate, up, h):  # gate, up (tokens, inter) float32, h (tokens, inter) float16
    """h = float16(silu(gate) * up) elementwise: a grid-stride loop over the flat row-major index i
    (row r = i // inter, column i - r * inter), using silu(g) = g / (1 + exp(-g)) (the device function
    above)."""
    # EXERCISE: grid-stride over gate.size; h[r, c] = float16(silu(gate[r, c]) * up[r, c])
    cols = gate.shape[1]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < gate.size:
        r = i // cols
        c = i - r * cols
        # a warp reads 2 x 128 bytes and writes 64: 10 bytes an element, no reuse: bound by the copy rate
        h[r, c] = float16(silu(gate[r, c]) * up[r, c])
        i += stride


def _silu_mul(gate, up):
    h = launch.empty(gate.shape, np.float16)
    silu_mul_kernel[launch.grid_stride_blocks(gate.size, SILU_THREADS), SILU_THREADS](gate, up, h)
    return h


def unfused(x, w_gate, w_up, w_down, w_gate_up):
    check_inputs(x, w_gate, w_up, w_down, w_gate_up)
    d_x, d_wg, d_wu, d_wd = launch.to_device(x, w_gate, w_up, w_down)
    gate = half_loads(d_x, d_wg)  # (tokens, inter) float32, to memory
    up = half_loads(d_x, d_wu)
    out = half_loads(_silu_mul(gate, up), d_wd)  # (tokens, hidden) float32
    return launch.result(out, x)


# ---- v2: one GEMM over the packed weights, SiLU * up in its epilogue --------------------------------------

@cuda.jit(device=True)
def swiglu_epilogue(acc, h, row0, col0, ty, tx):
    """The fused GEMM's store. acc (TM * TN float32, a thread's outputs) holds, at acc[i * TN + j], the
    packed product (x w_gate_up) at row row0 + ty + 16 i and packed column col0 + tx + 16 j (day 47's
    half_loads mapping; col0 a multiple of 128). With the packed layout, j = 2 p is gate and j = 2 p + 1
    is up of the same h column, col0 // 2 + 16 p + tx. Write h[row, col] = float16(silu(gate) * up) for
    i in range(TM), p in range(TN // 2), only where row < tokens and col < inter (h is (tokens, inter):
    the packed weights' last tile runs past inter)."""
    # EXERCISE: for each row i and column pair p: pair acc[.. 2p] (gate) with acc[.. 2p + 1] (up), guard, store fp16
    tokens, inter = h.shape
    for i in range(TM):
        row = row0 + ty + i * THREAD_ROWS
        if row < tokens:
            for p in range(TN // 2):
                col = col0 // 2 + p * THREAD_COLS + tx
                if col < inter:
                    gate = acc[i * TN + 2 * p]  # gate and up of one column: the same thread's registers
                    up = acc[i * TN + 2 * p + 1]
                    h[row, col] = float16(silu(gate) * up)  # half the columns computed, 2 bytes each


# Day 47's half_loads kernel with its signature renamed and its store section (everything after the
# k loop, `# END EXERCISE` on) replaced by the epilogue: c becomes h, float16 (tokens, inter).
HALF_LOADS_STORE = """    # END EXERCISE
    for i in range(TM):
        row = row0 + ty + i * THREAD_ROWS
        if row < m:
            for j in range(TN):
                col = col0 + tx + j * THREAD_COLS
                if col < n:
                    c[row, col] = acc[i * TN + j]
"""
matmul_swiglu_kernel = days.derive_kernel(
    matmul_half_loads_kernel,
    [("def matmul_half_loads_kernel(a, b, c):", "def matmul_swiglu_kernel(a, b, h):"),
     (HALF_LOADS_STORE, "    swiglu_epilogue(acc, h, row0, col0, ty, tx)\n")],
    swiglu_epilogue=swiglu_epilogue)

KERNELS = {
    "unfused": (matmul_half_loads_kernel, "void(float16[:, ::1], float16[:, ::1], float32[:, ::1])"),
    "unfused.silu_mul": (silu_mul_kernel, "void(float32[:, ::1], float32[:, ::1], float16[:, ::1])"),
    "fused": (matmul_swiglu_kernel, "void(float16[:, ::1], float16[:, ::1], float16[:, ::1])"),
}


def fused(x, w_gate, w_up, w_down, w_gate_up):
    check_inputs(x, w_gate, w_up, w_down, w_gate_up)
    tokens, inter = x.shape[0], w_gate.shape[1]
    d_x, d_wgu, d_wd = launch.to_device(x, w_gate_up, w_down)
    h = launch.empty((tokens, inter), np.float16)
    tiles = launch.blocks(tokens, BM) * launch.blocks(w_gate_up.shape[1], BN)
    matmul_swiglu_kernel[tiles, THREADS_2D](d_x, d_wgu, h)  # gate and up stay in registers
    out = half_loads(h, d_wd)
    return launch.result(out, x)


# ---- v3, v4: tensor cores (CuPy RawKernels, GPU only) ------------------------------------------------------

def _need_gpu(version: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{version} needs a CUDA GPU: the simulator cannot run tensor cores "
                           "(tests/test_day71_fused_mlp.py compiles the fused source with nvcc instead)")


def tensor_cores_unfused(x, w_gate, w_up, w_down, w_gate_up):
    check_inputs(x, w_gate, w_up, w_down, w_gate_up)
    _need_gpu("tensor_cores_unfused")
    d_x, d_wg, d_wu, d_wd = launch.to_device(x, w_gate, w_up, w_down)
    gate = tensor_cores(d_x, d_wg)  # (tokens, inter) float32 through memory
    up = tensor_cores(d_x, d_wu)
    out = tensor_cores(_silu_mul(gate, up), d_wd)
    return launch.result(out, x)


def swiglu_epilogue_source() -> str:
    """CUDA C of the fused GEMM's store: __device__ __forceinline__ void swiglu_store(unsigned short* H,
    int M, int inter, int row0, int col0, int warp_m, int warp_n, int lane, float (&acc)[4][8][4]).

    acc is day 47's tile after the k loop: lane l (g = l / 4, t4 = l % 4) of warp (warp_m, warp_n)
    holds acc[mt][nt][0..1] at row row0 + 64 warp_m + 16 mt + g, packed columns col0 + 64 warp_n +
    8 nt + 2 t4, +1, and acc[mt][nt][2..3] 8 rows below. In the packed layout (groups of 16: gate,
    then up) n-tiles nt = 0, 1, 4, 5 are gate and nt + 2 their up, for the same lane and element:
    h column (col0 + 64 warp_n) / 2 + 16 (nt / 4) + 8 (nt % 2) + 2 t4. Write H[r, c] =
    float16(silu(g) * u) (H is (M, inter) row-major, silu(g) = g / (1 + __expf(-g))), rows < M and
    columns < inter only, the two columns of a lane as one 4-byte store where inter is even (the
    address r inter + c is then even), one half at a time otherwise."""
    # EXERCISE: write swiglu_store: pair acc[mt][nt] with acc[mt][nt + 2], silu(g) * u, round to fp16, guarded stores
    return r"""
__device__ __forceinline__ float swiglu(float g, float u) {
    return g / (1.0f + __expf(-g)) * u;  // __expf: ex2.approx; g < -88 gives g / inf = -0
}

__device__ __forceinline__ void store_h2(unsigned short* H, int M, int inter, int r, int c, float x, float y) {
    if (r >= M) return;
    unsigned short* p = H + (size_t)r * inter + c;
    if ((inter & 1) == 0 && c + 1 < inter) {
        unsigned packed;  // cvt.rn.f16x2.f32 d, a, b puts a in the upper half: column c + 1
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(y), "f"(x));
        *reinterpret_cast<unsigned*>(p) = packed;  // 4-byte aligned: r inter + c even
    } else {
        unsigned short lo, hi;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(lo) : "f"(x));
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hi) : "f"(y));
        if (c < inter) p[0] = lo;
        if (c + 1 < inter) p[1] = hi;
    }
}

__device__ __forceinline__ void swiglu_store(unsigned short* H, int M, int inter, int row0, int col0,
                                             int warp_m, int warp_n, int lane, float (&acc)[4][8][4]) {
    const int g = lane >> 2, t4 = lane & 3;
    const int hcol0 = (col0 + warp_n * 64) / 2;  // the warp's 64 packed columns are 32 of h
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        const int r = row0 + warp_m * 64 + mt * 16 + g;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int nt = (q >> 1) * 4 + (q & 1);  // 0, 1, 4, 5: gate; nt + 2: its up, same lane
            const int c = hcol0 + (q >> 1) * 16 + (q & 1) * 8 + 2 * t4;
            store_h2(H, M, inter, r, c, swiglu(acc[mt][nt][0], acc[mt][nt + 2][0]),
                     swiglu(acc[mt][nt][1], acc[mt][nt + 2][1]));
            store_h2(H, M, inter, r + 8, c, swiglu(acc[mt][nt][2], acc[mt][nt + 2][2]),
                     swiglu(acc[mt][nt][3], acc[mt][nt + 2][3]));
        }
    }
}
"""


# The texts of day 47's tensor_core_source() that the fused kernel replaces, each occurring once there.
TC_SIGNATURE = ("float* __restrict__ C,\n        int M, int N, int K, int lda, int ldb) {",
                "unsigned short* __restrict__ H,\n        int M, int N, int K, int lda, int ldb, int inter) {")
TC_STORE = """    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        const int r = row0 + warp_m * 64 + mt * 16 + g;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            const int c = col0 + warp_n * 64 + nt * 8 + 2 * t4;
            store2(C, M, N, r, c, acc[mt][nt][0], acc[mt][nt][1]);
            store2(C, M, N, r + 8, c, acc[mt][nt][2], acc[mt][nt][3]);
        }
    }
"""
TC_KERNEL = 'extern "C" __global__'


def fused_tensor_core_source() -> str:
    """Day 47's tc_gemm with the SwiGLU epilogue: the signature's C (float) becomes H (float16 bits, (M,
    inter)) plus an int inter, swiglu_epilogue_source() goes in before the kernel, and the store
    section becomes swiglu_store(...). N is the packed width (columns of w_gate_up), so the loads and
    the tile grid are day 47's unchanged."""
    source = day47.tensor_core_source()
    edits = [TC_SIGNATURE,
             (TC_STORE, "    swiglu_store(H, M, inter, row0, col0, warp_m, warp_n, lane, acc);\n"),
             (TC_KERNEL, swiglu_epilogue_source() + "\n" + TC_KERNEL)]
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"fused_tensor_core_source: {old.strip()[:60]!r} occurs {source.count(old)} times "
                             "in day 47's tensor_core_source(), expected once")
        source = source.replace(old, new)
    return source


def tensor_cores_fused(x, w_gate, w_up, w_down, w_gate_up):
    check_inputs(x, w_gate, w_up, w_down, w_gate_up)
    _need_gpu("tensor_cores_fused")
    import cupy

    tokens, hidden = x.shape
    inter, packed = w_gate.shape[1], w_gate_up.shape[1]
    kernel = day47._tensor_core_kernel(fused_tensor_core_source())  # compiled once (cached by source)
    d_x, d_wgu, d_wd = launch.to_device(x, w_gate_up, w_down)
    c_x, lda = day47._aligned_rows(cupy.asarray(d_x), tokens, hidden)  # cp.async: rows on 16 bytes
    c_wgu, ldb = day47._aligned_rows(cupy.asarray(d_wgu), hidden, packed)  # packed: a multiple of 32 already
    h = launch.empty((tokens, inter), np.float16)
    tiles = launch.blocks(tokens, day47.TC_BM) * launch.blocks(packed, day47.TC_BN)
    kernel((tiles,), (day47.TC_THREADS,),
           (c_x, c_wgu, cupy.asarray(h), np.int32(tokens), np.int32(packed), np.int32(hidden), np.int32(lda),
            np.int32(ldb), np.int32(inter)))
    out = tensor_cores(h, d_wd)  # the down projection: day 47's GEMM (pads h's rows if inter % 8)
    return launch.result(out, x)


naive = unfused
optimized = tensor_cores_fused


def library(x, w_gate, w_up, w_down, w_gate_up):
    """torch in float16 on the GPU (cuBLAS GEMMs, an fp16 SiLU and multiply): (F.silu(x @ Wg) * (x @ Wu))
    @ Wd, then .float(); zero-copy from device arrays. What an eager PyTorch Llama runs."""
    import torch
    import torch.nn.functional as F

    check_inputs(x, w_gate, w_up, w_down, w_gate_up)
    tx, tg, tu, td = (torch.as_tensor(a, device="cuda") for a in (x, w_gate, w_up, w_down))
    out = ((F.silu(tx @ tg) * (tx @ tu)) @ td).float()
    return out.cpu().numpy() if isinstance(x, np.ndarray) else cuda.as_cuda_array(out)
