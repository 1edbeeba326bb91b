"""Day 72 grader: one Llama block (RMSNorm, QKV, RoPE, causal GQA attention, output projection, residual,
fused add + RMSNorm, fused SwiGLU MLP, residual) composed of days 47, 59, 61, 67 and 71, and this day's
glue kernels (float16 casts and head reorders).

The simulator grades numba_block against the float64 NumPy block (one token with MQA; two sequences of 7,
whose positions restart, with GQA), the inputs checks of both versions, and the glue kernels' coalescing
(sectors a request, counted in the simulator); tensor_core_block, the torch row and kernel_shares run on
a GPU only.
"""

import numpy as np
import pytest

from course import launch, traffic
from course.grading import Grader

g = Grader(72)
sol = g.solution
SIM = sol.SIM_VERSIONS
GPU_SIZE = (2, 300, 512, 8, 2, 64, 1000)  # two sequences of 300 (not a multiple of 64), GQA 4:1 per group

test_matches_reference = g.matches_reference(versions=SIM)

# inputs: 0 x, 1 w_norm1, 2 w_q, 3 w_k, 4 w_v, 5 w_o, 6 w_norm2, 7 w_gate, 8 w_up, 9 w_down, 10 w_gate_up,
# 11 positions, 12 cos_sin_cache


def _replace(i, make):
    return lambda xs: xs[:i] + (make(xs),) + xs[i + 1:]


def _cols(a, k):
    return np.ascontiguousarray(a[:, :k])


BAD = {
    "x-float16": _replace(0, lambda xs: xs[0].astype(np.float16)),  # the residual stream is float32
    "x-2d": _replace(0, lambda xs: xs[0].reshape(-1, xs[0].shape[-1])),
    "w-q-float32": _replace(2, lambda xs: xs[2].astype(np.float32)),
    "w-norm1-float16": _replace(1, lambda xs: xs[1].astype(np.float16)),
    "w-q-not-whole-heads": _replace(2, lambda xs: _cols(xs[2], xs[2].shape[1] - 8)),
    "heads-not-multiple-of-kv": _replace(3, lambda xs: np.concatenate([xs[3], xs[3][:, :32]], axis=1)),
    "w-v-differs-from-w-k": _replace(4, lambda xs: _cols(xs[4], 32)),
    "w-o-transposed": _replace(5, lambda xs: np.ascontiguousarray(xs[5].T)),
    "w-down-transposed": _replace(9, lambda xs: np.ascontiguousarray(xs[9].T)),
    "w-gate-up-concatenated": _replace(10, lambda xs: np.concatenate([xs[7], xs[8]], axis=1)),
    "positions-flat": _replace(11, lambda xs: xs[11].reshape(-1)),
    "position-past-table": _replace(11, lambda xs: xs[11] + np.int32(xs[12].shape[0])),
    "dim-48-unsupported": _replace(12, lambda xs: np.zeros((64, 48), np.float32)),
}
test_rejects_bad_inputs = g.rejects_bad_inputs(extra_cases=BAD)


# ---- the glue kernels: coalesced (simulator traffic) --------------------------------------------------

def _glue_traffic(kernel: str, run):
    from course import ON_GPU

    if ON_GPU:
        pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
    g.require_implemented("numba_block")
    with traffic.record() as rec:
        run()
    return rec.kernel(kernel)


BATCH, SEQ, HEADS, DIM = 2, 5, 3, 32


def test_heads_first_is_coalesced():
    """A warp reads one 128-byte float32 row segment (4 sectors) and writes 64 bytes of float16 (2)."""
    src = np.random.default_rng(0).standard_normal((BATCH * SEQ, HEADS, DIM), dtype=np.float32)
    out = {}
    k = _glue_traffic("heads_first_kernel",
                      lambda: out.setdefault("o", g.target.heads_first(launch.to_device(src)[0], BATCH, SEQ)))
    got = out["o"].copy_to_host()
    want = src.reshape(BATCH, SEQ, HEADS, DIM).transpose(0, 2, 1, 3).astype(np.float16)
    assert np.array_equal(got, want), "heads_first: out[b, h, s, d] must be float16(src[b seq + s, h, d])"
    assert k.sectors_per_load <= 4.0 and k.sectors_per_store <= 2.0, (
        f"heads_first: {k.sectors_per_load:.1f} sectors a load request and {k.sectors_per_store:.1f} a store, "
        "expected 4 and 2 (a warp's 32 lanes on 32 consecutive elements of one row)")


