"""Day 89: tuning PagedAttention -- block size, partition size and threads per block, against the roofline.

One kernel with three knobs, day 78's v1 grown a context split (vLLM's v2):
  block size   the cache's page (8, 16, 32 tokens): how many rows a warp streams per table lookup,
               and how many of a trip's row slots are live (at head_dim 128 in fp16 a warp covers
               16 rows a trip: a page of 8 leaves half its loads masked).
  partition    tokens per CUDA block: a (sequence, head) pair's context is cut into partitions
               that run as separate blocks, each writing a partial (max, exp-sum, output), merged
               by a second small kernel. More blocks when the batch is small and contexts long.
  warps        threads per block (32 x 1, 2, 4, 8): more warps per block stream more pages at once
               but stage more partial softmaxes in shared memory and merge them behind a barrier.

v1 naive      the untuned default: one block per (sequence, head) over its whole context, 4 warps
              (day 78's launch): fine for 64 sequences x 32 heads, starved for 8 long ones.
v2 optimized  the tuned launch: partitions sized so the grid has >= 8 blocks per SM, the same warps;
              sweep() measures every combination on the GPU and roofline_chart() plots them.

Napkin math (bench: 8 sequences x 32 heads over 8 KV heads x 128, context 32768, fp16): K and V are
8 x 32768 x 8 x 128 x 2 B x 2 = 1.07 GB, read once at 4 FLOP/B, well left of the H200's ridge
(~51 TFLOP/s / 4.1 TB/s = 12 FLOP/B): the roof is the copy rate, ~0.26 ms. v1 gives that launch
256 blocks of 128 threads, under 2 per SM and 16 KB of loads in flight per SM: the HBM pipe stays
mostly empty. Partitions of 8192 tokens make 1024 blocks, ~8 per SM.
"""

from __future__ import annotations

import argparse
import functools
import json
import math

import numpy as np

from course import DEVICE, ON_GPU, cuda, launch
from numba import float32, uint32, uint64
from solutions.day78_paged_attention_v1 import (  # noqa: F401  (the day's contract, shared with day 78)
    LOG2E,
    NO_LOGIT,
    TOKENS,
    WARP,
    Config,
    cache_words,
    check_inputs,
    lane_layout,
    library,
    make_inputs,
    reference,
    traffic,
)

TITLE = "Tuning PagedAttention"
MEMORY_SPACE = "global + shared"
VERSIONS = ("naive", "optimized")
BOUND = "memory"

DEFAULT_WARPS = 2 if DEVICE.kind == "sim" else 4  # the simulator pays per thread
BLOCKS_PER_SM = 8  # the tuned grid's target: enough resident blocks to keep every SM's loads in flight
MIN_PARTITION = 256 if ON_GPU else 8  # below ~256 tokens the merge costs more than the split gains
REDUCE_THREADS = 64

TEST_SIZES = (
    Config(2, 2, 1, 32, 8, 37, "float32"),  # contexts 37, 1: the tuned launch splits 37 into 2 partitions
    Config(3, 2, 2, 64, 16, 50, "float16"),  # block 16, head_dim 64; contexts 50, 1, 16
    Config(1, 4, 2, 32, 4, 29, "float16"),  # one sequence, pages of 4: 4 partitions of 8 tokens
)
BENCH_SIZES = (Config(8, 32, 8, 128, 16, 32768, "float16", ragged=False),)
SWEEP_BLOCK_SIZES = (8, 16, 32)
SWEEP_PARTITIONS = (0, 512, 1024, 2048, 4096, 8192)  # 0: no split (v1)
SWEEP_WARPS = (2, 4, 8)


def num_partitions(max_context: int, partition: int) -> int:
    return 1 if partition <= 0 else max(1, math.ceil(max_context / partition))


def tuned_partition(num_seqs: int, num_heads: int, max_context: int, block_size: int, sm_count: int) -> int:
    """Tokens per partition (0: no split): the smallest power of two >= MIN_PARTITION and a multiple of
    the page that gives the grid BLOCKS_PER_SM blocks per SM."""
    want = math.ceil(sm_count * BLOCKS_PER_SM / (num_seqs * num_heads))
    if want <= 1:
        return 0
    size = max(MIN_PARTITION, block_size)
    while size * want < max_context:
        size *= 2
    return 0 if size >= max_context else size


