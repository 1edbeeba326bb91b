"""Day 62's 16-byte gather kernel in variants, timed at the day's three benchmark shapes (GPU experiment).

The optimized kernel runs 3 blocks of 256 threads an SM (66 registers a thread), so at 16384 tokens each
warp copies 2.6 pairs of rows: 60 % of the warps make three trips and 40 % two, and a warp waits for its
pair's ids (one dependent load) before its first row load goes out. Variants:

  bounds=B    the kernel compiled with launch bounds (256 threads, B blocks an SM): more warps, fewer
              trips each (4: 64 registers, 32 warps an SM, two trips at 16384 tokens)
  prefetch    the next pair's ids loaded before this pair's rows are copied, so the id's latency hides
              behind the copy

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
        ms, _ = timer.time(lambda t=d_table, i=d_ids: d.optimized(t, i))
        rows["solution"] = {"us": 1e3 * ms, "pct_copy": 100 * nbytes / (ms * 1e-3) / 1e9 / copy}
        print(n, f"{'solution':18s} {1e3 * ms:7.1f} us", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
