"""Day 50: masking the shuffle I -- streams: hide host <-> device copies behind the kernel.

The job: out = f(x) on a float32 NumPy array, where f is a polynomial of degree `iters` evaluated by
Horner's rule on the clamped input (a chain of `iters` FMAs per element). With iters = 1024 the kernel
was meant to take about as long as the copies of its data (on the H200 it takes 3.7x a copy), so the
three stages (copy in, compute, copy out) are of one order and how they are scheduled decides the time.

v1 naive       one after another on the default stream, from pageable memory: cuda.to_device(x),
               one launch over the whole array, copy_to_host(). Each stage waits for the one before,
               and the pageable copies run at the driver's CPU memcpy rate (~8 GB/s up, ~15 down).
v2 overlapped  the host arrays page-locked (x with cuda.pinned, the result allocated locked with
               cuda.pinned_array), the work cut into CHUNKS chunks, each chunk's upload, kernel and
               download issued on one of STREAMS streams, round-robin. The H2D and D2H copy engines
               and the SMs are three independent engines: while chunk k+1 goes up, chunk k computes
               and chunk k-1 comes down. The time tends to the longest stage, not to the sum.
               For a program that runs the pipeline many times on the same buffers, capture() records
               it once as a CUDA graph, its two end chunks cut into halving pieces (tapered): one
               launch issues every chunk, and the fill and drain shrink to a small piece's time.

Napkin math (n = 2^26, 256 MB each way; rates of the H200 host from day 03: pinned ~55 GB/s each
way, pageable ~8 up and ~15 down; FP32 FMA ~33 T/s over 132 SMs):
  upload (pinned)  268 MB / 55 GB/s          ~4.9 ms
  kernel           2^26 x 1024 FMAs / 33 T/s  ~2-3 ms   (HBM traffic 0.5 GB: 0.13 ms, noise)
  download         268 MB / 55 GB/s          ~4.9 ms
  naive            32 + 2.5 + 18 ms          ~50 ms     (pageable, serial; first touch of the result extra)
  serial, pinned   4.9 + 2.5 + 4.9           ~12 ms
  overlapped       4.9 + (2.5 + 4.9) / 16    ~5.4 ms    (the bound: the longest stage, plus one chunk of
                                                         the others to fill and drain the pipeline)
so the target is the overlapped pipeline within 1.15x of the longest single stage. `stage_times(x,
iters)` measures every stage alone and both pipelines on the GPU; `timeline(x, iters)` records CUDA
events per chunk per stage for the notebook's Gantt chart. The overlapped host function also pays
page-locking x and allocating a locked result (~14 ms per 256 MB on day 03's host): stage_times keeps
its buffers locked across repetitions, as a real program would.
Measured on the H200 (stage_times): upload 4.92 ms (54.5 GB/s), kernel 18.1 ms (~3.8 T FMA/s, far
below the napkin's 33: the kernel, 3.7x a copy, is the longest stage at ITERS = 1024), download 4.89 ms
(54.9 GB/s); serial pinned 27.9 ms; overlapped 18.3 ms = 1.01x the longest stage (target 1.15x: met);
naive from pageable memory 113 ms, 6.2x the overlapped. When the bench handed both versions pageable
arrays and the result was locked anew on every call, it timed naive 158 ms and overlapped 139 ms: ~120 ms
a call went to locking x and allocating a locked result. Now an input already locked is used as it is,
the result comes from CuPy's pinned pool, and the bench locks its input once (BENCH_HOST_INPUTS):
on the H200 naive 114.9 ms, overlapped 20.3 ms a call (5.65x), at ITERS = 1024.
That size is kernel-bound: the 1.01x only says the copies hid behind the kernel. Where the transfers
dominate, stage_times(x, 128) on the H200: upload 4.98 ms (53.9 GB/s), kernel 2.48 ms, download 4.94 ms
(54.3 GB/s); serial pinned 12.60 ms; overlapped 6.23 ms = 1.25x the longest stage (the upload): the
target 1.15x is missed by 0.10x (the napkin's bound, 4.9 + (2.5 + 4.9) / 16, is 1.09x). The likely
reason: both directions at once, never timed alone; 537 MB in 6.23 ms is 86 GB/s for the two together,
against 108 if each kept its rate alone; timeline(x, 128) shows the 16 uploads adding up to 5.94 ms in
the pipeline against 4.98 alone. Naive from pageable memory 128.7 ms, 20.7x the overlapped pipeline.
"""

import contextlib
import statistics
import time

