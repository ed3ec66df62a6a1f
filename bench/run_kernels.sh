#!/usr/bin/env bash
# Builds and runs the kernel benchmarks; prints the BENCHMARKS.md table.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh" release operators_bench >&2
out="$(mktemp)"
"$root/build/bin/operators_bench" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.1 \
  --benchmark_out="$out" --benchmark_out_format=json >&2
python3 "$root/bench/kernel_table.py" "$out"
rm -f "$out"
