"""Day 53 grader: an MLP block with bias and GELU fused into the GEMM epilogue, and checkpointing."""

import functools

import numpy as np
import pytest

from course import checking
from course.grading import Grader

g = Grader(53)
sol = g.solution
OWN = ("epilogue", "optimized")  # the day's kernels; naive is day 43's GEMM and given elementwise kernels
STACK = (5, 7, 9)  # (T, d, h) of the simulator's stack: one tile each way, two k steps in H W2
LAYERS = 3
TRAFFIC_SIZE = (32, 16, 32)  # whole warps (2 rows x 16 columns), one tile: the counts are exact
traffic = functools.cache(lambda version: g.traffic(version, TRAFFIC_SIZE))


def tol(n):
    return sol.tolerance(*sol.sizes(n)[1:])


CASES = ([(v, n) for v in OWN for n in sol.TEST_SIZES]
         + [("naive", n) for n in sol.TEST_SIZES[:3]])


@pytest.mark.parametrize("version, n", CASES, ids=[f"{v}-{n}" for v, n in CASES])
def test_matches_reference(version, n):
    """The fused blocks (two launches, one launch; d = 130 takes the two) at every test shape, the
    unfused one (day 43's GEMM and given elementwise kernels) at the small ones, within two float32
    accumulations (tolerance(d, h))."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, n, rtol=tol(n))


@pytest.mark.parametrize("version", OWN)
def test_hidden_wider_than_a_tile(version):
    """h = 133: two tile columns in x W1 (the second 5 wide: biases past h must not be read) and a
    17-step K in H W2 with a partial last step; in the one-launch block, two hidden chunks (the
    second 5 wide) summed into one y."""
    n = (5, 7, 133)
    g.run_and_compare(version, n, rtol=tol(n))


test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "w1-rows-differ-from-d": lambda xs: (xs[0], xs[1][:-1].copy(), *xs[2:]),
        "b1-wrong-length": lambda xs: (xs[0], xs[1], xs[2][:-1].copy(), *xs[3:]),
        "w2-transposed": lambda xs: (*xs[:3], xs[3].T.copy(), xs[4]),
        "b2-wrong-length": lambda xs: (*xs[:4], np.zeros(xs[4].size + 1, np.float32)),
        "no-tokens": lambda xs: (xs[0][:0].copy(), *xs[1:]),
    },
)


def test_intermediate_written_once():
    """The day's point, counted in the simulator at 32 x 16 x 32: the fused epilogues are two launches
    and store H (T, h) and y (T, d) once each; the unfused block stores H three times and y twice."""
    mine, unfused = traffic("epilogue"), traffic("naive")
    t, d, h = TRAFFIC_SIZE
    once = 4 * t * (h + d)
    assert mine.launches == 2, f"epilogue: {mine.launches} launches: the bias and GELU belong in the GEMMs"
    stored = 32 * mine.global_store_sectors
    assert stored <= 1.05 * once, (
        f"epilogue: {stored} bytes stored for H and y's {once}: apply bias and GELU to the accumulators "
        "before the one store, and store only outputs with row < M and column < N")
    assert 2 * stored <= 32 * unfused.global_store_sectors, "epilogue stores as much as the unfused block"
    assert mine.global_bytes < 0.7 * unfused.global_bytes, (
        f"epilogue: {mine.global_bytes} bytes through global memory against the unfused {unfused.global_bytes}")


def test_hidden_never_written():
    """The one-launch block at 32 x 16 x 32: one launch, and the only bytes stored are y's (T, d): the
    hidden lives in shared memory between the GEMMs. It reads x once and the weights (cache hits on
    the GPU), so it moves less than the two-launch block, which writes and reads H."""
    mine, two = traffic("optimized"), traffic("epilogue")
    t, d, h = TRAFFIC_SIZE
    assert mine.launches == 1, f"optimized: {mine.launches} launches: both GEMMs belong in one kernel"
    stored = 32 * mine.global_store_sectors
    assert stored <= 1.05 * 4 * t * d, (
        f"optimized: {stored} bytes stored for y's {4 * t * d}: H must stay on the chip (shared memory)")
    assert mine.global_bytes < two.global_bytes, (
        f"optimized: {mine.global_bytes} bytes through global memory, the two-launch block {two.global_bytes}")


def test_epilogue_in_registers():
    """The accumulators stay in registers through the epilogue (no stack frame, no spills), and the
    main loop is still day 43's (two barriers, 128 x 128 tiles through shared memory)."""
    rep = g.report("epilogue")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"epilogue: {rep.stack_bytes} bytes of stack: index acc only in loops with constant trip counts, and "
        "apply the GELU in a loop of its own (64 GELUs inside the guarded store loops stop their unrolling)")
    assert rep.spill_stores == rep.spill_loads == 0, f"epilogue: {rep.spill_stores} spill stores"
    assert rep.registers <= 255 and rep.count("bar.sync") >= 2 and rep.count("ld.shared") > 0


