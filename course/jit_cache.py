"""Compiled kernels kept on disk, so that tools/bench_all.py's workers compile ahead of the GPU's turn.

A day's first timed call compiles its kernels: ~1-2 s of Numba a specialization, 220 s of a 754-s run
of every benchmark measured on an H100. Numba can keep what it compiled on disk (what
``cuda.jit(cache=True)`` asks for): the cubin, keyed by the function's bytecode, the contents of its
closure, the signature, the GPU and the numba-cuda version; a process that later asks for the same
kernel loads it in milliseconds instead. With ``COURSE_JIT_CACHE`` set to a directory (bench_all
``--compile-ahead`` sets it to a fresh one for the run), :func:`enable` turns that cache on for every
CUDA dispatcher of the course's modules, those already made and those made later (the kernels the
days build in factories at their first launch), and :func:`compile_day` compiles a day's ``KERNELS``
at their signatures: the benchmark workers (course.prepare) call it while the GPU times the days
before, and the timing process then finds the cubins there.

Best effort throughout: a dispatcher whose closure cannot be keyed keeps compiling in memory, and a
kernel that fails to compile ahead is compiled at its launch as before. Off unless asked for; never in
the simulator (it has no compiler). The cache directory is the run's own: nothing compiled by an
earlier version of a file can be found there.
"""

from __future__ import annotations

import collections
import os
import sys
import weakref
from pathlib import Path

from course import ON_GPU

ENV = "COURSE_JIT_CACHE"
_ROOT = str(Path(__file__).resolve().parent.parent)
_enabled = False
_seen: weakref.WeakSet = weakref.WeakSet()  # the course's dispatchers met since enable()


def directory() -> str | None:
    """The cache directory this process was asked to use, or None."""
    return os.environ.get(ENV) or None


def use_directory(path: str) -> None:
    """Numba's caches go under ``path`` from now on: its config, read when each cache is made (numba
    read NUMBA_CACHE_DIR once, at import; the variable is set too, for the processes this one starts)."""
    from numba.cuda.core import config

    os.environ["NUMBA_CACHE_DIR"] = path
    config.CACHE_DIR = path


def _ours(dispatcher) -> bool:
    """A kernel or device function defined in a file of this repository (not a library's, not `-c`'s)."""
    code = getattr(getattr(dispatcher, "py_func", None), "__code__", None)
    if code is None:
        return False
    path = os.path.abspath(code.co_filename)
    return path.startswith(_ROOT + os.sep) and os.path.isfile(path)


def _keyable(dispatcher) -> bool:
    """Whether Numba can key this function's cache entries: its closure's contents must pickle (they are
    part of the key, with the bytecode), or a launch would fail on them, not merely miss."""
    closure = getattr(dispatcher.py_func, "__closure__", None)
    if not closure:
        return True
    try:
        from numba.cuda.serialize import dumps

        dumps(tuple(cell.cell_contents for cell in closure))
    except Exception:
        return False
    return True


def argtypes(sig) -> tuple:
    """The argument types a signature names, as a tuple of Numba types: ``"void(int32[::1])"``, a
    Signature and a tuple of types alike give the same tuple."""
    from numba.cuda.core import sigutils

    return tuple(sigutils.normalize_signature(sig)[0])


def _key_by_types(cache) -> None:
    """Numba keys a disk-cache entry by the signature exactly as ``compile`` was handed it: a string
    from ``compile("void(int32[::1], ...)")`` (KERNELS, course.prepared) and the tuple of types the
    dispatcher compiles for at a launch are two keys for one kernel, so what a worker compiled from
    the string would never be found by a launch. Every key is made from the argument types instead."""
    index_key = cache._index_key

    def _index_key(sig, codegen):
        return index_key(argtypes(sig), codegen)

    cache._index_key = _index_key


def _cache_on(dispatcher) -> bool:
    """Turn the disk cache on for one of the course's dispatchers (True), or leave it (False)."""
    if not _ours(dispatcher):
        return False
    _seen.add(dispatcher)
    if not _keyable(dispatcher):
        return False
    try:
        dispatcher.enable_caching()
        _key_by_types(dispatcher._cache)
    except Exception:
        return False
    return True


def compiled_here() -> collections.Counter:
    """How many specializations of each of the course's kernels this process compiled itself, found
    neither in memory nor on disk (Numba counts them in a dispatcher's ``_cache_misses``), by
    ``module.function``: what bench_all prints after each day, so a kernel that compiling ahead misses
    (built in a factory the workers never call, or keyed apart) is named, not guessed."""
    counts = collections.Counter()
    for dispatcher in list(_seen):
        misses = sum(getattr(dispatcher, "_cache_misses", {}).values())
        if misses:
            fn = dispatcher.py_func
            counts[f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}"] += misses
    return counts


def enable() -> int:
    """On a GPU with COURSE_JIT_CACHE set: the disk cache on for every CUDA dispatcher the course's
    modules hold now and every one made from now on. Returns how many it turned on now (0 when off)."""
    global _enabled
    path = directory()
    if not (ON_GPU and path):
        return 0
    use_directory(path)
    from numba.cuda.dispatcher import CUDADispatcher

    if not _enabled:
        _enabled = True
        made = CUDADispatcher.__init__

        def __init__(self, *args, **kwargs):  # every kernel or device function made from now on
            made(self, *args, **kwargs)
            _cache_on(self)

        CUDADispatcher.__init__ = __init__
    count = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "course" or name.startswith(("course.", "solutions.", "days."))):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CUDADispatcher):
                count += _cache_on(value)
            elif isinstance(value, dict):  # KERNELS: {name: (kernel, signature)}, kernels built in factories
                for entry in value.values():
                    kernel = entry[0] if isinstance(entry, tuple) and entry else entry
                    if isinstance(kernel, CUDADispatcher):
                        count += _cache_on(kernel)
    return count


def compile_day(sol) -> dict[str, str]:
    """Compile every ``KERNELS`` entry of a day's module at its signature into the disk cache (after
    :func:`enable`): {entry: "ok", or why it was not}. Compiling needs the GPU's context, never a launch."""
    if not (_enabled and directory()):
        return {}
    done = {}
    for name, entry in getattr(sol, "KERNELS", {}).items():
        try:
            kernel, signature = entry
            kernel.compile(signature)
            done[name] = "ok"
        except Exception as exc:  # a kernel this host cannot compile ahead: its launch compiles it
            done[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
    return done
