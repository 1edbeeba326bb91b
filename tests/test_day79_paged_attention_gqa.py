"""Day 79 grader: GQA/MQA PagedAttention, one block per query head vs one block per KV head group.

The kernel is given (solutions/paged_attention_common.py); the day's work is the launch: how many
heads of a group a block takes (heads_per_block) and the two versions that launch it.
"""

import re

import numpy as np
import pytest

from course import ON_GPU, checking, compiler
from course.grading import Grader

g = Grader(79)
sol = g.solution
Config = sol.Config

RTOL = 5e-4  # float32 sums of exp-weighted rows, as on day 78


def require_written():
    """Fail with the hint while the versions or heads_per_block are still stubs (the kernels they
    launch are given, so the kernels alone cannot tell)."""
    g.require_implemented("heads_per_block", *sol.VERSIONS)

test_matches_reference = g.matches_reference(rtol=RTOL)

# Every head size, four query heads a block (group 4: q, acc and the prefetched trip of four heads),
# over three pages of 8 with a partial last one (contexts 19 and 1); fp32 rows of three sizes, group 2.
HEAD_DIM_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "float16") for d in sol.HEAD_DIMS) \
    + tuple(Config(1, 4, 2, d, 8, 13, "float32") for d in (80, 120, 256))
test_every_head_size = g.matches_reference(HEAD_DIM_SIZES, rtol=RTOL)
SUPPORTED = ", ".join(map(str, sol.HEAD_DIMS))


@pytest.mark.parametrize("head_dim", (48, 100, 512))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rejects_unsupported_head_dim(version, head_dim):
    """A head size outside the list is a ValueError naming the sizes there are, before any launch."""
    require_written()
    xs = sol.make_inputs(Config(1, 4, 1, head_dim, 8, 9, "float16"), seed=1)
    with pytest.raises(ValueError, match=re.escape(SUPPORTED)):
        getattr(g.target, version)(*xs)

test_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[1],
    extra_cases={
        "heads-not-a-multiple": lambda xs: (np.ascontiguousarray(xs[0][:, :5]),) + xs[1:],
        "context-zero": lambda xs: xs[:4] + (np.where(np.arange(len(xs[4])) == 1, 0, xs[4]).astype(np.int32),)
        + xs[5:],
        "block-id-past-cache": lambda xs: xs[:3] + (np.where(np.arange(xs[3].size).reshape(xs[3].shape) == 0,
                                                             xs[1].shape[0], xs[3]).astype(np.int32),) + xs[4:],
        "head-dim-too-large": lambda xs: (np.zeros((xs[0].shape[0], xs[0].shape[1], 160), np.float32),)
        + xs[1:],
    },
)


def test_heads_per_block_never_straddles_kv_heads():
    """A group's chunks are equal and at most MAX_GROUP heads: group 6 splits 3 + 3 (4 + 2 would give
    a block heads of two KV heads), group 5 into ones, group 8 into two fours."""
    require_written()
    hpb = g.target.heads_per_block
    for heads, kv_heads, want in ((48, 8, 3), (12, 2, 3), (10, 2, 1), (32, 4, 4), (32, 1, 4), (8, 8, 1), (6, 2, 3)):
        assert hpb(heads, kv_heads, sol.MAX_GROUP) == want, \
            f"heads_per_block({heads}, {kv_heads}, {sol.MAX_GROUP}) = {hpb(heads, kv_heads, sol.MAX_GROUP)}, " \
            f"expected {want}: the largest divisor of the group ({heads // kv_heads}) up to {sol.MAX_GROUP}"


def test_each_page_is_read_once_per_group():
    """The optimized launch gives a block a whole group: it loads each K/V element once per group,
    so its grid has num_kv_heads (x chunks) blocks per sequence, not num_heads."""
    require_written()
    xs, _ = g.inputs(Config(2, 8, 2, 32, 8, 11, "float32"), "once")
    launched = []
    kernel_type = type(g.target.KERNELS["optimized"][0])  # every Numba kernel: simulator's or GPU's
    original = kernel_type.__getitem__

    def spy(kernel, config):
        launched.append(config[0])
        return original(kernel, config)

    kernel_type.__getitem__ = spy
    try:
        g.target.optimized(*xs)
    finally:
        kernel_type.__getitem__ = original
    assert launched and np.prod(launched[-1]) == 2 * 2, f"optimized launched grids {launched}: expected " \
        "2 KV heads x 2 sequences = 4 blocks (group 4 fits one block)"


