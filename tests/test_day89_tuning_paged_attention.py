"""Day 89 grader: PagedAttention with its knobs (block size, partition size, warps per block).

Inputs are day 78's: random non-contiguous block tables with garbage past each sequence's pages and
NaN in every slot no sequence owns, so a partition that reads past its context shows up. The kernels
are days 78 and 81's; the day's work is the launch (paged_attention) and the tuned split
(tuned_partition), so every test first asks for both.
"""

import functools
import re

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(89)
sol = g.solution
Config = sol.Config
RTOL = sol.RTOL  # float32 sums of exp-weighted terms, merged across warps and partitions in another order


def require_written():
    """Fail with the hint while the versions, or the launch and split they call, are still stubs."""
    g.require_implemented(*g.versions, "paged_attention", "tuned_partition")


test_matches_reference = g.matches_reference(rtol=RTOL)

# Every head size, four query heads a block, contexts 19 and 1 over pages of 8 (the tuned launch
# splits them in the simulator); fp32 rows of three sizes.
HEAD_DIM_SIZES = tuple(Config(2, 4, 1, d, 8, 19, "float16") for d in sol.HEAD_DIMS) \
    + tuple(Config(1, 4, 2, d, 8, 13, "float32") for d in (80, 120, 256))
_every_head_size = g.matches_reference(HEAD_DIM_SIZES, rtol=RTOL)


@functools.wraps(_every_head_size)
def test_every_head_size(version, n):
    require_written()
    _every_head_size(version, n)


HEAD_KNOBS = [(80, 8, 1), (80, 16, 4), (120, 0, 2), (256, 8, 2), (256, 24, 4)]


@pytest.mark.parametrize("head_dim,partition,warps", HEAD_KNOBS,
                         ids=[f"head{d}-partition{p}-warps{w}" for d, p, w in HEAD_KNOBS])
def test_head_sizes_with_every_knob(head_dim, partition, warps):
    """A ragged row (80, 120) and the widest (256) under splits of 1 to 3 pages and 1 to 4 warps."""
    require_written()
    xs, seed = g.inputs(Config(2, 4, 2, head_dim, 8, 21, "float16"), "head-knobs", partition, warps)
    got = g.target.paged_attention(*xs, partition=partition, num_warps=warps)
    checking.assert_matches(got, sol.reference(*xs), rtol=RTOL, floor=sol.ERROR_FLOOR,
                            name=f"head_dim {head_dim}, partition {partition}, {warps} warps (seed {seed})")


@pytest.mark.parametrize("head_dim", (48, 100, 512))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rejects_unsupported_head_dim(version, head_dim):
    """A head size outside the list is a ValueError naming the sizes there are, before any launch."""
    require_written()
    xs = sol.make_inputs(Config(1, 4, 1, head_dim, 8, 9, "float16"), seed=1)
    with pytest.raises(ValueError, match=re.escape(", ".join(map(str, sol.HEAD_DIMS)))):
        getattr(g.target, version)(*xs)


def _with_context(xs, s, value):
    lens = xs[4].copy()
    lens[s] = value
    return xs[:4] + (lens,) + xs[5:]


_rejects_bad_inputs = g.rejects_bad_inputs(
    sol.TEST_SIZES[0],
    extra_cases={
        "context-zero": lambda xs: _with_context(xs, 1, 0),
        "context-past-table": lambda xs: _with_context(xs, 0, xs[3].shape[1] * xs[1].shape[1] + 1),
        "value-dtype-differs": lambda xs: xs[:2] + (xs[2].astype(np.float16),) + xs[3:],
        "head-dim-mismatch": lambda xs: (np.ascontiguousarray(xs[0][:, :, :16]),) + xs[1:],
        "scale-not-finite": lambda xs: xs[:5] + (float("inf"),),
    },
)


@functools.wraps(_rejects_bad_inputs)
def test_rejects_bad_inputs(version, case):
    require_written()  # optimized checks its inputs before it calls tuned_partition
    _rejects_bad_inputs(version, case)


KNOBS = [(0, 1), (8, 1), (16, 2), (8, 4), (40, 2), (24, 8)]


@pytest.mark.parametrize("partition,warps", KNOBS, ids=[f"partition{p}-warps{w}" for p, w in KNOBS])
def test_every_setting_of_the_knobs_agrees(partition, warps):
    """One kernel, every knob: no split and splits of 1, 2, 3 and 5 pages (contexts 37, 1, 8, 9 end inside,
    at and past partition borders), 1 to 8 warps."""
    require_written()
    xs, seed = g.inputs(Config(4, 2, 1, 32, 8, 37, "float32"), "knobs", partition, warps)
    got = g.target.paged_attention(*xs, partition=partition, num_warps=warps)
    checking.assert_matches(got, sol.reference(*xs), rtol=RTOL, floor=sol.ERROR_FLOOR,
                            name=f"partition {partition}, {warps} warps (seed {seed})")


