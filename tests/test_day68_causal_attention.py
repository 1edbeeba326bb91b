"""Day 68 grader: causal FlashAttention that skips the tiles beyond the diagonal.

The simulator grades the Numba kernel derived from day 67's (fragments_skip) at the unit's hard
inputs and counts its K/V loads: exactly the tiles the mask leaves. The CUDA C with this day's pieces
is compiled with nvcc (no GPU needed) and run on a GPU only (skip_tiles, optimized).
"""

import functools

import numpy as np
import pytest

from course.grading import Grader

g = Grader(68)
sol = g.solution
OWN = ("fragments_skip",)
CONFIGS = ((64, True), (128, True), (128, False))


@functools.cache
def build(dim: int, causal: bool) -> dict:
    return g.nvcc("causal_source", dim, causal)


# ---- the Numba kernel (simulator) -------------------------------------------------------------------------

@pytest.mark.parametrize("n", sol.TEST_SIZES, ids=[str(n) for n in sol.TEST_SIZES])
def test_fragments_skip_matches_reference(n):
    """seq 1; fewer queries than keys and more (whole query blocks that see no key: no tile, zeros);
    a one-key causal window; GQA and MQA (MQA not causal: every tile); a full tile crossing the
    diagonal (masked though no key is past seq_k); the partial last tile; large logits; dim 128."""
    g.run_and_compare("fragments_skip", n)


def _cast(i, dtype):
    return lambda xs: xs[:i] + (xs[i].astype(dtype),) + xs[i + 1:]


BAD = {
    "q-float32": _cast(0, np.float32),
    "k-v-shapes-differ": lambda xs: (xs[0], xs[1], xs[2][:, :, :-1].copy(), xs[3]),
    "dim-48": lambda xs: (xs[0][..., :48].copy(), xs[1][..., :48].copy(), xs[2][..., :48].copy(), xs[3]),
    "causal-not-bool": lambda xs: xs[:3] + (1,),
    "q-transposed-view": lambda xs: (xs[0].transpose(0, 2, 1, 3),) + xs[1:],
}
BAD_SIZE = (2, 2, 1, 3, 5, 64, True)
test_rejects_bad_inputs = g.rejects_bad_inputs(BAD_SIZE, versions=OWN, extra_cases=BAD)


@pytest.mark.parametrize("version", ["skip_tiles", "optimized"])
@pytest.mark.parametrize("case", ["q-float32", "dim-48", "causal-not-bool"])
def test_tensor_core_versions_reject_bad_inputs(version, case):
    """The host functions validate before they touch CuPy (so this runs without a GPU)."""
    g.require_implemented("key_tiles_causal_source")
    inputs, _seed = g.inputs(BAD_SIZE, "bad")
    with pytest.raises(ValueError):
        getattr(g.target, version)(*BAD[case](tuple(inputs)))