@pytest.mark.parametrize("label", ["optimized", "optimized.head80", "optimized.head256"])
def test_kernel_keeps_the_group_in_registers(label):
    """q, accumulators and softmax state of up to MAX_GROUP heads stay in registers (no stack), at 128
    and at a ragged (80) and the widest (256) head size."""
    require_written()
    rep = g.report(label)
    assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} B of stack: the per-head arrays spilled to local memory"
    assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0


GPU_CONFIGS = (
    Config(8, 32, 8, 128, 16, 2048, "float16"),
    Config(4, 32, 1, 128, 32, 1500, "float16"),  # MQA with 32 heads: 8 chunks per KV head
    Config(4, 16, 4, 64, 8, 999, "float32"),
    Config(4, 32, 8, 80, 16, 1200, "float16"),  # phi-2's head size: a ragged row
    Config(4, 16, 8, 256, 16, 2500, "float16"),  # Gemma's
    Config(3, 12, 4, 120, 32, 900, "float16"),  # group 3, ragged
    Config(2, 8, 2, 192, 8, 1300, "float16"),
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large_on_gpu(version, cfg):
    g.run_and_compare(version, cfg, rtol=RTOL)


# --- LOAD_WORDS = 2: the shared kernel with 16-byte loads (day 78's knob, read by launch_attention) ---

# Every head size in fp16 (group 4 in one block) and in fp32 (group 2), pages of 8, contexts 19 / 13 and 1.
WIDE_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "float16") for d in sol.HEAD_DIMS) \
    + tuple(Config(1, 4, 2, d, 8, 13, "float32") for d in sol.HEAD_DIMS)


@pytest.mark.parametrize("cfg", WIDE_SIZES, ids=[f"{c.cache_dtype}-{c.head_dim}" for c in WIDE_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_sixteen_byte_loads_at_every_head_size(version, cfg, monkeypatch):
    """The launch with the shared kernel's LOAD_WORDS at 2 (two adjacent words per load): the same
    answer at every head size, one head or a group per block."""
    require_written()
    monkeypatch.setitem(g.target.launch_attention.__globals__, "LOAD_WORDS", 2)
    g.run_and_compare(version, cfg, rtol=RTOL, parts=("wide",))


WIDE_KERNELS = """from solutions.paged_attention_common import SIG_PAGED_WIDE, attention_kernel

KERNELS = {f"head{d}": (attention_kernel(d, "float16", 16, 4, load_words=2), SIG_PAGED_WIDE) for d in (128, 80, 256)}
"""


def test_sixteen_byte_loads_keep_the_group_in_registers(tmp_path):
    """Four heads a block at load_words 2: 16-byte cache loads (ld.global.v4.u32), no 8-byte ones, no
    stack, at 128, a ragged 80 and the widest 256."""
    require_written()
    path = tmp_path / "paged_attention_wide_loads.py"
    path.write_text(WIDE_KERNELS)
    for label, rep in compiler.reports(path).items():
        assert rep.ptx.count("ld.global.v4.u32") > 0 or re.search(r"ld\.global(\.nc)?\.v2\.u64", rep.ptx), \
            f"{label}: no 16-byte loads at load_words 2"
        assert not re.search(r"ld\.global(\.nc)?\.u64", rep.ptx), f"{label}: 8-byte loads left at load_words 2"
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} B of stack at load_words 2"


# --- LAZY_RESCALE: the shared kernel rescales only on a trip where the warp saw a new max -----------

# Many pages for each warp (contexts of 70 and 45 over pages of 8 and 4), so that the running max
# settles and most trips skip the rescale; a group of 4 in fp16 at head 64, MHA in fp32 at head 128.
LAZY_SIZES = (Config(2, 8, 2, 64, 8, 70, "float16"), Config(2, 4, 4, 128, 4, 45, "float32"))


@pytest.mark.parametrize("cfg", LAZY_SIZES, ids=[f"{c.cache_dtype}-{c.head_dim}" for c in LAZY_SIZES])
def test_lazy_rescale_matches_eager(cfg, monkeypatch):
    """Skipping the rescale where no lane of the warp saw a new max skips a multiplication by
    exp2(0) = 1. In the simulator (no fused multiply-add) the output equals the eager kernel's bit for
    bit. On a GPU the compiler contracts the eager `acc * correction` into the next `acc += p * v` as
    fma(acc, 1, round(p * v)), while the lazy path's fma(p, v, acc) rounds p * v only once: outputs may
    differ in their last bits, and by nothing like RTOL. Tolerance: 16 float32 ulps of the largest output
    (a rescale skipped where it was needed moves outputs by whole percents)."""
    require_written()
    xs = sol.make_inputs(cfg, seed=5)
    eager = checking.to_host(g.target.optimized(*xs))
    monkeypatch.setitem(g.target.launch_attention.__globals__, "LAZY_RESCALE", True)
    lazy = checking.to_host(g.target.optimized(*xs))
    assert np.isfinite(eager).all() and np.abs(eager).max() > 0
    diff = np.abs(eager.astype(np.float64) - lazy.astype(np.float64))
    differ = int(np.count_nonzero(diff))
    if not ON_GPU:
        assert differ == 0, f"LAZY_RESCALE changed {differ} of {eager.size} outputs (max |diff| " \
                            f"{float(diff.max()):.3g}): a skipped rescale was not a multiply by 1"
    ulps = 16 * float(np.spacing(np.float32(np.abs(eager).max())))
    assert diff.max() <= ulps, (f"LAZY_RESCALE changed {differ} of {eager.size} outputs by up to "
                                f"{float(diff.max()):.3g} (> 16 ulps, {ulps:.3g}): a rescale was skipped where "
                                "it was needed")


LAZY_KERNELS = """from solutions.paged_attention_common import SIG_PAGED, attention_kernel

KERNELS = {f"head{d}": (attention_kernel(d, "float16", 16, 4, lazy_rescale=True), SIG_PAGED) for d in (128, 80)}
"""


def test_lazy_rescale_votes_and_stays_in_registers(tmp_path):
    """lazy_rescale: a warp vote (vote.sync.any) decides the branch, and the group still fits in
    registers (no stack) at 128 and a ragged 80."""
    require_written()
    path = tmp_path / "paged_attention_lazy.py"
    path.write_text(LAZY_KERNELS)
    for label, rep in compiler.reports(path).items():
        assert "vote.sync.any" in rep.ptx, f"{label}: no warp vote with lazy_rescale"
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} B of stack with lazy_rescale"


