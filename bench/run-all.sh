#!/usr/bin/env bash
# Reruns every CPU table of BENCHMARKS.md and rewrites them from the results.
#
#   bench/run-all.sh [--quick] [--area NAME ...] [--no-write]
#
# Areas, in the page's order (each one a section of BENCHMARKS.md):
#   kernels   operators_bench: the oneTBB kernels against memcpy
#   layout    operators_bench: transpose, reshape and expand where they copy
#   copies    operators_bench: the operators that copy into new bytes (tile, gather,
#             gather_elements)
#   small     bench/load/run.sh: small calls under ghz against tensord --echo
#   bulk      bench/bulk/run.sh --no-python: bulk data against the bare baseline
#   python    the Python client against raw grpcio (bench/bulk/python_bench.py,
#             bench/python_client.py: round trip, --rss both, --many)
#   shm       bench/shm_bench.py: shared memory against numpy's copy
#   v2        bench/load/v2_vs_native.sh: ModelInfer against Run
#   handles   handles_bench, and bench/python_client.py --chain (views)
#   opencl    operators_bench: OpenCL on PoCL against oneTBB, and AUTO
# (The GPU section is measured on a GPU host and never rewritten here.)
#
# Each area writes build/bench-results/AREA.json: the area's figures as its own
# scripts report them (Google Benchmark's JSON, the ghz medians, the Python
# benches' JSON), the command, the machine (nproc, CPU model), the date, the
# tree and the mode; bench/write_tables.py then rewrites the page's region
# between <!-- table:AREA begin --> and <!-- table:AREA end --> from it
# (--no-write: only the JSON; `bench/write_tables.py` alone redoes the page).
# Raw outputs and logs stay in build/bench-results/raw/.
#
# --quick: fewer repetitions and rounds (the same scenarios and sizes): 5 min 40 s
# on the 2-core CI kind of VM (2026-11-27, shared with a build); the default is
# each area's documented settings, about twice as long (bulk's 3 rounds most of it).
# Binaries: $TENSOROP_BIN when set, else a release build made now
# (scripts/build.sh). The Python areas need build/python-venv
# (scripts/python-test.sh makes it). Not a test: nothing here asserts a figure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
. "$root/scripts/lib.sh"

all_areas=(kernels layout copies small bulk python shm v2 handles opencl)
mode=full
write=1
areas=()
usage() {
  echo "usage: $0 [--quick] [--area NAME ...] [--no-write]   (areas: ${all_areas[*]})" >&2
  exit 2
}
while [ "$#" -gt 0 ]; do
  case "$1" in
    --quick) mode=quick; shift ;;
    --full) mode=full; shift ;;
    --no-write) write=0; shift ;;
    --area)
      [ "$#" -ge 2 ] || usage
      shift
      while [ "$#" -gt 0 ] && [ "${1#--}" = "$1" ]; do areas+=("$1"); shift; done ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
[ "${#areas[@]}" -gt 0 ] || areas=("${all_areas[@]}")
for area in "${areas[@]}"; do
  case " ${all_areas[*]} " in *" $area "*) ;; *) echo "run-all: no area $area" >&2; usage ;; esac
done
quick() { [ "$mode" = quick ]; }  # whether this is a --quick run

if [ -z "${TENSOROP_BIN:-}" ]; then
  "$root/scripts/build.sh" release tensord tensorctl operators_bench handles_bench \
    bulk_bare_server bulk_driver >&2
  TENSOROP_BIN="$root/build/bin"
fi
bin="$(cd "$TENSOROP_BIN" && pwd)"
export TENSOROP_BIN="$bin"  # the area scripts use these binaries, build nothing
apt_install python3 jq curl
results="$root/build/bench-results"
raw="$results/raw"
mkdir -p "$raw"
venv="$root/build/python-venv"
python="$venv/bin/python"

need_venv() {  # modules...
  local module
  for module in "$@"; do
    "$python" -c "import $module" 2>/dev/null || {
      echo "run-all: $python cannot import $module: run scripts/python-test.sh once first" >&2
      return 1
    }
  done
}

# Servers an area starts; stopped when it ends (or the script exits).
servers=()  # stop_servers (scripts/lib.sh) ends them
trap stop_servers EXIT

