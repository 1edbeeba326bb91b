#!/usr/bin/env bash
# The measurements the lessons quote beyond `make bench`, in one GPU visit: logs and JSON under $1.
# Usage on a GPU machine: bash tools/gpu_experiments.sh OUTDIR [name ...]
#   names (default: all, in this order; each under its own time limit, so one that hangs costs only
#   its own minutes and the log still says how far it got):
#     paged_bound   day 89's "What bounds it" table (tools/paged_bound.py)
#     streams       day 50's stage times at 2^26 floats, 128 FMAs an element, 16 / 32 / 64 chunks
#     engine        day 90's `make run` time split, a decode-heavy workload's, then the NCCL path (--gpus 1)
#     hf            day 90 against transformers' generate() (tools/engine_vs_transformers.py), fp16 and fp32
#     sweeps        the knobs the lessons name as not yet swept (tools/sweep.py; rows in sweeps/*.json)
# LIMIT_S=n caps each experiment (default 150 s). OUTDIR.tgz, rewritten after every experiment, holds
# them all (one file to copy back: keep OUTDIR itself outside what the visit returns). The whole list
# takes more than one 10-minute visit: name a few a visit (paged_bound streams engine, then hf sweeps).
out=${1:-out/experiments}; shift || true
mkdir -p "$out/sweeps"
limit=${LIMIT_S:-150}
export PYTHONUNBUFFERED=1
names=("$@"); [ ${#names[@]} -gt 0 ] || names=(paged_bound streams engine hf sweeps)
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
import json
from solutions import day50_streams_overlap as d
x = d.make_inputs(1 << 26)[0]
rows = {c: d.stage_times(x, 128, c) for c in (16, 32, 64)}
for c, t in rows.items():
    print(c, {k: round(v, 3) if isinstance(v, float) else v for k, v in t.items()})
json.dump({str(c): t for c, t in rows.items()}, open('$out/streams.json', 'w'), indent=1, default=float)
" ;;
    engine)
      step engine "$limit" $py -m course run
      # prefill-heavy: prompts 1..512, outputs 1..256 (replayed without the model: 326 paged steps against
      # 699 contiguous, 69 % of the rows prompt tokens, against 11 % in the default decode-heavy mix)
      step engine_prefill "$limit" $py -m course run --max-prompt 512 --max-output 256
      step engine_fp16 "$limit" $py -m course run --dtype float16  # fp16 weights, activations and cache
      if $py -c "from cupy.cuda import nccl; print('NCCL', nccl.get_version())"; then
        step engine_nccl "$limit" $py -m course run --gpus 1
      else
        echo "== engine_nccl: skipped, cupy.cuda.nccl has no NCCL library here"
      fi ;;
    hf)
      step hf_fp16 "$limit" $py tools/engine_vs_transformers.py --json "$out/hf_fp16.json"
      step hf_fp32 "$limit" $py tools/engine_vs_transformers.py --dtype float32 --json "$out/hf_fp32.json" ;;
    sweeps)
      for spec in "21 OPT_THREADS=128,256,512" "58 SPLIT_WARPS=4,8" "89 BLOCKS_PER_SM=4,8" "78 LOAD_WORDS=1,2" \
                  "10 ROWS=1,2,4" "9 COLS=2,4 WIDE_ROWS=8"; do
        read -r -a a <<< "$spec"
        step "sweep_day${a[0]}" "$limit" $py tools/sweep.py "${a[@]}" --out "$out/sweeps/day${a[0]}.json"
      done
      step sweep_day63_wide "$limit" $py tools/sweep.py 63 ROWS=2,4 --n "(14336, 4096)" \
        --out "$out/sweeps/day63_14336x4096.json" ;;
    *) echo "gpu_experiments: no experiment named $name (paged_bound streams engine hf sweeps)"; exit 2 ;;
  esac
done
