#!/usr/bin/env bash
# The request log's volume and what it costs: ghz sends 20000 small Slice Runs at -c 32
# to a fresh tensord for each --request_log policy (all, sample:100, errors, off), ROUNDS
# times in turn; prints calls/s and the lines and bytes tensord wrote to stderr.
#   bench/load/log_volume.sh [ROUNDS]      (BENCHMARKS.md, "The request log's volume")
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/scripts/lib.sh"
rounds="${1:-2}"
bin="$root/build/bin"
ghz="${GHZ:-$HOME/.local/bin/ghz}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin/tensorctl" encode "$root/bench/load/cases/slice_small.json" --case load/slice_small \
  >"$work/request.bin"
for round in $(seq "$rounds"); do
  for policy in all sample:100 errors off; do
    "$bin/tensord" --address=127.0.0.1:0 --metrics_address= --http_address= --backends=cpu \
      --calibrate=off --request_log="$policy" >"$work/out" 2>"$work/err" &
    pid=$!
    port="$(tensord_port "$work/out" "$pid")"
    rps="$("$ghz" --insecure --call tensorop.v1.TensorOp/Run -B "$work/request.bin" -c 32 -n 20000 \
      -O json "127.0.0.1:$port" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rps"]))')"
    kill -TERM "$pid"; wait "$pid"
    echo "round $round --request_log=$policy: $rps calls/s, $(grep -c '"method":"Run"' "$work/err" || true) Run lines, $(stat -c %s "$work/err") bytes on stderr"
  done
done
