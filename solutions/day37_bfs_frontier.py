"""Day 37: breadth-first search -- levels[v] = the distance in edges from a source, -1 if unreachable.

A CSR graph (indptr (vertices + 1,), indices (edges,), edge row -> indices[k]; self-loops and
duplicate edges allowed) and a source vertex. BFS is level-synchronous here: level L's vertices
(the frontier) give level L + 1 its vertices. v1 and v2 launch once a level, the host looping until
a level adds nothing; v3 runs the small levels inside one launch.

v1 naive      vertex-parallel: each level, one thread per vertex; a thread whose vertex has
              levels[v] == L scans its neighbours and sets the unvisited ones to L + 1 (every writer
              stores the same value, so no atomic is needed) and raises a device flag; the host reads
              the 4-byte flag back after every level. Every level reads all of `levels`, even when
              the frontier is three vertices.
v2 queue      a frontier queue: the frontier is a compact array of vertex ids and each level launches
              threads for it alone. A thread expands its vertex; a list of 32 or more neighbours is
              expanded by the whole warp, one such vertex at a time (coalesced reads of `indices`,
              the hubs of a power-law graph spread over 32 lanes). A neighbour is claimed with an
              atomic compare-and-swap of levels[u] from -1 to L + 1, so exactly one claimant enqueues
              it; the claimants of a warp take their slots in the next frontier with one atomic add
              per warp (ballot_sync + popc; a lane's rank is popc(ballot & lanemask_lt)). The host
              reads the next frontier's size back and swaps the queues.
v3 optimized  a hybrid: while the frontier has at most SMALL_FRONTIER vertices, ONE block of 1024
              threads runs level after level inside one launch (v2's expansion, a cuda.syncthreads()
              between levels, thread 0 swapping the counters), and exits when the frontier empties or
              outgrows it, leaving (level, count) in a 2-word array; the host runs v2's multi-block
              kernel for the big levels (a read back each) and hands the frontier back to the block
              when it shrinks. The host reads 8 bytes a switch, not 4 a level.

Napkin math: every edge is read once (4 bytes of `indices`) and every vertex's indptr pair and
level once: (vertices + 1) * 4 + edges * 4 + vertices * 4 bytes is the minimum, about 4.5-6 bytes an
edge. At the H200's ~4.1 TB/s that is ~0.7 G edges a millisecond, but BFS is not a stream: the
reads of levels[u] are gathers (one 32-byte sector for 4 useful bytes), and each level of v1 and v2
is a launch plus a read back. The power-law graph (diameter ~10) is bound by the gathers; the
2048 x 2048 grid has 4094 levels of at most 2048 vertices, so the round trips bound v1 and v2
whatever their kernels do: measured on the H200, naive 326 ms (80 us a level), queue 452 ms (110 us
a level), all launch and read-back overhead. v3 runs the grid's 4094 levels in one launch: a level
is then a chain of dependent L2 accesses (frontier, indptr, indices, levels, cas, the warp's add:
~0.5 us each) times the grid's 4 neighbours, one or two passes of 1024 vertices, plus two
barriers: ~3-8 us a level expected; measured on the H200: 35 ms, 8.6 us a level, 9.4x v2 (naive
310 ms and queue 333 ms in the same run). On the power-law graph (4.59 ms against v2's 4.84 ms) v3 runs the first
two or three levels and the tail in the block and the 10^5-10^6-vertex levels in the grid, as v2.
The figure of merit is edges traversed per second (TEPS): edges / time.
"""

import operator

import numpy as np

from course import cuda, launch
from numba import int32

TITLE = "BFS with a frontier queue"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "queue", "optimized")
# (kind, size): see make_inputs. A single vertex; a path walked from one end (the diameter is the
# size); a star entered at a leaf (the hub's list takes the warp path); a grid from a random corner
# or middle; a power-law graph; a directed graph whose second half is unreachable; an isolated
# source; self-loops and duplicate edges. Simulator-sized: a launch per level, a block at least. The
# last (what `bench` counts traffic at without a GPU): a grid, frontiers of ~20 of its 576 vertices.
TEST_SIZES = (("single", 1), ("path", 37), ("star", 301), ("grid", 11), ("components", 150),
              ("isolated", 130), ("multi", 257), ("power_law", 1031), ("grid", 24))
