"""Day 78 grader: PagedAttention v1, one thread per (sequence, head) and one block per (sequence, head).

Inputs come from the solution's make_inputs: random non-contiguous block tables whose unused entries
are garbage, and a cache whose unused slots are NaN, so any read past a context length shows up.
"""

import functools
import re

import numpy as np
import pytest

from course import checking, compiler, days
from course.grading import Grader

g = Grader(78)
sol = g.solution
Config = sol.Config

# float32 sums over a few hundred exp-weighted terms: 5e-4 leaves room for summation order, and a
# kernel that reads one garbage slot or drops the max still misses by orders of magnitude (or NaN).
RTOL = 5e-4

test_matches_reference = g.matches_reference(rtol=RTOL)

# Every head size the kernels take (vLLM's list), each over three pages of 8 with a partial last one
# (contexts 19 and 1): 80, 112 and 120 leave a ragged last word slot on some lanes in fp16, 192 and 256
# spread a row over 16 lanes. fp32 rows split differently (80: 40 words over 8 lanes, 120: 60 over 8).
HEAD_DIM_SIZES = tuple(Config(2, 2, 1, d, 8, 19, "float16") for d in sol.HEAD_DIMS) \
    + tuple(Config(1, 2, 2, d, 8, 13, "float32") for d in (80, 120, 256))
test_every_head_size = g.matches_reference(HEAD_DIM_SIZES, rtol=RTOL)
SUPPORTED = ", ".join(map(str, sol.HEAD_DIMS))


@pytest.mark.parametrize("head_dim", (48, 100, 512))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rejects_unsupported_head_dim(version, head_dim):
    """A head size outside the list is a ValueError naming the sizes there are, before any launch."""
    g.require_implemented(version)
    xs = sol.make_inputs(Config(1, 2, 1, head_dim, 8, 9, "float16"), seed=1)
    with pytest.raises(ValueError, match=re.escape(SUPPORTED)):
        getattr(g.target, version)(*xs)


def _with_context(xs, s, value):
    lens = xs[4].copy()
    lens[s] = value
    return xs[:4] + (lens,) + xs[5:]


def _with_table_entry(xs, value):
    tables = xs[3].copy()
    tables[0, 0] = value
    return xs[:3] + (tables,) + xs[4:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "context-zero": lambda xs: _with_context(xs, 1, 0),
        "context-past-table": lambda xs: _with_context(xs, 0, xs[3].shape[1] * xs[1].shape[1] + 1),
        "block-id-negative": lambda xs: _with_table_entry(xs, -1),
        "block-id-past-cache": lambda xs: _with_table_entry(xs, xs[1].shape[0]),
        "heads-not-a-multiple": lambda xs: (np.ascontiguousarray(xs[0][:, :3]),) + xs[1:],
        "head-dim-mismatch": lambda xs: (np.ascontiguousarray(xs[0][:, :, :16]),) + xs[1:],
        "value-dtype-differs": lambda xs: xs[:2] + (xs[2].astype(np.float16),) + xs[3:],
        "value-shape-differs": lambda xs: xs[:2] + (np.ascontiguousarray(xs[2][:-1]),) + xs[3:],
        "tables-wrong-rows": lambda xs: xs[:3] + (np.ascontiguousarray(xs[3][:-1]),) + xs[4:],
        "context-lens-2d": lambda xs: xs[:4] + (xs[4][:, None].copy(),) + xs[5:],
        "scale-not-finite": lambda xs: xs[:5] + (float("nan"),),
    },
)


def max_logit(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The largest |logit| of the inputs, gathered the same plain way as the reference."""
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
    """Logits near +-1000: exp() overflows (float32 past 88, even float64 past 709) unless the
    running max is subtracted first."""
    g.require_implemented(version)
    xs, seed = g.inputs(Config(2, 2, 1, 32, 8, 21, "float32"), version, "large")
    xs = (xs[0] * np.float32(1000.0 / max_logit(*xs)),) + xs[1:]  # the largest |logit| is now 1000
    assert max_logit(*xs) > 750, "the test needs logits whose exp overflows"
    got = getattr(g.target, version)(*xs)
    # Logits this large carry float32 rounding of ~1e-4 into every weight: a looser tolerance. A softmax
    # without the max returns inf / inf = NaN, which no tolerance lets through.
    checking.assert_matches(got, sol.reference(*xs), rtol=5e-3, name=f"{version} (seed {seed})")


def test_optimized_uses_warps_and_shared_memory():
    """Warps reduce q.k with shuffles; shared memory only merges the warps' partial softmaxes."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, "optimized: no warp shuffles (q.k should be a butterfly sum)"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0 and rep.count("bar.sync") > 0
    assert rep.shared_bytes <= 8 * 1024, f"optimized: {rep.shared_bytes} B of shared memory: it must not grow " \
        "with the context"
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} B of stack: per-lane arrays spilled to " \
        "local memory"


@pytest.mark.parametrize("label", ["optimized.head80", "optimized.head256"])
def test_every_head_size_stays_in_registers(label):
    """A ragged head (80) and the widest (256) keep q, the accumulator and the loaded words in
    registers: no stack frame, no spills (LANE_ELEMS per lane, as at 128)."""
    rep = g.report(label)
    assert rep.stack_bytes == 0 and rep.spill_stores == 0, \
        f"{label}: {rep.stack_bytes} B of stack, {rep.spill_stores} B spilled: per-lane arrays in local memory"


