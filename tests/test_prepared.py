"""course.prepared: a kernel's launch with its arguments flattened by hand, as Numba's dispatcher would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course import cuda, launch
from course.prepared import prepare

ROOT = Path(__file__).resolve().parents[1]


@cuda.jit
def _axpy(out, x, y, a, n):  # out[i] = a * x[i] + y[i, 0] for i < n
    i = cuda.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i, 0]


_SIG = "void(float32[::1], float32[::1], float32[:, :], float32, int32)"


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n, dtype=np.float32), rng.standard_normal((n, 3), dtype=np.float32)


@pytest.mark.parametrize("n", [1, 33, 300])
def test_prepared_launch_computes_what_the_dispatcher_does(n):
    x, y3 = _inputs(n, seed=n)
    d_x, d_y3 = launch.to_device(x, y3)
    d_y = d_y3[:, 1:]  # a strided device view: the "A"-layout parameter takes it as it is
    out = launch.empty((n,), np.float32)
    prepare(_axpy, _SIG)[launch.blocks(n, 64), 64](out, d_x, d_y, np.float32(0.5), n)
    np.testing.assert_allclose(out.copy_to_host(), np.float32(0.5) * x + y3[:, 1], rtol=1e-6)


def test_prepared_is_made_once_per_kernel_and_signature():
    assert prepare(_axpy, _SIG) is prepare(_axpy, _SIG)
    p = prepare(_axpy, _SIG)
    assert p[1, 32] is p[1, 32]


@pytest.mark.parametrize("case, match", [
    ("four arguments", "expected 5 arguments"),
    ("float64 x", "argument 1"),
    ("2-D x", "argument 1"),
    ("float n", "integer"),
    ("string a", "scalar"),
])
def test_prepared_launch_refuses_what_the_signature_does_not_take(case, match):
    x, y = _inputs(4)
    d_x, d_y = launch.to_device(x, y)
    out = cuda.device_array(4, np.float32)
    args = {
        "four arguments": (out, d_x, d_y, np.float32(1)),
        "float64 x": (out, cuda.to_device(x.astype(np.float64)), d_y, 1.0, 4),
        "2-D x": (out, d_y, d_y, 1.0, 4),
        "float n": (out, d_x, d_y, 1.0, 4.0),
        "string a": (out, d_x, d_y, "1", 4),
    }[case]
    with pytest.raises(ValueError, match=match):
        prepare(_axpy, _SIG)[1, 32](*args)


def test_prepared_refuses_a_strided_view_for_a_c_layout_parameter():
    out = cuda.device_array(8, np.float32)
    x = cuda.to_device(np.arange(16, dtype=np.float32))[::2]
    y = cuda.to_device(np.zeros((8, 2), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        prepare(_axpy, _SIG)[1, 32](out, x, y, 1.0, 8)


def test_prepare_refuses_what_it_cannot_flatten():
    with pytest.raises(ValueError, match="C-contiguous"):
        prepare(_axpy, "void(float32[::1, :], float32[::1], float32[:, :], float32, int32)")
    with pytest.raises(ValueError, match="returns nothing"):
        prepare(_axpy, "int32(float32[::1], float32[::1], float32[:, :], float32, int32)")


_FLATTEN_CHECK = r"""
import ctypes, json, types
import numpy as np
import course  # COURSE_DEVICE=compile: the real numba.cuda, no driver needed for what follows
from numba.cuda.cudadrv import driver, devicearray
from numba.cuda import dispatcher
from numba.cuda.typing.typeof import typeof, Purpose
from numba.core import sigutils
from course.prepared import flatten, parse_signature

def device(shape, dtype, strides=None, ptr=0x7f0000001000):
    dtype = np.dtype(dtype)
    canon = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    mem = driver.MemoryPointer(None, ctypes.c_void_p(ptr), max(1, int(np.prod(shape))) * dtype.itemsize)
    return devicearray.DeviceNDArray(shape, strides or canon, dtype, gpu_data=mem)

class Fake:
    extensions = []

