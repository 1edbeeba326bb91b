"""Day 59 grader: RMSNorm fused with the residual add, two kernels (naive) and one (optimized), float32
and float16 (sums in float32)."""

import functools

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(59)
sol = g.solution

# Rows that fill the block exactly (16 elements a thread, the row held in registers): exact counts. The
# simulator has one SM: BLOCKS_PER_SM blocks for 6 rows, each reading the weight once (3: +0.5 of a row
# read), or once a row where the weight is not held (WEIGHT_HELD = False).
TRAFFIC_SIZES = ((6, 4096), (6, 4096, "float16"))
traffic = functools.cache(lambda version, n: g.traffic(version, n))


def _with(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (2, 257),
    extra_cases={
        "mixed-dtypes": lambda xs: _with(xs, 0, xs[0].astype(np.float16)),
        "weight-float16-only": lambda xs: _with(xs, 2, xs[2].astype(np.float16)),
        "weight-one-short": lambda xs: _with(xs, 2, np.ascontiguousarray(xs[2][:-1])),
        "weight-as-a-row": lambda xs: _with(xs, 2, xs[2][None, :].copy()),
        "residual-one-row-short": lambda xs: _with(xs, 1, np.ascontiguousarray(xs[1][:-1])),
        "x-flat": lambda xs: _with(_with(xs, 0, xs[0].ravel().copy()), 1, xs[1].ravel().copy()),
        "eps-negative": lambda xs: _with(xs, 3, -1e-5),
        "no-columns": lambda xs: (xs[0][:, :0].copy(), xs[1][:, :0].copy(), xs[2][:0].copy(), xs[3]),
    },
)


def _run(version, *xs):
    g.require_implemented(version)
    return tuple(checking.to_host(a) for a in getattr(g.target, version)(*xs))


def _check(version, xs, what):
    out, new_residual = _run(version, *xs)
    want_out, want_res = sol.reference(*xs)
    checking.assert_matches(new_residual, want_res, name=f"{version}({what}) new_residual")
    checking.assert_matches(out, want_out, name=f"{version}({what}) out")
    return out, new_residual


@pytest.mark.parametrize("kind", sol.HARD_KINDS)
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_float16_hard_inputs(version, kind):
    """float16 rows of 4096 whose sum is ~300 everywhere: 300^2 = 9e4 is past float16's 65504, so a
    square or a sum of squares taken in float16 is inf (and out 0); rows of ~1e-3 (mean square below
    eps: eps belongs inside the sqrt); rows where residual = -x (new_residual 0, out 0, no NaN)."""
    xs = sol.hard_inputs(kind, (2, 4096))
    out, _ = _check(version, xs, f"float16 {kind}, 2 x 4096")
    assert np.isfinite(out).all(), f"{version}({kind}): out not finite: were the squares summed in float32?"
    if kind == "overflow":
        assert np.abs(out.astype(np.float32)).max() > 0.25, (
            f"{version}(overflow): out is ~0 everywhere: an inf sum of squares (float16) makes 1/sqrt 0")


@pytest.mark.parametrize("dtype", ("float32", "float16"))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_rows_of_length_one(version, dtype):
    """cols = 1: out = h / sqrt(h^2 + eps) * w, about +-w, for 9 rows (more rows than blocks)."""
    xs, seed = g.inputs((9, 1, dtype), version, "one")
    _check(version, xs, f"33 x 1 {dtype}, seed={seed}")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_view_off_the_16_byte_grid(version):
    """A device view x[1:] of rows of 1028 floats starts 4 bytes past a 16-byte boundary: 16-byte
    accesses must not be used on it (or must find the aligned body), and the result stays on the device."""
    g.require_implemented(version)
    (x, residual, weight, eps), seed = g.inputs((3, 1028), version, "view")
    x4 = np.concatenate([np.zeros(1, np.float32), x.ravel()])
    (d_x4,) = launch.to_device(x4)
    d_x = d_x4[1:].reshape(3, 1028)
    got = getattr(g.target, version)(d_x, residual, weight, eps)
    assert all(launch.is_device_array(a) for a in got), f"{version}: a device x in should give device arrays out"
    want = sol.reference(x, residual, weight, eps)
    checking.assert_matches(np.stack([checking.to_host(a) for a in got]), np.stack(want),
                            name=f"{version}(a view 4 bytes off, seed={seed})")


def _passes(version, n):
    """(reads, writes) of the row's bytes, from the simulator's sector counts."""
    t = traffic(version, n)
    rows, cols, dtype = sol.sizes(n)
    row_bytes = rows * cols * dtype.itemsize
    return 32 * t.global_load_sectors / row_bytes, 32 * t.global_store_sectors / row_bytes


