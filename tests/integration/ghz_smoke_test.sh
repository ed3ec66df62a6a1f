#!/usr/bin/env bash
# ghz against a real tensord: 50 small Slice calls through server reflection
# (no .proto), every one OK, as ghz and as tensord's own /metrics count them.
#   ghz_smoke_test.sh TENSORD native TENSORCTL CASE_FILE
#     tensorop.v1.TensorOp/Run with a `tensorctl encode` payload of CASE_FILE;
#   ghz_smoke_test.sh TENSORD v2 REQUEST_JSON
#     inference.GRPCInferenceService/ModelInfer (the Open Inference Protocol)
#     with REQUEST_JSON, a ModelInferRequest in protobuf's JSON mapping
#     (bench/load/cases/v2_slice_small.json).
# ghz comes from bench/load/install-ghz.sh (~/.local/bin/ghz, or $GHZ, or
# PATH); without it the test fails, it does not skip.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
tensord="$1" api="$2"

ghz="${GHZ:-$HOME/.local/bin/ghz}"
if [ ! -x "$ghz" ]; then ghz="$(command -v ghz || true)"; fi
if [ -z "$ghz" ]; then
  echo "FAIL: ghz not found; bench/load/install-ghz.sh installs it" >&2
  exit 1
fi

work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

case "$api" in
  native)
    "$3" encode "$4" --case load/slice_small >"$work/slice.bin"
    call=(--call tensorop.v1.TensorOp/Run -B "$work/slice.bin")
    method=Run ;;
  v2)
    call=(--call inference.GRPCInferenceService/ModelInfer -D "$3")
    method=ModelInfer ;;
  *) echo "usage: $0 TENSORD native TENSORCTL CASE_FILE | TENSORD v2 REQUEST_JSON" >&2; exit 2 ;;
esac
"$tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= >"$work/out" 2>"$work/log" &
server=$!
# Bounded: a server that never says where it listens fails the test.
if ! port="$(tensord_port "$work/out" "$server")" ||
   ! metrics_port="$(tensord_port "$work/out" "$server" metrics)"; then
  echo "FAIL: tensord did not start:" >&2
  cat "$work/log" >&2
  exit 1
fi

"$ghz" --insecure "${call[@]}" -n 50 -c 4 \
  -O json -o "$work/report.json" "127.0.0.1:$port"

status=0
# ghz's own tally: 50 calls, all OK.
if ! grep -q '"count":50,' "$work/report.json" ||
   ! grep -q '"statusCodeDistribution":{"OK":50}' "$work/report.json"; then
  echo "FAIL: ghz did not see 50 OK calls:" >&2
  cat "$work/report.json" >&2
  status=1
fi

# tensord's count, over plain HTTP from bash (no curl needed).
exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
scrape="$(cat <&3)"
exec 3<&-
counted="$(printf '%s\n' "$scrape" | grep '^tensorop_requests_total{' || true)"
expected="tensorop_requests_total{method=\"$method\",op=\"slice\",backend=\"cpu\",code=\"OK\"} 50"
if [ "$counted" != "$expected" ]; then
  echo "FAIL: tensord counted:" >&2
  printf '%s\n' "$counted" >&2
  echo "expected exactly: $expected" >&2
  status=1
fi

if [ "$status" -eq 0 ]; then echo "ghz smoke: 50 $method calls, 50 OK"; fi
exit "$status"
