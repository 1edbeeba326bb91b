"""Day 51: masking the shuffle II -- on-chip double buffering, on an all-pairs potential.

phi[i] = sum_j m_j / sqrt(|r_i - r_j|^2 + EPS^2) over every body j (the self term included: the
softening keeps it finite), bodies given as rows (x, y, z, m) of a (n, 4) float32 array. The sources
stream through shared memory one tile of THREADS bodies at a time; each thread owns
TARGETS_PER_THREAD = 4 targets, so one broadcast read of a source feeds four interactions.

v1 staged           load a tile into shared memory, barrier, compute over it, barrier, next tile: every
                    tile the warps stall for the load (an L2 hit, ~600-800 cycles) with nothing to do.
v2 double_buffered  two tile buffers in shared memory; each thread loads its words of tile k + 1 into
                    registers right after the barrier and stores them into the other buffer only after
                    computing tile k, so the load's latency hides behind the compute; one barrier a tile.
v3 cp_async         the same pipeline in CUDA C (cupy.RawKernel, GPU only): cp.async copies tile k + 1
                    from global straight into the other shared buffer while tile k computes (no register
                    staging, no store instruction), cp.async.wait_group + one barrier a tile.

Napkin math (H200: 132 SMs at ~1.98 GHz). One interaction is 3 FADD, 3 FFMA, a square root, a
divide and an add: 12 FLOPs as counted here. The kernels write m / sqrt(d2) (libdevice's rsqrtf would
do, but the simulator cannot run libdevice): with fastmath that is
sqrt.approx + div.approx, two (or more) MUFU operations, and MUFU does 16 lanes a clock per SM, so it
binds at <= 132 * 16 * 1.98e9 / 2 = 2.1e12 interactions/s (~25 TFLOP/s as counted); v3 does the same
arithmetic (--use_fast_math, b.w / sqrtf) so the three versions differ only in how tiles arrive.
A shared read of a source is a broadcast reused by 4 targets. A tile is 64 sources x 4 targets =
256 interactions per thread, ~2500 instructions per warp: at one warp per scheduler (the larger bench
size, 2^16 bodies = 256 blocks of 2 warps over 132 SMs; 2^15 has half as many) that is ~2500 issue cycles against a
~700-cycle load (an L2 hit: 1 MB of bodies) plus a barrier. v1 pays the load every tile: the napkin
expected v2 and v3 up to ~25 % faster there. Measured on the H200: staged 2.41 ms (2^15) and 4.82 ms
(2^16); v2 LOST, 0.82x staged at both (the same 40 registers and no spills in the compiler report: why
it loses is not settled, see the lesson); v3 1.53x faster at both (no registers, no stores, and a leaner
inner loop in NVRTC's PTX: one ld.shared.v4 a source, unrolled 8 deep). At 2^18 bodies (1024 blocks, ~8 warps
a scheduler; not a bench size: the float64 reference would take minutes) the other warps already
cover v1's stall: expect little gain; double buffering pays
where occupancy cannot hide latency. Tiles in flight: one (the next) is enough, since one tile's
compute is several times the load's latency.
"""

import math

import numpy as np

from course import ON_GPU, cuda, launch
from numba import float32  # numba names only after the course import

TITLE = "Masking the shuffle II: on-chip double buffering"
MEMORY_SPACE = "shared + register"
VERSIONS = ("staged", "double_buffered", "cp_async")
SIM_VERSIONS = ("staged", "double_buffered")  # cp_async is CuPy CUDA C: GPU only
TEST_SIZES = (1, 63, 65, 255, 257, 331)  # a tile (64 sources) -1/+1, a block (256 targets) -1/+1, a prime
BENCH_SIZES = (1 << 15, 1 << 16)  # 1.1e9 and 4.3e9 interactions (the bench re-checks each against the reference)
BOUND = "compute"

EPS = 0.05  # softening length, same units as the positions
EPS2 = EPS * EPS
THREADS = 64  # threads a block = sources a tile
TARGETS_PER_THREAD = 4  # each broadcast shared read of a source is used 4 times
BLOCK_TARGETS = THREADS * TARGETS_PER_THREAD  # 256 targets a block
WORDS = 4  # x, y, z, m: a body is 16 bytes
TILE_WORDS = THREADS * WORDS  # 256 float32 words of sources a tile
BUF_WORDS = 2 * TILE_WORDS  # two tiles: the one computed and the one being filled
FLOPS_PER_PAIR = 12


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    bodies = np.empty((n, WORDS), dtype=np.float32)  # (n, 4): x, y, z, m
    bodies[:, :3] = rng.uniform(-1.0, 1.0, (n, 3))
    bodies[:, 3] = rng.uniform(0.5, 1.5, n) / n  # total mass ~1: potentials of order 1
    return (bodies,)


