"""Day 88 grader: int8 KV cache -- quantize, dequantize-then-attend, and attention fused with dequantization.

Inputs are day 78's (random non-contiguous block tables with garbage past each sequence's pages)
with the float32 pages quantized per (token, KV head); slots no sequence owns hold random bytes
and a NaN scale, so a read past a context length shows up as NaN.
"""

import re

import numpy as np
import pytest

from course import checking
from course.grading import Grader, seed_for
from solutions.day78_paged_attention_v1 import reference as fp16_attention

g = Grader(88)
sol = g.solution
Config = sol.Config

# The fused kernel against float64 attention over the dequantized cache: float32 sums only.
test_matches_reference = g.matches_reference(rtol=sol.RTOL, versions=("optimized",))


def fp16_copy_reference(query, key_cache, value_cache, key_scales, value_scales, block_tables, context_lens,
                        scale):
    """What naive computes by design: attention over the dequantized cache rounded to float16."""
    k = (key_cache * key_scales[..., None]).astype(np.float16)
    v = (value_cache * value_scales[..., None]).astype(np.float16)
    return fp16_attention(query, k, v, block_tables, context_lens, scale)


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(s) for s in sol.TEST_SIZES])
def test_naive_matches_its_fp16_copy(n):
    """naive rounds every dequantized value to float16 (up to 2^-12 of it) before day 78's kernel reads
    it: graded against attention over that same fp16 copy, at day 78's tolerance."""
    g.require_implemented("naive")
    xs, seed = g.inputs(n, "naive")
    report = checking.compare(g.target.naive(*xs), fp16_copy_reference(*xs), rtol=5e-4, name=f"naive(n={n})")
    assert report.ok, f"{report.text}\n  (inputs: make_inputs({n!r}, seed={seed}))"


# Every head size: a row fills head_dim / 8 lanes, rounded up to a power of two (80: 10 live lanes
# of 16), four query heads a block, contexts 19 and 1 over three pages of 8 with a partial last one.
HEAD_DIM_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "int8") for d in sol.HEAD_DIMS)
test_every_head_size = g.matches_reference(HEAD_DIM_SIZES, rtol=sol.RTOL, versions=("optimized",))


@pytest.mark.parametrize("n", HEAD_DIM_SIZES[2:3] + HEAD_DIM_SIZES[-1:], ids=["head80", "head256"])
def test_naive_at_other_head_sizes(n):
    """naive is day 78's kernel over the fp16 copy: a ragged head (80) and the widest (256)."""
    g.require_implemented("naive")
    xs, seed = g.inputs(n, "naive")
    report = checking.compare(g.target.naive(*xs), fp16_copy_reference(*xs), rtol=5e-4, name=f"naive(n={n})")
    assert report.ok, f"{report.text}\n  (inputs: make_inputs({n!r}, seed={seed}))"


@pytest.mark.parametrize("head_dim", (48, 100, 512))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rejects_unsupported_head_dim(version, head_dim):
    """A head size outside the list is a ValueError naming the sizes there are, before any launch."""
    g.require_implemented(version)
    xs = sol.make_inputs(Config(1, 4, 1, head_dim, 8, 9, "int8"), seed=1)
    with pytest.raises(ValueError, match=re.escape(", ".join(map(str, sol.HEAD_DIMS)))):
        getattr(g.target, version)(*xs)


def _with(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "cache-float16": lambda xs: _with(_with(xs, 1, xs[1].astype(np.float16)), 2, xs[2].astype(np.float16)),
        "key-scales-per-block": lambda xs: _with(xs, 3, np.ascontiguousarray(xs[3][:, 0])),
        "value-scales-wrong-heads": lambda xs: _with(xs, 4, np.repeat(xs[4], 2, axis=2)),
        "value-cache-shape-differs": lambda xs: _with(xs, 2, np.ascontiguousarray(xs[2][:-1])),
        "head-dim-mismatch": lambda xs: _with(xs, 0, np.ascontiguousarray(xs[0][:, :, :16])),
        "context-zero": lambda xs: _with(xs, 6, np.where(np.arange(len(xs[6])) == 1, 0, xs[6]).astype(np.int32)),
        "block-id-past-cache": lambda xs: _with(xs, 5, np.where(np.arange(xs[5].size).reshape(xs[5].shape) == 0,
                                                                xs[1].shape[0], xs[5]).astype(np.int32)),
    },
)


