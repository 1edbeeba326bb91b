"""Day 69 grader: GQA and MQA in FlashAttention (float16 in and out, fp32 sums).

The simulator grades the grouped Numba kernel (a block per group of query heads, warp w a head of the
group) at the unit's hard inputs with groups 1, 2, 3, 4 and 8, MHA and MQA; the expansion copy and the
expanded path; the K/V bytes the grouped kernel reads against the expanded path's (course.traffic);
the grouped CUDA C is compiled with nvcc (no GPU needed) and run on a GPU only.
"""

import functools

import numpy as np
import pytest

from course import launch
from course.grading import Grader

g = Grader(69)
sol = g.solution
OWN = ("expanded_fragments", "grouped_fragments")
# (dim, causal, group): group 4 and 8 -> 16 positions a block, group 2 -> 32, groups 1 and 3 -> 64
CONFIGS = ((128, False, 4), (128, True, 4), (64, True, 2), (64, False, 1), (96, True, 3), (32, False, 8))


@functools.cache
def build(dim: int, causal: bool, group: int) -> dict:
    return g.nvcc("grouped_source", dim, causal, group)


# ---- the simulator --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_grouped_fragments_matches_reference(n):
    """seq 1; fewer queries than keys and more (causal rows that see no key: zeros); a one-key causal
    window; a last key tile of one key; large logits; dims 32, 96, 128; groups 1 (MHA), 2 (2 heads x 32
    positions a block), 3 (1 head a block), 4 (MQA over 4 heads: 4 heads x 16 positions) and 8 (two
    blocks a group)."""
    g.run_and_compare("grouped_fragments", n)


@pytest.mark.parametrize("n", sol.EXPANDED_SIZES, ids=[str(n) for n in sol.EXPANDED_SIZES])
def test_expanded_fragments_matches_reference(n):
    """The copy, then day 67's kernel on every query head: heads 0-3 must read K/V heads 0, 0, 1, 1."""
    g.run_and_compare("expanded_fragments", n)


@pytest.mark.parametrize("shape", [(2, 2, 3, 32), (1, 3, 5, 64)], ids=["kv2-group3", "kv3-group2"])
def test_expand_kv_is_repeat_interleave(shape):
    """expand_kv(x, heads): head h is x's head h // group (torch's repeat_interleave(group, dim=1), not
    tile), every element of the (batch, heads, seq_k, dim) copy written."""
    g.require_implemented("expanded_fragments")
    b, kvh, sk, d = shape
    group = 3 if kvh == 2 else 2
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float16)
    got = g.target.expand_kv(launch.to_device(x)[0], kvh * group).copy_to_host()
    np.testing.assert_array_equal(got, np.repeat(x, group, axis=1),
                                  err_msg="expand_kv: head h must copy K/V head h // group")


def _cast(i, dtype):
    return lambda xs: xs[:i] + (xs[i].astype(dtype),) + xs[i + 1:]


BAD = {
    "q-float32": _cast(0, np.float32),
    "k-v-shapes-differ": lambda xs: (xs[0], xs[1], xs[2][:, :, :-1].copy(), xs[3]),
    "heads-not-a-multiple": lambda xs: (xs[0][:, :3].copy(), xs[1], xs[2], xs[3]),
    "dim-48": lambda xs: (xs[0][..., :48].copy(), xs[1][..., :48].copy(), xs[2][..., :48].copy(), xs[3]),
    "causal-not-bool": lambda xs: xs[:3] + (1,),
    "q-transposed-view": lambda xs: (xs[0].transpose(0, 2, 1, 3),) + xs[1:],
}
BAD_SIZE = (2, 4, 2, 3, 5, 64, False)  # heads 4 over 2 K/V heads: 3 of q's heads are not a multiple
test_rejects_bad_inputs = g.rejects_bad_inputs(BAD_SIZE, versions=OWN, extra_cases=BAD)


@pytest.mark.parametrize("version", ["expanded", "grouped"])
@pytest.mark.parametrize("case", ["q-float32", "heads-not-a-multiple", "dim-48", "causal-not-bool"])
def test_gpu_versions_reject_bad_inputs(version, case):
    """The tensor-core host functions validate before they touch CuPy (so this runs without a GPU)."""
    g.require_implemented("grouped_pieces", "expanded_fragments")
    inputs, _seed = g.inputs(BAD_SIZE, "bad")
    with pytest.raises(ValueError):
        getattr(g.target, version)(*BAD[case](tuple(inputs)))


def test_grouped_reads_kv_group_times_fewer_bytes():
    """At 16 positions and group 4 the grouped kernel is one block a K/V head (4 warps, 4 heads) and
    reads K and V once; the expanded path reads them for the copy, writes them 4 times and its kernel
    (one block a query head) reads the 4 copies. Counted in the simulator (32-byte sectors)."""
    b, h, kvh, sq, sk, d, _causal, _kind = sol.attention_common.geometry(sol.TRAFFIC_SIZE)
    group = h // kvh
    q_bytes = b * h * sq * d * 2
    kv_bytes = 2 * b * kvh * sk * d * 2
    exp = g.traffic("expanded_fragments", sol.TRAFFIC_SIZE)
    grp = g.traffic("grouped_fragments", sol.TRAFFIC_SIZE)
    exp_kv_reads = 32 * exp.global_load_sectors - q_bytes - kv_bytes  # less Q and the copy's own read
    grp_kv_reads = 32 * grp.global_load_sectors - q_bytes
    assert grp_kv_reads <= 1.1 * kv_bytes, (
        f"grouped_fragments: {grp_kv_reads:,d} bytes of K/V read, the group's K/V is {kv_bytes:,d}: each block "
        "must load every K/V tile once for all of its warps' heads")
    ratio = exp_kv_reads / max(grp_kv_reads, 1)
    assert ratio >= 0.9 * group, (
        f"grouped_fragments reads K/V only {ratio:.2f}x fewer bytes than the expanded path (expected ~{group}x "
        f"at group {group}): {grp_kv_reads:,d} against {exp_kv_reads:,d}")
    copy_written = 32 * exp.global_store_sectors - q_bytes  # the output has q's size
    assert copy_written >= group * kv_bytes, (
        f"expanded_fragments: {copy_written:,d} bytes written besides the output; the copy alone is "
        f"{group * kv_bytes:,d}")


