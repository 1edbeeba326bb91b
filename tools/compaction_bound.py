"""What bounds day 31's one-pass compaction: its kernel, its look-back and its host function, measured apart.

    python tools/compaction_bound.py                               # ~1 minute on a GPU, most of it compiling
    python tools/compaction_bound.py --direct 128x32,256x16 --pipelined 256x16 --json out.json

At 2^27 float32, half kept (make_inputs' seed 1234, as `make bench` times), it measures and re-checks
against NumPy:

  a. the machine's rates: the 1 GB device copy every percentage divides by, and a CuPy kernel moving
     compaction's byte mix (two floats read for one written, no look-back: `cupy.add` over the halves);
  b. v5 (`direct`) at each block shape (threads x elements a thread; course.days.with_constants
     rewrites DIRECT_THREADS and DIRECT_ITEMS), its kernel alone: CUDA events around the memset clear
     and the launch, best of 3 runs of 20;
  c. the oracle at the shapes of --oracle: the same kernel with every tile's inclusive prefix written
     into its status word beforehand, so each look-back finds its answer next door in one round trip
     and nothing waits (the prefill copy is timed apart and taken off): the kernel's rate without the
     look-back's waiting;
  d. v6 (`pipelined`) at each shape of --pipelined (PIPE_THREADS, PIPE_ITEMS), its kernel alone;
  e. the host function's pieces at one tile (4096 elements; the GPU idle before each, no poisoning):
     the input checks, the output from the pool, the plan, the memsets, the prepared launch, the
     read-back, and the GPU's own time for the memsets and a one-tile kernel between events; and the
     whole call at one tile and at 2^27 (the wall clock, the device synchronised after each call).

Prints a table (µs, % of the copy rate on the minimum bytes: x read once and the kept elements written
once) and the host's pieces; exits 2 without a GPU, 1 if any row is wrong. Lesson 31 quotes it
(results/h200/sweeps/day31_oracle.json and day31_shapes.json were made by its parts).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course  # noqa: E402  (first: GPU or simulator before numba loads)

N = 1 << 27
SEED = 1234


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """'128x32,256x16' -> [(128, 32), (256, 16)]; threads a multiple of 32."""
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        threads, sep, items = part.partition("x")
        if not sep or not threads.isdigit() or not items.isdigit():
            raise argparse.ArgumentTypeError(f"expected THREADSxITEMS, got {part!r}")
        if int(threads) % 32 or not 32 <= int(threads) <= 1024 or int(items) < 1:
            raise argparse.ArgumentTypeError(f"{part}: threads a multiple of 32 up to 1024, at least one item")
        shapes.append((int(threads), int(items)))
    return shapes


def kernel_us(go, reps: int = 20) -> float:
    """Best of three runs of `reps` calls of go() between two CUDA events, µs a call."""
    from course import cuda

    go()
    go()
    cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(reps):
            go()
        stop.record()
        stop.synchronize()
        best = min(best, cuda.event_elapsed_time(start, stop) * 1e3 / reps)
    return best


def mix_2_to_1_us(half: int) -> float:
    """cupy.add over two float32 arrays of `half` elements into a third: compaction's bytes at half kept
    (two floats read for each one written), with no look-back, µs a call."""
    import cupy
    import numpy as np

    a, b = cupy.random.random(half, dtype=np.float32), cupy.random.random(half, dtype=np.float32)
    c = cupy.empty(half, np.float32)
    return kernel_us(lambda: cupy.add(a, b, out=c))


def wall_us(fn, reps: int) -> float:
    from course import cuda

    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / reps


def status_prefilled(sol, x, t, tile: int, tiles: int):
    """Every tile's status word holding its inclusive prefix (day 29's layout: FLAG_P in the high 32 bits,
    the count in the low 32), as the oracle's look-backs find them."""
    import numpy as np

    padded = np.full(tiles * tile, -np.inf, np.float32)  # -inf is never kept
    padded[: x.shape[0]] = x
    prefix = np.cumsum((padded.reshape(tiles, tile) > t).sum(axis=1)).astype(np.uint64)
    return (np.uint64(sol.FLAG_P) << np.uint64(32)) | prefix


def one_pass_rows(x, t, ref, version: str, shapes, oracle_shapes) -> list[dict]:
    import cupy
    import numpy as np

    from course import days, launch

    (dx,) = launch.to_device(x)
    rows = []
    for threads, items in shapes:
        name = "DIRECT" if version == "direct" else "PIPE"
        sol = days.with_constants(31, **{f"{name}_THREADS": threads, f"{name}_ITEMS": items})
        tile = threads * items
        tiles = launch.blocks(x.shape[0], tile)
        status, counter = cupy.zeros(tiles, np.uint64), cupy.zeros(2, np.int32)
        out = cupy.empty(x.shape[0], np.float32)
        if version == "direct":
            kernel, grid = sol.compact_direct_kernel, tiles
        else:
            kernel, grid = sol.compact_pipelined_kernel, min(tiles, sol._pipe_blocks())

        def go(kernel=kernel, grid=grid, threads=threads, status=status, counter=counter, out=out):
            launch.zero(status, counter)
            kernel[grid, threads](dx, t, status, counter, out)

        def right(counter=counter, out=out) -> bool:
            kept = int(counter[1].get())
            return kept == ref.shape[0] and bool(np.array_equal(out[:kept].get(), ref))

        row = {"version": version, "shape": f"{threads}x{items}", "us": kernel_us(go), "ok": right()}
        if version == "direct" and (threads, items) in oracle_shapes:
            words = cupy.asarray(status_prefilled(sol, x, t, tile, tiles))
            scratch = cupy.empty_like(words)

            def prefill(scratch=scratch, words=words):
                cupy.copyto(scratch, words)

            def go_oracle(kernel=kernel, grid=grid, threads=threads, counter=counter, out=out, scratch=scratch):
                prefill()
                launch.zero(counter)
                kernel[grid, threads](dx, t, scratch, counter, out)

            row["oracle_us"] = kernel_us(go_oracle) - kernel_us(prefill)
            row["oracle_ok"] = right()
        rows.append(row)
        print(f"  {version} {threads}x{items}: {row['us']:.1f} us" +
              (f", oracle {row['oracle_us']:.1f} us" if "oracle_us" in row else ""), flush=True)
    return rows


