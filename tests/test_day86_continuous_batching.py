"""Day 86 grader: the schedulers (static and continuous) against a model of the trace, and whole traces
served through move_rows + day 78's PagedAttention, checked token by token against each request alone."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.grading import Grader

g = Grader(86)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = 5e-4  # float32 softmax over at most a few dozen tokens; a missing or wrong row is off by far more

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "kv-rows-one-short": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:, :-1])),
        "kv-rows-not-a-pair": lambda xs: _replace(xs, 1, np.ascontiguousarray(xs[1][:1])),
        "queries-one-short": lambda xs: _replace(xs, 0, np.ascontiguousarray(xs[0][:-1])),
        "output-len-zero": lambda xs: _replace(xs, 3, np.where(np.arange(len(xs[3])) == 0, 0, xs[3]).astype(np.int32)),
        "lens-differ-in-length": lambda xs: _replace(xs, 3, np.ascontiguousarray(xs[3][:-1])),
        "request-longer-than-budget": lambda xs: _replace(xs, 5, 1),
        "max-batch-zero": lambda xs: _replace(xs, 7, 0),
        "block-size-float": lambda xs: _replace(xs, 6, float(xs[6])),
        "scale-not-finite": lambda xs: _replace(xs, 4, float("inf")),
    },
)


# --- the schedulers against a model -------------------------------------------------------------------


def run_checked(cls, prompts, outputs, num_blocks, block_size, max_batch):
    """Run a scheduler to the end, checking every step against what the trace allows; returns the steps
    (rows of each batch) and the stats."""
    s = cls(prompts, outputs, num_blocks, block_size, max_batch)
    written = {}  # request -> {token: slot} for the tokens it currently holds
    produced = [[] for _ in prompts]
    batches = []
    for _ in range(10_000):
        if s.finished():
            break
        batch = s.schedule()
        bm = s.manager
        assert 0 < len(batch.rids) <= max_batch, f"a batch of {len(batch.rids)} rows (max_batch {max_batch})"
        assert len(set(batch.rids)) == len(batch.rids), "a request twice in one batch"
        for rid in list(written):
            if rid not in batch.rids:
                written.pop(rid)  # retired or preempted: its pages are gone, its rows must be rewritten
        for rid, t, slot in batch.writes:
            written.setdefault(rid, {})[t] = slot
        for rid, j in zip(batch.rids, batch.steps):
            if j < 0:
                continue
            assert j == len(produced[rid]), f"request {rid}: output {j} computed after {len(produced[rid])}"
            ctx = prompts[rid] + j + 1
            assert bm.num_tokens(rid) == ctx, f"request {rid}, output {j}: {bm.num_tokens(rid)} tokens, expected {ctx}"
            slots = bm.slot_mapping(rid)
            have = written.get(rid, {})
            missing = [t for t in range(ctx) if have.get(t) != slots[t]]
            assert not missing, f"request {rid}, output {j}: tokens {missing[:5]} not written to their slots"
            produced[rid].append(j)
        used = bm.num_blocks - bm.num_free_blocks
        assert used <= num_blocks
        batches.append(batch)
        s.complete(batch)
    assert s.finished(), "the scheduler did not finish the trace"
    assert [len(p) for p in produced] == list(outputs), "not every request got each of its outputs once"
    assert s.manager.num_free_blocks == num_blocks, "pages still held after every request finished (a leak)"
    return batches, s.stats()


TRACE = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 9), min_size=n, max_size=n), st.lists(st.integers(1, 7), min_size=n, max_size=n),
    st.integers(1, 4), st.integers(1, 4), st.integers(0, 6)))


@settings(max_examples=120, deadline=None)
@given(trace=TRACE)
def test_schedulers_serve_every_token(trace):
    """Random traces and budgets (from 'the longest request barely fits' up): every output computed once,
    in order, over exactly its context's rows, within max_batch and the page budget; no page leaks."""
    prompts, outputs, block_size, max_batch, spare = trace
    num_blocks = max(-(-(p + o) // block_size) for p, o in zip(prompts, outputs)) + spare
    _, cont = run_checked(M.Scheduler, prompts, outputs, num_blocks, block_size, max_batch)
    assert cont["useful_rows"] == cont["launched_rows"] == sum(outputs), "continuous: a padded or repeated row"
    run_checked(M.StaticScheduler, prompts, outputs, num_blocks, block_size, max_batch)


def test_retires_and_admits_in_the_same_step():
    """Three requests, two slots, pages to spare: request 0 finishes after one step, so request 2 takes
    its slot at step 2 instead of waiting for request 1's six steps."""
    prompts, outputs = [4, 4, 4], [1, 6, 1]
    static, s_stats = run_checked(M.StaticScheduler, prompts, outputs, 32, 4, 2)
    cont, c_stats = run_checked(M.Scheduler, prompts, outputs, 32, 4, 2)
    assert [b.rids for b in cont[:2]] == [[0, 1], [1, 2]], "continuous: request 0 retires, request 2 joins"
    assert c_stats["steps"] == 6 and c_stats["useful_rows"] == c_stats["launched_rows"] == 8
    assert [b.rids for b in static[:2]] == [[0, 1], [0, 1]] and static[1].steps == [-1, 1], \
        "static: a finished request keeps its (padded) row until the batch's longest is done"
    assert s_stats["steps"] == 7 and s_stats["launched_rows"] == 13


def test_preempts_instead_of_failing():
    """A budget the admitted requests outgrow: the newest is preempted, recomputed later, and every
    output still comes out once and in order."""
    _, stats = run_checked(M.Scheduler, [3, 3, 3], [6, 6, 6], 6, 2, 3)
    assert stats["preemptions"] > 0, "this trace cannot finish without preempting (6 pages, three requests of 9 tokens)"


def test_continuous_beats_static_on_the_bench_trace():
    """The trace make bench serves: fewer steps, every launched row live, no static padding."""
    g.require_implemented("optimized")
    report = M.schedule_report(sol.BENCH_SIZES[0], seed=1)
    static, cont = report["StaticScheduler"], report["Scheduler"]
    assert cont["row_utilization"] == 1.0 and static["row_utilization"] < 0.8
    assert cont["steps"] < 0.8 * static["steps"], f"continuous {cont['steps']} steps vs static {static['steps']}"


def test_move_rows_moves_words_and_attention_is_day78():
    """move_rows: 8-byte word loads, no shared or local memory; attention: day 78's warp kernel."""
    for version in sol.VERSIONS:
        move, attn = g.report(f"{version}.move_rows"), g.report(f"{version}.attention")
        assert re.search(r"^\s*ld\.(?:global\.)?[ub]64\s", move.ptx, flags=re.M), "move_rows: no 64-bit word loads"
        assert move.count("ld.shared") == move.count("bar.sync") == 0 and move.stack_bytes == 0
        assert attn.count("shfl.sync") > 0 and attn.stack_bytes == 0, "attention: expected day 78's kernel"


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version):
    """48 requests, prompts up to 300, head_dim 128, GQA 4:1, a budget that forces preemption."""
    g.run_and_compare(version, Config(48, 8, 2, 128, 16, 300, 64, 60, 16, "float16"), rtol=RTOL)
