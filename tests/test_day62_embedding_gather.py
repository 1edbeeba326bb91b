"""Day 62 grader: embedding gather, one thread per element (the id re-read for every element) vs a warp
per token row (the id read once, 16-byte accesses, two rows of a warp in flight) vs a block per token row
(the rows in order, four 16-byte quads a thread in flight)."""

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(62)
sol = g.solution

test_matches_reference = g.matches_reference()
test_rejects_bad_inputs = g.rejects_bad_inputs(
    (11, 4, 13),
    extra_cases={
        "id-negative": lambda xs: (xs[0], np.concatenate([xs[1][:-1], np.int32([-1])])),
        "id-vocab": lambda xs: (xs[0], np.concatenate([xs[1][:-1], np.int32([xs[0].shape[0]])])),
        "ids-2d": lambda xs: (xs[0], xs[1][None, :].copy()),
        "ids-uint32": lambda xs: (xs[0], xs[1].astype(np.uint32)),
        "table-1d": lambda xs: (xs[0][0].copy(), xs[1]),
        "table-no-columns": lambda xs: (xs[0][:, :0].copy(), xs[1]),
        "table-int32": lambda xs: (xs[0].view(np.int32), xs[1]),
    },
)


def _run(version, table, ids):
    g.require_implemented(version)
    return checking.to_host(getattr(g.target, version)(table, ids))


def _check(version, table, ids, what):
    got = _run(version, table, ids)
    assert got.shape == (ids.shape[0], table.shape[1]), f"{version}({what}): shape {got.shape}"
    assert np.array_equal(got, sol.reference(table, ids)), (
        f"{version}({what}): rows differ from table[ids] (a gather is a copy: bit for bit)")


@pytest.mark.parametrize("dtype", ("float32", "float16"))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_int64_ids(version, dtype):
    """torch's default dtype for token ids: int64 ids give the same rows as int32 ones."""
    (table, ids), _ = g.inputs((23, 132, 9, dtype), version)
    _check(version, table, ids.astype(np.int64), f"int64 ids, {dtype}")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_end_rows_and_repeats(version):
    """The table's first and last rows, alternating, and one id for every token of a batch (every
    row the same: on a GPU, L2 hits)."""
    (table, _), _ = g.inputs((17, 36, 1), version, "ends")
    ends = np.int32([16, 0, 16, 0, 0, 16, 16])
    _check(version, table, ends, "ids 0 and vocab - 1")
    _check(version, table, np.full(11, 5, np.int32), "one id repeated")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_no_tokens(version):
    """An empty batch: an empty (0, hidden) result, no launch."""
    (table, ids), _ = g.inputs((5, 8, 1), version, "empty")
    got = _run(version, table, ids[:0].copy())
    assert got.shape == (0, 8), f"{version}: no tokens should give shape (0, 8), got {got.shape}"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_host_ids_out_of_range_rejected(version):
    """NumPy ids outside [0, vocab) raise ValueError naming the id, before anything runs."""
    g.require_implemented(version)
    (table, ids), _ = g.inputs((9, 4, 6), version, "range")
    for bad in (-1, 9, 2**31 - 1):
        wrong = ids.copy()
        wrong[3] = bad
        with pytest.raises(ValueError, match="ids"):
            getattr(g.target, version)(table, wrong)


@pytest.mark.parametrize("dtype", ("float32", "float16"))
@pytest.mark.parametrize("hidden", (4, 5, 128))
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_ids_out_of_range_give_nan_rows(version, hidden, dtype):
    """Device ids are not copied back to be checked: a row whose id is outside [0, vocab) comes back all
    NaN, the other rows right (and the result stays on the device)."""
    g.require_implemented(version)
    (table, ids), _ = g.inputs((12, hidden, 7, dtype), version, "device-range")
    ids[2], ids[5] = -1, 12
    d_table, d_ids = launch.to_device(table, ids)
    got = getattr(g.target, version)(d_table, d_ids)
    assert launch.is_device_array(got), f"{version}: device arrays in should give a device array out"
    got = checking.to_host(got)
    bad = np.zeros(7, bool)
    bad[[2, 5]] = True
    assert np.isnan(got[bad]).all(), f"{version}: rows of out-of-range ids (-1 and vocab) must be all NaN"
    assert np.array_equal(got[~bad], table[ids[~bad]]), f"{version}: the rows of valid ids are wrong"


