"""What the compiler did with a kernel: PTX, registers, shared and local memory, memory-space instructions.

Works without a GPU. ``numba.cuda.compile_ptx(..., cc=(9, 0))`` needs no device, and nvJitLink
(``-arch=sm_90 -verbose``) assembles the PTX in-process and reports what ptxas decided: registers per
thread, shared memory, the stack frame (local memory) and spill bytes.

A day lists its kernels with their signatures so they can be compiled ahead of any launch:

    KERNELS = {"naive": (add_kernel, "void(float32[::1], float32[::1], float32[::1])"), ...}

In the simulator, ``cuda.jit`` returns the simulator's stand-in, which cannot be compiled, so the
reports come from a short-lived worker process that imports the day's file with the real numba.cuda
(``COURSE_DEVICE=compile``); results are cached per file and modification time, and on disk
(.course/reports) by the hash of the sources the compile reads.

CUDA C (a CuPy RawKernel's source, which the simulator cannot run) is built with nvcc when the toolkit
is installed: ``nvcc_build(source)`` returns ptxas's report and the PTX, no GPU needed.

Global loads show up as generic ``ld.f32`` in Numba's PTX (not ``ld.global``), so tests assert on
shared, constant, local, shuffle, barrier and atomic instructions, which are always explicit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course import DEVICE

# PTX instruction families we count; each pattern matches at the start of an instruction.
PATTERNS = {
    "ld.shared": r"ld\.shared\b",
    "st.shared": r"st\.shared\b",
    "ld.const": r"ld\.const\b",
    "ld.local": r"ld\.local\b",
    "st.local": r"st\.local\b",
    "ld.global": r"ld\.global\b",
    "ld (generic)": r"ld\.(?!shared|const|local|global|param)",
    "st (generic)": r"st\.(?!shared|local|global|param)",
    "shfl.sync": r"shfl\.sync\b",
    "bar.sync": r"(?:bar\.sync|barrier\.sync|bar\.warp\.sync)\b",
    "atom": r"(?:atom|red)\.",
    "atom.shared": r"(?:atom|red)\.shared\b",  # of "atom": the ones on shared memory
    "bar.warp.sync": r"bar\.warp\.sync\b",  # of "bar.sync": cuda.syncwarp()
    "vector ld/st": r"(?:ld|st)\.\w+(?:\.\w+)*\.v[248]\b",
}


class CompileError(RuntimeError):
    """A kernel failed to compile; the message carries the compiler's words."""


# sm_90's register file, for the occupancy the registers allow (KernelReport.warps_by_registers).
WARP = 32
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers are allocated to a warp in units of 256
MAX_WARPS_PER_SM = 64