@pytest.mark.parametrize("knobs", [dict(partition=12), dict(partition=-8), dict(partition=16.0), dict(num_warps=3),
                                   dict(num_warps=0)],
                         ids=["partition-not-a-page-multiple", "partition-negative", "partition-not-an-int", "warps-3",
                              "warps-0"])
def test_rejects_bad_knobs(knobs):
    require_written()
    xs, _ = g.inputs(sol.TEST_SIZES[0], "bad-knobs")
    with pytest.raises(ValueError):
        g.target.paged_attention(*xs, **knobs)


def test_tuned_partition_fills_the_gpu():
    """On the H200 (132 SMs), counting blocks as the launch makes them: one per (sequence, KV head,
    chunk of up to MAX_GROUP heads of its group, partition)."""
    require_written()
    tuned = g.target.tuned_partition
    # bench: 8 seqs x 8 KV heads (4 heads per block) = 64 blocks; 8 partitions of 4096 make 512 (~4 per SM)
    assert tuned(8, 32, 8, 32768, 16, 132) == 4096
    assert tuned(64, 32, 32, 4096, 16, 132) == 0  # plain multi-head: 2048 blocks already, no split
    assert tuned(64, 32, 8, 4096, 16, 132) == 0  # GQA 4:1: 512 blocks, already ~4 per SM: no split
    assert tuned(16, 32, 8, 4096, 16, 132) == 1024  # 128 blocks: 4 partitions wanted, 4 of 1024 tokens
    assert tuned(4, 32, 8, 32768, 16, 132) == 2048  # day 81's shape: 32 blocks, 16 partitions of 2048
    assert tuned(2, 16, 2, 65536, 16, 132) == 1024  # group 8 = two blocks per KV head: 8 per partition
    for seqs, heads, kv_heads, ctx, bs in ((1, 8, 1, 100_000, 32), (3, 12, 4, 50_000, 8)):
        size = tuned(seqs, heads, kv_heads, ctx, bs, 132)
        blocks = seqs * heads // sol.heads_per_block(heads, kv_heads, sol.MAX_GROUP) * -(-ctx // size)
        # a power of two and whole pages, giving at least half the target's blocks
        assert size % bs == 0 and size & (size - 1) == 0, f"{size} tokens"
        assert 2 * blocks >= 132 * sol.BLOCKS_PER_SM, f"{size} tokens: {blocks} blocks"


def test_partition_kernel_merges_through_shared_memory():
    """Warps fold with shuffles and meet in shared memory behind one barrier; per-lane arrays stay in
    registers for every warp count, and the staging area grows with the warps (a head_dim row of floats
    per warp and head of the block), not with the context."""
    require_written()
    reports = {w: g.report(label) for w, label in ((2, "optimized.warps2"), (4, "optimized"),
                                                    (8, "optimized.warps8"))}
    for w, rep in reports.items():
        assert rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0, f"{w} warps: no shuffles or barrier"
        assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0
        assert rep.stack_bytes == 0, f"{w} warps: {rep.stack_bytes} B of stack (per-lane arrays spilled)"
    assert reports[2].shared_bytes < reports[4].shared_bytes < reports[8].shared_bytes
    for w, rep in reports.items():
        staging = w * sol.MAX_GROUP * 128 * 4  # (warps, heads * head_dim) floats
        # + each warp's maxima and sums, and the 1 KB sm_90 reserves for the system in every block
        assert staging <= rep.shared_bytes <= staging + 2048, f"{w} warps: {rep.shared_bytes} B of shared"


READ_SIZES = [(Config(3, 8, 2, 32, 8, 21, "float16"), 8, 2, False),  # GQA 4:1, 3 of 4 partitions live
              (Config(3, 8, 2, 32, 8, 21, "float16"), 16, 1, True),  # the same over a dense cache
              (Config(2, 4, 1, 80, 8, 13, "float16"), 0, 2, False),  # a ragged row, no split
              (Config(2, 8, 1, 32, 4, 9, "float32"), 4, 2, False)]  # MQA, group 8: two blocks per KV head


@pytest.mark.parametrize("cfg,partition,warps,dense", READ_SIZES,
                         ids=[f"{'dense' if d else 'paged'}-head{c.head_dim}-partition{p}-warps{w}"
                              for c, p, w, d in READ_SIZES])
