"""Day 70 grader: variable-length batches (packed sequences, cu_seqlens), float16 in and out.

The simulator grades the Numba kernel derived from day 67's (varlen_fragments) at the hard inputs of a
packed batch (a length-1 sequence, a sequence of exactly one tile beside a partial one, more keys than
queries per sequence and fewer, GQA, large logits, NaN rows past the last sequence), the unit's dense
interface (optimized) against attention_common, the padded version's repack kernel, and the input
checks of every version; the packed CUDA C (day 67's template with this day's piece (d)) is compiled
with nvcc; the tensor-core versions (padded, packed, optimized) run on a GPU only.
"""

import functools

import numpy as np
import pytest

from course import checking
from course.grading import Grader, seed_for
from solutions import attention_common

g = Grader(70)
sol = g.solution
CONFIGS = ((64, False), (128, True))  # dim 128 causal: the most registers


@functools.cache
def build(dim: int, causal: bool) -> dict:
    return g.nvcc("packed_source", dim, causal)


# ---- the packed batch in Numba (simulator) ---------------------------------------------------------------

@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_varlen_fragments_matches_reference(n):
    """A sequence of one token; lengths 1, 64 (one whole tile) and 9 (a partial tile, the NaN tail right
    after it); 5, 1 and 20 queries after 70, 9 and 20 keys (bottom-right causal per sequence: the packed
    totals 26 and 99 would shift it by 73); more queries than keys (rows that see none: zeros); scores
    ~1e4; GQA; head dims 32, 64, 128. Every buffer ends in NaN rows no output may see."""
    g.run_and_compare("varlen_fragments", n)


@pytest.mark.parametrize("n", sol.DENSE_TEST_SIZES, ids=[str(n) for n in sol.DENSE_TEST_SIZES])
def test_optimized_dense_matches_attention_common(n):
    """The unit's interface optimized(q, k, v, causal) on (batch, heads, seq, dim): batch uniform sequences."""
    g.require_implemented("varlen_fragments")
    q, k, v, causal = attention_common.make_inputs(n, seed=seed_for("day70", n, "dense"), dtype=np.float16)
    got = g.target.optimized(q, k, v, causal)
    checking.assert_matches(got, attention_common.reference(q, k, v, causal), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name=f"optimized{n}")


def _with(i, f):
    return lambda xs: xs[:i] + (f(xs[i]),) + xs[i + 1:]


def _cu(i, values):
    return _with(i, lambda a: np.asarray(values, dtype=np.int32))


BAD_SIZE = ((3, 4), (5, 4), 2, 1, 64, True)  # cu_seqlens_q [0, 3, 7], cu_seqlens_k [0, 5, 9]; 16 NaN rows each
BAD = {
    "cu_seqlens_q-int64": _with(3, lambda a: a.astype(np.int64)),
    "cu_seqlens_k-uint32": _with(4, lambda a: a.astype(np.uint32)),
    "cu_seqlens_q-not-from-0": _cu(3, [1, 3, 7]),
    "cu_seqlens_k-decreasing": _cu(4, [0, 6, 5]),
    "cu_seqlens_q-past-the-buffer": _with(3, lambda a: np.array([0, 3, 7 + sol.PAD_ROWS + 1], np.int32)),
    "cu_seqlens_k-past-the-buffer": _with(4, lambda a: np.array([0, 5, 9 + sol.PAD_ROWS + 1], np.int32)),
    "batch-mismatch": _cu(4, [0, 5]),
    "cu_seqlens-2d": _with(3, lambda a: a[None].copy()),
    "k-v-shapes-differ": lambda xs: (xs[0], xs[1], xs[2][:-1].copy()) + xs[3:],
    "heads-not-a-multiple": lambda xs: (np.concatenate([xs[0]] * 3, axis=1)[:, :3].copy(),
                                        np.concatenate([xs[1]] * 2, axis=1), np.concatenate([xs[2]] * 2, axis=1))
    + xs[3:],
    "dim-48": lambda xs: tuple(a[..., :48].copy() for a in xs[:3]) + xs[3:],
    "q-4d": _with(0, lambda a: a[None]),
    "q-float32": _with(0, lambda a: a.astype(np.float32)),
    "causal-not-bool": lambda xs: xs[:5] + (1,),
}
test_rejects_bad_inputs = g.rejects_bad_inputs(BAD_SIZE, versions=("varlen_fragments",), extra_cases=BAD)


@pytest.mark.parametrize("version", ["padded", "packed"])
@pytest.mark.parametrize("case", ["cu_seqlens_q-int64", "cu_seqlens_k-decreasing", "cu_seqlens_q-past-the-buffer",
                                  "batch-mismatch", "dim-48", "causal-not-bool"])