# Waits for "$2 listening on HOST:PORT" in file $1 (from pid $3); prints HOST:PORT.
listening() {
  local i address
  for ((i = 0; i < 600; i++)); do
    address="$(sed -n "s/^$2 listening on \(.*:[0-9][0-9]*\)\$/\1/p" "$1" | head -n 1)"
    if [ -n "$address" ]; then echo "$address"; return 0; fi
    kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  echo "run-all: $2 did not start ($1)" >&2
  return 1
}
start_tensord() {  # log flags...; sets $address
  local log="$1" pid
  shift
  "$bin/tensord" --address=127.0.0.1:0 --metrics_address= --http_address= "$@" \
    >"$log.out" 2>"$log.log" &
  pid="$!"
  servers+=("$pid")
  address="$(listening "$log.out" tensord "$pid")"
}

# --- the areas: each writes its figures to $data and sets $command ---

operators_bench() {  # filter
  local repetitions=5 min_time=0.1
  quick && repetitions=3 min_time=0.05
  command="operators_bench --benchmark_filter='$1' --benchmark_repetitions=$repetitions"
  command+=" --benchmark_min_time=$min_time --benchmark_report_aggregates_only=true"
  "$bin/operators_bench" --benchmark_filter="$1" --benchmark_repetitions="$repetitions" \
    --benchmark_min_time="$min_time" --benchmark_report_aggregates_only=true \
    --benchmark_out="$work/bench.json" --benchmark_out_format=json >&2 2>"$work/bench.err"
  # The calibration line (the device's own rates) is on stderr.
  jq --arg calibration "$(grep -m 1 '^calibration:' "$work/bench.err" || true)" \
    '. + {calibration: $calibration}' "$work/bench.json" >"$data"
}

area_kernels() {
  operators_bench '^BM_Memcpy/|^BM_(Slice|StridedSlice|Split|ScatterElements)/.*backend:0'
}

area_layout() {
  operators_bench '^BM_Memcpy/bytes:(1024|1048576|33554432)/|^BM_(Transpose|Reshape|Expand)/.*backend:0'
}

area_copies() {
  operators_bench '^BM_Memcpy/bytes:(1024|1048576|33554432)/|^BM_(Tile|Gather|GatherElements|Join|Pad)/.*backend:0'
}

area_opencl() {
  operators_bench '^BM_(Slice|StridedSlice|Split|ScatterElements)/|^BM_AutoBest'
}

area_small() {
  local rounds=3  # quick too: the whole area takes about a minute
  command="bench/load/run.sh --rounds $rounds"
  "$root/bench/load/run.sh" --rounds "$rounds" --json "$data" >"$work/table.md"
}

area_v2() {
  need_venv tensorop_client tritonclient.grpc
  local rounds=3  # quick too: the whole area takes half a minute
  command="bench/load/v2_vs_native.sh --rounds $rounds"
  "$root/bench/load/v2_vs_native.sh" --rounds "$rounds" --json "$data" >"$work/table.md"
}

area_bulk() {
  local rounds=3
  quick && rounds=1
  command="bench/bulk/run.sh --no-python --rounds $rounds"
  "$root/bench/bulk/run.sh" --no-python --rounds "$rounds" --json "$data" >"$work/table.md"
}

area_python() {
  need_venv tensorop_client numpy grpc
  local mib=$((1 << 20)) rounds=5 calls=5 many=2000 tensord bare
  quick && rounds=3 calls=3 many=1000
  start_tensord "$work/tensord" --max_message_bytes=$((66 * mib))
  tensord="$address"
  # The bare baseline with tensord's malloc settings, as bench/bulk/run.sh runs it.
  local tunables=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=4194304
  tunables+=:glibc.malloc.trim_threshold=67108864:glibc.malloc.arena_max=1
  GLIBC_TUNABLES="$tunables" "$bin/bulk_bare_server" --address=127.0.0.1:0 --unary_bytes=$((32 * mib)) \
    --stream_bytes=$((32 * mib)) --max_message_bytes=$((66 * mib)) \
    >"$work/bare.out" 2>"$work/bare.log" &
  servers+=("$!")
  bare="$(listening "$work/bare.out" bare "${servers[-1]}")"
  command="bench/bulk/python_bench.py --bytes $((32 * mib)) --rounds $rounds --calls $calls;"
  command+=" bench/python_client.py --rounds $rounds --calls $calls;"
  command+=" bench/python_client.py --rss both --gib 1; bench/python_client.py --many $many"
  echo "run-all: python_bench.py" >&2
  "$python" "$root/bench/bulk/python_bench.py" --tensord "$tensord" --bare "$bare" \
    --bytes $((32 * mib)) --rounds "$rounds" --calls "$calls" >"$work/bench.json"
  echo "run-all: python_client.py (round trip)" >&2
  "$python" "$root/bench/python_client.py" --target "$tensord" --rounds "$rounds" \
    --calls "$calls" --json "$work/round_trip.json" >&2
  echo "run-all: python_client.py --rss both --gib 1" >&2
  local available_gib=$(( $(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) >> 20 ))
  if [ "$available_gib" -ge 8 ]; then
    "$python" "$root/bench/python_client.py" --target "$tensord" --rss both --gib 1 \
      --json "$work/rss.json" >&2
  else
    echo "run-all: $available_gib GiB available, the 1 GiB RSS run needs 8: skipped" >&2
    echo null >"$work/rss.json"
  fi
  echo "run-all: python_client.py --many $many" >&2
  "$python" "$root/bench/python_client.py" --target "$tensord" --many "$many" \
    --json "$work/many.json" >&2
  jq -n --slurpfile bench "$work/bench.json" --slurpfile round_trip "$work/round_trip.json" \
    --slurpfile rss "$work/rss.json" --slurpfile many "$work/many.json" \
    '{python_bench: $bench[0], round_trip: $round_trip[0], rss: $rss[0], many: $many[0]}' >"$data"
  stop_servers
}

