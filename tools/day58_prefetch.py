"""Day 58's split kernel with the next row's loads issued before this row's stores (GPU experiment).

The split kernel (several warps a row, the row in registers) loads a row, reduces it, meets at a barrier
and stores it; while a block reduces and stores, it has no load in flight. This variant holds two rows a
thread's worth of registers: the loads of the block's next row go out right after the barrier, before the
stores of this one, so every block keeps loads in flight through its reduce and store. The loop is
unrolled by two trips (buffer A, then buffer B) so both buffers stay registers (constant indices).

Times it at (16384, 4096) against the solution's `optimized` and the copy rate, over the same knobs the
lesson sweeps (warps a row, rows a block, threads an SM), each row checked against the day's reference.
Exits 2 without a GPU. --json writes the rows.
"""

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from course import DEVICE, ON_GPU, cuda, wide  # noqa: E402  (course first: it picks GPU or simulator)
from numba import float32, int64  # noqa: E402


def build(groups, row_warps, block_rows, sm_threads):
    from solutions import day58_layernorm_welford as d

    VEC, WARP, ZERO, FOUR, ONE = d.VEC, d.WARP, d.ZERO, d.FOUR, d.ONE
    stride = WARP * row_warps
    threads = stride * block_rows
    store_row = d._store_row(True, groups, stride)
    warp_allmerge, chan_merge = d.warp_allmerge, d.chan_merge

    @cuda.jit(device=True)
    def load_row(xf, start, cols, lane, buf):
        last = cols - VEC
        for j in range(groups):
            c = VEC * (lane + stride * j)
            a0, a1, a2, a3 = wide.load4(xf, start + min(c, last))
            keep = c < cols
            buf[VEC * j] = a0 if keep else ZERO
            buf[VEC * j + 1] = a1 if keep else ZERO
            buf[VEC * j + 2] = a2 if keep else ZERO
            buf[VEC * j + 3] = a3 if keep else ZERO

    @cuda.jit(device=True)
    def row_stats(cols, lane, buf):
        a0 = buf[0]
        n = ZERO
        s = ZERO
        for j in range(groups):
            if VEC * (lane + stride * j) < cols:
                n += FOUR
                s += (((buf[VEC * j] - a0) + (buf[VEC * j + 1] - a0))
                      + ((buf[VEC * j + 2] - a0) + (buf[VEC * j + 3] - a0)))
        off = s / max(n, ONE)
        m2 = ZERO
        for j in range(groups):
            if VEC * (lane + stride * j) < cols:
                e0 = (buf[VEC * j] - a0) - off
                e1 = (buf[VEC * j + 1] - a0) - off
                e2 = (buf[VEC * j + 2] - a0) - off
                e3 = (buf[VEC * j + 3] - a0) - off
                m2 += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)
        return n, a0 + off, m2

    held = VEC * groups

    @cuda.jit(device=True)
    def trip(xf, rows, cols, weight, bias, eps, outf, first, step, s, i, w, t, p, buf, nxt,
             slot_n, slot_mean, slot_m2):
        """Reduce and store the row in buf (the block's trip at `first`), with the loads of the next trip's
        row into nxt issued between the barrier and the stores."""
        r = first + s
        start = int64(min(r, rows - 1)) * cols
        n, mean, m2 = row_stats(cols, i, buf)
        n, mean, m2 = warp_allmerge(n, mean, m2)
        if t % WARP == 0:
            slot_n[p, s, w] = n
            slot_mean[p, s, w] = mean
            slot_m2[p, s, w] = m2
        cuda.syncthreads()
        n, mean, m2 = slot_n[p, s, 0], slot_mean[p, s, 0], slot_m2[p, s, 0]
        for k in range(1, row_warps):
            n, mean, m2 = chan_merge(n, mean, m2, slot_n[p, s, k], slot_mean[p, s, k], slot_m2[p, s, k])
        load_row(xf, int64(min(first + step + s, rows - 1)) * cols, cols, i, nxt)  # next trip's row
        rstd = ONE / math.sqrt(m2 / n + eps)
        if r < rows:
            store_row(outf, weight, bias, start, cols, i, buf, mean, rstd)

    bounds = {"launch_bounds": (threads, max(1, sm_threads // threads))} if DEVICE.kind != "sim" else {}

    @cuda.jit(**bounds)
    def kernel(xf, rows, cols, weight, bias, eps, outf):
        slot_n = cuda.shared.array((2, block_rows, row_warps), float32)
        slot_mean = cuda.shared.array((2, block_rows, row_warps), float32)
        slot_m2 = cuda.shared.array((2, block_rows, row_warps), float32)
        a = cuda.local.array(held, float32)
        b = cuda.local.array(held, float32)
        t = cuda.threadIdx.x
        s = t // stride
        i = t % stride
        w = i // WARP
        step = cuda.gridDim.x * block_rows
        first = cuda.blockIdx.x * block_rows
        load_row(xf, int64(min(first + s, rows - 1)) * cols, cols, i, a)
        while first < rows:
            trip(xf, rows, cols, weight, bias, eps, outf, first, step, s, i, w, t, 0, a, b,
                 slot_n, slot_mean, slot_m2)
            first += step
            if first >= rows:
                break
            trip(xf, rows, cols, weight, bias, eps, outf, first, step, s, i, w, t, 1, b, a,
                 slot_n, slot_mean, slot_m2)
            first += step

    return kernel, threads


def sim_check() -> int:
    """The variant's results at small shapes (ragged last groups, rows past the grid, odd trip counts)."""
    from course import checking, cuda, launch
    from solutions import day58_layernorm_welford as d

    bad = 0
    for (rows, cols), warps, brows, grid in (((5, 1028), 4, 2, 2), ((4, 1032), 8, 1, 2), ((7, 2048), 4, 1, 3),
                                            ((1, 4096), 4, 2, 1), ((6, 1028), 8, 2, 1)):
        groups = next(g for g in d.WARP_GROUPS if cols <= d.WARP * warps * d.VEC * g)
        kernel, threads = build(groups, warps, brows, 768)
        x, weight, bias, eps = d.make_inputs((rows, cols), seed=rows + cols)
        dx, dw, db = launch.to_device(x, weight, bias)
        out = cuda.device_array((rows, cols), np.float32)
        launch.poison(out)
        kernel[grid, threads](dx.reshape(rows * cols), rows, cols, dw, db, np.float32(eps),
                              out.reshape(rows * cols))
        rep = checking.compare(out.copy_to_host(), d.reference(x, weight, bias, eps), rtol=d.RTOL)
        print((rows, cols), warps, brows, grid, rep.ok, flush=True)
        bad += not rep.ok
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16384)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--warps", default="4,8,16")
    p.add_argument("--block-rows", default="1,2")
    p.add_argument("--sm-threads", default="512,768,1024")
    p.add_argument("--json")
    p.add_argument("--sim-check", action="store_true", help="check the kernel's results in the simulator")
    a = p.parse_args()
    if a.sim_check:
        return sim_check()
    if not ON_GPU:
        print("day58_prefetch needs a CUDA GPU", file=sys.stderr)
        return 2
    from course import bench, checking, cuda, launch
    from solutions import day58_layernorm_welford as d

    rows, cols = a.rows, a.cols
    x, weight, bias, eps = d.make_inputs((rows, cols), seed=1)
    want = d.reference(x, weight, bias, eps)
    dx, dw, db = launch.to_device(x, weight, bias)
    out = cuda.device_array((rows, cols), np.float32)
    timer = bench.Timer()
    copy = bench.copy_peak_gbps(timer)
    nbytes = 2 * x.nbytes
    res = {"copy_gbps": copy, "rows": rows, "cols": cols, "variants": {}}

    def report(name, fn):
        launch.poison(out)
        ms, iqr = timer.time(fn)
        got = out.copy_to_host() if name != "optimized" else fn_out[0].copy_to_host()
        rep = checking.compare(got, want, name=name, rtol=d.RTOL)
        pct = 100 * nbytes / (ms * 1e-3) / 1e9 / copy
        res["variants"][name] = {"us": 1e3 * ms, "iqr_us": 1e3 * iqr, "pct_copy": pct, "ok": bool(rep.ok)}
        print(f"{name:28s} {1e3 * ms:8.1f} us  {pct:5.1f} %  ok={rep.ok}", flush=True)

    fn_out = [None]

    def opt():
        fn_out[0] = d.optimized(dx, dw, db, eps)

    report("optimized", opt)
    xf, of = dx.reshape(rows * cols), out.reshape(rows * cols)
    knobs = (a.warps, a.block_rows, a.sm_threads)
    for warps, brows, smt in itertools.product(*(map(int, v.split(",")) for v in knobs)):
        groups = -(-cols // (d.WARP * warps * d.VEC))
        if groups not in d.WARP_GROUPS:
            groups = next(g for g in d.WARP_GROUPS if g >= groups)
        if warps * d.WARP * brows > 1024:
            continue
        try:
            kernel, threads = build(groups, warps, brows, smt)
            sig = d._SIG_WARP
            comp = kernel.compile(sig) if hasattr(kernel, "compile") else None
            resident = comp.max_cooperative_grid_blocks(threads) if comp is not None else launch.sm_count() * 2
            grid = max(1, min(-(-rows // brows), resident))
            try:
                regs = str(kernel.get_regs_per_thread())
            except Exception:  # noqa: BLE001 -- a numba-cuda without the query
                regs = -1
            name = f"prefetch w{warps} r{brows} t{smt} (regs {regs}, grid {grid})"
            report(name, lambda k=kernel, gr=grid, th=threads: k[gr, th](xf, rows, cols, dw, db, np.float32(eps), of))
        except Exception as e:  # noqa: BLE001 -- one variant failing to compile is a row, not the end
            print(f"prefetch w{warps} r{brows} t{smt}: {type(e).__name__}: {e}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
