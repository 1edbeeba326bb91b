"""Day 50's pipeline replayed as one CUDA graph, with and without tapered ends (GPU only).

The lesson's pipeline issues three Numba calls a chunk from Python, 100-300 us each, so the host is
barely ahead of the copy engines and more, smaller chunks cost more than they save. Captured once into
a CUDA graph (the day's `capture`: CuPy stream capture, the chunks' streams forked from the capturing
stream and joined back to it by events), the whole pipeline is one launch: the host's cost a chunk goes to zero, and the
schedule alone decides the time. This script times, on one set of page-locked buffers:

  upload, download, both at once (the duplex bound), the Numba-issued pipeline (plan made once), and
  the graph of the same plan at several chunk counts, with the first and last chunk cut into halving
  pieces (the day's `tapered`, `taper` cuts at each end) so that the fill (the first upload alone) and
  the drain (the last kernel and download alone) shrink without adding host work.

Every timed result is checked against day 50's reference. Writes JSON with --json; exits 2 without a
GPU.
"""

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from course import ON_GPU  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 26)
    p.add_argument("--iters", type=int, default=128)
    p.add_argument("--chunks", default="16,24,32,48")
    p.add_argument("--taper", default="0,2,3")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    if not ON_GPU:
        print("day50_graph needs a CUDA GPU", file=sys.stderr)
        return 2

    from course import cuda
    from solutions import day50_streams_overlap as d

    x = d.make_inputs(a.n)[0]
    want = d.reference(x, a.iters)
    rows = {}
    with d._buffers(x) as (h_in, h_out, d_x, d_out, _):
        cps, streams = d.graph_streams()
        up, down = streams[0], streams[1]
        base = {
            "upload_ms": d._event_ms(lambda: d_x.copy_to_device(h_in), a.repeats),
            "download_ms": d._event_ms(lambda: d_out.copy_to_host(h_out), a.repeats),
            "kernel_ms": d._event_ms(lambda: d.horner_kernel[d._grid(a.n), d.THREADS](d_x, d_out, 0, a.n, a.iters),
                                     a.repeats),
        }

        def duplex():
            cuda.synchronize()
            d_x.copy_to_device(h_in, stream=up)
            d_out.copy_to_host(h_out, stream=down)
            up.synchronize()
            down.synchronize()

        # streams here are non-blocking (the legacy stream's events do not bracket them): time on the host
        import time

        def host_ms(fn):
            fn()
            cuda.synchronize()
            s = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                fn()
                cuda.synchronize()
                s.append(1e3 * (time.perf_counter() - t0))
            return float(np.median(s))

        base["duplex_ms"] = host_ms(duplex)
        print("base", {k: round(v, 3) for k, v in base.items()}, flush=True)
        for chunks in (int(c) for c in a.chunks.split(",")):
            for taper in (int(t) for t in a.taper.split(",")):
                bounds = d.tapered(d.chunk_bounds(a.n, chunks), taper)
                assert bounds[0][0] == 0 and bounds[-1][1] == a.n
                assert all(b[1] == c[0] for b, c in zip(bounds, bounds[1:]))
                steps = d.plan(h_in, h_out, d_x, d_out, streams, bounds=bounds)
                row = {"pieces": len(bounds)}
                # Numba-issued, plan made once
                h_out[:] = np.nan
                row["issued_ms"] = host_ms(lambda steps=steps: d.issue(steps, d_x, d_out, a.iters))
                d._verify(h_out, want, f"issued {chunks}+{taper}")
                # one graph of the same steps
                graph = d.capture(steps, d_x, d_out, a.iters, cps)
                origin = cps[0]
                h_out[:] = np.nan
                row["graph_ms"] = host_ms(lambda graph=graph, origin=origin: graph.launch(stream=origin))
                d._verify(h_out, want, f"graph {chunks}+{taper}")
                t0 = time.perf_counter()
                graph.launch(stream=origin)
                row["graph_launch_us"] = 1e6 * (time.perf_counter() - t0)
                origin.synchronize()
                longest = max(base["upload_ms"], base["download_ms"], base["kernel_ms"])
                bound = max(longest, base["duplex_ms"])
                for k in ("issued_ms", "graph_ms"):
                    row[k.replace("_ms", "_over_longest")] = row[k] / longest
                    row[k.replace("_ms", "_over_bound")] = row[k] / bound
                rows[f"{chunks}+{taper}"] = row
                print(chunks, taper, {k: round(v, 3) for k, v in row.items()}, flush=True)
        out = {"base": base, "rows": rows, "n": a.n, "iters": a.iters, "streams": d.STREAMS}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
