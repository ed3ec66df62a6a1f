#!/usr/bin/env bash
# Soak: ghz offers a tensord with a bounded memory budget twice the small-request
# capacity measured first, for a bounded time, in a mix of small Runs (64 B in),
# 1 MiB ScatterElements Runs and 64 MiB RunStreams, all at once. Prints a
# markdown summary (the figures RELIABILITY.md keeps) on stdout; progress on
# stderr. Exits 1 when the server crashed, a call ended with a code other than
# OK or RESOURCE_EXHAUSTED, or its memory did not come back down.
#
#   bench/soak/run.sh                          builds release tensord/tensorctl in build/
#   SOAK_SECONDS=600 bench/soak/run.sh         a longer soak (default 60 s)
#   SOAK_MAX_MEMORY_BYTES=... bench/soak/run.sh   the budget (default 512 MiB)
#   TENSOROP_BIN=build-x/bin bench/soak/run.sh    binaries already built there
#
# Not part of CI: on two shared cores ghz competes with the server.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
load_dir="$root/bench/load"
. "$root/scripts/lib.sh"
seconds="${SOAK_SECONDS:-60}"
budget="${SOAK_MAX_MEMORY_BYTES:-536870912}"

bin="$(bench_bin_dir "$root" tensord tensorctl)"
ghz="$("$load_dir/install-ghz.sh")"
apt_install jq curl  # jq reads ghz's reports; curl scrapes /metrics

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
  if [ -n "${SOAK_KEEP:-}" ]; then echo "soak: reports kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

awk -f "$load_dir/make_scatter_case.awk" >"$work/scatter_elements_1mib.json"
"$bin/tensorctl" encode "$load_dir/cases/slice_small.json" --case load/slice_small \
  >"$work/slice_small.bin"
"$bin/tensorctl" encode "$work/scatter_elements_1mib.json" --case load/scatter_elements_1mib \
  >"$work/scatter_elements_1mib.bin"
"$bin/tensorctl" encode "$load_dir/cases/stream_64mib.json" --case load/stream_64mib \
  >"$work/stream_64mib.bin"

"$bin/tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= --backends=cpu \
  --max_memory_bytes="$budget" --idle_timeout_seconds=10 \
  >"$work/tensord.out" 2>"$work/tensord.log" &
server_pid="$!"
if ! port="$(tensord_port "$work/tensord.out" "$server_pid")" ||
   ! metrics_port="$(tensord_port "$work/tensord.out" "$server_pid" metrics)"; then
  echo "soak: tensord did not start" >&2
  cat "$work/tensord.log" >&2
  exit 1
fi

rss_mib() { awk -v f="$2:" '$1 == f { print int($2 / 1024) }' "/proc/$1/status"; }
metric() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
ghz_run() {  # label method payload [ghz flags...]
  local label="$1" method="$2" payload="$3"
  shift 3
  "$ghz" --insecure --call "tensorop.v1.TensorOp/$method" -B "$work/$payload.bin" \
    --max-recv-message-size=80MB --max-send-message-size=80MB \
    -O json -o "$work/$label.json" "$@" "127.0.0.1:$port" >/dev/null
}

echo "soak: warming up and measuring small-request capacity" >&2
ghz_run warm Run slice_small -n 2000 -c 32
baseline="$(rss_mib "$server_pid" VmRSS)"
ghz_run capacity Run slice_small -z 10s -c 32
capacity="$(jq -r '.rps | floor' "$work/capacity.json")"
rate=$(( 2 * capacity ))
echo "soak: capacity $capacity small Runs/s; offering $rate/s plus 1 MiB and streamed" \
  "requests for ${seconds}s" >&2