sig = "void(float32[:, :, ::1], uint64[::1], int32[:, ::1], float32[:, :], float32, int32, uint32, float64)"
args = (device((2, 3, 4), np.float32), device((10,), np.uint64, ptr=0x7f0000020000),
        device((2, 5), np.int32, ptr=0x7f0000030000), device((6, 2), np.float32, strides=(24, 4)),
        np.float32(0.25), 7, 3, 2.5)
argtypes, _ = sigutils.normalize_signature(sig)
numba_flat = []
for ty, a in zip(argtypes, args):
    dispatcher._Kernel._prepare_args(Fake, ty, a, 0, [], numba_flat)
ours = flatten(parse_signature(sig), args)
cupy_like = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x7f0000001000), shape=(2, 3, 4), size=24,
                                  strides=(48, 16, 4), dtype=np.dtype(np.float32))
as_cupy = flatten(parse_signature("void(float32[:, :, ::1])"), (cupy_like,))
def plain(v):
    return [type(v).__name__, v.value] if isinstance(v, ctypes._SimpleCData) else ["int", int(v)]
print(json.dumps({"numba": [plain(v) for v in numba_flat], "ours": [plain(v) for v in ours],
                  "cupy": [plain(v) for v in as_cupy], "numba_first": [plain(v) for v in numba_flat[:11]]}))
"""


def test_flattened_arguments_are_numbas_own():
    """The parameter list equals what numba-cuda's own launch builds (_Kernel._prepare_args) for the same
    arrays and scalars, field by field and ctypes type by type: run with the real numba.cuda on fake device
    pointers (no driver is called), and a CuPy-shaped array flattens like the Numba array it mirrors."""
    env = dict(os.environ, COURSE_DEVICE="compile", NUMBA_ENABLE_CUDASIM="0")
    proc = subprocess.run([sys.executable, "-c", _FLATTEN_CHECK], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ours"] == got["numba"]
    assert got["cupy"] == got["numba_first"]
    assert len(got["ours"]) == (5 + 6) + (5 + 2) + (5 + 4) + (5 + 4) + 4


@pytest.mark.gpu
def test_prepared_launch_takes_cupy_arrays_in_place():
    """On a GPU: CuPy arrays (a strided view among them) go straight to the kernel, no conversion, and the
    result equals the dispatcher's launch of the same kernel on the same arrays."""
    cupy = pytest.importorskip("cupy")
    n = 1000
    x, y3 = _inputs(n, seed=7)
    cx, cy3 = cupy.asarray(x), cupy.asarray(y3)
    ours, theirs = cupy.full(n, np.nan, np.float32), cupy.full(n, np.nan, np.float32)
    prepare(_axpy, _SIG)[launch.blocks(n, 64), 64](ours, cx, cy3[:, 1:], np.float32(0.5), n)
    _axpy[launch.blocks(n, 64), 64](theirs, cx, cy3[:, 1:], np.float32(0.5), np.int32(n))
    np.testing.assert_array_equal(ours.get(), theirs.get())
    np.testing.assert_allclose(ours.get(), np.float32(0.5) * x + y3[:, 1], rtol=1e-6)


def test_prepared_launches_keep_their_own_grids():
    """Two configurations of one kernel, launched alternately (and the kernel configured directly in
    between): each launch runs its own grid."""
    n_small, n_big = 40, 300
    x, y3 = _inputs(n_big, seed=3)
    d_x, d_y3 = launch.to_device(x, y3)
    p = prepare(_axpy, _SIG)
    small, big = p[1, 64], p[launch.blocks(n_big, 64), 64]
    for _ in range(2):
        out = launch.empty((n_big,), np.float32)
        small(out, d_x, d_y3[:, 1:], np.float32(1), n_small)
        _axpy[1, 32]  # the kernel configured elsewhere between the two launches
        big(out, d_x, d_y3[:, 1:], np.float32(1), n_big)
        np.testing.assert_allclose(out.copy_to_host(), x + y3[:, 1], rtol=1e-6)
