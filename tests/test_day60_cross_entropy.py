"""Day 60 grader: cross-entropy, log-softmax + gather + mean + gradient (the logits read three times and a
logp tensor written and read) vs one fused kernel per row (online max/sum, then the gradient and the loss)."""

import numpy as np
import pytest

from course import ON_GPU, checking, launch, traffic
from course.grading import Grader

g = Grader(60)
sol = g.solution

# A vocabulary of 1 (loss 0, gradient 0), of 3 and 5 (shorter than a warp), a row off the 16-byte grid.
HARD_SHAPES = ((4, 1), (3, 3), (2, 1025))
ALIGNED = (2, 4096)  # every row whole 16-byte groups; 4096 floats a row keep the per-row extras < 2 %


def _run(version, logits, targets):
    g.require_implemented(version)
    return getattr(g.target, version)(logits, targets)


def _compare(version, got, want, what, inputs):
    """The loss and the gradient each against the float64 reference of ``inputs`` (logits, targets).

    The loss is held to the day's RTOL of itself (its atomic sum order varies from run to run) plus what
    float32 cannot avoid: each token's term, logsumexp - logit of the target, is a difference of two
    float32 numbers as large as the row's logits (plus log vocab), so it carries a few of their ulps
    whatever the kernel does. A loss near 0 (every target its row's clear max) is then right to within
    those ulps, not to 1e-4 of itself: 2.38e-7 for 2.16e-7 at logits of 60 is float32, not a bug.
    Likewise the gradient's target entry (p - 1) / n_valid: p within an ulp of 1 leaves p - 1 a few
    float32 ulps of 1 from the truth, so the gradient's absolute floor is at least 4 of them / n_valid
    (only where every row is near one-hot does that exceed checking's floor of 1 % of the largest entry)."""
    assert isinstance(got, tuple) and len(got) == 2, f"{version}: expected (loss, grad), got {type(got).__name__}"
    loss, grad = checking.to_host(got[0]), checking.to_host(got[1])
    assert np.shape(loss) == (), f"{version}: the loss should be a scalar (0-d), got shape {np.shape(loss)}"
    logits, targets = inputs
    valid = targets != sol.IGNORE_INDEX
    big = float(np.abs(logits[valid]).max()) + float(np.log(logits.shape[1])) if valid.any() else 0.0
    atol = 4 * float(np.finfo(np.float32).eps) * big
    expected = float(want[0])
    err = abs(float(loss) - expected)
    assert err <= sol.RTOL * abs(expected) + atol, (
        f"{version}({what}).loss: expected {expected!r}, got {float(loss)!r} (error {err:.3g}, allowed "
        f"{sol.RTOL:g} x |loss| + {atol:.3g}: four float32 ulps of logits up to {big:.3g})")
    scale = float(np.abs(want[1]).max())
    floor = checking.FLOOR
    if valid.any() and scale > 0:
        floor = max(floor, 4 * float(np.finfo(np.float32).eps) / int(valid.sum()) / sol.RTOL / scale)
    checking.assert_matches(grad, want[1], rtol=sol.RTOL, floor=floor, name=f"{version}({what}).grad")
    return loss, grad


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[f"{r}x{c}" for r, c in sol.TEST_SIZES])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_matches_reference(version, n):
    """Both outputs, every version, the awkward sizes, fresh inputs (about a quarter of the tokens ignored)."""
    g.require_implemented(version)
    (logits, targets), seed = g.inputs(n, version)
    _compare(version, _run(version, logits, targets), sol.reference(logits, targets), f"n={n}, seed={seed}",
             (logits, targets))


def _with_target(xs, value):
    t = xs[1].copy()
    t[1] = value
    return xs[0], t


test_rejects_bad_inputs = g.rejects_bad_inputs(
    (3, 5),
    extra_cases={
        "targets-int32": lambda xs: (xs[0], xs[1].astype(np.int32)),
        "target-equal-to-vocab": lambda xs: _with_target(xs, xs[0].shape[1]),
        "target-negative-not-ignore": lambda xs: _with_target(xs, -1),
        "target-huge": lambda xs: _with_target(xs, 2**40),
        "targets-too-short": lambda xs: (xs[0], xs[1][:-1].copy()),
        "targets-too-long": lambda xs: (xs[0], np.concatenate([xs[1], xs[1][:1]])),
        "targets-2d": lambda xs: (xs[0], xs[1][:, None].copy()),
        "logits-1d": lambda xs: (np.ascontiguousarray(xs[0][0]), xs[1][:1].copy()),
        "no-tokens": lambda xs: (xs[0][:0].copy(), xs[1][:0].copy()),
        "no-classes": lambda xs: (xs[0][:, :0].copy(), xs[1]),
    },
)