@dataclass
class KernelReport:
    name: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0  # local memory per thread: the stack frame
    spill_stores: int = 0
    spill_loads: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    ptx: str = ""

    def count(self, family: str) -> int:
        return self.counts.get(family, 0)

    @property
    def uses_local_memory(self) -> bool:
        return self.stack_bytes > 0 or self.count("ld.local") + self.count("st.local") > 0

    @property
    def warps_by_registers(self) -> int:
        """Warps an SM can hold at this register count (sm_90): registers come a warp at a time in units
        of 256 (8 a thread) out of 65,536, and no SM holds more than 64 warps. Blocks are resident whole:
        at 256 threads (8 warps) a kernel of 40 registers holds 51 warps' worth, so 6 blocks, 48 warps."""
        per_warp = -(-max(self.registers, 1) * WARP // REGISTER_UNIT) * REGISTER_UNIT
        return min(MAX_WARPS_PER_SM, REGISTERS_PER_SM // per_warp)

    @property
    def loads_in_flight(self) -> int:
        """The most global loads one straight-line stretch of the PTX issues with no store between
        them (see :func:`loads_in_flight`)."""
        return loads_in_flight(self.ptx)


_LOAD = re.compile(r"^(?:@!?%\w+\s+)?ld\.(?!shared|const|local|param)")  # global, or Numba's generic ld
_STORE = re.compile(r"^(?:@!?%\w+\s+)?st\.(?!shared|local|param)")
_BLOCK_END = re.compile(r"^(?:\$\w+:|(?:@!?%\w+\s+)?(?:bra|ret))")


def loads_in_flight(ptx: str) -> int:
    """The most global loads one straight-line block of PTX issues with no store between them.

    A loop that loads and stores one element at a time gives 1 even when the compiler unrolls it
    (it cannot move a load above a store to an array that might alias it); loads written first and
    stores after give one per load. Labels and branches end a block.
    """
    best = run = 0
    for line in ptx.splitlines():
        line = line.split("//")[0].strip()
        if _LOAD.match(line):
            run += 1
            best = max(best, run)
        elif _STORE.match(line) or _BLOCK_END.match(line):
            run = 0
    return best


def count_instructions(ptx: str) -> dict[str, int]:
    lines = [ln.strip() for ln in ptx.splitlines()]
    body = [ln.split("//")[0] for ln in lines if ln and not ln.startswith(("//", "."))]
    counts = {}
    for family, pattern in PATTERNS.items():
        rx = re.compile(r"^(?:@!?%\w+\s+)?" + pattern)
        counts[family] = sum(1 for ln in body if rx.match(ln))
    return counts


def ptxas_report(ptx: str, arch: str = "sm_90") -> dict[str, int]:
    """Assemble PTX with nvJitLink and parse its verbose log (registers, smem, stack, spills)."""
    from cuda.bindings import nvjitlink

    options = [f"-arch={arch}", "-verbose"]
    handle = nvjitlink.create(len(options), options)
    data = ptx.encode()
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel")
        nvjitlink.complete(handle)
    except nvjitlink.nvJitLinkError as exc:
        size = nvjitlink.get_error_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)
        raise CompileError(f"nvJitLink: {exc}: {log.decode(errors='replace')}") from None
    finally:
        pass
    size = nvjitlink.get_info_log_size(handle)
    log = bytearray(size)
    nvjitlink.get_info_log(handle, log)
    nvjitlink.destroy(handle)
    text = log.decode(errors="replace")

    def grab(pattern: str) -> int:
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0

    return {
        "registers": grab(r"Used (\d+) registers"),
        "shared_bytes": grab(r"(\d+) bytes smem"),
        "stack_bytes": grab(r"(\d+) bytes stack frame"),
        "spill_stores": grab(r"(\d+) bytes spill stores"),
        "spill_loads": grab(r"(\d+) bytes spill loads"),
    }


def _allow_device_functions_without_gpu() -> None:
    """numba-cuda compiles a called device function for the *current* device's compute capability,
    which fails with no GPU. In the compile-only worker, answer cc 9.0 (what we target anyway)."""
    import types

    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))


def _import_for_compile(path: Path, prefix: str):
    """In the compile worker (or on a GPU): import the file at ``path`` with the real numba.cuda."""
    if not DEVICE.is_gpu:
        _allow_device_functions_without_gpu()
    name = f"{prefix}_{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _compile_module_kernels(path: Path) -> dict[str, dict]:
    """In a process with the real numba.cuda: compile every kernel of the file at ``path``."""
    from numba import cuda

    module = _import_for_compile(path, "_inspect")
    kernels = getattr(module, "KERNELS", {})
    out = {}
    for label, (kernel, signature) in kernels.items():
        py_func = getattr(kernel, "py_func", kernel)
        options = getattr(kernel, "targetoptions", {}) or {}
        try:
            # launch_bounds as the kernel declares them: ptxas then caps the registers the way the GPU build does
            ptx, _ = cuda.compile_ptx(py_func, signature, cc=(9, 0), fastmath=bool(options.get("fastmath")),
                                      launch_bounds=options.get("launch_bounds"))
        except Exception as exc:  # the compiler's own message is what the learner needs
            out[label] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        report = KernelReport(label, counts=count_instructions(ptx), ptx=ptx, **ptxas_report(ptx))
        out[label] = asdict(report)
    return out


