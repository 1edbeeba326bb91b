"""Day 54 exercise: L2-aware tiling -- the order blocks take their tiles. C = A B, A (M, K), B (K, N), float32.

The kernel is day 46's warp-tiling GEMM (imported, not copied: the course's best FP32 GEMM, 128 x 128
tiles of C, one block of 256 threads a tile, the tiles on a 1-D grid). It asks a device function
``tile_coords(block, tiles_m, tiles_n)`` which tile block ``block`` computes; day 46's answers
row-major (tile columns fastest). course.days.with_globals compiles the same kernel again with
``grouped_tile_coords`` in its place. Nothing else changes: the same loads, FLOPs, registers and
shared memory per block, the same arithmetic per output (the two orders give bit-identical C).

v1 row_major  day 46's warp_tiling: block b takes tile (b // tiles_n, b % tiles_n). Consecutive
              blocks walk ACROSS a row of tiles: they share one row panel of A, and every one of
              them needs another column panel of B.
v2 grouped    the same kernel, blocks in groups of GROUP_M tile rows (Triton's "grouped ordering",
              CUTLASS's threadblock swizzle): within a group consecutive blocks go DOWN the group's
              rows first, then to the next column, so the blocks that run together cover a roughly
              square patch of C, GROUP_M rows x (resident / GROUP_M) columns, and share both A's
              row panels and B's column panels. The last group has tiles_m % GROUP_M rows when
              GROUP_M does not divide tiles_m.

Napkin math (the H200: 132 SMs, a 60 MB L2 in two partitions, ~4.2 TB/s from HBM).
  Which tiles run together. Day 46's kernel: 127 registers a thread (ptxas, via `make inspect`:
  at <= 128, 2 blocks of 256 threads fit the SM's 65,536 registers) and 34,304 bytes of shared
  memory a block (6 would fit in 228 KB): 2 blocks an SM, 132 x 2 = 264 blocks resident at once
  (RESIDENT_BLOCKS; resident_blocks() recomputes it from a compiler report). They start together,
  then each finished block is replaced by the next index: at any time the resident set is ~264
  consecutive block indices.
  A tile (tr, tc) reads A's row panel tr (128 rows x K) and B's column panel tc (K x 128 columns):
  128 K 4 bytes each, 4 MiB at K = 8192. The first wave's distinct bytes (wave_footprint):
    8192^3 (64 x 64 tiles; A and B 256 MiB each, 4x the L2):
      row_major: tile rows 0-4 (4 whole rows of 64 and 8 tiles of the fifth) x all 64 columns:
                 5 A panels + 64 B panels = 69 x 4 MiB = 276 MiB (all of B)
      grouped:   rows 0-15 x columns 0-16 (16 x 16.5): 16 + 17 = 33 panels = 132 MiB, 2.1x fewer
    4096 x 16384 x 4096 (32 x 128 tiles; B 256 MiB):
      row_major: rows 0-2 x all 128 columns: 3 + 128 = 131 panels x 2 MiB = 262 MiB (all of B)
      grouped:   16 + 17 = 33 panels = 66 MiB, 4.0x fewer
  Without any reuse the wave would read 264 x 2 panels (2,112 MiB at 8192^3): both orders reuse, the
  question is whether the reuse survives in L2. GROUP_M = 16 ~ sqrt(264) minimises GROUP_M +
  264 / GROUP_M panels (8, Triton's default, gives 8 + 33 = 41; 1 is row-major again).
  What the L2 has to hold. In lockstep (the first wave) a 16-deep k step of the wave touches only
  panels x 8 KB (69 x 8 KB = 552 KB): anything fits. The difference comes once the blocks are
  staggered: in row-major order the next block to read B's panel tc is tiles_n indices later (64 at
  8192^3, 128 at N = 16384), a quarter to a half of the resident set, so it runs a quarter to a half
  of a block's lifetime behind; in between the resident blocks stream ~1/4-1/2 of 276 MiB of new
  panels through a 60 MB L2 (two 30 MB partitions, each caching what its own SMs read): B's bytes are
  evicted before the lagging block reads them and come from HBM again, ~once per block. In grouped
  order the blocks that share a panel are at most GROUP_M = 16 indices apart (~6 % of a lifetime):
  both A and B are reused from L2. Expected HBM reads at 8192^3: row-major ~4,096 blocks x 4 MiB of B
  ~ 17 GB (+ A once), grouped ~16 waves x 132 MiB ~ 2.2 GB; at 4096 x 16384 x 4096 ~8.6 GB against
  ~1.1 GB. The L2 hit rate (Nsight Compute: ncu --metrics lts__t_sector_hit_rate.pct,
  dram__bytes_read.sum) shows it. Measured on the H200 at 8192^3 (one launch each, under ncu's clock
  control): row-major 63.0 % L2 sector hits, 8.68 GB read from DRAM, 41.6 ms; grouped 84.1 %, 3.44 GB,
  41.65 ms. Grouped order cuts DRAM reads 2.5x, the direction the model says, by a third of its ~8x
  (row-major reads half the model's 17 GB: more of B survives in L2 than it assumes).
  What it does to time. This kernel is compute-bound in either order: a tile does 2 x 128 x 128 K
  FLOPs on 2 x 128 K 4 bytes (32 FLOPs a byte from L2; counting only B, the part row-major loses,
  64 a byte from HBM). Day 46 runs ~33 TFLOP/s (4.21 ms at 4096^3), so row-major needs ~0.5 TB/s
  from HBM, an eighth of what the H200 gives, and double buffering hides the extra latency of a miss
  behind a 16-deep step of outer products (~2 us a step). So expect a small speedup, ~1.0-1.1x
  (8192^3: ~34 ms a call), with the HBM bytes and the L2 hit rate moving by the factors above. The
  order pays in time where a tile's FLOPs a byte times the HBM bandwidth falls short of the compute
  rate: 64 x 4.2 TB/s ~ 270 TFLOP/s, i.e. tensor-core GEMMs (day 47; FP16 ~ 990 TFLOP/s dense),
  which is why cuBLAS, CUTLASS and Triton all swizzle. Measured on the H200: row-major 31.52 ms =
  grouped 31.55 ms at 8192^3 (34.9 TFLOP/s, 68 % of cuBLAS FP32's 21.5 ms), 15.79 vs 15.80 ms at
  4096 x 16384 x 4096: no speedup, the order does not change this FP32 kernel's time (it needs ~0.5 TB/s
  of HBM even at row-major's footprint). ncu confirms why: row-major's 8.68 GB in 41.6 ms is 0.21 TB/s
  of DRAM (0.28 at the bench's 31.5 ms), far below the ~4.2 TB/s the HBM gives, so cutting it 2.5x
  leaves the time unchanged.
  The simulator counts the same requests and sectors for both orders (it has no L2): the order
  changes which of them hit in L2, not how many there are.

What you write (each raises NotImplementedError with its hint until you do):
  grouped_tile_coords  the block's group and its first row; the group's rows (the last may be short); down its rows
                       first (8 lines)
Everything else in this file is given. Grade with:  make check DAY=54
"""

