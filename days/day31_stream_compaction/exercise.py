"""Day 31 exercise: stream compaction -- out = x[x > threshold], the kept elements in their original order.

x float32 (n,) and a threshold (compared in float32, as the kernels compare) in; a new float32 array
of the elements > threshold out, shape (0,) when none is kept. NaN > t is False: NaNs are dropped.
The output's length depends on the data: every version counts on the device and the host reads the
count back (one small copy, a synchronisation, as CuPy's x[mask] does) to size the result. The
device array returned is a view of the first `kept` elements of an n-long buffer (the worst case):
the kernels write straight into it, so no second copy is made.

v1 naive      one thread per element; a kept element takes its slot with a global atomic add on one
              counter. Correct as a set, but the order is whichever warp reached the counter first:
              its grader compares sorted outputs. One atomic a kept element, all on one address.
v2 scan       flags, block scan and scatter (stable): a count kernel (syncthreads_count: the block's
              kept elements in one barrier), day 27's scan of the block counts (the block offsets),
              and a scatter kernel that re-reads its block, ranks each kept element by a Kogge-Stone
              scan of the flags in shared memory and writes it at offset + rank. Reads x twice.
v3 warp_aggregated  one pass, warp-aggregated, decoupled look-back: a block of 256 threads takes a
              tile of 4096 elements (16 a thread) by ticket; per element row a warp's ballot_sync
              gives its kept lanes, popc(ballot & lanemask_lt) each lane's rank, popc(ballot) the
              warp's count; the 128 warp counts go to shared memory and warp 0 scans them with
              shuffles. Warp 0 then publishes the tile's count, looks back over the predecessors'
              published counts (32 at a time, a ballot finding the nearest one that holds an
              inclusive prefix) and publishes its own prefix, while the other warps stage the kept
              elements, compacted, in shared memory; the block then copies them out in whole
              coalesced warps. The status words are packed (value << 2 | flag): one atomic, no fence.
v4 optimized  the same one pass, sized for the look-back: 512 threads take 16384 elements (32 a
              thread, 8 float4 loads, all in flight), so each status word stands for 4x the bytes.
              A lane's kept count in a float4 is 0..4, three bits: three ballots a row, popc below
              the lane weighted 1, 2, 4, give its first slot in the warp's output. Each warp stages
              its own kept elements in its own region of shared memory (half its rows before the
              look-back, half after: 32 KB a block), so only the 16 warp totals cross the block
              (one barrier) and 64 registers suffice for 2 blocks an SM. Day 29's status words and
              look_back (imported) give the tile's offset; each warp then copies its region out in
              whole 128-byte lines. The last tile writes the total to a one-word counter.
v5 direct     day 29's 4096-element tile on the same one pass, cut 128 threads x 32 elements, each warp
              a contiguous chunk of 1024 (lane l holds elements l + 32 j: every load a coalesced 128
              bytes), 56 registers, so 9 blocks an SM where v3 fits 3 and v4 2. No staging: a row's
              ballot gives each kept lane its slot (popc below it), and the lane stores its value
              straight from its register; a warp's stores of a row land side by side. Only the 4 warp
              totals cross the block (one barrier before the look-back, one after it).
v6 pipelined  v5's tile and stores on a persistent grid: as many blocks as the GPU holds at once, each
              taking tiles by ticket until none is left and holding two of them. While warp 0 looks back
              over the tile the block compacts, the next tile's loads are in flight into a second
              register array (a and b take turns); the next tile is counted and its aggregate published
              as soon as the look-back is done, before this tile's stores, so its successors never wait
              a step for it. A block waiting on its look-back thus still has a tile's loads in flight.
              Measured slower than v5 on the H100 and the H200 (lesson 31): two tiles' registers leave
              3 blocks an SM where v5 keeps 9, and those blocks hide each other's look-backs better.
direct_on_device  v5's launches behind CUB's interface (cub::DeviceSelect::If): the whole n-long buffer
              and the kept count in a (1,) device array, nothing read back. Not a graded version (its
              result is not an array of the kept elements: BENCH_VERSIONS), timed by `make bench`
              beside v5's whole call: the difference is what sizing the result on the host costs.

Napkin math at 2^27 float32, half kept: the minimum is 4n bytes read and 4 bytes a kept element
written, 537 MB + 268 MB = 805 MB, ~0.19 ms at the H200's ~4.2 TB/s copy rate; n compares. v2 reads x
twice (2 x 4n + 4 kept = 1.34 GB: at best 60 % of the copy rate against the minimum) plus its counts
(n / 512 words, scanned). v3 and v4 add only 8 bytes of status a tile to the minimum. v1 writes the
kept elements in scattered warp-sized runs; its cost is the one hot counter: 2^26 atomics serialised
at one L2 slice, unless the compiler aggregates them per warp itself (check the SASS for a vote + popc
before the atom). CuPy's x[x > t] runs at 8 % of the copy rate (measured on an H200).

The look-back sets a ceiling of its own. Tile k learns its offset from the nearest predecessor that
has published an inclusive prefix; a look-back reads 32 status words a round, one L2 round trip
(R ~ 0.5 us with the DRAM busy: an atomic there and back, the warp's ballot and sum, the publish).
However many tiles run at once, the prefixes can only advance ~32 tiles a round trip: at most 32 tiles
per R. v3's 4096-element tile moves 24 KB (half kept), so 32 x 24 KB / 0.5 us ~ 1.6 TB/s, 37 % of the
copy rate, whatever the occupancy; measured on the H200: 654 us wall clock, 521 us of kernel in Nsight
Compute (1.5 TB/s). v4's 16384-element tile moves 96 KB: 6 TB/s of ceiling, past the DRAM. In flight:
2 blocks an SM x 64 KB of loads, ~4x what Little's law asks at ~1 us of loaded latency (32 KB an SM).
The host's part, in the wall clock: 3 small allocations, the clear and compaction launches and the
count's read-back, ~10 us each against ~190 us of kernel.
Measured on the H200: naive 3,974 us, scan 1,955 us, warp_aggregated 654 us (29 % of the copy rate,
wall clock), x[x > t] 2,332 us. On an H100 (copy 3.0 TB/s) the kernels alone (kernel_us) took 330 us
for direct, 81 % of the copy rate, and its whole call 639 us: half the wall clock was the host's Python
(dispatcher launches, device-array objects), not the look-back. The one-pass versions now launch through
course.prepared on launch.scratch arrays.

What you write (each raises NotImplementedError with its hint until you do):
  compact_atomic_kernel   i = cuda.grid(1); guard; if x[i] > threshold: out[cuda.atomic.add(counter, 0, 1)] = x[i]
                          (5 lines)
  count_kernel            kept = i < n and x[i] > threshold; c = cuda.syncthreads_count(kept); thread 0 stores c (7
                          lines)
  block_rank              stage the flag in buf[0], barrier; each step d: add the value d back into the other row,
                          barrier, swap (14 lines)
  scatter_kernel          kept flag; rank = block_rank(...); start from offsets[b - 1]; kept threads write out[start
                          + rank - 1] (9 lines)
  warp_inclusive_scan     d = 1; while d < WARP: u = cuda.shfl_up_sync(FULL_MASK, v, d); if lane >= d: v += u; d *=
                          2 (7 lines)
  scan_counts             rounds of 32 slots: warp_inclusive_scan, write carry + inc - c back, carry += lane 31's
                          inc (8 lines)
  look_back_packed        windows of 32 tiles: read_status, spin while 0; ballot the PREFIXes; warp_sum up to the
                          nearest (17 lines)
  warp_aggregated_kernel  ballots, warp counts; barrier; warp 0 scans, publishes; barrier; stage, look back;
                          barrier; copy out (35 lines)
  compact_kernel          3 ballots a row -> offs, starts; stage group 0; barrier; publish, warp 0 looks back;
                          barrier; copy out (66 lines)
  compact_direct_kernel   ballots count the warp's kept; barrier; sums; publish, warp 0 looks back; barrier; store
                          by rank (38 lines)
  pipe_step               load the next tile; warp 0 looks back; barrier; count the next tile, publish it; store
                          this one (27 lines)
Everything else in this file is given. Grade with:  make check DAY=31
"""

