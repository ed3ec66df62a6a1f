#!/usr/bin/env bash
# One device call's measurement for issue 48 (BENCHMARKS.md, "GPU"), run on the GPU host
# from the repository root, reading the bundle that ../shared/gpu/bundle.sh and
# `bench/gpu-host.sh pack` made:
#   bash bench/gpu-measure.sh [.gpu-bundle]
# OpenCL's own copies (bench/gpu/oclbw.c: wall clock and profiling events), tensord's
# kernel rows (operators_bench with TENSOROP_BENCH_PROFILE=1: kernel_device_ms beside the
# wall-clock kernel_ms) and the whole small Slice, PyTorch's (bench/gpu/torch_ref.py), the
# correctness checks (run.sh correct, gpu-host.sh), AutoBest at every core and on 2.
# The rows whose host input goes up straight into the output (a contiguous Slice) are
# measured again with the input resident (TENSOROP_BENCH_RESIDENT=1), where the copy runs on
# the device; so are the data-movement operators at 32 MiB, against clEnqueueCopyBuffer of
# 32 MiB. Results to $OUT (at most 8 files: logs in logs.tar.gz); the table last.
set -u
G=$(cd "${1:-.gpu-bundle}" && pwd); O=${OUT:-/tmp/gpu-out}; mkdir -p "$O/logs"
start=$(date +%s)
step() { echo "== [$(($(date +%s) - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  >"$O/logs/nvidia-smi.csv" 2>&1
cat "$O/logs/nvidia-smi.csv"
# run.sh's ICD setup: NVIDIA's OpenCL alone (its `correct` phase writes /tmp/gpu-icd).
icd=$(ls /usr/lib/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
  /usr/local/nvidia/lib64/libnvidia-opencl.so.1 2>/dev/null | head -1)
mkdir -p /tmp/gpu-icd && echo "$icd" >/tmp/gpu-icd/nvidia.icd
export LD_LIBRARY_PATH=$G/lib OCL_ICD_VENDORS=/tmp/gpu-icd

step "oclbw (events and wall clock), 64, 32 and 1 MiB"
{ for mib in 64 32 1; do timeout 30 "$G/bin/oclbw_events" $mib; done; } >"$O/oclbw.jsonl" 2>&1
cat "$O/oclbw.jsonl"

step "operators_bench kernel rows, 64 MiB, profiled (events and wall clock)"
rows='^BM_(Slice/bytes:67108864/.*backend:1|ScatterElements/bytes:67108864/backend:1)'
bench() {  # OUT_NAME FILTER [ENV=VALUE...]: 3 repetitions, medians
  local name=$1 filter=$2; shift 2
  env "$@" timeout 120 "$G/bin/operators_bench" --benchmark_filter="$filter" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.1 \
    --benchmark_out="$O/$name.json" --benchmark_out_format=json >"$O/logs/$name.log" 2>&1
  echo "rc=$?"; grep -E '_median' "$O/logs/$name.log" | cut -c1-220
}
bench kernels "$rows" TENSOROP_BENCH_PROFILE=1
step "the contiguous Slice with its input resident (the copy on the device), profiled"
contiguous='^BM_Slice/bytes:67108864/window:0/backend:1'
bench resident "$contiguous" TENSOROP_BENCH_PROFILE=1 TENSOROP_BENCH_RESIDENT=1
step "the same rows and whole Slices, not profiled (wall clock as tensord runs)"
bench kernels_wall "$rows|^BM_SliceWhole/"
step "launch table rows against the default (profiled): runtime-chosen work-groups; runs by the kernel"
bench ab_group0 '^BM_(Slice/bytes:67108864/window:[124]/backend:1|ScatterElements/bytes:67108864/backend:1)' \
  TENSOROP_BENCH_PROFILE=1 TENSOROP_BENCH_GROUP_WIDTH=0
bench ab_runs "$contiguous" TENSOROP_BENCH_PROFILE=1 TENSOROP_BENCH_RESIDENT=1 \
  TENSOROP_BENCH_RUNS_BY_KERNEL=1
step "the data-movement operators, 32 MiB, inputs resident, profiled"
bench copies '^BM_(Transpose|Reshape|Expand|Tile|Gather|GatherElements|Join|Pad)/bytes:33554432/.*backend:1' \
  TENSOROP_BENCH_PROFILE=1 TENSOROP_BENCH_RESIDENT=1

step "PyTorch on the same shapes (events and wall clock)"
PYTHONUNBUFFERED=1 timeout 90 python3 "$G/gpu/torch_ref.py" 64 >"$O/torch.jsonl" 2>"$O/logs/torch.err"
echo "rc=$?"; cat "$O/torch.jsonl"

step "correctness: run.sh correct"
OUT=$O/logs timeout 150 bash "$G/run.sh" correct 2>&1 | tee "$O/logs/correct.log" | grep -vE '^\s*$' | tail -20
step "correctness: gpu-host.sh (view cases, device and integration tests)"
OUT=$O/logs timeout 120 bash "$G/gpu-host.sh" 2>&1 | tee "$O/logs/gpu-host.log"

step "AutoBest, every core ($(nproc))"
timeout 100 "$G/bin/operators_bench" --benchmark_filter=AutoBest --benchmark_out="$O/auto16.json" \
  --benchmark_out_format=json >"$O/logs/auto16.log" 2>&1
echo "rc=$?"
step "AutoBest, taskset -c 0,1"
timeout 100 taskset -c 0,1 "$G/bin/operators_bench" --benchmark_filter=AutoBest \
  --benchmark_out="$O/auto2.json" --benchmark_out_format=json >"$O/logs/auto2.log" 2>&1
echo "rc=$?"

step "done"
tar -czf "$O/logs.tar.gz" -C "$O" logs && rm -rf "$O/logs"
python3 "$G/gpu/summary.py" "$O" | tee "$O/summary.md"
# at most 8 files come back: the JSON the table read beyond these three in one archive
more="kernels_wall.json resident.json ab_group0.json ab_runs.json copies.json auto16.json auto2.json"
(cd "$O" && tar -czf results.tar.gz $more && rm -f $more)
