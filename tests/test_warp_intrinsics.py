"""Warp intrinsics, checked against a NumPy model of what the hardware does.

The same tests run in the simulator and, unchanged, on a GPU, so together they show that the course's
simulator agrees with the hardware. They use only behaviour the GPU defines: every lane named in a
mask calls the intrinsic, a partial last warp names only the lanes that exist
((1 << n_lanes) - 1), and a shuffle from a lane that does not take part (undefined on the GPU) is
left out of the comparison.

numba-cuda's shuffles take no `width`: the lane operand is used modulo 32 (the instruction reads its
low 5 bits), up/down past the warp's ends give the caller's own value, and segments of a width are
built from the lane arithmetic (see test_shfl_sync_segments).
"""

import numpy as np
import pytest
from course import cuda
from numba import float32, float64

WARP = 32
GRID = 2  # two blocks: the warps of each block are its own
BLOCKS = [(64,), (40,), (100,), (8, 5), (5, 3, 3)]  # full warps; partial last warps; 2D and 3D
BLOCK_IDS = ["64", "40", "100", "8x5", "5x3x3"]
DTYPES = [np.int32, np.int64, np.float32, np.float64]


# ---- helpers used by the kernels


@cuda.jit(device=True)
def linear_tid():
    # warps are cut from the linear thread id: x fastest, then y, then z
    return cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)


@cuda.jit(device=True)
def block_size():
    return cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z


@cuda.jit(device=True)
def warp_mask(tid, nthreads):
    """The lanes of this thread's warp that exist: all 32, or fewer in the block's last warp."""
    n_lanes = nthreads - (tid - tid % 32)
    if n_lanes >= 32:
        return 0xFFFFFFFF
    return (1 << n_lanes) - 1


# ---- the NumPy model


def lanes(n: int):
    """For each linear tid of an n-thread block: its lane, and how many lanes its warp has."""
    tid = np.arange(n)
    lane = tid % WARP
    return lane, np.minimum(WARP, n - (tid - lane))


def shfl_model(mode: str, x: np.ndarray, b: np.ndarray, n: int):
    """What lane `lane` gets from a shuffle of x with lane operand b[lane] (per block of n threads).

    Returns (expected, defined): defined is False where the source lane does not exist, which the
    GPU leaves undefined.
    """
    expected = x.copy()
    defined = np.ones(x.shape, bool)
    lane, n_lanes = lanes(n)
    for g in range(x.size):
        t = g % n
        ln, bb = lane[t], int(b[lane[t]]) & 31
        if mode == "idx":
            j = bb
        elif mode == "up":
            j = ln - bb if ln - bb >= 0 else None
        elif mode == "down":
            j = ln + bb if ln + bb < WARP else None
        else:
            j = ln ^ bb
        if j is None:
            continue  # outside the warp: the caller keeps its own value
        if j < n_lanes[t]:
            expected[g] = x[g - ln + j]
        else:
            defined[g] = False
    return expected, defined


def random_values(dtype, size: int, rng) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    return (rng.standard_normal(size) * 1e3).astype(dtype)


def assert_defined_equal(got, expected, defined):
    for k in range(got.shape[0]):
        np.testing.assert_array_equal(got[k][defined[k]], expected[k][defined[k]], err_msg=f"case {k}")


# ---- shuffles


@cuda.jit
def shfl_up_kernel(x, deltas, out):
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    v = x[g]
    for k in range(deltas.size):
        out[k, g] = cuda.shfl_up_sync(mask, v, deltas[k])


@cuda.jit
def shfl_down_kernel(x, deltas, out):
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    v = x[g]
    for k in range(deltas.size):
        out[k, g] = cuda.shfl_down_sync(mask, v, deltas[k])


@cuda.jit
def shfl_xor_kernel(x, lane_masks, out):
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    v = x[g]
    for k in range(lane_masks.size):
        out[k, g] = cuda.shfl_xor_sync(mask, v, lane_masks[k])


@cuda.jit
def shfl_idx_kernel(x, widths, steps, offsets, extras, out):
    # source lane: segment start + (lane * step + offset) within a segment of `width` lanes, plus
    # `extra` (a multiple of 32, which the hardware ignores): step 0 broadcasts, step 1 rotates
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    lane = tid % 32
    v = x[g]
    for k in range(widths.size):
        w = widths[k]
        src = (lane & ~(w - 1)) + ((lane * steps[k] + offsets[k]) & (w - 1)) + extras[k]
        out[k, g] = cuda.shfl_sync(mask, v, src)