import functools
import math
import time

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch, wide
from course.prepared import prepare  # a launch typed once: ~10 us of host a launch where the dispatcher takes ~30
from numba import float32, int32, uint32, uint64
from solutions.day17_warp_shuffles import FULL_MASK, WARP, warp_sum  # day 17's shuffle fold
from solutions.day27_scan_kogge_stone import scan_blocks  # day 27's scan of any length (int32)
from solutions.day29_scan_decoupled_lookback import (  # day 29's single pass: its status words and look-back
    FLAG_A,
    FLAG_P,
    look_back,
    pack,
    read_status,
)

TITLE = "Stream compaction: flags, scan, scatter"
MEMORY_SPACE = "shared + register"
VERSIONS = ("naive", "scan", "warp_aggregated", "optimized", "direct", "pipelined")
UNORDERED = ("naive",)  # versions whose output is the right set in any order (compared sorted)

THREADS = 256  # naive and warp_aggregated: 8 warps a block
WARPS = THREADS // WARP
ITEMS = 16  # warp_aggregated: elements a thread, all 16 loads in flight before the first ballot
TILE = THREADS * ITEMS  # warp_aggregated: 4096 elements (16 KB) a block
SLOTS = ITEMS * WARPS  # one count per (element row, warp): 128, scanned by warp 0 in 4 rounds of 32
SCAN_THREADS = 512  # scan: one element a thread, log2(512) = 9 Kogge-Stone steps a block
AGGREGATE, PREFIX = 1, 2  # warp_aggregated's status flags: the tile's own count / tiles 0..tile inclusive

# optimized. A tile must be large: a look-back reads 32 status words in one L2 round trip (~0.5 us
# under load), so the chip can finish at most ~32 tiles a round trip; at 4096 elements (24 KB of
# traffic half kept) that caps it near 1.6 TB/s. 16384 elements (96 KB) lift the cap past the DRAM.
# In the simulator (one block at a time, ~0.15 ms a thread) the tiles are 64 x 8 so that the graders
# see dozens of them.
VEC = wide.WIDTH  # 4 floats: one 16-byte load (a float4)
OPT_THREADS = 64 if DEVICE.kind == "sim" else 512  # 16 warps a block on a GPU
OPT_WARPS = OPT_THREADS // WARP
OPT_ITEMS = 8 if DEVICE.kind == "sim" else 32  # elements a thread: 8 float4 loads in flight (128 bytes)
VECS = OPT_ITEMS // VEC  # rows of float4 a lane holds
ROW = WARP * VEC  # positions a warp's load covers: 128 (512 bytes)
CHUNK = WARP * OPT_ITEMS  # positions a warp owns: 1024, contiguous
OPT_TILE = OPT_THREADS * OPT_ITEMS  # 16384 positions (64 KB) a block
# Each warp stages its kept elements in a region of shared memory, one group of GROUP_ROWS rows at a
# time (the first before the look-back, the others after): 16 warps x 512 floats = 32 KB a block (all
# the regions must fit in the 48 KB of static shared memory a block may have: GROUPS = 1 does not).
GROUPS = 2
GROUP_ROWS = VECS // GROUPS
GROUPS_1 = GROUPS + 1  # starts[g]: the warp's kept elements before group g; starts[GROUPS]: all of them
REGION = GROUP_ROWS * ROW  # floats a warp's region holds: every position of one group, all kept
assert OPT_ITEMS % VEC == 0 and VECS % GROUPS == 0, "OPT_ITEMS: whole float4s, split evenly into GROUPS"
OPT_BLOCKS_PER_SM = 2  # resident blocks the compiler budgets registers for: 65536 / (2 x 512) = 64 a thread
_BOUNDS = {} if DEVICE.kind == "sim" else {"launch_bounds": (OPT_THREADS, OPT_BLOCKS_PER_SM)}

