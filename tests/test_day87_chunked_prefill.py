"""Day 87 grader: the chunked scheduler against a model of the trace (decodes never stall, no step past
the token budget, every token computed once and in order), and the paged causal prefill kernels on
mixed steps, checked against a float64 reference and against an unchunked prefill of the same prompt.

Inputs come from the solution's make_inputs: random non-contiguous pages whose unowned slots are NaN,
garbage in unused block-table entries, and chunks whose later tokens' K/V are already in the cache, so
a causal mask that lets a token see one position too far or too short misses by far more than RTOL.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import checking
from course.grading import Grader

g = Grader(87)
M = g.target
sol = g.solution
Config = sol.Config
RTOL = sol.RTOL

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


def _edit(xs, i, fn):
    a = xs[i].copy()
    fn(a)
    return _replace(xs, i, a)


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[1],
    extra_cases={
        "more-new-tokens-than-context": lambda xs: _edit(xs, 5, lambda c: c.__setitem__(0, 3)),
        "query-start-not-at-zero": lambda xs: _edit(xs, 4, lambda q: q.__setitem__(0, 1)),
        "query-start-past-rows": lambda xs: _edit(xs, 4, lambda q: q.__setitem__(-1, q[-1] + 1)),
        "zero-new-tokens": lambda xs: _edit(xs, 4, lambda q: q.__setitem__(2, q[1])),
        "context-past-table": lambda xs: _edit(xs, 5, lambda c: c.__setitem__(0, xs[3].shape[1] * xs[1].shape[1] + 1)),
        "block-id-negative": lambda xs: _edit(xs, 3, lambda t: t.__setitem__((0, 0), -1)),
        "block-id-past-cache": lambda xs: _edit(xs, 3, lambda t: t.__setitem__((0, 0), xs[1].shape[0])),
        "query-start-wrong-length": lambda xs: _replace(xs, 4, np.ascontiguousarray(xs[4][:-1])),
        "heads-not-a-multiple": lambda xs: _replace(xs, 0, np.ascontiguousarray(
            np.concatenate([xs[0], xs[0][:, :1]], axis=1))),
        "head-dim-mismatch": lambda xs: _replace(xs, 0, np.ascontiguousarray(xs[0][:, :, :16])),
        "value-dtype-differs": lambda xs: _replace(xs, 2, xs[2].astype(np.float32)),  # the keys are float16
        "scale-not-finite": lambda xs: _replace(xs, 6, float("nan")),
    },
)


# --- the kernels --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_chunks_equal_one_shot_prefill(version):
    """A 21-token prompt prefilled as chunks of 16 and 5 (the second step sees the first chunk's K/V
    in the cache) gives exactly the outputs of prefilling it whole: chunking changes no number."""
    g.require_implemented(version)
    cfg = Config(1, 2, 1, 32, 8, 21, 21, "float32")
    xs, seed = g.inputs(cfg, version, "one-shot")
    query, kc, vc, tables, _, ctx, scale = xs
    assert int(ctx[0]) == 21 and query.shape[0] == 21
    fn = getattr(M, version)
    parts = []
    for start, n in ((0, 16), (16, 5)):
        q = np.ascontiguousarray(query[start:start + n])
        parts.append(fn(q, kc, vc, tables, np.array([0, n], np.int32), np.array([start + n], np.int32), scale))
    checking.assert_matches(np.concatenate(parts), sol.reference(*xs), rtol=RTOL,
                            name=f"{version}: chunks 16 + 5 vs one shot (seed {seed})")


def test_naive_reads_global_optimized_stages_shared():
    """naive: warp shuffles and no shared memory; optimized: K/V staged with st.shared, read with
    ld.shared between bar.sync barriers. Neither spills to local memory."""
    naive, opt = g.report("naive"), g.report("optimized")
    assert naive.count("shfl.sync") > 0, "naive: expected a shfl_xor dot product per key"
    assert naive.count("ld.shared") == naive.count("st.shared") == naive.count("bar.sync") == 0
    assert opt.count("st.shared") > 0 and opt.count("ld.shared") > 0, "optimized: K/V not staged in shared"
    assert opt.count("bar.sync") > 0, "optimized: no barrier between staging and use"
    for label, rep in (("naive", naive), ("optimized", opt)):
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"


# --- the schedulers against a model -------------------------------------------------------------------


def run_checked(cls, prompts, outputs, budget, num_blocks, block_size, max_batch):
    """Run a scheduler to the end, checking each step against the trace; returns (steps, stats)."""
    s = cls(prompts, outputs, budget, num_blocks, block_size, max_batch)
    done = [0] * len(prompts)  # tokens computed per request
    produced = [0] * len(prompts)
    steps = []
    for _ in range(10_000):
        if s.finished():
            break
        decoding = [r for r in s.running if done[r] >= prompts[r]]
        step = s.schedule()
        assert step.rids, "an empty step with requests waiting"
        assert len(set(step.rids)) == len(step.rids) <= max_batch, f"rows {step.rids} (max_batch {max_batch})"
        for rid, start, n, out in zip(step.rids, step.starts, step.q_lens, step.outputs):
            assert start == done[rid] and n >= 1, f"request {rid}: tokens {start}.. after {done[rid]} computed"
            end = start + n
            assert end <= prompts[rid] + outputs[rid] - 1, f"request {rid}: computes past its last token"
            assert start >= prompts[rid] or end <= prompts[rid], f"request {rid}: a chunk runs into decoding"
            if start >= prompts[rid]:
                assert n == 1, f"request {rid}: {n} decode tokens in one step"
            want = end - prompts[rid] if end >= prompts[rid] else -1
            assert out == want, f"request {rid}: row yields output {out}, expected {want}"
            if out >= 0:
                assert out == produced[rid], f"request {rid}: output {out} after {produced[rid]}"
                produced[rid] += 1
            done[rid] = end
        steps.append((step, decoding))
        assert s.free_blocks >= 0, "pages over the pool"
        s.complete(step)
    assert s.finished(), "the scheduler did not finish the trace"
    assert produced == list(outputs), "not every request got each of its outputs once"
    assert s.free_blocks == num_blocks, "pages still reserved after every request finished"
    return steps, s.stats()


TRACE = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 40), min_size=n, max_size=n), st.lists(st.integers(1, 8), min_size=n, max_size=n),
    st.integers(1, 4), st.integers(1, 4), st.integers(0, 12), st.integers(0, 8)))


@settings(max_examples=150, deadline=None)
@given(trace=TRACE)
def test_chunked_never_stalls_a_decode_nor_passes_the_budget(trace):
    """Random traces, budgets and pools: every token once and in order, and in every step each request
    that was decoding gets its token while the step stays within the token budget."""
    prompts, outputs, block_size, max_batch, extra_budget, spare = trace
    num_blocks = max(-(-(p + o) // block_size) for p, o in zip(prompts, outputs)) + spare
    budget = max_batch + extra_budget
    steps, stats = run_checked(M.ChunkedScheduler, prompts, outputs, budget, num_blocks, block_size, max_batch)
    for i, (step, decoding) in enumerate(steps):
        assert step.num_tokens <= budget, f"step {i}: {step.num_tokens} tokens, budget {budget}"
        stalled = sorted(set(decoding) - set(step.rids))
        assert not stalled, f"step {i}: decoding requests {stalled} got no token"
    assert stats["decode_stalls"] == 0 and stats["max_step_tokens"] <= budget
    run_checked(M.OneShotScheduler, prompts, outputs, budget, num_blocks, block_size, max_batch)


def test_a_long_prompt_stalls_one_shot_not_chunked():
    """Request 0 decodes 8 tokens; request 1 brings a 40-token prompt with a budget of 8 tokens per step.
    One shot: one step of 40 tokens during which request 0 waits. Chunked: five chunks of at most 7
    tokens ride along with request 0's decodes, which never miss a step."""
    prompts, outputs = [4, 40], [8, 2]
    one, one_stats = run_checked(M.OneShotScheduler, prompts, outputs, 8, 64, 4, 2)
    ch, ch_stats = run_checked(M.ChunkedScheduler, prompts, outputs, 8, 64, 4, 2)
    assert one_stats["max_step_tokens"] == 40 and one_stats["decode_stalls"] >= 1
    assert ch_stats["max_step_tokens"] <= 8 and ch_stats["decode_stalls"] == 0
    assert ch_stats["max_output_gap"] == 1, "chunked: request 0 must produce an output every step"
    prefill = [n for step, _ in ch for r, n, t in zip(step.rids, step.q_lens, step.starts) if r == 1 and t < 40]
    assert sum(prefill) == 40 and len(prefill) >= 5 and max(prefill) <= 7, f"request 1's chunks: {prefill}"


def test_report_on_a_realistic_trace():
    """64 requests, prompts up to 2048, a 512-token budget: chunked keeps every step within the budget
    and every decode moving (one output per step); one shot runs steps of thousands of tokens."""
    g.require_implemented("optimized")
    report = M.schedule_report()
    one, ch = report["OneShotScheduler"], report["ChunkedScheduler"]
    assert ch["max_step_tokens"] <= 512 and ch["decode_stalls"] == 0 and ch["max_output_gap"] == 1
    assert one["max_step_tokens"] > 1024 and one["decode_stalls"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version):
    """64 sequences: 8 chunks of 300 tokens at contexts up to 2000, the rest decoding; GQA 4:1, head_dim
    128, fp16 pages of 16."""
    g.run_and_compare(version, Config(64, 16, 4, 128, 16, 2000, 300, "float16"), rtol=RTOL)


@pytest.mark.gpu
def test_bench_step_on_gpu():
    """The benchmark's step itself (4 chunks of 512 at context 4096 and 60 decodes): optimized only."""
    g.run_and_compare("optimized", sol.BENCH_SIZES[0], rtol=RTOL)
