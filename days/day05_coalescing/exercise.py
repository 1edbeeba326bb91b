"""Day 05 exercise: coalescing -- kinetic energy of particles, e[i] = 0.5 * m[i] * (vx[i]^2 + vy[i]^2 + vz[i]^2).

The same particles are stored two ways (make_inputs returns both, as two buffers a simulation could
keep): an array of structs `aos` (n, 8), one 32-byte struct per particle with the fields
x, y, z, vx, vy, vz, m, q; and a struct of arrays `soa` (8, n), one contiguous row per field.

v1 naive      reads the AoS buffer: lane i of a warp loads aos[i, VX], 32 bytes after lane i-1, so
              each load instruction touches 32 sectors (1 KB) to use 128 bytes. The next three field
              loads hit those sectors in L1, but the whole 32-byte struct still crosses from HBM:
              half of every sector (x, y, z, q) is dead weight.
v2 optimized  reads the SoA buffer: four rows, each load a warp's 128 contiguous bytes. Only the
              16 bytes per particle the formula needs leave HBM.

Napkin math: the minimum is 16 bytes read + 4 written = 20 bytes per particle, 6 FLOPs; AoS moves
32 + 4 = 36. For n = 2^25 that is 671 MB (SoA) against 1.21 GB (AoS): at ~4.1 TB/s, 0.16 ms against
0.29 ms, so the best AoS can show is 56 % of the copy rate, measured in useful bytes.

What you write (each raises NotImplementedError with its hint until you do):
  energy_aos_kernel  a grid-stride loop reading aos[i, VX], aos[i, VY], aos[i, VZ], aos[i, M] (8 lines)
  energy_soa_kernel  the same grid-stride loop, indexing soa[field, i] (8 lines)
Everything else in this file is given. Grade with:  make check DAY=5
"""

import numpy as np

from course import cuda, launch

TITLE = "Coalescing: array of structs vs struct of arrays"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
TEST_SIZES = (1, 255, 257, 1021, 4099)  # one particle, a block -1 and +1, primes
BENCH_SIZES = (1 << 25,)  # 1 GB per layout: each is ~18x the 60 MB L2
BOUND = "memory"
THREADS = 256
FIELDS = ("x", "y", "z", "vx", "vy", "vz", "m", "q")
NFIELDS = len(FIELDS)  # 8 float32 = 32 bytes = one sector per particle
VX, VY, VZ, M = 3, 4, 5, 6  # the fields the kernel reads
HALF = np.float32(0.5)  # a float32 constant: a bare 0.5 would turn the arithmetic into float64


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    soa = rng.standard_normal((NFIELDS, n), dtype=np.float32)  # (fields, n)
    soa[M] = rng.uniform(0.5, 2.0, n).astype(np.float32)  # masses are positive
    aos = np.ascontiguousarray(soa.T)  # (n, fields): the same particles, one struct per row
    return aos, soa


def reference(aos, soa):
    v = aos[:, [VX, VY, VZ]].astype(np.float64)
    return (0.5 * aos[:, M].astype(np.float64) * np.sum(v * v, axis=1)).astype(np.float32)


def traffic(aos, soa):
    """(minimum bytes moved through device memory, floating-point operations): the four fields the
    formula needs and the result, whatever the layout; 6 FLOPs per particle."""
    n = aos.shape[0]
    return n * (4 * 4 + 4), 6 * n


@cuda.jit
def energy_aos_kernel(aos, out):  # aos: (n, 8)
    """Grid-stride over the particles: out[i] = HALF * aos[i, M] * (vx^2 + vy^2 + vz^2) with
    vx = aos[i, VX] and so on. Use HALF, not 0.5 (a Python float makes the arithmetic float64)."""
    raise NotImplementedError("Day 05: a grid-stride loop reading aos[i, VX], aos[i, VY], aos[i, VZ], aos[i, M] (8 "
                              "lines)")


@cuda.jit
def energy_soa_kernel(soa, out):  # soa: (8, n)
    """The same loop reading the SoA rows: soa[VX, i], soa[VY, i], soa[VZ, i], soa[M, i] (field
    first: neighbouring threads then read neighbouring floats)."""
    raise NotImplementedError("Day 05: the same grid-stride loop, indexing soa[field, i] (8 lines)")


KERNELS = {
    "naive": (energy_aos_kernel, "void(float32[:, ::1], float32[::1])"),
    "optimized": (energy_soa_kernel, "void(float32[:, ::1], float32[::1])"),
}


def _check(aos, soa):
    launch.check_array("aos", aos, dtype=np.float32, shape=(None, NFIELDS))
    launch.check_array("soa", soa, dtype=np.float32, shape=(NFIELDS, aos.shape[0]))


def naive(aos, soa):
    _check(aos, soa)
    (d_aos,) = launch.to_device(aos)  # only the layout this version reads crosses over
    n = aos.shape[0]
    out = launch.empty((n,), np.float32)
    energy_aos_kernel[launch.grid_stride_blocks(n, THREADS), THREADS](d_aos, out)
    return launch.result(out, aos, soa)


def optimized(aos, soa):
    _check(aos, soa)
    (d_soa,) = launch.to_device(soa)
    n = soa.shape[1]
    out = launch.empty((n,), np.float32)
    energy_soa_kernel[launch.grid_stride_blocks(n, THREADS), THREADS](d_soa, out)
    return launch.result(out, aos, soa)


_fused = {}


def _energy(vx, vy, vz, m):
    return HALF * m * (vx * vx + vy * vy + vz * vz)


def library(aos, soa):
    """The same formula as one fused CuPy kernel over the SoA rows (a row of the benchmark table)."""
    import cupy

    if "energy" not in _fused:
        _fused["energy"] = cupy.fuse(_energy)
    s = cupy.asarray(soa)
    return _fused["energy"](s[VX], s[VY], s[VZ], s[M])
