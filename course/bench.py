"""Naive vs optimized on a GPU: CUDA events, warm-up, L2 flushed, median of many, re-checked.

Each timed repetition: flush the L2 (write a buffer several times its size), keep the GPU busy with a
spin kernel while Python enqueues the work, record the start event, call the version, record the end
event. The spin hides the host function's Python overhead (validation, array views, the launch) from
the events, so they time the kernel; the flush makes every repetition read from HBM, not L2.

The spin must outlast that overhead, or the GPU reaches the start event first and sits idle, timed,
until the launch arrives. A paged-attention step with a dozen array arguments spends ~0.3 ms in
Python, more than a fixed 0.2 ms spin: its kernel then timed at 0.62 ms when it runs in 0.31 ms. So
the warm-up calls measure the host time, and the spin is set to several times the slowest of them.

A version that waits for the GPU inside (reads a result or a block table back to plan on the host, as
the serving days do) would wait for the spin too, and the events would time only what follows that
wait. Such a version is timed by the wall clock instead, from the call to the end of its GPU work:
host planning is part of what it costs. Its row says ``clock: wall``.

The peak is measured in the same run: a large device-to-device copy (bytes read + written) for
memory-bound days, cuBLAS FP32 GEMM through CuPy for compute-bound ones.
"""

from __future__ import annotations

import contextlib
import hashlib

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from course import ON_GPU, checking, cuda, days, launch

L2_FLUSH_BYTES = 256 << 20  # the H200's L2 is 60 MB; writing 256 MB evicts it
SPIN_NS = 1_000_000  # the least spin; more when the warm-up calls take longer on the host
MAX_SPIN_NS = 50_000_000
SAMPLE_BUDGET_MS = 1000.0  # Timer.time: repeats cut so that the samples of one version take about this
MIN_REPEATS = 5
# A version whose one call takes over a second once compiled (a serving day's whole trace) is warmed
# twice (the first call compiles) and timed SLOW_REPEATS times: its spread is small next to its time,
# and five samples of a several-second trace would take a benchmark visit's minute by themselves.
SLOW_MS = 1000.0
SLOW_REPEATS = 3
# The device's copy (or GEMM) rate a day's % is of: measured at most this long ago in the process, else
# measured again. A visit over every day measured it 90 times (~0.5 s each, 2 GB allocated and 230
# copies): within a minute the same machine gives the same rate, and every day's JSON keeps the one used.
PEAK_MAX_AGE_S = 60.0
_PEAKS: dict[tuple, tuple[float, float]] = {}  # (what, dtype) -> (rate, time.monotonic() when measured)


@dataclass
class Row:
    version: str
    n: object
    ms: float  # median time of one call
    spread_ms: float  # interquartile range of the samples
    gbps: float
    tflops: float
    pct_peak: float
    speedup: float = 1.0  # over the first version (naive)
    checked: str = ""
    clock: str = "events"  # "wall" for a version that waits on the GPU inside (see the module's notes)
    # Where the row's seconds of the run went: "warm" (the warm-up calls, the first of them compiling),
    # "timed" (the probe and the samples), "check" (the re-check after timing).
    seconds: dict = field(default_factory=dict)


@dataclass
class Result:
    day: str
    device: str
    bound: str
    peak_name: str
    peak_value: float  # GB/s or TFLOP/s
    rows: list[Row] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # row -> why it was not timed (a library not installed)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)


@cuda.jit
def _spin(ns):
    # One thread sleeps so the GPU has queued work while the host enqueues the next launches.
    t = 0
    while t < ns:
        cuda.nanosleep(1000)
        t += 1000


@cuda.jit
def _fill(buf, value):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < buf.size:
        buf[i] = value
        i += stride