# The mix, all at once: small Runs at twice the capacity (enough concurrency to
# keep the rate when calls slow down), closed loops of 1 MiB Runs and of 64 MiB
# RunStreams on top.
ghz_run small Run slice_small -z "${seconds}s" --rps "$rate" -c 256 --connections 8 &
small_pid="$!"
ghz_run scatter Run scatter_elements_1mib -z "${seconds}s" -c 16 --connections 4 &
scatter_pid="$!"
ghz_run stream RunStream stream_64mib -z "${seconds}s" -c 8 --connections 4 &
stream_pid="$!"
peak_reserved=0
while kill -0 "$small_pid" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || { echo "soak: tensord died" >&2; exit 1; }
  reserved="$(metric tensorop_memory_reserved_bytes)"
  [ "${reserved:-0}" -gt "$peak_reserved" ] && peak_reserved="$reserved"
  sleep 1
done
wait "$small_pid" "$scatter_pid" "$stream_pid"
peak="$(rss_mib "$server_pid" VmHWM)"
# The buffer pool frees what nobody took for 10 s; the ticker looks each second.
sleep 12
after="$(rss_mib "$server_pid" VmRSS)"
reserved_after="$(metric tensorop_memory_reserved_bytes)"
refusals="$(metric tensorop_memory_refusals_total)"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""

# Calls per status code; the p99 of OK small Runs from ghz's per-call details.
codes() { jq -r '.statusCodeDistribution | to_entries | map("\(.key) \(.value)") | join(", ")' \
  "$work/$1.json"; }
# ghz ends a -z run by closing its connections: the calls then in flight fail
# on the client's side ("use of closed network connection", "the client
# connection is closing"). They are counted apart; any other error is bad.
cut_filter='test("use of closed network connection|the client connection is closing")'
cut_at_end() { jq -r "[.errorDistribution | to_entries[] | select(.key | $cut_filter) | .value]
                      | add // 0" "$work/$1.json"; }
bad_codes() { jq -r "[.errorDistribution | to_entries[]
                      | select((.key | $cut_filter) or (.key | test(\"code = ResourceExhausted\"))
                               | not) | .value] | add // 0" "$work/$1.json"; }
ok_p99_ms() { jq -r '[.details[] | select(.status == "OK") | .latency] | sort
                     | if length == 0 then "n/a"
                       else .[((length * 99 / 100) | floor)] / 1e6 | . * 100 | round / 100 end' \
  "$work/$1.json"; }

echo "Soak of $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'):" \
  "${seconds} s, $(nproc) cores shared by ghz and tensord, loopback," \
  "--max_memory_bytes=$budget, --idle_timeout_seconds=10, --backends=cpu."
echo
echo "| load | offered | calls | codes | cut by ghz at the end | other errors | p99 of OK calls (ms) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
row() {  # what offered label
  echo "| $1 | $2 | $(jq -r .count "$work/$3.json") | $(codes "$3") | $(cut_at_end "$3") |" \
    "$(bad_codes "$3") | $(ok_p99_ms "$3") |"
}
row "small Run (64 B in)" "$rate/s (2 × $capacity/s measured), -c 256" small
row "ScatterElements Run, 1 MiB in and out" "closed loop, -c 16" scatter
row "RunStream, 64 MiB result" "closed loop, -c 8" stream
echo
echo "- server RSS: baseline $baseline MiB, peak $peak MiB, 5 s after the load $after MiB;" \
  "budget reserved at peak $(( peak_reserved / 1048576 )) MiB, after the load $reserved_after bytes;" \
  "budget refusals $refusals"
echo "- tensord exit status after SIGTERM: $status"

bad=$(( $(bad_codes small) + $(bad_codes scatter) + $(bad_codes stream) ))
if [ "$status" -ne 0 ] || [ "$bad" -ne 0 ] || [ "$reserved_after" != "0" ] \
   || [ "$after" -gt $(( baseline + 64 )) ]; then
  echo "soak: FAILED (exit $status, $bad calls with other codes, reserved after $reserved_after," \
    "RSS after $after MiB vs baseline $baseline MiB)" >&2
  exit 1
fi