# --- LANE_ELEMS = 8: a row spread over twice the lanes (the shared kernel's knob, read by the launch) ---

# Every head size in fp16 (group 4 in one block, the case the knob is for) and three in fp32, with the
# 8-byte and the 16-byte loads: 16 lanes a row at 128, a ragged 80 and 120, 32 lanes at 256.
SPREAD_SIZES = tuple((Config(2, 4, 1, d, 8, 19, "float16"), lw) for d in sol.HEAD_DIMS for lw in (1, 2)) \
    + tuple((Config(1, 4, 2, d, 8, 13, "float32"), 2) for d in (64, 80, 256))


@pytest.mark.parametrize("cfg, load_words", SPREAD_SIZES,
                         ids=[f"{c.cache_dtype}-{c.head_dim}-lw{lw}" for c, lw in SPREAD_SIZES])
def test_rows_spread_over_more_lanes(cfg, load_words, monkeypatch):
    """The launch with the shared kernel's LANE_ELEMS at 8 (each lane half the columns, one more
    butterfly step a dot product): the same answer at every head size and either load width."""
    require_written()
    common = g.target.launch_attention.__globals__
    monkeypatch.setitem(common, "LANE_ELEMS", 8)
    monkeypatch.setitem(common, "LOAD_WORDS", load_words)
    # The launch builds the spread kernel (not the default one under another name).
    kernel, lw = common["launched_kernel"](cfg.head_dim, cfg.cache_dtype, cfg.block_size, 4, common["NUM_WARPS"])
    assert kernel is common["attention_kernel"](cfg.head_dim, cfg.cache_dtype, cfg.block_size, 4, common["NUM_WARPS"],
                                                load_words=lw, lazy_rescale=common["LAZY_RESCALE"], lane_elems=8)
    g.run_and_compare("optimized", cfg, rtol=RTOL, parts=("spread", str(load_words)))


SPREAD_KERNELS = """from solutions.paged_attention_common import SIG_PAGED_WIDE, attention_kernel

KERNELS = {f"head{d}": (attention_kernel(d, "float16", 16, 4, load_words=2, lane_elems=8), SIG_PAGED_WIDE)
           for d in (128, 80, 256)}
"""


def test_rows_spread_over_more_lanes_take_fewer_registers(tmp_path):
    """Four heads a block at lane_elems 8 and 16-byte loads: at most 168 registers (3 blocks of 4
    warps an SM where the default takes 254 and 2), and no stack, at 128, a ragged 80 and 256."""
    require_written()
    path = tmp_path / "paged_attention_spread.py"
    path.write_text(SPREAD_KERNELS)
    for label, rep in compiler.reports(path).items():
        assert rep.stack_bytes == 0, f"{label}: {rep.stack_bytes} B of stack at lane_elems 8"
        assert rep.registers <= 168, f"{label}: {rep.registers} registers at lane_elems 8 (3 blocks an SM need <= 168)"
