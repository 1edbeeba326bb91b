"""Day 89 grader: PagedAttention with its knobs (block size, partition size, warps per block).

Inputs are day 78's: random non-contiguous block tables with garbage past each sequence's pages and
NaN in every slot no sequence owns, so a partition that reads past its context shows up.
"""

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(89)
sol = g.solution
Config = sol.Config
RTOL = 5e-4  # float32 sums of exp-weighted terms, merged across warps and partitions in another order

test_matches_reference = g.matches_reference(rtol=RTOL)


def _with_context(xs, s, value):
    lens = xs[4].copy()
    lens[s] = value
    return xs[:4] + (lens,) + xs[5:]


test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "context-zero": lambda xs: _with_context(xs, 1, 0),
        "context-past-table": lambda xs: _with_context(xs, 0, xs[3].shape[1] * xs[1].shape[1] + 1),
        "value-dtype-differs": lambda xs: xs[:2] + (xs[2].astype(np.float16),) + xs[3:],
        "head-dim-mismatch": lambda xs: (np.ascontiguousarray(xs[0][:, :, :16]),) + xs[1:],
        "scale-not-finite": lambda xs: xs[:5] + (float("inf"),),
    },
)

KNOBS = [(0, 1), (8, 1), (16, 2), (8, 4), (40, 2)]


@pytest.mark.parametrize("partition,warps", KNOBS, ids=[f"partition{p}-warps{w}" for p, w in KNOBS])
def test_every_setting_of_the_knobs_agrees(partition, warps):
    """One kernel, every knob: no split and splits of 1, 2 and 5 pages (contexts 37, 1, 8, 9 end inside,
    at and past partition borders), 1 to 4 warps."""
    g.require_implemented("optimized")
    xs, seed = g.inputs(Config(4, 2, 1, 32, 8, 37, "float32"), "knobs", partition, warps)
    got = g.target.paged_attention(*xs, partition=partition, num_warps=warps)
    checking.assert_matches(got, sol.reference(*xs), rtol=RTOL, name=f"partition {partition}, {warps} warps "
                                                                         f"(seed {seed})")


@pytest.mark.parametrize("knobs", [dict(partition=12), dict(partition=-8), dict(num_warps=3), dict(num_warps=0)],
                         ids=["partition-not-a-page-multiple", "partition-negative", "warps-3", "warps-0"])
def test_rejects_bad_knobs(knobs):
    g.require_implemented("optimized")
    xs, _ = g.inputs(sol.TEST_SIZES[0], "bad-knobs")
    with pytest.raises(ValueError):
        g.target.paged_attention(*xs, **knobs)


def test_tuned_partition_fills_the_gpu():
    """On the H200 (132 SMs): 8 x 32 heads over 32k tokens split into 8192-token partitions (1024 blocks);
    64 x 32 heads already make 2048 blocks: no split."""
    g.require_implemented("optimized")
    assert g.target.tuned_partition(8, 32, 32768, 16, 132) == 8192
    assert g.target.tuned_partition(64, 32, 4096, 16, 132) == 0
    size = g.target.tuned_partition(1, 8, 100_000, 32, 132)
    # a power of two: at least half the target's blocks, a whole number of pages
    assert size % 32 == 0 and 2 * 8 * -(-100_000 // size) >= 132 * sol.BLOCKS_PER_SM


def test_partition_kernel_merges_through_shared_memory():
    """Warps fold with shuffles and meet in shared memory behind one barrier; per-lane arrays stay in
    registers for every warp count, and the staging area grows with the warps, not with the context."""
    reports = {w: g.report(label) for w, label in ((2, "optimized.warps2"), (4, "optimized"),
                                                    (8, "optimized.warps8"))}
    for w, rep in reports.items():
        assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0, f"{w} warps: no shuffles or barrier"
        assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0
        assert rep.stack_bytes == 0, f"{w} warps: {rep.stack_bytes} B of stack (per-lane arrays spilled)"
    assert reports[2].shared_bytes < reports[4].shared_bytes < reports[8].shared_bytes <= 8 * 1024


def test_reduce_kernel_needs_no_shared_memory():
    """The merge of partitions reads a few (max, sum) pairs per thread: broadcast loads, no barrier."""
    rep = g.report("optimized.reduce")
    assert rep.count("bar.sync") == 0 and rep.count("st.shared") == 0 and rep.stack_bytes == 0


GPU_CONFIGS = (
    Config(4, 32, 8, 128, 16, 16384, "float16"),  # the tuned launch splits: 128 (seq, head) pairs
    Config(2, 8, 2, 128, 32, 5001, "float32"),
    Config(3, 16, 4, 64, 8, 3000, "float16"),
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_long_contexts_on_gpu(version, cfg):
    g.run_and_compare(version, cfg, rtol=RTOL)