_cache: dict[tuple[str, float], dict[str, dict]] = {}
# Reports are kept on disk by the hash of everything the compile reads: the file, the solutions it
# imports (transitively), course/ and numba-cuda's version. A notebook, or a test session after the
# first, reuses what the grader compiled (a day's kernels take 5-10 s); a changed file compiles anew.
REPORT_CACHE = Path(__file__).resolve().parent.parent / ".course" / "reports"


def _source_digest(path: Path) -> str:
    from course import days

    h = hashlib.sha256()
    try:
        import numba_cuda

        h.update(str(getattr(numba_cuda, "__version__", "")).encode())
    except ImportError:
        pass
    for f in days.solution_closure(path):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    for f in sorted((days.ROOT / "course").glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:24]


def _raw_reports(path: Path) -> dict[str, dict]:
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime)
    if key in _cache:
        return _cache[key]
    disk = REPORT_CACHE / f"{path.stem}-{_source_digest(path)}.json"
    if disk.exists():
        try:
            _cache[key] = raw = json.loads(disk.read_text())
            return raw
        except (OSError, ValueError):
            pass  # a torn write: compile again
    if DEVICE.kind in ("gpu", "compile"):
        raw = _compile_module_kernels(path)
    else:
        env = dict(os.environ, COURSE_DEVICE="compile", NUMBA_ENABLE_CUDASIM="0")
        root = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        proc = subprocess.run([sys.executable, "-m", "course.compiler", str(path)], capture_output=True,
                              text=True, env=env, cwd=root)
        if proc.returncode != 0:
            raise CompileError(f"compiling the kernels of {path.name} failed:\n{proc.stderr.strip()[-3000:]}")
        raw = json.loads(proc.stdout.strip().splitlines()[-1])
    _cache[key] = raw
    if not any("error" in r for r in raw.values()):
        try:
            REPORT_CACHE.mkdir(parents=True, exist_ok=True)
            tmp = disk.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(raw))
            tmp.replace(disk)  # atomic: a parallel reader sees the whole file or none
        except OSError:
            pass
    return raw


def reports(module_or_path) -> dict[str, KernelReport]:
    """Reports for every kernel in a day's ``KERNELS``, keyed by label. Raises CompileError on failure."""
    path = Path(getattr(module_or_path, "__file__", module_or_path))
    out = {}
    for label, raw in _raw_reports(path).items():
        if "error" in raw:
            raise CompileError(f"{path.name}: kernel {label!r} does not compile: {raw['error']}")
        out[label] = KernelReport(**raw)
    return out


def report(module_or_path, label: str) -> KernelReport:
    found = reports(module_or_path)
    if label not in found:
        raise KeyError(f"no kernel {label!r} in KERNELS; there are: {', '.join(found)}")
    return found[label]


def _return_type_in_worker(path: Path, name: str, argtypes: str) -> str:
    """In a process with the real numba.cuda: the type the compiler infers for device function ``name``
    of the file at ``path`` called with ``argtypes``."""
    from numba import cuda

    module = _import_for_compile(path, "_types")
    from numba import types

    func = getattr(module, name)
    args = tuple(getattr(types, t.strip()) for t in argtypes.split(","))
    _, resty = cuda.compile_ptx(getattr(func, "py_func", func), args, device=True, cc=(9, 0))
    return str(resty)