# v5: day 29's 4096-element tile, cut 128 threads x 32 elements (each warp a contiguous 1024): measured
# faster than day 29's 256 x 16 on the H100 (4 %) and the H200 (8 %), lesson 31. In the simulator 256
# threads x 4 elements, so that its graders see dozens of tiles of 8 warps.
DIRECT_THREADS = 256 if DEVICE.kind == "sim" else 128
DIRECT_WARPS = DIRECT_THREADS // WARP
DIRECT_ITEMS = 4 if DEVICE.kind == "sim" else 32
DIRECT_CHUNK = WARP * DIRECT_ITEMS  # elements a warp owns, contiguous
DIRECT_TILE = DIRECT_THREADS * DIRECT_ITEMS  # 4096 elements (16 KB) a block on a GPU

# v6: v5's tile and stores, a persistent grid, each block holding two tiles' registers.
PIPE_THREADS = 256
PIPE_WARPS = PIPE_THREADS // WARP
PIPE_ITEMS = 4 if DEVICE.kind == "sim" else 16
PIPE_CHUNK = WARP * PIPE_ITEMS
PIPE_TILE = PIPE_THREADS * PIPE_ITEMS

# One element; a warp and a block -1 and +1; a tile + 1 (a look-back over one predecessor); three tiles
# of warp_aggregated and 18 blocks of v2 (a scan of the block counts over two of day 27's blocks).
TEST_SIZES = (1, 31, 255, 257, 4097, 9001)
# optimized: a tile -1 and +1, and 33 tiles and a ragged 34th (in the simulator: 512-element tiles).
OPT_SIZES = (OPT_TILE - 1, OPT_TILE + 1, 33 * OPT_TILE + 7)
DIRECT_SIZES = (DIRECT_TILE - 1, DIRECT_TILE + 1, 33 * DIRECT_TILE + 7)  # the same, in v5's tiles
PIPE_SIZES = (PIPE_TILE - 1, PIPE_TILE + 1, 33 * PIPE_TILE + 7)  # and v6's
# v2 has ten barriers a block: the simulator pays for each, so its sizes stop at five blocks (the
# carry between blocks and day 27's scan of their counts are there from the second block on).
SCAN_SIZES = (1, 31, 511, 513, 2053)
# The data decides the work: nothing kept, everything kept, exactly one kept, NaNs (dropped), +-inf
# against a finite threshold and against -inf, an empty x.
HARD_CASES = ((1, "none"), (1, "all"), (700, "none"), (1300, "all"), (1301, "one"), (1000, "nan"),
              (1200, "inf"), (1000, "-inf"), (0, "half"))
# Over tiles: all kept (every staging region full), one kept in the whole x, +-inf and NaN.
TILE_CASES = ((4099, "all"), (8201, "one"), (5000, "inf"))
BENCH_SIZES = (1 << 27,)  # 512 MiB in, half kept: 9x the 60 MB L2 on the way in
BOUND = "memory"


def make_inputs(n, seed: int = 0):
    """n: an int (uniform(-1, 1), threshold 0: about half kept) or (n, case) with case one of "half",
    "none", "all", "one", "nan", "inf", "-inf" (see HARD_CASES)."""
    n, case = (n, "half") if isinstance(n, int) else n
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=n).astype(np.float32)
    threshold = 0.0
    if case == "none":
        threshold = 1.0  # uniform(-1, 1) never exceeds it
    elif case == "all":
        threshold = -1.0 if n else 0.0
        x = np.maximum(x, np.float32(-0.999))  # strictly above: -1.0 itself could be drawn
    elif case == "one":
        x[rng.integers(n)] = 2.0
        threshold = 1.5
    elif case == "nan":
        x[rng.random(n) < 0.2] = np.nan  # NaN > t is False: never kept
    elif case in ("inf", "-inf"):
        r = rng.random(n)
        x[r < 0.1] = np.inf
        x[r > 0.9] = -np.inf
        x[(r > 0.45) & (r < 0.5)] = np.nan
        threshold = 0.0 if case == "inf" else -np.inf  # -inf: all but -inf and NaN kept
    elif case != "half":
        raise ValueError(f"make_inputs: unknown case {case!r}")
    return x, threshold


def reference(x, threshold):
    return x[x > np.float32(threshold)]  # NumPy's boolean mask: stable, a copy, shape (0,) when none


def traffic(x, threshold):
    """(minimum bytes moved through device memory, operations): read x once, write the kept elements;
    one compare an element."""
    kept = int(np.count_nonzero(x > np.float32(threshold)))
    return 4 * x.size + 4 * kept, x.size


@cuda.jit
def zero_kernel(a):  # a (m,)
    i = cuda.grid(1)
    if i < a.size:
        a[i] = 0


@cuda.jit
def compact_atomic_kernel(x, threshold, counter, out):  # x (n,), counter (1,), out (n,)
    """One thread per element i < x.size: if x[i] > threshold, take a slot with
    j = cuda.atomic.add(counter, 0, 1) and write out[j] = x[i]. The set is right; the order is the
    order the atomics happened in."""
    raise NotImplementedError("Day 31: i = cuda.grid(1); guard; if x[i] > threshold: out[cuda.atomic.add(counter, 0, "
                              "1)] = x[i] (5 lines)")


@cuda.jit
def count_kernel(x, threshold, counts):  # x (n,), counts (blocks,)
    """Block b (SCAN_THREADS threads, one element each) writes to counts[b] how many of
    x[b * SCAN_THREADS .. b * SCAN_THREADS + SCAN_THREADS - 1] are > threshold (past the end of x:
    not kept). cuda.syncthreads_count(p) returns, to every thread, how many threads passed p true."""
    raise NotImplementedError("Day 31: kept = i < n and x[i] > threshold; c = cuda.syncthreads_count(kept); thread 0 "
                              "stores c (7 lines)")


