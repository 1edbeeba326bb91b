"""Choose where kernels run -- a real CUDA GPU or Numba's CUDA simulator -- once, before numba loads.

Numba reads NUMBA_ENABLE_CUDASIM when it is first imported, so the choice has to be made before
anything imports numba. We ask the CUDA driver directly through ctypes (cuInit + cuDeviceGetCount):
that is cheap, needs no numba, and answers "is there a usable GPU" the same way numba would.

COURSE_DEVICE=gpu|sim forces the choice (gpu with no usable GPU is an error).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    kind: str  # "gpu", "sim", or "compile" (real numba.cuda compiler, no launches: course.compiler's worker)
    name: str  # "NVIDIA H200" or "Numba CUDA simulator"
    compute_capability: tuple[int, int] | None
    reason: str  # why this choice was made

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    def describe(self) -> str:
        """One line for the first line of every command's output."""
        if self.is_gpu:
            major, minor = self.compute_capability
            return f"{self.name} (cc {major}.{minor})"
        return f"no CUDA GPU: Numba CUDA simulator on the CPU (timings need a GPU) [{self.reason}]"


def _probe_driver() -> tuple[str, tuple[int, int]] | str:
    """Return (name, cc) of device 0, or a string saying why there is no usable GPU."""
    names = ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return "no CUDA driver library"
    if lib.cuInit(0) != 0:
        return "the CUDA driver did not initialise"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return "the CUDA driver sees no device"
    dev = ctypes.c_int(0)
    if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return "cuDeviceGet failed"
    buf = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(buf, 256, dev)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
    return buf.value.decode(errors="replace"), (major.value, minor.value)


def choose() -> Device:
    """Decide GPU or simulator and set NUMBA_ENABLE_CUDASIM accordingly. Idempotent."""
    forced = os.environ.get("COURSE_DEVICE", "").strip().lower()
    if forced not in ("", "gpu", "sim", "compile"):
        raise SystemExit(f"COURSE_DEVICE must be 'gpu' or 'sim', got {forced!r}")
    if forced == "compile":
        device = Device("compile", "PTX compiler (no launches)", (9, 0), "COURSE_DEVICE=compile")
    elif forced == "sim":
        device = Device("sim", "Numba CUDA simulator", None, "COURSE_DEVICE=sim")
    else:
        probe = _probe_driver()
        if isinstance(probe, str):
            if forced == "gpu":
                raise SystemExit(f"COURSE_DEVICE=gpu but {probe}")
            device = Device("sim", "Numba CUDA simulator", None, probe)
        else:
            name, cc = probe
            device = Device("gpu", name, cc, "COURSE_DEVICE=gpu" if forced else "driver probe")
    want = "1" if device.kind == "sim" else "0"
    if "numba.core.config" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != want:
        raise RuntimeError(
            "numba was imported before course decided between GPU and simulator; "
            "import course first (tests/conftest.py, the CLI and the notebooks do)"
        )
    os.environ["NUMBA_ENABLE_CUDASIM"] = want
    # A CuPy array handed to a Numba kernel carries its stream in __cuda_array_interface__ (the legacy
    # default stream, 1), and Numba synchronises that stream at every launch unless told not to: the
    # host then waits for the GPU to drain before each such launch, and a step of many small kernels
    # costs host time + GPU time instead of the longer of the two. Every launch and CuPy operation of
    # the course goes to the legacy default stream (day 50's streams are blocking ones, ordered against
    # it), so the order that synchronisation would protect is already the stream's. Set it to 1 to
    # restore Numba's default.
    os.environ.setdefault("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "0")
    return device
