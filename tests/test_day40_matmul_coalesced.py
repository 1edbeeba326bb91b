"""Day 40 grader: matrix multiply step 2, x along the columns of C (coalesced B loads and C stores)."""

import pytest

from course.grading import Grader

g = Grader(40)
sol = g.solution
OWN = ("coalesced",)  # the day's own version: naive is day 39's, given


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Every step so far at every test shape, within float32 accumulation error (sol.tolerance(K));
    naive (day 39's) is graded as the row the step is compared with, once the day's kernel is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, n, rtol=sol.tolerance(sol.sizes(n)[2]))


# naive's input checks are day 39's (its grader tests them).
test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-columns": lambda xs: (xs[0], xs[1][:, :0].copy()),
    },
)


def test_tall_and_wide():
    """More rows than columns and the other way round: the guard belongs on the column (x), the
    stride on the rows (y); a kernel that mixes the two reads past B or leaves rows unwritten."""
    for shape in ((70, 3, 9), (3, 70, 9)):
        g.run_and_compare("coalesced", shape, rtol=sol.tolerance(shape[2]))


def test_coalesced_stays_in_registers():
    """Still one accumulator a thread: no shared memory, no barrier, no local memory (that is day 41)."""
    rep = g.report("coalesced")
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0, (
        "coalesced: shared memory or barriers: today's step changes only which index x walks")
    assert not rep.uses_local_memory, f"coalesced: {rep.stack_bytes} bytes of stack (local memory)"


def test_warps_walk_the_columns_of_c():
    """The step's point, counted as Nsight Compute counts it (64^3): a warp's store is one row of C
    (4 sectors a request, day 39's 32), its load of B one line (4 sectors) and of A one word (1)."""
    t = g.traffic("coalesced")
    assert t.sectors_per_store <= 4.1, (
        f"coalesced: {t.sectors_per_store:.1f} sectors per store request: let x of the thread index walk "
        "the columns of C (j, i = cuda.grid(2)), so a warp writes 32 consecutive floats of a row")
    assert t.sectors_per_load <= 2.6, (
        f"coalesced: {t.sectors_per_load:.1f} sectors per load request: a warp should read one line of B "
        "(4 sectors) and one word of A (1 sector, a broadcast) at each k")


def test_fewer_sectors_than_naive():
    """Same requests, same arithmetic: only the sectors change, by 6.6x on the loads (16.5 -> 2.5
    a request) and 8x on the stores."""
    g.require_implemented(*OWN)
    naive, opt = g.traffic("naive"), g.traffic("coalesced")
    assert opt.global_load_requests == naive.global_load_requests, (
        f"coalesced: {opt.global_load_requests} load requests against naive's {naive.global_load_requests}: "
        "the step keeps one thread per output and two loads per multiply-add")
    assert 5 * opt.global_load_sectors <= naive.global_load_sectors, (
        f"coalesced: {opt.global_load_sectors} load sectors against naive's {naive.global_load_sectors}")
    assert 6 * opt.global_store_sectors <= naive.global_store_sectors, (
        f"coalesced: {opt.global_store_sectors} store sectors against naive's {naive.global_store_sectors}")


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES, ids=[str(n) for n in sol.BENCH_SIZES])
def test_coalesced_at_bench_size(n):
    """4096^3 and 4093 x 4099 x 1021 on the GPU."""
    g.run_and_compare("coalesced", n, rtol=sol.tolerance(sol.sizes(n)[2]))
