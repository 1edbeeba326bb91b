"""Day 62's 16-byte gather kernels in variants, timed at the day's three benchmark shapes (GPU experiment).

The warp-per-row kernel (v2) runs 3 blocks of 256 threads an SM (66 registers a thread), so at 16384
tokens each warp copies 2.6 pairs of rows: 60 % of the warps make three trips and 40 % two, and a warp
waits for its pair's ids (one dependent load) before its first row load goes out. Its variants:

  bounds=B    the kernel compiled with launch bounds (256 threads, B blocks an SM): more warps, fewer
              trips each (4: 64 registers, 32 warps an SM, two trips at 16384 tokens)
  prefetch    the next pair's ids loaded before this pair's rows are copied, so the id's latency hides
              behind the copy

and, in the output's order instead of spread over it:

  block_row   v3 (the optimized version): a block per row, 4 quads a thread (block_row_T: T threads)
  flat        a grid-stride loop over the output's quads front to back, 4 quads a thread in flight

and torch.nn.functional.embedding where torch is installed.

Every variant is checked against NumPy at each shape. Exits 2 without a GPU; --sim-check runs the
variants' logic in the simulator at small shapes.
"""

import argparse
import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course import DEVICE, ON_GPU, cuda, wide  # noqa: E402  (course first: it picks GPU or simulator)

from solutions import day62_embedding_gather as d  # noqa: E402

VEC, WARP, ROWS = d.VEC, 32, d.ROWS
warp_rows, fill_bad_quads = d.warp_rows, d.fill_bad_quads