def test_kernels_use_wide_copies_shuffles_and_barriers():
    """The copy moves 16 bytes a lane (ld/st.global.v4); the grouped kernel keeps day 67's quad
    shuffles, tile barriers and fp16 P."""
    copy = g.report("expanded_fragments.expand_kv")
    assert "ld.global.v4" in copy.ptx and "st.global.v4" in copy.ptx, (
        "expand_kv_kernel: expected 16-byte loads and stores (wide.load8 / wide.store8)")
    rep = g.report("grouped_fragments")
    assert rep.ptx.count("shfl.sync.bfly") >= 6 and rep.count("bar.sync") >= 2
    assert "cvt.rn.f16.f32" in rep.ptx


def test_grouped_pieces_map_blocks_and_warps():
    """Host side of piece (a) and BLOCK_ROWS: group 4 at the bench shape: (4096 / 16, 32 / 4, 8) blocks of
    16 positions; group 2: 32 positions; group 1: day 67's grid; group 8 (MQA 32 / 4 too): 4 heads a block."""
    g.require_implemented("grouped_pieces")
    for group, rows in ((4, 16), (8, 16), (2, 32), (1, 64), (3, 64)):
        pieces = g.target.grouped_pieces(group)
        assert pieces.block_rows == rows, f"grouped_pieces({group}).block_rows = {pieces.block_rows}, expected {rows}"
        heads = 24 if group == 3 else 32
        kv_heads = heads // group
        grid = tuple(pieces.grid(8, heads, kv_heads, 4096))
        expected = (4096 // rows, heads * rows // 64, 8)
        assert grid == expected, (
            f"grouped_pieces({group}).grid(8, {heads}, {kv_heads}, 4096) = {grid}, expected {expected}")
    src = g.target.grouped_source(128, True, 4)
    assert "#define BLOCK_ROWS 16" in src and "block_info(" in src and "warp_info(" in src


# ---- the grouped CUDA C, compiled (no GPU) ---------------------------------------------------------------

IDS = [f"dim{d}-{'causal' if c else 'full'}-group{gr}" for d, c, gr in CONFIGS]


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_grouped_source_builds_without_spills(config):
    """nvcc -arch=sm_90 per configuration: builds, no stack and no spills, <= 255 registers (two blocks
    of 128 threads an SM, as day 67's __launch_bounds__ says); the grouped pieces keep day 67's core."""
    b = build(*config)
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"grouped_source{config}: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} spilled\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"grouped_source{config}: {b['registers']} registers\n{b['log']}"
    ptx = b["ptx"]
    mma = ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert mma >= config[0], f"grouped_source{config}: {mma} mma.sync a tile, expected dim / 2 (Q K^T) + dim / 2 (P V)"
    assert "cp.async.cg.shared.global" in ptx


# ---- on a GPU -------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("version", ["expanded", "grouped"])
@pytest.mark.parametrize("n", sol.GPU_SIZES, ids=[str(n) for n in sol.GPU_SIZES])
def test_gpu_versions_match_reference(version, n):
    """The hard inputs, then group 8 in two blocks, MQA over 32 heads, 1000 x 1500 causal GQA, group 3
    at dim 96, large logits, 64 queries against 5000 keys, MHA over 16 heads."""
    g.require_implemented("grouped_pieces", "expanded_fragments")
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["expanded", "grouped"])
@pytest.mark.parametrize("n", sol.BENCH_SIZES[1:], ids=[str(n) for n in sol.BENCH_SIZES[1:]])
def test_gpu_versions_at_bench_size(version, n):
    g.require_implemented("grouped_pieces", "expanded_fragments")
    g.run_and_compare(version, (1,) + tuple(n[1:]))  # one batch of the bench shape: the reference is float64


@pytest.mark.gpu
def test_grouped_keeps_device_arrays_on_the_device():
    from course import checking

    g.require_implemented("grouped_pieces")
    (q, k, v, causal), _ = g.inputs((1, 8, 2, 200, 130, 128, True), "device")
    got = g.target.grouped(*launch.to_device(q, k, v), causal)
    assert not isinstance(got, np.ndarray), "grouped: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(q, k, v, causal), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name="grouped(device arrays)")


@pytest.mark.gpu
def test_grouped_fragments_at_a_larger_size():
    g.run_and_compare("grouped_fragments", (1, 8, 2, 300, 200, 128, True))


@pytest.mark.gpu
def test_library_within_its_tolerance():
    g.require_implemented(*OWN)
    g.run_and_compare("library", (1, 8, 2, 300, 200, 128, True))
