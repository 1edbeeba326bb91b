"""Day 63 grader: int8 weight-only GEMV -- dequantize-then-GEMV, the float16 GEMV, and the int8 GEMV that
dequantizes in registers; every version against one float64 reference (the test scales make the float16
weights exactly the dequantized int8 ones)."""

import functools

import re

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(63)
sol = g.solution

# 16-byte rows (in a multiple of 16), whole row pairs, one full trip of four groups a lane.
TRAFFIC_SIZE = (8, 2048)
traffic = functools.cache(lambda version: g.traffic(version, TRAFFIC_SIZE))


def _with(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (3, 32),
    extra_cases={
        "scales-one-short": lambda xs: _with(xs, 1, np.ascontiguousarray(xs[1][:-1])),
        "scales-one-long": lambda xs: _with(xs, 1, np.concatenate([xs[1], xs[1][:1]])),
        "scales-per-column": lambda xs: _with(xs, 1, np.ones(xs[0].shape[1], np.float32)),
        "w-float16-not-int8": lambda xs: _with(xs, 0, xs[2].copy()),
        "w-uint8": lambda xs: _with(xs, 0, xs[0].view(np.uint8)),
        "w-flat": lambda xs: _with(xs, 0, xs[0].ravel().copy()),
        "w16-one-row-short": lambda xs: _with(xs, 2, np.ascontiguousarray(xs[2][:-1])),
        "x-one-short": lambda xs: _with(xs, 3, np.ascontiguousarray(xs[3][:-1])),
        "x-float32": lambda xs: _with(xs, 3, xs[3].astype(np.float32)),
        "no-columns": lambda xs: (xs[0][:, :0].copy(), xs[1], xs[2][:, :0].copy(), xs[3][:0].copy()),
    },
)


def _check(version, xs, what):
    g.require_implemented(version)
    got = getattr(g.target, version)(*xs)
    checking.assert_matches(got, sol.reference(*xs), rtol=sol.RTOL, floor=sol.ERROR_FLOOR, name=f"{version}({what})")


def extreme_inputs(cols):
    """Rows of -128 only, 127 only, -128/127 alternating, -1 only (255 if read as uint8), 1 only, and the
    whole int8 range at random; scales alternating between 2^-22 and 2^-9 (row i's own scale must be
    the one applied); x in {0.5, 1, 2}, so every product and sum is exact in float32."""
    rng = np.random.default_rng(cols)
    rows = [np.full(cols, -128), np.full(cols, 127), np.where(np.arange(cols) % 2 == 0, -128, 127),
            np.full(cols, -1), np.ones(cols), rng.integers(-128, 128, cols)]
    w = np.stack(rows).astype(np.int8)
    scales = np.array([2.0**-22 * 15, 2.0**-9 * 15, 2.0**-22 * 9, 2.0**-9 * 9, 2.0**-22 * 8, 2.0**-9 * 8],
                      np.float32)
    w16 = (w.astype(np.float32) * scales[:, None]).astype(np.float16)
    x = rng.choice([0.5, 1.0, 2.0], cols).astype(np.float16)
    return w, scales, w16, x


@pytest.mark.parametrize("cols", (32, 33, 1040))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_extreme_int8_values(version, cols):
    """-128 and 127 whole rows (the sign-bit edge of any unpacking trick), -1 (255 as uint8), scales four
    decades apart on neighbouring rows; both the 16-byte path (32, 1040) and the one-element path (33)."""
    _check(version, extreme_inputs(cols), f"extreme int8 rows, in={cols}")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_grid_strides_over_rows(version):
    """131 rows: more row pairs than the simulator's grid has warps, so every warp comes back for more."""
    xs, seed = g.inputs((131, 16), version, "stride")
    _check(version, xs, f"131 x 16, seed={seed}")


def test_optimized_kernel_any_block():
    """int8_gemv_kernel as its docstring states it, launched by hand with one warp a block and two
    blocks for three row pairs: 257 groups make three trips a lane, the last one mostly past the row's
    end (clamped, counted 0), and each block strides to a second row pair (its shared sums reused)."""
    g.require_implemented("optimized")
    (w, scales, w16, x), seed = g.inputs((5, 4112), "optimized", "one-warp")
    d_w, d_s, d_x = launch.to_device(w, scales, x)
    y = launch.empty((5,), np.float32)
    g.target.int8_gemv_kernel[2, 32](d_w.view(np.uint32), d_s, d_x.view(np.uint32), y)
    checking.assert_matches(checking.to_host(y), sol.reference(w, scales, w16, x), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name=f"int8_gemv_kernel[2, 32](5 x 4112, seed={seed})")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_x_off_the_16_byte_grid(version):
    """x as a device view 2 bytes past a 16-byte boundary: no 16-byte load may touch it (the one-element
    path, or a misaligned-address fault on the GPU); device arrays in, a device array out."""
    g.require_implemented(version)
    (w, scales, w16, x), seed = g.inputs((5, 64), version, "view")
    (d_x1,) = launch.to_device(np.concatenate([np.zeros(1, np.float16), x]))
    d_w, d_s, d_w16 = launch.to_device(w, scales, w16)
    got = getattr(g.target, version)(d_w, d_s, d_w16, d_x1[1:])
    assert launch.is_device_array(got), f"{version}: device arrays in should give a device array out"
    checking.assert_matches(checking.to_host(got), sol.reference(w, scales, w16, x), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name=f"{version}(x 2 bytes off, seed={seed})")