area_shm() {
  need_venv tensorop_client numpy
  local rounds=31
  quick && rounds=11
  command="bench/shm_bench.py --rounds $rounds"
  "$python" "$root/bench/shm_bench.py" --tensord "$bin/tensord" --rounds "$rounds" \
    --json "$data" >&2
}

area_handles() {
  need_venv tensorop_client numpy
  local rounds=5
  quick && rounds=3
  start_tensord "$work/tensord" --calibrate=off
  command="handles_bench --target=HOST:PORT --rounds=$rounds (tensord --calibrate=off);"
  command+=" bench/python_client.py --chain --rounds $rounds"
  echo "run-all: handles_bench --rounds=$rounds" >&2
  "$bin/handles_bench" --target="$address" --rounds="$rounds" >"$work/handles.txt"
  cat "$work/handles.txt" >&2
  stop_servers
  echo "run-all: python_client.py --chain --rounds $rounds" >&2
  "$python" "$root/bench/python_client.py" --tensord "$bin/tensord" --chain --rounds "$rounds" \
    --json "$work/chain.json" >&2
  jq -n --rawfile text "$work/handles.txt" --slurpfile chain "$work/chain.json" \
    '{handles_bench: $text, chain: $chain[0]}' >"$data"
}

load_average() { cut -d' ' -f1 /proc/loadavg; }
compiling() { pgrep -x cc1plus >/dev/null || pgrep -x ninja >/dev/null; }

failed=()
started_all="$(date +%s)"
for area in "${areas[@]}"; do
  work="$raw/$area"
  rm -rf "$work"
  mkdir -p "$work"
  data="$work/data.json"
  command=""
  load_before="$(load_average)"
  shared=0
  compiling && shared=1
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  start="$(date +%s)"
  echo "run-all: $area ($mode) ..." >&2
  # In a subshell of its own, so that a failing step ends the area, not the run
  # (errexit does not reach into a command tested by `if`).
  set +e
  (
    set -e
    trap stop_servers EXIT
    "area_$area"
    printf '%s' "$command" >"$work/command"
  ) 2> >(tee "$work/log" >&2)
  status=$?
  set -e
  if [ "$status" = 0 ] && [ -s "$data" ]; then
    compiling && shared=1
    python3 "$here/write_tables.py" --record "$area" --data "$data" --mode "$mode" \
      --started "$started" --seconds $(( $(date +%s) - start )) \
      --load-before "$load_before" --load-after "$(load_average)" --shared "$shared" \
      --command "$(cat "$work/command")" --out "$results/$area.json"
    echo "run-all: $area done in $(( $(date +%s) - start )) s" >&2
  else
    echo "run-all: $area FAILED (log: $work/log); its table is left as it was" >&2
    failed+=("$area")
  fi
  stop_servers
done

done_areas=()
for area in "${areas[@]}"; do
  case " ${failed[*]} " in *" $area "*) ;; *) done_areas+=("$area") ;; esac
done
if [ "$write" = 1 ] && [ "${#done_areas[@]}" -gt 0 ]; then
  python3 "$here/write_tables.py" "${done_areas[@]}"
fi
echo "run-all: ${#done_areas[@]} area(s) in $(( $(date +%s) - started_all )) s ($mode)" \
  "${failed[*]:+; failed: ${failed[*]}}" >&2
[ "${#failed[@]}" -eq 0 ]
