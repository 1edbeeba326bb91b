"""Day 67 grader: FlashAttention-2's forward on the tensor cores (float16 in and out, fp32 sums).

The simulator grades the Numba kernel that has the tensor-core kernel's decomposition (fragments) at
the unit's hard inputs, and both host functions' input checks; the CUDA C of the tensor-core kernel
(flash_source) is compiled here with nvcc for every configuration it supports (no GPU needed: builds,
no spills, the day's instructions in the PTX) and run on a GPU only.
"""

import functools
import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(67)
sol = g.solution
OWN = ("fragments",)
CONFIGS = ((32, False), (64, False), (64, True), (96, False), (128, False), (128, True))


@functools.cache
def build(dim: int, causal: bool) -> dict:
    return g.nvcc("flash_source", dim, causal)


# ---- the decomposition in Numba (simulator) -----------------------------------------------------------

@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_fragments_matches_reference(n):
    """seq 1; fewer queries than keys and more (causal rows that see no key: zeros); a row whose causal
    window holds one key; GQA 4 / 2 and MQA; a last key tile of one key; scores ~1e4 ("large": only a
    running max survives); head dims 32, 64, 96, 128."""
    g.run_and_compare("fragments", n)


def _cast(i, dtype):
    return lambda xs: xs[:i] + (xs[i].astype(dtype),) + xs[i + 1:]


BAD = {
    "q-float32": _cast(0, np.float32),  # this day takes float16 (days 65-66 take float32)
    "v-float32": _cast(2, np.float32),
    "k-v-shapes-differ": lambda xs: (xs[0], xs[1], xs[2][:, :, :-1].copy(), xs[3]),
    "heads-not-a-multiple": lambda xs: (np.concatenate([xs[0]] * 3, axis=1)[:, :3].copy(),
                                        np.concatenate([xs[1]] * 2, axis=1), np.concatenate([xs[2]] * 2, axis=1),
                                        xs[3]),
    "dim-48": lambda xs: (xs[0][..., :48].copy(), xs[1][..., :48].copy(), xs[2][..., :48].copy(), xs[3]),
    "causal-not-bool": lambda xs: xs[:3] + (1,),
    "q-transposed-view": lambda xs: (xs[0].transpose(0, 2, 1, 3),) + xs[1:],
}
BAD_SIZE = (2, 2, 1, 3, 5, 64, False)  # batch and seq_q > 1: a strided or transposed view is not contiguous
test_rejects_bad_inputs = g.rejects_bad_inputs(BAD_SIZE, versions=OWN, extra_cases=BAD)


@pytest.mark.parametrize("case", ["q-float32", "k-v-shapes-differ", "dim-48", "causal-not-bool", "q-transposed-view"])
def test_tensor_cores_rejects_bad_inputs(case):
    """The tensor-core host function validates before it touches CuPy (so this runs without a GPU)."""
    g.require_implemented("flash_source")
    inputs, _seed = g.inputs(BAD_SIZE, "bad")
    with pytest.raises(ValueError):
        g.target.tensor_cores(*BAD[case](tuple(inputs)))


def test_fragments_reduces_rows_over_the_quad():
    """The row max and the row sum reduced with xor shuffles (the quad's 4 lanes, as the mma layout
    needs), K/V tiles in shared memory behind barriers, float16 rounding of P (cvt to f16)."""
    rep = g.report("fragments")
    shfl = rep.ptx.count("shfl.sync.bfly")
    assert shfl >= 6, f"fragments: {shfl} shfl.sync.bfly in the PTX: the row max (2 a row) and sum (2 a row)"
    bars = rep.count("bar.sync")
    assert bars >= 2, f"fragments: {bars} barriers: one after the tile loads, one after their use"
    assert rep.count("ld.shared") > 0 and rep.count("st.shared") > 0, "fragments: K/V tiles through shared memory"
    assert "cvt.rn.f16.f32" in rep.ptx, "fragments: P rounded to float16 before P V (the mma's A operand)"


# ---- the tensor-core CUDA C, compiled (no GPU) ----------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=[f"dim{d}-{'causal' if c else 'full'}" for d, c in CONFIGS])
def test_flash_source_builds_without_spills(config):
    """nvcc -arch=sm_90 -cubin -Xptxas -v per configuration: builds, no stack frame and no spills (O's
    dim/2, S's 32 accumulators and Q's dim/4 fragment registers stay registers), <= 255 registers a
    thread: 2 blocks of 128 threads then fit an SM's 65,536 registers (the kernel's __launch_bounds__
    (128, 2) relies on it)."""
    b = build(*config)
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"flash_source{config}: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} spilled: every "
        f"index into the fragment arrays must be a compile-time constant (#pragma unroll)\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"flash_source{config}: {b['registers']} registers\n{b['log']}"


