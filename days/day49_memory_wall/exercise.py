"""Day 49 exercise: HBM and the memory wall -- latency, bandwidth and bytes in flight, on a pointer chase.

    p = w;  repeat `steps` times: p = nxt[p];  out[w] = p        for each walker w < walkers

Every load's address is the value the previous load returned: a walker can never have more than one
load in flight. make_inputs lays nxt out as steps + 1 rows of `walkers` entries, visited in a random
row order: entry (row r, column w) holds the index of (next row, column w). So at every step the 32
walkers of a warp read 32 consecutive int32s (one 128-byte line, one coalesced request) and every
entry is read exactly once: nothing limits the bandwidth but how many loads are in flight.

v1 naive      one walker per thread: one 4-byte load in flight per thread, however many threads.
v2 optimized  CHAINS = 8 walkers per thread, advanced together in an unrolled loop from registers:
              eight independent loads in flight per thread, a grid of resident blocks only.

Napkin math (Little's law: bandwidth = bytes in flight / latency). Reads: 4 bytes a step; at
(2^21 walkers, 64 steps) 537 MB read + 8 MB written, ~0.13 ms at the H200's ~4.2 TB/s copy rate.
HBM latency was guessed at 0.6-0.8 us unloaded, ~3 MB in flight at 4.2 TB/s; measure_latency gives
298-338 ns on the H200 (L1 20 ns, L2 ~145 ns), so the copy rate x the unloaded latency is 1.3-1.4 MB
device-wide: ~10 KB per SM on 132 SMs, ~80 warp-loads of 128 B.
Naive: an SM holds at most 2048 threads, one 4-byte load each: 8 KB per SM, 1.08 MB device-wide;
more blocks only queue behind the resident ones. Optimized: 8 loads of 4 bytes per thread; at 32
registers 8 blocks of 256 fit an SM, 2048 threads x 32 B = 64 KB per SM, ~8.6 MB device-wide, so the
memory system saturates (the loaded latency rises, to ~2 us, instead of the bandwidth falling). The
bench size's 2^18 threads are 1024 blocks: one wave on 132 x 8 = 1056 resident slots. Target: >= 85 %
of the copy rate. Measured on the H200: naive 228 us (2,392 GB/s, 56 % of the 4,249 GB/s copy),
optimized 138 us (3,939 GB/s, 93 %, 8.4 MB in flight); bandwidth_vs_in_flight reaches 85 % at 4.3 MB
in flight, about three times copy rate x unloaded latency: under load each load takes ~1.1 us.

Measured on the machine itself (GPU only): measure_latency(bytes) chases a random single cycle over a
working set with one thread (the latency ladder: L1, L2, HBM), and bandwidth_vs_in_flight() times
the optimized kernel built for 1, 2, 4, 8, 16 chains at 1-8 blocks per SM.

What you write (each raises NotImplementedError with its hint until you do):
  chase_kernel                            one walker per thread: start at w, follow nxt for steps loads, write the
                                          final index (6 lines)
  make_chains_kernel.chase_chains_kernel  rounds of chains walkers a thread; per step, one load for every chain;
                                          guarded stores (16 lines)
  latency_kernel                          one dependent chain of loads through the ring, the final index in out[0]
                                          (4 lines)
Everything else in this file is given. Grade with:  make check DAY=49
"""

import functools

import numpy as np

from course import ON_GPU, cuda, launch  # first: course picks GPU or simulator before numba loads
from numba import uint32

TITLE = "HBM and the memory wall: latency, bandwidth and bytes in flight"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
# (walkers, steps): one walker, a block -1/+1, primes (rows that do not start on a 128-byte line)
TEST_SIZES = ((1, 1), (255, 3), (257, 2), (1021, 3), (4099, 2))
BENCH_SIZES = ((1 << 21, 64),)  # 545 MB of nxt (9x the 60 MB L2), every entry read once
BOUND = "memory"

THREADS = 256
CHAINS = 8  # walkers per thread in the optimized kernel: loads in flight per thread
LINE = 32  # int32 entries in a 128-byte line: measure_latency puts one ring node on each line
LATENCY_WARM = 1 << 12  # loads before the timed ones, in the same launch: warms this SM's L1
LADDER_SIZES = tuple(k << 10 for k in (8, 32, 128, 512)) + tuple(
    m << 20 for m in (2, 8, 16, 32, 48, 128, 512, 1024))  # bytes: L1 ... L2 (60 MB) ... HBM