# --- the kernels ---------------------------------------------------------------------------------------


@functools.cache
def attention_kernel(head_dim: int, cache_dtype: str, num_warps: int):
    """The partitioned kernel for one (head_dim, dtype, warps): compile-time shapes, as on day 78."""
    elem = np.dtype(cache_dtype).type
    PER_WORD, ROW_WORDS, G, WL, VEC = lane_layout(head_dim, np.dtype(cache_dtype).itemsize)
    NG = WARP // G  # tokens a warp works on side by side
    KW = TOKENS * WL
    HEAD_DIM = head_dim
    NUM_WARPS = num_warps

    @cuda.jit(fastmath=True)
    def paged_attention_partition_kernel(out, tmp_out, max_logits, exp_sums, query, key_words, value_words,
                                         block_tables, context_lens, scale, block_size, num_kv_heads,
                                         partition):
        # out (seqs, heads, dim); tmp_out (seqs, heads, parts, dim); max_logits, exp_sums (seqs, heads, parts)
        # grid (heads, seqs, parts); partition = tokens per part, a multiple of block_size (0: no split)
        head = cuda.blockIdx.x
        seq = cuda.blockIdx.y
        part = cuda.blockIdx.z
        tid = cuda.threadIdx.x
        warp = tid // WARP
        lane = tid % WARP
        grp = lane // G
        gl = lane % G
        ctx = context_lens[seq]
        pages_per_part = (ctx + block_size - 1) // block_size
        if partition > 0:
            pages_per_part = partition // block_size
        first = part * pages_per_part
        if first * block_size >= ctx:
            return  # a partition past this sequence's context: the reduce never reads it
        last = min(first + pages_per_part, (ctx + block_size - 1) // block_size)
        kv_head = head // (query.shape[1] // num_kv_heads)
        row_words = uint32(num_kv_heads * ROW_WORDS)
        page_words = uint64(block_size) * uint64(row_words)
        lane_words = uint64(kv_head * ROW_WORDS + gl * WL)

        q = cuda.local.array(VEC, float32)
        acc = cuda.local.array(VEC, float32)
        kbuf = cuda.local.array(KW, uint32)
        vbuf = cuda.local.array(KW, uint32)
        k = kbuf.view(elem)
        v = vbuf.view(elem)
        s = cuda.local.array(TOKENS, float32)
        for e in range(VEC):
            q[e] = query[seq, head, gl * VEC + e] * scale  # scale carries log2(e): exp2 below
            acc[e] = 0.0
        m = float32(NO_LOGIT)
        l = float32(0.0)

        for page in range(first + warp, last, NUM_WARPS):
            base = uint64(block_tables[seq, page]) * page_words + lane_words
            n_tok = min(block_size, ctx - page * block_size)
            for t0 in range(0, n_tok, NG * TOKENS):
                # All of a trip's loads before any arithmetic; dead rows re-read the last live row.
                for u in range(TOKENS):
                    row = min(t0 + u * NG + grp, n_tok - 1)
                    off = base + uint64(uint32(row) * row_words)
                    for w in range(WL):
                        kbuf[u * WL + w] = key_words[off + uint64(w)]
                        vbuf[u * WL + w] = value_words[off + uint64(w)]
                for u in range(TOKENS):
                    dot = float32(0.0)
                    for e in range(VEC):
                        dot += q[e] * float32(k[u * VEC + e])
                    s[u] = dot
                o = G // 2
                while o > 0:
                    for u in range(TOKENS):
                        s[u] += cuda.shfl_xor_sync(0xFFFFFFFF, s[u], o)
                    o //= 2
                m_new = m
                for u in range(TOKENS):
                    if t0 + u * NG + grp >= n_tok:
                        s[u] = -math.inf
                    m_new = max(m_new, s[u])
                correction = math.exp2(m - m_new)
                l *= correction
                for e in range(VEC):
                    acc[e] *= correction
                for u in range(TOKENS):
                    p = math.exp2(s[u] - m_new)
                    l += p
                    for e in range(VEC):
                        acc[e] += p * float32(v[u * VEC + e])
                m = m_new

        o = G
        while o < WARP:  # fold the warp's token groups: lanes gl, gl + G, ... hold the same columns
            m_o = cuda.shfl_xor_sync(0xFFFFFFFF, m, o)
            l_o = cuda.shfl_xor_sync(0xFFFFFFFF, l, o)
            m_new = max(m, m_o)
            a = math.exp2(m - m_new)
            b = math.exp2(m_o - m_new)
            l = l * a + l_o * b
            for e in range(VEC):
                acc[e] = acc[e] * a + cuda.shfl_xor_sync(0xFFFFFFFF, acc[e], o) * b
            m = m_new
            o *= 2

        # The warps meet in (NUM_WARPS, head_dim) floats: the shared cost of more threads per block.
        sm_acc = cuda.shared.array((NUM_WARPS, HEAD_DIM), float32)
        sm_m = cuda.shared.array(NUM_WARPS, float32)
        sm_l = cuda.shared.array(NUM_WARPS, float32)
        if grp == 0:
            for e in range(VEC):
                sm_acc[warp, gl * VEC + e] = acc[e]
        if lane == 0:
            sm_m[warp] = m
            sm_l[warp] = l
        cuda.syncthreads()
        m_all = sm_m[0]
        for w in range(1, NUM_WARPS):
            m_all = max(m_all, sm_m[w])
        total = float32(0.0)
        for w in range(NUM_WARPS):
            total += sm_l[w] * math.exp2(sm_m[w] - m_all)
        for d in range(tid, HEAD_DIM, NUM_WARPS * WARP):
            o_d = float32(0.0)
            for w in range(NUM_WARPS):
                o_d += sm_acc[w, d] * math.exp2(sm_m[w] - m_all)
            if partition > 0:
                tmp_out[seq, head, part, d] = o_d / total  # normalised: the reduce reweights by exp-sum
            else:
                out[seq, head, d] = o_d / total
        if partition > 0 and tid == 0:
            max_logits[seq, head, part] = m_all
            exp_sums[seq, head, part] = total

    return paged_attention_partition_kernel


@cuda.jit(fastmath=True)
def reduce_partitions_kernel(out, tmp_out, max_logits, exp_sums, context_lens, partition):
    # grid (heads, seqs); threads over head_dim. Every thread re-reads the few (max, sum) pairs: the
    # addresses are the same across the warp, so each is one broadcast load, no shared memory needed.
    head = cuda.blockIdx.x
    seq = cuda.blockIdx.y
    parts = (context_lens[seq] + partition - 1) // partition
    m_all = max_logits[seq, head, 0]
    for p in range(1, parts):
        m_all = max(m_all, max_logits[seq, head, p])
    total = float32(0.0)
    for p in range(parts):
        total += exp_sums[seq, head, p] * math.exp2(max_logits[seq, head, p] - m_all)
    for d in range(cuda.threadIdx.x, out.shape[2], cuda.blockDim.x):
        o = float32(0.0)
        for p in range(parts):
            o += tmp_out[seq, head, p, d] * exp_sums[seq, head, p] * math.exp2(max_logits[seq, head, p] - m_all)
        out[seq, head, d] = o / total


_SIG = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
        "float32[:, :, ::1], uint32[::1], uint32[::1], int32[:, ::1], int32[::1], float32, int32, int32, int32)")
