#!/usr/bin/env bash
# tensord binaries side by side on one Run round trip under ghz, rounds
# alternating between them, each on a fresh server: per round, calls/s and
# the server's CPU milliseconds per call. For a change whose effect is smaller
# than the spread between runs of bench/bulk/run.sh (BENCHMARKS.md, "Bulk
# data"): CPU per call moves far less from round to round than calls/s.
#
#   bench/bulk/ab.sh [--mib N] [--order forward|reversed] [-c C] [-n CALLS]
#                    [--rounds R] [--small | --bidi] A/tensord B/tensord [more/tensord ...]
#
# The request is bulk_driver's: a 1-D uint8 Slice of N MiB, its bytes read
# forward or backwards (default: 1 MiB backwards, 2000 calls at -c 2, 3 rounds).
# --small: Run calls of bench/load's small Slice instead (-c 32, 20000 calls
# unless given); --bidi: RunBidi streams of 100 of them each (-c 8, 200
# streams), per request.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/scripts/lib.sh"

mib=1 order=reversed concurrency="" calls="" rounds=3 small=0 bidi=0
usage() {
  echo "usage: $0 [--mib N] [--order forward|reversed] [-c C] [-n CALLS] [--rounds R]" \
       "[--small | --bidi] A/tensord B/tensord [more/tensord ...]" >&2
  exit 2
}
while [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; do
  case "$1" in
    --mib) mib="$2"; shift 2 ;;
    --order) order="$2"; shift 2 ;;
    -c) concurrency="$2"; shift 2 ;;
    -n) calls="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --small) small=1; shift ;;
    --bidi) bidi=1; shift ;;
    *) usage ;;
  esac
done
[ "$#" -ge 2 ] || usage

bin="$(bench_bin_dir "$root" bulk_driver tensorctl)"
ghz="$("$root/bench/load/install-ghz.sh")"
apt_install jq
bench_scratch

# Requests per ghz call (per stream for --bidi), and the unit CPU is shown in.
if [ "$small" = 1 ] || [ "$bidi" = 1 ]; then
  "$bin/tensorctl" encode "$root/bench/load/cases/slice_small.json" --case load/slice_small \
    >"$work/request.bin"
  unit="µs/request" scale=1000000
  if [ "$bidi" = 1 ]; then
    : "${concurrency:=8}" "${calls:=200}"
    method=RunBidi per_call=100
  else
    : "${concurrency:=32}" "${calls:=20000}"
    method=Run per_call=1
  fi
else
  : "${concurrency:=2}" "${calls:=2000}"
  method=Run per_call=1 unit="ms/call" scale=1000
  "$bin/bulk_driver" encode --bytes=$((mib << 20)) --order="$order" >"$work/request.bin"
fi
message_mib=$(( mib + 1 > 64 ? mib + 1 : 64 ))
ghz_calls() {  # port calls
  "$ghz" --insecure --proto "$root/proto/tensorop/v1/tensorop.proto" \
    --import-paths "$root/proto" --call "tensorop.v1.TensorOp/$method" -B "$work/request.bin" \
    -n "$2" -c "$concurrency" --stream-call-count="$per_call" \
    --max-recv-message-size="${message_mib}MiB" --max-send-message-size="${message_mib}MiB" \
    -O json "127.0.0.1:$1"
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "| round | tensord | requests/s | server CPU $unit | errors |"
echo "| --- | --- | --- | --- | --- |"
for round in $(seq 1 "$rounds"); do
  for tensord in "$@"; do
    "$tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= \
      --max_message_bytes=$((message_mib << 20)) >"$work/out" 2>"$work/log" &
    pid="$!"
    servers+=("$pid")
    port="$(tensord_port "$work/out" "$pid")"
    sleep 3  # past the calibration, whose work would count as the calls' CPU
    ghz_calls "$port" 100 >/dev/null  # warm-up
    before="$(cpu_ticks "$pid")"
    ghz_calls "$port" "$calls" >"$work/result.json"
    ticks=$(( $(cpu_ticks "$pid") - before ))
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    echo "| $round | $tensord | $(jq -r ".rps * $per_call | floor" "$work/result.json") |" \
         "$(awk -v t="$ticks" -v n="$((calls * per_call))" -v hz="$(getconf CLK_TCK)" -v s="$scale" \
                'BEGIN { printf "%.2f", t * s / hz / n }') |" \
         "$(jq -r '[.statusCodeDistribution | to_entries[] | select(.key != "OK") | .value] | add // 0' \
                "$work/result.json") |"
  done
done
