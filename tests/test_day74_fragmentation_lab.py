"""Day 74 grader: the fragmentation lab (host) and appending tokens to a contiguous cache (kernel)."""

import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(74)
L = g.target  # the module under test: its lab functions are graded directly

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "append-past-reservation": lambda xs: (xs[0], xs[1], np.full_like(xs[2], xs[1].shape[2])),
        "negative-length": lambda xs: (xs[0], xs[1], np.full_like(xs[2], -1)),
        "lens-for-fewer-seqs": lambda xs: (xs[0], xs[1], xs[2][:-1].copy()),
        "new-tokens-other-head-dim": lambda xs: (xs[0][..., :-1].copy(), xs[1], xs[2]),
        "new-tokens-float32-cache-float16": lambda xs: (xs[0].astype(np.float32), xs[1], xs[2]),
    }
)


def test_naive_strides_optimized_moves_words():
    """The naive kernel copies 2-byte elements a head apart per lane; the optimized one 8-byte words."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", opt.ptx, flags=re.M), "optimized: no 64-bit word loads"
    assert re.search(r"^\s*ld\.(?:global\.)?[ubf]16\s", naive.ptx, flags=re.M), "naive: expected 16-bit loads"
    for rep in (naive, opt):
        assert not rep.uses_local_memory and rep.count("ld.shared") == 0


# --- the lab -------------------------------------------------------------------------------------------

def test_first_fit_and_release():
    free = [[0, 10]]
    assert L.first_fit(free, 4) == 0 and L.first_fit(free, 4) == 4
    assert L.first_fit(free, 4) is None  # 2 slots left in one hole
    free = L.release(free, 0, 4)  # a hole at 0..3 and one at 8..9: not adjacent
    assert [s for s in free if s[1]] == [[0, 4], [8, 2]]
    assert L.first_fit(free, 5) is None  # 6 free slots, no hole of 5: external fragmentation
    free = L.release(free, 4, 4)
    assert [s for s in free if s[1]] == [[0, 10]], "adjacent holes must merge"


def test_one_request_by_hand():
    """prompt 3, output 2, max_len 8, pages of 4, 12 slots: two steps, computed by hand."""
    trace = [L.Request(0, 3, 2)]
    r = L.simulate(trace, "max", capacity=12, max_len=8, block_size=4)
    # step 0: 3 held, 2 still to come, 3 never used (8 - 5); step 1: 4 held, 1 to come, 3 unused
    assert r["useful"] == pytest.approx(7 / 24) and r["reserved"] == pytest.approx(3 / 24)
    assert r["internal"] == pytest.approx(6 / 24) and r["free"] == pytest.approx(8 / 24)
    assert r["useful_of_used"] == pytest.approx(7 / 16) and r["steps"] == 2
    r = L.simulate(trace, "paged", capacity=12, max_len=8, block_size=4)
    # step 0: one page, 3 held, 1 empty slot; step 1: 4 held in one full page
    assert r["useful"] == pytest.approx(7 / 24) and r["internal"] == pytest.approx(1 / 24)
    assert r["useful_of_used"] == pytest.approx(7 / 8)


def test_external_fragmentation_is_counted():
    """Oracle reservations of 4 at 0, 4 and 8 in 12 slots. The outer two finish after one step: 8 slots
    free, but in two holes of 4, and the request of 6 that arrives at step 1 must wait for the middle."""
    trace = [L.Request(0, 3, 1), L.Request(0, 1, 3), L.Request(0, 3, 1), L.Request(1, 5, 1)]
    r = L.simulate(trace, "oracle", capacity=12, max_len=6, block_size=2)
    # step 0: A, B, C admitted; A and C finish. Steps 1, 2: B alone, D waits in front of two holes of 4.
    # Step 3: B has finished, the holes merged, D runs. Four steps in all.
    assert r["steps"] == 4
    assert r["external"] == pytest.approx((8 + 8) / 12 / 4)
    shares = [r[k] for k in ("useful", "reserved", "internal", "external", "free")]
    assert min(shares) >= 0 and sum(shares) == pytest.approx(1.0)


def test_shares_add_up_and_everything_finishes():
    trace = L.make_trace(150, seed=2, max_len=512, mean_prompt=60, mean_output=120, arrivals_per_step=1.0)
    for policy in ("max", "oracle", "paged"):
        r = L.simulate(trace, policy, capacity=3000, max_len=512, block_size=16)
        shares = [r[k] for k in ("useful", "reserved", "internal", "external", "free")]
        assert min(shares) >= -1e-12 and sum(shares) == pytest.approx(1.0), policy
        assert r["steps"] >= max(t.arrival for t in trace), policy


def test_paging_wastes_little_and_contiguous_much():
    """On ShareGPT-like lengths: reserving max_len keeps under half of the used memory useful;
    pages waste under 4 % of it (only each sequence's last page is partly empty)."""
    trace = L.make_trace(400, seed=0)
    worst = L.simulate(trace, "max", capacity=30_000)
    paged = L.simulate(trace, "paged", capacity=30_000)
    assert worst["useful_of_used"] < 0.5
    assert paged["useful_of_used"] > 0.96
    assert paged["steps"] < worst["steps"], "more sequences fit, so the trace finishes sooner"


def test_preemption_keeps_the_pool_consistent():
    """A tiny pool forces preemptions; every request still finishes and the shares still add up."""
    trace = L.make_trace(60, seed=4, max_len=256, mean_prompt=40, mean_output=150, arrivals_per_step=4.0)
    r = L.simulate(trace, "paged", capacity=512, max_len=256, block_size=16)
    assert r["preemptions"] > 0
    shares = [r[k] for k in ("useful", "reserved", "internal", "external", "free")]
    assert min(shares) >= -1e-12 and sum(shares) == pytest.approx(1.0)
    # Reserving max_len never preempts: it admits only what it can finish, two requests at a time.
    assert L.simulate(trace, "max", capacity=512, max_len=256, block_size=16)["preemptions"] == 0


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0])