DELTAS = np.array([0, 1, 2, 5, 16, 31, 33], np.int32)  # 33 is read as 1 (low 5 bits)
LANE_MASKS = np.array([0, 1, 2, 3, 4, 8, 16, 31, 33], np.int32)
# (width, step, offset, extra): rotations and broadcasts within segments, and a source past lane 31
IDX_CASES = np.array(
    [(32, 0, 0, 0), (32, 0, 31, 0), (32, 1, 1, 0), (32, 1, 7, 32), (16, 1, 3, 0), (8, 0, 5, 0),
     (8, 1, 1, 64), (4, 1, 3, 0), (2, 1, 1, 0), (1, 0, 0, 0)],
    np.int32,
)


def run_shfl(kernel, block, x, *params, cases: int):
    n = int(np.prod(block))
    out = np.zeros((cases, x.size), x.dtype)
    kernel[GRID, block](x, *params, out)
    return out, n


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["up", "down", "xor"])
def test_shfl_up_down_xor(mode, dtype, block):
    rng = np.random.default_rng(1)
    n = int(np.prod(block))
    x = random_values(dtype, GRID * n, rng)
    kernel = {"up": shfl_up_kernel, "down": shfl_down_kernel, "xor": shfl_xor_kernel}[mode]
    bs = LANE_MASKS if mode == "xor" else DELTAS
    out, _ = run_shfl(kernel, block, x, bs, cases=len(bs))
    models = [shfl_model(mode, x, np.full(WARP, b), n) for b in bs]
    expected = np.stack([m[0] for m in models])
    defined = np.stack([m[1] for m in models])
    assert out.dtype == x.dtype
    assert_defined_equal(out, expected, defined)


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_shfl_sync_segments(dtype, block):
    rng = np.random.default_rng(7)
    n = int(np.prod(block))
    x = random_values(dtype, GRID * n, rng)
    w, step, off, extra = (IDX_CASES[:, k].copy() for k in range(4))
    out, _ = run_shfl(shfl_idx_kernel, block, x, w, step, off, extra, cases=len(IDX_CASES))
    lane = np.arange(WARP)
    expected, defined = [], []
    for wk, sk, ok, ek in IDX_CASES:
        src = (lane & ~(wk - 1)) + ((lane * sk + ok) & (wk - 1)) + ek
        e, d = shfl_model("idx", x, src, n)
        expected.append(e)
        defined.append(d)
    assert_defined_equal(out, np.stack(expected), np.stack(defined))


@cuda.jit
def shfl_python_scalars_kernel(out_int, out_float):
    # values computed from indexes, not read from an array (Python int/float in the simulator,
    # int64/float64 on the GPU)
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    out_int[g] = cuda.shfl_down_sync(mask, g * 3 - 7 + (1 << 40), 1)
    out_float[g] = cuda.shfl_xor_sync(mask, g * 0.5 + 0.25, 1)


@pytest.mark.parametrize("block", [(64,), (40,)], ids=["64", "40"])
def test_shfl_of_computed_scalars(block):
    n = int(np.prod(block))
    g = np.arange(GRID * n)
    out_int = np.zeros(g.size, np.int64)
    out_float = np.zeros(g.size, np.float64)
    shfl_python_scalars_kernel[GRID, block](out_int, out_float)
    e_int, d_int = shfl_model("down", g * 3 - 7 + (1 << 40), np.ones(WARP, int), n)
    e_float, d_float = shfl_model("xor", g * 0.5 + 0.25, np.ones(WARP, int), n)
    np.testing.assert_array_equal(out_int[d_int], e_int[d_int])
    np.testing.assert_array_equal(out_float[d_float], e_float[d_float])


