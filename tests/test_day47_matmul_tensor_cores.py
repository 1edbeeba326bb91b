"""Day 47 grader: matrix multiply step 9, float16 inputs, fp32 accumulation, tensor cores through mma.sync.

The simulator cannot run tensor cores: it grades the FP32 Numba kernel on float16 loads (half_loads)
and the inputs checks; the CUDA C of the tensor-core kernel is compiled here with nvcc (no GPU needed:
it must build for sm_90 with no spills and hold the day's instructions), and run on a GPU only.
"""

import functools
import re

import numpy as np
import pytest

from course.grading import Grader

g = Grader(47)
sol = g.solution
OWN = ("half_loads",)  # the Numba kernel the learner writes; fp32_path is given (day 43 on widened inputs)
FULL_TILE = (sol.BM, sol.BN, 2 * sol.BK)  # one whole 128 x 128 tile, two k steps
RAGGED = (sol.BM + 1, sol.BN + 5, sol.BK + 5)  # two tile rows, two tile columns, a partial last k step
traffic = functools.cache(lambda version: g.traffic(version, FULL_TILE))


def tensor_core_build() -> dict:
    return g.nvcc("tensor_core_source")


# ---- the Numba FP32 path on float16 loads (simulator) ------------------------------------------------

SIZES = sol.TEST_SIZES + (RAGGED, (70, 9, 11), (9, 70, 11))


@pytest.mark.parametrize("n", SIZES, ids=[str(n) for n in SIZES])
def test_matches_reference(n):
    """half_loads at every test shape (K = 1, 37, 40, 67: partial last k steps; one row or one column;
    two ragged tiles each way; tall and wide), within the fp32 accumulation error of the fp16 product."""
    g.run_and_compare("half_loads", n, rtol=sol.tolerance(sol.sizes(n)[2]))


def test_fp32_path_still_matches():
    """The table's first row: the inputs widened to float32, then day 43's kernel (given code)."""
    g.require_implemented(*OWN)
    g.run_and_compare("fp32_path", (33, 35, 37), rtol=sol.tolerance(37))


def _float32(i):
    return lambda xs: xs[:i] + (xs[i].astype(np.float32),) + xs[i + 1:]


BAD = {
    "a-float32": _float32(0),  # this day takes float16: a float32 input is the other days' interface
    "b-float32": _float32(1),
    "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
    "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
    "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
}
test_rejects_bad_inputs = g.rejects_bad_inputs(versions=OWN, extra_cases=BAD)


@pytest.mark.parametrize("case", ["a-float32", "b-float32", "a-transposed-view", "no-rows"])
def test_tensor_cores_rejects_bad_inputs(case):
    """The tensor-core host function validates before it touches CuPy (so this runs without a GPU)."""
    g.require_implemented("tensor_core_source")
    (inputs, _seed) = g.inputs(sol.TEST_SIZES[-1], "bad")
    with pytest.raises(ValueError):
        g.target.tensor_cores(*BAD[case](tuple(inputs)))


def test_half_loads_outer_product_from_registers():
    """Day 43's register blocking kept: no stack, no spills, <= 255 registers, two barriers, at most
    0.3 shared loads per FMA; and the float16 values widened once per tile load (cvt.f32.f16 in the
    loads), not per FMA."""
    rep = g.report("half_loads")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"half_loads: {rep.stack_bytes} bytes of stack frame: index acc and the fragments only in loops over "
        "range(TM) / range(TN)")
    assert rep.spill_stores == rep.spill_loads == 0 and rep.registers <= 255, (
        f"half_loads: {rep.registers} registers, {rep.spill_stores}/{rep.spill_loads} spill stores/loads")
    assert rep.count("bar.sync") >= 2, f"half_loads: {rep.count('bar.sync')} barrier(s), two a k step needed"
    fmas = rep.ptx.count("fma.rn.f32")
    assert fmas >= sol.TM * sol.TN and rep.count("ld.shared") <= 0.3 * fmas, (
        f"half_loads: {rep.count('ld.shared')} shared loads for {fmas} FMAs: fragments once per kk, then TM x TN FMAs")
    widen = rep.ptx.count("cvt.f32.f16")
    assert 1 <= widen <= 2 * sol.LOADS_PER_THREAD, (
        f"half_loads: {widen} fp16 -> fp32 conversions in the PTX: widen each loaded element once, into the "
        "float32 tiles (the fragments and the FMAs are float32)")


def test_half_loads_read_half_the_bytes_of_b():
    """Counted on one full 128 x 128 tile: reading float16 halves the bytes of every B row a warp loads
    (2 sectors a request instead of 4; A's 16 bytes of 4 rows are still 4 sectors), and no widening pass:
    at least 20 % fewer sector bytes than fp32_path (widen + day 43), 27 % here."""
    g.require_implemented(*OWN)
    fp32, mine = traffic("fp32_path"), traffic("half_loads")
    assert mine.sectors_per_load <= 3.1, (
        f"half_loads: {mine.sectors_per_load:.2f} sectors per load request: read the float16 inputs directly "
        "(a warp's 32 halves of a row of B are 64 bytes, 2 sectors)")
    assert mine.global_bytes <= 0.8 * fp32.global_bytes, (
        f"half_loads: {mine.global_bytes:,} sector bytes against fp32_path's {fp32.global_bytes:,}")


