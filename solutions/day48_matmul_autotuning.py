"""Day 48: matrix multiply, step 10 (autotuning) -- C = A B, A (M, K), B (K, N), float32.

The problem is day 39's (imported); the kernel is day 46's warp-tiled one, unchanged: what changes is
which tile sizes it is compiled with, chosen per shape from a table measured on the GPU.

v1-v8              days 39-46's steps, imported (the table's first eight rows).
v9 autotuned       day 46's kernel compiled with the configuration BEST[shape_class(M, N, K)]:
                   (BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN) rewritten as module constants
                   (course.days.with_constants(46, ...): a fresh module, a fresh kernel), one variant a
                   configuration, built the first time a shape needs it and cached.

What is tuned, and why it depends on the shape and the GPU (napkin math, H200: 132 SMs, 65,536
registers, 2,048 threads and 228 KB of shared memory an SM):
  reuse      a BM x BN x BK tile reads 4 BK (BM + BN) bytes from L2 for 2 BM BN BK FLOPs:
             BM BN / (2 (BM + BN)) FLOPs a byte, 32 at 128 x 128 and 16 at 64 x 64. The H200's L2
             delivers roughly 10-12 TB/s: 64 x 64 tiles need ~3.8 TB/s of it at 60 TFLOP/s, 128 x 128
             ~1.9. Inside the block a thread's TM x TN blocks (WMITER x WNITER of them) reuse each
             fragment value WNITER TN (or WMITER TM) times: 8 at 8 x 8 outputs, 16 at 8 x 16.
  occupancy  registers: 64 accumulators need ~125 registers (day 46: 2 blocks of 256 threads an SM,
             16 warps), 128 accumulators ~200-255 (at 128 x 128 tiles two blocks of 128 threads: 8 warps,
             too few to hide the shared-memory latency unless each has more independent FMAs, which it
             does: the H200 sweep's best, 244 registers). Shared memory: 2 copies x BK x (BM + 4 + BN)
             x 4 bytes, 33 KB at day 46's 128 x 128 x 16, 66 KB at BK = 32: never the limit here below
             BK = 64.
  waves      ceil(M / BM) ceil(N / BN) tiles over 132 SMs x (blocks an SM): at 4096^3 day 46's 1,024
             tiles are 3.9 waves of 264; at 4093 x 4099 x 1021, 32 x 33 = 1,056 tiles are 4.0 waves,
             but each tile has only 64 k steps of 16, so the prologue, the epilogue and the last
             partial wave weigh four times more than at K = 4096. Small or thin shapes (M or N of a
             few hundred) give fewer tiles than SMs: smaller tiles (64 x 64) fill the GPU there.
  BK         deeper steps halve the barriers and the loop overhead per FMA but double the
             prefetch registers (2 BK (BM + BN) / THREADS floats a thread) and the shared bytes.
So no one configuration wins everywhere: the table is keyed by a shape class (each of M, N, K
small, at most SMALL_DIM = 1024, or large), measured per GPU (an A100's 108 SMs, an L4's 58 and
different register files move every boundary above).

The search space (config_space): BM = BN in {64, 128}, BK in {8, 16, 32}, (WM, WN) in {(64, 32),
(32, 64), (64, 64)}, TM = TN = 4 with day 46's lane layout (8 lane rows x 4 lane columns a sub-tile:
WMITER = WM / 32, WNITER = WN / 16): 18 candidates, of which day 46's asserts reject none and
the compiler spills some (tune skips those: a stack frame means the accumulators live in local
memory). tune() times every one at each shape against cuBLAS (cupy.matmul) in the same run,
re-checks every result, and best_of() turns its rows into the BEST table; heat_map() draws % of
cuBLAS over two knobs. tune_tensor_cores() does the same for day 47's CUDA C kernel over the
parameters its source leaves free (pipeline STAGES and the launch order's GROUP_M; its 128 x 128
x 32 tiles and 4 warps of 64 x 64 are written into its index arithmetic, not into #defines).
Run both on a GPU: `python -m solutions.day48_matmul_autotuning --out results/h200/sweeps/day48.json`.
Measured on the H200 (results/h200/sweeps/day48.json; cuBLAS FP32 2.688 ms at 4096^3 and 0.761 ms at
4093 x 4099 x 1021 in the same run): 34 of the 36 rows ran and matched cuBLAS, 2 were skipped (64 x 64 x
32, warps 64 x 64: stack). The best at both shapes is 128 x 128 x 16, warp tile 64 x 64 (WMITER 2, WNITER
4), thread 4 x 4, 244 registers: 3.758 ms at 4096^3 (71.5 % of cuBLAS) and 1.102 ms at the awkward shape
(69.0 %), against day 46's configuration (123 registers) at 3.984 ms (67.5 %) and 1.109 ms (68.6 %).
BEST gives the measured classes LLL and LLS that configuration (WARP_64X64) and keeps day 46's for the
six classes no bench shape falls in. Day 47's kernel (against cuBLAS HGEMM, 0.265 ms and 0.310 ms):
STAGES 3 is best, 0.373-0.374 ms at 4096^3 (~71 %) with GROUP_M 1, 4, 8 and 16 within 0.3 % of each
other, 0.223 ms at the awkward shape (139.5 %); STAGES 2 is a little slower (0.428-0.433 ms and
0.227-0.238 ms); STAGES 4 is skipped (64 KB of static shared memory, over the 48 KB limit).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from course import ON_GPU, days, launch
from solutions import day46_matmul_warp_tiling as day46
from solutions.day39_matmul_naive import (  # noqa: F401  (the unit's problem: graders and bench read these)
    BENCH_SIZES,
    BOUND,
    ERROR_FLOOR,
    MIN_SCALE,
    RTOL,
    TEST_SIZES,
    check_inputs,
    library,
    make_inputs,
    reference,
    sizes,
    tolerance,
    traffic,
)
from solutions.day46_matmul_warp_tiling import (  # noqa: F401  (steps 1-8: rows of the table)
    blocking_1d,
    blocking_2d,
    coalesced,
    double_buffered,
    naive,
    shared_tiles,
    vectorized,
    warp_tiling,
)

TITLE = "Matrix multiply 10: autotuning"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "coalesced", "shared_tiles", "blocking_1d", "blocking_2d", "vectorized",
            "double_buffered", "warp_tiling", "autotuned")

SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"  # day 46's kernel: a (M, K4), b (K4, N4), c
SMALL_DIM = 1024  # a side of at most this is "small": 8 tiles of 128 or fewer (16 of 64)
LANES_M, LANES_N = 8, 4  # day 46's lane layout in a sub-tile: 8 lane rows x 4 lane columns
MAX_REGISTERS = 255  # ptxas's ceiling a thread: past it, values go to the stack (local memory)


class Config(NamedTuple):
    """One setting of day 46's module constants (the names its kernel is written in)."""

    BM: int  # rows of C a block
    BN: int  # columns of C a block
    BK: int  # k a step
    WM: int  # rows of C a warp
    WN: int  # columns of C a warp
    WMITER: int  # sub-tiles down a warp tile
    WNITER: int  # sub-tiles across
    TM: int  # rows of a thread's block in a sub-tile (a multiple of 4: float4 fragments)
    TN: int  # columns of it

    def label(self) -> str:
        return (f"{self.BM}x{self.BN}x{self.BK} warp {self.WM}x{self.WN} ({self.WMITER}x{self.WNITER}) "
                f"thread {self.TM}x{self.TN}")