import numpy as np

from course import ON_GPU, cuda, days, launch
from solutions.day39_matmul_naive import (  # noqa: F401  (the unit's problem: graders and bench read these)
    ERROR_FLOOR,
    MIN_SCALE,
    check_inputs,
    library,
    make_inputs,
    reference,
    sizes,
    tolerance,
    traffic,
)
from solutions.day44_matmul_vectorized import pad_columns, pad_columns_kernel, run_padded  # noqa: F401
from solutions.day46_matmul_warp_tiling import (
    BM,
    BN,
    THREADS,
    matmul_warp_tiling_kernel,
    tile_coords,
)
from solutions.day46_matmul_warp_tiling import warp_tiling as row_major

TITLE = "L2-aware tiling: the order blocks take their tiles"
MEMORY_SPACE = "global (L2)"
VERSIONS = ("row_major", "grouped")
# (M, N, K): one tile; a single group shorter than GROUP_M (2 tile rows: the classic bug, tiles_m not
# a multiple of GROUP_M) over 3 tile columns, K and N padded; a single tile row over 3 columns; a
# single tile column of 3 rows; whole aligned tiles last (float4 stores; the traffic counts are read
# there). Whole groups followed by a short one (17 tile rows: 17 blocks of 256 threads, 6 s in the
# simulator) are the grader's tiny recording kernel's, and the GPU test's (2100 x 4099 x 1021).
TEST_SIZES = ((1, 1, 1), (129, 260, 5), (40, 300, 6), (300, 40, 3), (256, 256, 16))
# B larger than the L2 in both (256 MiB): 8192^3 (64 x 64 tiles) and a wide N (32 x 128 tiles:
# row-major's wave spans only 2 tile rows and all of B).
BENCH_SIZES = (8192, (4096, 16384, 4096))
BOUND = "compute"  # the benchmark's peak: cuBLAS FP32 GEMM measured in the same run
RTOL = tolerance(max(sizes(n)[2] for n in BENCH_SIZES))  # K = 8192: 4.6e-5 of max|C|