# ---- the tensor-core CUDA C, compiled (no GPU) ---------------------------------------------------------

def test_tensor_core_source_builds_without_spills():
    """nvcc -arch=sm_90 -cubin -Xptxas -v: it builds, no stack frame and no spills (128 fp32
    accumulators a thread must stay registers), <= 255 registers, <= 48 KB of static shared memory."""
    b = tensor_core_build()
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"tensor_cores: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} bytes spilled: keep "
        f"every index into acc[4][8][4] and the fragments a compile-time constant (#pragma unroll)\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"tensor_cores: {b['registers']} registers a thread\n{b['log']}"
    assert b["smem"] <= 48 * 1024, f"tensor_cores: {b['smem']} bytes of static shared memory (48 KB at most)"


def test_tensor_core_source_uses_the_tensor_core_instructions():
    """The day's instructions in the PTX: mma.sync m16n8k16 with f32 accumulators on f16 inputs,
    ldmatrix .x4 for A and .x4.trans for B (B is (K, N) row-major: its fragments are columns), and
    cp.async 16-byte copies in commit / wait groups."""
    ptx = tensor_core_build()["ptx"]
    mma = ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert mma >= 32, f"tensor_cores: {mma} mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 in the PTX"
    plain = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx))
    trans = len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", ptx))
    assert plain > 0, "tensor_cores: no ldmatrix.sync.aligned.m8n8.x4.shared.b16 (the A fragments)"
    assert trans > 0, (
        "tensor_cores: no ldmatrix ... .x4.trans: B's tile is (K, N) row-major, and the mma's 'col' B fragment "
        "holds two consecutive k of one column n: ldmatrix must transpose each 8 x 8 matrix")
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx), (
        "tensor_cores: no cp.async.cg.shared.global of 16 bytes")
    assert "cp.async.commit_group" in ptx and "cp.async.wait_group" in ptx, (
        "tensor_cores: cp.async needs commit_group after each tile's copies and wait_group before the barrier "
        "that publishes the tile")
    assert len(re.findall(r"\bbar\.sync\b|\bbarrier\.sync\b", ptx)) >= 1, "tensor_cores: no __syncthreads()"


# ---- on a GPU -------------------------------------------------------------------------------------------

def run_tensor_cores(n) -> None:
    g.require_implemented("tensor_core_source")
    g.run_and_compare("tensor_cores", n, rtol=sol.tolerance(sol.sizes(n)[2]))


AWKWARD = ((1, 1, 1), (1, 37, 5), (33, 1, 40), (33, 35, 37), (129, 133, 37), (70, 9, 11), (9, 70, 11),
           (128, 128, 32), (256, 384, 96), (1021, 1023, 513))


@pytest.mark.gpu
@pytest.mark.parametrize("n", AWKWARD, ids=[str(n) for n in AWKWARD])
def test_tensor_cores_matches_reference(n):
    """Edge tiles every way: K = 1, 5, 11, 37 (less than one 32-deep tile, a partial last tile, K not a
    multiple of 8: the host pads), single rows and columns, N odd (scalar stores), exact tiles."""
    run_tensor_cores(n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((4096, 4096, 4104),),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((4096, 4096, 4104),)])
def test_tensor_cores_at_bench_size(n):
    """4096^3, 4093 x 4099 x 1021 (both inputs padded) and K = 4104 (not a multiple of 32) on the GPU."""
    run_tensor_cores(n)


@pytest.mark.gpu
def test_tensor_cores_keeps_device_arrays_on_the_device():
    """Device arrays in, a device array out (how the benchmark times the kernel alone)."""
    from course import checking, launch

    g.require_implemented("tensor_core_source")
    (a, b), _ = g.inputs((257, 259, 67), "device")
    got = g.target.tensor_cores(*launch.to_device(a, b))
    assert not isinstance(got, np.ndarray), "tensor_cores: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(a, b), rtol=sol.tolerance(67),
                            floor=sol.ERROR_FLOOR, name="tensor_cores(device arrays)")


@pytest.mark.gpu
def test_half_loads_at_a_large_awkward_size():
    g.run_and_compare("half_loads", (1021, 1023, 513), rtol=sol.tolerance(513))


@pytest.mark.gpu
def test_library_within_its_tolerance():
    """cuBLAS through CuPy (fp16 output, cast) passes at the awkward shape within VERSION_RTOL."""
    from course import checking

    g.require_implemented(*OWN)
    (a, b), seed = g.inputs(sol.BENCH_SIZES[1], "library")
    checking.assert_matches(checking.to_host(sol.library(a, b)), sol.reference(a, b),
                            rtol=sol.VERSION_RTOL["library"], floor=sol.ERROR_FLOOR, name=f"library (seed {seed})")