@functools.cache
def _return_type(path: str, name: str, argtypes: str) -> str:
    if DEVICE.kind in ("gpu", "compile"):
        return _return_type_in_worker(Path(path), name, argtypes)
    env = dict(os.environ, COURSE_DEVICE="compile", NUMBA_ENABLE_CUDASIM="0")
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "course.compiler", "--return-type", path, name, argtypes],
                          capture_output=True, text=True, env=env, cwd=root)
    if proc.returncode != 0:
        raise CompileError(f"compiling {name}({argtypes}) of {Path(path).name} failed:\n{proc.stderr.strip()[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def return_type(module_or_path, name: str, argtypes: str) -> str:
    """The type Numba's CUDA compiler infers for device function ``name`` of a day's module called with
    ``argtypes`` (a string: "uint32" or "uint32, int64"), e.g. "uint64". The simulator runs device
    functions as NumPy code, whose integer types are not the compiler's: Numba widens uint32 | uint32
    and ~uint32 to uint64, where NumPy keeps uint32, so a key compared against a uint32 threshold can
    pass in the simulator and fail on the GPU. This asks the compiler, with no GPU."""
    return _return_type(str(Path(getattr(module_or_path, "__file__", module_or_path)).resolve()), name, argtypes)


if __name__ == "__main__":
    if sys.argv[1] == "--return-type":
        print(_return_type_in_worker(Path(sys.argv[2]), sys.argv[3], sys.argv[4]))
    else:
        print(json.dumps(_compile_module_kernels(Path(sys.argv[1]))))


# ---- CUDA C through nvcc ------------------------------------------------------------------------------

NVCC = shutil.which("nvcc") or next((p for p in ("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc")
                                     if Path(p).exists()), None)


class NvccError(RuntimeError):
    """nvcc could not build the source; the message carries the compiler's errors."""


# Builds are kept on disk by the hash of what was compiled: a grader run against a wrong spec that leaves
# the CUDA C alone, a notebook, and the next test session reuse them (each build takes seconds).
NVCC_CACHE = Path(__file__).resolve().parent.parent / ".course" / "nvcc"


@functools.cache
def nvcc_build(source: str, arch: str = "sm_90") -> dict:
    """Compile CUDA C ``source`` with nvcc twice (a cubin with ptxas's report, and the PTX): a dict with
    registers, stack, spill_stores, spill_loads, smem (bytes of static shared memory; the largest over
    the file's kernels for each), log (ptxas's words) and ptx. NvccError with the compiler's errors when
    it does not build; RuntimeError when nvcc is not installed. Successful builds are cached in
    .course/nvcc/ by the hash of nvcc's path, the arch and the source."""
    if NVCC is None:
        raise RuntimeError("nvcc is not installed here (the CUDA toolkit): CUDA C sources cannot be built")
    key = hashlib.sha256(f"{NVCC}\0{arch}\0{source}".encode()).hexdigest()
    cached = NVCC_CACHE / f"{key}.json"
    if cached.exists():
        try:
            return json.loads(cached.read_text())
        except (OSError, ValueError):
            pass  # a torn or unreadable entry: build again
    built = _nvcc_build(source, arch)
    try:
        NVCC_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(built))
        os.replace(tmp, cached)  # atomic: concurrent graders never read half an entry
    except OSError:
        pass  # a read-only checkout: no cache, same answer
    return built


def _nvcc_build(source: str, arch: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(source)
        common = [NVCC, f"-arch={arch}", "-std=c++17"]
        run = functools.partial(subprocess.run, capture_output=True, text=True, cwd=tmp, timeout=300)
        built = run(common + ["-cubin", "-Xptxas", "-v", "-o", "kernel.cubin", str(cu)])
        if built.returncode != 0:
            raise NvccError(f"nvcc could not build the source:\n{built.stderr[-4000:]}")
        ptx = run(common + ["-ptx", "-o", "kernel.ptx", str(cu)])
        if ptx.returncode != 0:
            raise NvccError(f"nvcc -ptx failed:\n{ptx.stderr[-4000:]}")
        text = (Path(tmp) / "kernel.ptx").read_text()
    log = built.stdout + built.stderr

    def largest(pattern: str) -> int:
        return max((int(v) for v in re.findall(pattern, log)), default=0)

    return {
        "registers": largest(r"Used (\d+) registers"),
        "stack": largest(r"(\d+) bytes stack frame"),
        "spill_stores": largest(r"(\d+) bytes spill stores"),
        "spill_loads": largest(r"(\d+) bytes spill loads"),
        "smem": largest(r"(\d+) bytes smem"),
        "log": log,
        "ptx": text,
    }
