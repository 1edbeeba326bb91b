"""Day 80 grader: one PagedAttention kernel on the token-major and the vectorized page layouts.

Inputs come from the solution's make_inputs: day 78's paged cache (random non-contiguous block tables,
NaN in every slot no sequence owns) and the same pages rearranged into the vectorized layout.
"""

import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(80)
sol = g.solution
Config = sol.Config

RTOL = 5e-4  # float32 sums of exp-weighted rows, as on day 78

test_matches_reference = g.matches_reference(rtol=RTOL)


def _replace(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[1],
    extra_cases={
        # x counted in elements of the wrong dtype: (..., head_dim // 4, block_size, 4) for fp16
        "x-of-float32-for-float16": lambda xs: _replace(xs, 3, np.ascontiguousarray(
            xs[3].reshape(*xs[3].shape[:2], -1, xs[3].shape[3], 4))),
        "x-layout-is-token-major": lambda xs: _replace(xs, 3, xs[1].copy()),
        "value-x-dtype-differs": lambda xs: _replace(xs, 4, xs[4].astype(np.float32)),
        "x-block-count-differs": lambda xs: _replace(xs, 4, np.ascontiguousarray(xs[4][:-1])),
        "context-zero": lambda xs: _replace(xs, 6, np.where(np.arange(len(xs[6])) == 1, 0, xs[6]).astype(np.int32)),
        "block-id-past-cache": lambda xs: _replace(xs, 5, np.where(
            np.arange(xs[5].size).reshape(xs[5].shape) == 0, xs[1].shape[0], xs[5]).astype(np.int32)),
    },
)


def test_layouts_hold_the_same_pages():
    """make_inputs' contract: element (block, row, head, d) of the token-major cache is element
    (block, head, d // x, row, d % x) of the vectorized one, NaN slots included."""
    g.require_implemented("optimized")
    xs, _ = g.inputs(Config(2, 4, 2, 64, 8, 19, "float16"), "layouts")
    kc, kx = xs[1], xs[3]
    x = 16 // kc.itemsize
    b, r, h, d = 3, 5, 1, 37
    assert kx.shape == (kc.shape[0], 2, 64 // x, 8, x)
    np.testing.assert_array_equal(kx[b, h, d // x, r, d % x], kc[b, r, h, d])
    np.testing.assert_array_equal(np.isnan(kx).sum(), np.isnan(kc).sum())


def chunk_offsets(rep) -> list[int]:
    """Immediate byte offsets of the kernel's 4-byte cache loads (fp16: ld.global.v2.u16)."""
    return [int(o or 0) for o in re.findall(r"ld\.global(?:\.nc)?\.v2\.u16\s+\{[^}]*\},\s*\[%rd\d+(?:\+(\d+))?\]",
                                            rep.ptx)]


def test_chunk_strides_follow_the_layout():
    """Compiled at block_size 16, fp16, head_dim 128 (16 chunks of 16 bytes per row): the kernel on the
    token-major layout steps 16 bytes from chunk to chunk (a row is contiguous); on the vectorized
    layout it steps block_size * 16 = 256 bytes (a chunk column holds every token of the page)."""
    naive, opt = sorted(set(chunk_offsets(g.report("naive")))), sorted(set(chunk_offsets(g.report("optimized"))))
    assert opt and all(o % 256 == 0 for o in opt) and max(opt) == 15 * 256, \
        f"optimized: chunk offsets {opt}: expected multiples of 256 B up to 3840 (chunk j of a row at j * 256)"
    assert naive and max(naive) < 256 and all(o % 16 == 0 for o in naive), \
        f"naive: chunk offsets {naive}: expected 16-byte steps inside one 256-byte row"


def test_kernels_stay_in_registers_and_shuffle():
    """Both layouts: per-lane arrays in registers (no stack), shuffled dot products, a small merge."""
    for label in sol.VERSIONS:
        rep = g.report(label)
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} B of stack: per-lane arrays in local memory"
        assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0, f"{label}: no shuffles or barrier"
        assert rep.shared_bytes <= 8 * 1024, f"{label}: {rep.shared_bytes} B of shared memory"


GPU_CONFIGS = (
    Config(8, 32, 8, 128, 16, 2048, "float16"),
    Config(4, 16, 2, 128, 32, 3001, "float32"),
    Config(6, 8, 1, 64, 8, 1500, "float16"),
    Config(3, 4, 4, 96, 16, 700, "float16"),  # head_dim 96: 12 chunks per row
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version, cfg):
    """head_dim 96 and 128, thousands of tokens, every block size: the sizes the simulator cannot run."""
    g.run_and_compare(version, cfg, rtol=RTOL)
