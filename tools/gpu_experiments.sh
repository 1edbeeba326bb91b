#!/usr/bin/env bash
# The measurements the lessons quote beyond `make bench`, in one GPU visit: logs and JSON under $1.
# Usage on a GPU machine: bash tools/gpu_experiments.sh OUTDIR [name ...]
#   names (default: all, in this order; each under its own time limit, so one that hangs costs only
#   its own minutes and the log still says how far it got):
#     paged_bound   day 89's "What bounds it" table (tools/paged_bound.py)
#     streams       day 50's stage times at 2^26 floats, 128 FMAs an element, 16 to 48 chunks, and
#                   the host's microseconds a chunk to plan and to issue; the pipeline issued from Python
#                   against one CUDA graph launch, by chunks and tapered ends (tools/day50_graph.py)
#     engine        day 90's `make run` (decode-heavy) with its split, the prefill-heavy mix, fp16, the
#                   host's hot spots under cProfile (tools/engine_profile.py), --gpus 1
#     recheck       make bench of the rows a target hangs on, three times over (days 21 and 86)
#     hf            day 90 against transformers' generate() (tools/engine_vs_transformers.py), fp32 (with
#                   a profile of a warm run, hf_fp32.prof) and fp16
#     overhead      the host's microseconds a launch (tools/launch_overhead.py) and the copy rate by size
#     sweeps        the knobs the lessons name as not yet swept (tools/sweep.py; rows in sweeps/*.json)
#     host          day 31's one-pass versions: their kernels timed apart from their calls (kernel_us), what
#                   bounds the kernel and the call (tools/compaction_bound.py: shapes, the look-back's
#                   oracle, the host's pieces) and where the rest goes (tools/host_profile.py)
# LIMIT_S=n caps each experiment (default 150 s). OUTDIR.tgz, rewritten after every experiment, holds
# them all (one file to copy back: keep OUTDIR itself outside what the visit returns). The whole list
# takes more than one 10-minute visit: name a few a visit (paged_bound streams engine, then hf sweeps).
out=${1:-out/experiments}; shift || true
mkdir -p "$out/sweeps"
limit=${LIMIT_S:-150}
export PYTHONUNBUFFERED=1
names=("$@"); [ ${#names[@]} -gt 0 ] || names=(overhead paged_bound streams hf engine host recheck sweeps)
py=${PYTHON:-python3}  # the GPU machine's python3 has the packages; PYTHON=.venv/bin/python here

step() {  # step NAME SECONDS COMMAND...: one experiment, its output in OUTDIR/NAME.log
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${secs} s)"
  timeout "$secs" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  echo "== $name: exit $rc after $(( SECONDS - t0 )) s"
  tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"  # after every step: a visit cut short keeps it
}

for name in "${names[@]}"; do
  case $name in
    paged_bound)
      step paged_bound "$limit" $py tools/paged_bound.py --json "$out/paged_bound.json" ;;
    streams)
      step streams "$limit" $py -c "
import json, time
from solutions import day50_streams_overlap as d
x = d.make_inputs(1 << 26)[0]
rows = {}
for c in (16, 24, 32, 48):
    t0 = time.perf_counter()
    rows[c] = t = d.stage_times(x, 128, c, repeats=3)
    print(c, round(time.perf_counter() - t0, 1), 's:', {k: round(v, 3) if isinstance(v, float) else v for k, v in t.items()}, flush=True)
    json.dump({str(c): t for c, t in rows.items()}, open('$out/streams.json', 'w'), indent=1, default=float)