@functools.cache
def build(blocks: int, prefetch: bool):
    bounds = {"launch_bounds": (d.THREADS, blocks)} if blocks and DEVICE.kind != "sim" else {}

    @cuda.jit(**bounds)
    def kernel(table, ids, out, bad):
        vocab, words = table.shape
        tokens = ids.shape[0]
        nq = words // VEC
        lane = cuda.threadIdx.x % WARP
        warps = cuda.gridsize(1) // WARP
        t0 = ROWS * (cuda.grid(1) // WARP)
        if t0 < tokens:
            src_a, dst_a, ok_a, src_b, dst_b, ok_b = warp_rows(ids, vocab, t0)
        while t0 < tokens:
            t1 = t0 + ROWS * warps
            if prefetch and t1 < tokens:
                na, nda, noka, nb, ndb, nokb = warp_rows(ids, vocab, t1)
            q = lane
            while q + WARP < nq:
                a0 = wide.load4(table, src_a, VEC * q)
                a1 = wide.load4(table, src_a, VEC * (q + WARP))
                b0 = wide.load4(table, src_b, VEC * q)
                b1 = wide.load4(table, src_b, VEC * (q + WARP))
                wide.store4(out, dst_a, VEC * q, a0)
                wide.store4(out, dst_a, VEC * (q + WARP), a1)
                wide.store4(out, dst_b, VEC * q, b0)
                wide.store4(out, dst_b, VEC * (q + WARP), b1)
                q += 2 * WARP
            if q < nq:
                a0 = wide.load4(table, src_a, VEC * q)
                b0 = wide.load4(table, src_b, VEC * q)
                wide.store4(out, dst_a, VEC * q, a0)
                wide.store4(out, dst_b, VEC * q, b0)
            if not ok_a:
                fill_bad_quads(out, dst_a, lane, nq, bad)
            if not ok_b:
                fill_bad_quads(out, dst_b, lane, nq, bad)
            t0 = t1
            if t0 < tokens:
                if prefetch:
                    src_a, dst_a, ok_a, src_b, dst_b, ok_b = na, nda, noka, nb, ndb, nokb
                else:
                    src_a, dst_a, ok_a, src_b, dst_b, ok_b = warp_rows(ids, vocab, t0)

    return kernel


@functools.cache
def build_flat():
    """A grid-stride loop over the output's quads in order (quad i of the flat output: row i // nq), four
    quads a thread in flight (i, i + S, i + 2S, i + 3S for a grid of S threads): the whole grid sweeps the
    output front to back, each thread reading its rows' ids (one broadcast a warp, from L1)."""

    @cuda.jit
    def kernel(table, ids, out, bad):
        vocab, words = table.shape
        nq = words // VEC
        total = ids.shape[0] * nq
        stride = cuda.gridsize(1)
        i = cuda.grid(1)
        while i < total:
            # up to four quads; past the end a lane repeats its first (the same bytes stored twice)
            i1 = i + stride if i + stride < total else i
            i2 = i + 2 * stride if i + 2 * stride < total else i
            i3 = i + 3 * stride if i + 3 * stride < total else i
            t0, t1, t2, t3 = i // nq, i1 // nq, i2 // nq, i3 // nq
            r0, r1, r2, r3 = ids[t0], ids[t1], ids[t2], ids[t3]
            a0 = wide.load4(table, r0, VEC * (i - t0 * nq))
            a1 = wide.load4(table, r1, VEC * (i1 - t1 * nq))
            a2 = wide.load4(table, r2, VEC * (i2 - t2 * nq))
            a3 = wide.load4(table, r3, VEC * (i3 - t3 * nq))
            wide.store4(out, t0, VEC * (i - t0 * nq), a0)
            wide.store4(out, t1, VEC * (i1 - t1 * nq), a1)
            wide.store4(out, t2, VEC * (i2 - t2 * nq), a2)
            wide.store4(out, t3, VEC * (i3 - t3 * nq), a3)
            i += 4 * stride

    return kernel


def run_other(name, table, ids, d_table, d_ids):
    """run() for the block-per-row kernel (v3, optimized) and the flat variant (valid ids only: the
    benchmark's)."""
    import numpy as np

    from course import launch

    hidden, tokens = table.shape[1], ids.shape[0]
    out = launch.empty((tokens, hidden), table.dtype)
    launch.poison(out)
    bad = d.BAD_WORD[4] if table.dtype.itemsize == 4 else d.BAD_WORD_F16_PAIR
    args = (d._words(d_table, "uint32"), d_ids, d._words(out, "uint32"), np.uint32(bad))
    nq = hidden * table.dtype.itemsize // 16
    if name.startswith("block_row"):  # the solution's v3 kernel, at its own block size or at _T threads
        kernel = d.gather_block_row_kernel
        threads = int(name.split("_")[-1]) if name != "block_row" else d.row_threads(nq)
        grid = tokens
    else:
        kernel = build_flat()
        threads = 256
        per_sm = launch.resident_blocks(kernel, threads, *args, most=8)
        grid = launch.grid_stride_blocks(-(-tokens * nq // 4), threads, per_sm)
    return out, lambda: kernel[grid, threads](*args), grid, kernel


OTHERS = ("block_row", "block_row_256", "block_row_128", "flat")


def run(kernel, blocks, table, ids, d_table, d_ids):
    from course import launch

    hidden, tokens = table.shape[1], ids.shape[0]
    out = launch.empty((tokens, hidden), table.dtype)
    launch.poison(out)
    bad = d.BAD_WORD[4] if table.dtype.itemsize == 4 else d.BAD_WORD_F16_PAIR
    args = (d._words(d_table, "uint32"), d_ids, d._words(out, "uint32"), __import__("numpy").uint32(bad))
    warps = -(-tokens // ROWS)
    threads = min(d.THREADS, WARP * warps)
    per_sm = launch.resident_blocks(kernel, threads, *args, most=blocks or d.BLOCKS_PER_SM)
    grid = launch.grid_stride_blocks(WARP * warps, threads, per_sm)
    return out, lambda: kernel[grid, threads](*args), grid


VARIANTS = {"current": (0, False), "bounds4": (4, False), "prefetch": (0, True), "prefetch+bounds4": (4, True),
            "bounds5": (5, False), "prefetch+bounds5": (5, True)}


def main() -> int:
    import numpy as np

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--sim-check", action="store_true")
    p.add_argument("--only", type=lambda v: v.split(","), help="of the warp-per-row variants, only these")
    a = p.parse_args()
    from course import bench, checking, launch

    if a.sim_check:
        bad = 0
        for n in ((50, 136, 37), (20, 8, 5, "float16"), (9, 260, 1), (64, 8, 701), (40, 16, 333, "float16")):
            table, ids = d.make_inputs(n, seed=3)
            d_table, d_ids = launch.to_device(table, ids)
            for name, (blocks, prefetch) in VARIANTS.items():
                out, fn, grid = run(build(blocks, prefetch), blocks, table, ids, d_table, d_ids)
                fn()
                ok = checking.compare(out.copy_to_host(), d.reference(table, ids)).ok
                print(n, name, grid, ok, flush=True)
                bad += not ok
            for name in OTHERS:
                if (table.shape[1] * table.dtype.itemsize) % 16:
                    continue
                out, fn, grid, _ = run_other(name, table, ids, d_table, d_ids)
                fn()
                ok = checking.compare(out.copy_to_host(), d.reference(table, ids)).ok
                print(n, name, grid, ok, flush=True)
                bad += not ok
        return 1 if bad else 0
    if not ON_GPU:
        print("day62_variants needs a CUDA GPU", file=sys.stderr)
        return 2
    timer = bench.Timer()
    copy = bench.copy_peak_gbps(timer)
    res = {"copy_gbps": copy, "shapes": {}}
    for n in d.BENCH_SIZES:
        table, ids = d.make_inputs(n, seed=1)
        d_table, d_ids = launch.to_device(table, ids)
        want = d.reference(table, ids)
        nbytes = d.traffic(table, ids)[0]
        rows = res["shapes"][str(n)] = {}
        for name, (blocks, prefetch) in VARIANTS.items():
            if a.only and name not in a.only:
                continue
            kernel = build(blocks, prefetch)
            out, fn, grid = run(kernel, blocks, table, ids, d_table, d_ids)
            ms, _ = timer.time(fn)
            ok = bool(np.array_equal(out.copy_to_host().view(np.uint8), want.view(np.uint8)))
            pct = 100 * nbytes / (ms * 1e-3) / 1e9 / copy
            try:
                regs = str(kernel.get_regs_per_thread())
            except Exception:  # noqa: BLE001
                regs = -1
            rows[name] = {"us": 1e3 * ms, "pct_copy": pct, "ok": ok, "grid": grid, "regs": regs}
            print(n, f"{name:18s} {1e3 * ms:7.1f} us {pct:5.1f} % grid {grid} regs {regs} ok={ok}", flush=True)
        for name in OTHERS:
            out, fn, grid, kernel = run_other(name, table, ids, d_table, d_ids)
            ms, _ = timer.time(fn)
            ok = bool(np.array_equal(out.copy_to_host().view(np.uint8), want.view(np.uint8)))
            pct = 100 * nbytes / (ms * 1e-3) / 1e9 / copy
            rows[name] = {"us": 1e3 * ms, "pct_copy": pct, "ok": ok, "grid": grid}
            print(n, f"{name:18s} {1e3 * ms:7.1f} us {pct:5.1f} % grid {grid} ok={ok}", flush=True)
        try:
            import torch

            tt, ti = torch.as_tensor(table, device="cuda"), torch.as_tensor(ids, device="cuda")
            ms, _ = timer.time(lambda tt=tt, ti=ti: torch.nn.functional.embedding(ti, tt))
            rows["torch"] = {"us": 1e3 * ms, "pct_copy": 100 * nbytes / (ms * 1e-3) / 1e9 / copy}
            print(n, f"{'torch':18s} {1e3 * ms:7.1f} us {rows['torch']['pct_copy']:5.1f} %", flush=True)
        except ImportError:
            pass
        ms, _ = timer.time(lambda t=d_table, i=d_ids: d.optimized(t, i))
        rows["solution"] = {"us": 1e3 * ms, "pct_copy": 100 * nbytes / (ms * 1e-3) / 1e9 / copy}
        print(n, f"{'solution':18s} {1e3 * ms:7.1f} us", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
