"""Arrays of records in kernels: an element copies whole (f[1] = f[0]), as on the GPU.

Runs unchanged in the simulator and on a GPU; an H200 (numba-cuda 0.30.4) copies the record.
"""

import numba
import numpy as np
from course import cuda

RECORD = np.dtype([("a", np.int32), ("b", np.float32)], align=True)
NB_RECORD = numba.from_dtype(RECORD)


@cuda.jit
def copy_record(f):
    if cuda.grid(1) == 0:
        f[1] = f[0]


@cuda.jit
def copy_record_through_shared(f, out):
    s = cuda.shared.array(2, dtype=NB_RECORD)
    if cuda.threadIdx.x == 0:
        s[0] = f[0]
        s[1] = s[0]
        out[0] = s[1]


def test_a_record_copies_from_one_element_to_another():
    f = np.zeros(2, RECORD)
    f[0] = (3, 2.5)
    copy_record[1, 32](f)
    assert tuple(f[1]) == (3, 2.5)


def test_a_record_copies_through_shared_memory():
    g, out = np.zeros(1, RECORD), np.zeros(1, RECORD)
    g[0] = (-4, 0.25)
    copy_record_through_shared[1, 32](g, out)
    assert tuple(out[0]) == (-4, 0.25)