@pytest.mark.parametrize("n", TRAFFIC_SIZES, ids=["float32", "float16"])
def test_fused_moves_the_minimum(n):
    """One kernel: x and residual read once (plus the weight once a block), new_residual and out
    written once: 2 reads + 2 writes of the row's bytes."""
    reads, writes = _passes("optimized", n)
    # the weight (a row's worth of bytes) once a block where it is held in registers, else once a row
    rows, cols, dtype = sol.sizes(n)
    per_sm = sol.BLOCKS_PER_SM16 if dtype == np.float16 else sol.BLOCKS_PER_SM
    held = dtype == np.float16 or sol.WEIGHT_HELD
    weight_reads = (min(rows, per_sm) if held else rows) / rows
    assert reads <= 2.05 + weight_reads, (
        f"optimized: {reads:.2f} reads of the row's bytes; x and residual once each (plus the weight once "
        "per block) is all the fused kernel needs: keep the sum in registers instead of reading it back")
    assert reads >= 1.95, f"optimized: only {reads:.2f} reads: both x and residual must be read"
    assert 1.95 <= writes <= 2.05, f"optimized: {writes:.2f} writes: new_residual and out, once each"


@pytest.mark.parametrize("n", TRAFFIC_SIZES, ids=["float32", "float16"])
def test_fused_moves_fewer_bytes_than_two_kernels(n):
    fused = traffic("optimized", n).global_bytes
    unfused = traffic("naive", n).global_bytes
    assert fused * 1.2 <= unfused, (
        f"optimized moves {fused} bytes, naive {unfused}: the fused kernel should save the round trip of "
        "new_residual (and the second sweep) at least")


def test_optimized_wide_loads():
    """float32 rows of a multiple of 4 go through 16-byte loads: a warp's request covers 512 bytes."""
    t = traffic("optimized", TRAFFIC_SIZES[0])
    assert t.sectors_per_load >= 12, (
        f"optimized: {t.sectors_per_load:.1f} sectors per load request; 16-byte loads (course.wide) give 16")


@pytest.mark.parametrize("label", ("optimized", "optimized.fp16"))
def test_optimized_in_registers(label):
    """The row and the weight in registers (no stack frame), the sum folded by shuffles with a barrier
    for the warps' slots, and the row's loads several in flight."""
    rep = g.report(label)
    assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.count("shfl.sync") > 0, f"{label}: no shfl.sync: fold the sum of squares with shuffles"
    assert rep.count("bar.sync") > 0, f"{label}: no bar.sync: the warps' sums meet in shared memory"
    assert rep.loads_in_flight >= 4, (
        f"{label}: at most {rep.loads_in_flight} global loads back to back: load the row's chunk into "
        "registers before the first store")


# float16 at awkward sizes: a multiple of 8 (the 16-byte path: one group, a group -1 / +1 past a block of
# groups, the held limit 4096), and lengths that are not (the 2-byte path: 8 +- 1, 4 mod 8, odd).
FP16_SIZES = ((3, 8), (2, 2040), (5, 2056), (2, 4096), (3, 7), (2, 9), (3, 1028), (2, 4104), (1, 4092))


@pytest.mark.parametrize("n", FP16_SIZES, ids=[f"{r}x{c}" for r, c in FP16_SIZES])
def test_float16_awkward_sizes(n):
    """float16 rows on the 16-byte path (cols a multiple of 8) and off it (the other path), both outputs."""
    g.run_and_compare("optimized", (n[0], n[1], "float16"))


def test_float16_16_byte_accesses():
    """The float16 kernel moves eight halves an access: ld.v4 / st.v4 (wide.load8 / store8), the row's four
    16-byte loads back to back, no stack frame; in the simulator a warp's load request covers 512 bytes."""
    rep = g.report("optimized.fp16")
    # 2 weight groups once, 2 x 2 row groups, 2 x 2 stores (new_residual, out)
    assert rep.count("vector ld/st") >= 10, (
        f"optimized.fp16: {rep.count('vector ld/st')} vector ld/st; expected >= 10: x, residual, weight and "
        "both outputs in 16-byte accesses of eight halves (course.wide.load8 / store8)")
    assert rep.loads_in_flight >= 4, f"optimized.fp16: {rep.loads_in_flight} loads back to back, expected 4"
    assert not rep.uses_local_memory, f"optimized.fp16: {rep.stack_bytes} bytes of stack"
    t = traffic("optimized", TRAFFIC_SIZES[1])
    assert t.sectors_per_load >= 12, (
        f"optimized (float16): {t.sectors_per_load:.1f} sectors per load request; 16-byte loads give 16")


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((4096, 4096), (4096, 4096, "float16"), (1024, 8192, "float16"), (2048, 5120),
                               (4099, 4088, "float16"), (4096, 4092, "float16")),
                         ids=["4k-fp32", "4k-fp16", "8k-fp16", "5k-fp32", "4088-fp16", "4092-fp16"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large(version, n):
    """Llama-sized rows: 4096 (held in registers), 5120 and 8192 (the chunked path)."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", sol.HARD_KINDS)
def test_float16_hard_inputs_large(kind):
    xs = sol.hard_inputs(kind, (1024, 4096))
    _check("optimized", xs, f"float16 {kind}, 1024 x 4096")


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((1024, 4096), (1024, 4096, "float16")), ids=["fp32", "fp16"])
def test_library_row(n):
    """torch's add + rms_norm, the row the targets compare with (skipped where torch is not installed)."""
    pytest.importorskip("torch")
    g.run_and_compare("library", n)
