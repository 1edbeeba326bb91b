"""Day 48 grader: matrix multiply step 10, day 46's kernel compiled with a tuned configuration per shape class."""

import pytest

from course.grading import Grader

g = Grader(48)
sol = g.solution
mine = g.target
OWN = ("autotuned",)  # the day's own version: the first eight steps are days 39-46's, given
EARLIER = tuple(v for v in sol.VERSIONS if v not in OWN)
EARLIER_SIZE = (33, 35, 37)  # the earlier steps once, at a ragged shape: their own days grade them fully
Config = sol.Config
# Configurations of the space besides BEST's, graded at a ragged shape: BK = 8 with 32 x 64 warp tiles
# on 64 x 64 blocks (64 threads, WNITER = 4), 128 accumulators a thread (64 x 64 warp tiles, 128
# threads), and BK = 32 on 64 x 64 blocks (8 float4 of A and of B prefetched a thread).
OTHERS = (Config(64, 64, 8, 32, 64, 1, 4, 4, 4), Config(128, 128, 8, 64, 64, 2, 4, 4, 4),
          Config(64, 64, 32, 64, 32, 2, 2, 4, 4))


def ragged(cfg):
    """A tile - 5 down (one tile, its last rows past M), + 3 across (two, the second 3 wide), a step + 5
    deep (two k steps, the last 5 deep): N and K not multiples of 4, both inputs padded."""
    return (cfg.BM - 5, cfg.BN + 3, cfg.BK + 5)


@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_matches_reference(n):
    """autotuned at every test shape (all of class "SSS"), within float32 accumulation error."""
    g.run_and_compare("autotuned", n, rtol=sol.tolerance(sol.sizes(n)[2]))


@pytest.mark.parametrize("shape", [(129, 131, 21), (70, 9, 11), (9, 70, 11)], ids=["ragged", "tall", "wide"])
def test_ragged_shapes(shape):
    """Edge tiles in every direction, and tall and wide shapes (rows and columns differ everywhere)."""
    g.run_and_compare("autotuned", shape, rtol=sol.tolerance(shape[2]))


def _graded_config(cfg):
    g.require_implemented(*OWN)
    shape = ragged(cfg)
    inputs, seed = g.inputs(shape, "config", tuple(cfg))
    from course import checking

    got = mine.variant(cfg).warp_tiling(*inputs)
    report = checking.compare(got, sol.reference(*inputs), rtol=sol.tolerance(shape[2]), floor=sol.ERROR_FLOOR,
                              name=f"{cfg.label()} at {shape}")
    assert report.ok, f"{report.text}\n  (inputs: make_inputs({shape!r}, seed={seed}))"


@pytest.mark.parametrize("cfg", list(dict.fromkeys(mine.BEST.values())), ids=lambda c: c.label())
def test_every_best_configuration_is_correct(cfg):
    """Every configuration the table can pick, run at a ragged shape of its own tiles."""
    _graded_config(cfg)


@pytest.mark.parametrize("cfg", OTHERS, ids=lambda c: c.label())
def test_other_configurations_are_correct(cfg):
    """Configurations of the space the table does not hold today (the sweep may pick them)."""
    _graded_config(cfg)


def test_best_table_covers_every_class_with_valid_configurations():
    """BEST has a key for each of the 8 classes, and each entry is one config_space() yields (day 46's
    asserts accept it)."""
    g.require_implemented(*OWN)
    assert set(mine.BEST) == set(sol.CLASSES), f"BEST's keys: {sorted(mine.BEST)}, expected {sorted(sol.CLASSES)}"
    for cls, cfg in mine.BEST.items():
        try:
            mine.variant(Config(*cfg))
        except AssertionError as exc:
            pytest.fail(f"BEST[{cls!r}] = {cfg}: day 46's asserts reject it ({exc})", pytrace=False)


def test_shape_class_tall_and_wide():
    """M, N, K in that order: a tall 4096 x 256 x 4096 is "LSL", a wide 256 x 4096 x 4096 "SLL"; the
    bench shapes are "LLL" and "LLS"; 1024 is small, 1025 large."""
    g.require_implemented(*OWN)
    cases = {(4096, 256, 4096): "LSL", (256, 4096, 4096): "SLL", (4096, 4096, 4096): "LLL",
             (4093, 4099, 1021): "LLS", (1024, 1025, 1024): "SLS", (1025, 1024, 1025): "LSL", (1, 1, 1): "SSS"}
    for shape, want in cases.items():
        got = mine.shape_class(*shape)
        assert got == want, f"shape_class{shape} = {got!r}, expected {want!r} (letters for M, N, K in that order)"


def test_autotuned_runs_the_configuration_of_its_class(monkeypatch):
    """With a table whose tall and wide entries differ, a tall problem gets the tall configuration and a
    wide one the wide configuration: config_for reads BEST at call time, keyed by shape_class(M, N, K)."""
    g.require_implemented(*OWN)
    tall_cfg, wide_cfg = OTHERS[0], OTHERS[2]
    table = {cls: sol.DAY46 for cls in sol.CLASSES}
    table.update(LSL=tall_cfg, SLL=wide_cfg)
    monkeypatch.setattr(mine, "BEST", table)
    assert mine.config_for(4096, 256, 4096) == tall_cfg, "a tall (M large, N small) problem got another class's config"
    assert mine.config_for(256, 4096, 4096) == wide_cfg, "a wide (M small, N large) problem got another class's config"
    monkeypatch.setattr(mine, "BEST", {})
    assert mine.config_for(4096, 4096, 4096) == sol.DAY46, "a class missing from BEST must get DAY46"