_REDUCE_SIG = ("void(float32[:, :, ::1], float32[:, :, :, ::1], float32[:, :, ::1], float32[:, :, ::1], "
               "int32[::1], int32)")
KERNELS = {  # the benchmark's head_dim and dtype
    "naive": (attention_kernel(128, "float16", 4), _SIG),
    "optimized": (attention_kernel(128, "float16", 4), _SIG),
    "optimized.reduce": (reduce_partitions_kernel, _REDUCE_SIG),
    "optimized.warps2": (attention_kernel(128, "float16", 2), _SIG),
    "optimized.warps8": (attention_kernel(128, "float16", 8), _SIG),
}


# --- host functions ----------------------------------------------------------------------------------


def paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale, *, partition: int = 0,
                    num_warps: int = DEFAULT_WARPS):
    """Day 78's contract with the knobs exposed: ``partition`` tokens per block (0: no split, a
    multiple of the block size otherwise), ``num_warps`` warps per block."""
    check_inputs(query, key_cache, value_cache, block_tables, context_lens, scale)
    block_size = key_cache.shape[1]
    if partition < 0 or partition % block_size:
        raise ValueError(f"partition: expected 0 or a multiple of the block size {block_size}, got {partition}")
    if num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"num_warps: expected 1, 2, 4, 8 or 16, got {num_warps}")
    q, kc, vc, tables, lens = launch.to_device(query, key_cache, value_cache, block_tables, context_lens)
    num_seqs, num_heads, head_dim = query.shape
    # Size the split by the table's capacity: the lengths may live on the device, unread.
    parts = num_partitions(block_tables.shape[1] * block_size, partition)
    if parts == 1:
        partition = 0
    out = launch.empty(query.shape, np.float32)  # (num_seqs, num_heads, head_dim)
    tmp = launch.empty((num_seqs, num_heads, parts if partition else 1, head_dim), np.float32)
    stats_shape = (num_seqs, num_heads, parts if partition else 1)
    max_logits, exp_sums = launch.empty(stats_shape, np.float32), launch.empty(stats_shape, np.float32)
    kernel = attention_kernel(head_dim, np.dtype(key_cache.dtype).name, num_warps)
    kernel[(num_heads, num_seqs, parts), num_warps * WARP](
        out, tmp, max_logits, exp_sums, q, cache_words(kc), cache_words(vc), tables, lens,
        float32(scale * LOG2E), block_size, key_cache.shape[2], partition)
    if partition:
        reduce_partitions_kernel[(num_heads, num_seqs), min(REDUCE_THREADS, head_dim)](
            out, tmp, max_logits, exp_sums, lens, partition)
    return launch.result(out, query, key_cache)