@cuda.jit(device=True)
def block_rank(flag, buf):
    """The inclusive Kogge-Stone scan of the block's flags (day 27's, on int32 flags): thread
    t gets flag[0] + ... + flag[t]. buf is a (2, SCAN_THREADS) int32 shared array: step d reads row
    src and writes the other, a barrier after each step (every thread reaches every barrier)."""
    raise NotImplementedError("Day 31: stage the flag in buf[0], barrier; each step d: add the value d back into the "
                              "other row, barrier, swap (14 lines)")


@cuda.jit
def scatter_kernel(x, threshold, offsets, out):  # x (n,), offsets (blocks,): inclusive scan of counts
    """Block b re-reads its SCAN_THREADS elements and writes each kept one, in order, to
    out[start + rank - 1]: start = offsets[b - 1] (the kept elements of blocks 0..b-1; 0 for b = 0),
    rank = block_rank(kept, buf) (the kept elements of the block up to and including this one).
    buf = cuda.shared.array((2, SCAN_THREADS), int32)."""
    raise NotImplementedError("Day 31: kept flag; rank = block_rank(...); start from offsets[b - 1]; kept threads "
                              "write out[start + rank - 1] (9 lines)")


@cuda.jit(device=True)
def warp_inclusive_scan(v, lane):
    """v[0] + ... + v[lane] over the warp's lanes, in registers: Kogge-Stone with
    cuda.shfl_up_sync(FULL_MASK, v, d) for d = 1, 2, 4, 8, 16, adding only where lane >= d."""
    raise NotImplementedError("Day 31: d = 1; while d < WARP: u = cuda.shfl_up_sync(FULL_MASK, v, d); if lane >= d: v "
                              "+= u; d *= 2 (7 lines)")


@cuda.jit(device=True)
def scan_counts(counts, lane):
    """Called by the 32 lanes of warp 0: turn counts (SLOTS,) int32 in shared memory, in output order
    (slot k * WARPS + w: element row k of warp w), into exclusive offsets within the tile, and return
    the tile's total to every lane. Rounds of 32 slots: lane l takes slot r * 32 + l,
    warp_inclusive_scan, adds the carry of the rounds before, writes the exclusive offset back."""
    raise NotImplementedError("Day 31: rounds of 32 slots: warp_inclusive_scan, write carry + inc - c back, carry += "
                              "lane 31's inc (8 lines)")


@cuda.jit(device=True)
def look_back_packed(status, tile, aggregate, lane):
    """Called by the 32 lanes of warp 0 of the block holding tile `tile` (> 0), after lane 0 published
    status[tile] = aggregate << 2 | AGGREGATE. Returns, in lane 0, the kept count of tiles 0..tile-1.

    Window of 32 predecessors at a time: lane l reads status[w - l] (w = tile - 1 first) with day 29's
    read_status (a plain load could be hoisted out of the spin), spinning while it is 0 (that tile took
    its ticket, so it is running and will publish). A ballot of "flag == PREFIX" finds the nearest
    predecessor holding an inclusive prefix: lanes up to it (no PREFIX lane below them,
    ballot & lanemask_lt == 0) contribute their value (word >> 2), the others 0; warp_sum folds
    them into lane 0. No PREFIX in the window: add all 32 and move the window 32 tiles back. Tile 0
    always publishes a PREFIX, so the walk ends there at the latest."""
    raise NotImplementedError("Day 31: windows of 32 tiles: read_status, spin while 0; ballot the PREFIXes; warp_sum "
                              "up to the nearest (17 lines)")


@cuda.jit
def warp_aggregated_kernel(x, threshold, status, out):  # x (n,), status (tiles + 1,) uint64 zeroed, out (n,)
    """One tile of TILE elements a block, taken in ticket order: tile = cuda.atomic.add(status, tiles, 1)
    (status[tiles] is the ticket counter), so a tile only ever waits on tiles that have started.
    Thread t of warp w (lane l) holds elements tile * TILE + k * THREADS + t, k < ITEMS (coalesced;
    NaN past the end: never kept).

    1. For each row k: m = ballot of the kept lanes; lane 0 writes popc(m) to counts[k * WARPS + w].
    2. Barrier; warp 0: aggregate = scan_counts(counts, lane); lane 0 keeps the aggregate in
       tile_sm[2] and publishes status[tile] = aggregate << 2 | flag with cuda.atomic.exch: PREFIX
       for tile 0 (its offset, tile_sm[1], is 0), AGGREGATE for the others.
    3. Barrier; every kept element goes to stage[counts[k * WARPS + w] + popc(m & lanemask_lt)]: the
       tile's kept elements, compacted in order, in shared memory. Meanwhile warp 0 (tile > 0) runs
       look_back_packed, lane 0 publishes PREFIX (exclusive + aggregate) and stores exclusive in tile_sm[1].
    4. Barrier; the block copies stage[0 .. aggregate - 1] to out[tile_sm[1] ..], thread t taking
       j = t, t + THREADS, ...: consecutive threads, consecutive words.
    """
    counts = cuda.shared.array(SLOTS, int32)
    stage = cuda.shared.array(TILE, float32)  # 16 KB: the tile's kept elements, compacted
    tile_sm = cuda.shared.array(3, int32)  # [0]: the ticket; [1]: the tile's offset in out; [2]: its count
    t = cuda.threadIdx.x
    lane = t % WARP
    warp = t // WARP
    tiles = status.size - 1
    if t == 0:
        tile_sm[0] = int32(cuda.atomic.add(status, tiles, uint64(1)))
    cuda.syncthreads()
    tile = tile_sm[0]
    base = tile * TILE
    n = x.size
    vals = cuda.local.array(ITEMS, float32)  # indexed by unrolled constants only: registers
    masks = cuda.local.array(ITEMS, uint32)
    if base + TILE <= n:  # every tile but a ragged last one: 16 unguarded loads, all in flight at once
        for k in range(ITEMS):
            vals[k] = x[base + k * THREADS + t]  # a warp reads 128 consecutive bytes a row
    else:
        for k in range(ITEMS):
            i = base + k * THREADS + t
            vals[k] = x[i] if i < n else float32(np.nan)  # NaN > threshold is False: never kept
    raise NotImplementedError("Day 31: ballots, warp counts; barrier; warp 0 scans, publishes; barrier; stage, look "
                              "back; barrier; copy out (35 lines)")


