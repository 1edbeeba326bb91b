"""Day 49 grader: a dependent pointer chase, one walker per thread vs CHAINS walkers per thread."""

import math
import re

import numpy as np
import pytest

from course import ON_GPU, cuda
from course.grading import Grader

g = Grader(49)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    n=(257, 2),
    extra_cases={
        "nxt-2d": lambda xs: (xs[0].reshape(3, -1), xs[1], xs[2]),
        "index-past-the-end": lambda xs: (np.where(np.arange(xs[0].size) == 7, xs[0].size, xs[0]).astype(np.int32),
                                          xs[1], xs[2]),
        "negative-index": lambda xs: (np.where(np.arange(xs[0].size) == 3, -1, xs[0]).astype(np.int32), xs[1], xs[2]),
        "more-walkers-than-entries": lambda xs: (xs[0], xs[0].size + 1, xs[2]),
        "no-walkers": lambda xs: (xs[0], 0, xs[2]),
        "no-steps": lambda xs: (xs[0], xs[1], 0),
        "float-steps": lambda xs: (xs[0], xs[1], 2.0),
    },
)


def test_several_grid_stride_rounds():
    """More walkers than one round of the optimized grid holds (8 blocks x 256 threads x CHAINS in the
    simulator), and a ragged last round: every walker written once, from its own chain."""
    walkers = 8 * sol.THREADS * sol.CHAINS * 2 + 1021
    g.run_and_compare("optimized", (walkers, 2), parts=("rounds",))


_LOAD = re.compile(r"^ld\.(?!shared|const|local|param)\S*\s+(%\w+),\s*\[([^\]]+)\]")
_BLOCK_END = re.compile(r"^(?:\$\w+:|(?:@!?%\w+\s+)?(?:bra|ret))")
_REG = re.compile(r"%\w+")


def independent_loads(ptx: str) -> int:
    """The most global loads in one straight-line block of PTX whose address does not depend on
    another load of the same block: the loads one thread can have in flight at once.

    `p = nxt[p]` unrolled four times is four loads, each waiting for the one before: 1. Eight chains
    advanced one step in the same block: 8. Registers are followed through every instruction of the
    block (a value computed from a loaded value depends on that load)."""
    best = 0
    tainted: set[str] = set()
    count = 0
    for line in ptx.splitlines() + ["ret;"]:
        line = line.split("//")[0].strip().rstrip(";")
        if not line or line.startswith(("{", "}", ".")):
            continue
        if _BLOCK_END.match(line):
            best, tainted, count = max(best, count), set(), 0
            continue
        body = re.sub(r"^@!?%\w+\s+", "", line)
        m = _LOAD.match(body)
        if m:
            dst, address = m.groups()
            if not any(r in tainted for r in _REG.findall(address)):
                count += 1
            tainted.add(dst)
            continue
        regs = _REG.findall(body)
        if regs and not body.startswith("st."):
            dst, srcs = regs[0], regs[1:]
            if any(r in tainted for r in srcs):
                tainted.add(dst)
            else:
                tainted.discard(dst)
    return best


def test_optimized_keeps_several_loads_in_flight():
    """The day's idea in the compiler's output: the optimized kernel issues several loads that do not
    wait for each other (one per chain); the naive kernel's loads each wait for the one before."""
    naive, opt = g.report("naive"), g.report("optimized")
    ind_naive, ind_opt = independent_loads(naive.ptx), independent_loads(opt.ptx)
    assert ind_naive == 1, f"naive: expected one dependent chain of loads, found {ind_naive} independent loads"
    assert ind_opt >= 4, (
        f"optimized: at most {ind_opt} independent load(s) in any block of the PTX: advance every chain "
        "one step inside the step loop (chains in the inner loop, steps in the outer one)")
    assert opt.loads_in_flight > naive.loads_in_flight, (
        f"optimized: {opt.loads_in_flight} loads between stores, not more than naive's {naive.loads_in_flight}")
    assert not opt.uses_local_memory, (
        f"optimized: {opt.stack_bytes} bytes of stack: index the chains only with unrolled constants")


def test_latency_kernel_is_one_dependent_chain():
    rep = g.report("measure_latency")
    assert independent_loads(rep.ptx) == 1, "the latency chase must be one dependent chain"
    assert not rep.uses_local_memory


def test_every_step_is_a_coalesced_line():
    """Both versions read one line per warp a step (4 sectors of 32 bytes for 32 int32; 5 where a row
    does not start on a line): the same traffic. What differs is only how much is in flight."""
    naive, opt = g.traffic("naive", (1021, 3)), g.traffic("optimized", (1021, 3))
    for name, t in (("naive", naive), ("optimized", opt)):
        assert 0 < t.sectors_per_load <= 5.5, (
            f"{name}: {t.sectors_per_load:.1f} sectors per load request: the lanes of a warp must walk "
            "consecutive walkers (chain j of thread t: walker first + j * gridsize)")


def test_latency_kernel_follows_the_ring():
    """The one-thread chase of measure_latency, on a small ring, in the simulator or on the GPU."""
    g.require_implemented("measure_latency")
    ring, order = sol.make_ring(64 * 128, seed=3)
    loads = 100
    out = cuda.device_array(1, dtype=np.uint32)
    g.target.latency_kernel[1, 1](cuda.to_device(ring), np.uint32(order[0] * sol.LINE), loads, out)
    assert int(out.copy_to_host()[0]) == order[loads % order.size] * sol.LINE


@pytest.mark.skipif(ON_GPU, reason="on a GPU measure_latency runs (test_latency_ladder_rises)")
def test_measure_latency_needs_a_gpu():
    g.require_implemented("measure_latency")
    with pytest.raises(RuntimeError, match="GPU"):
        g.target.measure_latency(1 << 20)


@pytest.mark.gpu
def test_optimized_at_a_large_awkward_size():
    g.run_and_compare("optimized", ((1 << 20) + 7, 9))


@pytest.mark.gpu
def test_latency_ladder_rises():
    """L1 hits (8 KB) before L2 hits (4 MB) before HBM (1 GB), all finite and positive."""
    g.require_implemented("measure_latency")
    (_, l1), (_, l2), (_, hbm) = g.target.latency_ladder((8 << 10, 4 << 20, 1 << 30), steps=1 << 12)
    assert all(math.isfinite(v) and v > 0 for v in (l1, l2, hbm)), (l1, l2, hbm)
    assert l1 < l2 < hbm, f"latency per load: 8 KB {l1:.0f} ns, 4 MB {l2:.0f} ns, 1 GB {hbm:.0f} ns"


@pytest.mark.gpu
def test_bandwidth_vs_in_flight_runs():
    g.require_implemented("optimized")
    rows = g.target.bandwidth_vs_in_flight(chains=(1, 8), blocks_per_sm=(2,), n=(1 << 18, 8))
    assert len(rows) == 2 and all(r["gbps"] > 0 for r in rows), rows