class Timer:
    """CUDA-event timing with an L2 flush and a spin kernel in front of every sample."""

    def __init__(self, quiet=None):
        """``quiet``: a function returning a context manager entered around the samples of a version
        timed by the wall clock (its rows count the host's time too): tools/bench_all.py passes one that
        stops its workers meanwhile, so such a row is not timed beside six processes making inputs."""
        self.quiet = quiet
        self.flush_buf = cuda.device_array(L2_FLUSH_BYTES // 4, dtype=np.int32)
        self.spin_ns = SPIN_NS
        self.clock = "events"  # how the last time() measured: "events", or "wall" (see waits_for_gpu)
        self.warm_s = 0.0  # the last time()'s warm-up calls, compilation included

    def sample(self, fn, *args) -> float:
        _fill[launch.sm_count() * 4, 256](self.flush_buf, 0)
        _spin[1, 1](self.spin_ns)
        start, end = cuda.event(), cuda.event()
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        return cuda.event_elapsed_time(start, end)

    def sample_wall(self, fn, *args) -> float:
        _fill[launch.sm_count() * 4, 256](self.flush_buf, 0)
        cuda.synchronize()
        t = time.perf_counter()
        fn(*args)
        cuda.synchronize()
        return (time.perf_counter() - t) * 1e3

    def waits_for_gpu(self, fn, *args, probes: int = 2) -> bool:
        """True if a call of fn blocks until earlier GPU work is done: queued behind a spin ~20 times
        longer than fn's host time, an event recorded after the spin is still pending when a call
        that does not wait returns. A call that waits does so every time; one that only stalled (its
        process descheduled past the spin while bench_all's workers held the CPU: an H100 run timed day
        62's warp_per_row by the wall clock at 445 us, 2.3x its kernel) rarely does twice, so the
        answer is True only if all ``probes`` calls waited."""
        for _ in range(probes):
            _spin[1, 1](min(MAX_SPIN_NS, 5 * self.spin_ns))
            after_spin = cuda.event()
            after_spin.record()
            fn(*args)
            waited = after_spin.query()
            cuda.synchronize()
            if not waited:
                return False
        return True

    def time(self, fn, *args, warmup: int = 3, repeats: int = 30) -> tuple[float, float]:
        host_s, slow = 0.0, False
        warm_start = time.perf_counter()
        for i in range(max(warmup, 2)):
            _fill[launch.sm_count() * 4, 256](self.flush_buf, 0)  # each call from a cold L2, as sampled
            cuda.synchronize()
            t = time.perf_counter()
            fn(*args)
            if i > 0 or warmup == 1:  # the first call compiles: its host time is not the call's
                host_s = max(host_s, time.perf_counter() - t)  # enqueue time (all of it, if fn synchronizes)
            cuda.synchronize()
            # Over a second, compiled (the first call may spend seconds compiling: a fast kernel that
            # took it for slow was timed by the wall clock, host time and all): warm-up would only cost time,
            # and this call, timed as sample_wall times one, is the first sample.
            if i > 0 and (elapsed_ms := (time.perf_counter() - t) * 1e3) > SLOW_MS:
                slow = True
                break
        self.warm_s = time.perf_counter() - warm_start
        self.spin_ns = int(min(MAX_SPIN_NS, max(SPIN_NS, 4 * host_s * 1e9)))
        # A call of over a second (a serving day's whole trace) is timed by the wall clock without the
        # probe: the probe is one more whole call, and at that length the two clocks agree anyway.
        self.clock = "wall" if slow or self.waits_for_gpu(fn, *args) else "events"
        sample = self.sample_wall if self.clock == "wall" else self.sample
        with self.quiet() if self.quiet and self.clock == "wall" else contextlib.nullcontext():
            first = elapsed_ms if slow else sample(fn, *args)
            # A slow version (a naive kernel of hundreds of ms) gets fewer samples: about a second of
            # them, at least MIN_REPEATS; its spread is small next to its time anyway.
            least = SLOW_REPEATS if first > SLOW_MS else MIN_REPEATS
            repeats = min(repeats, max(least, int(SAMPLE_BUDGET_MS / max(first, 1e-3))))
            samples = sorted([first] + [sample(fn, *args) for _ in range(repeats - 1)])
        q = statistics.quantiles(samples, n=4)
        return statistics.median(samples), q[2] - q[0]


def recent_peak(key: tuple, measure, max_age_s: float = PEAK_MAX_AGE_S) -> tuple[float, float | None]:
    """``measure()``'s rate, or the one it gave under ``max_age_s`` seconds ago for the same ``key``:
    (rate, its age in seconds; None when measured now)."""
    hit = _PEAKS.get(key)
    if hit is not None and (age := time.monotonic() - hit[1]) < max_age_s:
        return hit[0], age
    rate = measure()
    _PEAKS[key] = (rate, time.monotonic())
    return rate, None


def copy_peak_gbps(timer: Timer, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    src = cuda.device_array(nbytes // 4, dtype=np.float32)
    dst = cuda.device_array(nbytes // 4, dtype=np.float32)
    # Generous warm-up: an idle H200 sits at a low SM clock and takes a while to ramp up.
    ms, _ = timer.time(lambda: dst.copy_to_device(src), warmup=200, repeats=30)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def gemm_peak_tflops(timer: Timer, n: int = 8192, dtype: str = "float32") -> float:
    """cuBLAS GEMM through CuPy: FP32 (TF32 off: CuPy's default for float32 matmul), or FP16 on the
    tensor cores (a day with PEAK_DTYPE = "float16")."""
    import cupy

    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
    b = rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
    ms, _ = timer.time(lambda: cupy.matmul(a, b), repeats=10)
    return 2 * n**3 / (ms * 1e-3) / 1e12


@dataclass
class Prepared:
    """What a benchmark needs from the host before it touches the GPU: the inputs at one size, the
    reference's output on them and the minimum traffic. Made here by :func:`prepare`, or ahead of time
    in another process (course.prepare: bench_all makes the next days' while the GPU times this one)."""

    inputs: tuple
    expected: object
    nbytes: float
    flops: float
    seconds: dict = field(default_factory=dict)  # "inputs", "reference": where the host's time went


def prepare(sol, n, progress=None, store=None) -> Prepared:
    """The inputs (seed 1234: what `make bench` always times), their reference and traffic. ``store``:
    see :func:`_reference`."""
    tick = progress or (lambda msg: None)
    tick("making the inputs")
    t = time.perf_counter()
    inputs = sol.make_inputs(n, seed=1234)
    made = time.perf_counter() - t
    tick("computing the reference")
    t = time.perf_counter()
    expected = _reference(sol, inputs, store)
    referenced = time.perf_counter() - t
    nbytes, flops = sol.traffic(*inputs)  # the minimum: what the roofline and GB/s are measured against
    return Prepared(tuple(inputs), expected, nbytes, flops, {"inputs": made, "reference": referenced})


def run(day, n=None, *, versions=None, repeats: int = 30, with_library: bool = True, progress=None,
        target=None, prepared: Prepared | None = None, peak: float | None = None, quiet=None) -> Result:
    """Time every version of a day (and its library row) at one size. Needs a GPU. ``target``: the
    module whose versions are timed (default: what COURSE_TARGET picks; tools/sweep.py passes
    variants from course.days.with_constants). ``prepared``: the inputs and reference at ``n``, made
    elsewhere (:func:`prepare` is called when it is None). ``peak``: the device's copy (or GEMM) rate
    measured moments ago for the same day (run_sizes passes its first size's to the others); measured
    here when None."""
    if not ON_GPU:
        raise RuntimeError("timings need a CUDA GPU; without one, use `make inspect` for the compiler's view")
    info = days.find(day)
    sol = days.load_solution(day)
    target = target if target is not None else days.load_target(day)
    n = n if n is not None else sol.BENCH_SIZES[0]
    bound = getattr(sol, "BOUND", "memory")
    # BENCH_VERSIONS: host functions timed after the graded versions whose result is not the reference's
    # kind (day 31's kept elements with their count left on the device); the day's bench_output turns
    # their result into it for the re-check.
    names = list(versions or days.versions(sol) + tuple(getattr(sol, "BENCH_VERSIONS", ())))
    if with_library and hasattr(sol, "library"):
        names.append("library")
    timer = Timer(quiet=quiet)
    steps = len(names) + 1
    tick = progress or (lambda msg: None)

    gemm_dtype = getattr(sol, "PEAK_DTYPE", "float32")  # a tensor-core day measures against FP16 GEMM
    gemm_name = f"cuBLAS {'FP16' if gemm_dtype == 'float16' else 'FP32'} GEMM"
    if peak is None:
        what = "copy rate" if bound == "memory" else gemm_name + " rate"

        def measure():
            tick(f"measuring the device's {what}")
            return copy_peak_gbps(timer) if bound == "memory" else gemm_peak_tflops(timer, dtype=gemm_dtype)

        peak, age = recent_peak(("copy",) if bound == "memory" else ("gemm", gemm_dtype), measure)
        if age is not None:
            tick(f"the device's {what} measured {age:.0f} s ago: {peak:,.0f}")
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else str(device)
    result = Result(info.slug, device, bound, "device copy" if bound == "memory" else gemm_name, peak)

    if prepared is None:
        prepared = prepare(sol, n, tick)
    inputs, expected, nbytes, flops = prepared.inputs, prepared.expected, prepared.nbytes, prepared.flops
    host_inputs = getattr(sol, "BENCH_HOST_INPUTS", False)
    if host_inputs == "pinned":  # NumPy in and out, the inputs page-locked once, outside the timing
        dev_inputs = tuple(launch.pinned_copy(x) if isinstance(x, np.ndarray) else x for x in inputs)
    elif host_inputs:
        dev_inputs = inputs  # the day is about transfers: time the host function with NumPy in and out
    else:
        dev_inputs = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)
    for i, name in enumerate(names, start=1):
        tick(f"[{i}/{steps - 1}] {name}")
        fn = sol.library if name == "library" else getattr(target, name)
        # A version that cannot run at this size (scores that do not fit in shared memory, a kernel
        # for short rows) is skipped with the day's reason, never handed to another kernel.
        why = sol.bench_skip(name, n) if hasattr(sol, "bench_skip") else None
        if why:
            result.skipped[f"{name} at {n}"] = why
            continue
        if name == "library":
            missing = library_missing(sol, dev_inputs)
            if missing:
                result.skipped[name] = missing
                continue
        started = time.perf_counter()
        with launch.no_poison():
            ms, spread = timer.time(fn, *dev_inputs, repeats=repeats)
        clock = timer.clock
        seconds = {"warm": timer.warm_s, "timed": time.perf_counter() - started - timer.warm_s}
        checking_from = time.perf_counter()
        # Re-check after timing: a fast wrong answer is not a result. A day that works in place
        # (MUTATES_INPUTS: RoPE rotates q and k where they are) has changed its inputs at every
        # timed call: the check runs on fresh copies.
        if getattr(sol, "MUTATES_INPUTS", False) and not getattr(sol, "BENCH_HOST_INPUTS", False):
            dev_inputs = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)
        got = fn(*dev_inputs)
        if hasattr(sol, "bench_output"):
            got = sol.bench_output(name, got)
        want = expected
        if name in getattr(sol, "UNORDERED", ()):  # the right elements in any order: compared sorted
            got, want = sorted_on_gpu(got), sorted_on_gpu(expected).get()
        report = checking.compare(got, want, rtol=version_rtol(sol, name), floor=getattr(sol, "ERROR_FLOOR", None),
                                  name=name, min_scale=getattr(sol, "MIN_SCALE", 0.0))
        seconds["check"] = time.perf_counter() - checking_from
        tick(f"[{i}/{steps - 1}] {name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
        # A version that must move more than the minimum by design (a dequantized copy, an fp16 row
        # beside an int8 one) is rated on its own bytes when the day says so (version_traffic).
        own = sol.version_traffic(name, *inputs) if hasattr(sol, "version_traffic") else None
        v_bytes, v_flops = own if own is not None else (nbytes, flops)
        gbps = v_bytes / (ms * 1e-3) / 1e9
        tflops = v_flops / (ms * 1e-3) / 1e12
        pct = 100 * (gbps / peak if bound == "memory" else tflops / peak)
        result.rows.append(Row(name, n, ms, spread, gbps, tflops, pct,
                               checked="ok" if report.ok else report.text.splitlines()[0], clock=clock,
                               seconds={k: round(v, 3) for k, v in seconds.items()}))
    base = result.rows[0].ms if result.rows else None
    for row in result.rows:
        row.speedup = base / row.ms
    return result


def sorted_on_gpu(a):
    """A sorted copy of a NumPy, Numba device or CuPy array, as a CuPy array: sorted where the output
    already is (day 31's 2^26 kept floats took 5.6 s to sort on one CPU thread, with its reference)."""
    import cupy

    return cupy.sort(cupy.asarray(a))


_REFERENCES: dict[tuple, object] = {}


def reference_key(sol, inputs) -> str:
    """A digest of the reference function (module and name) and of the inputs' bytes, shapes and dtypes:
    equal for days that share a problem (the attention days 65-70 at the same shape and seed)."""
    fn = sol.reference
    digest = hashlib.sha1()
    digest.update(f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', repr(fn))}".encode())
    for x in inputs:
        if isinstance(x, np.ndarray):
            digest.update(f"{x.dtype}{x.shape}".encode())
            digest.update(np.ascontiguousarray(x).view(np.uint8).reshape(-1))
        else:
            digest.update(repr(x).encode())
    return digest.hexdigest()


def _reference(sol, inputs, store=None):
    """sol.reference(*inputs), remembered for the process by :func:`reference_key`: days that share a
    problem check against one float64 reference, computed once on the host, instead of once a day (tens
    of seconds each at the attention days' benchmark shapes). ``store``: a function (key, compute) that
    shares the result between processes (course.prepare's workers)."""
    key = reference_key(sol, inputs)
    if key not in _REFERENCES:
        compute = lambda: sol.reference(*inputs)  # noqa: E731
        _REFERENCES[key] = store(key, compute) if store else compute()
    return _REFERENCES[key]


def run_sizes(day, sizes=None, *, prepared=None, **kwargs) -> Result:
    """``run`` at every size of the day's BENCH_SIZES (or ``sizes``), the rows in one Result: a day
    whose versions win on different inputs (a regular and a power-law matrix) is timed on each. Each
    row's speedup is over the first version at the same size. ``prepared``: a function of the size's
    index that returns its :class:`Prepared` (or None to make it here). The device's peak is measured
    once, at the first size, and every size's % is of that (0.3 s saved a size: a bench_all visit
    measured it 135 times)."""
    sol = days.load_solution(day)
    merged = None
    for k, n in enumerate(sizes if sizes is not None else sol.BENCH_SIZES):
        peak = None if merged is None else merged.peak_value
        result = run(day, n, prepared=prepared(k) if prepared else None, peak=peak, **kwargs)
        if merged is None:
            merged = result
        else:
            merged.rows.extend(result.rows)
            merged.skipped.update(result.skipped)
    return merged


def library_missing(sol, inputs) -> str | None:
    """Why the library row cannot run here (its package is not installed), or None: one try."""
    try:
        sol.library(*inputs)
    except ModuleNotFoundError as exc:
        return (f"needs {exc.name}, which is not installed: `.venv/bin/python -m pip install {exc.name}` "
                "adds this row")
    return None


def version_rtol(sol, name: str) -> float | None:
    """The tolerance a benchmark row is re-checked with: the day's VERSION_RTOL for that version if it
    names one (a library row computing in fp16, a version that rounds by design), else its RTOL, else
    None (checking's default for the dtype)."""
    return getattr(sol, "VERSION_RTOL", {}).get(name) or getattr(sol, "RTOL", None)


def save_json(result: Result, path: str | Path) -> None:
    Path(path).write_text(result.to_json())