GROUP_M = 16  # tile rows a group: ~sqrt(264 resident blocks), a square-ish wave of 16 x 16.5 tiles
SMS = 132  # the H200's streaming multiprocessors
L2_BYTES = 60 * 2**20  # the course's 60 MB (l2_model_vs_time reads the device's own figure)
REGISTERS = 127  # day 46's kernel, ptxas's count (`make inspect`): <= 128 keeps 2 blocks an SM
SHARED_BYTES = 34_304  # day 46's shared memory a block, ptxas's count (two copies of the A and B tiles)
ORDERS = ("row_major", "grouped")


@cuda.jit(device=True, inline=True)
def grouped_tile_coords(block, tiles_m, tiles_n):
    """(tile row, tile column) of the tile of C that block ``block`` computes, in groups of GROUP_M
    tile rows (GROUP_M: the module constant; read it, do not write 16): group g holds tile rows
    g GROUP_M ... g GROUP_M + rows - 1, rows = min(GROUP_M, tiles_m - g GROUP_M) (the last group is
    shorter when GROUP_M does not divide tiles_m), and its rows x tiles_n blocks are consecutive.
    Within a group consecutive blocks go DOWN its rows first, then to the next column:
        per_group = GROUP_M tiles_n, g = block // per_group, w = block - g per_group,
        tr = g GROUP_M + w % rows, tc = w // rows.
    Every (tr, tc) with tr < tiles_m, tc < tiles_n is taken by exactly one block < tiles_m tiles_n.
    Integer arithmetic only (a device function inlined into day 46's kernel)."""
    raise NotImplementedError("Day 54: the block's group and its first row; the group's rows (the last may be short); "
                              "down its rows first (8 lines)")


# Day 46's kernel, compiled again with the grouped order: its source and every other global unchanged.
matmul_grouped_kernel = days.with_globals(matmul_warp_tiling_kernel, tile_coords=grouped_tile_coords)

_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
_PAD_SIG = "void(float32[:, ::1], float32[:, ::1])"
KERNELS = {
    "row_major": (matmul_warp_tiling_kernel, _SIG),
    "row_major.pad": (pad_columns_kernel, _PAD_SIG),
    "grouped": (matmul_grouped_kernel, _SIG),
    "grouped.pad": (pad_columns_kernel, _PAD_SIG),
}


def grouped(a, b):
    return run_padded(matmul_grouped_kernel, a, b, BM, BN, THREADS)


# The unit's fixed interface: optimized(a, b) is the best step so far.
naive = row_major  # the day's starting point: day 46's order
optimized = grouped


# ---- the lesson's model: plain Python, no GPU ---------------------------------------------------------

def _order(order: str):
    """The plain-Python function of an order (the device function's own code, run on the host)."""
    if order not in ORDERS:
        raise ValueError(f"order: expected one of {ORDERS}, got {order!r}")
    fn = tile_coords if order == "row_major" else grouped_tile_coords
    return getattr(fn, "py_func", fn)


