"""course.traffic: requests, sectors and shared wavefronts, counted as the hardware counts them.

Each kernel here is small and its counts are worked out by hand in the comment above the test.
"""

import numpy as np
import pytest

import course
from course import cuda, traffic
from numba import float32, float64, int32

pytestmark = pytest.mark.sim
if course.ON_GPU:
    pytest.skip("traffic is recorded in the simulator", allow_module_level=True)


@cuda.jit
def copy(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def copy_offset(x, out, offset):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i + offset]


@cuda.jit
def gather_strided(x, out, stride):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i * stride]


def one(kernel, grid, block, *args) -> traffic.KernelTraffic:
    with traffic.record() as rec:
        kernel[grid, block](*args)
    (k,) = rec.kernels
    return k


def test_a_coalesced_float32_warp_is_one_request_of_four_sectors():
    x = np.arange(256, dtype=np.float32)
    k = one(copy, 2, 128, x, np.zeros_like(x))
    assert (k.launches, k.global_load_requests, k.global_load_sectors) == (1, 8, 32)
    assert (k.global_store_requests, k.global_store_sectors) == (8, 32)
    assert k.sectors_per_load == 4 and k.global_bytes == 2 * 256 * 4


def test_a_stride_of_32_floats_touches_one_sector_per_lane():
    x = np.arange(32 * 32, dtype=np.float32)
    k = one(gather_strided, 1, 32, x, np.zeros(32, np.float32), 32)
    assert (k.global_load_requests, k.global_load_sectors) == (1, 32)
    assert (k.global_store_requests, k.global_store_sectors) == (1, 4)


def test_misaligned_by_one_element_a_warp_straddles_five_sectors():
    x = np.arange(65, dtype=np.float32)
    k = one(copy_offset, 1, 64, x, np.zeros(64, np.float32), 1)
    assert (k.global_load_requests, k.global_load_sectors) == (2, 10)  # bytes 4..131 and 132..259
    assert k.global_store_sectors == 8


@cuda.jit
def copy_second_row(x, out):
    row = x[1]  # a view: it starts 65 floats (260 bytes) into x's allocation
    i = cuda.grid(1)
    out[i] = row[i]


def test_a_view_keeps_its_offset_into_the_allocation():
    x = np.arange(2 * 65, dtype=np.float32).reshape(2, 65)
    k = one(copy_second_row, 1, 32, x, np.zeros(32, np.float32))
    assert k.global_load_sectors == 5  # bytes 260..387: sectors 8..12


def test_float64_doubles_the_sectors():
    x = np.arange(64, dtype=np.float64)
    k = one(copy, 1, 64, x, np.zeros_like(x))
    assert (k.global_load_requests, k.global_load_sectors) == (2, 16)


def test_a_partial_last_warp_is_one_request_of_its_lanes():
    x = np.arange(40, dtype=np.float32)
    k = one(copy, 1, 64, x, np.zeros_like(x))  # lanes 40..63 fail the guard: warp 1 has 8 lanes left
    assert (k.global_load_requests, k.global_load_sectors) == (2, 4 + 1)


@cuda.jit
def divergent(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = x[i]
    else:
        out[i] = 2 * x[i]


def test_each_side_of_a_divergent_branch_is_a_request_of_its_own():
    x = np.arange(32, dtype=np.float32)
    k = one(divergent, 1, 32, x, np.zeros_like(x))
    # two load instructions, each run by 16 lanes of every other float: 4 sectors each
    assert (k.global_load_requests, k.global_load_sectors) == (2, 8)
    assert (k.global_store_requests, k.global_store_sectors) == (2, 8)


@cuda.jit
def shared_rows_and_columns(a, out):
    t = cuda.shared.array((32, 32), float32)
    p = cuda.shared.array((32, 33), float32)
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    t[y, x] = a[y, x]
    p[y, x] = a[y, x]
    cuda.syncthreads()
    out[0, y, x] = t[x, y]  # a column of a 32 x 32 tile: every lane in one bank
    out[1, y, x] = p[x, y]  # of a 32 x 33 tile: 32 banks
    out[2, y, x] = t[y, x] + t[0, 0]  # a row (1), and one word all lanes share: a broadcast (1)


def test_a_transposed_tile_conflicts_32_ways_unless_padded():
    a = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    with traffic.record() as rec:
        shared_rows_and_columns[1, (32, 32)](a, np.zeros((3, 32, 32), np.float32))
    k = rec.kernel("shared_rows_and_columns")
    # per warp (one row y): 2 row stores (1 each), a column of t (32), a column of p (1), a row (1) and
    # a broadcast (1); 32 warps
    assert k.shared_requests == 32 * 6
    assert k.shared_wavefronts == 32 * (1 + 1 + 32 + 1 + 1 + 1)


@cuda.jit
def shared_float64(x, out):
    s = cuda.shared.array(64, float64)
    i = cuda.threadIdx.x
    s[i] = x[i]
    cuda.syncthreads()
    out[i] = s[i]


def test_32_consecutive_float64_are_two_wavefronts():
    x = np.arange(64, dtype=np.float64)
    k = one(shared_float64, 1, 64, x, np.zeros_like(x))
    assert (k.shared_requests, k.shared_wavefronts) == (4, 8)


@cuda.jit
def histogram_global(keys, bins):
    i = cuda.grid(1)
    if i < keys.size:
        cuda.atomic.add(bins, keys[i], 1)


@cuda.jit
def histogram_shared(keys, bins):
    local = cuda.shared.array(8, int32)
    i = cuda.threadIdx.x
    if i < 8:
        local[i] = 0
    cuda.syncthreads()
    cuda.atomic.add(local, keys[i], 1)
    cuda.syncthreads()
    if i < 8:
        cuda.atomic.add(bins, i, local[i])


def test_an_atomic_is_a_load_and_a_store_request():
    keys = (np.arange(32) % 8).astype(np.int32)
    k = one(histogram_global, 1, 32, keys, np.zeros(8, np.int32))
    assert (k.global_load_requests, k.global_load_sectors) == (2, 4 + 1)  # the keys, and the bins
    assert (k.global_store_requests, k.global_store_sectors) == (1, 1)
    k = one(histogram_shared, 1, 32, keys, np.zeros(8, np.int32))
    # shared: the zeroing store (1), the atomic's load and store (8 words in 8 banks, 4 lanes on each:
    # lanes on one address are served one after another, 4 each), the final read (1); global: keys,
    # and the bins' atomic load and store
    assert (k.shared_requests, k.shared_wavefronts) == (4, 1 + 4 + 4 + 1)
    assert (k.global_load_requests, k.global_store_requests) == (2, 1)


def test_kernels_are_listed_in_launch_order_and_summed():
    x = np.arange(64, dtype=np.float32)
    with traffic.record() as rec:
        copy[1, 64](x, np.zeros_like(x))
        gather_strided[1, 32](x, np.zeros(2, np.float32), 32)
        copy[1, 64](x, np.zeros_like(x))
    assert [(k.name, k.launches) for k in rec.kernels] == [("copy", 2), ("gather_strided", 1)]
    assert rec.total.global_load_requests == 2 * 2 + 1 and rec.total.launches == 3
    with pytest.raises(KeyError, match="launched: copy, gather_strided"):
        rec.kernel("nope")


def test_recording_does_not_nest_and_stops_cleanly():
    with traffic.record():
        with pytest.raises(RuntimeError, match="does not nest"):
            with traffic.record():
                pass
    from course import simulator

    assert simulator._recorder is None and "_plain" not in simulator._KernelArray1D.__dict__