def test_flash_source_uses_the_tensor_core_instructions():
    """dim 128, causal: mma.sync m16n8k16 (dim/16 x 8 for Q K^T and 4 x dim/8 for P V a tile: 128),
    ldmatrix .x4 (Q, K) and .x4.trans (V), 16-byte cp.async in commit / wait groups, the quad's xor
    shuffles, a barrier a tile."""
    ptx = build(128, True)["ptx"]
    mma = ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert mma >= 128, f"flash_source: {mma} mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 in the PTX, 128 a tile"
    plain = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx))
    trans = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", ptx))
    assert plain >= 8 + 32, f"flash_source: {plain} ldmatrix .x4 (Q once: 8; K: 32 a tile)"
    assert trans >= 32, (
        f"flash_source: {trans} ldmatrix .x4.trans: V's (key, dim) tile must be transposed into the B fragment "
        "(two consecutive keys of one dim)")
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx), "flash_source: no 16-B cp.async"
    assert "cp.async.commit_group" in ptx and "cp.async.wait_group" in ptx, "flash_source: cp.async groups"
    shfl = ptx.count("shfl.sync.bfly")
    assert shfl >= 8, (
        f"flash_source: {shfl} shfl.sync.bfly: the row max and the row sum of both rows over the quad (xor 1, 2)")
    assert len(re.findall(r"\bbar\.sync\b|\bbarrier\.sync\b", ptx)) >= 1, "flash_source: no __syncthreads()"


def test_flash_source_is_a_template():
    """The pieces days 68-70 replace are the named functions of the source (replacing a piece with its
    own default text rebuilds the same kernel), and the kernel takes strides and cu_seqlens."""
    g.require_implemented("flash_source")
    src = g.target.flash_source(64, True)
    for name in ("block_info(", "key_tiles(", "tile_needs_mask(", "warp_info(", "seq_info("):
        assert name in src, f"flash_source: no {name[:-1]} (the template's pieces)"
    for arg in ("q_sb", "q_sh", "q_sr", "o_sr", "cu_seqlens_q", "cu_seqlens_k"):
        assert arg in src, f"flash_source: no kernel argument {arg}"
    assert "#define HEAD_DIM 64" in src and "#define CAUSAL 1" in src


# ---- on a GPU -------------------------------------------------------------------------------------------

LARGE = ((2, 8, 2, 1000, 1500, 128, True), (1, 4, 4, 1500, 1000, 64, True), (2, 4, 1, 777, 333, 96, False),
         (1, 2, 2, 300, 300, 32, True, "large"))


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.TEST_SIZES + LARGE, ids=[str(n) for n in sol.TEST_SIZES + LARGE])
def test_tensor_cores_matches_reference(n):
    """The hard inputs, then sizes past many tiles: 1000 x 1500 causal GQA (not multiples of 64), more
    queries than keys, MQA at dim 96, large logits at dim 32."""
    g.require_implemented("flash_source")
    g.run_and_compare("tensor_cores", n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES[1:2], ids=[str(n) for n in sol.BENCH_SIZES[1:2]])
def test_tensor_cores_at_bench_size(n):
    g.require_implemented("flash_source")
    g.run_and_compare("tensor_cores", (1,) + tuple(n[1:]))  # one batch of the bench shape: the reference is float64


@pytest.mark.gpu
def test_tensor_cores_keeps_device_arrays_on_the_device():
    from course import checking, launch

    g.require_implemented("flash_source")
    (q, k, v, causal), _ = g.inputs((1, 4, 2, 200, 130, 128, True), "device")
    got = g.target.tensor_cores(*launch.to_device(q, k, v), causal)
    assert not isinstance(got, np.ndarray), "tensor_cores: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(q, k, v, causal), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name="tensor_cores(device arrays)")


@pytest.mark.gpu
def test_fragments_at_a_larger_size():
    g.run_and_compare("fragments", (1, 4, 2, 300, 200, 128, True))


@pytest.mark.gpu
def test_library_within_its_tolerance():
    g.require_implemented(*OWN)
    g.run_and_compare("library", (1, 4, 2, 300, 200, 128, True))