def test_tokens_first_is_coalesced():
    """2-byte elements both ways: a warp's request is one 64-byte run, 2 sectors."""
    src = np.random.default_rng(1).standard_normal((BATCH, HEADS, SEQ, DIM)).astype(np.float16)
    out = {}
    k = _glue_traffic("tokens_first_kernel",
                      lambda: out.setdefault("o", g.target.tokens_first(launch.to_device(src)[0])))
    got = out["o"].copy_to_host()
    want = src.transpose(0, 2, 1, 3).reshape(BATCH * SEQ, HEADS * DIM)
    assert np.array_equal(got, want), "tokens_first: out[b seq + s, h dim + d] must be src[b, h, s, d]"
    assert k.sectors_per_load <= 2.0 and k.sectors_per_store <= 2.0, (
        f"tokens_first: {k.sectors_per_load:.1f} sectors a load request and {k.sectors_per_store:.1f} a store, "
        "expected 2 and 2")


def test_to_half_is_coalesced():
    src = np.random.default_rng(2).standard_normal((7, 48), dtype=np.float32)
    out = {}
    k = _glue_traffic("to_half_kernel", lambda: out.setdefault("o", g.target.to_half(launch.to_device(src)[0])))
    assert np.array_equal(out["o"].copy_to_host(), src.astype(np.float16))
    assert k.sectors_per_load <= 4.0 and k.sectors_per_store <= 2.0


# ---- GPU: the tensor-core block, the torch row, the shares ------------------------------------------------

def test_tensor_core_block_rejects_bad_inputs():
    """tensor_core_block validates before it needs a GPU (so this runs in the simulator too)."""
    g.require_implemented("tensor_core_block")
    inputs, _seed = g.inputs(sol.TEST_SIZES[-1], "bad")
    for case in ("x-float16", "w-o-transposed", "dim-48-unsupported"):
        with pytest.raises(ValueError):
            g.target.tensor_core_block(*BAD[case](tuple(inputs)))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [GPU_SIZE, (1, 1, 256, 4, 1, 128, 512)], ids=str)
def test_tensor_core_block_matches_reference(n):
    g.run_and_compare("tensor_core_block", n)


@pytest.mark.gpu
def test_library_matches_reference():
    pytest.importorskip("torch")
    from course import checking

    g.require_implemented("numba_block")
    inputs, seed = g.inputs(GPU_SIZE, "library")
    report = checking.compare(sol.library(*inputs), sol.reference(*inputs), rtol=sol.VERSION_RTOL["library"],
                              floor=sol.ERROR_FLOOR, min_scale=sol.MIN_SCALE, name="library")
    assert report.ok, f"{report.text} (seed {seed})"


@pytest.mark.gpu
def test_kernel_shares_sum_to_the_block():
    """Each step's CUDA-event time, summed, is the block's own time (within 25 %), and the shares sum to 1."""
    from course import bench

    g.require_implemented("tensor_core_block")
    n = sol.BENCH_SIZES[-1]
    shares = g.target.kernel_shares(n)
    assert tuple(shares) == sol.STEPS
    assert abs(sum(s for _, s in shares.values()) - 1.0) < 1e-6
    inputs = tuple(launch.to_device(a)[0] for a in sol.make_inputs(n, seed=0))
    with launch.no_poison():
        block_ms, _ = bench.Timer().time(g.target.tensor_core_block, *inputs, repeats=10)
    steps_ms = sum(ms for ms, _ in shares.values())
    assert 0.75 * block_ms < steps_ms < 1.25 * block_ms, (
        f"the steps sum to {steps_ms:.3f} ms, the block takes {block_ms:.3f} ms")