def test_tensor_core_versions_reject_bad_inputs(version, case):
    """padded and packed validate before they touch CuPy (so this runs without a GPU)."""
    g.require_implemented(version, "packed_seq_info_source")
    inputs, _seed = g.inputs(BAD_SIZE, "bad")
    with pytest.raises(ValueError):
        getattr(g.target, version)(*BAD[case](tuple(inputs)))


def test_optimized_rejects_bad_inputs():
    g.require_implemented("varlen_fragments")
    q, k, v, causal = attention_common.make_inputs((2, 2, 1, 3, 5, 64, True), 0, np.float16)
    for bad in ((q.astype(np.float32), k, v, causal), (q, k, v[:, :, :-1].copy(), causal), (q, k, v, 1),
                (q.transpose(0, 2, 1, 3), k, v, causal)):
        with pytest.raises(ValueError):
            g.target.optimized(*bad)


def test_repack_pads_and_unpads():
    """The padded version's repack kernel (simulator): each sequence's rows at the end of its padded
    rows for queries (left=True) or at the start for keys, zeros elsewhere, never a NaN of the tail;
    unpad gives back exactly the sequences' rows."""
    g.require_implemented("padded")
    (q, k, _v, cu_q, cu_k, _c), _seed = g.inputs(((3, 1, 5), (6, 2, 6), 2, 1, 32, True), "repack")
    for a, cu, left in ((q, cu_q, True), (k, cu_k, False)):
        lengths = np.diff(cu)
        m = int(lengths.max())
        p = g.target.pad(a, cu, m, left)
        assert p.shape == (3, a.shape[1], m, a.shape[2]), f"pad: shape {p.shape}"
        assert not np.isnan(p).any(), "pad: a NaN of the buffer's tail reached the padded copy"
        for b, n in enumerate(lengths):
            real = slice(m - n, m) if left else slice(0, n)
            rest = slice(0, m - n) if left else slice(n, m)
            np.testing.assert_array_equal(p[b][:, real], a[cu[b]:cu[b + 1]].transpose(1, 0, 2),
                                          err_msg=f"pad(left={left}): sequence {b}'s rows")
            assert not p[b][:, rest].any(), f"pad(left={left}): sequence {b}'s padding is not zeros"
        back = g.target.unpad(p, cu, int(cu[-1]), left)
        np.testing.assert_array_equal(back, a[:cu[-1]], err_msg="unpad: the sequences' rows")


def test_varlen_fragments_reads_only_the_sequences():
    """Counted in the simulator: one sequence of 9 tokens and two of 1 and 2 load the real
    sequences' q, k and v bytes (each query block loads its sequence's K/V once; 32-byte sectors) and cu_seqlens, far
    below what the batch padded to 3 x 9 rows would load. (The stores are day 67's fragment layout's.)"""
    n = ((9, 1, 2), (9, 1, 2), 1, 1, 32, False)
    t = g.traffic("varlen_fragments", n)
    inputs, _ = g.inputs(n, "traffic")
    q, k = inputs[0], inputs[1]
    row_q, row_k = q.shape[1] * q.shape[2] * 2, k.shape[1] * k.shape[2] * 2
    real = 12 * row_q + 2 * 12 * row_k
    padded = 3 * 9 * row_q + 2 * 3 * 9 * row_k
    cu_reads = 32 * 4 * sol.day67.WARPS * 3  # each warp of the 3 blocks reads 4 entries of cu_seqlens: a sector each
    loaded = 32 * t.global_load_sectors
    assert loaded <= real + cu_reads, (
        f"varlen_fragments: {loaded} bytes loaded for {real} bytes of the sequences' q, k, v and {cu_reads} of "
        f"cu_seqlens (padded to the longest: {padded})")


def test_varlen_fragments_keeps_the_decomposition():
    """Derived from day 67's kernel: the quad's xor shuffles, K/V tiles behind barriers, P in float16; the
    offsets read from cu_seqlens (32-bit global loads)."""
    rep = g.report("varlen_fragments")
    assert rep.ptx.count("shfl.sync.bfly") >= 6, "varlen_fragments: the quad reductions are day 67's"
    assert rep.count("bar.sync") >= 2 and rep.count("ld.shared") > 0, "varlen_fragments: K/V tiles in shared memory"
    assert "ld.global.s32" in rep.ptx or "ld.global.u32" in rep.ptx, "varlen_fragments: no int32 load of cu_seqlens"