DAY46 = Config(day46.BM, day46.BN, day46.BK, day46.WM, day46.WN, day46.WMITER, day46.WNITER, day46.TM, day46.TN)
CLASSES = tuple("".join(c) for c in itertools.product("SL", repeat=3))  # "SSS" .. "LLL": M, N, K small/large

# The tuned table: shape class -> configuration, best_of(tune()) from the H200 sweep
# (results/h200/sweeps/day48.json: 36 FP32 configurations at 4096^3 and 4093 x 4099 x 1021). The two
# measured classes (LLL, LLS) take the 64 x 64 warp tile (WNITER 4); the classes no bench shape falls in
# keep day 46's configuration, the fastest that is not register-heavy (123 registers against 244).
WARP_64X64 = Config(BM=128, BN=128, BK=16, WM=64, WN=64, WMITER=2, WNITER=4, TM=4, TN=4)
BEST = {
    "SSS": DAY46,
    "SSL": DAY46,
    "SLS": DAY46,
    "SLL": DAY46,
    "LSS": DAY46,
    "LSL": DAY46,
    "LLS": WARP_64X64,
    "LLL": WARP_64X64,
}


def shape_class(m: int, n: int, k: int) -> str:
    """The key of BEST for an (M, N, K) problem: three letters, M's then N's then K's, each "S" (small:
    at most SMALL_DIM) or "L" (large). So 4096^3 is "LLL", 4093 x 4099 x 1021 "LLS", a tall
    4096 x 256 x 4096 "LSL" and a wide 256 x 4096 x 4096 "SLL"."""
    # EXERCISE: one letter per side, in the order M, N, K: "S" if the side is <= SMALL_DIM, else "L"
    return "".join("S" if side <= SMALL_DIM else "L" for side in (m, n, k))


