"""The simulator's teaching checks (course/simulator.py): each fires on a buggy kernel, with a message
that names the thread, the array and the index, whatever the order the threads run in; and none
fires on a correct kernel.

Simulator only: a GPU has none of these checks.
"""

import re
import threading

import numpy as np
import pytest
from course import cuda
from numba import float32, float64, int32

pytestmark = pytest.mark.sim

from course.simulator import (  # noqa: E402  (only meaningful in the simulator)
    BarrierDivergence,
    NegativeIndex,
    OutOfBounds,
    SharedMemoryRace,
    SimulatorCheckError,
    WarpSyncError,
    install,
    thread_order,
)

ORDERS = ["forward", "reverse"]
TPB = 64


@pytest.fixture(params=ORDERS)
def order(request):
    """Run the test with the threads of each block started (and released) in tid order, then reversed."""
    with thread_order(request.param):
        yield request.param


def data(n=2 * TPB, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


# ---- shared-memory races


@cuda.jit
def neighbour_without_barrier(x, out, step):
    # bug: reads the element a neighbour writes, with no cuda.syncthreads() between
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    j = t + step
    if 0 <= j < TPB:
        out[i] = tile[j]


@pytest.mark.parametrize("step", [1, -1], ids=["reads t+1", "reads t-1"])
def test_missing_barrier_before_reading_a_neighbour(order, step):
    x = data()
    with pytest.raises(SharedMemoryRace) as info:
        neighbour_without_barrier[2, TPB](x, np.zeros_like(x), step)
    msg = str(info.value)
    assert "kernel 'neighbour_without_barrier', block (0, 0, 0), thread (" in msg
    assert "shared array 'tile' (declared at test_simulator.py:" in msg
    assert "index [" in msg
    assert "cuda.syncthreads()" in msg
    # whichever access came second names the other thread: a writer/reader pair of neighbours
    assert ("wrote since the last barrier" in msg) or ("read since the last barrier" in msg)


def _line_of(func, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(func.py_func)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def test_race_message_names_both_threads_the_index_and_the_access():
    x = data()
    declared = _line_of(neighbour_without_barrier, "cuda.shared.array")
    read, write = _line_of(neighbour_without_barrier, "= tile[j]"), _line_of(neighbour_without_barrier, "tile[t] =")
    with thread_order("forward"):  # t reads t-1 after t-1 wrote it: caught at the read
        with pytest.raises(SharedMemoryRace) as info:
            neighbour_without_barrier[2, TPB](x, np.zeros_like(x), -1)
    msg = str(info.value)
    assert f"thread (1, 0, 0) reads shared array 'tile' (declared at test_simulator.py:{declared})" in msg
    assert f"at index [0] (test_simulator.py:{read}), which thread (0, 0, 0) wrote since the last barrier" in msg
    assert "add cuda.syncthreads() between the write and the read" in msg
    assert "cuda.syncwarp()" in msg  # the two are lanes of one warp
    with thread_order("reverse"):  # t-1 writes after t read it: caught at the write
        with pytest.raises(SharedMemoryRace) as info:
            neighbour_without_barrier[2, TPB](x, np.zeros_like(x), -1)
    msg = str(info.value)
    assert "thread (62, 0, 0) writes shared array 'tile'" in msg
    assert f"at index [62] (test_simulator.py:{write}), which thread (63, 0, 0) read since the last barrier" in msg


@cuda.jit
def shift_in_place(x, out):
    # bug: reads tile[t + 1] and writes tile[t] with no barrier between: a write-after-read race
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    cuda.syncthreads()
    v = tile[t + 1] if t + 1 < TPB else 0.0
    tile[t] = v
    cuda.syncthreads()
    out[i] = tile[t]


def test_write_after_read_race(order):
    x = data()
    with pytest.raises(SharedMemoryRace) as info:
        shift_in_place[2, TPB](x, np.zeros_like(x))
    msg = str(info.value)
    assert "shared array 'tile'" in msg and "block (0, 0, 0)" in msg
    if order == "forward":
        assert "thread (1, 0, 0) writes shared array 'tile' (declared at test_simulator.py:" in msg
        assert re.search(r"at index \[1\] \(test_simulator.py:\d+\), which thread \(0, 0, 0\) read since the last", msg)
    else:
        assert "thread (62, 0, 0) reads shared array 'tile' (declared at test_simulator.py:" in msg
        assert re.search(r"at index \[63\] \(test_simulator.py:\d+\), which thread \(63, 0, 0\) wrote since the", msg)


@cuda.jit
def two_writers(out):
    # bug: every thread writes the same shared element
    acc = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    acc[0] = t
    cuda.syncthreads()
    if t == 0:
        out[0] = acc[0]


def test_write_after_write_race(order):
    with pytest.raises(SharedMemoryRace, match=r"also wrote since the last barrier.*cuda\.atomic"):
        two_writers[1, 32](np.zeros(1, np.int32))


@cuda.jit
def warp_synchronous_without_syncwarp(x, out):
    # bug on Volta and later: the lanes of a warp are not in lock-step, so the last steps of a
    # reduction need cuda.syncwarp() between them
    sh = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncwarp()
    if t < 16:
        sh[t] += sh[t + 16]
    if t < 8:
        sh[t] += sh[t + 8]
    if t == 0:
        out[0] = sh[0]


def test_warp_synchronous_code_needs_syncwarp(order):
    x = data(32)
    with pytest.raises(SharedMemoryRace, match=r"lanes of one warp.*cuda\.syncwarp\(\) orders them"):
        warp_synchronous_without_syncwarp[1, 32](x, np.zeros(1, np.float32))


@cuda.jit
def atomics_then_plain_read_without_barrier(keys, out):
    # bug: reads the shared histogram while other threads may still be adding to it
    hist = cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    if t < 4:
        hist[t] = 0
    cuda.syncthreads()
    cuda.atomic.add(hist, keys[t], 1)
    if t < 4:
        out[t] = hist[t]


def test_atomic_and_plain_access_race(order):
    keys = (np.arange(64) % 4).astype(np.int32)
    with pytest.raises(SharedMemoryRace, match="atomics do not order plain reads and writes"):
        atomics_then_plain_read_without_barrier[1, 64](keys, np.zeros(4, np.int32))


@cuda.jit
def dynamic_shared_race(x, out):
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    out[t] = buf[(t + 1) % cuda.blockDim.x]  # bug: no barrier


def test_race_on_dynamic_shared_memory(order):
    x = data(32)
    declared = r"\(declared at test_simulator.py:\d+\) at index \[\d+\] \(test_simulator.py:\d+\)"
    with pytest.raises(SharedMemoryRace, match=r"dynamic shared array 'buf' " + declared):
        dynamic_shared_race[1, 32, 0, 32 * 4](x, np.zeros_like(x))


@cuda.jit
def race_in_2d_tile(a, out):
    tile = cuda.shared.array((8, 8), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = a[ty, tx]
    out[ty, tx] = tile[tx, ty]  # bug: a transpose needs a barrier between the write and the read


def test_race_names_a_2d_index(order):
    a = data(64).reshape(8, 8)
    with pytest.raises(SharedMemoryRace) as info:
        race_in_2d_tile[1, (8, 8)](a, np.zeros_like(a))
    assert "shared array 'tile'" in str(info.value)
    assert ", 0) " in str(info.value)  # threads are named (x, y, z)
    assert "at index [" in str(info.value) and ", " in str(info.value).split("at index [")[1]


# ---- negative and out-of-range indexes


@cuda.jit
def stencil_without_guard(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i - 1] + x[i]  # bug: i - 1 is -1 for the first thread


def test_negative_index_into_global_memory(order):
    x = data()
    with pytest.raises(NegativeIndex) as info:
        stencil_without_guard[2, TPB](x, np.zeros_like(x))
    msg = str(info.value)
    assert "kernel 'stencil_without_guard', block (0, 0, 0), thread (0, 0, 0) reads array 'x'" in msg
    assert "at index [-1]" in msg and "guard the index" in msg
    assert "A course rule, stricter than the GPU" in msg  # the learner is told it is a teaching check


@cuda.jit
def shared_halo_without_guard(x, out):
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    cuda.syncthreads()
    out[i] = tile[t - 1]  # bug: thread 0 reads tile[-1]


def test_negative_index_into_shared_memory(order):
    x = data()
    with pytest.raises(NegativeIndex) as info:
        shared_halo_without_guard[2, TPB](x, np.zeros_like(x))
    msg = str(info.value)
    assert "thread (0, 0, 0) reads shared array 'tile' (test_simulator.py:" in msg
    assert "at index [-1]" in msg


@cuda.jit
def negative_writes(out, which):
    acc = cuda.local.array(4, float64)
    grid2 = cuda.shared.array((4, 4), float32)
    t = cuda.threadIdx.x
    acc[t % 4] = 1.0
    if which == 0:
        acc[t - 4] = 2.0  # local array
    elif which == 1:
        grid2[0, t - 1] = 2.0  # shared, 2D
    elif which == 2:
        out[t - 1] = 2.0  # global write
    elif which == 3:
        cuda.atomic.add(out, t - 1, 1.0)  # atomics check their index too


@pytest.mark.parametrize(
    "which, name",
    [(0, "local array 'acc'"), (1, "shared array 'grid2'"), (2, "array 'out'"), (3, "array 'out'")],
    ids=["local", "shared-2d", "global-write", "atomic"],
)
def test_negative_index_everywhere(which, name):
    with pytest.raises(NegativeIndex, match=f"thread \\(0, 0, 0\\) (writes|reads) {name}"):
        negative_writes[1, 4](np.zeros(4), which)


@cuda.jit
def grid_larger_than_data(x, out):
    i = cuda.grid(1)
    out[i] = 2 * x[i]  # bug: no `if i < x.size:` guard


def test_out_of_bounds_is_named():
    x = data(100)
    with pytest.raises(OutOfBounds) as info:
        grid_larger_than_data[2, TPB](x, np.zeros_like(x))
    assert isinstance(info.value, IndexError)
    msg = str(info.value)
    assert "block (1, 0, 0), thread (36, 0, 0) reads array 'x' at index [100]" in msg
    assert "shape (100,)" in msg


# ---- barriers that not every thread reaches


@cuda.jit
def barrier_in_a_branch(x, out):
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    tile[t] = x[t]
    if t < 16:
        cuda.syncthreads()  # bug: threads 16.. never reach it
    out[t] = tile[t]


def test_barrier_inside_a_branch(order):
    x = data(TPB)
    with pytest.raises(BarrierDivergence) as info:
        barrier_in_a_branch[1, TPB](x, np.zeros_like(x))
    msg = str(info.value)
    assert "waits at cuda.syncthreads() (test_simulator.py:" in msg
    assert "exited the kernel without reaching it" in msg
    assert "A course rule: the CUDA programming guide leaves such a barrier undefined" in msg
    reached, missed = msg.split("thread (")[1], msg.split("but thread (")[1]
    assert int(reached.split(",")[0]) < 16 <= int(missed.split(",")[0])


@cuda.jit
def early_return_then_barrier(x, out):
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= x.size:
        return  # bug: the block's other threads then wait at the barrier forever
    tile[t] = x[i]
    cuda.syncthreads()
    out[i] = tile[t]


def test_early_return_before_a_barrier(order):
    x = data(100)
    with pytest.raises(BarrierDivergence) as info:
        early_return_then_barrier[2, TPB](x, np.zeros_like(x))
    msg = str(info.value)
    assert "kernel 'early_return_then_barrier', block (1, 0, 0), thread (" in msg
    assert "but thread (" in msg and "exited the kernel without reaching it" in msg
    missed = int(msg.split("but thread (")[1].split(",")[0])
    assert missed >= 36


@cuda.jit
def two_different_barriers(out):
    t = cuda.threadIdx.x
    if t % 2 == 0:
        cuda.syncthreads()  # bug: the even threads wait here ...
    else:
        cuda.syncthreads()  # ... and the odd ones here
    out[t] = t


def test_threads_waiting_at_different_barriers(order):
    with pytest.raises(BarrierDivergence, match=r"waits at a different barrier \(test_simulator.py:\d+\)"):
        two_different_barriers[1, 32](np.zeros(32, np.int32))


@cuda.jit
def all_return_early(x, out):
    tile = cuda.shared.array(TPB, float32)
    i = cuda.grid(1)
    if cuda.blockIdx.x * cuda.blockDim.x >= x.size:
        return  # the whole block leaves before any barrier: fine
    t = cuda.threadIdx.x
    tile[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if i < x.size:
        out[i] = tile[t] * 2


def test_a_whole_block_returning_early_is_fine(order):
    x = data(TPB)
    out = np.zeros_like(x)
    all_return_early[3, TPB](x, out)
    np.testing.assert_array_equal(out, 2 * x)


# ---- warp intrinsics used wrongly


@cuda.jit
def shfl_mask_without_own_lane(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(0x0000FFFF, x[t], 1)  # bug: lanes 16.. are not in the mask


def test_mask_must_name_the_calling_lane():
    x = data(32)
    with pytest.raises(WarpSyncError, match=r"thread \(16, 0, 0\) \(lane 16\) calls shfl_down_sync .*0x0000ffff"):
        shfl_mask_without_own_lane[1, 32](x, np.zeros_like(x))


@cuda.jit
def shfl_in_a_branch_then_barrier(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    if t < 16:
        v = cuda.shfl_down_sync(0xFFFFFFFF, v, 1)  # bug: lanes 16.. never call it
    cuda.syncthreads()
    out[t] = v


def test_warp_intrinsic_that_never_completes(order):
    x = data(32)
    with pytest.raises(WarpSyncError) as info:
        shfl_in_a_branch_then_barrier[1, 32](x, np.zeros_like(x))
    msg = str(info.value)
    assert "waits in shfl_down_sync (test_simulator.py:" in msg
    assert "which waits at cuda.syncthreads()" in msg


@cuda.jit
def shfl_type(x, out, bad):
    t = cuda.threadIdx.x
    if bad == 0:
        out[t] = cuda.shfl_sync(0xFFFFFFFF, np.uint32(t), 0)
    elif bad == 1:
        out[t] = cuda.shfl_sync(0xFFFFFFFF, t > 3, 0)
    else:
        out[t] = cuda.shfl_down_sync(0xFFFFFFFF, x[t], 1, 16)  # numba-cuda has no width argument


@pytest.mark.parametrize("bad", [0, 1, 2], ids=["uint32", "bool", "width"])
def test_shuffle_types_as_numba_cuda_types_them(bad):
    x = data(32)
    with pytest.raises(TypeError):
        shfl_type[1, 32](x, np.zeros_like(x), bad)


def test_shuffle_returns_the_callers_type():
    seen = {}

    @cuda.jit
    def kernel(x32, x64, i32, i64):
        t = cuda.threadIdx.x
        for name, v in (("f32", x32[t]), ("f64", x64[t]), ("i32", i32[t]), ("i64", i64[t]),
                        ("int", t * 2), ("float", t * 0.5)):
            r = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
            if t == 0:
                seen[name] = (type(r), r)
        b = cuda.ballot_sync(0xFFFFFFFF, True)
        m = cuda.activemask()
        if t == 0:
            seen["ballot"] = (type(b), b)
            seen["activemask"] = (type(m), m)
            seen["popc"] = cuda.popc(b)

    n = 32
    kernel[1, n](np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float64),
                 np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int64))
    assert seen["f32"] == (np.float32, 1.0) and seen["f64"] == (np.float64, 1.0)
    assert seen["i32"] == (np.int32, 1) and seen["i64"] == (np.int64, 1)
    assert seen["int"] == (int, 2) and seen["float"] == (float, 0.5)
    assert seen["ballot"] == (np.int32, -1)  # numba-cuda types the ballot as int32
    assert seen["activemask"] == (np.uint32, 0xFFFFFFFF)
    assert seen["popc"] == 32


# ---- correct kernels: no false alarm


@cuda.jit
def tiled_stencil(x, out):
    # a shared tile with a halo of one on each side, one barrier
    tile = cuda.shared.array(TPB + 2, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.size
    tile[t + 1] = x[i] if i < n else 0.0
    if t == 0:
        tile[0] = x[i - 1] if 1 <= i <= n else 0.0
    if t == TPB - 1:
        tile[TPB + 1] = x[i + 1] if i + 1 < n else 0.0
    cuda.syncthreads()
    if i < n:
        out[i] = tile[t] + tile[t + 1] + tile[t + 2]


@cuda.jit
def tree_sum(x, out):
    # sequential addressing, a barrier after every step; thread 0 reads the total
    tile = cuda.shared.array(TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            tile[t] += tile[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]


@cuda.jit
def shuffle_sum(x, out):
    # warp shuffles inside each warp, then warp totals through shared memory
    partial = cuda.shared.array(32, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    lane = t % 32
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if lane == 0:
        partial[t // 32] = v
    cuda.syncthreads()
    if t < 32:
        v = partial[t] if t < cuda.blockDim.x // 32 else 0.0
        offset = 16
        while offset > 0:
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if t == 0:
            out[cuda.blockIdx.x] = v


@cuda.jit
def shared_histogram(keys, hist):
    # privatized histogram: zero, barrier, shared atomics, barrier, merge with global atomics
    local = cuda.shared.array(8, int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t < 8:
        local[t] = 0
    cuda.syncthreads()
    if i < keys.size:
        cuda.atomic.add(local, keys[i], 1)
    cuda.syncthreads()
    if t < 8:
        cuda.atomic.add(hist, t, local[t])


@cuda.jit
def dynamic_reverse(x, out):
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[n - 1 - t]


@cuda.jit
def tiled_transpose(a, out):
    # 2D blocks, a padded tile, a barrier between the writes and the transposed reads
    tile = cuda.shared.array((8, 9), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * 8 + tx
    y = cuda.blockIdx.y * 8 + ty
    if y < a.shape[0] and x < a.shape[1]:
        tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * 8 + tx
    y = cuda.blockIdx.x * 8 + ty
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = tile[tx, ty]


@cuda.jit
def tiled_matmul(a, b, c):
    # two shared tiles, a barrier after loading and after using them; rows read through views
    sa = cuda.shared.array((8, 8), float32)
    sb = cuda.shared.array((8, 8), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * 8 + ty
    col = cuda.blockIdx.x * 8 + tx
    acc = 0.0
    for k0 in range(0, a.shape[1], 8):
        sa[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        arow = sa[ty]
        for k in range(8):
            acc += arow[k] * sb[k, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def broadcast_and_own_element(x, out):
    # everyone reads an element nobody writes after the barrier; each thread updates its own element
    tile = cuda.shared.array(TPB + 1, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    if t == 0:
        tile[TPB] = x[0]
    cuda.syncthreads()
    scale = tile[TPB]
    for _ in range(3):
        tile[t] = tile[t] * 2
    out[i] = tile[t] + scale


def test_correct_kernels_pass(order):
    rng = np.random.default_rng(1)
    x = data(200)
    out = np.zeros_like(x)
    tiled_stencil[4, TPB](x, out)
    np.testing.assert_allclose(out, x + np.r_[0, x[:-1]] + np.r_[x[1:], 0], rtol=1e-5, atol=1e-5)

    blocks = np.zeros(4)
    tree_sum[4, TPB](x, blocks)
    np.testing.assert_allclose(blocks, [x[k * TPB:(k + 1) * TPB].sum() for k in range(4)], rtol=1e-5)

    blocks = np.zeros(2)
    shuffle_sum[2, 128](x.astype(np.float64), blocks)
    np.testing.assert_allclose(blocks, [x[:128].sum(), x[128:].sum()], rtol=1e-5)

    keys = rng.integers(0, 8, 300).astype(np.int32)
    hist = np.zeros(8, np.int32)
    shared_histogram[5, TPB](keys, hist)
    np.testing.assert_array_equal(hist, np.bincount(keys, minlength=8))

    y = data(96)
    out = np.zeros_like(y)
    dynamic_reverse[3, 32, 0, 32 * 4](y, out)
    np.testing.assert_array_equal(out, y.reshape(3, 32)[:, ::-1].ravel())

    a = data(20 * 13).reshape(20, 13)
    at = np.zeros((13, 20), np.float32)
    tiled_transpose[(2, 3), (8, 8)](a, at)
    np.testing.assert_array_equal(at, a.T)

    b = data(13 * 10, seed=2).reshape(13, 10)
    c = np.zeros((20, 10), np.float32)
    tiled_matmul[(2, 3), (8, 8)](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    out = np.zeros_like(x[:TPB])
    broadcast_and_own_element[1, TPB](x[:TPB], out)
    np.testing.assert_allclose(out, x[:TPB] * 8 + x[0], rtol=1e-6)


@cuda.jit
def syncthreads_predicates(x, out):
    t = cuda.threadIdx.x
    out[0] = cuda.syncthreads_count(x[t] > 0)
    out[1] = cuda.syncthreads_and(x[t] > -100)
    out[2] = cuda.syncthreads_or(x[t] > 100)


def test_syncthreads_with_a_predicate(order):
    x = data(TPB)
    out = np.zeros(3, np.int32)
    syncthreads_predicates[1, TPB](x, out)
    assert list(out) == [int((x > 0).sum()), 1, 0]


# ---- the simulator itself


@cuda.jit
def spin_until_flag(flag, out):
    # thread 0 waits for a flag that the last thread sets: the scheduler must not starve that thread
    t = cuda.threadIdx.x
    if t == 0:
        while flag[0] == 0:
            pass
        out[0] = 1
    if t == cuda.blockDim.x - 1:
        flag[0] = 1


def test_a_spinning_thread_does_not_starve_the_others():
    flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32)
    spin_until_flag[1, 8](flag, out)
    assert out[0] == 1


@cuda.jit
def plain_error(x):
    t = cuda.threadIdx.x
    x[t] = 1 // (t - 3)


def test_other_errors_still_name_the_thread():
    with pytest.raises(ZeroDivisionError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]"):
        plain_error[1, 8](np.zeros(8, np.int32))


def workers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "cuda-sim-worker")


def test_after_an_error_the_next_launch_runs_normally():
    x = data()
    before = workers()
    for _ in range(3):
        with pytest.raises(SimulatorCheckError):
            neighbour_without_barrier[2, TPB](x, np.zeros_like(x), 1)
        with pytest.raises(BarrierDivergence):
            barrier_in_a_branch[1, TPB](x[:TPB], np.zeros_like(x[:TPB]))
        out = np.zeros_like(x)
        tiled_stencil[2, TPB](x, out)
        np.testing.assert_allclose(out, x + np.r_[0, x[:-1]] + np.r_[x[1:], 0], rtol=1e-5, atol=1e-5)
    assert workers() <= max(before, TPB + 1)  # failed blocks give their workers back to the pool


def test_install_is_idempotent():
    install()
    install()
    x = data(32)
    out = np.zeros_like(x)
    tiled_stencil[1, 32](x, out)  # still correct: nothing patched twice

    with pytest.raises(ValueError):
        with thread_order("sideways"):
            pass


@cuda.jit
def every_thread_sets_the_flag(x, out, value_per_thread):
    flag = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    if t == 0:
        flag[0] = 0
    cuda.syncthreads()
    if x[t] > 0:
        flag[0] = t if value_per_thread else 1  # a flag: with one value, whoever lands last is right
    cuda.syncthreads()
    out[t] = flag[0]


def test_threads_storing_one_value_in_a_word_is_not_a_race(order):
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.int32)
    every_thread_sets_the_flag[1, 64](x, out, False)
    assert (out == 1).all()
    with pytest.raises(SharedMemoryRace, match="also wrote since the last barrier"):
        every_thread_sets_the_flag[1, 64](x, out, True)  # different values: which survives is undefined