"
      step day50_graph "$limit" $py tools/day50_graph.py --chunks 16,24,32,48 --taper 0,2,3 --json "$out/day50_graph.json" ;;
    engine)
      step engine "$limit" $py -m course run
      # prefill-heavy: prompts 1..512, outputs 1..256 (replayed without the model: 326 paged steps against
      # 699 contiguous, 69 % of the rows prompt tokens, against 11 % in the default decode-heavy mix)
      step engine_prefill "$limit" $py -m course run --max-prompt 512 --max-output 256
      step engine_fp16 "$limit" $py -m course run --dtype float16  # fp16 weights, activations and cache
      step engine_profile "$limit" $py tools/engine_profile.py --out "$out/engine.prof"  # the host's hot spots
      if $py -c "from cupy.cuda import nccl; print('NCCL', nccl.get_version())"; then
        step engine_nccl "$limit" $py -m course run --gpus 1
      else
        echo "== engine_nccl: skipped, cupy.cuda.nccl has no NCCL library here"
      fi ;;
    hf)
      step hf_fp32 "$limit" $py tools/engine_vs_transformers.py --dtype float32 --json "$out/hf_fp32.json" \
        --profile "$out/hf_fp32.prof"
      step hf_fp16 "$limit" $py tools/engine_vs_transformers.py --json "$out/hf_fp16.json" ;;
    overhead)
      step launch_overhead "$limit" $py tools/launch_overhead.py --json "$out/launch_overhead.json"
      # The copy rate the lessons' percentages divide by is a 1 GB copy's; a 140 us kernel moves a quarter
      # of that, and a copy of its own size may not reach the same rate (launch, ramp, tail).
      step copy_by_size "$limit" $py -c "
import json
import course
from course import bench
t = bench.Timer()
rows = {}
for mb in (64, 128, 256, 512, 1024, 2048):
    rows[mb] = bench.copy_peak_gbps(t, mb << 20)
    print(mb, 'MB each way:', round(rows[mb], 1), 'GB/s', flush=True)
json.dump(rows, open('$out/copy_by_size.json', 'w'), indent=1)
" ;;
    host)
      step day31_kernel_us "$limit" $py -c "
import json
from course import launch
from solutions import day31_stream_compaction as d
x, t = d.make_inputs(1 << 27, seed=1234)
(dx,) = launch.to_device(x)
rows = {}
for v in ('warp_aggregated', 'optimized', 'direct'):
    rows[v] = d.kernel_us(dx, t, v)
    print(v, {k: round(val, 1) for k, val in rows[v].items()}, flush=True)
json.dump(rows, open('$out/day31_kernel_us.json', 'w'), indent=1)
"
      step day31_bound "$limit" $py tools/compaction_bound.py --json "$out/day31_bound.json"
      step day31_host_profile "$limit" $py tools/host_profile.py 31 direct --out "$out/day31_direct.prof" ;;
    recheck)
      for i in 1 2 3; do
        step "recheck_$i" "$limit" $py tools/bench_all.py "$out/recheck_$i" 21 86
      done ;;
    sweeps)
      # Swept on the H200 before (results/h200/sweeps/): day 21 OPT_THREADS, 58 SPLIT_WARPS, 89
      # BLOCKS_PER_SM, 78 LOAD_WORDS, 10 ROWS, 9 COLS; these are the ones the lessons name as not yet run.
      # Days 55 and 62 now cap their grids at the blocks an SM their registers let in (launch.resident_blocks:
      # 6 of 8 and 3 of 8), so BLOCKS_PER_SM above that changes nothing: the sweep checks it, and times 4.
      # Day 29's look-back polls with a relaxed load (course.flags) or, as measured so far, an atomic.
      for spec in "day9 9 WIDE_ROWS=4,8,16" "day55_blocks 55 BLOCKS_PER_SM=4,6,8" "day55_fastmath 55 FASTMATH=False,True" \
                  "day62_blocks 62 BLOCKS_PER_SM=3,8" "day18_blocks 18 BLOCKS_PER_SM=4,6" "day63 63 ROWS=2,4" \
                  "day31 31 OPT_ITEMS=16,32" "day29_poll 29 RELAXED_POLL=False,True" "day21_order 21 REGION_GROUP=0,1,2,4,8,16" \
                  "day21_tiles 21 OPT_TILES=2,4" "day29_items 29 ITEMS=16,32" \
                  "day58_split 58 SPLIT_ROWS=1,2,4 SPLIT_SM_THREADS=512,768,1024"; do
        read -r -a a <<< "$spec"
        step "sweep_${a[0]}" "$limit" $py tools/sweep.py "${a[@]:1}" --out "$out/sweeps/${a[0]}.json"
      done
      step sweep_day55_exact "$limit" $py tools/sweep.py 55 ERFC_FIT=True,False FASTMATH=False,True \
        --n "(16384, 4096, 'none')" --out "$out/sweeps/day55_exact.json" ;;
    *) echo "gpu_experiments: no experiment named $name (overhead paged_bound streams hf engine host recheck sweeps)"; exit 2 ;;
  esac
done