def load_bytes(rep) -> list[int]:
    """Bytes per global load instruction of a kernel's PTX (ld.global.v2.u16 moves 4)."""
    sizes = []
    for vec, bits in re.findall(r"^\s*(?:@!?%\w+\s+)?ld\.global(?:\.nc)?(?:\.v(\d))?\.[ubsf](\d+)\b", rep.ptx, re.M):
        sizes.append(int(vec or 1) * int(bits) // 8)
    return sizes


def test_optimized_loads_words_not_halves():
    """The fp16 cache is read as whole words through one flat offset per row (several elements per
    load); the naive kernel issues one 2-byte load, with its own 4-D index arithmetic, per element."""
    opt, naive = load_bytes(g.report("optimized")), load_bytes(g.report("naive"))
    assert opt.count(2) == 0, f"optimized: {opt.count(2)} two-byte loads: read the cache as words (cache_words)"
    assert naive.count(2) > 0, "naive: expected one fp16 load per element (the contrast)"


def test_naive_is_one_thread_per_head():
    """The contrast: the naive kernel uses neither shuffles nor shared memory."""
    rep = g.report("naive")
    assert rep.count("shfl.sync") == 0 and rep.count("ld.shared") == 0 and rep.count("bar.sync") == 0


GPU_CONFIGS = (
    Config(8, 32, 8, 128, 16, 2048, "float16"),
    Config(4, 16, 2, 128, 32, 3001, "float32"),
    Config(6, 8, 1, 64, 8, 1500, "float16"),
    Config(3, 4, 4, 96, 16, 700, "float16"),  # head_dim 96: 8 lanes per token, 3 words each
    Config(4, 8, 2, 80, 16, 1000, "float16"),  # ragged: 20 words over 8 lanes
    Config(3, 8, 8, 120, 32, 777, "float16"),  # ragged: 30 words over 8 lanes
    Config(2, 16, 4, 112, 8, 1500, "float32"),
    Config(4, 8, 1, 192, 16, 2100, "float16"),  # 16 lanes per token
    Config(4, 8, 2, 256, 16, 3000, "float16"),  # 16 lanes per token, 8-row trips
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version, cfg):
    """head_dim 128, thousands of tokens, all block sizes: the GPU sizes the simulator cannot run."""
    g.run_and_compare(version, cfg, rtol=RTOL)


# --- LOAD_WORDS = 2: the optimized kernel rebuilt with 16-byte loads (a lane's words paired) ---------

# Every head size in fp16 and in fp32, over three pages of 8 with a partial last one (contexts 19, 1):
# in pairs of words, fp16 80, 96, 112, 120 and 192 leave a ragged last pair on some lanes.
WIDE_SIZES = tuple(Config(2, 2, 1, d, 8, 19, dtype) for dtype in ("float16", "float32") for d in sol.HEAD_DIMS)


@functools.cache
def wide_solution():
    """The solution with LOAD_WORDS = 2 (course.days.with_constants): fresh kernels, 16-byte loads."""
    return days.with_constants(78, LOAD_WORDS=2)


@pytest.mark.parametrize("cfg", WIDE_SIZES, ids=[f"{c.cache_dtype}-{c.head_dim}" for c in WIDE_SIZES])
def test_sixteen_byte_loads_at_every_head_size(cfg):
    """The solution's kernel at LOAD_WORDS = 2 (two adjacent words per load, words 2 gl, 2 gl + 1,
    2 gl + 2G, ... a lane) gives the same answer at every head size, ragged pairs included."""
    g.require_implemented("optimized")
    xs, seed = g.inputs(cfg, "wide")
    checking.assert_matches(wide_solution().optimized(*xs), sol.reference(*xs), rtol=RTOL, floor=sol.ERROR_FLOOR,
                            name=f"LOAD_WORDS = 2, {cfg.cache_dtype} head_dim {cfg.head_dim} (seed {seed})")


def test_load_width_falls_back_where_rows_are_odd():
    """16-byte loads need every row on a 16-byte boundary: an even number of 8-byte words a row. The
    pairing shares out units of two words (fp16 96: 12 pairs over 8 lanes, 2 each, a ragged last)."""
    g.require_implemented("optimized")
    assert sol.load_width(128, 2, 2) == 2 and sol.load_width(120, 4, 2) == 2  # fp16 32 words, fp32 60
    assert sol.load_width(120, 1, 2) == 1, "an int8 row of 120 is 15 words: half its rows start mid-16 bytes"
    assert sol.load_width(128, 2, 1) == 1
    assert sol.head_layout(128, 2, 2) == sol.head_layout(128, 2) == (4, 32, 8, 4, 16)
    assert sol.head_layout(96, 2, 2) == (4, 24, 8, 4, 16)
    assert sol.head_layout(120, 1, 2) == sol.head_layout(120, 1)
    with pytest.raises(ValueError):
        sol.load_width(128, 2, 4)


def test_sixteen_byte_loads_compile_to_vector_loads():
    """At LOAD_WORDS = 2 the cache is read by 16-byte loads only (ld.global.v4.u32: no 8-byte load
    is left), with every per-lane array still in registers, at 128, a ragged 80 and the widest 256."""
    g.require_implemented("optimized")
    reps = compiler.reports(wide_solution())
    for label in ("optimized", "optimized.head80", "optimized.head256"):
        rep, sizes = reps[label], load_bytes(reps[label])
        assert sizes.count(16) > 0 and sizes.count(8) == 0, \
            f"{label}: loads of {sorted(set(sizes))} bytes: the cache words should come two at a time"
        assert rep.stack_bytes == 0 and rep.spill_stores == 0, \
            f"{label}: {rep.stack_bytes} B of stack, {rep.spill_stores} B spilled at LOAD_WORDS = 2"