# 4M vertices each: a road-like grid (4095 levels when the source is a corner, 16M edges) and a
# social-like power-law graph (16 edges a vertex on average, hubs of ~10^4 neighbours, ~10 levels).
BENCH_SIZES = (("grid", 2048), ("power_law", 1 << 22))
BOUND = "memory"
THREADS = 128
WARP = 32
FULL_MASK = 0xFFFFFFFF
ZIPF = 0.6  # power-law weights (rank)^-ZIPF: the largest hub gets ~1/1000 of the edge ends at 4M vertices
POWER_LAW_DEGREE = 16


# ---- graphs -----------------------------------------------------------------------------------------

def _csr(rows, cols, vertices):
    """CSR (indptr, indices) int32 of the directed edges rows[k] -> cols[k], rows in order."""
    rows = np.asarray(rows, dtype=np.int64)
    # One sort of (row, col) packed in an int64 (NumPy's integer sort is fast; an argsort of 64M is not).
    keys = np.sort((rows << 32) | np.asarray(cols, dtype=np.int64))
    indptr = np.zeros(vertices + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=vertices), out=indptr[1:])
    return indptr.astype(np.int32), (keys & 0xFFFFFFFF).astype(np.int32)


def grid_graph(side: int):
    """A side x side 4-neighbour grid (road-like: degree <= 4, diameter 2 (side - 1)), symmetric CSR.
    Vertex r * side + c; each row lists up, left, right, down."""
    v = np.arange(side * side, dtype=np.int32).reshape(side, side)
    nb = np.full((side, side, 4), -1, dtype=np.int32)
    nb[1:, :, 0] = v[:-1]
    nb[:, 1:, 1] = v[:, :-1]
    nb[:, :-1, 2] = v[:, 1:]
    nb[:-1, :, 3] = v[1:]
    nb = nb.reshape(-1, 4)
    valid = nb >= 0
    indptr = np.zeros(side * side + 1, dtype=np.int32)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    return indptr, np.ascontiguousarray(nb[valid])