import numpy as np

from course import ON_GPU, checking, cuda, launch
from numba import float32

TITLE = "Masking the shuffle I: streams overlap copies with compute"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "overlapped")
# one element; under one chunk; 256-element chunks: +1 (257 = 256 + 1), -1 (511 = 256 + 255), a
# prime (1021 = 3 x 256 + 253); 512-element chunks: a last chunk of one element (4097) and of 3 (4099)
TEST_SIZES = (1, 255, 257, 511, 1021, 4097, 4099)
BENCH_SIZES = (1 << 26,)  # 256 MB each way: ~5 ms per copy on PCIe Gen5, far past launch overheads
BOUND = "memory"
# The transfers are the point: bench passes NumPy arrays in, page-locked once beforehand, as a program
# that streams data keeps its staging buffers ("pinned"): the overlapped version is then timed as it
# runs call after call, not paying to lock 256 MB on each.
BENCH_HOST_INPUTS = "pinned"
ITERS = 1024  # FMAs per element at bench sizes: the kernel's time comparable to the copies'
# Pipeline fill and drain cost about 1/CHUNKS of the other stages; each chunk costs the host three
# calls. Planned once, 24 chunks measured fastest on an H100 host (5.86 ms against 6.25 at 16, 6.36 at
# 32: the lesson's table).
CHUNKS = 24
STREAMS = 4  # three stages in flight at once need three streams; a fourth gives the host slack
# The graph's plan: GRAPH_CHUNKS chunks, each end chunk cut into TAPER + 1 halving pieces (tapered). With
# no host cost a chunk, more chunks pay: 32 + 2 measured 1.13x the upload alone on an H100 host, 24 + 2
# 1.18x; on another, whose link was the limit, 1.17x from 24 chunks up, tapered or not (the lesson).
GRAPH_CHUNKS = 32
TAPER = 2
ALIGN = 256  # chunk starts on 1 KB boundaries (and whole blocks of THREADS)
THREADS = 256


def make_inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, n).astype(np.float32)  # some values past the clamp at +-1
    iters = ITERS if n >= 1 << 16 else 3  # 3 at test sizes: the simulator runs every FMA in Python
    return x, iters


def reference(x, iters):
    """Horner's rule for 1 + h + h^2 + ... + h^iters with h = clamp(x, -1, 1) / 2: the geometric
    series, summed in closed form in float64 (|h| <= 1/2, so 1 - h never cancels)."""
    h = np.clip(x.astype(np.float64), -1.0, 1.0) * 0.5
    return ((1.0 - h ** (iters + 1)) / (1.0 - h)).astype(np.float32)


def traffic(x, iters):
    """(minimum bytes through device memory, floating-point operations): x read once, out written
    once; one FMA (2 FLOPs) per Horner step."""
    return 2 * x.nbytes, 2 * iters * x.size


def host_link_bytes(x, iters):
    """Bytes over PCIe: x up, the result down, once each."""
    return 2 * x.nbytes


@cuda.jit
def horner_kernel(x, out, start, stop, iters):
    """out[i] = 1 + h + h^2 + ... + h^iters with h = clamp(x[i], -1, 1) / 2, for start <= i < stop
    only (one chunk of the arrays), by Horner's rule: p = 1, then `iters` times p = p * h + 1.

    A grid-stride loop from start + cuda.grid(1), step cuda.gridsize(1), while i < stop: the chunk's
    launch covers [start, stop) and nothing else (the host clips `stop` for the last chunk). Float32
    throughout: write constants as float32(...), or the arithmetic is promoted to float64.
    """
    # EXERCISE: grid-stride over [start, stop): clamp, halve, then `iters` Horner steps in float32
    i = start + cuda.grid(1)
    stride = cuda.gridsize(1)
    one = float32(1.0)
    half = float32(0.5)
    while i < stop:
        h = half * min(max(x[i], -one), one)
        p = one
        # A dependent FMA chain: each thread waits ~4 cycles per step, so throughput comes from the
        # many warps resident per SM (the grid fills the GPU), not from this thread.
        for _ in range(iters):
            p = p * h + one
        out[i] = p
        i += stride


_SIG = "void(float32[::1], float32[::1], int64, int64, int64)"
KERNELS = {"naive": (horner_kernel, _SIG), "overlapped": (horner_kernel, _SIG)}


def _check(x, iters):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if not isinstance(iters, (int, np.integer)) or isinstance(iters, bool) or iters < 0:
        raise ValueError(f"iters: expected an integer >= 0, got {iters!r}")