@cuda.jit(**_BOUNDS)
def compact_kernel(x, shift, threshold, status, counter, out):
    """x (n,) float32; status (tiles,) uint64 and counter[0] zeroed (day 29's clear_status_kernel);
    out (n,). One tile of OPT_TILE = OPT_THREADS x OPT_ITEMS elements a block, taken by ticket
    (counter[0], as on day 29): x read once, the kept elements written once, in order; the block that
    holds the last tile writes the total kept count to counter[1].

    x[0] sits `shift` elements into a 16-byte line (0 for an aligned x): position q of the tiles is
    x[q - shift], so every float4 load starts on the 16-byte grid. Warp w owns the CHUNK positions from
    tile * OPT_TILE + w * CHUNK; lane l holds row r (r < VECS) of them, the float4 at positions
    r * ROW + 4 l + 0..3, in vals[4 r + 0..3] (NaN outside x: never kept). Given: the ticket, the loads.

    1. Row by row, the lane's kept count c (0..4) is three bits: ballot each (c & 1, c & 2, c & 4).
       popc(ballot & lanemask_lt) weighted 1, 2, 4 is the kept count of the lanes below, popc(ballot)
       weighted the same the row's. offs[r] = the warp's kept elements in rows < r plus the lanes
       below: the lane's first slot in its warp's output. starts[g] = the warp's kept elements before
       group g of GROUP_ROWS rows (starts[GROUPS]: the warp's total, which lane 0 writes to
       warp_kept[w]). A lane's kept elements of group g go to stage[w, offs[r] - starts[g] + (kept
       ones before it in the float4)]: the warp's region holds one group, compacted.
    2. Group 0 is staged at once (its registers are free before the look-back). Barrier; every thread
       sums warp_kept: `before` (warps < w) and `aggregate`. Thread 0 publishes status[tile] =
       pack(cell, FLAG_A, aggregate) with cuda.atomic.exch (FLAG_P, and tile_sm[1] = 0, for tile 0);
       warp 0 of any other tile calls day 29's look_back, then lane 0 publishes pack(cell, FLAG_P,
       exclusive + aggregate) and writes exclusive to tile_sm[1]. The last tile (status.size - 1)
       writes its inclusive prefix to counter[1]. Barrier.
    3. Group by group (after a syncwarp, groups > 0 are staged, then another syncwarp): the lanes
       copy the region's starts[g + 1] - starts[g] elements to out[tile_sm[1] + before + starts[g] ..],
       lane l taking j = l, l + 32, ...: the warp stores 32 consecutive words at a time.
    """
    warp_kept = cuda.shared.array(OPT_WARPS, int32)  # (OPT_WARPS,) each warp's kept count
    stage = cuda.shared.array((OPT_WARPS, REGION), float32)  # a warp's kept elements of one group
    tile_sm = cuda.shared.array(2, int32)  # [0]: the ticket; [1]: the tile's first slot in out
    vals = cuda.local.array(OPT_ITEMS, float32)  # constant indexes only (loops unrolled): registers
    offs = cuda.local.array(VECS, int32)  # the lane's first slot of each row in its warp's output
    starts = cuda.local.array(GROUPS_1, int32)  # the warp's slots before each group (the same in every lane)
    cell = cuda.local.array(2, int32)  # day 29's scratch for pack / unpack (registers too)
    t = cuda.threadIdx.x
    lane = t % WARP
    w = t // WARP
    if t == 0:
        # Tiles in the order blocks start (day 29): a look-back only waits on tiles already running.
        tile_sm[0] = cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    tile = tile_sm[0]
    n = x.size
    base = tile * OPT_TILE - shift  # x's index of the tile's first position
    first = base + w * CHUNK + lane * VEC  # x's index of the lane's first float4
    if base >= 0 and base + OPT_TILE <= n:
        # Every tile but the first (when x is off the grid) and a ragged last one: VECS 16-byte loads,
        # all in flight before the first compare; a warp's load covers 512 consecutive bytes.
        for r in range(VECS):
            v0, v1, v2, v3 = wide.load4(x, first + r * ROW)
            vals[r * VEC] = v0
            vals[r * VEC + 1] = v1
            vals[r * VEC + 2] = v2
            vals[r * VEC + 3] = v3
    else:
        for r in range(VECS):
            i = first + r * ROW
            if i >= 0 and i + VEC <= n:
                v0, v1, v2, v3 = wide.load4(x, i)
                vals[r * VEC] = v0
                vals[r * VEC + 1] = v1
                vals[r * VEC + 2] = v2
                vals[r * VEC + 3] = v3
            else:  # a float4 that x starts or ends inside: element by element
                for k in range(VEC):
                    vals[r * VEC + k] = x[i + k] if i + k >= 0 and i + k < n else float32(np.nan)  # never kept
    raise NotImplementedError("Day 31: 3 ballots a row -> offs, starts; stage group 0; barrier; publish, warp 0 looks "
                              "back; barrier; copy out (66 lines)")