def power_law_graph(vertices: int, avg_degree: int, seed: int = 0):
    """A social-like graph, symmetric CSR: vertices * avg_degree / 2 undirected edges, one end uniform,
    the other drawn with weight rank^-ZIPF (ranks shuffled over the ids). A few hubs get huge degree,
    and the diameter stays small (~log vertices)."""
    rng = np.random.default_rng(seed)
    m = max(1, vertices * avg_degree // 2)
    src = rng.integers(0, vertices, size=m, dtype=np.int64)
    # Inverse transform of the continuous law x^-ZIPF on [1, vertices + 1): rank 0 is the biggest hub.
    top = (vertices + 1.0) ** (1.0 - ZIPF)
    x = (1.0 + rng.random(m) * (top - 1.0)) ** (1.0 / (1.0 - ZIPF))
    rank = np.minimum(x.astype(np.int64) - 1, vertices - 1)
    dst = rng.permutation(vertices)[rank]
    return _csr(np.concatenate([src, dst]), np.concatenate([dst, src]), vertices)


def _path(vertices):
    a = np.arange(vertices - 1)
    return _csr(np.concatenate([a, a + 1]), np.concatenate([a + 1, a]), vertices)


def _star(vertices):
    leaves = np.arange(1, vertices)
    return _csr(np.concatenate([np.zeros_like(leaves), leaves]),
                np.concatenate([leaves, np.zeros_like(leaves)]), vertices)


def _edges(indptr, indices):
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return rows, indices.astype(np.int64)


def make_inputs(n, seed: int = 0):
    """(indptr, indices, source) for a size ``(kind, size)`` (an int means ("power_law", n)):
    "grid" (size x size), "power_law", "path", "star", "components" (two power-law halves joined by
    one-way edges from the second to the first: the second is unreachable), "isolated" (a power-law
    graph plus the source with no edges), "multi" (self-loops on every vertex, every edge doubled),
    "single" (one vertex, no edges). The source is random (rarely 0) unless the kind fixes it."""
    kind, size = ("power_law", n) if isinstance(n, (int, np.integer)) else n
    rng = np.random.default_rng(seed)
    if kind == "grid":
        indptr, indices = grid_graph(size)
        # Benchmark grids start at a corner (the longest walk, 2 (side - 1) levels); test grids anywhere.
        source = 0 if size >= 1024 else int(rng.integers(size * size))
    elif kind == "power_law":
        indptr, indices = power_law_graph(size, POWER_LAW_DEGREE if size >= 4096 else 6, seed)
        has_edges = np.flatnonzero(np.diff(indptr))
        source = int(rng.choice(has_edges)) if has_edges.size else 0
    elif kind == "path":
        indptr, indices = _path(size)
        source = size - 1  # an end: the diameter is size - 1 levels
    elif kind == "star":
        indptr, indices = _star(size)
        source = int(rng.integers(1, size))  # a leaf: 0, then the hub, then every other leaf at 2
    elif kind == "components":
        half = size // 2
        ip, ix = power_law_graph(half, 6, seed)
        r1, c1 = _edges(ip, ix)
        ip, ix = power_law_graph(size - half, 6, seed + 1)
        r2, c2 = _edges(ip, ix)
        back = rng.integers(0, half, size=8)  # one-way edges: second half -> first half
        rows = np.concatenate([r1, r2 + half, rng.integers(half, size, size=8)])
        cols = np.concatenate([c1, c2 + half, back])
        indptr, indices = _csr(rows, cols, size)
        source = int(rng.integers(half))
    elif kind == "isolated":
        ip, ix = power_law_graph(size - 1, 6, seed)
        indptr, indices = np.append(ip, ip[-1]).astype(np.int32), ix
        source = size - 1
    elif kind == "multi":
        ip, ix = power_law_graph(size, 4, seed)
        r, c = _edges(ip, ix)
        loops = np.arange(size)
        rows, cols = np.concatenate([r, r, loops]), np.concatenate([c, c, loops])
        # Sorted rows put a duplicate next to its twin: in a hub's list, two lanes claim one vertex at once.
        indptr, indices = _csr(rows, cols, size)
        source = int(rng.integers(size))
    elif kind == "single":
        indptr, indices, source = np.array([0, 0], dtype=np.int32), np.zeros(0, dtype=np.int32), 0
    else:
        raise ValueError(f"unknown graph kind {kind!r}")
    return indptr, indices, source


def reference(indptr, indices, source):
    """Level-synchronous BFS in plain NumPy: gather the frontier's neighbours, keep the unvisited."""
    vertices = indptr.size - 1
    levels = np.full(vertices, -1, dtype=np.int32)
    levels[source] = 0
    frontier = np.array([source], dtype=np.int64)
    level = 0
    while frontier.size:
        starts = indptr[frontier].astype(np.int64)
        lens = indptr[frontier + 1].astype(np.int64) - starts
        first = np.repeat(starts - (np.cumsum(lens) - lens), lens)
        nbrs = indices[first + np.arange(lens.sum())]
        frontier = np.unique(nbrs[levels[nbrs] == -1]).astype(np.int64)
        level += 1
        levels[frontier] = level
    return levels


def traffic(indptr, indices, source):
    """(minimum bytes: indptr and indices read once, levels written once; FLOPs: none)."""
    return indptr.size * 4 + indices.size * 4 + (indptr.size - 1) * 4, 0


# ---- v1: vertex-parallel ----------------------------------------------------------------------------

@cuda.jit
def init_levels_kernel(levels, flags, source):  # levels (vertices,), flags (2,)
    v = cuda.grid(1)
    if v < levels.size:
        levels[v] = int32(0) if v == source else int32(-1)
    if v == 0:
        flags[0] = 0
        flags[1] = 0


@cuda.jit
def bfs_level_kernel(indptr, indices, levels, flags, level):
    """One BFS level, one thread per vertex v: if levels[v] == level, every neighbour u =
    indices[indptr[v]:indptr[v + 1]] with levels[u] == -1 gets levels[u] = level + 1, and the thread
    sets flags[level % 2] = 1 if it changed anything. Thread 0 also clears flags[(level + 1) % 2] for
    the next level (nobody else touches it during this one). No atomics: every writer of levels[u]
    stores the same value.
    """
    # EXERCISE: thread 0 clears the next flag; a vertex at `level` sets unvisited neighbours to level + 1; flag it
    v = cuda.grid(1)
    if v == 0:
        flags[(level + 1) % 2] = 0
    if v < levels.size and levels[v] == level:
        changed = False
        for k in range(indptr[v], indptr[v + 1]):
            u = indices[k]
            if levels[u] == -1:
                levels[u] = level + 1
                changed = True
        if changed:  # one store a vertex, not one an edge: the flag's line is hot in every SM
            flags[level % 2] = 1


def _check(indptr, indices, source) -> int:
    """Validate; return the number of vertices."""
    launch.check_array("indptr", indptr, dtype=np.int32, ndim=1)
    launch.check_array("indices", indices, dtype=np.int32, ndim=1)
    if indptr.shape[0] < 2:
        raise ValueError(f"indptr: expected vertices + 1 >= 2 entries, got shape {tuple(indptr.shape)}")
    vertices = indptr.shape[0] - 1
    if isinstance(source, (bool, np.bool_)):
        raise ValueError(f"source: expected an integer vertex, got {source!r}")
    try:
        source = operator.index(source)
    except TypeError:
        raise ValueError(f"source: expected an integer vertex, got {type(source).__name__} {source!r}") from None
    if not 0 <= source < vertices:
        raise ValueError(f"source: expected a vertex in [0, {vertices}), got {source}")
    if isinstance(indptr, np.ndarray):  # cheap on the host; a device graph is taken as given
        if indptr[0] != 0:
            raise ValueError(f"indptr: expected indptr[0] == 0, got {int(indptr[0])}")
        if np.any(np.diff(indptr) < 0):
            raise ValueError(f"indptr: expected non-decreasing offsets, got a decrease at "
                             f"{int(np.argmax(np.diff(indptr) < 0))}")
        if indptr[-1] != indices.shape[0]:
            raise ValueError(f"indices: expected indptr[-1] = {int(indptr[-1])} entries, got shape "
                             f"{tuple(indices.shape)}")
    if isinstance(indices, np.ndarray) and indices.size and (indices.min() < 0 or indices.max() >= vertices):
        raise ValueError(f"indices: expected vertex ids in [0, {vertices}), got values from "
                         f"{int(indices.min())} to {int(indices.max())}")
    return vertices


def naive(indptr, indices, source):
    vertices = _check(indptr, indices, source)
    d_indptr, d_indices = launch.to_device(indptr, indices)
    levels = launch.empty((vertices,), np.int32)
    flags = cuda.device_array(2, dtype=np.int32)
    host_flags = np.zeros(2, dtype=np.int32)
    grid = launch.blocks(vertices, THREADS)
    init_levels_kernel[grid, THREADS](levels, flags, int(source))
    level = 0
    while True:
        bfs_level_kernel[grid, THREADS](d_indptr, d_indices, levels, flags, level)
        flags.copy_to_host(host_flags)  # the 8-byte round trip every level: the host decides to go on
        if host_flags[level % 2] == 0:
            break
        level += 1
    return launch.result(levels, indptr, indices)


# ---- v2: frontier queue ---------------------------------------------------------------------------

@cuda.jit
def init_frontier_kernel(levels, counters, frontier, source):  # counters (2,): frontier sizes by level parity
    v = cuda.grid(1)
    if v < levels.size:
        levels[v] = int32(0) if v == source else int32(-1)
    if v == 0:
        frontier[0] = source
        counters[0] = 1
        counters[1] = 0


@cuda.jit(device=True)
def claim(levels, u, next_level):
    """True for exactly one caller per unvisited vertex u, which also sets levels[u] = next_level
    (int32); False if u was visited already or another thread claimed it first. The claim must be
    one atomic step: cuda.atomic.cas(levels, u, -1, next_level) returns the old value, and only the
    thread that saw -1 won. A plain read of levels[u] first skips the atomic for visited vertices
    (visited stays visited, so a stale -1 costs only a failed cas).
    """
    # EXERCISE: a plain read filters visited vertices; then cuda.atomic.cas(levels, u, int32(-1), next_level) == -1
    if levels[u] != -1:
        return False
    return cuda.atomic.cas(levels, u, int32(-1), next_level) == -1


@cuda.jit(device=True)
def warp_enqueue(claimed, u, next_frontier, counters, slot):
    """Every lane of the warp calls this together. The lanes with claimed == True append their u to
    next_frontier with ONE atomic add on counters[slot] for the whole warp: votes = ballot_sync
    (FULL_MASK, claimed); lane 0 adds popc(votes) and gets the warp's base; shfl_sync hands the base
    to every lane; a claimant's slot is base + popc(votes & lanemask_lt()) (the claimants below it).
    """
    # EXERCISE: ballot the claims; lane 0 reserves popc(votes) slots (one atomic); shuffle the base; store at base+rank
    votes = cuda.ballot_sync(FULL_MASK, claimed)
    if votes != 0:  # the same for every lane of the warp: they stay together for the shuffle
        base = 0
        if cuda.laneid == 0:
            base = cuda.atomic.add(counters, slot, cuda.popc(votes))
        base = cuda.shfl_sync(FULL_MASK, base, 0)
        if claimed:
            pos = base + cuda.popc(votes & cuda.lanemask_lt())
            if pos < next_frontier.size:  # each vertex is claimed once, so this holds unless a claim is broken
                next_frontier[pos] = u


@cuda.jit(device=True)
def warp_max(v):
    """The largest v over the warp, in every lane (a butterfly: five register exchanges)."""
    offset = WARP // 2
    while offset > 0:
        v = max(v, cuda.shfl_xor_sync(FULL_MASK, v, offset))
        offset //= 2
    return v


@cuda.jit(device=True)
def expand_lists(indptr, indices, levels, start, end, next_frontier, counters, slot, next_level):
    """Every lane of the warp calls this together, each with its own neighbour list indices[start:end]
    (empty when start == end: a lane with no vertex still takes part in the warp's intrinsics). Each
    neighbour u goes through claim(levels, u, next_level) and warp_enqueue(claimed, u, next_frontier,
    counters, slot), every lane calling together (an unclaimed lane passes claimed = False).

    1. lists of WARP or more: while ballot_sync(FULL_MASK, length >= WARP) is not 0, the lowest such
       lane (ffs - 1) leads: shfl_sync its start and end to the warp, mark its own list done, and
       the 32 lanes stride over that list together (lane reads start + lane, + 32, ...; the trip
       count is the same for every lane).
    2. shorter lists: each lane walks its own; the warp loops to the longest (warp_max).
    """
    # EXERCISE: long lists by the whole warp (ballot, ffs, shfl the range, stride by 32); short lists by each lane
    lane = cuda.laneid
    # 1. Long lists (the hubs): a warp each, so reads of `indices` are coalesced and 32 lanes claim.
    while True:
        big = cuda.ballot_sync(FULL_MASK, end - start >= WARP)
        if big == 0:
            break
        leader = cuda.ffs(big) - 1
        s = cuda.shfl_sync(FULL_MASK, start, leader)
        e = cuda.shfl_sync(FULL_MASK, end, leader)
        if lane == leader:
            end = start
        k = s + lane
        while k - lane < e:
            u = indices[k] if k < e else -1
            claimed = u >= 0 and claim(levels, u, next_level)
            warp_enqueue(claimed, u, next_frontier, counters, slot)
            k += WARP
    # 2. Short lists (a road grid's 4): a lane each, no lane idle while a neighbour waits for a leader.
    degree = end - start
    longest = warp_max(degree)
    for j in range(longest):
        u = indices[start + j] if j < degree else -1
        claimed = u >= 0 and claim(levels, u, next_level)
        warp_enqueue(claimed, u, next_frontier, counters, slot)


@cuda.jit
def expand_frontier_kernel(indptr, indices, levels, frontier, count, next_frontier, counters, level):
    """Expand the frontier (one level, any number of blocks): thread i < count owns vertex frontier[i]
    and passes its list indptr[v]:indptr[v + 1] to expand_lists with next_level = level + 1 and slot
    (level + 1) % 2; every other thread of the grid calls it too, with an empty list (start == end),
    because the warp's intrinsics need all 32 lanes. Thread 0 also clears counters[level % 2] (the
    host has read it) for level + 2.
    """
    # EXERCISE: thread 0 clears counters[level % 2]; own frontier[i] (or an empty list); expand_lists with every lane
    i = cuda.grid(1)
    if i == 0:
        counters[level % 2] = 0
    slot = (level + 1) % 2
    next_level = int32(level + 1)
    start = 0
    end = 0
    if i < count:
        v = frontier[i]
        start = indptr[v]
        end = indptr[v + 1]
    expand_lists(indptr, indices, levels, start, end, next_frontier, counters, slot, next_level)


def _frontier_bfs(indptr, indices, source):
    """(levels on the device, the frontier size of every level) by v2's kernels."""
    vertices = _check(indptr, indices, source)
    d_indptr, d_indices = launch.to_device(indptr, indices)
    levels = launch.empty((vertices,), np.int32)
    queues = (cuda.device_array(vertices, dtype=np.int32), cuda.device_array(vertices, dtype=np.int32))
    counters = cuda.device_array(2, dtype=np.int32)
    host_counts = np.zeros(2, dtype=np.int32)
    init_frontier_kernel[launch.blocks(vertices, THREADS), THREADS](levels, counters, queues[0], int(source))
    sizes = []
    count, level = 1, 0
    while count:
        sizes.append(count)
        # Threads for the frontier only: 4 vertices on a grid's first level, not 4M.
        expand_frontier_kernel[launch.blocks(count, THREADS), THREADS](
            d_indptr, d_indices, levels, queues[level % 2], count, queues[(level + 1) % 2], counters, level)
        level += 1
        counters.copy_to_host(host_counts)  # the next frontier's size sizes the next launch
        count = int(host_counts[level % 2])
    return levels, sizes


def queue(indptr, indices, source):
    levels, _ = _frontier_bfs(indptr, indices, source)
    return launch.result(levels, indptr, indices)


def frontier_sizes(indptr, indices, source):
    """The size of every level's frontier queue in v2, as the host read them back (int64 array).
    Each reachable vertex enters one queue once, so this equals np.bincount of the levels >= 0: a
    claim that is not atomic enqueues a vertex twice and makes it larger."""
    return np.array(_frontier_bfs(indptr, indices, source)[1], dtype=np.int64)


# ---- v3: hybrid, one block runs the small levels --------------------------------------------------

# Up to this many vertices a frontier is expanded by one block, level after level in one launch; a
# bigger one goes to the multi-block kernel. One block does 1024 vertices at a time, a few us a pass
# (a chain of dependent L2 accesses: frontier, indptr, indices, levels, cas, the warp's add); a
# multi-block level costs a launch and a read back (~100 us measured through Numba). 4096 keeps the
# whole 2048 x 2048 grid (frontiers <= 2048) in one launch and sends a power-law graph's big
# middle levels (10^5-10^6 vertices) to the grid.
SMALL_FRONTIER = 4096
BLOCK_THREADS = 1024  # the whole block: 32 warps keep 32 lists of dependent loads in flight


@cuda.jit
def small_frontier_kernel(indptr, indices, levels, queue0, queue1, counters, state, level, small_frontier):
    """Launched as ONE block of BLOCK_THREADS threads at `level`, whose frontier is in queue{level % 2}
    with counters[level % 2] vertices (and counters[(level + 1) % 2] == 0): run level after level,
    while the frontier has 1 to small_frontier vertices. A level L: the block strides over the
    frontier 1024 vertices at a time, each thread passing its vertex's list (or an empty one) to
    expand_lists(..., next_frontier = queue{(L + 1) % 2}, counters, slot (L + 1) % 2, L + 1); a warp
    none of whose lanes has a vertex in a pass skips it (warp-uniform). Then cuda.syncthreads();
    thread 0 reads the next count from counters[(L + 1) % 2], clears counters[L % 2] (for L + 2) and
    advances the level, in the shared (level, count) pair every thread reads; cuda.syncthreads()
    again before anyone reads it. When the count is 0 or past small_frontier, thread 0 writes the
    (level, count) reached to state[0], state[1] and the block exits: the frontier of that level is
    in queue{level % 2} and counters[level % 2], as the multi-block kernel expects it.
    """
    tid = cuda.threadIdx.x
    at = cuda.shared.array(2, int32)  # (level, frontier size) the block is on: one copy all threads read
    if tid == 0:
        at[0] = level
        at[1] = counters[level % 2]
    cuda.syncthreads()
    # EXERCISE: loop: read (level, count); stop at 0 or > small_frontier; expand; barrier; thread 0 advances; barrier
    warp_first = tid - cuda.laneid
    while True:
        lvl = at[0]
        count = at[1]
        if count == 0 or count > small_frontier:  # the same shared values in every thread: uniform
            break
        frontier = queue0 if lvl % 2 == 0 else queue1
        next_frontier = queue1 if lvl % 2 == 0 else queue0
        deeper = int32(lvl + 1)
        for base in range(0, count, BLOCK_THREADS):
            if base + warp_first < count:  # the warp's lanes all take part, or all skip
                start = 0
                end = 0
                if base + tid < count:
                    v = frontier[base + tid]
                    start = indptr[v]
                    end = indptr[v + 1]
                expand_lists(indptr, indices, levels, start, end, next_frontier, counters, (lvl + 1) % 2, deeper)
        # A block-level barrier orders global memory for the block: the claims in `levels`, the
        # enqueues in next_frontier and the atomic adds to the counter that any thread made before it
        # are visible to every thread of the block after it (the block shares one SM and its L1). So
        # the next level may read this level's queue with plain loads, and thread 0 the final count.
        # No such guarantee holds between blocks: that is why only one block runs this loop.
        cuda.syncthreads()  # this level's expansion is done everywhere before the count is read
        if tid == 0:
            at[1] = counters[(lvl + 1) % 2]
            counters[lvl % 2] = 0  # level lvl + 2 adds here; nobody reads it before the barrier below
            at[0] = deeper
        cuda.syncthreads()  # the new (level, count) is written before any thread reads it
    if tid == 0:
        state[0] = at[0]
        state[1] = at[1]


def bfs_hybrid(indptr, indices, source, small_frontier=SMALL_FRONTIER):
    """(levels on the device, the launches) of v3: one block of BLOCK_THREADS runs the levels whose
    frontier has at most `small_frontier` vertices, inside one launch, until the frontier empties or
    outgrows it; the multi-block kernel (v2's) runs the bigger levels one launch each. The launches
    are (kind, level, frontier size at the launch), kind "block" or "grid"."""
    vertices = _check(indptr, indices, source)
    if isinstance(small_frontier, (bool, np.bool_)) or operator.index(small_frontier) < 1:
        raise ValueError(f"small_frontier: expected a positive integer, got {small_frontier!r}")
    d_indptr, d_indices = launch.to_device(indptr, indices)
    levels = launch.empty((vertices,), np.int32)
    queues = (cuda.device_array(vertices, dtype=np.int32), cuda.device_array(vertices, dtype=np.int32))
    counters = cuda.device_array(2, dtype=np.int32)
    state = cuda.device_array(2, dtype=np.int32)
    host_words = np.zeros(2, dtype=np.int32)
    init_frontier_kernel[launch.blocks(vertices, THREADS), THREADS](levels, counters, queues[0], int(source))
    launches = []
    level, count = 0, 1
    while count:
        if count <= small_frontier:
            launches.append(("block", level, count))
            small_frontier_kernel[1, BLOCK_THREADS](d_indptr, d_indices, levels, queues[0], queues[1], counters,
                                                    state, level, int(small_frontier))
            state.copy_to_host(host_words)  # 8 bytes a switch, not 4 a level: where the block stopped
            level, count = int(host_words[0]), int(host_words[1])
        else:
            launches.append(("grid", level, count))
            expand_frontier_kernel[launch.blocks(count, THREADS), THREADS](
                d_indptr, d_indices, levels, queues[level % 2], count, queues[(level + 1) % 2], counters, level)
            counters.copy_to_host(host_words)  # a big level: the count decides whether the block takes over
            level, count = level + 1, int(host_words[(level + 1) % 2])
    return levels, launches


def optimized(indptr, indices, source):
    levels, _ = bfs_hybrid(indptr, indices, source)
    return launch.result(levels, indptr, indices)


_NAIVE_SIG = "void(int32[::1], int32[::1], int32[::1], int32[::1], int64)"
_QUEUE_SIG = "void(int32[::1], int32[::1], int32[::1], int32[::1], int64, int32[::1], int32[::1], int64)"
_SMALL_SIG = ("void(int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], int64, "
              "int64)")
KERNELS = {
    "naive.init": (init_levels_kernel, "void(int32[::1], int32[::1], int64)"),
    "naive": (bfs_level_kernel, _NAIVE_SIG),
    "queue.init": (init_frontier_kernel, "void(int32[::1], int32[::1], int32[::1], int64)"),
    "queue": (expand_frontier_kernel, _QUEUE_SIG),
    "optimized.init": (init_frontier_kernel, "void(int32[::1], int32[::1], int32[::1], int64)"),
    "optimized": (small_frontier_kernel, _SMALL_SIG),
    "optimized.grid": (expand_frontier_kernel, _QUEUE_SIG),
}