def _load_sectors(n, tiles):
    """32-byte sectors a version loads: each query row once, and per visited tile its valid K and V rows
    (float16 rows of dim halves: dim / 16 sectors each)."""
    b, h, kvh, sq, sk, d = n[:6]
    per_row = d * 2 // 32
    tile_rows = [min(sol.BLOCK_N, sk - 64 * t) for t in range(-(-sk // sol.BLOCK_N))]
    kv = sum(2 * per_row * tile_rows[t] for visited in tiles for t in range(visited))
    return b * h * (sq * per_row + kv)


def test_fragments_skip_loads_only_the_tiles_the_mask_leaves():
    """150 queries, 20 keys, causal: rows 0..129 see no key, so query blocks 0 and 1 visit no tile and
    block 2 one: the K/V loads are a third of every-tile's (day 67's kernel loads the tile in all 3
    blocks). Counted in the simulator, sector by sector."""
    n = (1, 1, 1, 150, 20, 32, True)
    t = g.traffic("fragments_skip", n)
    want = _load_sectors(n, sol.tiles_visited(150, 20, True))
    every = _load_sectors(n, sol.tiles_visited(150, 20, True, skip=False))
    assert t.global_load_sectors == want, (
        f"fragments_skip at {n}: {t.global_load_sectors} sectors loaded, expected {want} (Q once, and K/V only for "
        f"the tiles the causal mask leaves: blocks whose rows see no key load none; every tile would be {every})")


def test_square_causal_visits_about_half_the_tiles():
    """At the bench shape (4096 x 4096, causal) the skip bound leaves 2080 of 4096 tile visits a head
    (query block m visits m + 1 tiles), 64 of them masked."""
    g.require_implemented("fragments_skip")
    tiles = sol.tiles_visited(4096, 4096, True)
    assert tiles == list(range(1, 65)), tiles[:4]
    assert sum(tiles) == 2080 and sum(sol.tiles_visited(4096, 4096, True, skip=False)) == 4096


# ---- the CUDA C with this day's pieces, compiled (no GPU) ------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=[f"dim{d}-{'causal' if c else 'full'}" for d, c in CONFIGS])
def test_causal_source_builds_without_spills(config):
    """Day 67's template with pieces (a) and (b): builds, no stack and no spills, <= 255 registers
    (two 128-thread blocks an SM)."""
    b = build(*config)
    assert b["spill_stores"] == b["spill_loads"] == 0 and b["stack"] == 0, (
        f"causal_source{config}: {b['stack']} bytes stack, {b['spill_stores']}/{b['spill_loads']} spilled\n{b['log']}")
    assert 0 < b["registers"] <= 255, f"causal_source{config}: {b['registers']} registers\n{b['log']}"
    assert b["ptx"].count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= config[0], (  # dim/2 + dim/2
        f"causal_source{config}: the tensor-core loop is gone")


def test_causal_source_holds_this_days_pieces():
    """The optimized source is day 67's with this day's key_tiles and block_info; the grid is 1-D with
    one block per (batch, head, query block)."""
    g.require_implemented("key_tiles_causal_source", "block_map_longest_first_source")
    src = g.target.causal_source(64, True)
    assert g.target.key_tiles_causal_source() in src and g.target.block_map_longest_first_source() in src
    day67 = __import__("solutions.day67_flash_attention_tensor_cores", fromlist=["PIECES"])
    assert day67.KEY_TILES not in src and day67.BLOCK_MAP not in src, "causal_source: day 67's default pieces"
    grid = g.target.longest_first_grid(8, 32, 8, 4096)
    assert tuple(grid) == (8 * 32 * 64, 1, 1), f"longest_first_grid: {grid}"
    assert tuple(g.target.longest_first_grid(1, 3, 1, 65)) == (6, 1, 1)


# ---- on a GPU -------------------------------------------------------------------------------------------

LARGE = ((2, 8, 2, 1000, 1500, 128, True), (1, 4, 4, 1500, 1000, 64, True), (2, 3, 1, 777, 333, 96, True),
         (1, 2, 2, 300, 300, 32, True, "large"), (1, 2, 1, 200, 330, 128, False))


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["skip_tiles", "optimized"])
@pytest.mark.parametrize("n", sol.TEST_SIZES + LARGE, ids=[str(n) for n in sol.TEST_SIZES + LARGE])
def test_tensor_core_versions_match_reference(version, n):
    """The hard inputs, then past many tiles: 1000 x 1500 causal GQA, 1500 x 1000 (the first 500 rows
    see no key: whole blocks skip), 3 heads on one K/V head (a last section of 6 pairs narrower than
    8), large logits, and one non-causal size (nothing skipped)."""
    g.require_implemented("key_tiles_causal_source", "block_map_longest_first_source")
    g.run_and_compare(version, n)


@pytest.mark.gpu
@pytest.mark.parametrize("version", ["mask_every_tile", "skip_tiles", "optimized"])
def test_at_bench_size(version):
    g.require_implemented("key_tiles_causal_source", "block_map_longest_first_source")
    g.run_and_compare(version, (1,) + tuple(sol.BENCH_SIZES[0][1:]))  # one batch: the reference is float64


@pytest.mark.gpu
def test_optimized_keeps_device_arrays_on_the_device():
    from course import checking, launch

    g.require_implemented("key_tiles_causal_source", "block_map_longest_first_source")
    (q, k, v, causal), _ = g.inputs((1, 4, 2, 200, 130, 128, True), "device")
    got = g.target.optimized(*launch.to_device(q, k, v), causal)
    assert not isinstance(got, np.ndarray), "optimized: device inputs must give a device output"
    checking.assert_matches(checking.to_host(got), sol.reference(q, k, v, causal), rtol=sol.RTOL,
                            floor=sol.ERROR_FLOOR, name="optimized(device arrays)")


@pytest.mark.gpu
def test_fragments_skip_at_a_larger_size():
    g.run_and_compare("fragments_skip", (1, 4, 2, 300, 200, 128, True))