@cuda.jit
def compact_direct_kernel(x, threshold, status, counter, out):
    """x (n,) float32; status (tiles,) uint64 and counter (2,) int32 zeroed (day 29's clear kernel);
    out (n,). One tile of DIRECT_TILE elements a block, taken by ticket (counter[0]): warp w owns the
    DIRECT_CHUNK elements from tile * DIRECT_TILE + w * DIRECT_CHUNK, lane l elements l + 32 j of them
    (j < DIRECT_ITEMS) in vals[j] (NaN past the end of x: never kept). The block holding the last tile
    writes the total kept to counter[1]. Given: the ticket and the loads.

    1. The warp's kept count: the popc of each row's ballot (vals[j] > threshold), summed over the
       rows; lane 0 writes it to warp_kept[w]. Barrier; every thread sums warp_kept: `before` (warps
       < w) and `aggregate` (the tile's).
    2. Publish and look back as v4 does: thread 0 publishes pack(cell, FLAG_A, aggregate) with
       cuda.atomic.exch (FLAG_P and tile_sm[1] = 0 for tile 0); warp 0 of any other tile calls day 29's
       look_back, lane 0 publishes pack(cell, FLAG_P, exclusive + aggregate) and writes exclusive to
       tile_sm[1]; the last tile (status.size - 1) writes its inclusive prefix to counter[1]. Barrier.
    3. Row by row again: ballot the row, a kept lane stores its value at out[dst + popc(ballot &
       lanemask_lt)], and dst (first tile_sm[1] + before) moves on by popc(ballot)."""
    warp_kept = cuda.shared.array(DIRECT_WARPS, int32)
    tile_sm = cuda.shared.array(2, int32)  # [0]: the ticket; [1]: the tile's first slot in out
    vals = cuda.local.array(DIRECT_ITEMS, float32)  # constant indexes only (loops unrolled): registers
    cell = cuda.local.array(2, int32)  # day 29's scratch for pack / unpack (registers too)
    t = cuda.threadIdx.x
    lane = t % WARP
    w = t // WARP
    if t == 0:
        tile_sm[0] = cuda.atomic.add(counter, 0, 1)  # tiles in the order blocks start (day 29)
    cuda.syncthreads()
    tile = tile_sm[0]
    n = x.size
    first = tile * DIRECT_TILE + w * DIRECT_CHUNK + lane
    if (tile + 1) * DIRECT_TILE <= n:  # every tile but a ragged last one: all loads in flight at once
        for j in range(DIRECT_ITEMS):
            vals[j] = x[first + j * WARP]  # a warp reads 128 consecutive bytes a row
    else:
        for j in range(DIRECT_ITEMS):
            i = first + j * WARP
            vals[j] = x[i] if i < n else float32(np.nan)  # NaN > threshold is False: never kept
    raise NotImplementedError("Day 31: ballots count the warp's kept; barrier; sums; publish, warp 0 looks back; "
                              "barrier; store by rank (38 lines)")


@cuda.jit(device=True)
def pipe_load(x, tile, first, vals):
    """The PIPE_ITEMS elements of `tile` a lane holds (its warp's contiguous chunk, lane l taking
    first + 32 j, first = w * PIPE_CHUNK + l) into vals, NaN past the end of x (never kept). A tile past
    the last (the block's final ticket) loads nothing. Returns at once: the loads are in flight, and the
    first use of vals waits for them."""
    n = x.size
    start = tile * PIPE_TILE + first
    if (tile + 1) * PIPE_TILE <= n:  # every tile but a ragged last one: all loads issued back to back
        for j in range(PIPE_ITEMS):
            vals[j] = x[start + j * WARP]
    else:
        for j in range(PIPE_ITEMS):
            i = start + j * WARP
            vals[j] = x[i] if i < n else float32(np.nan)


@cuda.jit(device=True)
def pipe_count(vals, threshold, warp_kept, tile_sm, counter):
    """The kept elements of the tile in vals, counted by the block: each warp's (popc of each row's
    ballot) to warp_kept[w], and thread 0 takes the block's next ticket into tile_sm[0]. Barrier.
    Returns (before, aggregate, ticket): the kept elements of the warps before this one, the tile's,
    and the ticket."""
    w = cuda.threadIdx.x // WARP
    kept = int32(0)
    for j in range(PIPE_ITEMS):
        kept += cuda.popc(cuda.ballot_sync(FULL_MASK, vals[j] > threshold))
    if cuda.threadIdx.x % WARP == 0:
        warp_kept[w] = kept
    if cuda.threadIdx.x == 0:
        tile_sm[0] = cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    before = int32(0)
    aggregate = int32(0)
    for k in range(PIPE_WARPS):  # broadcast reads: the warp's lanes read one word
        c = warp_kept[k]
        if k < w:
            before += c
        aggregate += c
    return before, aggregate, tile_sm[0]


@cuda.jit(device=True)
def pipe_step(x, threshold, status, counter, out, cur, nxt, tile, before, aggregate, following, tile_sm,
              warp_kept, cell):
    """One tile of the pipelined pass. On entry cur holds tile `tile`, counted (before, aggregate) and
    published (FLAG_A; FLAG_P for tile 0), and the block has taken the ticket `following`. Returns
    `following`'s (before, aggregate, next ticket) for the step after.

    1. The loads of `following` go out into nxt (pipe_load): they travel while warp 0 looks back over
       `tile` (day 29's look_back; lane 0 publishes FLAG_P with the inclusive prefix, writes the
       exclusive one to tile_sm[1] and, for the last tile, the total to counter[1]; for tile 0 thread
       0 writes tile_sm[1] = 0). Barrier.
    2. pipe_count(nxt, ...): `following`'s counts, and the ticket after it. Thread 0 publishes
       `following`'s aggregate (FLAG_A) at once: its successors' look-backs read it, and in the step
       after this one it is the block's own look-back that waits on them.
    3. Row by row over cur: ballot, a kept lane stores its value at out[dst + popc(ballot &
       lanemask_lt)], dst (first tile_sm[1] + before) moving on by popc(ballot).
    Each shared slot is written again only after a barrier that follows its last read."""
    raise NotImplementedError("Day 31: load the next tile; warp 0 looks back; barrier; count the next tile, publish "
                              "it; store this one (27 lines)")