@cuda.jit
def warp_sum_kernel(x, out):
    # the canonical tree reduction; a partial warp only adds values from lanes that exist
    tid = linear_tid()
    n = block_size()
    lane = tid % 32
    n_lanes = min(32, n - (tid - lane))
    mask = warp_mask(tid, n)
    v = x[cuda.blockIdx.x * n + tid]
    offset = 16
    while offset > 0:
        other = cuda.shfl_down_sync(mask, v, offset)
        if lane + offset < n_lanes:
            v += other
        offset //= 2
    if lane == 0:
        out[cuda.blockIdx.x * ((n + 31) // 32) + tid // 32] = v


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
@pytest.mark.parametrize("dtype", [np.int64, np.float32], ids=["int64", "float32"])
def test_warp_sum(dtype, block):
    n = int(np.prod(block))
    rng = np.random.default_rng(3)
    x = (rng.integers(-1000, 1000, GRID * n)).astype(dtype)
    n_warps = (n + WARP - 1) // WARP
    out = np.zeros(GRID * n_warps, dtype)
    warp_sum_kernel[GRID, block](x, out)
    expected = [x[b * n + w * WARP: b * n + min(n, (w + 1) * WARP)].sum() for b in range(GRID)
                for w in range(n_warps)]
    np.testing.assert_array_equal(out, np.array(expected, dtype))


# ---- votes


@cuda.jit
def vote_kernel(pred, ballot, ballot_u, all_, any_, eq, popc):
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    p = pred[g] != 0
    b = cuda.ballot_sync(mask, p)
    ballot[g] = b
    ballot_u[g] = b
    all_[g] = cuda.all_sync(mask, p)
    any_[g] = cuda.any_sync(mask, p)
    eq[g] = cuda.eq_sync(mask, p)
    popc[g] = cuda.popc(b)


def predicates(n: int, rng) -> np.ndarray:
    """Per warp, in turn: random, all true, all false, only the warp's last lane (bit 31 when full)."""
    pred = np.zeros(GRID * n, np.int32)
    lane, n_lanes = lanes(n)
    for g in range(pred.size):
        t = g % n
        kind = (g // n * 7 + t // WARP) % 4
        if kind == 0:
            pred[g] = rng.integers(0, 2)
        elif kind == 1:
            pred[g] = 1
        elif kind == 3:
            pred[g] = lane[t] == n_lanes[t] - 1
    return pred


def ballot_model(pred: np.ndarray, n: int, member=lambda lane: True) -> np.ndarray:
    lane, _ = lanes(n)
    bits = np.zeros(pred.size, np.uint32)
    for g in range(pred.size):
        t = g % n
        warp = range(g - lane[t], min(g - lane[t] + WARP, g - t + n))
        bits[g] = sum(1 << (h - g + lane[t]) for h in warp if pred[h] and member(h % n % WARP))
    return bits


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_votes(block):
    n = int(np.prod(block))
    pred = predicates(n, np.random.default_rng(11))
    outs = [np.full(pred.size, -1, np.int32), np.zeros(pred.size, np.uint32)]
    outs += [np.full(pred.size, -1, np.int32) for _ in range(4)]
    vote_kernel[GRID, block](pred, *outs)
    ballot, ballot_u, all_, any_, eq, popc = outs
    bits = ballot_model(pred, n)
    lane, n_lanes = lanes(n)
    full = np.array([(1 << int(n_lanes[g % n])) - 1 for g in range(pred.size)], np.uint32)
    np.testing.assert_array_equal(ballot, bits.view(np.int32))  # numba-cuda types the ballot int32
    np.testing.assert_array_equal(ballot_u, bits)
    np.testing.assert_array_equal(all_, (bits == full).astype(np.int32))
    np.testing.assert_array_equal(any_, (bits != 0).astype(np.int32))
    np.testing.assert_array_equal(eq, ((bits == full) | (bits == 0)).astype(np.int32))
    np.testing.assert_array_equal(popc, [bin(int(b)).count("1") for b in bits])


@cuda.jit
def ballot_even_lanes_kernel(pred, out):
    # only the even lanes vote: the mask names exactly them
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n) & 0x55555555
    if tid % 2 == 0:
        out[g] = cuda.ballot_sync(mask, pred[g] != 0)


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_ballot_of_a_subset_of_lanes(block):
    n = int(np.prod(block))
    pred = np.random.default_rng(5).integers(0, 2, GRID * n).astype(np.int32)
    out = np.full(pred.size, -1, np.int32)
    ballot_even_lanes_kernel[GRID, block](pred, out)
    bits = ballot_model(pred, n, member=lambda lane: lane % 2 == 0).view(np.int32)
    even = np.arange(pred.size) % n % 2 == 0
    np.testing.assert_array_equal(out[even], bits[even])
    assert (out[~even] == -1).all()


# ---- match


@cuda.jit
def match_kernel(keys, any_out, all_out, all_pred):
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    v = keys[g]
    any_out[g] = cuda.match_any_sync(mask, v)
    m, p = cuda.match_all_sync(mask, v)
    all_out[g] = m
    all_pred[g] = p


@pytest.mark.parametrize("block", [(64,), (100,), (8, 5)], ids=["64", "100", "8x5"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_match(dtype, block):
    n = int(np.prod(block))
    rng = np.random.default_rng(2)
    k = rng.integers(0, 3, GRID * n)
    k[: min(n, WARP)] = 1  # the first warp agrees, so match_all has both outcomes
    if dtype == np.int64:
        keys = (k << 40) | 5  # keys differ only in their high 32 bits
    elif dtype == np.int32:
        keys = k - 1
    else:
        keys = k * 0.1
    keys = keys.astype(dtype)
    any_out, all_out, all_pred = (np.full(keys.size, -1, np.int32) for _ in range(3))
    match_kernel[GRID, block](keys, any_out, all_out, all_pred)
    lane, n_lanes = lanes(n)
    for g in range(keys.size):
        t = g % n
        base = g - lane[t]
        warp = keys[base: base + n_lanes[t]]
        same = sum(1 << j for j in range(len(warp)) if warp[j] == keys[g])
        member = (1 << int(n_lanes[t])) - 1
        agree = bool((warp == warp[0]).all())
        assert any_out[g] == np.uint32(same).view(np.int32), g
        assert all_out[g] == (np.uint32(member).view(np.int32) if agree else 0), g
        assert all_pred[g] == agree, g


# ---- lanes and activemask


@cuda.jit
def lane_kernel(laneid, lt):
    tid = linear_tid()
    g = cuda.blockIdx.x * block_size() + tid
    laneid[g] = cuda.laneid
    lt[g] = cuda.lanemask_lt()


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_laneid_and_lanemask_lt(block):
    n = int(np.prod(block))
    laneid = np.full(GRID * n, -1, np.int32)
    lt = np.zeros(GRID * n, np.uint32)
    lane_kernel[GRID, block](laneid, lt)
    expected = np.tile(np.arange(n) % WARP, GRID)
    np.testing.assert_array_equal(laneid, expected)
    np.testing.assert_array_equal(lt, ((1 << expected) - 1).astype(np.uint32))


@cuda.jit
def activemask_kernel(n_keep, at_start, after_exit):
    tid = linear_tid()
    g = cuda.blockIdx.x * block_size() + tid
    at_start[g] = cuda.activemask()
    if tid >= n_keep:
        return  # lanes that exit are no longer active
    after_exit[g] = cuda.activemask()


@pytest.mark.parametrize("block", [(64,), (40,), (100,), (8, 5)], ids=["64", "40", "100", "8x5"])
def test_activemask(block):
    n = int(np.prod(block))
    n_keep = n - 27  # the last warps lose some lanes (or all)
    at_start = np.zeros(GRID * n, np.uint32)
    after_exit = np.zeros(GRID * n, np.uint32)
    activemask_kernel[GRID, block](n_keep, at_start, after_exit)
    lane, n_lanes = lanes(n)
    t = np.arange(GRID * n) % n
    np.testing.assert_array_equal(at_start, [(1 << int(n_lanes[i])) - 1 for i in t])
    keep = t < n_keep
    alive = [(1 << int(min(n_lanes[i], n_keep - (i - lane[i])))) - 1 for i in t[keep]]
    np.testing.assert_array_equal(after_exit[keep], alive)
    assert (after_exit[~keep] == 0).all()


# ---- syncwarp


@cuda.jit
def syncwarp_exchange_kernel(x, out):
    # lanes swap values through shared memory; only cuda.syncwarp orders the lanes' accesses
    sh = cuda.shared.array(128, float64)
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    mask = warp_mask(tid, n)
    partner = tid ^ 1
    if partner >= n:
        partner = tid
    sh[tid] = x[g]
    cuda.syncwarp(mask)
    a = sh[partner]
    cuda.syncwarp(mask)  # the partner has read my element before I overwrite it
    sh[tid] = a + x[g] * 0.5
    cuda.syncwarp(mask)
    out[g] = sh[partner]


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_syncwarp_exchange(block):
    n = int(np.prod(block))
    x = np.random.default_rng(4).standard_normal(GRID * n)
    out = np.zeros_like(x)
    syncwarp_exchange_kernel[GRID, block](x, out)
    t = np.arange(x.size) % n
    partner = np.where((t ^ 1) < n, np.arange(x.size) - t + (t ^ 1), np.arange(x.size))
    np.testing.assert_array_equal(out, x + x[partner] * 0.5)


@cuda.jit
def syncwarp_subset_kernel(x, out):
    # the even lanes of each warp exchange among themselves, with a mask naming only them
    sh = cuda.shared.array(128, float32)
    tid = linear_tid()
    n = block_size()
    g = cuda.blockIdx.x * n + tid
    lane = tid % 32
    if lane % 2 == 0:
        mask = warp_mask(tid, n) & 0x55555555
        partner = tid ^ 2
        if partner >= n:
            partner = tid
        sh[tid] = x[g]
        cuda.syncwarp(mask)
        out[g] = sh[partner]


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_syncwarp_with_a_subset_mask(block):
    n = int(np.prod(block))
    x = np.arange(GRID * n, dtype=np.float32)
    out = np.full_like(x, -1)
    syncwarp_subset_kernel[GRID, block](x, out)
    t = np.arange(x.size) % n
    even = t % 2 == 0
    partner = np.where((t ^ 2) < n, np.arange(x.size) - t + (t ^ 2), np.arange(x.size))
    np.testing.assert_array_equal(out[even], x[partner][even])
    assert (out[~even] == -1).all()


# ---- cases an H200 answered (numba-cuda 0.30.4): the simulator must give the same


@cuda.jit
def activemask_divergent(out):
    i = cuda.threadIdx.x
    if i % 2 == 0:
        out[i] = cuda.activemask()
    else:
        out[i] = cuda.activemask()


def test_activemask_in_divergent_branches_names_each_branchs_lanes():
    out = np.zeros(WARP, np.uint32)
    activemask_divergent[1, WARP](out)
    assert (out[0::2] == 0x55555555).all() and (out[1::2] == 0xAAAAAAAA).all(), [hex(v) for v in out]


@cuda.jit
def match_all_full_mask(out, pred):
    i = cuda.threadIdx.x
    m, p = cuda.match_all_sync(0xFFFFFFFF, 7)
    out[i] = m
    pred[i] = p


def test_match_all_in_a_partial_warp_returns_the_lanes_that_exist():
    out, pred = np.zeros(10, np.int32), np.zeros(10, np.int32)
    match_all_full_mask[1, 10](out, pred)
    assert (out == 0x3FF).all() and (pred == 1).all(), (out, pred)


# ---- libdevice's byte permute (prmt.b32), which day 63 unpacks int8 weights with


@cuda.jit
def byte_perm_kernel(x, y, selectors, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.libdevice.byte_perm(x[i], y[i], selectors[i])


def test_byte_perm_matches_prmt():
    """Byte n of byte_perm(x, y, s) is byte ((s >> 4n) & 7) of the eight bytes y:x (x's bytes 0-3)."""
    rng = np.random.default_rng(7)
    n = 96
    x = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    y = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    # three bits a nibble, as CUDA documents __byte_perm (prmt reads a fourth, its sign-replicate flag)
    selectors = (rng.integers(0, 1 << 16, n) & 0x7777).astype(np.int32)
    selectors[:4] = 0x7650 + np.arange(4)  # day 63's: byte j of x under y's three upper bytes
    out = np.zeros(n, np.int32)
    byte_perm_kernel[2, 64](x, y, selectors, out)
    pool = (x.astype(np.int64) & 0xFFFFFFFF) | ((y.astype(np.int64) & 0xFFFFFFFF) << 32)
    want = np.zeros(n, np.int64)
    for b in range(4):
        pick = (selectors.astype(np.int64) >> (4 * b)) & 7
        want |= ((pool >> (8 * pick)) & 0xFF) << (8 * b)
    assert np.array_equal(out.view(np.uint32), want.astype(np.uint32))