def test_read_only_walk_reads_every_live_row_once(cfg, partition, warps, dense):
    """tools/paged_bound.py's bound: the attention's grid and loads with only an integer sum of each word's
    halves. Every block's sum must equal NumPy's over exactly its live K and V rows: a dead row read, a
    row missed or a page of the wrong KV head changes it (and a block that wrote nothing keeps poison)."""
    require_written()
    xs, seed = g.inputs(cfg, "read-only", partition, warps, dense)
    _, kc, vc, tables, lens, _ = xs
    if dense:  # (num_seqs, num_kv_heads, capacity, head_dim): each sequence's tokens in order
        ids = np.clip(tables, 0, kc.shape[0] - 1)
        kc, vc = (np.ascontiguousarray(c[ids].reshape(len(lens), -1, cfg.num_kv_heads, cfg.head_dim)
                                       .transpose(0, 2, 1, 3)) for c in (kc, vc))
    got = g.target.read_pages(kc, vc, tables, lens, cfg.num_heads, partition=partition, num_warps=warps, dense=dense)
    want = sol.read_reference(kc, vc, tables, lens, cfg.num_heads, partition=partition, dense=dense)
    assert got.shape == want.shape, f"sums of shape {got.shape}, expected {want.shape}"
    assert want.any(), "the reference sums are all zero: the inputs say nothing"
    bad = np.argwhere(got != want)
    assert not bad.size, (f"seed {seed}: block (chunk, seq, partition) {tuple(int(v) for v in bad[0])} summed "
                          f"{got[tuple(bad[0])]}, expected {want[tuple(bad[0])]} ({len(bad)} blocks differ)")


def test_read_only_walk_keeps_its_words_in_registers():
    """The bound's kernel: the same shuffles and one barrier, no stack, and far fewer registers than the
    attention's (which is why tools/paged_bound.py also runs it capped at the attention's blocks per SM)."""
    require_written()
    rep, att = g.report("optimized.read"), g.report("optimized")
    assert rep.stack_bytes == 0 and rep.count("shfl.sync") > 0 and rep.count("bar.sync") > 0
    assert rep.registers < att.registers, f"read-only {rep.registers} registers, attention {att.registers}"


def test_reduce_kernel_needs_no_shared_memory():
    """The merge of partitions reads a few (max, sum) pairs per thread: broadcast loads, no barrier."""
    require_written()
    rep = g.report("optimized.reduce")
    assert rep.count("bar.sync") == 0 and rep.count("st.shared") == 0 and rep.stack_bytes == 0


GPU_CONFIGS = (
    Config(4, 32, 8, 128, 16, 16384, "float16"),  # the tuned launch splits: 32 blocks per partition
    Config(2, 8, 2, 128, 32, 5001, "float32"),
    Config(3, 16, 4, 64, 8, 3000, "float16"),
    Config(8, 32, 8, 80, 16, 16384, "float16"),  # phi-2's head size: a ragged row
    Config(8, 16, 8, 256, 16, 16384, "float16"),  # Gemma's
    Config(2, 12, 4, 120, 32, 5001, "float16"),
)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=[str(tuple(c)) for c in GPU_CONFIGS])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_long_contexts_on_gpu(version, cfg):
    g.run_and_compare(version, cfg, rtol=RTOL)


# LOAD_WORDS = 2 (the shared kernel's 16-byte loads, read by launch_attention), with the day's knobs:
# every head size in fp16 and in fp32 under a split and a warp count each.
WIDE_KNOBS = [(d, dtype, (0, 8, 16)[i % 3], (1, 2, 4)[(i + j) % 3]) for j, dtype in enumerate(("float16", "float32"))
              for i, d in enumerate(sol.HEAD_DIMS)]


@pytest.mark.parametrize("head_dim,dtype,partition,warps", WIDE_KNOBS,
                         ids=[f"{t}-head{d}-partition{p}-warps{w}" for d, t, p, w in WIDE_KNOBS])
def test_sixteen_byte_loads_with_every_knob(head_dim, dtype, partition, warps, monkeypatch):
    """16-byte loads (two adjacent words per load) agree with the reference under the knobs."""
    require_written()
    monkeypatch.setitem(g.target.launch_attention.__globals__, "LOAD_WORDS", 2)
    xs, seed = g.inputs(Config(2, 4, 2, head_dim, 8, 21, dtype), "wide", partition, warps)
    got = g.target.paged_attention(*xs, partition=partition, num_warps=warps)
    checking.assert_matches(got, sol.reference(*xs), rtol=RTOL, floor=sol.ERROR_FLOOR,
                            name=f"LOAD_WORDS = 2, {dtype} head_dim {head_dim}, partition {partition}, "
                                 f"{warps} warps (seed {seed})")
