#!/usr/bin/env bash
# One GPU visit: every test (gpu-marked included) and every day's benchmark, logs under $1.
# Usage on a GPU machine: bash tools/gpu_check.sh OUTDIR [pytest-timeout-s] [bench-timeout-s]
out=${1:-out/gpu}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
timeout "${2:-300}" python3 -m pytest tests -q -n 8 --dist loadfile -p no:cacheprovider -W ignore 2>&1 \
  | tee "$out/pytest.log" | tail -n 60
timeout "${3:-240}" python3 tools/bench_all.py "$out" 2>&1 | tee "$out/bench.log" | grep -v Warning