def make_inputs(n, seed: int = 0):
    """(nxt, walkers, steps) for n = (walkers, steps): steps + 1 rows of `walkers` entries; walker w
    starts at entry w (row 0) and visits the rows in one random order, each row once."""
    walkers, steps = n
    rng = np.random.default_rng(seed)
    rows = steps + 1
    order = np.concatenate(([0], 1 + rng.permutation(rows - 1)))  # the row visited at each step
    following = np.empty(rows, dtype=np.int64)
    following[order] = np.roll(order, -1)  # the row after each row (the last points back to row 0)
    col = np.arange(walkers, dtype=np.int64)
    nxt = (following[:, None] * walkers + col[None, :]).astype(np.int32).reshape(-1)  # (rows * walkers,)
    return nxt, walkers, steps


def reference(nxt, walkers, steps):
    p = np.arange(walkers)
    for _ in range(steps):
        p = nxt[p]
    return p.astype(np.int32)


def traffic(nxt, walkers, steps):
    """(bytes the chase moves: one 4-byte load a step and one 4-byte store a walker, FLOPs: none).
    make_inputs's layout reads every entry once, so these are also the bytes through HBM."""
    return 4 * walkers * steps + 4 * walkers, 0


@cuda.jit
def chase_kernel(nxt, walkers, steps, out):
    """One thread per walker w = cuda.grid(1) (guard w < walkers): p = w, then `steps` times
    p = nxt[p]; write out[w] = p. Each load's address is the previous load's value."""
    raise NotImplementedError("Day 49: one walker per thread: start at w, follow nxt for steps loads, write the final "
                              "index (6 lines)")


@functools.cache
def make_chains_kernel(chains: int):
    """The optimized kernel for `chains` walkers per thread (a compile-time constant: the chains
    live in registers only if every index into them is known when the kernel is compiled)."""

    @cuda.jit
    def chase_chains_kernel(nxt, walkers, steps, out):
        """Grid-stride over rounds of `chains` * gridsize walkers. In the round starting at `first`
        (first = cuda.grid(1), then + chains * cuda.gridsize(1) a round), chain j of the thread
        walks walker first + j * cuda.gridsize(1), so the 32 lanes of a warp walk 32 consecutive
        walkers and every step of a chain is one coalesced line.

        Keep the positions in p = cuda.local.array(chains, uint32) indexed only by `for j in
        range(chains)` loops (unrolled: registers, no stack). Chains past the last walker repeat
        walker walkers - 1 and store nothing. Each step advances every chain once, so the `chains`
        loads of a step do not depend on each other; write out[walker] = p[j] after the last step.
        """
        raise NotImplementedError("Day 49: rounds of chains walkers a thread; per step, one load for every chain; "
                                  "guarded stores (16 lines)")

    return chase_chains_kernel


@cuda.jit
def latency_kernel(ring, start, loads, out):
    """One thread: p = start, then `loads` times p = ring[p]; write out[0] = p. (uint32 indices: no
    wrap-around check for negative indices on the chain's critical path.)"""
    raise NotImplementedError("Day 49: one dependent chain of loads through the ring, the final index in out[0] (4 "
                              "lines)")


@cuda.jit
def _touch_kernel(ring, out):
    # Reads the whole ring in parallel before it is timed: the working set sits in L2 if it fits.
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    acc = uint32(0)
    while i < ring.size:
        acc ^= ring[i]
        i += stride
    if acc == uint32(0xFFFFFFFF):  # never true for a ring (keeps the loads)
        out[0] = acc


_SIG = "void(int32[::1], int64, int64, int32[::1])"
KERNELS = {
    "naive": (chase_kernel, _SIG),
    "optimized": (make_chains_kernel(CHAINS), _SIG),
    "measure_latency": (latency_kernel, "void(uint32[::1], uint32, int64, uint32[::1])"),
}


def _check_count(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an int, got {type(value).__name__}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name}: expected {low} <= {name} <= {high}, got {int(value)}")


