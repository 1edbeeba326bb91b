"""course.jit_cache: the disk cache bench_all's workers compile into (--compile-ahead).

Without a GPU nothing compiles, so these tests check what can be checked with the real numba.cuda and
no driver (COURSE_DEVICE=compile, in a subprocess): which dispatchers get a disk cache, that closures
(the kernels days build in factories) can be keyed, that dispatchers made later get one too, and that
the module stays off where it must (no GPU, or COURSE_JIT_CACHE unset). The cache's hits are the
GPU's to show: a gpu-marked test compiles a kernel in one process and loads it in another.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_CHECK = r"""
import json, os
import course  # COURSE_DEVICE=compile: the real numba.cuda, no driver
from course import days, jit_cache
from numba.cuda.dispatcher import CUDADispatcher

out = {"on_gpu": course.ON_GPU, "enable_off": jit_cache.enable()}  # not a GPU: off, whatever the env says
jit_cache.use_directory(os.environ["COURSE_JIT_CACHE"])  # what enable() does first on a GPU
sol79, sol31 = days.load_solution(79), days.load_solution(31)
kernels = {f"{s.__name__.split('.')[-1][:5]}.{n}": k for s in (sol79, sol31) for n, (k, _) in s.KERNELS.items()}
out["cached"] = {name: jit_cache._cache_on(k) for name, k in kernels.items()}
out["cache_types"] = sorted({type(k._cache).__name__ for k in kernels.values()})
out["under_dir"] = all(k._cache._cache_path.startswith(os.environ["COURSE_JIT_CACHE"]) for k in kernels.values())
# a closure whose contents cannot be pickled keeps its in-memory compile (its key could not be made)
import threading
def make():
    lock = threading.Lock()  # a closure cell that does not pickle
    def kernel(a):
        if lock is None:
            a[0] = 1
    return kernel
from numba import cuda
out["unkeyable"] = jit_cache._keyable(cuda.jit(make()))
out["outside"] = jit_cache._ours(cuda.jit(lambda a: None))  # not the course's file: left alone
out["compile_day_off"] = jit_cache.compile_day(sol31)
# One key for one kernel whichever way its signature is written: the KERNELS string compiled ahead and
# the tuple of types a launch through the dispatcher compiles for (a stub codegen: no driver here).
from numba import types
class Codegen:
    def magic_tuple(self):
        return ("stub",)
scan, sig = days.load_solution(29).KERNELS["optimized.int32"]
out["scan_cached"] = jit_cache._cache_on(scan)
typed = tuple(types.Array(t.dtype, t.ndim, "C") for t in jit_cache.argtypes(sig))
out["same_key"] = scan._cache._index_key(sig, Codegen()) == scan._cache._index_key(typed, Codegen())
out["typed_is_launch_types"] = typed == jit_cache.argtypes(sig)
# What the process compiled itself, by kernel (Numba's miss counter, bumped here by hand: no driver)
before = jit_cache.compiled_here()
scan._cache_misses[typed] += 1
out["compiled_here"] = dict(jit_cache.compiled_here() - before)
print(json.dumps(out))
"""


def test_which_dispatchers_cache_on_disk(tmp_path):
    env = dict(os.environ, COURSE_DEVICE="compile", NUMBA_ENABLE_CUDASIM="0", COURSE_JIT_CACHE=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["on_gpu"] is False and got["enable_off"] == 0, "off without a GPU"
    assert got["cached"] and all(got["cached"].values()), got["cached"]  # the factories' closures included
    assert got["cache_types"] == ["CUDACache"] and got["under_dir"]
    assert got["unkeyable"] is False and got["outside"] is False
    assert got["compile_day_off"] == {}
    assert got["scan_cached"] and got["same_key"] and got["typed_is_launch_types"], \
        "a string signature and its types: one cache key"
    assert got["compiled_here"] == {"day29_scan_decoupled_lookback.single_pass_kernel": 1}, got["compiled_here"]


def test_bench_all_takes_compile_ahead():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import bench_all
    finally:
        sys.path.pop(0)
    assert bench_all.parse(["out", "--compile-ahead"]).compile_ahead is True
    assert bench_all.parse(["out"]).compile_ahead is False


_GPU_WRITE = r"""
import sys
import course
from course import days, jit_cache
assert jit_cache.enable() >= 0
sol = days.load_solution(29)
print(jit_cache.compile_day(sol))
"""

_GPU_READ = r"""
import json
import numpy as np
import course
from course import days, jit_cache
jit_cache.enable()
sol = days.load_solution(29)
x = np.arange(5000, dtype=np.int32)
got = sol.optimized(x)
kernel = sol.KERNELS["optimized.int32"][0]
print(json.dumps({"ok": bool((got == np.cumsum(x, dtype=np.int32)).all()),
                  "hits": sum(kernel._cache_hits.values()), "misses": sum(kernel._cache_misses.values())}))
"""


@pytest.mark.gpu
def test_a_kernel_compiled_ahead_loads_in_another_process(tmp_path):
    """On a GPU: day 29's KERNELS compiled in one process, its int32 scan then launched in another
    loads from the disk cache (a hit, no miss) and computes the right prefix sums."""
    env = dict(os.environ, COURSE_JIT_CACHE=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", _GPU_WRITE], capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run([sys.executable, "-c", _GPU_READ], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    got = json.loads(second.stdout.strip().splitlines()[-1])
    assert got["ok"], got
    assert got["hits"] >= 1 and got["misses"] == 0, f"{first.stdout[-500:]}\n{got}"
