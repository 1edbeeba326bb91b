"""Day 05 exercise: coalescing -- kinetic energy of particles, e[i] = 0.5 * m[i] * (vx^2 + vy^2 + vz^2).

The same particles come in two layouts: `aos` (n, 8), one 32-byte struct per particle with the
fields x, y, z, vx, vy, vz, m, q, and `soa` (8, n), one row per field. Write the two kernels; the
host functions are given (naive reads aos, optimized reads soa).
Grade with:  make check DAY=5
"""

import numpy as np

from course import cuda, launch

TITLE = "Coalescing: array of structs vs struct of arrays"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
THREADS = 256
FIELDS = ("x", "y", "z", "vx", "vy", "vz", "m", "q")
NFIELDS = len(FIELDS)  # 8 float32 = 32 bytes = one sector per particle
VX, VY, VZ, M = 3, 4, 5, 6  # the fields the kernel reads
HALF = np.float32(0.5)  # a float32 constant: a bare 0.5 would turn the arithmetic into float64



@cuda.jit
def energy_aos_kernel(aos, out):  # aos: (n, 8)
    """Grid-stride over the particles: out[i] = HALF * aos[i, M] * (vx^2 + vy^2 + vz^2) with
    vx = aos[i, VX] and so on. Use HALF, not 0.5 (a Python float makes the arithmetic float64)."""
    raise NotImplementedError("Day 05: a grid-stride loop reading aos[i, VX], aos[i, VY], aos[i, VZ], "
                              "aos[i, M] (7 lines)")


@cuda.jit
def energy_soa_kernel(soa, out):  # soa: (8, n)
    """The same loop reading the SoA rows: soa[VX, i], soa[VY, i], soa[VZ, i], soa[M, i] (field first:
    neighbouring threads then read neighbouring floats)."""
    raise NotImplementedError("Day 05: the same grid-stride loop, indexing soa[field, i] (7 lines)")


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