# --- quantize -------------------------------------------------------------------------------------

QUANT_SHAPES = ((37, 2, 128, "float16"), (50, 1, 32, "float32"), (9, 3, 64, "float16"), (11, 2, 80, "float16"),
                (5, 2, 120, "float32"), (6, 1, 256, "float16"))


@pytest.mark.parametrize("shape", QUANT_SHAPES, ids=[str(s) for s in QUANT_SHAPES])
def test_quantize_rows(shape):
    """Per row: scale = max|x| / 127, |q * scale - x| <= scale / 2, the largest |x| maps to +-127
    (whatever its sign), and an all-zero row stays zero with scale 0."""
    g.require_implemented("quantize")
    *dims, dtype = shape
    rng = np.random.default_rng(seed_for("day88", "quantize", shape))
    x = (rng.standard_normal(dims, dtype=np.float32) * rng.uniform(0.01, 10, dims[:2] + [1])).astype(dtype)
    x[0, 0] = 0.0
    x[1, 0, 5] = -50.0  # a negative outlier: max(x) would miss it
    q, scales = g.target.quantize(x)
    assert q.dtype == np.int8 and q.shape == x.shape, f"q: expected int8 {x.shape}, got {q.dtype} {q.shape}"
    assert scales.dtype == np.float32 and scales.shape == x.shape[:2], f"scales: got {scales.dtype} {scales.shape}"
    xf = x.astype(np.float32)
    amax = np.abs(xf).max(axis=-1)
    checking.assert_matches(scales, (amax / 127).astype(np.float32), rtol=1e-6, name="scales")
    assert np.all(q[0, 0] == 0) and scales[0, 0] == 0, "an all-zero row must give q = 0 and scale 0"
    err = np.abs(q.astype(np.float64) * scales[..., None] - xf)
    worst = float((err - 0.5 * scales[..., None] * (1 + 1e-5)).max())
    assert worst <= 1e-30, f"some |q * scale - x| exceeds scale / 2 by {worst:.3g}: not round-to-nearest"
    live = amax > 0
    assert np.all(np.abs(q).max(axis=-1)[live] == 127), "each row's largest |x| must map to +-127"
    assert q[1, 0, 5] == -127, f"the outlier -50 must quantize to -127, got {q[1, 0, 5]}"


def test_quantize_rejects_bad_inputs():
    g.require_implemented("quantize")
    x = np.ones((4, 2, 64), dtype=np.float16)
    for bad in (x.astype(np.float64), x[:, 0], np.ones((4, 2, 48), np.float16), np.repeat(x, 2, axis=0)[::2]):
        with pytest.raises(ValueError):
            g.target.quantize(bad)


# --- the error budget -------------------------------------------------------------------------------

# rms(out - exact) / rms(exact). int8 rounds each value by up to max|row| / 254, uniformly: for Gaussian
# rows of 128 (max ~3 sigma) an rms of ~0.7 % of a value, which the softmax-weighted sum of V rows (and
# the shifted logits) carries into the output at about that size. fp16 rounds by 2^-12 of each value.
INT8_ERROR_BOUND = 2e-2


def test_error_budget_against_fp16():
    """The learner's quantizer, float64 attention: int8 costs more accuracy than fp16 but stays inside
    the budget, for 51.6 % of the bytes at head_dim 128."""
    g.require_implemented("quantize")
    rep = sol.error_report(Config(2, 8, 2, 128, 16, 64), seed=seed_for("day88", "budget"),
                           quantize_fn=g.target.quantize)
    assert 0 < rep["fp16_error"] < rep["int8_error"] < INT8_ERROR_BOUND, rep
    assert rep["fp16_error"] < 1e-3, rep
    assert abs(rep["bytes_ratio"] - 132 / 256) < 1e-9, rep


