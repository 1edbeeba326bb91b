"""Day 71 grader: the SwiGLU MLP, unfused (gate and up through memory) against one GEMM over the packed
gate/up weights with SiLU * up in its epilogue.

The simulator grades the Numba versions (unfused, fused) and the inputs checks; the fused tensor-core
CUDA C is compiled here with nvcc (it must build for sm_90 with no spills and hold mma.sync and the
epilogue's exponential), and both tensor-core versions run on a GPU only.
"""

import numpy as np
import pytest

from course.grading import Grader

g = Grader(71)
sol = g.solution
SIM = sol.SIM_VERSIONS
TRAFFIC_SIZE = (4, 8, 32)  # one tile and one k step of each GEMM: the difference is the intermediates


def fused_build() -> dict:
    g.require_implemented("swiglu_epilogue_source")
    return g.nvcc("fused_tensor_core_source")


# ---- the Numba versions (simulator) ---------------------------------------------------------------------

test_matches_reference = g.matches_reference(versions=SIM)


def _float32(i):
    return lambda xs: xs[:i] + (xs[i].astype(np.float32),) + xs[i + 1:]


def _replace(i, make):
    return lambda xs: xs[:i] + (make(xs),) + xs[i + 1:]


BAD = {
    "x-float32": _float32(0),  # the day takes float16 activations and weights
    "w-down-float32": _float32(3),
    "x-hidden-differs": _replace(0, lambda xs: np.ascontiguousarray(xs[0][:, :-1])),
    "w-up-inter-differs": _replace(2, lambda xs: np.ascontiguousarray(xs[2][:, :-1])),
    "w-down-not-transposed": _replace(3, lambda xs: np.ascontiguousarray(xs[3].T)),
    # concatenated [Wg | Wu]: (hidden, 2 inter), not the packed layout's (hidden, 2 ceil16(inter))
    "w-gate-up-concatenated": _replace(4, lambda xs: np.concatenate([xs[1], xs[2]], axis=1)),
    "w-gate-up-is-w-gate": _replace(4, lambda xs: xs[1]),
    "no-tokens": _replace(0, lambda xs: xs[0][:0].copy()),
}
test_rejects_bad_inputs = g.rejects_bad_inputs(n=(3, 17, 20), versions=SIM, extra_cases=BAD)


@pytest.mark.parametrize("version", ["tensor_cores_unfused", "tensor_cores_fused"])
@pytest.mark.parametrize("case", ["x-float32", "w-gate-up-concatenated", "w-down-not-transposed"])
def test_tensor_core_versions_reject_bad_inputs(version, case):
    """The tensor-core host functions validate before they touch CuPy (so this runs without a GPU)."""
    g.require_implemented("silu_mul_kernel" if version == "tensor_cores_unfused" else "swiglu_epilogue_source")
    inputs, _seed = g.inputs((3, 17, 20), "bad")
    with pytest.raises(ValueError):
        getattr(g.target, version)(*BAD[case](tuple(inputs)))


def test_large_gates_saturate():
    """Gates of +-30: silu(g) -> g for large g and -> 0 (not NaN) for very negative g."""
    g.require_implemented("fused")
    x, w_gate, w_up, w_down, _ = sol.make_inputs((2, 8, 16), seed=5)
    w_gate = (w_gate.astype(np.float32) * 30).astype(np.float16)
    inputs = (x, w_gate, w_up, w_down, sol.pack_gate_up(w_gate, w_up))
    from course import checking

    checking.assert_matches(g.target.fused(*inputs), sol.reference(*inputs), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name="fused(large gates)")


def test_fused_moves_fewer_bytes_than_unfused():
    """The day's idea, counted in the simulator on one tile of each GEMM: the fused version never writes
    gate and up (float32) nor reads them back: fewer bytes stored and fewer loaded than unfused, and at
    most half the stores."""
    unfused, fused = g.traffic("unfused", TRAFFIC_SIZE), g.traffic("fused", TRAFFIC_SIZE)
    assert fused.global_store_sectors <= 0.5 * unfused.global_store_sectors, (
        f"fused: {fused.global_store_sectors} sectors stored against unfused's {unfused.global_store_sectors}: "
        "write only h (float16) from the GEMM's registers, never gate and up")
    assert fused.global_load_sectors < unfused.global_load_sectors, (
        f"fused: {fused.global_load_sectors} sectors loaded against unfused's {unfused.global_load_sectors}: "
        "the epilogue reads nothing from memory")
    assert fused.global_bytes < unfused.global_bytes