def test_device_view_off_the_16_byte_grid():
    """A device table that starts 4 bytes past a 16-byte boundary (a view into a larger allocation):
    16-byte accesses do not fit it, the rows still come out right."""
    g.require_implemented("optimized")
    (table, ids), _ = g.inputs((10, 8, 5), "optimized", "view")
    (d_flat,) = launch.to_device(np.concatenate([np.zeros(1, np.float32), table.ravel()]))
    d_table = d_flat[1:].reshape(table.shape)
    got = checking.to_host(g.target.optimized(d_table, launch.to_device(ids)[0]))
    assert np.array_equal(got, table[ids]), "optimized: a table view off the 16-byte grid gave wrong rows"


@pytest.mark.parametrize("version", ("warp_per_row", "optimized"))
@pytest.mark.parametrize("hidden", (256, 512))
def test_optimized_reads_each_id_once_and_16_bytes_a_lane(hidden, version):
    """A warp (or, at these widths, a one-warp block) per row: the table's rows in 16-byte requests (16
    sectors a warp) and each id loaded by one request (the whole warp on one address: a broadcast);
    16-byte stores."""
    tokens = 16
    t = g.traffic(version, (64, hidden, tokens))
    table_requests = tokens * hidden // (4 * 32)  # a warp's 16-byte request covers 128 floats
    id_requests = t.global_load_requests - table_requests
    assert t.sectors_per_store >= 15.9, (
        f"{version}: {t.sectors_per_store:.1f} sectors a store request; store 16 bytes a lane (wide.store4)")
    assert t.global_load_requests >= table_requests, f"{version}: fewer load requests than the rows need"
    assert id_requests <= tokens, (
        f"{version}: {t.global_load_requests} load requests, {table_requests} for the rows with 16-byte "
        f"loads: {id_requests} for {tokens} ids. Read each id once a row (not once a quad), the rows in "
        "16-byte loads (wide.load4)")
    assert t.global_load_sectors <= tokens * hidden * 4 // 32 + tokens, (
        f"{version}: {t.global_load_sectors} sectors loaded, the rows need {tokens * hidden * 4 // 32}")


def test_naive_reads_the_id_for_every_element():
    """The contrast: one thread per element, each loading its id, so the ids take as many requests as
    the table's rows (hidden loads of one id), and 4-byte accesses (4 sectors a request)."""
    tokens, hidden = 16, 256
    t = g.traffic("naive", (64, hidden, tokens))
    row_requests = tokens * hidden // 32
    assert t.global_load_requests >= 1.9 * row_requests, (
        f"naive: {t.global_load_requests} load requests; each thread loads its own id, so about "
        f"{2 * row_requests} are expected")
    assert t.sectors_per_store <= 4.1, f"naive: {t.sectors_per_store:.1f} sectors a store; 4 bytes a lane"


@pytest.mark.parametrize("version", ("warp_per_row", "optimized"))
def test_optimized_compiles_to_16_byte_accesses(version):
    """The 16-byte kernels: vector loads and stores, several loads issued before a store (two quads of
    two rows; four quads of one), no local memory; the naive kernel has no vector access."""
    rep = g.report(version)
    assert rep.count("vector ld/st") >= 2, f"{version}: no ld.v4 / st.v4: copy the rows with wide.load4/store4"
    least = 4 if version == "optimized" else 2
    assert rep.loads_in_flight >= least, (
        f"{version}: {rep.loads_in_flight} load(s) before the first store; issue a lane's loads (several "
        f"quads: {least} at least) before its stores, so the latency is paid once for all")
    assert not rep.uses_local_memory, f"{version}: {rep.stack_bytes} bytes of stack (local memory)"
    assert g.report("naive").count("vector ld/st") == 0


def test_word_kernel_compiles():
    """The 4-byte kernel (rows off the 16-byte grid) keeps its loads ahead of its stores too."""
    rep = g.report("optimized.words")
    assert rep.loads_in_flight >= 2, f"optimized.words: {rep.loads_in_flight} load(s) before the first store"
    assert not rep.uses_local_memory


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((50000, 4097, 1021), (32000, 4100, 3001, "float16")),
                         ids=["32k-16k", "128k-4k", "32k-16k-fp16", "4097", "fp16-4100"])
@pytest.mark.parametrize("version", ("warp_per_row", "optimized"))
def test_large(n, version):
    g.run_and_compare(version, n)


@pytest.mark.gpu
def test_large_repeats():
    g.run_and_compare("optimized", (128256, 4096, 8192, "repeats"))


@pytest.mark.gpu
def test_naive_large():
    g.run_and_compare("naive", (32000, 4096, 4096))


@pytest.mark.gpu
def test_library_row():
    pytest.importorskip("torch")
    g.run_and_compare("library", (32000, 4096, 1024))