def _weight_bytes(version, x_reads=1):
    """Bytes loaded, less x x_reads times a warp (a warp per ROWS rows reads all of x; on the GPU the
    re-reads are L1/L2 hits) and one 32-byte sector a row for its scale: the weights' share."""
    t = traffic(version)
    out, cols = TRAFFIC_SIZE
    warps = -(-out // g.target.ROWS)
    return 32 * t.global_load_sectors - x_reads * warps * 2 * cols - 32 * out


def test_optimized_reads_each_weight_byte_once():
    """The int8 GEMV loads out * in bytes of weights (one byte each, once) and writes only y.

    x may count twice here: a lane's 16 weights need 32 bytes of x, two 16-byte loads whose warp
    requests each touch 32 sectors, half of each (the second an L1 hit on the GPU)."""
    out, cols = TRAFFIC_SIZE
    weights = _weight_bytes("optimized", x_reads=2) / (out * cols)
    assert weights <= 1.05, (
        f"optimized: {weights:.2f} bytes loaded per weight (beyond x twice a warp); the int8 GEMV should read "
        "each weight byte once: dequantize in registers, never through a float16 copy in memory")
    most = _weight_bytes("optimized", x_reads=1) / (out * cols)
    assert most >= 0.95, f"optimized: only {most:.2f} bytes per weight: every weight must be read"
    t = traffic("optimized")
    stores = t.global_store_sectors * 32
    assert stores <= 32 * out, f"optimized: {stores} bytes stored; only y ({4 * out} bytes) should be written"
    assert t.sectors_per_load >= 12, (
        f"optimized: {t.sectors_per_load:.1f} sectors per load request; 16-byte loads (16 int8 a lane) give 16")


def test_fp16_reads_two_bytes_a_weight():
    out, cols = TRAFFIC_SIZE
    weights = _weight_bytes("fp16_gemv") / (out * cols)
    assert 1.95 <= weights <= 2.1, f"fp16_gemv: {weights:.2f} bytes per weight loaded; float16 weights are 2"
    assert traffic("fp16_gemv").sectors_per_load >= 12, "fp16_gemv: use 16-byte loads (8 halves a lane)"


def test_naive_moves_the_weights_three_times():
    """naive: the int8 read (1 B), the float16 copy written (2 B) and read back (2 B): five bytes a weight."""
    out, cols = TRAFFIC_SIZE
    t = traffic("naive")
    stores = 32 * t.global_store_sectors / (out * cols)
    assert stores >= 1.95, f"naive: {stores:.2f} bytes stored per weight: it writes the float16 copy (2 B)"
    total = t.global_bytes / (out * cols)
    assert total >= 4.9, f"naive: {total:.2f} bytes per weight through memory; expected ~5 plus x"


@pytest.mark.parametrize("label", ("fp16_gemv", "optimized"))
def test_wide_loads_shuffles_registers(label):
    """16-byte vector loads, the rows' sums folded by warp shuffles, everything in registers (no stack),
    several loads in flight before the arithmetic."""
    rep = g.report(label)
    assert rep.count("vector ld/st") > 0, f"{label}: no ld.v4 in the PTX: load 16 bytes a lane (wide.load4)"
    assert rep.count("shfl.sync") > 0, f"{label}: no shfl.sync: fold the lanes' sums with warp shuffles"
    assert not rep.uses_local_memory, f"{label}: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.loads_in_flight >= 4, (
        f"{label}: at most {rep.loads_in_flight} loads back to back: load a trip's groups before multiplying")


def test_optimized_unpacks_without_conversions():
    """The weights become floats by the 2^23 trick, one byte permute a weight: prmt.b32 in the PTX for
    every weight of a trip, and no int->float conversion (cvt.rn.f32.s32 / .s8) on the weights."""
    ptx = g.report("optimized").ptx
    prmt = len(re.findall(r"\bprmt\.b32\b", ptx))
    per_trip = sol.ROWS * sol.INT8_UNROLL * sol.INT8_GROUP
    assert prmt >= per_trip, (
        f"optimized: {prmt} prmt.b32 in the PTX for {per_trip} weights a trip: assemble each weight's float "
        "bits with one cuda.libdevice.byte_perm (shift, mask and OR take three instructions)")
    conversions = len(re.findall(r"\bcvt\.rn\.f32\.[su](8|16|32)\b", ptx))
    assert conversions == 0, f"optimized: {conversions} int->float conversions (I2F): use the 2^23 trick"


def test_naive_dequantize_is_elementwise():
    rep = g.report("naive")
    assert rep.count("shfl.sync") == 0 and not rep.uses_local_memory


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((4099, 4104), (1, 14336)), ids=["4096x14336", "14336x4096",
                                                                                  "4099x4104", "1x14336"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large(version, n):
    """Llama-3-8B's projections, an odd row count on 16-byte rows, and one long row."""
    g.run_and_compare(version, n)


@pytest.mark.gpu
def test_library_row():
    """torch.mv on the float16 weights, the row the table compares with (skipped where torch is missing)."""
    pytest.importorskip("torch")
    g.run_and_compare("library", sol.BENCH_SIZES[0], rtol=sol.VERSION_RTOL["library"])