def test_fused_epilogue_in_registers():
    """The fused kernel keeps day 47's register blocking (no stack, no spills), computes the
    exponential in the kernel (ex2 in the PTX) and stores float16 (cvt to f16)."""
    rep = g.report("fused")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory and rep.spill_stores == 0, (
        f"fused: {rep.stack_bytes} bytes of stack frame: index acc only in loops over range(TM) / range(TN // 2)")
    assert "ex2.approx" in rep.ptx, "fused: no ex2.approx in the PTX: silu's exp(-g) belongs in the epilogue"
    assert "cvt.rn.f16.f32" in rep.ptx, "fused: no float32 -> float16 conversion: h is stored as float16"


# ---- the fused tensor-core CUDA C, compiled (no GPU) -----------------------------------------------------

def test_fused_tensor_core_source_builds_without_spills():
    """nvcc -arch=sm_90: it builds, no stack frame, no spills, <= 255 registers (day 47's 128 accumulators
    plus the epilogue's few), <= 48 KB of static shared memory."""
    b = fused_build()
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"tensor_cores_fused: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} spilled: keep every "
        f"index into acc a compile-time constant (#pragma unroll)\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"tensor_cores_fused: {b['registers']} registers\n{b['log']}"
    assert b["smem"] <= 48 * 1024, f"tensor_cores_fused: {b['smem']} bytes of static shared memory"


def test_fused_tensor_core_source_has_the_epilogue():
    """Day 47's mma.sync loop kept, and the epilogue's instructions: the exponential (ex2), float16
    conversions, and no float32 stores (the GEMM writes only h)."""
    ptx = fused_build()["ptx"]
    mma = ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert mma >= 32, f"tensor_cores_fused: {mma} mma.sync.aligned.m16n8k16 in the PTX"
    assert "ex2.approx" in ptx, "tensor_cores_fused: no ex2.approx: silu needs exp(-g) (__expf)"
    assert "cvt.rn.f16" in ptx, "tensor_cores_fused: no cvt.rn.f16(x2).f32: h is stored as float16"
    assert "st.global.f32" not in ptx and "st.global.v2.f32" not in ptx, (
        "tensor_cores_fused: float32 stores in the PTX: the fused GEMM writes only h (float16)")


# ---- on a GPU -------------------------------------------------------------------------------------------

AWKWARD = ((1, 8, 16), (1, 37, 5), (33, 17, 20), (129, 133, 70), (130, 64, 130), (257, 520, 1000),
           (64, 4096, 1024))


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["tensor_cores_unfused", "tensor_cores_fused"])
@pytest.mark.parametrize("n", AWKWARD, ids=[str(n) for n in AWKWARD])
def test_tensor_core_versions_match_reference(version, n):
    """One token; hidden 8, 37, 17, 133 (x's rows not 16 bytes: padded for cp.async) and 520, 4096;
    inter 5 to 1000 (partial groups, odd inter: scalar fp16 stores; 1000: half2 stores, a partial last
    column tile)."""
    g.require_implemented("silu_mul_kernel" if version == "tensor_cores_unfused" else "swiglu_epilogue_source")
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["tensor_cores_unfused", "tensor_cores_fused"])
def test_tensor_core_versions_at_bench_size(version):
    """The 64-token Llama 3 8B MLP (4096 x 14336) on the GPU."""
    g.require_implemented("silu_mul_kernel" if version == "tensor_cores_unfused" else "swiglu_epilogue_source")
    g.run_and_compare(version, sol.BENCH_SIZES[1])


@pytest.mark.gpu
def test_tensor_cores_fused_keeps_device_arrays_on_the_device():
    from course import checking, launch

    g.require_implemented("swiglu_epilogue_source")
    inputs, _ = g.inputs((65, 72, 200), "device")
    got = g.target.tensor_cores_fused(*launch.to_device(*inputs))
    assert not isinstance(got, np.ndarray), "tensor_cores_fused: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(*inputs), rtol=sol.RTOL, floor=sol.ERROR_FLOOR,
                            name="tensor_cores_fused(device arrays)")


@pytest.mark.gpu
def test_numba_versions_at_a_larger_size():
    for version in SIM:
        g.run_and_compare(version, (257, 520, 1000))


@pytest.mark.gpu
def test_library_within_its_tolerance():
    from course import checking

    g.require_implemented(*SIM)
    inputs, seed = g.inputs((257, 520, 1000), "library")
    checking.assert_matches(checking.to_host(sol.library(*inputs)), sol.reference(*inputs),
                            rtol=sol.VERSION_RTOL["library"], floor=sol.ERROR_FLOOR, name=f"library (seed {seed})")
