#!/usr/bin/env bash
# Load tests: ghz against a local tensord and against its echo baseline
# (tensord --echo: the same gRPC server and request parsing, no work), both on
# loopback, through server reflection with `tensorctl encode` payloads. Prints
# the BENCHMARKS.md table (markdown) on stdout; progress goes to stderr.
#
#   bench/load/run.sh                      builds release tensord/tensorctl in build/
#   TENSOROP_BIN=build-x/bin bench/load/run.sh   uses binaries already built there
#   bench/load/run.sh [--rounds N] [--json FILE]
#       --rounds: unary rounds per server (default 3); --json: also writes the
#       table's figures to FILE (for bench/run-all.sh)
#
# Not part of CI: on two cores shared by ghz and the server the figures are
# noisy and the run takes minutes. Every scenario has a bounded request count.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/scripts/lib.sh"

bench_load_options "$@"

bin="$(bench_bin_dir "$root" tensord tensorctl)"
ghz="$("$here/install-ghz.sh")"
apt_install jq  # reads ghz's JSON reports

bench_scratch

# Starts tensord with `$@` on a free loopback port; sets $port. Its request log
# goes to a file: writing it is part of the work measured, as in production.
start_tensord() {
  local name="$1"
  shift
  "$bin/tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= "$@" \
    >"$work/$name.out" 2>"$work/$name.log" &
  servers+=("$!")
  port="$(tensord_port "$work/$name.out" "${servers[-1]}")" || {
    echo "run: $name did not start:" >&2
    cat "$work/$name.log" >&2
    exit 1
  }
}

# The scenarios' requests, serialized for ghz -B.
awk -f "$here/make_scatter_case.awk" >"$work/scatter_elements_1mib.json"
encode() {  # file case-name output
  "$bin/tensorctl" encode "$1" --case "$2" >"$work/$3.bin"
}
encode "$here/cases/slice_small.json" load/slice_small slice_small
encode "$here/cases/strided_slice_masks.json" load/strided_slice_masks strided_slice_masks
encode "$work/scatter_elements_1mib.json" load/scatter_elements_1mib scatter_elements_1mib
encode "$here/cases/stream_64mib.json" load/stream_64mib stream_64mib

start_tensord tensord
tensord_port="$port"
tensord_pid="${servers[-1]}"
start_tensord echo --echo
echo_port="$port"
echo_pid="${servers[-1]}"

# The CPU time (user + system, in clock ticks) process $1 has used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# Runs ghz: label server(tensord|echo) method payload [ghz flags...]. The JSON
# report lands in $work/label.json, the server's CPU ticks during it in
# $work/label.cpu.
load() {
  local label="$1" server="$2" method="$3" payload="$4"
  shift 4
  local port_var="${server}_port" pid_var="${server}_pid"
  local pid="${!pid_var}" before
  echo "run: $label: ghz $* --call tensorop.v1.TensorOp/$method ($server)" >&2
  before="$(cpu_ticks "$pid")"
  "$ghz" --insecure --call "tensorop.v1.TensorOp/$method" -B "$work/$payload.bin" \
    --max-recv-message-size=80MB --max-send-message-size=80MB \
    -O json -o "$work/$label.json" "$@" "127.0.0.1:${!port_var}"
  echo $(( $(cpu_ticks "$pid") - before )) >"$work/$label.cpu"
}

# Unary scenarios run against tensord and the echo baseline in alternating
# rounds, so a slow spell of the shared machine hits both; the table takes each
# server's median round.
compare() {  # label payload [ghz flags...]
  local label="$1" payload="$2"
  shift 2
  for round in $(seq 1 "$rounds"); do
    load "$label.$round" tensord Run "$payload" "$@"
    load "$label.echo.$round" echo Run "$payload" "$@"
  done
}

# The round of $1 (label or label.echo) with the median calls/s.
median_round() {
  for round in $(seq 1 "$rounds"); do
    echo "$(jq -r '.rps' "$work/$1.$round.json") $1.$round"
  done | sort -g | sed -n "$(( (rounds + 1) / 2 ))p" | cut -d' ' -f2
}

# Warm both servers up (connections, reflection, allocator, TBB threads).
load warm_tensord tensord Run slice_small -n 2000 -c 32
load warm_echo echo Run slice_small -n 2000 -c 32

