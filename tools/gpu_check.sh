#!/usr/bin/env bash
# One GPU visit: the tests (gpu-marked included) and the benchmarks, logs and JSON under $1.
# Usage on a GPU machine: bash tools/gpu_check.sh OUTDIR [pytest-timeout-s] [bench-timeout-s] [day ...]
#   SHARD=i/n    run only every n-th test file, starting at the i-th (the whole suite in n visits)
#   TESTS="..."  run these test paths or node ids instead of tests/
#   WORKERS=n    pytest-xdist workers (default 15)
# A pytest timeout of 0 skips the tests; no days after the timeouts benches every day.
# The whole suite does not fit one 10-minute visit on an H200: with 15 workers, 1616 of its 1621
# tests passed in 540 s distributed test by test, 93 % in 390 s distributed file by file. Each worker
# compiles, for the real GPU, every kernel specialization its tests touch (~2 s each), so tests go to
# workers a whole file at a time (each day's kernels compiled once), and the suite in two visits:
# SHARD=1/2, then SHARD=2/2. The log names every test as it finishes, so a cut-off run still says
# which ones passed. Benchmarks go through tools/bench_all.py: inputs and references made ahead by
# worker processes, re-checks on the GPU, a day stopped at 60 s (BENCH_ARGS="--day-limit 90 --jobs 8"
# to change; BENCH_ARGS="--compile-ahead" has the workers compile each day's kernels too, into a disk
# cache the timing process loads them from). OUTDIR ends up also as OUTDIR.tgz (one file to copy back).
out=${1:-out/gpu}; mkdir -p "$out"
pytest_s=${2:-360}; bench_s=${3:-240}; shift $(( $# < 3 ? $# : 3 ))
export PYTHONUNBUFFERED=1
# One BLAS thread per process: 15 test workers each running NumPy's float64 references on a 16-core
# machine would otherwise start 16 threads apiece, and the heaviest references (days 87 and 90, tens
# of seconds alone) stall for minutes.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
if [ "$pytest_s" -gt 0 ]; then
  if [ -n "${TESTS:-}" ]; then
    read -r -a targets <<< "$TESTS"
  elif [ -n "${SHARD:-}" ]; then
    i=${SHARD%/*}; n=${SHARD#*/}
    mapfile -t files < <(ls tests/test_*.py | sort)
    targets=(); for k in "${!files[@]}"; do [ $(( k % n )) -eq $(( i - 1 )) ] && targets+=("${files[$k]}"); done
  else
    targets=(tests)
  fi
  # A mistyped path makes pytest collect nothing and run nothing (a whole visit's tests lost): refuse it.
  for t in "${targets[@]}"; do
    [ -e "${t%%::*}" ] || { echo "gpu_check: no such test path: $t" | tee "$out/pytest.log"; exit 2; }
  done
  timeout "$pytest_s" python3 -m pytest "${targets[@]}" -v -n "${WORKERS:-15}" --dist loadfile -p no:cacheprovider \
    -W ignore -rfE 2>&1 | tee "$out/pytest.log" | grep -E "^(FAILED|ERROR)| FAILED | ERROR |passed|failed" | tail -n 40
fi
if [ "$bench_s" -gt 0 ]; then
  # SM clock, power and throttle reasons every 200 ms while the benchmarks run: a kernel bound by
  # instructions slows with the clock while the copy rate does not, so a low row can be told apart.
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$out/clocks.csv" 2>/dev/null & smi=$!
  # shellcheck disable=SC2086  # BENCH_ARGS: options, split on spaces on purpose
  timeout "$bench_s" python3 tools/bench_all.py "$out" "$@" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -v Warning
  kill "$smi" 2>/dev/null
fi
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
