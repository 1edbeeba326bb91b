"""Day 68 exercise: causal attention -- FlashAttention that does only the work the causal mask leaves.

Day 67's problem (attention_common; float16 in and out, fp32 sums, GQA, any seq_q, seq_k >= 1, head
dims 32-128) with the bottom-right causal mask: query row i sees keys j <= i + seq_k - seq_q. Day
67's kernel visits every 64-key tile and masks element-wise each tile that crosses or lies beyond the
diagonal: the tiles past it are loaded, multiplied, exponentiated to zero and thrown away. This day
replaces two of day 67's template pieces (solutions/day67_flash_attention_tensor_cores.py):

  piece (b) KEY_TILES_CAUSAL: a query block with rows row_lo..row_hi ends its key loop at the tile
      holding key row_hi + seq_k - seq_q (its last row's last key); a block whose last row sees no
      key (seq_q > seq_k) visits no tile and stores zeros; only the tiles that cross the diagonal
      (a key past row_lo's window) and the partial last tile are masked element-wise.
  piece (a) BLOCK_MAP_LONGEST_FIRST + longest_first_grid: a 1-D grid in which the blocks with the
      most tiles launch first: sections of SECTION = 8 consecutive (batch, head) pairs, and inside a
      section the query blocks from the last (most tiles) to the first, the 8 heads interleaved.

v1 mask_every_tile  day 67's tensor_cores with causal=True (given): every tile visited, the ones
                    crossing or beyond the diagonal masked.
v2 fragments_skip   day 67's Numba fragments kernel derived with only its tile range and its mask
                    decision changed (course.days.derive_kernel): key_tiles_end and tile_needs_mask,
                    the Python mirror of piece (b). The simulator grades it (the learner's first
                    exercise).
v3 skip_tiles       day 67's tensor-core template with piece (b) only (skip_pieces()).
v4 optimized        pieces (a) + (b) (optimized_pieces(); the constants PIECES, KEY_TILES_CAUSAL,
                    BLOCK_MAP_LONGEST_FIRST, longest_first_grid for days 69, 70 and 72).
library             torch SDPA's flash backend, causal (attention_common.torch_sdpa).
Every version keeps the unit's f(q, k, v, causal): with causal=False nothing is skipped.

Napkin math (the bench shape: batch 8, 32 heads, seq 4096, dim 128, causal; 64-row query blocks,
64-key tiles). Counted FLOPs (attention_common.traffic: only the scored pairs) 4 * 256 * 128 * (4096 *
4097 / 2) = 1.1 TFLOP. Tiles per (batch, head): mask_every_tile visits 64 in every one of its 64 query
blocks, 4096, of which 2016 lie wholly beyond the diagonal (computed, then thrown away) and 64 cross
it; skipping, query block m visits m + 1 tiles: 1 + 2 + ... + 64 = 2080 (50.8 % of 4096), 64 of them
masked (3 %, the diagonal ones; the others take no mask at all). The work done is 2080 * 64^2 = 8.52 M
pairs for 8.39 M counted: 98.5 % of the tile work is scored. Both kernels are compute-bound (8,200
FLOPs a byte; per block and tile the same 2.1 MFLOP on 32 KB of L2), so time follows tiles: skipping
should take ~0.51 of mask_every_tile's time, ~1.97x its counted TFLOP/s, and bring the causal rate to
the non-causal one (day 67's), which is what the >= 50 %-of-SDPA target needs (SDPA flash skips too).
Block order: 256 (batch, head) pairs x 64 query blocks = 16,384 blocks; two 128-thread blocks an SM
(80 KB shared, <= 255 registers) on 132 SMs: 264 resident, 62.06 waves: 62 full ones and a last of 16
blocks. With equal blocks (non-causal, or mask_every_tile) that last wave is the only loss (16 of 264
slots busy for one block's time, ~1.5 %). With skipping, blocks cost 1 to 64 tiles (mean 32.5): in
day 67's order (query block fastest, ascending) the last blocks launched are the last head's longest,
which start last and run alone. A greedy model (264 slots, each block costs tiles + 0.5, the next block
to the first free slot) gives the makespan over the ideal (total work / 264): day 67's order +2.0 %,
per-head reversal (FlashAttention-2's gridDim.x - 1 - blockIdx.x) +1.8 %, longest first over sections
of 8 heads +0.02 %: the tail is blocks of one tile. At batch 1 x 32 heads (2048 blocks, 7.8 waves) the
same model gives +16 %, +14 % and +0.2 %: the fewer the waves, the more the order matters. Why
sections and not longest first over all 256 heads: then the 264 resident blocks belong to 256
different heads, each streaming its own 2 MB of K/V (512 MB, ten times the 50 MB L2) from HBM, ~17 GB
in all: ~4 ms at 4.2 TB/s, more than the ~3 ms of mma. Eight heads at a time keep 16 MB of K/V in
flight (with GQA 4, two K/V heads), served from L2 to the blocks of those heads. Expected on the H200:
skip_tiles ~2x mask_every_tile, optimized a few % above skip_tiles at the bench shape, >= 50 % of
SDPA flash causal's TFLOP/s.
Measured on the H200 (make bench, cuBLAS FP16 GEMM 773 TFLOP/s in the same run) at (8, 32, 32, 4096,
4096, 128, causal): mask_every_tile 7.804 ms; skip_tiles 4.028 ms (1.94x); optimized 3.940 ms (1.98x),
279 TFLOP/s, 36 % of the peak; SDPA flash 3.260 ms: optimized reaches 83 % of SDPA's rate, past the
50 % target. The longest-first order adds 2 % over skipping alone, as the greedy model says.
fragments_skip (FP32 Numba) 721 ms. With 8 K/V heads: optimized 3.939 ms, SDPA 3.255 ms.

What you write (each raises NotImplementedError with its hint until you do):
  key_tiles_end                   ceil(seq_k / 64) tiles; causal: end at the tile of the last row's last key (0 if
                                  it sees none) (7 lines)
  tile_needs_mask                 True for the partial last tile, and (causal) for a tile whose last key is past
                                  row0's window (2 lines)
  key_tiles_causal_source         write key_tiles (end at the last row's diagonal tile, none if it sees no key) and
                                  tile_needs_mask (19 lines)
  block_map_longest_first_source  write block_info: sections of 8 (batch, head) pairs, query blocks from the last,
                                  heads interleaved (17 lines)
Everything else in this file is given. Grade with:  make check DAY=68
"""

