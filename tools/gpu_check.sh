#!/usr/bin/env bash
# One GPU visit: every test (gpu-marked included) and every day's benchmark, logs and JSON under $1.
# Usage on a GPU machine: bash tools/gpu_check.sh OUTDIR [pytest-timeout-s] [bench-timeout-s] [day ...]
# The whole suite takes ~5 minutes on an H200 with 8 workers (WORKERS=n to change; the large preemption and chunked-prefill
# tests dominate); the benchmarks ~10 s a day, the naive decode-attention days ~20 s. Past the timeouts
# the logs keep what finished. OUTDIR ends up also as OUTDIR.tgz (one file to copy back).
out=${1:-out/gpu}; mkdir -p "$out"
pytest_s=${2:-360}; bench_s=${3:-240}; shift $(( $# < 3 ? $# : 3 ))
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
timeout "$pytest_s" python3 -m pytest tests -q -n "${WORKERS:-8}" --dist loadfile -p no:cacheprovider -W ignore -rfE 2>&1 \
  | tee "$out/pytest.log" | grep -E "^(FAILED|ERROR)|passed|failed" | tail -n 40
# SM clock, power and throttle reasons every 200 ms while the benchmarks run: a kernel bound by
# instructions slows with the clock while the copy rate does not, so a low row can be told apart.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 200 > "$out/clocks.csv" 2>/dev/null & smi=$!
timeout "$bench_s" python3 tools/bench_all.py "$out" "$@" 2>&1 | tee "$out/bench.log" | grep -v Warning
kill "$smi" 2>/dev/null
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