compare slice_small slice_small -n 20000 -c 32
compare strided_slice_masks strided_slice_masks -n 10000 -c 16
compare scatter_elements_1mib scatter_elements_1mib -n 300 -c 4
load stream_64mib tensord RunStream stream_64mib -n 20 -c 2
bidi_messages=100
load bidi_slice_small tensord RunBidi slice_small -n 200 -c 8 --stream-call-count="$bidi_messages"

# Percentile $2 of report $1's latencies, in ms; the calls of report $1 that
# did not end OK.
ms() { jq -r --argjson p "$2" \
  '[.latencyDistribution[] | select(.percentage == $p) | .latency][0] / 1e6
   | . * 100 | round / 100' "$1"; }
errors() { jq -r '([.statusCodeDistribution | to_entries[] | select(.key != "OK") | .value]
                   | add // 0)' "$1"; }
ticks_per_second="$(getconf CLK_TCK)"
# The server's CPU time in µs per call of label $1, or per request with $2
# requests per call.
cpu_us() {
  local ticks calls
  ticks="$(cat "$work/$1.cpu")"
  calls="$(jq -r '.count' "$work/$1.json")"
  echo $(( ticks * 1000000 / ticks_per_second / calls / ${2:-1} ))
}

# One table row: what, server, report label, requests per call. With --json
# the same figures go to $work/rows.jsonl too.
row() {
  local what="$1" server="$2" label="$3" per_call="${4:-1}" report="$work/$3.json"
  jq -c --arg what "$what" --arg server "$server" --argjson per_call "$per_call" \
    --argjson cpu_us "$(cpu_us "$label" "$per_call")" \
    '{scenario: $what, server: $server, calls: .count, rps: .rps, requests_per_call: $per_call,
      p50_ms: (.latencyDistribution[] | select(.percentage == 50) | .latency / 1e6),
      p95_ms: (.latencyDistribution[] | select(.percentage == 95) | .latency / 1e6),
      p99_ms: (.latencyDistribution[] | select(.percentage == 99) | .latency / 1e6),
      errors: ([.statusCodeDistribution | to_entries[] | select(.key != "OK") | .value] | add // 0),
      server_cpu_us: $cpu_us}' "$report" >>"$work/rows.jsonl"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$what" "$server" \
    "$(jq -r '.count' "$report")" "$(jq -r '.rps | round' "$report")" \
    "$(ms "$report" 50)" "$(ms "$report" 95)" "$(ms "$report" 99)" "$(errors "$report")" \
    "$(cpu_us "$label" "$per_call")"
}
# Rows for tensord and the echo baseline (median rounds) and their ratio.
compared_rows() {  # what label
  local tensord echo
  tensord="$(median_round "$2")"
  echo="$(median_round "$2.echo")"
  row "$1" tensord "$tensord"
  row "$1" "echo baseline" "$echo"
  ratios+=("$1: $(jq -rn --slurpfile a "$work/$tensord.json" --slurpfile b "$work/$echo.json" \
    '($a[0].rps / $b[0].rps) * 100 | round / 100')× the echo baseline's calls/s")
}

ratios=()
echo "tensord $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), ghz v0.121.0," \
  "$(nproc) cores shared by ghz and the servers, loopback. Unary rows: the median of" \
  "$rounds rounds alternating between tensord and the echo baseline. Latencies in ms;" \
  "server CPU is user + system time of the server process per call (per request for RunBidi)."
echo
echo "| scenario (ghz flags) | server | calls | calls/s | p50 | p95 | p99 | errors | server CPU µs |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
compared_rows "Run, small Slice: 64 B in, 16 B out (-c 32)" slice_small
compared_rows "Run, StridedSlice, all masks: 2 KiB in (-c 16)" strided_slice_masks
compared_rows "Run, ScatterElements: 1 MiB in and out (-c 4)" scatter_elements_1mib
row "RunStream, 64 MiB result in 1 MiB chunks (-c 2)" tensord stream_64mib
row "RunBidi, $bidi_messages small Slices per call (-c 8)" tensord bidi_slice_small "$bidi_messages"
echo
for ratio in "${ratios[@]}"; do echo "- $ratio"; done
echo "- RunBidi: $(jq -r ".rps * $bidi_messages | round" "$work/bidi_slice_small.json") requests/s"
if [ -n "$json_out" ]; then
  jq -s --arg tree "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    --argjson rounds "$rounds" '{tree: $tree, rounds: $rounds, rows: .}' "$work/rows.jsonl" >"$json_out"
fi