def reference(bodies, chunk: int = 512):
    """float64, a chunk of targets at a time (n x n would not fit at large n): |r_i - r_j|^2 as
    |r_i|^2 + |r_j|^2 - 2 r_i . r_j, the cross term a matrix product (positions are O(1) and EPS^2 =
    2.5e-3, so the cancellation costs ~1e-15 of d2: nothing at float32's tolerance)."""
    b = bodies.astype(np.float64)
    r, m = b[:, :3], b[:, 3]
    sq = (r * r).sum(axis=1)
    phi = np.empty(len(b))
    for lo in range(0, len(b), chunk):
        d2 = sq[lo:lo + chunk, None] + sq[None, :] - 2.0 * (r[lo:lo + chunk] @ r.T)
        np.maximum(d2, 0.0, out=d2)
        d2 += EPS2
        phi[lo:lo + chunk] = (1.0 / np.sqrt(d2)) @ m
    return phi.astype(np.float32)


def traffic(bodies):
    """(minimum bytes moved through device memory, floating-point operations)."""
    n = len(bodies)
    return bodies.nbytes + n * 4, FLOPS_PER_PAIR * n * n


@cuda.jit(fastmath=True)  # m / sqrt(d2) -> sqrt.approx + div.approx instead of the IEEE sequences
def potential_staged_kernel(flat, phi):
    """Block b owns targets first = b * BLOCK_TARGETS ..; thread t owns targets first + t + r * THREADS
    for r < TARGETS_PER_THREAD (coalesced stores), with coordinates in registers (zeros past n).
    flat is the (n, 4) bodies as 4n words. For each tile k of THREADS sources: thread t copies words
    k * TILE_WORDS + t + q * THREADS (q < WORDS; zero past 4n: mass 0 adds nothing) into
    tile = cuda.shared.array(TILE_WORDS, float32), cuda.syncthreads(), accumulates m / sqrt(d2 + EPS2)
    over the tile's THREADS sources for its targets, cuda.syncthreads() before the next tile
    overwrites it. Then phi[i] = acc for the targets i < n."""
    # EXERCISE: targets to registers; per tile: stage, barrier, accumulate over it, barrier; store
    tile = cuda.shared.array(TILE_WORDS, float32)  # (THREADS, 4) sources, row by row
    n = phi.size
    words = flat.size
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * BLOCK_TARGETS
    tx = cuda.local.array(TARGETS_PER_THREAD, float32)  # constant indices only: registers
    ty = cuda.local.array(TARGETS_PER_THREAD, float32)
    tz = cuda.local.array(TARGETS_PER_THREAD, float32)
    acc = cuda.local.array(TARGETS_PER_THREAD, float32)
    for r in range(TARGETS_PER_THREAD):
        i = first + t + r * THREADS
        tx[r] = flat[4 * i] if i < n else float32(0)
        ty[r] = flat[4 * i + 1] if i < n else float32(0)
        tz[r] = flat[4 * i + 2] if i < n else float32(0)
        acc[r] = float32(0)
    for k in range((n + THREADS - 1) // THREADS):
        base = k * TILE_WORDS
        for q in range(WORDS):  # consecutive threads, consecutive words: 4 sectors a request
            w = base + t + q * THREADS
            tile[t + q * THREADS] = flat[w] if w < words else float32(0)
        cuda.syncthreads()  # every thread reads every source: all of the tile must be in
        for s in range(THREADS):
            xj = tile[4 * s]  # every lane reads the same word: a broadcast, one wavefront
            yj = tile[4 * s + 1]
            zj = tile[4 * s + 2]
            mj = tile[4 * s + 3]
            for r in range(TARGETS_PER_THREAD):
                dx = xj - tx[r]
                dy = yj - ty[r]
                dz = zj - tz[r]
                acc[r] += mj * (float32(1) / math.sqrt(dx * dx + dy * dy + dz * dz + float32(EPS2)))
        cuda.syncthreads()  # the next tile's stores must wait until every warp is done reading this one
    for r in range(TARGETS_PER_THREAD):
        i = first + t + r * THREADS
        if i < n:
            phi[i] = acc[r]


@cuda.jit(fastmath=True)
def potential_double_buffered_kernel(flat, phi):
    """Same targets, tiles and result as the staged kernel, with buf = cuda.shared.array(BUF_WORDS,
    float32): tile k lives in half (k % 2). Before the loop, thread t loads its WORDS words of tile 0
    into registers (four scalars). Iteration k: store the registers into half k % 2, cuda.syncthreads()
    (the only barrier), load tile k + 1's words into the registers (zero past 4n), then accumulate over
    half k % 2: the loads are in flight during the compute and are waited on at the next store.

    One barrier a tile is enough with two halves: half k % 2 was last read in iteration k - 2, and every
    thread passed iteration k - 1's barrier after that compute, so the store is safe; the reads of
    iteration k follow its barrier, which follows every thread's store."""
    # EXERCISE: tile 0 to registers; per tile: store to half k % 2, barrier, load tile k + 1, compute
    buf = cuda.shared.array(BUF_WORDS, float32)  # (2, THREADS, 4): two tiles of sources
    n = phi.size
    words = flat.size
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * BLOCK_TARGETS
    tx = cuda.local.array(TARGETS_PER_THREAD, float32)
    ty = cuda.local.array(TARGETS_PER_THREAD, float32)
    tz = cuda.local.array(TARGETS_PER_THREAD, float32)
    acc = cuda.local.array(TARGETS_PER_THREAD, float32)
    for r in range(TARGETS_PER_THREAD):
        i = first + t + r * THREADS
        tx[r] = flat[4 * i] if i < n else float32(0)
        ty[r] = flat[4 * i + 1] if i < n else float32(0)
        tz[r] = flat[4 * i + 2] if i < n else float32(0)
        acc[r] = float32(0)
    # This thread's four words of the next tile, held in registers across the compute.
    v0 = flat[t] if t < words else float32(0)
    v1 = flat[t + THREADS] if t + THREADS < words else float32(0)
    v2 = flat[t + 2 * THREADS] if t + 2 * THREADS < words else float32(0)
    v3 = flat[t + 3 * THREADS] if t + 3 * THREADS < words else float32(0)
    for k in range((n + THREADS - 1) // THREADS):
        half = (k % 2) * TILE_WORDS
        # The first use of v0..v3: the thread waits here for the loads issued a whole tile ago.
        buf[half + t] = v0
        buf[half + t + THREADS] = v1
        buf[half + t + 2 * THREADS] = v2
        buf[half + t + 3 * THREADS] = v3
        cuda.syncthreads()  # tile k is in; and everyone has finished reading the other half (tile k - 1)
        w = (k + 1) * TILE_WORDS + t
        v0 = flat[w] if w < words else float32(0)  # issued now, waited on a tile from now
        v1 = flat[w + THREADS] if w + THREADS < words else float32(0)
        v2 = flat[w + 2 * THREADS] if w + 2 * THREADS < words else float32(0)
        v3 = flat[w + 3 * THREADS] if w + 3 * THREADS < words else float32(0)
        for s in range(THREADS):
            xj = buf[half + 4 * s]
            yj = buf[half + 4 * s + 1]
            zj = buf[half + 4 * s + 2]
            mj = buf[half + 4 * s + 3]
            for r in range(TARGETS_PER_THREAD):
                dx = xj - tx[r]
                dy = yj - ty[r]
                dz = zj - tz[r]
                acc[r] += mj * (float32(1) / math.sqrt(dx * dx + dy * dy + dz * dz + float32(EPS2)))
    for r in range(TARGETS_PER_THREAD):
        i = first + t + r * THREADS
        if i < n:
            phi[i] = acc[r]


_SIG = "void(float32[::1], float32[::1])"
KERNELS = {"staged": (potential_staged_kernel, _SIG), "double_buffered": (potential_double_buffered_kernel, _SIG)}


def _check(bodies):
    launch.check_array("bodies", bodies, dtype=np.float32, shape=(None, WORDS))


def _launch(kernel, bodies):
    _check(bodies)
    n = bodies.shape[0]
    (d_bodies,) = launch.to_device(bodies)
    phi = launch.empty((n,), np.float32)
    if n:
        kernel[launch.blocks(n, BLOCK_TARGETS), THREADS](d_bodies.reshape(n * WORDS), phi)
    return launch.result(phi, bodies)


def staged(bodies):
    return _launch(potential_staged_kernel, bodies)


def double_buffered(bodies):
    return _launch(potential_double_buffered_kernel, bodies)


def cp_async_source() -> str:
    """The CUDA C of v3: extern "C" __global__ void potential_cp_async(const float4* bodies, float* phi,
    int n), launched with THREADS threads a block and one block per BLOCK_TARGETS targets, the same
    targets per thread as the Numba kernels. Sources go through __shared__ float4 tile[2][THREADS] with
    inline PTX: "cp.async.cg.shared.global [dst], [src], 16, src_size;" (src_size 0 past n zero-fills:
    mass 0), "cp.async.commit_group;", "cp.async.wait_group 0;". Tile 0 is issued before the loop;
    iteration k waits for its group, __syncthreads() (one barrier), issues tile k + 1 into the other
    buffer (free: every thread passed this barrier after reading it) and computes tile k with
    b.w / sqrtf(d2) (compiled with --use_fast_math, as Numba's fastmath). The constants come from
    the Python ones (THREADS, TARGETS_PER_THREAD, EPS2) as #defines."""
    # EXERCISE: write the CUDA C kernel with cp.async (async copy, commit, wait, one barrier a tile)
    defines = f"#define THREADS {THREADS}\n#define TARGETS {TARGETS_PER_THREAD}\n#define EPS2 {EPS2:.9e}f\n"
    return defines + r"""
// One body (16 bytes) from global straight into shared memory, no register on the way: the copy
// runs in the background (LDGSTS) while the thread computes. src_size 0 zero-fills the slot.
__device__ __forceinline__ void copy_body(float4* dst, const float4* bodies, int j, int n) {
    unsigned saddr = (unsigned)__cvta_generic_to_shared(dst);
    const float4* src = bodies + (j < n ? j : 0);
    int bytes = j < n ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(saddr), "l"(src), "r"(bytes)
                 : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS)
potential_cp_async(const float4* __restrict__ bodies, float* __restrict__ phi, int n) {
    __shared__ __align__(16) float4 tile[2][THREADS];
    const int t = threadIdx.x;
    const int first = blockIdx.x * (THREADS * TARGETS);
    float tx[TARGETS], ty[TARGETS], tz[TARGETS], acc[TARGETS];
#pragma unroll
    for (int r = 0; r < TARGETS; ++r) {
        int i = first + t + r * THREADS;
        float4 b = i < n ? bodies[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        tx[r] = b.x; ty[r] = b.y; tz[r] = b.z; acc[r] = 0.f;
    }
    const int tiles = (n + THREADS - 1) / THREADS;
    copy_body(&tile[0][t], bodies, t, n);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    for (int k = 0; k < tiles; ++k) {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // this thread's part of tile k landed
        __syncthreads();  // everyone's part landed; everyone is done with tile k - 1's buffer
        if (k + 1 < tiles) copy_body(&tile[(k + 1) & 1][t], bodies, (k + 1) * THREADS + t, n);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        const float4* cur = tile[k & 1];
#pragma unroll 8
        for (int s = 0; s < THREADS; ++s) {
            float4 b = cur[s];  // one 16-byte broadcast read feeds TARGETS interactions
#pragma unroll
            for (int r = 0; r < TARGETS; ++r) {
                float dx = b.x - tx[r], dy = b.y - ty[r], dz = b.z - tz[r];
                float d2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, EPS2)));
                acc[r] += b.w / sqrtf(d2);  // fast math: sqrt.approx, div.approx as in Numba
            }
        }
    }
#pragma unroll
    for (int r = 0; r < TARGETS; ++r) {
        int i = first + t + r * THREADS;
        if (i < n) phi[i] = acc[r];
    }
}
"""


_cp_async_kernel = None


def cp_async(bodies):
    """v3, GPU only (CuPy compiles the CUDA C with NVRTC): cp.async double buffering."""
    global _cp_async_kernel
    _check(bodies)
    if not ON_GPU:
        raise RuntimeError("cp_async is a cupy.RawKernel (CUDA C): it needs a CUDA GPU; the simulator grades "
                           "staged and double_buffered")
    import cupy

    if _cp_async_kernel is None:
        _cp_async_kernel = cupy.RawKernel(cp_async_source(), "potential_cp_async",
                                          options=("-std=c++17", "--use_fast_math"))
    n = bodies.shape[0]
    (d_bodies,) = launch.to_device(bodies)
    phi = launch.empty((n,), np.float32)
    if n:
        grid = (launch.blocks(n, BLOCK_TARGETS),)
        _cp_async_kernel(grid, (THREADS,), (cupy.asarray(d_bodies), cupy.asarray(phi), np.int32(n)))
    return launch.result(phi, bodies)


# The day's starting point, and its fastest version (GPU only: the simulator grades double_buffered).
naive = staged
optimized = cp_async