def test_repack_moves_8_byte_words():
    """The repack kernel copies 8-byte words (four halves a lane: 256 bytes a warp at dim 128)."""
    rep = g.report("padded.repack")
    assert "ld.global.u64" in rep.ptx and "st.global.u64" in rep.ptx, "repack: expected 8-byte loads and stores"


# ---- the packed CUDA C, compiled (no GPU) -----------------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=[f"dim{d}-{'causal' if c else 'full'}" for d, c in CONFIGS])
def test_packed_source_builds_without_spills(config):
    """day 67's template with the packed piece (d): builds with nvcc for sm_90, no stack and no spills,
    <= 255 registers (two 128-thread blocks an SM, as day 67's __launch_bounds__ says)."""
    b = build(*config)
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"packed_source{config}: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} spilled\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"packed_source{config}: {b['registers']} registers\n{b['log']}"


def test_packed_source_reads_cu_seqlens():
    """Day 67's default reads global memory only by cp.async; the packed piece adds the int32 loads of
    cu_seqlens (4: the sequence's two offsets and two ends), and keeps the tensor-core instructions."""
    g.require_implemented("packed_seq_info_source")
    src = g.target.packed_source(128, True)
    assert "cu_seqlens_q[" in src and "cu_seqlens_k[" in src, "packed_source: seq_info does not index cu_seqlens"
    ptx = build(128, True)["ptx"]
    loads = sum(ptx.count(op) for op in ("ld.global.nc.u32", "ld.global.nc.s32", "ld.global.u32", "ld.global.s32",
                                         "ld.global.nc.v2.u32", "ld.global.nc.v2.s32"))
    assert loads >= 2, f"packed_source: {loads} 32-bit global loads: piece (d) must read cu_seqlens"
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 128, "packed_source: day 67's mma"


def test_padded_source_builds():
    g.require_implemented("packed_seq_info_source")
    from course import compiler

    if compiler.NVCC is None:
        pytest.skip("nvcc is not installed here")
    b = compiler.nvcc_build(sol.day67.flash_source(128, True, g.target.PADDED_PIECES))
    assert b["spill_stores"] == 0 and 0 < b["registers"] <= 255, b["log"]


# ---- on a GPU ---------------------------------------------------------------------------------------------

MIXED = sol.mixed_lengths(8, 16, 2048, seed=7)
LARGE = (
    ((1, 700, 64, 1000, 129), (1, 700, 64, 1000, 129), 8, 2, 128, True),
    ((300, 1, 77), (1500, 64, 200), 4, 4, 64, True),  # chunks of queries after long contexts
    ((1000, 333), (500, 333), 4, 1, 96, False),
    ((200, 50), (200, 80), 2, 2, 32, True, "large"),
    (MIXED, MIXED, 8, 2, 128, True),  # a mixed batch, 16 .. 2048
)


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["padded", "packed"])
@pytest.mark.parametrize("n", sol.TEST_SIZES + LARGE, ids=[str(n) for n in sol.TEST_SIZES + LARGE])
def test_tensor_core_versions_match_reference(version, n):
    g.require_implemented(version, "packed_seq_info_source")
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.DENSE_TEST_SIZES + ((2, 8, 2, 1000, 1500, 128, True), (3, 4, 4, 777, 333, 64, True)),
                         ids=str)
def test_optimized_dense_on_the_gpu(n):
    """On a GPU optimized reads the dense batch in place through the packed kernel's strides."""
    g.require_implemented("packed_seq_info_source")
    q, k, v, causal = attention_common.make_inputs(n, seed=seed_for("day70", n, "dense-gpu"), dtype=np.float16)
    checking.assert_matches(g.target.optimized(q, k, v, causal), attention_common.reference(q, k, v, causal),
                            rtol=sol.RTOL, floor=sol.ERROR_FLOOR, name=f"optimized{n}")


@pytest.mark.gpu
def test_packed_keeps_device_arrays_on_the_device():
    from course import launch

    g.require_implemented("packed_seq_info_source")
    inputs, _ = g.inputs(LARGE[1], "device")
    got = g.target.optimized_varlen(*launch.to_device(*inputs[:5]), inputs[5])
    assert not isinstance(got, np.ndarray), "packed: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(*inputs), rtol=sol.RTOL, floor=sol.ERROR_FLOOR,
                            name="packed(device arrays)")


@pytest.mark.gpu
def test_varlen_fragments_at_a_larger_size():
    g.run_and_compare("varlen_fragments", LARGE[1])


@pytest.mark.gpu
def test_library_within_its_tolerance():
    g.require_implemented("varlen_fragments")
    g.run_and_compare("library", LARGE[1])
