"""Compare the simulator's traffic counts (course.traffic) with Nsight Compute's on a GPU.

    python tools/traffic_vs_ncu.py 2 5 8          # on a GPU machine with ncu on the PATH

For each day, every version runs once at the largest test size on the same inputs: in the simulator
(a subprocess with COURSE_DEVICE=sim) and on the GPU under ``ncu``, which reads the hardware's
l1tex request, sector and shared-wavefront counters. Prints one row per kernel with both counts.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METRICS = {
    "global_load_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_store_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "shared_load_requests": "smsp__inst_executed_op_shared_ld.sum",
    "shared_store_requests": "smsp__inst_executed_op_shared_st.sum",
    "shared_load_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_store_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}


def run_versions(day: int) -> None:
    """Launch every version of the day once at its largest test size (the child of both runs)."""
    sys.path.insert(0, str(ROOT))
    from course import days, traffic

    sol = days.load_solution(day)
    n = sol.TEST_SIZES[-1]
    inputs = sol.make_inputs(n, seed=0)
    if os.environ.get("COURSE_DEVICE") == "sim":
        out = {}
        for m in traffic.measure_day(sol, sol, n):
            for k in m.kernels:
                out[k.name] = {f: getattr(k, f) for f in ("launches", "global_load_requests", "global_load_sectors",
                                                          "global_store_requests", "global_store_sectors",
                                                          "shared_requests", "shared_wavefronts")}
        print("TRAFFIC " + json.dumps(out))
    else:
        for version in days.versions(sol):
            getattr(sol, version)(*inputs)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--child":
        run_versions(int(argv[1]))
        return 0
    failed = 0
    for day in [int(a) for a in argv]:
        child = [sys.executable, __file__, "--child", str(day)]
        sim = subprocess.run(child, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, COURSE_DEVICE="sim"))
        line = next((ln for ln in sim.stdout.splitlines() if ln.startswith("TRAFFIC ")), None)
        if line is None:
            print(f"day {day:02d}: the simulator run failed\n{sim.stderr[-2000:]}")
            failed += 1
            continue
        counted = json.loads(line[len("TRAFFIC "):])
        prof = subprocess.run(["ncu", "--csv", "--metrics", ",".join(METRICS.values()), *child],
                              capture_output=True, text=True, cwd=ROOT)
        rows = [r for r in csv.DictReader(io.StringIO("\n".join(
            ln for ln in prof.stdout.splitlines() if ln.startswith('"')))) if r.get("Metric Name")]
        if not rows:
            print(f"day {day:02d}: ncu gave no counters (rc {prof.returncode})\n{(prof.stdout + prof.stderr)[-2000:]}")
            failed += 1
            continue
        hw: dict[str, dict[str, float]] = {}
        for r in rows:
            name = next((k for k in counted if k in r["Kernel Name"]), r["Kernel Name"][:40])
            key = next(f for f, m in METRICS.items() if m == r["Metric Name"])
            value = float(r["Metric Value"].replace(",", "") or 0)
            hw.setdefault(name, {}).setdefault(key, 0.0)
            hw[name][key] += value
        for name, sim_k in counted.items():
            h = hw.get(name, {})
            shared_req = h.get("shared_load_requests", 0) + h.get("shared_store_requests", 0)
            shared_wf = h.get("shared_load_wavefronts", 0) + h.get("shared_store_wavefronts", 0)
            print(f"day {day:02d} {name}: "
                  f"ld req {sim_k['global_load_requests']} / {h.get('global_load_requests', 0):.0f}, "
                  f"ld sectors {sim_k['global_load_sectors']} / {h.get('global_load_sectors', 0):.0f}, "
                  f"st req {sim_k['global_store_requests']} / {h.get('global_store_requests', 0):.0f}, "
                  f"st sectors {sim_k['global_store_sectors']} / {h.get('global_store_sectors', 0):.0f}, "
                  f"shared req {sim_k['shared_requests']} / {shared_req:.0f}, "
                  f"wavefronts {sim_k['shared_wavefronts']} / {shared_wf:.0f}   (simulator / ncu)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
