#!/usr/bin/env bash
# ghz against a real tensord's Open Inference Protocol service: 50 small
# ModelInfer calls (slice) through server reflection, no .proto, every one OK,
# as ghz and as tensord's own /metrics count them.
#   ghz_v2_smoke_test.sh TENSORD REQUEST_JSON
# REQUEST_JSON is a ModelInferRequest in protobuf's JSON mapping
# (bench/load/cases/v2_slice_small.json). ghz comes from
# bench/load/install-ghz.sh (~/.local/bin/ghz, or $GHZ, or PATH); without it
# the test fails, it does not skip.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
tensord="$1" request="$2"

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

"$tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 >"$work/out" 2>"$work/log" &
server=$!
if ! port="$(tensord_port "$work/out" "$server")" ||
   ! metrics_port="$(tensord_port "$work/out" "$server" metrics)"; then
  echo "FAIL: tensord did not start:" >&2
  cat "$work/log" >&2
  exit 1
fi

"$ghz" --insecure --call inference.GRPCInferenceService/ModelInfer -D "$request" -n 50 -c 4 \
  -O json -o "$work/report.json" "127.0.0.1:$port"

status=0
if ! grep -q '"count":50,' "$work/report.json" ||
   ! grep -q '"statusCodeDistribution":{"OK":50}' "$work/report.json"; then
  echo "FAIL: ghz did not see 50 OK calls:" >&2
  cat "$work/report.json" >&2
  status=1
fi

exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
scrape="$(cat <&3)"
exec 3<&-
counted="$(printf '%s\n' "$scrape" | grep '^tensorop_requests_total{' || true)"
expected='tensorop_requests_total{method="ModelInfer",op="slice",backend="cpu",code="OK"} 50'
if [ "$counted" != "$expected" ]; then
  echo "FAIL: tensord counted:" >&2
  printf '%s\n' "$counted" >&2
  echo "expected exactly: $expected" >&2
  status=1
fi

if [ "$status" -eq 0 ]; then echo "ghz v2 smoke: 50 ModelInfer calls, 50 OK"; fi
exit "$status"
