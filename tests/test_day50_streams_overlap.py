"""Day 50 grader: a chunked pipeline over streams against copy, compute, copy in sequence.

The simulator runs streams one after another, so it cannot show overlap; it grades everything the
overlap depends on: the chunk plan at awkward sizes (a last chunk of one element, n under one
chunk), each chunk's kernel touching its chunk only, every chunk's upload, launch and download on one
stream, chunks spread over several streams, and async copies only from page-locked host memory.
Timing and real overlap are gpu-marked (stage_times, timeline).
"""

import re

import numpy as np
import pytest

from course import cuda, launch
from course.checking import assert_matches
from course.grading import Grader

g = Grader(50)

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    extra_cases={
        "x-2d": lambda xs: (xs[0].reshape(1, -1),) + xs[1:],
        "iters-negative": lambda xs: (xs[0], -1),
        "iters-float": lambda xs: (xs[0], 2.5),
    }
)


@pytest.mark.parametrize("chunks", [1, 3, 16])
def test_chunk_bounds_cover_the_array(chunks):
    """In order, no gap, no overlap, nothing empty, starts ALIGN-aligned, at most `chunks` chunks,
    equal lengths but the last, which is clipped to n."""
    g.require_implemented("chunk_bounds")
    align = g.solution.ALIGN
    for n in (1, 2, align - 1, align, align + 1, 2 * align - 1, 1021, 16 * align + 1, 4099, 100_003):
        bounds = [tuple(map(int, b)) for b in g.target.chunk_bounds(n, chunks)]
        assert bounds and bounds[0][0] == 0, f"n={n}: the first chunk must start at 0, got {bounds[:2]}"
        assert bounds[-1][1] == n, (f"n={n}, chunks={chunks}: the last chunk ends at {bounds[-1][1]}, "
                                    f"not n (the last chunk's length not clipped?)")
        assert len(bounds) <= chunks, f"n={n}: {len(bounds)} chunks for chunks={chunks}"
        for (lo, hi), (lo2, _) in zip(bounds, bounds[1:]):
            assert hi == lo2, f"n={n}: chunk ({lo}, {hi}) followed by one starting at {lo2}"
        assert all(lo < hi for lo, hi in bounds), f"n={n}: an empty chunk in {bounds}"
        assert all(lo % align == 0 for lo, _ in bounds), f"n={n}: a chunk start not a multiple of {align}"
        sizes = {hi - lo for lo, hi in bounds[:-1]}
        assert len(sizes) <= 1 and bounds[-1][1] - bounds[-1][0] <= max(sizes, default=n), (
            f"n={n}: chunks of unequal length {sorted(sizes)} before the last")


