"""course.wide: 16-byte loads and stores, in the simulator (values, checks, traffic) and as PTX."""

import textwrap

import numpy as np
import pytest

import course
from course import compiler, cuda, simulator, traffic, wide
from numba import float32

pytestmark = pytest.mark.sim
if course.ON_GPU:
    pytest.skip("the simulator's side of course.wide", allow_module_level=True)


@cuda.jit
def rotate_rows(a, out):
    """Each thread moves 4 floats: a (1-D) -> a shared (4, 64) tile -> the next row's 4 -> out."""
    t = cuda.threadIdx.x
    tile = cuda.shared.array((4, 64), float32, alignment=16)
    wide.store4(tile, t // 16, 4 * (t % 16), wide.load4(a, 4 * t))
    cuda.syncthreads()
    x0, x1, x2, x3 = wide.load4(tile, (t // 16 + 1) % 4, 4 * (t % 16))
    wide.store4(out, 4 * t, (x0, x1, x2, x3 + 1))


@cuda.jit
def offset_copy(a, out, offset):
    i = cuda.threadIdx.x
    wide.store4(out, 4 * i, wide.load4(a, 4 * i + offset))


@cuda.jit
def racy(out):
    t = cuda.threadIdx.x
    tile = cuda.shared.array(8, float32, alignment=16)
    wide.store4(tile, 4 * (t % 2), (1.0, 2.0, 3.0, 4.0))
    out[t] = tile[(4 * t + 4) % 8]  # another thread's element, no barrier between


def test_values_move_as_four_elements():
    a = np.arange(256, dtype=np.float32)
    out = np.zeros_like(a)
    rotate_rows[1, 64](a, out)
    expected = np.roll(a.reshape(4, 64), -1, axis=0).ravel()
    expected[3::4] += 1
    np.testing.assert_array_equal(out, expected)


def test_a_warp_of_wide_loads_is_one_request_of_sixteen_sectors():
    a = np.arange(256, dtype=np.float32)
    with traffic.record() as rec:
        rotate_rows[1, 64](a, np.zeros_like(a))
    (k,) = rec.kernels
    # 2 warps x (1 load of a, 1 store to out): 512 bytes a request, 16 sectors each
    assert (k.global_load_requests, k.global_load_sectors) == (2, 32)
    assert (k.global_store_requests, k.global_store_sectors) == (2, 32)
    # 2 warps x (1 store + 1 load) on the tile: 512 bytes a request, 4 wavefronts of 128 bytes
    assert (k.shared_requests, k.shared_wavefronts) == (4, 16)


def test_a_wide_access_keeps_what_other_threads_logged_meanwhile():
    """On a slow machine the simulator's watchdog lets a second thread run beside the first: its log
    entries may land while a wide access moves its four elements. The wide access is logged once and
    leaves them be (it once logged each element and cut everything after them, another thread's
    entries too: day 66's traffic test counted 284 store sectors instead of 280 in one CI run)."""
    a = np.arange(128, dtype=np.float32)
    foreign = (10_000, "another thread's entry")
    cls = simulator._KernelArray1D
    with traffic.record() as rec:
        (get, put), recording_get = cls._plain, cls.__getitem__
        injected = []

        def beside_another_thread(element_get):
            def get_element(arr, i):
                if not injected:  # as the other thread would, between two of the four elements
                    rec.log.append(foreign)
                    injected.append(i)
                return element_get(arr, i)
            return get_element

        # whichever way the wide load reads its elements (the plain or the recording accessor)
        cls._plain, cls.__getitem__ = (beside_another_thread(get), put), beside_another_thread(recording_get)
        try:
            offset_copy[1, 32](a, out := np.zeros(128, np.float32), 0)
        finally:
            cls._plain, cls.__getitem__ = (get, put), recording_get
        assert injected, "the wide load read no element"
        assert foreign in rec.log, "a wide access cut another thread's log entry"
        rec.log.remove(foreign)
        (k,) = rec.kernels
    np.testing.assert_array_equal(out, a)
    assert (k.global_load_requests, k.global_load_sectors) == (1, 16)


def test_an_address_that_is_not_a_multiple_of_16_bytes_is_named():
    a = np.arange(132, dtype=np.float32)
    with pytest.raises(simulator.MisalignedAccess, match=r"reads 16 bytes of .* at index \[1\]"):
        offset_copy[1, 32](a, np.zeros(128, np.float32), 1)
    offset_copy[1, 32](a, out := np.zeros(128, np.float32), 4)
    np.testing.assert_array_equal(out, a[4:])


@cuda.jit
def default_aligned(out):
    tile = cuda.shared.array(8, float32)  # Numba's default: aligned to 4 bytes only
    t = cuda.threadIdx.x
    wide.store4(tile, 4 * t, (1.0, 2.0, 3.0, 4.0))
    cuda.syncthreads()
    out[t] = tile[4 * t]


def test_a_shared_array_needs_alignment_16_for_wide_accesses():
    with pytest.raises(simulator.MisalignedAccess, match=r"alignment=16"):
        default_aligned[1, 2](np.zeros(2, np.float32))


def test_a_vector_past_the_end_is_out_of_bounds():
    with pytest.raises(simulator.OutOfBounds, match=r"index \[131\]"):
        offset_copy[1, 32](np.arange(128, dtype=np.float32), np.zeros(128, np.float32), 4)


def test_wide_stores_are_watched_for_races():
    with pytest.raises(simulator.SharedMemoryRace):
        racy[1, 2](np.zeros(2, np.float32))


def test_on_the_gpu_they_are_single_vector_instructions(tmp_path):
    path = tmp_path / "wide_kernels.py"
    path.write_text(textwrap.dedent('''
        from course import cuda, wide
        from numba import float32

        @cuda.jit
        def k(a, b, out):
            t = cuda.threadIdx.x
            tile = cuda.shared.array((4, 64), float32, alignment=16)
            wide.store4(tile, t // 16, 4 * (t % 16), wide.load4(a, 4 * t))
            cuda.syncthreads()
            x0, x1, x2, x3 = wide.load4(tile, (t // 16 + 1) % 4, 4 * (t % 16))
            y0, y1, y2, y3 = wide.load4(b, t // 16, 4 * (t % 16))
            wide.store4(out, 4 * t, (x0 + y0, x1 + y1, x2 + y2, x3 + y3))

        KERNELS = {"k": (k, "void(float32[::1], float32[:, ::1], float32[::1])")}
    '''))
    rep = compiler.report(path, "k")
    ptx = rep.ptx
    assert ptx.count("ld.global.v4.f32") == 2 and ptx.count("st.global.v4.f32") == 1
    assert ptx.count("st.shared.v4.f32") == 1 and ptx.count("ld.shared.v4.f32") == 1
    assert rep.count("vector ld/st") == 5 and rep.stack_bytes == 0


@cuda.jit
def halves_copy(a, out):
    i = cuda.threadIdx.x
    h = wide.load8(a, 8 * i)
    wide.store8(out, 8 * i, (h[1], h[0], h[2], h[3], h[4], h[5], h[6], h[7] + h[7]))


def test_eight_halves_move_as_one_16_byte_access():
    a = np.arange(256, dtype=np.float16)
    out = np.zeros_like(a)
    with traffic.record() as rec:
        halves_copy[1, 32](a, out)
    expected = a.copy().reshape(32, 8)
    expected[:, [0, 1]] = expected[:, [1, 0]]
    expected[:, 7] *= 2
    np.testing.assert_array_equal(out, expected.ravel())
    (k,) = rec.kernels
    assert (k.global_load_requests, k.global_load_sectors) == (1, 16)  # 32 lanes x 16 bytes
    with pytest.raises(simulator.MisalignedAccess):
        offset_halves[1, 1](a, out)


@cuda.jit
def offset_halves(a, out):
    wide.store8(out, 0, wide.load8(a, 4))  # 8 bytes in: not a multiple of 16


def test_halves_on_the_gpu_are_one_16_byte_load_and_store(tmp_path):
    path = tmp_path / "wide_halves.py"
    path.write_text(textwrap.dedent('''
        from course import cuda, wide

        @cuda.jit
        def k(a, out):
            i = cuda.grid(1)
            h = wide.load8(a, 8 * i)
            wide.store8(out, 8 * i, (h[7], h[6], h[5], h[4], h[3], h[2], h[1], h[0]))

        KERNELS = {"k": (k, "void(float16[::1], float16[::1])")}
    '''))
    ptx = compiler.report(path, "k").ptx
    assert ptx.count("ld.global.v4.u32") == 1 and ptx.count("st.global.v4.u32") == 1, ptx[-2000:]
    assert "ld.global.v4.u16" not in ptx and "ld.global.u16" not in ptx