def config_for(m: int, n: int, k: int) -> Config:
    """The configuration autotuned runs for an (M, N, K) problem: BEST's entry for its shape class
    (read from the module's BEST at call time), DAY46 for a class the table does not hold."""
    # EXERCISE: look shape_class(m, n, k) up in BEST, DAY46 if it is missing
    return BEST.get(shape_class(m, n, k), DAY46)


def build(cfg: Config):
    """Day 46's solution with cfg's constants: a fresh module (its asserts raise AssertionError for a
    configuration its kernel cannot take). Not cached: see variant()."""
    return days.with_constants(46, **cfg._asdict())


@functools.cache
def variant(cfg: Config):
    """build(cfg), once per configuration: Numba compiles its kernel on the first launch."""
    return build(Config(*cfg))


def candidates(blocks=((64, 64), (128, 128)), bk=(8, 16, 32), warps=((64, 32), (32, 64), (64, 64)),
               threads=((4, 4),)):
    """Every combination of the knobs as a Config, unchecked: WMITER = WM // (LANES_M TM) and
    WNITER = WN // (LANES_N TN) (at least 1), day 46's 8 x 4 lanes a sub-tile."""
    for (bm, bn), k, (wm, wn), (tm, tn) in itertools.product(blocks, bk, warps, threads):
        yield Config(bm, bn, k, wm, wn, max(1, wm // (LANES_M * tm)), max(1, wn // (LANES_N * tn)), tm, tn)


def config_space(**knobs):
    """The configurations of candidates(**knobs) that day 46's asserts accept, in order: build each
    (variant(cfg): build(cfg), cached) and skip the ones whose build raises AssertionError."""
    # EXERCISE: for each of candidates(**knobs): variant(cfg), and yield cfg unless that raises AssertionError
    for cfg in candidates(**knobs):
        try:
            variant(cfg)
        except AssertionError:  # a tile the kernel cannot cover: lanes != 32, partial float4 passes, ...
            continue
        yield cfg


def autotuned(a, b):
    check_inputs(a, b)
    # EXERCISE: pick config_for(M, N, K) and run variant(config).warp_tiling(a, b)
    cfg = config_for(a.shape[0], b.shape[1], a.shape[1])
    return variant(cfg).warp_tiling(a, b)


# The unit's fixed interface: optimized(a, b) is the best step so far.
optimized = autotuned


def _kernel_label(cfg: Config) -> str:
    return "autotuned." + "_".join(f"{k}{v}" for k, v in cfg._asdict().items())


def _best_kernels() -> dict:
    """One kernel per distinct configuration of BEST that builds (a BEST entry the asserts reject is
    left out here, and the grader names it)."""
    out = {}
    for cfg in dict.fromkeys(BEST.values()):
        try:
            out[_kernel_label(cfg)] = (variant(cfg).matmul_warp_tiling_kernel, SIG)
        except AssertionError:
            continue
    return out


# One kernel per distinct configuration of BEST (what `make inspect DAY=48` shows); the earlier steps'
# kernels are their own days' (`make inspect DAY=46`).
KERNELS = _best_kernels()


# ---- the table: best configuration per shape class ------------------------------------------------------

def best_of(rows, default: Config = DAY46) -> dict[str, Config]:
    """The BEST table from tune()'s rows: for each shape class (shape_class of a row's "shape"), the
    configuration (Config(**row["config"])) with the highest mean "pct_cublas" over the class's
    shapes, among those whose rows have "status" == "ok" at every shape of the class that any row
    measured; the first such in row order on a tie. A class with no such configuration gets ``default``.
    Returns a dict with every key of CLASSES."""
    # EXERCISE: per class, the config ok at every shape of the class with the best mean pct_cublas
    shapes_of: dict[str, set] = {}
    scores: dict[str, dict[Config, dict]] = {}
    for row in rows:
        shape = tuple(row["shape"])
        cls = shape_class(*shape)
        shapes_of.setdefault(cls, set()).add(shape)
        cfg = Config(**row["config"])
        entry = scores.setdefault(cls, {}).setdefault(cfg, {"ok": set(), "bad": False, "pct": []})
        if row["status"] == "ok":
            entry["ok"].add(shape)
            entry["pct"].append(row["pct_cublas"])
        else:
            entry["bad"] = True
    best = {cls: default for cls in CLASSES}
    for cls, per_config in scores.items():
        good = [(sum(e["pct"]) / len(e["pct"]), cfg) for cfg, e in per_config.items()
                if not e["bad"] and e["ok"] == shapes_of[cls]]
        if good:
            top = max(pct for pct, _ in good)
            best[cls] = next(cfg for pct, cfg in good if pct == top)
    return best


def plan(cfg: Config, shape, registers: int | None = None) -> dict:
    """Napkin math of one configuration at one (M, N, K): threads, accumulators, shared bytes, FLOPs a
    byte of L2 traffic, tiles and (with ptxas's register count) blocks an SM and waves on an H200."""
    m, n, k = sizes(shape)
    threads = 32 * (cfg.BM // cfg.WM) * (cfg.BN // cfg.WN)
    shared = 2 * cfg.BK * (cfg.BM + 4 + cfg.BN) * 4
    tiles = math.ceil(m / cfg.BM) * math.ceil(n / cfg.BN)
    out = dict(threads=threads, accumulators=cfg.WMITER * cfg.TM * cfg.WNITER * cfg.TN, shared_bytes=shared,
               flops_per_l2_byte=cfg.BM * cfg.BN / (2 * (cfg.BM + cfg.BN)), tiles=tiles,
               k_steps=math.ceil(math.ceil(k / 4) * 4 / cfg.BK))
    if registers:
        per_warp = math.ceil(registers * 32 / 256) * 256  # allocated a warp at a time, 256 registers a unit
        blocks = min(65536 // (per_warp * threads // 32), 2048 // threads, (228 * 1024) // (shared + 1024), 32)
        out.update(registers=registers, blocks_per_sm=blocks,
                   waves=tiles / (132 * blocks) if blocks else math.inf)
    return out


# ---- the sweep (GPU) -------------------------------------------------------------------------------------

def resources(cfg: Config) -> dict:
    """ptxas's registers and stack frame (bytes of local memory a thread) for cfg's kernel. On a GPU the
    kernel is compiled for the launch (Numba keeps that compilation); without one, course.compiler."""
    mod = variant(cfg)
    if ON_GPU:
        compiled = mod.matmul_warp_tiling_kernel.compile(SIG)
        return dict(registers=compiled.regs_per_thread, stack_bytes=compiled.local_mem_per_thread)
    from course import compiler

    rep = compiler.report(mod, "warp_tiling")
    return dict(registers=rep.registers, stack_bytes=rep.stack_bytes + rep.spill_stores)


def _problems(shapes, seed: int, timer, repeats: int, lib, to_expected):
    import cupy

    out = []
    for shape in shapes:
        inputs = make_inputs_for(lib, shape, seed)
        dev = launch.to_device(*inputs)
        with launch.no_poison():
            lib_ms, _ = timer.time(lib, *dev, repeats=repeats)
        expected = cupy.asnumpy(to_expected(*(cupy.asarray(x) for x in dev)))  # the checks compare on the host
        out.append((sizes(shape), dev, expected, lib_ms))
    return out


def make_inputs_for(lib, shape, seed):
    """The inputs of the problem ``lib`` solves: day 47's float16 ones for its library, else day 39's."""
    if lib is library:
        return make_inputs(shape, seed=seed)
    from solutions import day47_matmul_tensor_cores as day47

    return day47.make_inputs(shape, seed=seed)


def tune(shapes=BENCH_SIZES, space=None, *, repeats: int = 20, progress=print) -> list[dict]:
    """Time every valid configuration of ``space`` (default: config_space()) at each shape on the GPU.

    Per shape, cuBLAS (cupy.matmul) is timed first, in the same run, with course.bench.Timer. A
    configuration day 46's asserts reject, or whose kernel has a stack frame (spilled accumulators)
    or more than 255 registers, is skipped (a row with status "skipped: ..." and no time). Every
    timed result is re-checked against cupy.matmul within day 39's tolerance. Rows: config (a dict),
    shape [M, N, K], ms, tflops, pct_cublas, cublas_ms, registers, status ("ok" or why not)."""
    if not ON_GPU:
        raise RuntimeError("tune times kernels: it needs a CUDA GPU (without one, plan() and "
                           "resources() give the napkin math and the compiler's registers)")
    import cupy

    from course import bench, checking

    timer = bench.Timer()
    problems = _problems(shapes, 48, timer, repeats, library, cupy.matmul)
    rows = []
    for cfg in (config_space() if space is None else space):
        cfg = Config(*cfg)
        base = dict(config=cfg._asdict(), registers=None)
        try:
            res = resources(cfg)
            base["registers"] = res["registers"]
            skip = (f"skipped: {res['stack_bytes']} bytes of stack a thread (spills)" if res["stack_bytes"]
                    else f"skipped: {res['registers']} registers" if res["registers"] > MAX_REGISTERS else None)
        except AssertionError as exc:
            skip = f"skipped: day 46's asserts reject it ({exc or 'assert'})"
        except Exception as exc:  # noqa: BLE001  (a configuration that does not compile is a result too)
            skip = f"skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        for (m, n, k), (d_a, d_b), expected, cublas_ms in problems:
            row = dict(base, shape=[m, n, k], ms=None, tflops=None, pct_cublas=None, cublas_ms=cublas_ms)
            if skip:
                rows.append(dict(row, status=skip))
                continue
            fn = variant(cfg).warp_tiling
            with launch.no_poison():
                ms, _ = timer.time(fn, d_a, d_b, repeats=repeats)
            report = checking.compare(fn(d_a, d_b), expected, rtol=tolerance(k), floor=ERROR_FLOOR, name=cfg.label())
            tflops = 2 * m * n * k / (ms * 1e-3) / 1e12
            rows.append(dict(row, ms=ms, tflops=tflops, pct_cublas=100 * cublas_ms / ms,
                             status="ok" if report.ok else "wrong: " + report.text.splitlines()[0]))
        for row in rows[-len(problems):]:
            progress(_row_line(row))
    return rows


def _row_line(row) -> str:
    cfg = Config(**row["config"]) if "BM" in row["config"] else None
    name = cfg.label() if cfg else " ".join(f"{k}={v}" for k, v in row["config"].items())
    shape = "x".join(str(v) for v in row["shape"])
    if row["ms"] is None:
        return f"{name:44s} {shape:16s} {row['status']}"
    return (f"{name:44s} {shape:16s} {row['ms'] * 1e3:8.1f} us {row['tflops']:6.1f} TFLOP/s "
            f"{row['pct_cublas']:5.1f} % of cuBLAS  regs {row['registers']}  {row['status']}")


# ---- day 47's tensor-core kernel: what its CUDA C leaves free --------------------------------------------

def tensor_core_source_for(stages: int = 3, group_m: int = 8) -> str:
    """Day 47's CUDA C with STAGES (cp.async pipeline depth) and GROUP_M (tile rows a launch group)
    rewritten. BM, BN, BK and THREADS are #defines too, but the kernel's chunk masks (& 3, & 15),
    swizzles and 2 x 2 warps of 64 x 64 assume 128 x 128 x 32: they are not free to sweep."""
    from solutions import day47_matmul_tensor_cores as day47

    source = day47.tensor_core_source()
    for name, value in (("STAGES", stages), ("GROUP_M", group_m)):
        line = f"#define {name} "
        start = source.index(line)
        end = source.index("\n", start)
        source = source[:start] + f"{line}{value}" + source[end:]
    return source


def tensor_cores_with(source: str, a, b):
    """Day 47's tensor_cores(a, b) with another source (float16 device inputs, float32 out)."""
    import cupy

    from solutions import day47_matmul_tensor_cores as day47

    day47.check_inputs(a, b)
    m, k = a.shape
    n = b.shape[1]
    kernel = day47._tensor_core_kernel(source)
    d_a, lda = day47._aligned_rows(cupy.asarray(a), m, k)
    d_b, ldb = day47._aligned_rows(cupy.asarray(b), k, n)
    c = launch.empty((m, n), np.float32)
    tiles = launch.blocks(m, day47.TC_BM) * launch.blocks(n, day47.TC_BN)
    kernel((tiles,), (day47.TC_THREADS,), (d_a, d_b, cupy.asarray(c), np.int32(m), np.int32(n), np.int32(k),
                                           np.int32(lda), np.int32(ldb)))
    return launch.result(c, a, b)


def tune_tensor_cores(shapes=BENCH_SIZES, stages=(2, 3, 4), group_m=(1, 4, 8, 16), *, repeats: int = 20,
                      progress=print) -> list[dict]:
    """tune() for day 47's kernel: every (STAGES, GROUP_M) at each shape, against cuBLAS HGEMM (day 47's
    library: cupy.matmul on float16, cast to float32), re-checked against the float32 product of the
    float16 inputs within day 47's tolerance. STAGES = 4 needs 64 KB of static shared memory, past
    the 48 KB a static array may take: it fails to build and is reported as skipped. GPU only."""
    if not ON_GPU:
        raise RuntimeError("tune_tensor_cores times a CuPy RawKernel: it needs a CUDA GPU")
    import cupy

    from course import bench, checking
    from solutions import day47_matmul_tensor_cores as day47

    timer = bench.Timer()
    widened = lambda a, b: cupy.matmul(a.astype(cupy.float32), b.astype(cupy.float32))  # noqa: E731
    problems = _problems(shapes, 47, timer, repeats, day47.library, widened)
    rows = []
    for s, g in itertools.product(stages, group_m):
        source = tensor_core_source_for(s, g)
        try:
            day47._tensor_core_kernel(source)
            skip = None
        except Exception as exc:  # noqa: BLE001  (nvcc's or ptxas's refusal is the result)
            skip = f"skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        fn = functools.partial(tensor_cores_with, source)
        for (m, n, k), (d_a, d_b), expected, lib_ms in problems:
            row = dict(config=dict(STAGES=s, GROUP_M=g), shape=[m, n, k], ms=None, tflops=None, pct_cublas=None,
                       cublas_ms=lib_ms, registers=None)
            if skip:
                rows.append(dict(row, status=skip))
            else:
                with launch.no_poison():
                    ms, _ = timer.time(fn, d_a, d_b, repeats=repeats)
                report = checking.compare(fn(d_a, d_b), expected, rtol=day47.tolerance(k), floor=ERROR_FLOOR,
                                          name=f"STAGES={s} GROUP_M={g}")
                rows.append(dict(row, ms=ms, tflops=2 * m * n * k / (ms * 1e-3) / 1e12, pct_cublas=100 * lib_ms / ms,
                                 status="ok" if report.ok else "wrong: " + report.text.splitlines()[0]))
            progress(_row_line(rows[-1]))
    return rows


# ---- the picture -------------------------------------------------------------------------------------------

KNOBS = {
    "BK": lambda c: c["BK"],
    "block": lambda c: f"{c['BM']}x{c['BN']}",
    "warp": lambda c: f"{c['WM']}x{c['WN']}",
    "STAGES": lambda c: c["STAGES"],
    "GROUP_M": lambda c: c["GROUP_M"],
}


def heat_map(rows, shape, x: str = "BK", y: str = "warp", ax=None, title: str | None = None):
    """% of cuBLAS over two knobs (KNOBS) at one shape, the best over every other knob in each cell;
    blank where no configuration was correct (skipped or wrong). Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    shape = list(sizes(shape))
    pts = [r for r in rows if list(r["shape"]) == shape and r["status"] == "ok"]
    xs = sorted({KNOBS[x](r["config"]) for r in rows if list(r["shape"]) == shape}, key=str)
    ys = sorted({KNOBS[y](r["config"]) for r in rows if list(r["shape"]) == shape}, key=str)
    grid = np.full((len(ys), len(xs)), np.nan)
    for r in pts:
        i, j = ys.index(KNOBS[y](r["config"])), xs.index(KNOBS[x](r["config"]))
        grid[i, j] = np.fmax(grid[i, j], r["pct_cublas"])
    if ax is None:
        _, ax = plt.subplots(figsize=(1.3 * len(xs) + 2.5, 0.8 * len(ys) + 1.8))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for i in range(len(ys)):
        for j in range(len(xs)):
            text = "-" if np.isnan(grid[i, j]) else f"{grid[i, j]:.0f}%"
            ax.text(j, i, text, ha="center", va="center", color="w" if np.isnan(grid[i, j]) or grid[i, j] < 60 else "k",
                    fontsize=8)
    ax.set_title(title or f"% of cuBLAS at {'x'.join(map(str, shape))}", fontsize=9)
    ax.figure.colorbar(im, ax=ax, label="% of cuBLAS (best over the other knobs)")
    return ax


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m solutions.day48_matmul_autotuning",
                                description="Sweep day 46's tile sizes (and day 47's pipeline) on a GPU.")
    p.add_argument("--out", type=Path, help="write every row here as JSON (results/h200/sweeps/day48.json)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--no-tensor-cores", action="store_true", help="skip day 47's sweep")
    args = p.parse_args(argv)
    if not ON_GPU:
        print("the sweep needs a CUDA GPU. Its space:")
        for cfg in config_space():
            print(f"  {cfg.label():44s} " + "  ".join(f"{k}={v}" for k, v in plan(cfg, BENCH_SIZES[0]).items()))
        return 0
    from course import DEVICE

    rows = tune(repeats=args.repeats)
    tc_rows = [] if args.no_tensor_cores else tune_tensor_cores(repeats=args.repeats)
    best = best_of(rows)
    print("BEST = {")
    for cls, cfg in best.items():
        print(f"    {cls!r}: {cfg!r},")
    print("}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(device=str(DEVICE.describe()), rows=rows, tensor_core_rows=tc_rows,
                                            best={k: v._asdict() for k, v in best.items()}), indent=2, default=str))
    wrong = [r for r in rows + tc_rows if r["status"].startswith("wrong")]
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
