"""The course's lab bench: everything the days share.

Importing ``course`` decides, once, whether kernels run on a CUDA GPU or in Numba's simulator, and
does so before numba is imported (numba reads the choice at import). Import it before numba:

    from course import cuda          # numba.cuda, on the GPU or the simulator
    from course import DEVICE        # where we run; DEVICE.describe() for a one-line banner

One concern a module:
    device     GPU or simulator                 simulator  warp intrinsics and teaching checks
    days       find and load a day              launch     validate inputs, move arrays, grid sizes
    checking   compare with the reference       bench      time versions on a GPU
    compiler   PTX and resource reports         cli        python -m course ...
    exercises  exercises from solutions         notebook   a notebook's TARGET: yours or the solution
    wide       16-byte loads and stores (float4)   flags      relaxed loads for polling another block
    prepared   a launch typed once, its arguments flattened by hand (host cost of a serving step)
    profiling  the top of a cProfile (tools/engine_profile.py, tools/host_profile.py)
    jit_cache  compiled kernels on disk, for bench_all's workers to compile ahead (--compile-ahead)
"""

from course.device import Device, choose

DEVICE: Device = choose()

from numba import cuda  # noqa: E402  (must follow the choice above)

if DEVICE.is_gpu:
    from course import gpu_memory as _gpu_memory  # noqa: E402

    _gpu_memory.install()
elif DEVICE.kind == "sim":
    from course import simulator as _simulator  # noqa: E402

    _simulator.install()

ON_GPU: bool = DEVICE.is_gpu

__all__ = ["DEVICE", "ON_GPU", "cuda"]
