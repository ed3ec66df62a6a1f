#!/usr/bin/env bash
# Builds and runs the kernel benchmarks (oneTBB, OpenCL, memcpy) and prints the
# BENCHMARKS.md tables. AUTO's column is what tensord's cost model picks from
# the benchmark's own calibration (the AutoBest rows), unless
# AUTO_OPENCL_MIN_BYTES is set: then that threshold, as --auto_opencl_min_bytes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
apt_install python3  # bench/kernel_table.py makes the tables
"$root/scripts/build.sh" release operators_bench >&2
out="$root/build/operators_bench.json"  # kept, so the tables can be made again
"$root/build/bin/operators_bench" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.1 \
  --benchmark_out="$out" --benchmark_out_format=json >&2
python3 "$root/bench/kernel_table.py" "$out" "${AUTO_OPENCL_MIN_BYTES:-}"