def test_fused_kernel_error_against_float32_cache():
    """End to end: the learner's quantize kernel, then the fused kernel, against the float32 cache."""
    g.require_implemented("quantize", "optimized")
    seed = seed_for("day88", "fused budget")
    cfg = Config(2, 4, 1, 64, 16, 20)
    kernels = sol.error_report(cfg, seed=seed, quantize_fn=g.target.quantize, attention_fn=g.target.optimized)
    plain = sol.error_report(cfg, seed=seed)
    assert kernels["int8_error"] < INT8_ERROR_BOUND, kernels
    assert abs(kernels["int8_error"] - plain["int8_error"]) < 1e-3, (kernels, plain)


# --- what the compiler did -------------------------------------------------------------------------


def int_to_float_conversions(ptx: str) -> int:
    return len(re.findall(r"\bcvt\.rn\.f(?:16|32)\.[su](?:8|16|32)\b", ptx))


def byte_loads(ptx: str) -> int:
    return len(re.findall(r"\bld(?:\.global)?(?:\.nc)?\.[su]8\b", ptx))


def test_optimized_unpacks_words_in_registers():
    """Words, not bytes; the sign-flip trick instead of int->float conversions (a quarter of the FMA
    rate); shuffled dot products; no local memory; shared memory only to merge warps."""
    rep = g.report("optimized")
    assert byte_loads(rep.ptx) == 0, "optimized: 1-byte loads: read the int8 cache as 32-bit words"
    assert int_to_float_conversions(rep.ptx) == 0, "optimized: int->float cvt instructions: unpack the bytes " \
        "into the mantissa of 2^23 and subtract instead"
    assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0 and rep.count("st.shared") > 0
    assert rep.stack_bytes == 0, f"optimized: {rep.stack_bytes} B of stack: per-lane arrays went to local memory"
    assert rep.shared_bytes <= 16 * 1024, f"optimized: {rep.shared_bytes} B of shared memory"


def test_naive_dequantizes_byte_by_byte():
    """The contrast: one byte load and one int->float conversion per value, no shuffles."""
    rep = g.report("naive")
    assert byte_loads(rep.ptx) > 0 and int_to_float_conversions(rep.ptx) > 0
    assert rep.count("shfl.sync") == 0 and rep.count("bar.sync") == 0


def test_quantize_reduces_with_shuffles():
    """The row's max-abs is a warp reduction: shuffles (however many the compiled loop shows), no
    shared memory, no stack."""
    rep = g.report("quantize")
    assert rep.count("shfl.sync") > 0, "quantize: no warp shuffles: reduce the max-abs with shfl_xor_sync"
    assert rep.count("ld.shared") == 0 and rep.stack_bytes == 0


# --- GPU sizes ----------------------------------------------------------------------------------------

GPU_CONFIGS = (
    Config(8, 32, 8, 128, 16, 2048, "int8"),
    Config(4, 16, 2, 128, 32, 3001, "int8"),
    Config(6, 8, 1, 64, 8, 1500, "int8"),
    Config(3, 12, 4, 96, 16, 700, "int8"),  # head_dim 96: 12 live lanes of 16
    Config(4, 32, 8, 80, 16, 1200, "int8"),  # 10 live lanes of 16
    Config(2, 16, 4, 192, 8, 1500, "int8"),  # 24 live lanes of 32
    Config(4, 16, 8, 256, 16, 2100, "int8"),  # a whole warp per row
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
def test_large_on_gpu(cfg):
    """Every head size class, thousands of tokens, block sizes 8-32: the optimized kernel against the reference,
    and naive against its fp16 copy."""
    g.run_and_compare("optimized", cfg, rtol=sol.RTOL)
    xs, seed = g.inputs(cfg, "naive-gpu")
    checking.assert_matches(g.target.naive(*xs), fp16_copy_reference(*xs), rtol=5e-4, name=f"naive (seed {seed})")


@pytest.mark.gpu
def test_error_budget_on_gpu():
    """The benchmark's head_dim and group at a long context, through both kernels."""
    g.require_implemented("quantize", "optimized")
    rep = sol.error_report(Config(4, 32, 8, 128, 16, 4096, ragged=False), quantize_fn=g.target.quantize,
                           attention_fn=g.target.optimized)
    assert rep["int8_error"] < INT8_ERROR_BOUND, rep