# The naive version's four kernels cost the simulator twice the optimized's: its vocabulary of 1 is
# graded by test_matches_reference alone.
HARD_CASES = [(v, k, s) for v in sol.VERSIONS for k in sol.HARD_KINDS for s in HARD_SHAPES
              if v == "optimized" or s[1] > 1]


@pytest.mark.parametrize("version, kind, shape", HARD_CASES, ids=[f"{v}-{k}-{s[0]}x{s[1]}" for v, k, s in HARD_CASES])
def test_hard_inputs(version, kind, shape):
    """Logits of +-1e4 (exp without the max overflows), the target at the row's max and at its min (a loss
    term of ~2e3), constant rows (log(vocab) each), and every token ignored: loss 0 and a zero gradient
    (this course's choice; torch's mean is 0 / 0 = NaN). A vocabulary of 1: every loss and gradient 0."""
    logits, targets = sol.hard_inputs(kind, shape)
    got = _run(version, logits, targets)
    loss, grad = checking.to_host(got[0]), checking.to_host(got[1])
    assert np.isfinite(loss) and np.isfinite(grad).all(), (
        f"{version}({kind}, {shape}): loss {loss}, {int((~np.isfinite(grad)).sum())} non-finite gradient "
        "elements: was the row max subtracted before exp? (exp(1e4) is inf in float32)")
    _compare(version, got, sol.reference(logits, targets), f"{kind}, {shape}", (logits, targets))
    valid = targets != sol.IGNORE_INDEX
    assert (grad[~valid] == 0).all(), f"{version}({kind}, {shape}): an ignored token's gradient row must be 0"
    if valid.any():  # softmax sums to 1 and the one-hot to 1: a row of the gradient sums to 0
        sums = np.abs(grad[valid].astype(np.float64).sum(axis=1)) * valid.sum()
        assert (sums < 1e-4).all(), f"{version}({kind}, {shape}): gradient rows sum to {sums / valid.sum()}, not 0"
    if kind == "all-ignored":
        assert loss == 0, f"{version}: every token ignored should give loss 0 (n_valid = 0), got {loss}"


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_ignored_tokens_leave_the_mean(version):
    """Two tokens with the same row, one of them ignored: the loss is that one row's term (the mean over
    n_valid = 1, not over 2 tokens) and the gradient is softmax - onehot unscaled."""
    (logits, targets), _ = g.inputs((1, 37), version, "ignored")
    logits2 = np.ascontiguousarray(np.repeat(logits, 2, axis=0))
    targets2 = np.array([targets[0], sol.IGNORE_INDEX], np.int64)
    loss, grad = _compare(version, _run(version, logits2, targets2), sol.reference(logits2, targets2), "ignored",
                          (logits2, targets2))
    one, _ = sol.reference(logits, targets)
    assert abs(float(loss) - float(one)) <= 1e-4 * abs(float(one)), (
        f"{version}: loss {loss} with one of two tokens ignored; the row alone gives {one}: divide by n_valid")


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_view_off_the_16_byte_grid(version):
    """Device arrays in: logits[1:] of rows of 257 floats start 4 bytes past a 16-byte boundary (wide loads
    must find each row's aligned body), and the outputs stay on the device (the loss a 0-d array)."""
    g.require_implemented(version)
    (logits, targets), seed = g.inputs((3, 257), version, "view")
    d_x, d_t = launch.to_device(logits, targets)
    got = getattr(g.target, version)(d_x[1:], d_t[1:])
    assert launch.is_device_array(got[0]) and launch.is_device_array(got[1]), (
        f"{version}: device arrays in should give device arrays out")
    assert tuple(got[0].shape) == (), f"{version}: the loss should be a 0-d device array, got shape {got[0].shape}"
    _compare(version, got, sol.reference(logits[1:], targets[1:]), f"x[1:], seed={seed}", (logits[1:], targets[1:]))


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_device_target_out_of_range_gives_nan(version):
    """From a device array the targets are not copied back to be checked: a target outside [0, vocab)
    (and not -100) must make the loss NaN, never a plausible number."""
    g.require_implemented(version)
    (logits, targets), _ = g.inputs((3, 5), version, "bad-device")
    targets[1] = 5
    d_x, d_t = launch.to_device(logits, targets)
    loss = checking.to_host(getattr(g.target, version)(d_x, d_t)[0])
    assert np.isnan(loss), f"{version}: target 5 of a vocabulary of 5 gave loss {loss}, expected NaN"