import dataclasses
import functools
import math

import numpy as np

from course import ON_GPU, cuda, days, launch
from solutions import attention_common
from solutions import day67_flash_attention_tensor_cores as day67

TITLE = "Causal attention: skip the tiles the mask removes"
MEMORY_SPACE = "shared + register"
VERSIONS = ("mask_every_tile", "fragments_skip", "skip_tiles", "optimized")
SIM_VERSIONS = ("fragments_skip",)  # the others are day 67's CUDA C (mma.sync): the simulator cannot run them
BOUND = "compute"
PEAK_DTYPE = "float16"
RTOL = day67.RTOL
ERROR_FLOOR = day67.ERROR_FLOOR
# The unit's hard inputs, simulator-sized, plus the causal cases skipping must get exactly right.
TEST_SIZES = (
    (1, 1, 1, 1, 1, 64, True),  # one query, one key
    (1, 2, 1, 5, 70, 32, True),  # fewer queries than keys: both tiles visited, the partial last one masked
    (1, 1, 1, 70, 9, 32, True),  # more queries than keys: rows 0..60 see no key (zeros)
    (1, 1, 1, 150, 20, 32, True),  # query blocks 0 and 1 see no key at all: no tile, zeros stored
    (1, 4, 2, 9, 9, 32, True),  # GQA 4 / 2; row 0's causal window holds one key
    (1, 4, 1, 3, 65, 32, False),  # MQA, not causal: every tile, the last of one key
    (1, 1, 1, 40, 64, 32, True),  # a full tile crossing the diagonal: masked though no key >= seq_k
    (1, 1, 1, 72, 72, 32, True),  # block 0 skips tile 1; block 1 (8 rows) visits both, the last partial
    (1, 1, 1, 24, 40, 64, True, "large"),  # scores ~1e4 before scaling
    (1, 1, 1, 8, 24, 128, True),
)
BENCH_SIZES = (
    (8, 32, 32, 4096, 4096, 128, True),
    (8, 32, 8, 4096, 4096, 128, True),  # GQA 4 (day 69 loads each K/V tile once for its 4 heads)
)
HEAD_DIMS = day67.HEAD_DIMS
BLOCK_M = day67.BLOCK_M  # 64 query rows a block
BLOCK_N = day67.BLOCK_N  # 64 keys a tile
SECTION = 8  # (batch, head) pairs ordered longest first together: 8 heads' K/V (16 MB at 4096 x 128) in L2

reference = attention_common.reference
traffic = attention_common.traffic
make_inputs = day67.make_inputs
check_inputs = day67.check_inputs


