"""Day 73 grader: decode attention over a contiguous cache, a thread per head and a block per KV head
(its GQA group's query heads, one partition of the context)."""

import re

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


@pytest.mark.parametrize("head_dim, dtype", [(32, "float32"), (128, "float16")])
def test_every_way_a_trip_can_end(head_dim, dtype):
    """Contexts around trips, rounds of warps and partitions: 16 lane groups of 1 row per trip
    (head_dim 32) or 4 groups of 2 rows (head_dim 128, two heads a block), the last trip full, one row
    long or one row short; in the simulator's 32-row partitions, up to three partitions merged."""
    g.require_implemented("optimized")
    lens = np.array([1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65], dtype=np.int32)
    query, k, v, _, scale = g.solution.make_inputs((len(lens), 2, 1, head_dim, 65, dtype), seed=5)
    for s, ctx in enumerate(lens):
        k[s, ctx:] = np.nan
        v[s, ctx:] = np.nan
    checking.assert_matches(g.target.optimized(query, k, v, lens, scale),
                            g.solution.reference(query, k, v, lens, scale), rtol=RTOL, name="optimized")


def test_partitions_and_group_chunks():
    """MQA with 8 query heads over one KV head (the group split into equal chunks of heads) and
    contexts around the partition size: one row short of it, exactly it, one row past, several."""
    g.require_implemented("optimized")
    part = g.solution.PART_TOKENS or 32
    lens = np.array([1, part - 1, part, part + 1, 2 * part + 3], dtype=np.int32)
    query, k, v, _, scale = g.solution.make_inputs((len(lens), 8, 1, 64, 2 * part + 3, "float16"), seed=9)
    for s, ctx in enumerate(lens):
        k[s, ctx:] = np.nan
        v[s, ctx:] = np.nan
    checking.assert_matches(g.target.optimized(query, k, v, lens, scale),
                            g.solution.reference(query, k, v, lens, scale), rtol=RTOL, name="optimized")


def test_optimized_uses_shuffles_shared_memory_and_registers():
    opt = g.report("optimized")
    assert opt.count("shfl.sync") > 0, "optimized: the dot products should be summed with warp shuffles"
    assert opt.count("st.shared") > 0 and opt.count("ld.shared") > 0, "optimized: warps merge via shared memory"
    assert opt.count("bar.sync") > 0, "optimized: a barrier between the warps' shared writes and their merge"
    assert opt.stack_bytes == 0 and opt.spill_stores == 0, "optimized: q, the running row and K/V stay in registers"


def test_optimized_reads_the_cache_in_8_byte_words():
    """K and V arrive as 8-byte words (four fp16 each), not one 2-byte element per load."""
    loads = re.findall(r"ld\.global(?:\.nc)?\.(\w+)", g.report("optimized").ptx)
    assert loads.count("u64") + loads.count("b64") >= 2, "optimized: load the cache as uint64 words"
    assert not {"u16", "b16", "f16"} & set(loads), "optimized: no 2-byte loads of the cache"


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