def _check(nxt, walkers, steps):
    launch.check_array("nxt", nxt, dtype=np.int32, ndim=1)
    if not 1 <= nxt.size < 2**31:
        raise ValueError(f"nxt: expected 1 to 2^31 - 1 entries (int32 indices), got {nxt.size}")
    _check_count("walkers", walkers, 1, nxt.size)
    _check_count("steps", steps, 1, 2**31 - 1)
    if isinstance(nxt, np.ndarray) and (nxt.min() < 0 or nxt.max() >= nxt.size):
        raise ValueError(f"nxt: every entry must be an index into nxt (0 <= v < {nxt.size}), "
                         f"got values from {nxt.min()} to {nxt.max()}")


def resident_blocks(kernel, threads: int = THREADS) -> int:
    """Blocks of `threads` the whole GPU runs at once for this kernel: its registers decide how many
    fit an SM. A grid larger than this runs in waves; the last, partial wave alone on the GPU has too
    few loads in flight. (The simulator: 8 blocks, as launch.grid_stride_blocks.)"""
    if not ON_GPU:
        return 8 * launch.sm_count()
    try:
        return int(kernel.compile(_SIG).max_cooperative_grid_blocks(threads))
    except Exception:  # a numba-cuda without the occupancy query: assume 8 blocks an SM
        return 8 * launch.sm_count()


def naive(nxt, walkers, steps):
    _check(nxt, walkers, steps)
    (d_nxt,) = launch.to_device(nxt)
    out = launch.empty((walkers,), np.int32)
    chase_kernel[launch.blocks(walkers, THREADS), THREADS](d_nxt, walkers, steps, out)
    return launch.result(out, nxt)