def _grid(n: int) -> int:
    return launch.grid_stride_blocks(n, THREADS)


def chunk_bounds(n: int, chunks: int = CHUNKS) -> list:
    """The pipeline's plan: [(lo, hi), ...] covering [0, n) in order, no gaps, no overlap, no empty
    chunk. Every chunk but the last holds `size` elements, where size = ceil(n / chunks) rounded up to
    a multiple of ALIGN (so every chunk starts ALIGN-aligned and there are at most `chunks` of them);
    the last chunk holds what is left, hi clipped to n (it is short whenever size does not divide n).
    """
    # EXERCISE: size = ceil(n / chunks) rounded up to ALIGN; (lo, min(lo + size, n)) for lo in steps of size
    size = -(-n // chunks)
    size = -(-size // ALIGN) * ALIGN
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def tapered(bounds: list, pieces: int = TAPER) -> list:
    """bounds (chunk_bounds') with the two end chunks cut into halving pieces: the first into pieces + 1
    parts of rising length (its top half last, the top half of the rest before it, ...), the last into
    pieces + 1 parts of falling length (the mirror: its bottom half first, ...). The pipeline's fill (the
    first upload, alone on the link) and drain (the last kernel and download) then cost a small piece's
    time, and only the ends get more pieces. Each half is rounded up to a multiple of ALIGN (so every
    start stays aligned and a half is never shorter than what is left to cut); a range too short to halve
    keeps fewer pieces; fewer than three chunks, or pieces = 0: bounds unchanged. Still in order, no gap,
    no overlap, nothing empty."""
    # EXERCISE: cut halves (rounded up to ALIGN) off the first chunk's top and the last's bottom, `pieces` times
    if pieces == 0 or len(bounds) < 3:
        return list(bounds)

    def halve(lo, hi, rising):
        parts = []
        for _ in range(pieces):
            half = -(-(hi - lo) // (2 * ALIGN)) * ALIGN  # half the range, rounded up: at least the rest
            if half >= hi - lo:
                break
            if rising:  # the big half goes last: cut it off the top
                parts.append((hi - half, hi))
                hi -= half
            else:  # the big half goes first
                parts.append((lo, lo + half))
                lo += half
        return sorted(parts + [(lo, hi)])

    return halve(*bounds[0], True) + list(bounds[1:-1]) + halve(*bounds[-1], False)


def plan(x, out, d_x, d_out, streams, chunks: int = CHUNKS, bounds=None) -> list:
    """The pipeline's per-chunk work, decided once: [(lo, hi, stream, x[lo:hi], d_x[lo:hi],
    d_out[lo:hi], out[lo:hi]), ...] for the chunks of chunk_bounds(n, chunks) (or the given bounds) in
    order, chunk k on stream streams[k % len(streams)] (round-robin: consecutive chunks never share a
    stream).

    The views are made here, not while issuing: slicing a Numba device array is host work (tens of
    microseconds), and a program that runs its pipeline many times makes them once, as it locks its
    host buffers once. Issuing then only calls the driver.
    """
    if bounds is None:
        bounds = chunk_bounds(x.size, chunks)
    # EXERCISE: one tuple per chunk of bounds: its range, its stream (round-robin) and the four views of its range
    steps = []
    for k, (lo, hi) in enumerate(bounds):
        steps.append((lo, hi, streams[k % len(streams)], x[lo:hi], d_x[lo:hi], d_out[lo:hi], out[lo:hi]))
    return steps


def issue(steps, d_x, d_out, iters) -> None:
    """Queue every chunk of plan(...)'s steps and return without waiting: on the chunk's stream s,
    upload its x view into its d_x view (copy_to_device(..., stream=s)), launch horner_kernel on
    [lo, hi) ([grid, THREADS, s], grid from the chunk's length, the whole d_x and d_out passed), and
    download its d_out view into its out view (copy_to_host(..., stream=s)). The three steps of one
    chunk share one stream: that orders them; chunks on other streams overlap with them."""
    # EXERCISE: per step: upload, launch on [lo, hi), download, all three on the step's stream
    for lo, hi, s, x_part, d_x_part, d_out_part, out_part in steps:
        d_x_part.copy_to_device(x_part, stream=s)  # H2D copy engine
        horner_kernel[_grid(hi - lo), THREADS, s](d_x, d_out, lo, hi, iters)  # SMs
        d_out_part.copy_to_host(out_part, stream=s)  # D2H copy engine: runs during the next uploads


def pipeline(x, out, d_x, d_out, iters, streams, chunks: int = CHUNKS) -> None:
    """Compute out = f(x) chunk by chunk, round-robin over `streams`, and wait for all of them.

    x, out: host arrays of n float32, page-locked (else the async copies silently run synchronously);
    d_x, d_out: device arrays of n float32. plan, then issue, then synchronize every stream: until
    then `out` is not written yet.
    """
    issue(plan(x, out, d_x, d_out, streams, chunks), d_x, d_out, iters)
    for s in streams:
        s.synchronize()


def graph_streams() -> tuple:
    """GPU only. STREAMS CuPy streams, non-blocking (a capture may not involve the legacy default stream),
    and the same streams as Numba sees them (cuda.external_stream), for plan's steps and capture."""
    _need_gpu("graph_streams")
    import cupy as cp

    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    return streams, [cuda.external_stream(s.ptr) for s in streams]


def capture(steps, d_x, d_out, iters, streams):
    """GPU only. issue(steps, ...) recorded into a CUDA graph instead of run: one graph.launch(stream)
    then issues every chunk's upload, kernel and download, in their streams' order, for the host's cost of
    one call. For a program that runs its pipeline many times on the same buffers: the three Numba calls
    a chunk (~100-300 us of Python each) are paid once, at capture, and the schedule no longer waits for
    the host. `streams`: the CuPy streams behind the steps' Numba streams (graph_streams). A capturing
    stream forks to them (each waits on an event recorded in the capture) and joins them back (it waits on
    an event recorded on each), so the graph holds the chunks' streams as parallel branches."""
    _need_gpu("capture")
    import cupy as cp

    origin = cp.cuda.Stream(non_blocking=True)
    origin.begin_capture()
    try:
        fork = origin.record()
        for s in streams:
            s.wait_event(fork)
        issue(steps, d_x, d_out, iters)
        for s in streams:
            origin.wait_event(s.record())
    finally:
        graph = origin.end_capture()  # ends the capture even when issuing failed, so the stream is usable
    return graph


def naive(x, iters):
    _check(x, iters)
    if not launch.on_host(x):  # device data: nothing to transfer, one launch
        out = launch.empty(x.shape, np.float32)
        horner_kernel[_grid(x.size), THREADS](x, out, 0, x.size, iters)
        return out
    # Each stage waits for the one before; the pageable copies go through the driver's staging buffer.
    (d_x,) = launch.to_device(x)
    out = launch.empty(x.shape, np.float32)
    horner_kernel[_grid(x.size), THREADS](d_x, out, 0, x.size, iters)
    return out.copy_to_host()


def overlapped(x, iters, chunks: int = CHUNKS):
    _check(x, iters)
    if not launch.on_host(x):  # device data: no copies to hide, the kernel over the whole array
        out = launch.empty(x.shape, np.float32)
        horner_kernel[_grid(x.size), THREADS](x, out, 0, x.size, iters)
        return out
    # Locked from birth, so downloads DMA straight in; from CuPy's pinned pool, so a second call reuses
    # the pages the first call's result gave back instead of locking 256 MB again.
    result = launch.pinned_empty(x.shape, np.float32)
    d_x = cuda.device_array(x.shape, np.float32)
    d_out = launch.empty(x.shape, np.float32)
    streams = [cuda.stream() for _ in range(STREAMS)]
    # An async copy from pageable memory is staged by the CPU and returns only when done, so nothing
    # would overlap: x is locked for the call (cudaHostRegister) unless it already is (allocated
    # locked, as a program that streams data keeps its staging buffers).
    with contextlib.nullcontext() if launch.is_pinned(x) else cuda.pinned(x):
        pipeline(x, result, d_x, d_out, iters, streams, chunks)
    return result


# --- measurements on the GPU (the lesson's numbers and the notebook's timeline) ---------------------


def _need_gpu(what: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{what} times CUDA streams with events: it needs a CUDA GPU "
                           "(the simulator runs streams one after another and its events read -1)")


def _verify(got, want, name: str) -> None:
    """MismatchError unless got matches want (the reference, computed once per measurement: at 2^26
    elements the float64 reference and a host comparison take seconds each)."""
    report = checking.compare(got, want, name=name)
    if not report.ok:
        raise checking.MismatchError(report.text)


def _event_ms(fn, repeats: int) -> float:
    """Median CUDA-event time of fn() (after one warm-up), events on the legacy default stream, which
    waits for the blocking streams of cuda.stream() and makes them wait: it brackets all of them."""
    fn()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = cuda.event(), cuda.event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(cuda.event_elapsed_time(start, end))
    return statistics.median(samples)


@contextlib.contextmanager
def _buffers(x):
    """Page-locked host input (a copy of x) and output, device input and output, STREAMS streams."""
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    d_x = cuda.device_array(x.shape, np.float32)
    d_out = cuda.device_array(x.shape, np.float32)
    yield h_in, h_out, d_x, d_out, [cuda.stream() for _ in range(STREAMS)]


def stage_times(x, iters, chunks: int = CHUNKS, repeats: int = 5, graph_chunks: int = GRAPH_CHUNKS,
                taper: int = TAPER) -> dict:
    """GPU only. Median times (ms) of each stage alone on page-locked buffers (upload, kernel,
    download), of both copies at once on two streams (duplex), of the three one after another
    (serial_pinned), of the overlapped pipeline on the same buffers (overlapped_ms with its plan made
    once beforehand, as the buffers are; unplanned_ms making it on every call), the host's
    microseconds a chunk to plan and to issue, of the same pipeline captured once as a CUDA graph with
    its end chunks tapered (graph_ms: replays of capture(...) on tapered(chunk_bounds(n, graph_chunks),
    taper)), and of the naive version from pageable memory; the ratio the day aims at (overlapped / longest stage,
    and graph / longest stage: target <= 1.15), the pipelines against their bound (the longest stage or
    the duplex copies, whichever is longer) and the copy rates. Verifies what it timed."""
    _need_gpu("stage_times")
    _check(x, iters)
    n = x.size
    want = reference(x, iters)
    with _buffers(x) as (h_in, h_out, d_x, d_out, streams):
        grid = _grid(n)
        stages = {
            "upload_ms": lambda: d_x.copy_to_device(h_in),
            "kernel_ms": lambda: horner_kernel[grid, THREADS](d_x, d_out, 0, n, iters),
            "download_ms": lambda: d_out.copy_to_host(h_out),
        }
        t = {name: _event_ms(fn, repeats) for name, fn in stages.items()}
        # Both copies at once, each whole array on its own stream: what the link gives in both
        # directions together, which the pipeline needs whenever the kernel is not the longest stage.
        up, down = streams[0], streams[1]
        t["duplex_ms"] = _event_ms(lambda: (d_x.copy_to_device(h_in, stream=up),
                                            d_out.copy_to_host(h_out, stream=down)), repeats)
        t["serial_pinned_ms"] = _event_ms(lambda: [fn() for fn in stages.values()], repeats)
        _verify(h_out, want, "serial_pinned")
        h_out[:] = np.nan
        t["unplanned_ms"] = _event_ms(lambda: pipeline(h_in, h_out, d_x, d_out, iters, streams, chunks),
                                      repeats)
        _verify(h_out, want, "overlapped pipeline")
        h_out[:] = np.nan
        # As a program that runs its pipeline many times: the views made once, with the buffers.
        t0 = time.perf_counter()
        steps = plan(h_in, h_out, d_x, d_out, streams, chunks)
        plan_s = time.perf_counter() - t0
        t["overlapped_ms"] = _event_ms(lambda: issue(steps, d_x, d_out, iters), repeats)
        _verify(h_out, want, "overlapped pipeline, planned once")
        # The host's side: how long issuing takes when the GPU is not what it waits for.
        cuda.synchronize()
        t0 = time.perf_counter()
        issue(steps, d_x, d_out, iters)
        issue_s = time.perf_counter() - t0
        cuda.synchronize()
        t["plan_us_per_chunk"] = 1e6 * plan_s / len(steps)
        t["issue_us_per_chunk"] = 1e6 * issue_s / len(steps)
        # The same pipeline as one CUDA graph, its end chunks tapered: the host issues it in one call.
        import cupy as cp

        graph_cp, graph_nb = graph_streams()
        bounds = tapered(chunk_bounds(n, graph_chunks), taper)
        graph = capture(plan(h_in, h_out, d_x, d_out, graph_nb, bounds=bounds), d_x, d_out, iters, graph_cp)
        h_out[:] = np.nan
        # launched on the legacy default stream, where _event_ms records its events: they bracket it
        t["graph_ms"] = _event_ms(lambda: graph.launch(stream=cp.cuda.Stream.null), repeats)
        _verify(h_out, want, "overlapped pipeline as a CUDA graph")
        t["graph_pieces"] = len(bounds)
    t["naive_ms"] = _event_ms(lambda: naive(x, iters), repeats)
    longest = max(t["upload_ms"], t["kernel_ms"], t["download_ms"])
    bound = max(longest, t["duplex_ms"])  # the copies overlap each other in the pipeline, too
    t.update(
        longest_stage_ms=longest,
        overlapped_over_longest=t["overlapped_ms"] / longest,
        bound_ms=bound,
        overlapped_over_bound=t["overlapped_ms"] / bound,
        graph_over_longest=t["graph_ms"] / longest,
        graph_over_bound=t["graph_ms"] / bound,
        duplex_gbps=2 * x.nbytes / (t["duplex_ms"] * 1e-3) / 1e9,
        naive_over_overlapped=t["naive_ms"] / t["overlapped_ms"],
        upload_gbps=x.nbytes / (t["upload_ms"] * 1e-3) / 1e9,
        download_gbps=x.nbytes / (t["download_ms"] * 1e-3) / 1e9,
        n=n, iters=iters, chunks=len(chunk_bounds(n, chunks)), streams=STREAMS,
    )
    return t


def timeline(x, iters, chunks: int = CHUNKS) -> dict:
    """GPU only. When each stage of each chunk ran, in ms from a start event, for both pipelines:
    {"naive": [...], "overlapped": [...]}, each a list of dicts (stage "H2D" | "kernel" | "D2H",
    chunk, stream, start, end). Events bracket every copy and launch on its stream; an event before a
    stage marks when its stream got there, so the stage's start is taken as the later of that and the
    end of the same stage of the previous chunk (each engine serves its chunks in issue order).
    The naive run is the naive version's schedule (pageable, default stream, one chunk)."""
    _need_gpu("timeline")
    _check(x, iters)
    n = x.size
    want = reference(x, iters)

    def bars(marks, t0):
        rows, last_end = [], {}
        for chunk, stream, events in marks:
            at = [cuda.event_elapsed_time(t0, e) for e in events]
            for j, stage in enumerate(("H2D", "kernel", "D2H")):
                start = max(at[j], last_end.get(stage, 0.0))
                last_end[stage] = at[j + 1]
                rows.append(dict(stage=stage, chunk=chunk, stream=stream, start=start, end=at[j + 1]))
        return rows

    def marked(stream, up, compute, down):
        events = [cuda.event() for _ in range(4)]
        for e, step in zip(events, (up, compute, down, None)):
            e.record(stream)
            if step is not None:
                step()
        return events

    # naive: pageable memory, the default stream, one chunk
    naive(x[: min(n, 1 << 20)], iters)  # warm-up (compile, context)
    cuda.synchronize()
    t0 = cuda.event()
    t0.record()
    dev_x = cuda.device_array(x.shape, np.float32)
    dev_out = cuda.device_array(x.shape, np.float32)
    result = np.empty_like(x)
    events = marked(0, lambda: dev_x.copy_to_device(x),
                    lambda: horner_kernel[_grid(n), THREADS](dev_x, dev_out, 0, n, iters),
                    lambda: dev_out.copy_to_host(result))
    events[-1].synchronize()
    _verify(result, want, "naive timeline")
    naive_rows = bars([(0, 0, events)], t0)

    # overlapped: page-locked buffers, chunks round-robin over the streams (pipeline's schedule)
    with _buffers(x) as (h_in, h_out, d_x, d_out, streams):
        pipeline(h_in, h_out, d_x, d_out, iters, streams, chunks)  # warm-up
        h_out[:] = np.nan
        steps = plan(h_in, h_out, d_x, d_out, streams, chunks)  # issue's steps, with events between them
        t0 = cuda.event()
        t0.record()
        marks = []
        for k, (lo, hi, s, x_part, d_x_part, d_out_part, out_part) in enumerate(steps):
            marks.append((k, k % len(streams), marked(
                s, lambda s=s, a=d_x_part, b=x_part: a.copy_to_device(b, stream=s),
                lambda lo=lo, hi=hi, s=s: horner_kernel[_grid(hi - lo), THREADS, s](d_x, d_out, lo, hi, iters),
                lambda s=s, a=d_out_part, b=out_part: a.copy_to_host(b, stream=s))))
        cuda.synchronize()
        _verify(h_out, want, "overlapped timeline")
        overlapped_rows = bars(marks, t0)
    return {"naive": naive_rows, "overlapped": overlapped_rows, "n": n, "iters": iters,
            "streams": STREAMS}


optimized = overlapped  # the day's optimized version
