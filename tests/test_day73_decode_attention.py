"""Day 73 grader: decode attention over a contiguous cache, a thread per head and a block per head."""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(73)
# Float32 outputs of softmax-weighted sums whose terms cancel: an output near zero carries the rounding
# of terms a thousand times larger, so allow 5e-4 of the output's scale instead of float32's usual 1e-4.
RTOL = 5e-4


def _swap(xs, i, new):
    return xs[:i] + (new,) + xs[i + 1:]


test_matches_reference = g.matches_reference(rtol=RTOL)
test_rejects_bad_inputs = g.rejects_bad_inputs(
    3,  # 4 query heads over 2 KV heads, so a fifth query head breaks the grouping
    extra_cases={
        "context-len-zero": lambda xs: _swap(xs, 3, np.zeros_like(xs[3])),
        "context-past-cache": lambda xs: _swap(xs, 3, np.full_like(xs[3], xs[1].shape[1] + 1)),
        "heads-not-multiple-of-kv-heads": lambda xs: _swap(xs, 0, np.ascontiguousarray(
            np.concatenate([xs[0], xs[0][:, :1]], axis=1))),
        "value-cache-shorter": lambda xs: _swap(xs, 2, xs[2][:, :-1].copy()),
        "query-head-dim-differs": lambda xs: _swap(xs, 0, xs[0][:, :, :-1].copy()),
        "head-dim-over-128": lambda xs: tuple(np.zeros(a.shape[:-1] + (136,), a.dtype) if i < 3 else a
                                              for i, a in enumerate(xs)),
        "scale-negative": lambda xs: _swap(xs, 4, -1.0),
    }
)


def test_softmax_is_stable_for_large_scores():
    """Scores near 400: exp overflows float32 unless the running max is subtracted first."""
    g.require_implemented(*g.versions)
    query, k, v, lens, scale = g.solution.make_inputs(3, seed=11)
    query = query * np.float32(70.0)
    expected = g.solution.reference(query, k, v, lens, scale)
    for version in g.versions:
        got = getattr(g.target, version)(query, k, v, lens, scale)
        checking.assert_matches(got, expected, rtol=RTOL, name=f"{version} with large scores")


def test_every_context_length_up_to_a_few_trips():
    """Context lengths 1..13 cover every way four warps x four tokens a trip can end."""
    g.require_implemented("optimized")
    query, k, v, _, scale = g.solution.make_inputs((13, 2, 1, 8, 13, "float32"), seed=5)
    lens = np.arange(1, 14, dtype=np.int32)
    for s, ctx in enumerate(lens):
        k[s, ctx:] = np.nan
        v[s, ctx:] = np.nan
    checking.assert_matches(g.target.optimized(query, k, v, lens, scale),
                            g.solution.reference(query, k, v, lens, scale), rtol=RTOL, name="optimized")


def test_optimized_uses_shuffles_shared_memory_and_registers():
    opt = g.report("optimized")
    assert opt.count("shfl.sync") > 0, "optimized: the dot products should be summed with warp shuffles"
    assert opt.count("st.shared") > 0 and opt.count("ld.shared") > 0, "optimized: warps merge via shared memory"
    assert opt.count("bar.sync") > 0, "optimized: the merge needs a barrier after the shared writes"
    assert opt.stack_bytes == 0 and opt.spill_stores == 0, "optimized: q, the running row and K/V stay in registers"


def test_naive_is_one_thread_alone():
    naive = g.report("naive")
    assert naive.count("shfl.sync") == naive.count("st.shared") == naive.count("bar.sync") == 0
    assert not naive.uses_local_memory


@pytest.mark.gpu
def test_optimized_at_bench_size():
    g.run_and_compare("optimized", g.solution.BENCH_SIZES[0], rtol=RTOL)


@pytest.mark.gpu
def test_optimized_long_context_float32():
    g.run_and_compare("optimized", (4, 8, 2, 64, 16384, "float32"), rtol=RTOL)
