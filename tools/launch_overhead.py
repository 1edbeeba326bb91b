"""What a launch costs the host, on a GPU: microseconds a call for the operations a decode step is made of.

    python3 tools/launch_overhead.py [--json PATH]

A decode step of day 90's engine is ~25 small launches a layer, each far shorter on the GPU than the
host takes to issue it, so the step's time is the host's. This times each kind of call on its own,
1000 calls in a row with the GPU left to catch up only at the end (the host's rate, not the kernel's):
a Numba launch with Numba device arrays, the same launch handed CuPy arrays (each converted at the
call), a launch with day 89's eleven arguments, the same three through course.prepared (typed once,
arguments flattened by hand), Numba's allocation and slicing, and CuPy's elementwise, reduction and
matmul calls at a decode step's sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def per_call_us(fn, calls: int = 1000) -> float:
    from course import cuda

    for _ in range(10):
        fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    issued = time.perf_counter() - t0
    cuda.synchronize()
    return 1e6 * issued / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    from course import ON_GPU, cuda

    if not ON_GPU:
        print("launch_overhead needs a CUDA GPU (the simulator's launches cost something else entirely)")
        return 2
    import cupy
    import numpy as np
    from numba import float32

    from course.prepared import prepare

    @cuda.jit
    def three(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    @cuda.jit
    def eleven(o, m, s, q, k, v, t, n, scale, heads, pages):
        i = cuda.grid(1)
        if i < n.size:
            o[0, 0, 0, 0] = scale + heads + pages + t[0, 0] + k[0] + v[0] + q[0, 0, 0] + m[0, 0, 0] + s[0, 0, 0]

    n = 64 * 1024
    nb = [cuda.device_array(n, np.float32) for _ in range(3)]
    cp = [cupy.zeros(n, np.float32) for _ in range(3)]
    args11 = (cuda.device_array((64, 16, 1, 64), np.float32), cuda.device_array((64, 16, 1), np.float32),
              cuda.device_array((64, 16, 1), np.float32), cuda.device_array((64, 16, 64), np.float32),
              cuda.device_array(1 << 20, np.uint64), cuda.device_array(1 << 20, np.uint64),
              cuda.device_array((64, 20), np.int32), cuda.device_array(64, np.int32))
    x = cupy.ones((64, 1024), np.float32)
    w = cupy.ones((1024, 1536), np.float32)
    g = cupy.ones(1024, np.float32)
    rows = {
        "numba launch, 3 Numba arrays": lambda: three[n // 256, 256](*nb),
        "numba launch, 3 CuPy arrays": lambda: three[n // 256, 256](*cp),
        "numba launch, 11 arguments (day 89's)": lambda: eleven[(4, 64, 1), 128](*args11, float32(0.1), 4, 20),
        "numba launch configured ahead, 3 Numba arrays": (lambda k: lambda: k(*nb))(three[n // 256, 256]),
        "prepared launch (course.prepared), 3 Numba arrays": (lambda k: lambda: k(*nb))(
            prepare(three, "void(float32[::1], float32[::1], float32[::1])")[n // 256, 256]),
        "prepared launch, 3 CuPy arrays": (lambda k: lambda: k(*cp))(
            prepare(three, "void(float32[::1], float32[::1], float32[::1])")[n // 256, 256]),
        "prepared launch, 11 arguments (day 89's)": (lambda k: lambda: k(*args11, np.float32(0.1), 4, 20))(
            prepare(eleven, "void(float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
                            "uint64[::1], uint64[::1], int32[:, ::1], int32[::1], float32, int32, int32)")
            [(4, 64, 1), 128]),
        "cuda.device_array (64, 16, 64)": lambda: cuda.device_array((64, 16, 64), np.float32),
        "numba device array slice a[lo:hi]": lambda: nb[0][256:4096],
        "numba device array .view / reshape": lambda: nb[0].reshape(256, 256),
        "cuda.as_cuda_array(CuPy array)": lambda: cuda.as_cuda_array(cp[0]),
        "cupy.asarray(Numba array)": lambda: cupy.asarray(nb[0]),
        "cupy elementwise x * y (64 x 1024)": lambda: x * x,
        "cupy mean(axis=-1) (64 x 1024)": lambda: x.mean(axis=-1, keepdims=True),
        "cupy rmsnorm as day 90 writes it": lambda: x / cupy.sqrt(cupy.mean(x * x, axis=-1, keepdims=True)
                                                                + np.float32(1e-5)) * g,
        "cupy matmul (64 x 1024) @ (1024 x 1536)": lambda: x @ w,
        "cupy.empty (64, 1024)": lambda: cupy.empty((64, 1024), np.float32),
    }
    result = {}
    for name, fn in rows.items():
        result[name] = per_call_us(fn)
        print(f"{name:48s} {result[name]:8.1f} us a call", flush=True)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