def host_pieces(sol, x, t) -> dict:
    """The direct host function's pieces at one tile, µs each (see the module docstring, e)."""
    import cupy
    import numpy as np

    from course import launch

    small = cupy.asarray(x[:4096])
    t32 = np.float32(t)
    host = {}
    with launch.no_poison():
        for _ in range(50):
            sol.direct(small, t)
        host["whole call"] = wall_us(lambda: sol.direct(small, t), 1000)
        host["input checks"] = wall_us(lambda: sol._check(small, t), 2000)
        host["output from the pool"] = wall_us(lambda: launch.pooled_empty((4096,), np.float32), 2000)
        out = launch.pooled_empty((4096,), np.float32)
        host["the plan"] = wall_us(lambda: sol._one_pass("direct", small, t32, out), 2000)
        steps, (words, shift, index) = sol._one_pass("direct", small, t32, out)
        (clear, clear_args), (launch_step, launch_args) = steps
        host["the memsets"] = wall_us(lambda: clear(*clear_args), 500)
        host["the prepared launch"] = wall_us(lambda: launch_step(*launch_args), 200)
        host["the read-back"] = wall_us(lambda: sol._kept(words, shift, index), 500)
        one = cupy.zeros(1, np.int32)
        host["a 4-byte cupy .get()"] = wall_us(one.get, 500)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()

        def gpu_side() -> float:
            start.record()
            for step, args in steps:
                step(*args)
            stop.record()
            stop.synchronize()
            return cupy.cuda.get_elapsed_time(start, stop) * 1e3

        gpu_side()
        host["GPU: the memsets and a one-tile kernel"] = float(np.median([gpu_side() for _ in range(200)]))
        d_x = cupy.asarray(x)
        for _ in range(3):
            sol.direct(d_x, t)
        host[f"whole call at {x.shape[0]}"] = wall_us(lambda: sol.direct(d_x, t), 20)
    return host


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--direct", type=parse_shapes, default=parse_shapes("128x32,256x16,64x32,128x48,128x64"),
                   help="v5's shapes, THREADSxITEMS,... (default %(default)s)")
    p.add_argument("--oracle", type=parse_shapes, default=parse_shapes("128x32,256x16"),
                   help="shapes of --direct also run as the oracle (default %(default)s)")
    p.add_argument("--pipelined", type=parse_shapes, default=parse_shapes("256x16,128x16"),
                   help="v6's shapes (PIPE_THREADS x PIPE_ITEMS)")
    p.add_argument("--json", type=Path, help="also write every row here")
    args = p.parse_args(argv)
    unknown = [f"{t}x{i}" for t, i in args.oracle if (t, i) not in args.direct]
    if unknown:
        p.error(f"--oracle {','.join(unknown)}: each oracle shape must also be one of --direct")
    if not course.ON_GPU:
        print("compaction_bound times kernels with CUDA events: it needs a CUDA GPU")
        return 2
    from course import bench, days

    sol = days.load_solution(31)
    x, t = sol.make_inputs(N, seed=SEED)
    ref = sol.reference(x, t)
    minimum = 4 * x.shape[0] + 4 * ref.shape[0]
    timer = bench.Timer()
    result = {"device": course.DEVICE.describe(), "n": N, "kept": int(ref.shape[0]), "minimum_bytes": minimum}
    result["copy_gbps"] = copy = bench.copy_peak_gbps(timer, 1 << 30)
    mix_us = mix_2_to_1_us(N // 2)
    result["mix_2_to_1"] = {"us": mix_us, "pct_copy": 100 * 12 * (N // 2) / (mix_us * 1e3) / copy}
    print(f"copy {copy:.0f} GB/s; cupy.add at 2 reads : 1 write {mix_us:.1f} us "
          f"({result['mix_2_to_1']['pct_copy']:.1f} % of copy)", flush=True)
    rows = one_pass_rows(x, t, ref, "direct", args.direct, set(args.oracle))
    rows += one_pass_rows(x, t, ref, "pipelined", args.pipelined, set())
    for row in rows:
        row["pct_copy"] = 100 * minimum / (row["us"] * 1e3) / copy
        if "oracle_us" in row:
            row["oracle_pct_copy"] = 100 * minimum / (row["oracle_us"] * 1e3) / copy
    result["kernels"] = rows
    result["host_us"] = host_pieces(sol, x, t)
    print(f"\n{'version':10s} {'shape':7s} {'kernel us':>10s} {'% copy':>7s} {'oracle us':>10s} {'% copy':>7s}  check")
    for row in rows:
        oracle = (f"{row['oracle_us']:10.1f} {row['oracle_pct_copy']:7.1f}" if "oracle_us" in row else " " * 18)
        ok = row["ok"] and row.get("oracle_ok", True)
        print(f"{row['version']:10s} {row['shape']:7s} {row['us']:10.1f} {row['pct_copy']:7.1f} {oracle}  "
              f"{'ok' if ok else 'WRONG'}")
    print("\nthe direct call's host pieces (µs):")
    for name, us in result["host_us"].items():
        print(f"  {name}: {us:.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if all(r["ok"] and r.get("oracle_ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