def test_one_launch_block_in_registers_and_shared():
    """The one-launch block: both accumulator sets in registers (no stack, no spills), the hidden and
    the tiles in shared memory (stores and loads there), barriers between the phases."""
    rep = g.report("optimized")
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, (
        f"optimized: {rep.stack_bytes} bytes of stack: index hacc and yacc only in loops with constant trip counts")
    assert rep.spill_stores == rep.spill_loads == 0, f"optimized: {rep.spill_stores} spill stores"
    assert rep.count("st.shared") > 0 and rep.count("ld.shared") > 0, "optimized: the hidden belongs in shared memory"
    assert rep.count("bar.sync") >= 3, f"optimized: {rep.count('bar.sync')} barriers; the k steps and H need them"


def _stack():
    x, params = sol.make_stack(STACK, LAYERS, seed=g.inputs(STACK, "stack")[1])
    return x, params


def test_checkpointed_activations_equal_kept():
    """Every block's (a_i, g_i) rebuilt from checkpoints equals, bit for bit, what forward_keep kept
    (the same kernels on the same inputs); every = 2 over 3 blocks leaves a last segment of one."""
    every = 2
    g.require_implemented(*OWN)
    g.require_implemented("recompute")
    x, params = _stack()
    out, saved = sol_target().forward_keep(x, params)
    report = checking.compare(out, sol.reference_stack(x, params), rtol=LAYERS * tol(STACK), floor=1.0,
                              name="forward_keep")
    assert report.ok, report.text
    out2, checkpoints = sol_target().forward_recompute(x, params, every=every)
    assert sorted(checkpoints) == list(range(0, LAYERS, every))
    assert np.array_equal(out, out2)
    for i in range(LAYERS):
        a, hidden = sol_target().recompute(checkpoints, params, i, every)
        assert np.array_equal(a, saved[i][0]), f"recompute({i}, every={every}): block {i}'s input differs"
        assert np.array_equal(hidden, saved[i][1]), f"recompute({i}, every={every}): block {i}'s hidden differs"


def sol_target():
    return g.target


def test_replay_output_and_bad_every():
    """replay (forward + backward's visits) gives the same output with and without checkpoints, and
    forward_recompute rejects every < 1."""
    g.require_implemented(*OWN)
    x, params = _stack()
    out = g.target.replay(x, params, None)
    assert np.array_equal(g.target.replay(x, params, 2), out)
    with pytest.raises(ValueError):
        g.target.forward_recompute(x, params, every=0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((4099, 257, 1031),) + sol.BENCH_SIZES[1:2], ids=["4099x257x1031", "bench"])
def test_at_larger_sizes(n):
    """Both versions on the GPU: no side a multiple of a tile, and the 128 x 512 benchmark size."""
    for version in sol.VERSIONS:
        g.run_and_compare(version, n, rtol=tol(n))


@pytest.mark.gpu
def test_memory_time_curve():
    """The curve at 8192 tokens, 8 blocks: every policy's output equals keep-all's (checked inside),
    the pool's peak is the napkin activation bytes (within 10 % and 1 MB), and a checkpoint every 2
    blocks holds less than keeping everything."""
    g.require_implemented(*OWN)
    rows = g.target.memory_time_curve((8192, 128, 512), layers=8, everys=(None, 1, 2, 4, 8), repeats=3)
    for r in rows:
        assert abs(r["peak_bytes"] - r["activation_bytes"]) <= 0.1 * r["activation_bytes"] + (1 << 20), r
    assert rows[2]["peak_bytes"] < 0.5 * rows[0]["peak_bytes"]