@pytest.mark.parametrize("pieces", [0, 1, 2, 3])
def test_tapered_bounds_cut_the_end_chunks(pieces):
    """The end chunks cut into halving pieces: the first rising (each piece at most the next), the last
    falling; the middle chunks untouched; still in order, no gap, nothing empty, starts aligned; a range
    too short to halve keeps fewer pieces."""
    g.require_implemented("tapered")
    align = g.solution.ALIGN
    for n, chunks in ((100_003, 8), (64 * align + 5, 4), (3 * align, 3), (5 * align + 1, 24), (2 * align, 2),
                      (1, 1), (1 << 20, 16)):
        base = [tuple(map(int, b)) for b in g.solution.chunk_bounds(n, chunks)]
        got = [tuple(map(int, b)) for b in g.target.tapered(base, pieces)]
        where = f"n={n}, chunks={chunks}, pieces={pieces}"
        if pieces == 0 or len(base) < 3:
            assert got == base, f"{where}: expected the bounds unchanged, got {got}"
            continue
        assert got[0][0] == 0 and got[-1][1] == n, f"{where}: {got[:2]} ... {got[-2:]}"
        for (lo, hi), (lo2, _) in zip(got, got[1:]):
            assert hi == lo2, f"{where}: ({lo}, {hi}) followed by a piece starting at {lo2}"
        assert all(lo < hi for lo, hi in got), f"{where}: an empty piece in {got}"
        assert all(lo % align == 0 for lo, _ in got), f"{where}: a start not a multiple of {align}"
        first = [p for p in got if p[1] <= base[0][1]]
        last = [p for p in got if p[0] >= base[-1][0]]
        assert got[len(first):len(got) - len(last)] == base[1:-1], f"{where}: the middle chunks changed"
        for part, rising in ((first, True), (last, False)):
            size = part[-1][1] - part[0][0]
            assert len(part) <= pieces + 1, f"{where}: an end chunk cut into {len(part)} pieces"
            if size >= align << (pieces + 1):  # room for every cut
                assert len(part) == pieces + 1, f"{where}: an end chunk of {size} cut into {len(part)} pieces"
            lengths = [hi - lo for lo, hi in part]
            ordered = lengths if rising else lengths[::-1]
            way = "rising" if rising else "falling"
            assert ordered == sorted(ordered), f"{where}: piece lengths {lengths} not {way}"
            half = -(-size // (2 * align)) * align
            assert len(part) == 1 or ordered[-1] == half, (
                f"{where}: the biggest piece of an end chunk of {size} is {ordered[-1]}, not half of it ({half}, "
                f"rounded up to {align})")


def test_kernel_writes_its_chunk_only():
    """horner_kernel on [lo, hi) of a poisoned output: that range right, everything else untouched."""
    g.require_implemented("naive")
    x, iters = g.solution.make_inputs(700, seed=7)
    lo, hi = 256, 613
    out = launch.empty(x.shape, np.float32)
    g.target.horner_kernel[2, g.solution.THREADS](cuda.to_device(x), out, lo, hi, iters)
    got = out.copy_to_host()
    assert np.isnan(got[:lo]).all() and np.isnan(got[hi:]).all(), (
        f"the launch for [{lo}, {hi}) wrote outside it (elements before {lo} or from {hi} on)")
    assert_matches(got[lo:hi], g.solution.reference(x, iters)[lo:hi], name=f"horner_kernel on [{lo}, {hi})")


class Recorder:
    """Every copy between a host array and a device array, every launch of the day's kernel (with its
    stream), and every host array page-locked (cuda.pinned, cuda.pinned_array, launch.pinned_empty), in
    order."""

    def __init__(self, monkeypatch):
        self.ops, self.pinned = [], []
        devarray = type(cuda.device_array(1, np.float32))
        kernel_type = type(g.target.horner_kernel)
        real_up, real_down = devarray.copy_to_device, devarray.copy_to_host
        real_getitem = kernel_type.__getitem__
        real_pinned, real_pinned_array = cuda.pinned, cuda.pinned_array
        real_pinned_empty = launch.pinned_empty

        def up(dev, ary, *args, **kwargs):
            if isinstance(ary, np.ndarray):
                self.ops.append(("up", _stream(args, kwargs), ary, dev.size))
            return real_up(dev, ary, *args, **kwargs)

        def down(dev, ary=None, *args, **kwargs):
            if ary is not None or dev.size:
                self.ops.append(("down", _stream(args, kwargs), ary, dev.size))
            return real_down(dev, ary, *args, **kwargs)

        def getitem(kernel, config):
            if kernel is g.target.horner_kernel or getattr(kernel, "py_func", None) is getattr(
                    g.target.horner_kernel, "py_func", 0):
                self.ops.append(("kernel", config[2] if len(config) > 2 else 0, None, None))
            return real_getitem(kernel, config)

        def pinned(*arrays):
            self.pinned.extend(arrays)
            return _enter_all(real_pinned, arrays)

        def pinned_array(*args, **kwargs):
            a = real_pinned_array(*args, **kwargs)
            self.pinned.append(a)
            return a

        def pinned_empty(*args, **kwargs):
            a = real_pinned_empty(*args, **kwargs)
            self.pinned.append(a)
            return a

        monkeypatch.setattr(devarray, "copy_to_device", up)
        monkeypatch.setattr(devarray, "copy_to_host", down)
        monkeypatch.setattr(kernel_type, "__getitem__", getitem)
        monkeypatch.setattr(cuda, "pinned", pinned)
        monkeypatch.setattr(cuda, "pinned_array", pinned_array)
        monkeypatch.setattr(launch, "pinned_empty", pinned_empty)

    def is_pinned(self, ary) -> bool:
        return ary is not None and any(np.shares_memory(ary, p) for p in self.pinned)


def _stream(args, kwargs):
    s = kwargs.get("stream", args[0] if args else 0)
    return 0 if s is None else s


def _enter_all(real_pinned, arrays):
    import contextlib

    stack = contextlib.ExitStack()
    for a in arrays:  # the simulator's cuda.pinned takes one array at a time
        stack.enter_context(real_pinned(a))
    return stack


def _default(s) -> bool:
    return isinstance(s, int) or s is cuda.default_stream() or bool(re.search("default", repr(s), re.I))


def _record(version, monkeypatch, n):
    g.require_implemented(version)
    x, iters = g.solution.make_inputs(n, seed=11)
    rec = Recorder(monkeypatch)
    with launch.no_poison():  # poisoning an output is itself a host->device copy in the simulator
        got = getattr(g.target, version)(x, iters)
    assert isinstance(got, np.ndarray), f"{version}: NumPy input must give a NumPy result"
    assert_matches(got, g.solution.reference(x, iters), name=f"{version}(n={n})")
    return rec


def test_overlapped_chunks_share_a_stream_each(monkeypatch):
    """n = 4099: 9 chunks. Per chunk an upload, a launch and a download, all three on the same
    non-default stream; consecutive chunks on different streams; at least two streams in use."""
    rec = _record("overlapped", monkeypatch, 4099)
    chunks = len(g.solution.chunk_bounds(4099))
    kinds = [op[0] for op in rec.ops]
    assert kinds == ["up", "kernel", "down"] * chunks, (
        f"overlapped: expected {chunks} x (upload, launch, download), one chunk after another; got {kinds}")
    per_chunk = [tuple(op[1] for op in rec.ops[3 * k:3 * k + 3]) for k in range(chunks)]
    for k, (up, kern, down) in enumerate(per_chunk):
        assert not any(_default(s) for s in (up, kern, down)), (
            f"chunk {k}: a copy or the launch went to the default stream, which serialises everything")
        assert up is kern is down, (
            f"chunk {k}: upload, launch and download on different streams: nothing orders the kernel "
            "after its upload, or the download after its kernel")
    streams = {id(s[0]) for s in per_chunk}
    assert len(streams) >= 2, "overlapped: every chunk on one stream: nothing can overlap"
    assert all(a[0] is not b[0] for a, b in zip(per_chunk, per_chunk[1:])), (
        "consecutive chunks on the same stream: the next upload waits for the previous download")


def test_overlapped_copies_from_page_locked_memory(monkeypatch):
    """An async copy from pageable memory runs synchronously (the driver stages it through the CPU):
    every host array the pipeline copies from or into must be page-locked."""
    rec = _record("overlapped", monkeypatch, 1021)
    copies = [op for op in rec.ops if op[0] in ("up", "down")]
    assert copies, "overlapped made no host<->device copies"
    for kind, _, ary, size in copies:
        assert rec.is_pinned(ary), (
            f"an {'upload from' if kind == 'up' else 'download into'} a pageable host array ({size} "
            "elements): page-lock it (cuda.pinned(x) for the input, launch.pinned_empty for the result)")


def test_naive_is_one_round_trip_on_the_default_stream(monkeypatch):
    """The contrast: one upload, one launch over everything, one download, all on the default stream."""
    rec = Recorder(monkeypatch)
    g.require_implemented("naive")
    x, iters = g.solution.make_inputs(1021, seed=13)
    with launch.no_poison():
        got = g.target.naive(x, iters)
    kinds = [op[0] for op in rec.ops]
    assert kinds.count("kernel") == 1 and kinds.count("down") == 1, kinds
    assert all(_default(op[1]) for op in rec.ops), "naive: everything on the default stream"
    assert_matches(got, g.solution.reference(x, iters), name="naive(n=1021)")


def test_overlapped_leaves_device_inputs_on_the_device():
    g.require_implemented("overlapped")
    x, iters = g.solution.make_inputs(1021, seed=17)
    got = g.target.overlapped(cuda.to_device(x), iters)
    assert not isinstance(got, np.ndarray), "device input must give a device result"
    assert_matches(got, g.solution.reference(x, iters), name="overlapped(device input)")


def test_kernel_is_float32_in_registers():
    rep = g.report("overlapped")
    assert not rep.uses_local_memory, f"{rep.stack_bytes} bytes of stack (local memory)"
    f64 = len(re.findall(r"\.f64\b", rep.ptx))
    assert f64 == 0, (f"{f64} float64 instructions: a Python float constant promotes the arithmetic; "
                      "write float32(1.0)")


def test_measurements_need_a_gpu():
    from course import ON_GPU

    g.require_implemented("overlapped")
    if ON_GPU:
        pytest.skip("on a GPU they run: see the gpu-marked tests")
    x, iters = g.solution.make_inputs(300, seed=1)
    for fn in (g.target.stage_times, g.target.timeline):
        with pytest.raises(RuntimeError, match="GPU"):
            fn(x, iters)


@pytest.mark.gpu
def test_large_sizes():
    """2^24 + 3 elements (chunks of 2^20 + 256: the last one short), both versions."""
    for version in g.versions:
        g.run_and_compare(version, (1 << 24) + 3)


@pytest.mark.gpu
def test_stage_times_on_the_gpu():
    """Real streams: every stage takes time, the pipeline is right (stage_times checks it)."""
    g.require_implemented("overlapped")
    x, iters = g.solution.make_inputs((1 << 24) + 5, seed=3)
    t = g.target.stage_times(x, iters, repeats=2)
    for key in ("upload_ms", "kernel_ms", "download_ms", "duplex_ms", "serial_pinned_ms", "overlapped_ms",
                "graph_ms", "naive_ms"):
        assert t[key] > 0, f"{key} = {t[key]}"
    assert t["graph_pieces"] > len(g.solution.chunk_bounds(x.size, g.solution.GRAPH_CHUNKS)), t


@pytest.mark.gpu
def test_captured_graph_replays_the_pipeline():
    """capture() of a tapered plan, launched twice over a poisoned result: right both times, and the
    capture leaves nothing running (the result is not written until the graph is launched)."""
    g.require_implemented("overlapped", "tapered")
    x, iters = g.solution.make_inputs((1 << 20) + 7, seed=13)
    want = g.solution.reference(x, iters)
    h_in, h_out = launch.pinned_copy(x), launch.pinned_empty(x.shape, np.float32)
    d_x, d_out = cuda.device_array(x.shape, np.float32), cuda.device_array(x.shape, np.float32)
    cps, nbs = g.target.graph_streams()
    bounds = g.target.tapered(g.solution.chunk_bounds(x.size, 6), 2)
    steps = g.target.plan(h_in, h_out, d_x, d_out, nbs, bounds=bounds)
    assert len(steps) == len(bounds) == 10
    h_out[:] = np.nan
    graph = g.target.capture(steps, d_x, d_out, iters, cps)
    cuda.synchronize()
    assert np.isnan(h_out).all(), "capture ran the pipeline: it should only record it"
    for k in range(2):
        h_out[:] = np.nan
        graph.launch(stream=cps[0])
        cps[0].synchronize()
        assert_matches(h_out, want, name=f"graph launch {k + 1}")


@pytest.mark.gpu
def test_timeline_on_the_gpu():
    g.require_implemented("overlapped")
    x, iters = g.solution.make_inputs((1 << 22) + 7, seed=5)
    tl = g.target.timeline(x, iters)
    chunks = len(g.solution.chunk_bounds(x.size))
    assert len(tl["naive"]) == 3 and len(tl["overlapped"]) == 3 * chunks
    for row in tl["naive"] + tl["overlapped"]:
        assert 0 <= row["start"] <= row["end"], row


@pytest.mark.gpu
def test_overlapped_from_an_already_locked_input():
    """An input already page-locked (the benchmark's, a program's staging buffer) is used as it is: locking
    it again would fail (cudaErrorHostMemoryAlreadyRegistered). Called twice, the second result reuses
    the pinned pool's pages and must not alias the first."""
    g.require_implemented("overlapped")
    x, iters = g.solution.make_inputs((1 << 20) + 9, seed=11)
    want = g.solution.reference(x, iters)
    locked = launch.pinned_copy(x)
    assert launch.is_pinned(locked)
    first = g.target.overlapped(locked, iters)
    assert_matches(first, want, name="overlapped on a locked input")
    second = g.target.overlapped(locked[::-1].copy(), iters)
    assert_matches(second, want[::-1], name="overlapped, second call")
    assert_matches(first, want, name="the first result after the second call")