@cuda.jit
def compact_pipelined_kernel(x, threshold, status, counter, out):
    """x (n,) float32; status (tiles,) uint64 and counter (2,) int32 zeroed; out (n,). A grid of as many
    blocks as the GPU holds at once, each taking tiles by ticket (counter[0]) until they run out. A
    block holds two tiles: the one it compacts (its look-back, then its stores) and the next one,
    whose loads are in flight meanwhile and whose aggregate it publishes as soon as they land. The
    register arrays a and b take turns: pipe_step(a -> b), then pipe_step(b -> a).

    Before the loop the block takes its first ticket (tile_sm[2]: tile_sm[0] is pipe_count's), loads
    and counts that tile and publishes it: FLAG_P for tile 0 (and counter[1] when it is the only
    tile), FLAG_A for any other."""
    warp_kept = cuda.shared.array(PIPE_WARPS, int32)
    tile_sm = cuda.shared.array(3, int32)  # [0]: the next ticket; [1]: the tile's first slot; [2]: the first ticket
    a = cuda.local.array(PIPE_ITEMS, float32)  # constant indexes only (loops unrolled): registers
    b = cuda.local.array(PIPE_ITEMS, float32)
    cell = cuda.local.array(2, int32)
    t = cuda.threadIdx.x
    if t == 0:
        tile_sm[2] = cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    tile = tile_sm[2]
    last = status.size - 1
    if tile > last:
        return  # every tile taken already (the whole block leaves together)
    pipe_load(x, tile, (t // WARP) * PIPE_CHUNK + t % WARP, a)
    before, aggregate, following = pipe_count(a, threshold, warp_kept, tile_sm, counter)
    if t == 0:
        if tile == 0:
            cuda.atomic.exch(status, 0, pack(cell, FLAG_P, aggregate))
            if last == 0:
                counter[1] = aggregate
        else:
            cuda.atomic.exch(status, tile, pack(cell, FLAG_A, aggregate))
    while True:
        nb, na, nt = pipe_step(x, threshold, status, counter, out, a, b, tile, before, aggregate, following,
                               tile_sm, warp_kept, cell)
        if following > last:
            break
        tile, before, aggregate, following = following, nb, na, nt
        nb, na, nt = pipe_step(x, threshold, status, counter, out, b, a, tile, before, aggregate, following,
                               tile_sm, warp_kept, cell)
        if following > last:
            break
        tile, before, aggregate, following = following, nb, na, nt


_X_T = "float32[::1], float32"
KERNELS = {
    "naive": (compact_atomic_kernel, f"void({_X_T}, int32[::1], float32[::1])"),
    "naive.zero": (zero_kernel, "void(int32[::1])"),
    "scan.count": (count_kernel, f"void({_X_T}, int32[::1])"),
    "scan": (scatter_kernel, f"void({_X_T}, int32[::1], float32[::1])"),
    "warp_aggregated": (warp_aggregated_kernel, f"void({_X_T}, uint64[::1], float32[::1])"),
    "optimized": (compact_kernel, "void(float32[::1], int32, float32, uint64[::1], int32[::1], float32[::1])"),
    "direct": (compact_direct_kernel, f"void({_X_T}, uint64[::1], int32[::1], float32[::1])"),
    "pipelined": (compact_pipelined_kernel, f"void({_X_T}, uint64[::1], int32[::1], float32[::1])"),
}


def _check(x, threshold):
    launch.check_array("x", x, dtype=np.float32, ndim=1)
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (int, float, np.integer, np.floating)):
        raise ValueError(f"threshold: expected a real scalar, got {type(threshold).__name__}")
    if x.shape[0] >= 2**31 - OPT_TILE:
        raise ValueError(f"x: expected fewer than 2^31 - {OPT_TILE} elements (int32 offsets), got {x.shape[0]}")
    return np.float32(threshold)


def _zeros(m, dtype):
    a = cuda.device_array(m, dtype=dtype)
    zero_kernel[launch.blocks(m, 256), 256](a)
    return a


def _kept(words, shift=0, index=0):
    """The kept count from a small device array (Numba's or CuPy's): one word copied back, the one
    synchronisation of each version."""
    return int(words[index]) >> shift


def _status_words(tiles):
    """Day 29's status words, (tiles,) uint64, and a (2,) int32 counter ([0]: the ticket; [1]: the kept
    count the last tile writes), and the step that zeroes both (to run first): a memset each
    (launch.zero), no kernel."""
    status = launch.scratch((tiles,), np.uint64)
    counter = launch.scratch((2,), np.int32)
    return status, counter, (launch.zero, (status, counter))


def _shift(d):
    """How many elements into its 16-byte line x[0] sits (0 when x starts on the 16-byte grid)."""
    where = getattr(d, "__cuda_array_interface__", None) or getattr(d, "__array_interface__", None)
    return (where["data"][0] % 16) // 4 if where else 0


def naive(x, threshold):
    t = _check(x, threshold)
    (d_x,) = launch.to_device(x)
    n = x.shape[0]
    out = launch.empty((n,), np.float32)
    if n == 0:
        return launch.result(out, x)
    counter = _zeros(1, np.int32)
    compact_atomic_kernel[launch.blocks(n, THREADS), THREADS](d_x, t, counter, out)
    return launch.result(out[:_kept(counter)], x)


def scan(x, threshold):
    t = _check(x, threshold)
    (d_x,) = launch.to_device(x)
    n = x.shape[0]
    out = launch.empty((n,), np.float32)
    if n == 0:
        return launch.result(out, x)
    blocks = launch.blocks(n, SCAN_THREADS)
    counts = launch.empty((blocks,), np.int32)
    count_kernel[blocks, SCAN_THREADS](d_x, t, counts)
    offsets = scan_blocks(counts, launch.empty((blocks,), np.int32))  # inclusive: offsets[b] ends block b
    scatter_kernel[blocks, SCAN_THREADS](d_x, t, offsets, out)
    return launch.result(out[:_kept(offsets, index=blocks - 1)], x)


def _one_pass(version, d_x, t, out):
    """A one-pass version's launches over d_x (n > 0 elements) into out, in order, and where its kept
    count ends up: ([(launch, args), ...], (words, shift, index)). The one-pass versions are timed by the
    wall clock (they read the count back), so their host Python is part of their time: scratch arrays
    (launch.scratch) and prepared launches (course.prepared) keep it to tens of microseconds."""
    n = d_x.shape[0]
    if version == "warp_aggregated":
        tiles = math.ceil(n / TILE)
        status = launch.scratch((tiles + 1,), np.uint64)  # a word a tile, then the ticket counter
        return ([(launch.zero, (status,)),
                 (prepare(*KERNELS[version])[tiles, THREADS], (d_x, t, status, out))], (status, 2, tiles - 1))
    if version == "optimized":
        shift = _shift(d_x)
        tiles = launch.blocks(n + shift, OPT_TILE)
        status, counter, clear = _status_words(tiles)
        args = (d_x, np.int32(shift), t, status, counter, out)
        return [clear, (prepare(*KERNELS[version])[tiles, OPT_THREADS], args)], (counter, 0, 1)
    if version == "pipelined":
        tiles = launch.blocks(n, PIPE_TILE)
        status, counter, clear = _status_words(tiles)
        args = (d_x, t, status, counter, out)
        grid = min(tiles, _pipe_blocks())
        return [clear, (prepare(*KERNELS[version])[grid, PIPE_THREADS], args)], (counter, 0, 1)
    tiles = launch.blocks(n, DIRECT_TILE)
    status, counter, clear = _status_words(tiles)
    args = (d_x, t, status, counter, out)
    return [clear, (prepare(*KERNELS["direct"])[tiles, DIRECT_THREADS], args)], (counter, 0, 1)


@functools.cache
def _pipe_blocks():
    """The pipelined grid: as many blocks as the GPU holds at once (the occupancy calculator's count an
    SM, times the SMs), worked out once: this host function is timed by the wall clock. More blocks
    would wait for a slot and gain nothing: a running block takes tiles until none is left."""
    args = (np.zeros(1, np.float32), np.float32(0), np.zeros(1, np.uint64), np.zeros(2, np.int32),
            np.zeros(1, np.float32))  # the signature's types: the values do not matter
    return launch.resident_blocks(KERNELS["pipelined"][0], PIPE_THREADS, *args) * launch.sm_count()


def _run_one_pass(version, x, threshold):
    t = _check(x, threshold)
    # A device array (Numba's or CuPy's) goes to the prepared launches as it is: no view object built.
    d_x = x if launch.is_device_array(x) else launch.to_device(x)[0]
    n = x.shape[0]
    # The worst case, all kept: the result is a view of it. From CuPy's pool on a GPU: this function is
    # timed by the wall clock, and a Numba array's allocation and slice would add ~40 us to it.
    out = launch.pooled_empty((n,), np.float32)
    if n == 0:
        return launch.result(out, x)
    steps, (words, shift, index) = _one_pass(version, d_x, t, out)
    for step, args in steps:
        step(*args)
    return launch.result(out[:_kept(words, shift, index)], x)


def warp_aggregated(x, threshold):
    return _run_one_pass("warp_aggregated", x, threshold)


def optimized(x, threshold):
    return _run_one_pass("optimized", x, threshold)


def direct(x, threshold):
    return _run_one_pass("direct", x, threshold)


def pipelined(x, threshold):
    return _run_one_pass("pipelined", x, threshold)


def direct_on_device(x, threshold):
    """direct's kernel behind CUB's interface (cub::DeviceSelect::If): returns (out, count), out the
    (n,) buffer whose first count[0] elements are the kept ones in order (the rest undefined), count a
    (1,) int32 device array. Nothing is read back and nothing waits: the caller goes on on the device
    (a next kernel reads the count, as day 37's frontier does). `make bench` times it by CUDA events
    beside direct's whole call: the difference is what reading the length back costs (a BENCH_VERSIONS
    row, graded by this day's own tests: its result is not an array)."""
    t = _check(x, threshold)
    d_x = x if launch.is_device_array(x) else launch.to_device(x)[0]
    n = x.shape[0]
    out = launch.pooled_empty((n,), np.float32)
    if n == 0:
        count = launch.scratch((1,), np.int32)
        launch.zero(count)
        return out, count
    steps, (counter, _, index) = _one_pass("direct", d_x, t, out)
    for step, args in steps:
        step(*args)
    return out, counter[index:index + 1]  # the counter's scratch is this call's own (CuPy's pool)


BENCH_VERSIONS = ("direct_on_device",)  # timed after VERSIONS; not graded by the course-wide tests


def bench_output(version, got):
    """What `make bench` compares with the reference: direct_on_device's kept prefix."""
    if version == "direct_on_device":
        out, count = got
        return out[:_kept(count)]
    return got


def library(x, threshold):
    """CuPy's boolean-mask indexing (a scan and a scatter in CUB, a synchronisation for the count)."""
    import cupy

    xs = cupy.asarray(x)
    return xs[xs > np.float32(threshold)]


def kernel_us(x, threshold, version: str = "direct", repeats: int = 20) -> dict:
    """A one-pass version's kernels alone, against its whole call, on a GPU: x (at the benchmark's size)
    compacted `repeats` times by the version's launches only (scratch and output made once, no read-back),
    timed between two CUDA events; then `repeats` calls of the version by the wall clock, the device
    synchronised. Returns {"kernels_us", "call_us", "host_us": the difference, "kept"}: what the host
    function adds to its kernels (the lesson's split; tools/host_profile.py says where it goes)."""
    if not ON_GPU:
        raise RuntimeError("kernel_us times kernels with CUDA events: it needs a CUDA GPU")
    if version not in ("warp_aggregated", "optimized", "direct", "pipelined"):
        raise ValueError(f"kernel_us: version must be a one-pass version, got {version!r}")
    t = _check(x, threshold)
    (d_x,) = launch.to_device(x)
    if x.shape[0] == 0:
        raise ValueError("kernel_us: x is empty")
    fn = globals()[version]
    with launch.no_poison():
        steps, _ = _one_pass(version, d_x, t, launch.empty((x.shape[0],), np.float32))
        for _ in range(2):  # compiled, pools grown
            for step, args in steps:
                step(*args)
            fn(d_x, threshold)
        cuda.synchronize()
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(repeats):
            for step, args in steps:
                step(*args)
        stop.record()
        stop.synchronize()
        kernels = cuda.event_elapsed_time(start, stop) * 1e3 / repeats
        t0 = time.perf_counter()
        for _ in range(repeats):
            kept = fn(d_x, threshold).shape[0]
        cuda.synchronize()
        call = (time.perf_counter() - t0) * 1e6 / repeats
    return {"kernels_us": kernels, "call_us": call, "host_us": call - kernels, "kept": kept}