def _passes(version, logits, targets):
    """(logits-sized reads, logits-sized writes): every global sector the version moves, in units of the
    logits' bytes (targets, the scale and the loss add under 2 % at ALIGNED)."""
    if ON_GPU:
        pytest.skip("memory traffic is counted in the simulator; on a GPU, Nsight Compute counts it")
    g.require_implemented(version)
    with traffic.record() as rec:
        getattr(g.target, version)(logits, targets)
    t = rec.total
    return 32 * t.global_load_sectors / logits.nbytes, 32 * t.global_store_sectors / logits.nbytes


def _all_valid(n):
    (logits, targets), _ = g.inputs(n, "traffic")
    targets = np.random.default_rng(0).integers(0, n[1], size=n[0]).astype(np.int64)
    return logits, targets


def test_naive_reads_the_logits_three_times():
    """Log-softmax's three passes, then logp read back by the gradient kernel: four logits-sized reads;
    logp and the gradient: two logits-sized writes."""
    reads, writes = _passes("naive", *_all_valid(ALIGNED))
    assert reads >= 3.9, f"naive: {reads:.2f} logits-sized reads; v1 reads x three times and logp once"
    assert 1.95 <= writes <= 2.1, f"naive: {writes:.2f} logits-sized writes, expected 2 (logp, grad)"


def test_optimized_reads_the_logits_twice_at_most():
    """The fused kernel's point: one read pass for the row's (m, s), one read + write pass for the gradient
    and the loss; no intermediate tensor."""
    reads, writes = _passes("optimized", *_all_valid(ALIGNED))
    assert reads <= 2.05, (
        f"optimized: {reads:.2f} logits-sized reads from global memory; the online max and sum need ONE "
        "pass, the gradient one more: two in all")
    assert reads >= 1.95, f"optimized: only {reads:.2f} logits-sized reads: every logit must be read twice"
    assert 0.95 <= writes <= 1.05, f"optimized: {writes:.2f} logits-sized writes, expected the gradient once"


def test_optimized_skips_ignored_rows():
    """An ignored token's row is written as zeros without being read: half the tokens ignored, half the reads."""
    logits, targets = _all_valid(ALIGNED)
    targets[1] = sol.IGNORE_INDEX
    reads, writes = _passes("optimized", logits, targets)
    assert reads <= 1.05, f"optimized: {reads:.2f} logits-sized reads with one of two rows ignored, expected ~1"
    assert 0.95 <= writes <= 1.05, f"optimized: {writes:.2f} logits-sized writes, expected the gradient once"


def test_optimized_merges_in_registers():
    """The block's (m, s) pairs travel by shuffle, the loads are 16 bytes wide and several in flight, the
    running pair stays in registers (no stack frame), the mean is a global atomic; the naive kernels have
    no atomic and no vector access."""
    rep = g.report("optimized")
    assert rep.count("shfl.sync") > 0, "optimized: no shfl.sync: merge the warp's (m, s) pairs with shuffles"
    assert rep.count("vector ld/st") > 0, "optimized: no 16-byte load or store in the PTX (use course.wide)"
    assert not rep.uses_local_memory, f"optimized: {rep.stack_bytes} bytes of stack (local memory)"
    assert rep.loads_in_flight >= 2, (
        f"optimized: at most {rep.loads_in_flight} global load(s) back to back in the PTX: issue several "
        "independent loads a trip before the arithmetic")
    assert rep.count("atom") > 0, "optimized: no atomic: add each row's loss term to the mean with cuda.atomic.add"
    assert ".f64" not in rep.ptx, "optimized computes in float64: write constants as float32(...)"
    assert g.report("naive").count("vector ld/st") == 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", ((64, 128256), (1024, 32000), (513, 4097)), ids=["128k", "32k", "4097"])
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_large(version, n):
    """Llama 3's vocabulary (128256), Llama 2's (32000), an odd row, float32 exp and atomics as the GPU does them."""
    g.require_implemented(version)
    (logits, targets), seed = g.inputs(n, version, "large")
    _compare(version, _run(version, logits, targets), sol.reference(logits, targets), f"n={n}, seed={seed}",
             (logits, targets))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", sol.HARD_KINDS)
def test_hard_inputs_128k(kind):
    """The hard inputs at a 128256 vocabulary on the GPU."""
    logits, targets = sol.hard_inputs(kind, (8, 128256))
    got = _run("optimized", logits, targets)
    _compare("optimized", got, sol.reference(logits, targets), f"{kind}, 128k", (logits, targets))


@pytest.mark.gpu
def test_library_row():
    """torch's cross_entropy forward + autograd backward, the row the targets compare with (skipped where
    torch is not installed)."""
    pytest.importorskip("torch")
    g.require_implemented("optimized")
    (logits, targets), seed = g.inputs((1024, 32000), "library")
    _compare("library", sol.library(logits, targets), sol.reference(logits, targets), f"seed={seed}",
             (logits, targets))
