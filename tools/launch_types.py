"""Which launches compile a kernel that the day's ``KERNELS`` does not compile ahead, without a GPU.

    python tools/launch_types.py [day ...]     # default: every day; exit 1 if any launch misses

``bench_all --compile-ahead`` has its workers compile each day's ``KERNELS`` entries at their
signatures, and the timing process loads them from disk, keyed by the argument types (course.jit_cache).
A launch whose argument types differ from the entry's (a Python int, typed int64, where the signature
says int32; a strided view where it says ``[::1]``) finds nothing there and compiles while it is timed:
1-3 s of a visit each. This runs each version of a day once in the simulator, on inputs moved to the
device as a benchmark moves them (at a test size: see below), records the argument types of every launch
as Numba would type them on a GPU (``typeof``: an array by dtype, dimensions and layout, a Python int
as int64), and names each launch of a ``KERNELS`` kernel whose types no entry of it compiles.

Kernels outside ``KERNELS`` (built in a factory at their first launch) are listed apart: compiling them
ahead needs an entry for the configuration the benchmark uses; so are versions the simulator cannot
run (tensor cores, CUDA C). The benchmark's sizes are too large to simulate: a day runs at the test
size most like its first benchmark size, and where none is alike (a dtype the test sizes lack, a row
width that picks another word type) a miss here may not be one there. On a GPU, bench_all names what
each day compiled while timed: that is the measurement, this the search for its causes.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import course  # noqa: E402
from course import days, launch  # noqa: E402


def launch_type(a):
    """The Numba type a GPU launch gives argument ``a`` (a simulator or device array, or a scalar)."""
    from numba import types, typeof
    from numba.np.numpy_support import from_dtype

    if isinstance(a, (bool, int, float, complex, np.generic)):
        return typeof(a)
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        host = np.asarray(getattr(a, "_ary", a))
        layout = "C" if host.flags.c_contiguous else "F" if host.flags.f_contiguous else "A"
        return types.Array(from_dtype(host.dtype), host.ndim, layout)
    return typeof(a)


def argtypes(sig) -> tuple:
    from numba.core import sigutils

    return tuple(sigutils.normalize_signature(sig)[0])


def kernel_key(fn):
    """What the disk cache tells kernels apart by, short of the types: the function's code and the
    contents of its closure (a factory's configuration), not the function object: a factory called
    with its defaults spelled out builds another object for the same kernel."""
    closure = getattr(fn, "__closure__", None) or ()
    try:
        return fn.__code__, pickle.dumps(tuple(cell.cell_contents for cell in closure))
    except Exception:  # contents that do not pickle: Numba could not key them either
        return fn


_SIM_CALL = None  # the simulator's own kernel call, kept by record_launches (a test puts it back)


def record_launches():
    """Patch the simulator's kernel call to record (python function, argument types) per launch."""
    from numba.cuda.simulator import kernel as sim_kernel

    global _SIM_CALL
    if _SIM_CALL is None:
        _SIM_CALL = sim_kernel.FakeCUDAKernel.__call__
    seen: list[tuple] = []
    call = _SIM_CALL

    def recording(self, *args):
        if not self._device:  # a launch, not a device function called from a kernel
            seen.append((self.fn, tuple(launch_type(a) for a in args)))
        return call(self, *args)

    sim_kernel.FakeCUDAKernel.__call__ = recording
    return seen


def all_entries() -> dict:
    """Every day's KERNELS entries, by kernel code: {code: [(day.entry, closure key, argument types)]}.
    A kernel a day borrows from an earlier day (day 31's use of day 29's scan) is compiled ahead by
    that day's worker, into the same cache."""
    entries: dict = {}
    for info in days.all_days():
        sol = days.load_solution(info.number)
        for name, (kernel, sig) in getattr(sol, "KERNELS", {}).items():
            try:
                types_ = argtypes(sig)
            except Exception as exc:  # a signature the host cannot parse: say so, not a miss
                types_ = f"unparsed: {exc}"
            entry = (f"{info.number:02d}.{name}", kernel_key(kernel.fn), types_)
            entries.setdefault(kernel.fn.__code__, []).append(entry)
    return entries


def _form(size):
    """What of a size decides the kernels' argument types: its strings and flags (a dtype's name,
    ragged or not) and the kinds of its numbers, not their values."""
    if isinstance(size, tuple):
        return (type(size).__name__,) + tuple(_form(s) for s in size)
    if isinstance(size, (str, bool, np.bool_)):
        return size
    return type(size).__name__


def _leaves(size) -> list:
    return [x for s in size for x in _leaves(s)] if isinstance(size, tuple) else [size]


def bench_like(sol):
    """The test size most like the benchmark's first size: of the same form (an fp16 cache where the
    benchmark's is fp16), then the most fields equal (a head of 128 where its head is 128: a factory
    builds one kernel a configuration); else the first test size. The benchmark's own is too large to
    simulate."""
    bench = sol.BENCH_SIZES[0]
    same = [t for t in sol.TEST_SIZES if _form(t) == _form(bench)]
    if not same:
        return sol.TEST_SIZES[0]
    return max(same, key=lambda t: sum(a == b for a, b in zip(_leaves(t), _leaves(bench))))


def check_day(number: int, seen: list, entries: dict) -> tuple[list[str], list[str]]:
    """(misses: launches of a KERNELS kernel at types no entry compiles, others: kernels outside
    KERNELS and versions the simulator cannot run)."""
    sol = days.load_solution(number)
    size = bench_like(sol)
    inputs = sol.make_inputs(size, seed=1)
    dev = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)
    misses, factories = [], []
    for version in days.versions(sol):
        seen.clear()
        try:
            getattr(sol, version)(*(inputs if getattr(sol, "BENCH_HOST_INPUTS", False) else dev))
        except Exception as exc:  # a tensor-core or CUDA C version: the GPU's to show (compiled_here there)
            factories.append(f"day {number:02d} {version}: not run here ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:80]})")
            continue
        for fn, types_ in dict.fromkeys(seen):
            known = entries.get(getattr(fn, "__code__", None), [])
            label = f"{getattr(fn, '__module__', '?').rsplit('.', 1)[-1]}.{getattr(fn, '__qualname__', fn)}"
            if not known:
                factories.append(f"day {number:02d} {version}: {label} is not in KERNELS")
            elif not any(t == types_ for _, _, t in known):
                # No entry of this code (whatever its factory's configuration) takes these types: a scalar
                # passed as a Python int (int64) where the signature says int32, a view of another layout.
                have = "; ".join(f"{n}: ({', '.join(map(str, t)) if isinstance(t, tuple) else t})"
                                 for n, _, t in known)
                misses.append(f"day {number:02d} {version}: {label} launched at ({', '.join(map(str, types_))}), "
                              f"KERNELS compiles {have}")
            elif not any(k == kernel_key(fn) and t == types_ for _, k, t in known):
                factories.append(f"day {number:02d} {version}: {label} at this size's configuration is not in "
                                 "KERNELS (its types are)")
    return misses, factories


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="launch_types", description=__doc__.split("\n\n")[0])
    parser.add_argument("days", nargs="*", type=int)
    args = parser.parse_args(argv)
    if course.ON_GPU:
        print("launch_types runs in the simulator (it records launches there): run it without a GPU")
        return 2
    seen = record_launches()
    entries = all_entries()
    chosen = args.days or [d.number for d in days.all_days()]
    bad = 0
    for number in chosen:
        misses, factories = check_day(number, seen, entries)
        for line in misses:
            print("MISS  " + line)
        for line in dict.fromkeys(factories):
            print("      " + line)
        bad += len(misses)
    print(f"launch_types: {len(chosen)} days, {bad} launches at types KERNELS does not compile")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