def _chase_chains(chains: int, nxt, walkers, steps, blocks=None):
    _check(nxt, walkers, steps)
    (d_nxt,) = launch.to_device(nxt)
    out = launch.empty((walkers,), np.int32)
    kernel = make_chains_kernel(chains)
    if blocks is None:  # enough for every walker in one round, never more than the GPU holds
        blocks = min(launch.blocks(-(-walkers // chains), THREADS), resident_blocks(kernel))
    kernel[blocks, THREADS](d_nxt, walkers, steps, out)
    return launch.result(out, nxt)


def optimized(nxt, walkers, steps):
    return _chase_chains(CHAINS, nxt, walkers, steps)


def library(nxt, walkers, steps):
    """The same walk in CuPy: one gather kernel a step, every walker's load independent within it,
    but `steps` launches and the positions written and re-read between them (a benchmark row)."""
    import cupy

    table = cupy.asarray(nxt)
    p = cupy.arange(walkers, dtype=cupy.int32)
    for _ in range(steps):
        p = table[p]
    return p


# ---- measured on the GPU: the latency ladder and bandwidth against bytes in flight --------------------

def _need_gpu(what: str) -> None:
    if not ON_GPU:
        raise RuntimeError(f"{what} times the memory system with CUDA events: it needs a CUDA GPU "
                           "(the simulator has no caches and no HBM)")


def make_ring(working_set_bytes: int, seed: int = 0):
    """(ring, order): a uint32 array of working_set_bytes // 4 entries with one node at the start of
    every 128-byte line, linked in ONE cycle through all the lines in random order (a uniformly
    random single cycle, the permutations Sattolo's algorithm draws, built vectorised): node
    order[k] * LINE holds order[k + 1] * LINE, and the last holds order[0] * LINE. Every load of a
    chase lands on another line, and which line comes next is known only once the load returns."""
    _check_count("working_set_bytes", working_set_bytes, 2 * LINE * 4, 4 << 31)
    lines = working_set_bytes // (LINE * 4)
    order = np.random.default_rng(seed).permutation(lines).astype(np.int64)
    ring = np.zeros(lines * LINE, dtype=np.uint32)
    ring[order * LINE] = (np.roll(order, -1) * LINE).astype(np.uint32)
    return ring, order


def measure_latency(working_set_bytes: int, steps: int = 1 << 14, repeats: int = 5, seed: int = 0) -> float:
    """Nanoseconds per dependent load for one thread chasing a random cycle over a working set of
    this many bytes (GPU only; RuntimeError without one).

    The ring is touched in parallel first (it sits in L2 if it fits); each timed launch makes
    LATENCY_WARM loads first (warming the L1 of the SM it runs on), then `steps` or 2 * `steps` more.
    The difference of the two launches' CUDA-event times, over `steps`, is the time per load: the
    launch and the warm-up cancel. Each launch starts where the one before stopped, so a ring larger
    than the L2 is chased through lines no earlier launch brought in (starting every launch at one
    node would time L2 hits from the second launch on, whatever the ring's size). The median of
    `repeats` pairs; the final index is checked."""
    _need_gpu("measure_latency")
    _check_count("steps", steps, 1, 2**31 - 1)
    ring, order = make_ring(working_set_bytes, seed)
    d_ring = cuda.to_device(ring)
    out = cuda.device_array(1, dtype=np.uint32)
    _touch_kernel[launch.sm_count() * 4, 256](d_ring, out)
    warm = min(order.size, LATENCY_WARM)
    position = [0]  # where on the cycle the next launch starts: after the nodes the last one visited

    def timed(loads: int) -> float:
        first = position[0]
        position[0] = (first + loads) % order.size
        t0, t1 = cuda.event(), cuda.event()
        t0.record()
        latency_kernel[1, 1](d_ring, np.uint32(order[first] * LINE), loads, out)
        t1.record()
        t1.synchronize()
        got = int(out.copy_to_host()[0])
        want = int(order[position[0]] * LINE)
        if got != want:
            raise RuntimeError(f"latency chase over {working_set_bytes} bytes ended at {got}, expected {want}")
        return t0.elapsed_time(t1)

    timed(warm)  # compiles the kernel and ramps the clocks up
    diffs = sorted(timed(warm + 2 * steps) - timed(warm + steps) for _ in range(repeats))
    return diffs[len(diffs) // 2] * 1e6 / steps


def latency_ladder(sizes=LADDER_SIZES, steps: int = 1 << 14) -> list[tuple[int, float]]:
    """[(working-set bytes, ns per dependent load), ...]: L1 hits, then L2, then HBM (GPU only)."""
    _need_gpu("latency_ladder")
    return [(int(s), measure_latency(int(s), steps=steps)) for s in sizes]


def bandwidth_vs_in_flight(chains=(1, 2, 4, 8, 16), blocks_per_sm=(1, 2, 4, 8), n=None) -> list[dict]:
    """Time the optimized kernel built for each number of chains at each grid of resident blocks,
    at the bench size (GPU only). Each row: chains, blocks, bytes_in_flight (resident threads x chains
    x 4 bytes), ms, gbps and pct_copy (of the device copy rate measured here); results are checked."""
    _need_gpu("bandwidth_vs_in_flight")
    from course import bench

    walkers, steps = n if n is not None else BENCH_SIZES[0]
    nxt, walkers, steps = make_inputs((walkers, steps), seed=49)
    expected = reference(nxt, walkers, steps)
    (d_nxt,) = launch.to_device(nxt)
    nbytes, _ = traffic(nxt, walkers, steps)
    timer = bench.Timer()
    copy_gbps = bench.copy_peak_gbps(timer)
    rows, seen = [], set()
    for c in chains:
        kernel = make_chains_kernel(c)
        fit = resident_blocks(kernel)
        for per_sm in blocks_per_sm:
            blocks = min(per_sm * launch.sm_count(), fit, launch.blocks(-(-walkers // c), THREADS))
            if (c, blocks) in seen:
                continue
            seen.add((c, blocks))
            with launch.no_poison():
                ms, _ = timer.time(_chase_chains, c, d_nxt, walkers, steps, blocks, repeats=10)
            got = _chase_chains(c, d_nxt, walkers, steps, blocks).copy_to_host()
            if not np.array_equal(got, expected):
                raise RuntimeError(f"chains={c}, blocks={blocks}: the chase returned wrong indices")
            gbps = nbytes / (ms * 1e-3) / 1e9
            rows.append({"chains": c, "blocks": blocks, "bytes_in_flight": blocks * THREADS * c * 4,
                         "ms": ms, "gbps": gbps, "pct_copy": 100 * gbps / copy_gbps})
    return rows


def littles_law_bytes(gbps: float, latency_ns: float) -> float:
    """Bytes that must be in flight to sustain `gbps` GB/s at `latency_ns` per load (Little's law)."""
    return gbps * latency_ns  # GB/s x ns = bytes
