"""Day 81 grader: PagedAttention v1 (one block per sequence and head) vs v2 (partitions + reduce).

Inputs are day 78's (random non-contiguous block tables with garbage past each sequence's pages,
NaN in every unused cache slot) plus a partition size: 1-4 pages in the tests, so that contexts of a
few dozen tokens span several partitions and the reduce kernel has real work.
"""

import re

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(81)
sol = g.solution
Config = sol.Config

RTOL = 5e-4  # float32 sums of exp-weighted rows, as on day 78

test_matches_reference = g.matches_reference(rtol=RTOL)

# Every head size, four query heads a block, partitions of one page of 8 over contexts 19 and 1: the
# first sequence's three partitions, the last partial, merged by the reduce (one thread per column).
HEAD_DIM_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "float16", partition_size=8) for d in sol.HEAD_DIMS) \
    + tuple(Config(1, 4, 2, d, 8, 13, "float32", partition_size=8) for d in (80, 120, 256))
test_every_head_size = g.matches_reference(HEAD_DIM_SIZES, rtol=RTOL)
SUPPORTED = ", ".join(map(str, sol.HEAD_DIMS))


@pytest.mark.parametrize("head_dim", (48, 100, 512))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rejects_unsupported_head_dim(version, head_dim):
    """A head size outside the list is a ValueError naming the sizes there are, before any launch."""
    g.require_implemented(version)
    xs = sol.make_inputs(Config(1, 4, 1, head_dim, 8, 9, "float16", partition_size=8), seed=1)
    with pytest.raises(ValueError, match=re.escape(SUPPORTED)):
        getattr(g.target, version)(*xs)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "partition-not-whole-pages": lambda xs: _replace(xs, 6, xs[1].shape[1] + 1),
        "partition-zero": lambda xs: _replace(xs, 6, 0),
        "partition-not-an-int": lambda xs: _replace(xs, 6, 16.0),
        "context-zero": lambda xs: _replace(xs, 4, np.where(np.arange(len(xs[4])) == 1, 0, xs[4]).astype(np.int32)),
        "context-past-table": lambda xs: _replace(xs, 4, np.where(
            np.arange(len(xs[4])) == 0, xs[3].shape[1] * xs[1].shape[1] + 1, xs[4]).astype(np.int32)),
        "block-id-past-cache": lambda xs: _replace(xs, 3, np.where(
            np.arange(xs[3].size).reshape(xs[3].shape) == 0, xs[1].shape[0], xs[3]).astype(np.int32)),
        "heads-not-a-multiple": lambda xs: (np.ascontiguousarray(xs[0][:, :3]),) + xs[1:],
    },
)


@pytest.mark.parametrize("partition_size", [8, 16, 48])
def test_any_partition_size_gives_the_same_answer(partition_size):
    """One page per partition, two, six: each context of 1..45 tokens splits differently (the last
    partition of a sequence is usually partial) and the answer must not move."""
    cfg = Config(3, 4, 1, 32, 8, 45, "float32", partition_size=partition_size)
    g.run_and_compare("optimized", cfg, rtol=RTOL, parts=(partition_size,))


def max_logit(query, key_cache, value_cache, block_tables, context_lens, scale, partition_size):
    """The largest |logit|, gathered the plain way."""
    bs, group = key_cache.shape[1], query.shape[1] // key_cache.shape[2]
    top = 0.0
    for s, ctx in enumerate(context_lens):
        for t in range(ctx):
            k = key_cache[block_tables[s, t // bs], t % bs].astype(np.float64)  # (kv_heads, dim)
            for h in range(query.shape[1]):
                top = max(top, abs(scale * float(k[h // group] @ query[s, h])))
    return top


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_logits_do_not_overflow(version):
    """Logits near +-1000 in every partition: each partition subtracts its own max, and the reduce must
    subtract the max over partitions before weighting (2^(1000 * log2 e) is inf in float32)."""
    g.require_implemented(version)
    xs, seed = g.inputs(Config(2, 2, 1, 32, 8, 41, "float32", partition_size=8), version, "large")
    xs = (xs[0] * np.float32(1000.0 / max_logit(*xs)),) + xs[1:]
    assert max_logit(*xs) > 750, "the test needs logits whose exp overflows"
    got = getattr(g.target, version)(*xs)
    checking.assert_matches(got, sol.reference(*xs), rtol=5e-3, name=f"{version} (seed {seed})")


def test_partition_kernel_is_day78s_kernel():
    """The partition kernel keeps day 78's machinery: shuffled dot products, a shared-memory merge that
    does not grow with the context, every per-lane array in registers."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0
    assert rep.shared_bytes <= 16 * 1024, f"{rep.shared_bytes} B of shared memory: it must not grow with the context"
    assert rep.stack_bytes == 0, f"{rep.stack_bytes} B of stack: per-lane arrays spilled to local memory"


def test_reduce_is_small_and_local():
    """The reduce reads a few floats per partition: no shared memory, no barrier, no stack needed."""
    rep = g.report("optimized.reduce")
    assert rep.stack_bytes == 0 and rep.count("bar.sync") == 0 and rep.shared_bytes == 0, \
        f"reduce: stack {rep.stack_bytes} B, {rep.count('bar.sync')} barriers, {rep.shared_bytes} B shared"


GPU_CONFIGS = (
    Config(4, 32, 8, 128, 16, 16384, "float16", partition_size=512),  # 32 partitions per sequence
    Config(4, 16, 2, 128, 32, 5001, "float32", partition_size=256),
    Config(6, 8, 1, 64, 8, 3000, "float16", partition_size=512),
    Config(3, 4, 4, 96, 16, 1200, "float16", partition_size=128),  # head_dim 96
    Config(4, 32, 8, 80, 16, 9000, "float16", partition_size=512),  # phi-2's head size: a ragged row
    Config(4, 16, 8, 256, 16, 9000, "float16", partition_size=1024),  # Gemma's
    Config(2, 8, 2, 120, 32, 3001, "float16", partition_size=256),
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version, cfg):
    """Long contexts with tens of partitions, every block size: what the simulator cannot run."""
    g.run_and_compare(version, cfg, rtol=RTOL)


# LOAD_WORDS = 2 (the shared kernel's 16-byte loads, read by launch_attention): partitions of one and
# two pages at every head size in fp16 and in fp32.
WIDE_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "float16", partition_size=8 * (1 + i % 2))
                   for i, d in enumerate(sol.HEAD_DIMS)) \
    + tuple(Config(1, 4, 2, d, 8, 13, "float32", partition_size=8 * (2 - i % 2)) for i, d in enumerate(sol.HEAD_DIMS))


WIDE_IDS = [f"{c.cache_dtype}-{c.head_dim}-p{c.partition_size}" for c in WIDE_SIZES]


@pytest.mark.parametrize("cfg", WIDE_SIZES, ids=WIDE_IDS)
def test_sixteen_byte_loads_at_every_head_size(cfg, monkeypatch):
    """Partitions with 16-byte loads (two adjacent words per load): the same answer at every head size."""
    g.require_implemented("optimized")
    monkeypatch.setitem(g.target.launch_attention.__globals__, "LOAD_WORDS", 2)
    g.run_and_compare("optimized", cfg, rtol=RTOL, parts=("wide",))