def naive(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The untuned default: one block per (sequence, head), no split."""
    return paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale)


def optimized(query, key_cache, value_cache, block_tables, context_lens, scale):
    """The tuned launch: split long contexts until the grid fills the GPU."""
    num_seqs, num_heads = query.shape[:2]
    block_size = key_cache.shape[1]
    partition = tuned_partition(num_seqs, num_heads, block_tables.shape[1] * block_size, block_size,
                                launch.sm_count())
    return paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale, partition=partition)


# --- the sweep and the roofline (GPU) -----------------------------------------------------------------


def sweep(cfg: Config = BENCH_SIZES[0], block_sizes=SWEEP_BLOCK_SIZES, partitions=SWEEP_PARTITIONS,
          warps=SWEEP_WARPS, repeats: int = 20, progress=print) -> dict:
    """Time every (block size, partition, warps) at ``cfg`` on the GPU; each row is re-checked.

    Returns {"device", "copy_gbps", "gemm_tflops", "rows": [...], "library": {...}}; GB/s counts the
    minimum traffic (every live K/V row once), as the roofline does."""
    if not ON_GPU:
        raise RuntimeError("the sweep times kernels: it needs a CUDA GPU")
    from course import bench, checking

    timer = bench.Timer()
    copy = bench.copy_peak_gbps(timer)
    gemm = bench.gemm_peak_tflops(timer)
    rows, lib = [], {}
    for bs in block_sizes:
        inputs = make_inputs(Config(*cfg)._replace(block_size=bs), seed=89)
        expected = reference(*inputs) if cfg.num_seqs * cfg.context <= 1 << 16 else None
        nbytes, flops = traffic(*inputs)
        dev = tuple(launch.to_device(x)[0] if isinstance(x, np.ndarray) else x for x in inputs)
        if expected is None:  # a reference in float64 NumPy is too slow here: check against the v1 launch
            expected = checking.to_host(paged_attention(*dev, num_warps=4))
        for part in partitions:
            for nw in warps:
                fn = functools.partial(paged_attention, partition=part, num_warps=nw)
                with launch.no_poison():
                    ms, spread = timer.time(fn, *dev, repeats=repeats)
                ok = checking.compare(fn(*dev), expected, rtol=5e-4).ok
                rows.append(dict(block_size=bs, partition=part, warps=nw, ms=ms, spread_ms=spread,
                                 gbps=nbytes / ms / 1e6, tflops=flops / ms / 1e9,
                                 pct_copy=100 * nbytes / ms / 1e6 / copy, intensity=flops / nbytes, ok=ok))
                r = rows[-1]
                progress(f"block {bs:2d}  partition {part:5d}  warps {nw}  {ms * 1e3:8.1f} us  "
                         f"{r['gbps']:7.0f} GB/s  {r['pct_copy']:5.1f} % of copy  {'ok' if ok else 'WRONG'}")
        if bs == 16:
            try:
                ms, _ = timer.time(library, *dev, repeats=repeats)
                lib = dict(block_size=bs, ms=ms, gbps=nbytes / ms / 1e6, pct_copy=100 * nbytes / ms / 1e6 / copy)
                progress(f"torch SDPA on a dense cache: {ms * 1e3:.1f} us, {lib['pct_copy']:.1f} % of copy")
            except ImportError:
                progress("torch is not installed: no SDPA row")
    return dict(device=str(DEVICE.describe()), config=list(cfg), copy_gbps=copy, gemm_tflops=gemm, rows=rows,
                library=lib)


def roofline_chart(result: dict, path=None):
    """Achieved TFLOP/s against arithmetic intensity, under the copy-rate and FP32 roofs."""
    import matplotlib.pyplot as plt

    copy, gemm = result["copy_gbps"], result["gemm_tflops"]
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.logspace(-1, 3, 200)
    ax.loglog(x, np.minimum(x * copy / 1e3, gemm), "k-", lw=1, label=f"roof: {copy:,.0f} GB/s, {gemm:.0f} TFLOP/s")
    colours = {8: "#d95f02", 16: "#3b7dd8", 32: "#1b9e77"}
    for bs in sorted({r["block_size"] for r in result["rows"]}):
        pts = [r for r in result["rows"] if r["block_size"] == bs]
        ax.scatter([r["intensity"] for r in pts], [r["tflops"] for r in pts], s=[8 * r["warps"] for r in pts],
                   color=colours.get(bs), alpha=0.7, label=f"block {bs} (size: warps)")
    best = max(result["rows"], key=lambda r: r["tflops"])
    ax.annotate(f"best: block {best['block_size']}, partition {best['partition']}, {best['warps']} warps, "
                f"{best['pct_copy']:.0f} % of copy", (best["intensity"], best["tflops"]), fontsize=7,
                xytext=(10, -25), textcoords="offset points", arrowprops=dict(arrowstyle="->", lw=0.5))
    ax.set_xlabel("arithmetic intensity (FLOP per byte of minimum traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"PagedAttention decode sweep, {result['device'][:60]}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def table(result: dict) -> str:
    """Block size x partition: the best warps' share of the copy rate, one line per block size."""
    parts = sorted({r["partition"] for r in result["rows"]})
    lines = ["block \\ partition " + "".join(f"{p or 'none':>9}" for p in parts)]
    for bs in sorted({r["block_size"] for r in result["rows"]}):
        cells = []
        for p in parts:
            pts = [r for r in result["rows"] if r["block_size"] == bs and r["partition"] == p]
            best = max(pts, key=lambda r: r["pct_copy"])
            cells.append(f"{best['pct_copy']:6.1f}%w{best['warps']}")
        lines.append(f"{bs:>18} " + "".join(f"{c:>9}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m solutions.day89_tuning_paged_attention",
                                description="Sweep PagedAttention's block size, partition size and warps on a GPU.")
    p.add_argument("--plot", metavar="PNG", help="write the roofline plot here")
    p.add_argument("--json", metavar="FILE", help="write every row here")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    if not ON_GPU:
        print("the sweep needs a CUDA GPU. It would time, at", BENCH_SIZES[0])
        print(f"  block sizes {SWEEP_BLOCK_SIZES} x partitions {SWEEP_PARTITIONS} x warps {SWEEP_WARPS}")
        from course import compiler

        for label, r in compiler.reports(__import__(__name__)).items():
            print(f"  {label:18s} registers {r.registers:3d}  shared {r.shared_bytes:5d} B  stack {r.stack_bytes} B")
        return 0
    result = sweep(repeats=args.repeats)
    print(table(result))
    best = max(result["rows"], key=lambda r: r["pct_copy"])
    print(f"best: block {best['block_size']}, partition {best['partition']}, {best['warps']} warps: "
          f"{best['ms'] * 1e3:.1f} us, {best['pct_copy']:.1f} % of the copy rate")
    if result["library"]:
        print(f"torch SDPA on a dense cache: {result['library']['ms'] * 1e3:.1f} us; best paged / SDPA time = "
              f"{best['ms'] / result['library']['ms']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        roofline_chart(result, args.plot)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
