"""What bounds paged decode attention against a dense cache: one table, measured on the GPU.

    python tools/paged_bound.py                                  # both shapes: a few minutes, mostly host
    python tools/paged_bound.py --shape 64x4096 --json results/h200/paged_bound.json

At each shape (fp16, head 128, pages of 16, 32 query heads over 8 KV heads) it times, with
course.bench.Timer as `make bench` does (L2 flushed, CUDA events, medians), and re-checks every row:

  a. day 89's optimized launch as benchmarked: make_inputs' random page order, the tuned partition;
  b. the same with each sequence's pages in order (the cache renumbered, the answer unchanged):
     scattered pages against the indirection itself;
  c. read_kernel (solutions/day89): the attention's grid, block-table walk and loads with the
     arithmetic taken out, summing each word's halves (checked against NumPy): on random pages, on
     pages in order, over a dense (seq, KV head, token) cache with no table; capped at the attention's
     blocks per SM (dynamic shared memory reserved and never used) and at its own; and one block
     per query head (each page asked for four times, L2 serving the repeats);
  d. day 89's sweep() over partitions and warps at this shape (pages of 16): the best point, and the
     unsplit launch at 4 warps (day 79's);
  e. torch SDPA on a dense cache (day 78's `library`), when torch is installed;
  f. day 89's optimized launch with 16-byte loads (LOAD_WORDS = 2, day 78's switch).
  g. day 89's optimized launch rescaling only on a trip where the warp saw a new max (LAZY_RESCALE):
     the same output bit for bit, ~60 fewer instructions of ~480 a trip at four heads;
  h. day 89's optimized launch with each row spread over twice the lanes (LANE_ELEMS = 8) and
     16-byte loads: 168 registers instead of 254, 3 blocks of 4 warps an SM instead of 2 (the
     occupancy rows c measured as the bound).

and prints one table: µs, % of the device copy rate measured in the same run (minimum bytes: every
live K/V row once, as `make bench` counts them), the ratio to SDPA's time, and the check. Exits 2
without a GPU, 1 if any row is wrong. The loads are the attention's: 8-byte words, a thread group of
8 lanes per 256-byte row at head 128 (day 78's head_layout), 2 rows a group per trip at four heads.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import course  # noqa: E402  (first: GPU or simulator before numba loads)

SHAPES = {  # (num_seqs, num_heads, num_kv_heads, head_dim, block_size, context, dtype, ragged)
    "64x4096": (64, 32, 8, 128, 16, 4096, "float16", False),  # day 79's bench
    "4x32768": (4, 32, 8, 128, 16, 32768, "float16", False),  # day 81's
}
SEED = 1234  # course.bench.run's: the same inputs `make bench` times


def in_order(key_cache, value_cache, block_tables, context_lens):
    """The same cache with every sequence's pages renumbered to follow each other (sequence 0's first,
    then sequence 1's, ...; the spare pages last): the tokens, and so the answer, are unchanged."""
    import numpy as np

    bs = key_cache.shape[1]
    pages = [-(-int(c) // bs) for c in context_lens]
    used = np.concatenate([block_tables[s, :n] for s, n in enumerate(pages)])
    spare = np.setdiff1d(np.arange(key_cache.shape[0]), used)
    order = np.concatenate([used, spare])  # new page i holds old page order[i]
    tables = block_tables.copy()
    start = 0
    for s, n in enumerate(pages):
        tables[s, :n] = np.arange(start, start + n, dtype=np.int32)
        start += n
    return key_cache[order], value_cache[order], tables


def dense_cache(cache, block_tables, context_lens):
    """(num_seqs, num_kv_heads, capacity, head_dim): each (sequence, KV head)'s tokens in one run, as a
    dense-cache library reads them (rows past a context hold whatever the page had: never read)."""
    import numpy as np

    _, bs, kv_heads, dim = cache.shape
    ids = np.clip(block_tables, 0, cache.shape[0] - 1)  # garbage entries past a context: any page
    rows = cache[ids].reshape(len(context_lens), -1, kv_heads, dim)
    return np.ascontiguousarray(rows.transpose(0, 2, 1, 3))


def _cufunc(dispatcher):
    """The driver function of a dispatcher already launched (the tool launches each once first)."""
    kernel = list(dispatcher.overloads.values())[-1]
    return kernel._codelibrary.get_cufunc()


def blocks_per_sm(dispatcher, threads: int, shared: int = 0) -> int:
    """The occupancy calculator's resident blocks per SM for this launch; if the driver will not say,
    the register file's answer (64 K registers, allocated per warp in units of 256)."""
    from course import cuda

    try:
        return cuda.current_context().get_active_blocks_per_multiprocessor(_cufunc(dispatcher), threads, shared)
    except Exception:
        regs = list(dispatcher.overloads.values())[-1].regs_per_thread
        per_warp = -(-regs * 32 // 256) * 256
        return 65536 // (per_warp * (threads // 32))


def cap_blocks(dispatcher, threads: int, blocks: int) -> int:
    """Dynamic shared bytes that leave room for only ``blocks`` blocks per SM (reserved, never used),
    with the kernel allowed to ask for them (past 48 KB a kernel must opt in). The reservation also
    moves the SM's split of its 256 KB from L1 towards shared memory (~90 KB of L1 left at 2 blocks of
    ~76 KB): a streaming read uses L1 only for its table rows and the re-read of a dead row."""
    from numba.cuda.cudadrv.driver import binding, driver

    from course import cuda

    dev = cuda.get_current_device()
    per_sm = dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR  # 228 KB on the H200
    fn = _cufunc(dispatcher)
    static = fn.attrs.shared + 1024  # and the 1 KB the system reserves per block
    nbytes = max(0, per_sm // (blocks + 1) - static + 128)  # one more block no longer fits
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)
    got = blocks_per_sm(dispatcher, threads, nbytes)
    if got != blocks:
        raise RuntimeError(f"{nbytes} B of dynamic shared memory gave {got} blocks per SM, not {blocks}")
    return nbytes


def measure(name: str, cfg, timer, copy: float, repeats: int, progress) -> list[dict]:
    import numpy as np

    from course import checking, launch
    from solutions import day89_tuning_paged_attention as sol
    from solutions.paged_attention_common import launched_kernel

    cfg = sol.Config(*cfg)
    progress(f"{name}: inputs, reference")
    inputs = sol.make_inputs(cfg, seed=SEED)
    query, kc, vc, tables, lens, scale = inputs
    expected = sol.reference(*inputs)
    nbytes, _ = sol.traffic(*inputs)
    dev = launch.to_device(query, kc, vc, tables, lens)
    kc_o, vc_o, tables_o = in_order(kc, vc, tables, lens)
    dev_o = launch.to_device(query, kc_o, vc_o, tables_o, lens)
    kd, vd = dense_cache(kc, tables, lens), dense_cache(vc, tables, lens)
    dev_d = launch.to_device(kd, vd)
    partition = sol.tuned_partition(cfg.num_seqs, cfg.num_heads, cfg.num_kv_heads, tables.shape[1] * cfg.block_size,
                                    cfg.block_size, launch.sm_count())
    warps = sol.DEFAULT_WARPS
    heads = sol.heads_per_block(cfg.num_heads, cfg.num_kv_heads, sol.MAX_GROUP)
    threads = warps * 32
    rows = []

    def row(label, ms, checked, note=""):
        rows.append(dict(shape=name, row=label, us=ms * 1e3, pct_copy=100 * nbytes / (ms * 1e-3) / 1e9 / copy,
                         checked=checked, note=note))
        progress(f"  {label}: {ms * 1e3:.1f} us ({checked})")

    def attention(label, args):
        with launch.no_poison():
            ms, _ = timer.time(sol.optimized, *args, *inputs[5:], repeats=repeats)
        rep = checking.compare(sol.optimized(*args, *inputs[5:]), expected, rtol=sol.RTOL, floor=sol.ERROR_FLOOR)
        row(label, ms, "ok" if rep.ok else rep.text.splitlines()[0])

    where = f"partition {partition or 'none'}, {warps} warps"
    attention(f"a. day 89 optimized, random pages ({where})", dev)
    attention("b. the same, each sequence's pages in order", dev_o)

    att, _ = launched_kernel(cfg.head_dim, cfg.cache_dtype, cfg.block_size, heads, warps)  # the one timed above
    att_blocks = blocks_per_sm(att, threads)
    want = {}  # the read-only sums NumPy expects, per (cache, heads)

    def read(label, caches, tables_dev, tables_host, host_caches, *, dense=False, cap=True, heads_=0):
        fn = functools.partial(sol.read_pages, *caches, tables_dev, dev[4], cfg.num_heads, partition=partition,
                               num_warps=warps, dense=dense, heads=heads_)
        fn()  # compiles: the occupancy questions below need the driver's function
        kernel = sol.read_kernel(cfg.head_dim, cfg.cache_dtype, cfg.block_size, heads_ or heads, warps, dense)
        try:
            shared = cap_blocks(kernel, threads, att_blocks) if cap else 0
        except Exception as exc:  # an older numba or driver: say so, time nothing
            rows.append(dict(shape=name, row=label, us=None, pct_copy=None, checked="not run",
                             note=f"{type(exc).__name__}: {exc}"))
            return
        fn = functools.partial(fn, shared_bytes=shared)
        with launch.no_poison():
            ms, _ = timer.time(fn, repeats=repeats)
        key = (id(host_caches[0]), dense, heads_)
        if key not in want:
            want[key] = sol.read_reference(*host_caches, tables_host, lens, cfg.num_heads, partition=partition,
                                           dense=dense, heads=heads_)
        ok = np.array_equal(checking.to_host(fn()), want[key])
        row(label, ms, "ok" if ok else "WRONG", f"{blocks_per_sm(kernel, threads, shared)} blocks per SM")

    paged, ordered, dense = (dev[1:3], dev[3], tables, (kc, vc)), (dev_o[1:3], dev_o[3], tables_o, (kc_o, vc_o)), \
        (dev_d, dev[3], tables, (kd, vd))
    read(f"c. read only, random pages, the attention's {att_blocks} blocks/SM", *paged)
    read("c. read only, random pages, own occupancy", *paged, cap=False)
    read(f"c. read only, pages in order, {att_blocks} blocks/SM", *ordered)
    read(f"c. read only, dense cache (no table), {att_blocks} blocks/SM", *dense, dense=True)
    read("c. read only, dense cache (no table), own occupancy", *dense, dense=True, cap=False)
    read("c. read only, one block per query head (4x the requests, via L2)", *paged, cap=False, heads_=1)

    progress(f"{name}: day 89's sweep (pages of 16)")
    parts = tuple(p for p in sol.SWEEP_PARTITIONS if p < cfg.context)
    result = sol.sweep(cfg, block_sizes=(16,), partitions=parts, warps=sol.SWEEP_WARPS, repeats=repeats,
                       progress=lambda msg: None)
    good = [r for r in result["rows"] if r["ok"]]
    scale_copy = result["copy_gbps"] / copy  # the sweep measured its own copy rate: rescale to this run's
    for label, r in (("d. sweep best", min(good, key=lambda r: r["ms"]) if good else None),
                     ("d. sweep: no split, 4 warps (day 79's launch)",
                      next((r for r in result["rows"] if r["partition"] == 0 and r["warps"] == 4), None))):
        if r is None:
            continue
        rows.append(dict(shape=name, row=f"{label}: partition {r['partition'] or 'none'}, {r['warps']} warps",
                         us=r["ms"] * 1e3, pct_copy=r["pct_copy"] * scale_copy, checked="ok" if r["ok"] else "WRONG",
                         note=f"{len(result['rows'])} settings, {len(good)} ok"))

    try:
        with launch.no_poison():
            ms, _ = timer.time(sol.library, *dev, scale, repeats=repeats)
        rep = checking.compare(sol.library(*dev, scale), expected, rtol=sol.VERSION_RTOL["library"],
                               floor=sol.ERROR_FLOOR)
        row("e. torch SDPA, dense cache (cuDNN or flash)", ms, "ok" if rep.ok else rep.text.splitlines()[0])
    except ModuleNotFoundError as exc:
        rows.append(dict(shape=name, row="e. torch SDPA, dense cache", us=None, pct_copy=None, checked="not run",
                         note=f"{exc.name} is not installed"))
    # f. 16-byte loads: launch_attention reads the module's LOAD_WORDS at each call (day 78's switch).
    from solutions import paged_attention_common as common

    saved, common.LOAD_WORDS = common.LOAD_WORDS, 2
    try:
        attention("f. day 89 optimized, LOAD_WORDS = 2 (16-byte loads)", dev)
    finally:
        common.LOAD_WORDS = saved
    # g. the rescale skipped where no lane of the warp saw a new max (read at each call, as LOAD_WORDS).
    saved, common.LAZY_RESCALE = common.LAZY_RESCALE, True
    try:
        attention("g. day 89 optimized, LAZY_RESCALE (rescale on a new max only)", dev)
    finally:
        common.LAZY_RESCALE = saved
    # h. a row over twice the lanes with 16-byte loads: more blocks an SM (read at each call, as above).
    saved = common.LANE_ELEMS, common.LOAD_WORDS
    common.LANE_ELEMS, common.LOAD_WORDS = 8, 2
    try:
        attention("h. day 89 optimized, LANE_ELEMS = 8 and 16-byte loads (3 blocks/SM)", dev)
    finally:
        common.LANE_ELEMS, common.LOAD_WORDS = saved
    sdpa = next((r["us"] for r in rows if r["row"].startswith("e.") and r["us"]), None)
    for r in rows:
        r["vs_sdpa"] = r["us"] / sdpa if sdpa and r["us"] else None
    return rows


def table(rows: list[dict], copy: float) -> str:
    lines = [f"device copy rate {copy:,.0f} GB/s (read + write), measured in this run"]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        lines.append(f"\n{shape}")
        lines.append(f"{'':84s} {'us':>8s} {'% copy':>7s} {'/ SDPA':>7s}  check")
        for r in (r for r in rows if r["shape"] == shape):
            if r["us"] is None:
                lines.append(f"{r['row']:84s} {'-':>8s} {'-':>7s} {'-':>7s}  {r['checked']}: {r['note']}")
                continue
            ratio = f"{r['vs_sdpa']:.2f}x" if r["vs_sdpa"] else "-"
            lines.append(f"{r['row']:84s} {r['us']:8.1f} {r['pct_copy']:6.1f}% {ratio:>7s}  {r['checked']}"
                         + (f"  [{r['note']}]" if r["note"] else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), action="append", help="one shape (default: both)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", type=Path, help="also write every row here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if not course.ON_GPU:
        print(f"paged_bound times kernels: it needs a CUDA GPU ({course.DEVICE.describe()})", file=sys.stderr)
        return 2
    from course import bench

    progress = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    timer = bench.Timer()
    progress("measuring the device copy rate")
    copy = bench.copy_peak_gbps(timer)
    rows = []
    for name in args.shape or SHAPES:
        rows += measure(name, SHAPES[name], timer, copy, args.repeats, progress)
    print(table(rows, copy))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(device=course.DEVICE.describe(), copy_gbps=copy, rows=rows), indent=2))
    bad = [r for r in rows if r["checked"] not in ("ok", "not run")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