def tiles_visited(seq_q: int, seq_k: int, causal: bool, skip: bool = True) -> list[int]:
    """Key tiles each 64-row query block visits (the napkin math's count, in Python): every tile
    without skipping; with it, up to the tile of its last row's last key (0 where it sees none)."""
    tiles = -(-seq_k // BLOCK_N)
    out = []
    for row0 in range(0, seq_q, BLOCK_M):
        last = min(row0 + BLOCK_M, seq_q) - 1 + seq_k - seq_q
        out.append(tiles if not (causal and skip) else (0 if last < 0 else min(tiles, last // BLOCK_N + 1)))
    return out


# ---- v2: day 67's Numba kernel with piece (b) (simulator-graded) -------------------------------------


@cuda.jit(device=True)
def key_tiles_end(row0, seq_q, seq_k, causal):
    """The number of 64-key tiles the block of query rows row0 .. min(row0 + 64, seq_q) - 1 visits
    (tiles 0 .. end - 1), as piece (b)'s key_tiles: not causal, ceil(seq_k / 64); causal, up to and
    including the tile that holds the block's LAST row's last key, last = row_hi + seq_k - seq_q
    (bottom-right), i.e. last // 64 + 1, at most ceil(seq_k / 64); 0 when last < 0 (seq_q > seq_k:
    no row of the block sees a key; the kernel then stores zeros)."""
    raise NotImplementedError("Day 68: ceil(seq_k / 64) tiles; causal: end at the tile of the last row's last key (0 "
                              "if it sees none) (7 lines)")


@cuda.jit(device=True)
def tile_needs_mask(n0, row0, seq_q, seq_k, causal):
    """Whether the key tile starting at key n0 needs the element-wise mask for the block starting at
    query row row0 (piece (b)'s tile_needs_mask): it holds a key >= seq_k (the partial last tile),
    or, causal, its last key n0 + 63 lies past the FIRST row's window (row0 + seq_k - seq_q): it
    crosses the diagonal. Tiles wholly below the diagonal take no mask at all."""
    raise NotImplementedError("Day 68: True for the partial last tile, and (causal) for a tile whose last key is past "
                              "row0's window (2 lines)")


# The only text of day 67's fragments kernel this day changes: the tile range and the mask decision.
SKIP_EDITS = (
    ("def flash_fragments_kernel(q, k, v, out, scale_log2, causal):",
     "def flash_skip_kernel(q, k, v, out, scale_log2, causal):"),
    ("    for n0 in range(0, seq_k, BLOCK_N):  # ceil(seq_k / 64) tiles: the last may be partial\n",
     "    for n0 in range(0, BLOCK_N * key_tiles_end(row0, seq_q, seq_k, causal), BLOCK_N):  # piece (b)\n"),
    ("        if live:\n",
     "        masked = tile_needs_mask(n0, row0, seq_q, seq_k, causal)  # uniform: the block's tile\n"
     "        if live:\n"),
    ("                    if key >= seq_k or (causal and key > row0 + r + shift):\n",
     "                    if masked and (key >= seq_k or (causal and key > row0 + r + shift)):\n"),
)


@functools.cache
def skip_kernel(head_dim: int):
    """Day 67's fragments kernel for one head dim with SKIP_EDITS applied; same launch and arguments."""
    return days.derive_kernel(day67.fragments_kernel(head_dim), SKIP_EDITS, D=head_dim, DN=head_dim // 8,
                              SN=BLOCK_N // 8, key_tiles_end=key_tiles_end, tile_needs_mask=tile_needs_mask)


_A4 = "float16[:, :, :, ::1]"
KERNELS = {"fragments_skip": (skip_kernel(64), f"void({_A4}, {_A4}, {_A4}, {_A4}, float32, boolean)")}


def fragments_skip(q, k, v, causal):
    check_inputs(q, k, v, causal)
    b, h, sq, d = q.shape
    d_q, d_k, d_v = launch.to_device(q, k, v)
    out = launch.empty(q.shape, np.float16)
    scale_log2 = np.float32(day67.LOG2E / math.sqrt(d))
    skip_kernel(d)[(launch.blocks(sq, BLOCK_M), h, b), day67.THREADS](d_q, d_k, d_v, out, scale_log2, bool(causal))
    return launch.result(out, q, k, v)


# ---- v3, v4: the pieces of day 67's tensor-core template ---------------------------------------------


def key_tiles_causal_source() -> str:
    """Piece (b) for day 67's template (CUDA C): the same two functions and signatures as day67.KEY_TILES,

        __device__ __forceinline__ KeyTiles key_tiles(const FlashParams& p, const SeqInfo& s, int row_lo, int row_hi)
        __device__ __forceinline__ bool tile_needs_mask(const FlashParams& p, const SeqInfo& s, int row_lo,
                                                        int row_hi, int tile)

    key_tiles: {0, ceil(s.seq_k / BLOCK_N)} when CAUSAL is 0; with CAUSAL, end after the tile holding
    key last = row_hi + s.seq_k - s.seq_q (the block's last row's last key, bottom-right), at most
    ceil(seq_k / BLOCK_N), and {0, 0} when last < 0 (C's / truncates towards zero: test the sign
    first). tile_needs_mask: the tile's last key tile * BLOCK_N + BLOCK_N - 1 is >= s.seq_k, or
    (CAUSAL) past row_lo + s.seq_k - s.seq_q: the tile crosses the diagonal."""
    raise NotImplementedError("Day 68: write key_tiles (end at the last row's diagonal tile, none if it sees no key) "
                              "and tile_needs_mask (19 lines)")


def block_map_longest_first_source() -> str:
    """Piece (a) for day 67's template (CUDA C): __device__ __forceinline__ BlockInfo block_info(const
    FlashParams& p), for the 1-D grid longest_first_grid (batch * heads * nqb blocks, nqb = ceil(p.seq_q
    / BLOCK_ROWS)). Blocks are launched in blockIdx.x order; the ones with the most key tiles go first:
    the (batch, head) pairs bh = batch * heads + head in sections of LF_SECTION (8, the last section
    may be narrower: w = min(8, batch * heads - first pair)); inside a section, index r = blockIdx.x
    - section * 8 * nqb gives query block nqb - 1 - r / w (the last, longest, first) of pair
    section * 8 + r % w. row0 = query block * BLOCK_ROWS."""
    raise NotImplementedError("Day 68: write block_info: sections of 8 (batch, head) pairs, query blocks from the "
                              "last, heads interleaved (17 lines)")


def longest_first_grid(batch: int, heads: int, kv_heads: int, seq_q: int, block_rows: int = BLOCK_M) -> tuple:
    """Piece (a), host side: the 1-D grid BLOCK_MAP_LONGEST_FIRST expects: batch * heads * ceil(seq_q / block_rows)."""
    return (batch * heads * -(-seq_q // block_rows), 1, 1)


@functools.cache
def skip_pieces() -> day67.FlashPieces:
    """Day 67's pieces with (b) replaced: skip_tiles."""
    return dataclasses.replace(day67.PIECES, key_tiles=key_tiles_causal_source())


@functools.cache
def optimized_pieces() -> day67.FlashPieces:
    """Day 67's pieces with (a) and (b) replaced: optimized."""
    return dataclasses.replace(day67.PIECES, key_tiles=key_tiles_causal_source(),
                               block_map=block_map_longest_first_source(), grid=longest_first_grid)


def causal_source(dim: int = 128, causal: bool = True) -> str:
    """The full CUDA C of the optimized kernel (day 67's flash_source with this day's pieces)."""
    return day67.flash_source(dim, causal, optimized_pieces())


def _flash(q, k, v, causal, pieces, version):
    """Day 67's tensor-core kernel with the given pieces (its host code: strides checked for cp.async)."""
    check_inputs(q, k, v, causal)
    if not ON_GPU:
        raise RuntimeError(f"{version} needs a CUDA GPU: the simulator cannot run mma.sync "
                           "(tests/test_day68_causal_attention.py compiles the source with nvcc)")
    import cupy

    b, h, sq, _ = q.shape
    kvh, sk = k.shape[1], k.shape[2]
    d_q, d_k, d_v = (cupy.asarray(a) for a in (q, k, v))
    out = launch.empty(q.shape, np.float16)
    d_o = cupy.asarray(out)
    strides = tuple(day67._strides(name, a) for name, a in (("q", d_q), ("k", d_k), ("v", d_v), ("out", d_o)))
    day67.launch_flash(d_q, d_k, d_v, d_o, causal, seq_q=sq, seq_k=sk, batch=b, heads=h, kv_heads=kvh,
                       strides=strides, pieces=pieces)
    return launch.result(out, q, k, v)


def mask_every_tile(q, k, v, causal):
    """Day 67's tensor_cores: every key tile visited, the ones crossing or beyond the diagonal masked."""
    return _flash(q, k, v, causal, day67.PIECES, "mask_every_tile")


def skip_tiles(q, k, v, causal):
    return _flash(q, k, v, causal, skip_pieces(), "skip_tiles")


def optimized(q, k, v, causal):
    return _flash(q, k, v, causal, optimized_pieces(), "optimized")


naive = mask_every_tile


def bench_skip(version, n):
    """The FP32 Numba row is timed at the first bench shape only (~0.1 s a call: one row is enough)."""
    if version == "fragments_skip" and tuple(n) != BENCH_SIZES[0]:
        return "the FP32 Numba kernel is timed at the first bench shape only (its GQA row adds nothing)"
    return None


def library(q, k, v, causal):
    """torch SDPA's flash backend on the float16 inputs (bottom-right causal)."""
    return attention_common.torch_sdpa(q, k, v, causal, "flash")