def tile_grid(shape) -> tuple[int, int]:
    """(tiles_m, tiles_n) of an (M, N, K) problem (an int n is n^3): 128 x 128 tiles of C."""
    m, n, _ = sizes(shape)
    return -(-m // BM), -(-n // BN)


def block_map(shape, order: str) -> np.ndarray:
    """(tiles_m, tiles_n) int array: the block index that computes each tile in ``order`` (-1 where no
    block does). ValueError if a block takes a tile outside the grid or one another block took."""
    tiles_m, tiles_n = tile_grid(shape)
    coords = _order(order)
    out = np.full((tiles_m, tiles_n), -1, np.int64)
    for block in range(tiles_m * tiles_n):
        tr, tc = coords(block, tiles_m, tiles_n)
        if not (0 <= tr < tiles_m and 0 <= tc < tiles_n):
            raise ValueError(f"{order}: block {block} takes tile ({tr}, {tc}) outside the {tiles_m} x {tiles_n} grid")
        if out[tr, tc] >= 0:
            raise ValueError(f"{order}: blocks {out[tr, tc]} and {block} both take tile ({tr}, {tc})")
        out[tr, tc] = block
    return out


def resident_blocks(registers: int = REGISTERS, shared_bytes: int = SHARED_BYTES, threads: int = THREADS,
                    sms: int = SMS) -> int:
    """Blocks resident on the whole GPU at once (Hopper's limits an SM: 65,536 registers allocated
    per warp in units of 256, 228 KB of shared memory with 1 KB reserved a block, 2,048 threads, 32
    blocks). 264 for day 46's kernel on 132 SMs."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = 65536 // (per_warp * warps)
    by_shared = (228 * 1024) // (shared_bytes + 1024)
    by_threads = 2048 // threads
    return sms * min(by_registers, by_shared, by_threads, 32)


RESIDENT_BLOCKS = resident_blocks()  # 132 SMs x 2 blocks


def wave_footprint(shape, order: str, resident_blocks: int = RESIDENT_BLOCKS) -> int:
    """Distinct bytes of A and B that the first wave (blocks 0 ... resident_blocks - 1, all resident
    at once) reads in ``order``: the A row panels of their tile rows (rows x K x 4 bytes each, the
    last panel only the rows that exist) plus the B column panels of their tile columns. What the
    wave loads from HBM if each byte is loaded once (the L2 keeps what the wave shares)."""
    m, n, k = sizes(shape)
    tiles_m, tiles_n = tile_grid(shape)
    coords = _order(order)
    rows, cols = set(), set()
    for block in range(min(resident_blocks, tiles_m * tiles_n)):
        tr, tc = coords(block, tiles_m, tiles_n)
        rows.add(tr)
        cols.add(tc)
    a_bytes = sum(min(BM, m - tr * BM) for tr in rows) * k * 4
    b_bytes = sum(min(BN, n - tc * BN) for tc in cols) * k * 4
    return a_bytes + b_bytes


# ---- GPU only: the notebook's plot --------------------------------------------------------------------

def l2_model_vs_time(shapes=BENCH_SIZES, repeats: int = 10):
    """GPU only. For each (M, N, K): the median time of both orders (course.bench.Timer, the L2
    flushed before every sample), their TFLOP/s, the model's first-wave footprint of each order with
    the resident blocks of this GPU, and the GPU's L2 size. Self-checking: grouped's C must equal
    row_major's bit for bit (same per-output arithmetic), and row_major's must match the float32
    product of CuPy (cuBLAS) within the unit's tolerance. Returns a list of dicts."""
    if not ON_GPU:
        raise RuntimeError("l2_model_vs_time needs a CUDA GPU (CUDA events); wave_footprint is the model without one")
    import cupy

    from course import bench

    device = cuda.get_current_device()
    sms = device.MULTIPROCESSOR_COUNT
    l2 = device.L2_CACHE_SIZE
    timer = bench.Timer()
    versions = {"row_major": row_major, "grouped": grouped}
    rows = []
    for shape in shapes:
        m, n, k = sizes(shape)
        a, b = make_inputs(shape, seed=0)
        d_a, d_b = cuda.to_device(a), cuda.to_device(b)
        with launch.no_poison():
            got = {order: fn(d_a, d_b).copy_to_host() for order, fn in versions.items()}
            ms = {order: timer.time(fn, d_a, d_b, repeats=repeats)[0] for order, fn in versions.items()}
        if not np.array_equal(got["grouped"], got["row_major"]):
            raise AssertionError(f"{shape}: grouped's C differs from row_major's (same kernel, other order)")
        want = cupy.matmul(cupy.asarray(a), cupy.asarray(b)).get()
        err = float(np.abs(got["row_major"] - want).max() / max(np.abs(want).max(), 1e-30))
        if err > 2 * tolerance(k):
            raise AssertionError(f"{shape}: row_major is {err:.2e} of max|C| from cuBLAS "
                                 f"(tolerance {tolerance(k):.2e})")
        resident = sms * (RESIDENT_BLOCKS // SMS)
        row = {"shape": (m, n, k), "resident_blocks": resident, "l2_bytes": l2}
        for order in ORDERS:
            row[f"{order}_ms"] = ms[order]
            row[f"{order}_tflops"] = 2 * m * n * k / (ms[order] * 1e-3) / 1e12
            row[f"{order}_footprint"] = wave_footprint(shape, order, resident)
        row["speedup"] = ms["row_major"] / ms["grouped"]
        rows.append(row)
    return rows