def test_config_space_yields_only_valid_configurations():
    """config_space keeps the candidates day 46's asserts accept, in order, and drops the others: a
    48-row warp tile (64 rows of block tile are not whole warp tiles; 12 lane rows a sub-tile) and a
    4-deep step (the A loader reads 8 k a pass) are rejected; the default space is the 18 candidates,
    all valid (the H200 sweep builds them all)."""
    g.require_implemented(*OWN)
    knobs = dict(blocks=((64, 64),), bk=(4, 8), warps=((64, 32), (48, 32)))
    got = list(mine.config_space(**knobs))
    valid = []
    for cfg in sol.candidates(**knobs):
        try:
            sol.build(cfg)
            valid.append(cfg)
        except AssertionError:
            pass
    assert got == valid == [Config(64, 64, 8, 64, 32, 2, 2, 4, 4)], f"config_space yielded {got}"
    assert len(list(sol.candidates())) == 18 and sol.DAY46 in sol.candidates()


def _row(cfg, shape, pct, status="ok"):
    return dict(config=cfg._asdict(), shape=list(shape), ms=1.0, tflops=1.0, pct_cublas=pct, status=status)


def test_best_of_synthetic_rows():
    """best_of picks per class the best mean % of cuBLAS among configurations correct at every shape of
    the class; a wrong or skipped row disqualifies its configuration; classes with no rows keep DAY46."""
    g.require_implemented(*OWN)
    a, b, c = OTHERS
    big, big2, awkward, tall = (4096, 4096, 4096), (2048, 2048, 2048), (4093, 4099, 1021), (4096, 256, 4096)
    rows = [
        _row(a, big, 60), _row(a, big2, 40),  # LLL: a averages 50
        _row(b, big, 55), _row(b, big2, 50),  # b averages 52.5: the best correct one
        _row(c, big, 90), _row(c, big2, 0, status="wrong: 3 elements off"),  # fastest, but wrong once
        _row(a, awkward, 30), _row(c, awkward, 45), _row(b, awkward, 99, status="skipped: 48 bytes of stack"),
        _row(c, tall, 70),
    ]
    best = mine.best_of(rows)
    assert set(best) == set(sol.CLASSES), f"best_of's keys: {sorted(best)}"
    assert best["LLL"] == b, f"LLL: {best['LLL']} (expected {b}: the best mean among configurations ok everywhere)"
    assert best["LLS"] == c, f"LLS: {best['LLS']} (expected {c}; the skipped row's 99 % is not a result)"
    assert best["LSL"] == c, f"LSL: {best['LSL']} (the tall shape's only row)"
    assert best["SLL"] == sol.DAY46 and best["SSS"] == sol.DAY46, "classes without rows keep DAY46"


def test_best_kernels_stay_in_registers():
    """`make inspect`: every kernel BEST can pick keeps its accumulators in registers (no stack frame, no
    spills, at most 255 registers), and day 46's float4 fragments (ld.shared.v4)."""
    labels = [label for label in mine.KERNELS if label.startswith("autotuned.")]
    assert labels, "KERNELS has no autotuned.* kernel (one per distinct BEST configuration)"
    for label in labels:
        rep = g.report(label)
        assert rep.stack_bytes == 0 and rep.spill_stores == 0, (
            f"{label}: {rep.stack_bytes} bytes of stack, {rep.spill_stores} of spill stores: BEST should only "
            "hold configurations tune() did not skip")
        assert rep.registers <= sol.MAX_REGISTERS and rep.ptx.count("ld.shared.v4") > 0


@pytest.mark.parametrize("version", EARLIER)
def test_earlier_steps_still_match(version):
    """The table's earlier rows, imported from days 39-46, once the day's version is written."""
    g.require_implemented(*OWN)
    g.run_and_compare(version, EARLIER_SIZE, rtol=sol.tolerance(EARLIER_SIZE[2]))


test_rejects_bad_inputs = g.rejects_bad_inputs(
    versions=OWN,
    extra_cases={
        "inner-dimensions-differ": lambda xs: (xs[0], xs[1][:-1].copy()),
        "a-transposed-view": lambda xs: (xs[0].T, xs[1]),
        "no-rows": lambda xs: (xs[0][:0].copy(), xs[1]),
    },
)


@pytest.mark.gpu
@pytest.mark.parametrize("n", sol.BENCH_SIZES + ((4096, 256, 4096), (256, 4096, 1021)),
                         ids=[str(n) for n in sol.BENCH_SIZES + ((4096, 256, 4096), (256, 4096, 1021))])
def test_autotuned_at_bench_size(n):
    """The bench shapes (classes LLL and LLS) and a tall and a wide one on the GPU: whatever BEST holds
    after the sweep, its configurations run correctly at full size."""
    g.run_and_compare("autotuned", n, rtol=sol.tolerance(sol.sizes(n)[2]))
