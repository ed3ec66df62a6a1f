#!/usr/bin/env bash
# Bulk data: tensord against the bare baseline (bench/bulk/bare_server.cc: the
# same wire format answered with pre-serialized bytes, no parsing, no work),
# both on loopback, in one run, rounds alternating between the two servers:
#   - Run round trips of each --unary-mib size (a 1-D uint8 Slice copying all
#     of it: N in, N out) under ghz at -c 1 and -c 2, and the largest one
#     through RunStream at -c 2 (its result in 1 MiB parts);
#   - a RunStream result of --stream-mib (1 MiB parts) and a RunChunked upload
#     of --upload-mib (1 MiB chunks, a 4 KiB result), driven by bulk_driver
#     (raw bytes both ways, so the client costs the same against both);
#   - the Python client's run of --python-mib against raw grpcio sending
#     pre-serialized bytes to the bare server (bench/bulk/python_bench.py), its
#     peak RSS over a --rss-gib input and result (bench/python_client.py --rss),
#     and a --shm-mib op with input and output in shared memory against numpy's
#     local copy, with calls over the Unix socket against TCP (bench/shm_bench.py,
#     on a tensord of its own).
# Each server's peak RSS is read from /proc/PID/status (VmHWM, reset through
# /proc/PID/clear_refs before each scenario, once tensord's buffer pool freed
# what earlier scenarios left) and given per request in flight, as a multiple
# of its payload (inputs + outputs): the baseline's is what gRPC itself holds.
#
#   bench/bulk/run.sh [--unary-mib "1 32"] [--stream-mib 256] [--upload-mib 1024]
#                     [--python-mib 32] [--rss-gib 1] [--shm-mib 32] [--rounds 3]
#                     [--no-python]                   (--rss-gib 0, --shm-mib 0: skip those)
#                     [--json FILE]    also writes the figures to FILE (for bench/run-all.sh)
#   TENSOROP_BIN=build-x/bin bench/bulk/run.sh    uses binaries already built there
#
# Prints the BENCHMARKS.md tables on stdout, the last one every target of the
# bulk-data issue with this run's figure; progress goes to stderr. Takes a few
# minutes with the defaults on two cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/scripts/lib.sh"

unary_mib="1 32"
stream_mib=256
upload_mib=1024
python_mib=32
rss_gib=1
shm_mib=32
rounds=3
python=1
json_out=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --unary-mib) unary_mib="$2"; shift 2 ;;
    --stream-mib) stream_mib="$2"; shift 2 ;;
    --upload-mib) upload_mib="$2"; shift 2 ;;
    --python-mib) python_mib="$2"; shift 2 ;;
    --rss-gib) rss_gib="$2"; shift 2 ;;
    --shm-mib) shm_mib="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --no-python) python=0; shift ;;
    --json) json_out="$2"; shift 2 ;;
    *) echo "usage: $0 [--unary-mib \"1 32\"] [--stream-mib N] [--upload-mib N]" \
            "[--python-mib N] [--rss-gib N] [--shm-mib N] [--rounds N] [--no-python]" \
            "[--json FILE]" >&2
     exit 2 ;;
  esac
done
mib=$((1 << 20))

bin="$(bench_bin_dir "$root" tensord bulk_bare_server bulk_driver)"
ghz="$("$root/bench/load/install-ghz.sh")"
apt_install jq curl

bench_scratch

# The largest message either way: the largest unary size plus room for its
# fields; never below tensord's default.
largest=0
for s in $unary_mib $python_mib; do [ "$s" -gt "$largest" ] && largest="$s"; done
message_mib=$(( largest + 1 > 64 ? largest + 1 : 64 ))
message_bytes=$(( message_mib * mib ))

# Waits for "$2 listening on HOST:PORT" in file $1 (from pid $3); prints PORT.
listening_port() {
  local i port
  for ((i = 0; i < 600; i++)); do
    port="$(sed -n "s/^$2 listening on .*:\([0-9][0-9]*\)\$/\1/p" "$1" | head -n 1)"
    if [ -n "$port" ]; then echo "$port"; return 0; fi
    kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  echo "run: $2 did not start:" >&2
  cat "$1" "$1.log" >&2 2>/dev/null || true
  return 1
}

# tensord as a user starts it (its request log goes to a file: part of the
# work measured), with the message limit raised only when a size needs it.
"$bin/tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= \
  --max_message_bytes="$message_bytes" >"$work/tensord" 2>"$work/tensord.log" &
servers+=("$!")
tensord_pid="$!"
tensord_port="$(listening_port "$work/tensord" tensord "$tensord_pid")"
metrics_port="$(sed -n 's/^tensord metrics on .*:\([0-9][0-9]*\)$/\1/p' "$work/tensord" | head -n 1)"
unary_bytes="$(for s in $unary_mib $python_mib; do echo $((s * mib)); done | sort -un | paste -sd,)"
# The baseline runs with the malloc settings tensord makes for itself (large
# blocks on transparent huge pages: server/memory/malloc_tuning.h; blocks mapped on
# their own from 4 MiB, 64 MiB kept free at the heap's top, one arena:
# server/process/main.cc),
# so the ratio is tensord's own work, not a difference in page faults.
malloc_tunables=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=4194304
malloc_tunables+=:glibc.malloc.trim_threshold=67108864:glibc.malloc.arena_max=1
GLIBC_TUNABLES="$malloc_tunables" "$bin/bulk_bare_server" --address=127.0.0.1:0 --unary_bytes="$unary_bytes" \
  --stream_bytes=$((stream_mib * mib)) --max_message_bytes="$message_bytes" \
  >"$work/bare" 2>"$work/bare.log" &
servers+=("$!")
bare_pid="$!"
bare_port="$(listening_port "$work/bare" bare "$bare_pid")"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
ticks_per_second="$(getconf CLK_TCK)"

# Runs "$@" against server $1 (tensord|bare) as measurement $2: the server's
# CPU ticks go to $work/$2.cpu, its RSS growth at the peak (kB) over the run
# to $work/$2.hwm.
measure() {
  local server="$1" label="$2" pid_var="${1}_pid" before rss kept=0
  shift 2
  local pid="${!pid_var}"
  # Both servers trim malloc's freed memory at the second one-second tick
  # after their last call (server/memory/memory_budget.h, IdleTrim): waiting for it
  # starts every round from the idle state, so its growth is all the memory
  # its calls take, not only what a round before left unused.
  sleep 2.2
  echo 5 >"/proc/$pid/clear_refs"  # VmHWM := VmRSS
  if [ "$server" = tensord ]; then
    # Buffers the pool kept from earlier calls (--buffer_pool_bytes) count as
    # this run's: they are resident for the calls to come.
    kept="$(curl -s "http://127.0.0.1:$metrics_port/metrics" |
            awk '$1 == "tensorop_buffer_pool_bytes" { print $2 }')"
  fi
  rss=$(( $(status_kb "$pid" VmRSS) - ${kept:-0} / 1024 ))
  before="$(cpu_ticks "$pid")"
  "$@"
  echo $(( $(cpu_ticks "$pid") - before )) >"$work/$label.cpu"
  echo $(( $(status_kb "$pid" VmHWM) - rss )) >"$work/$label.hwm"
}

# The largest RSS growth of `server` over the rounds of `tag`, to $work/$tag.$server.hwm.
peak_hwm() {  # tag server
  for r in $(seq 1 "$rounds"); do cat "$work/$1.$2.$r.hwm"; done | sort -g | tail -n 1 \
    >"$work/$1.$2.hwm"
}

# Waits (up to 20 s) for tensord's buffer pool to free what it kept from the
# scenarios before (it frees buffers unused for 10 s): measure counts the
# kept buffers as the calls' own, right for this scenario's, not for others'.
drain_pool() {
  local i kept
  for i in $(seq 1 40); do
    kept="$(curl -s "http://127.0.0.1:$metrics_port/metrics" |
            awk '$1 == "tensorop_buffer_pool_bytes" { print $2 }')"
    [ "${kept:-0}" = 0 ] && return 0
    sleep 0.5
  done
  echo "run: the buffer pool still keeps $kept bytes" >&2
}

proto=(--proto "$root/proto/tensorop/v1/tensorop.proto" --import-paths "$root/proto")
ghz_run() {  # server label payload calls concurrency [method]
  local port_var="${1}_port" method="${6:-Run}"
  echo "run: $2: ghz $method -n $4 -c $5 ($1)" >&2
  measure "$1" "$2" "$ghz" --insecure "${proto[@]}" --call "tensorop.v1.TensorOp/$method" \
    -B "$work/$3.bin" -n "$4" -c "$5" \
    --max-recv-message-size="${message_mib}MiB" --max-send-message-size="${message_mib}MiB" \
    -O json -o "$work/$2.json" "127.0.0.1:${!port_var}"
}
driver_run() {  # server label mode bytes calls [flag]
  local port_var="${1}_port"
  echo "run: $2: bulk_driver $3 --bytes=$4 --calls=$5 ${6:-} ($1)" >&2
  measure "$1" "$2" sh -c '"$@" >"$0"' "$work/$2.jsonl" "$bin/bulk_driver" "$3" \
    --target="127.0.0.1:${!port_var}" --bytes="$4" --calls="$5" ${6:+"$6"}
}

# The median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

rows=()
row() { local line="|" cell; for cell in "$@"; do line+=" $cell |"; done; rows+=("$line"); }
# The same row's figures for --json, one object a line in $work/rows.jsonl:
# scenario unit tensord bare target tensord_cpu_ms bare_cpu_ms tensord_rss bare_rss
# (ratio: tensord's throughput over the baseline's; rss: peak per request in
# flight over the payload).
json_row() {
  jq -nc --arg scenario "$1" --arg unit "$2" --argjson tensord "$3" --argjson bare "$4" \
    --arg target "$5" --argjson tensord_cpu_ms "$6" --argjson bare_cpu_ms "$7" \
    --argjson tensord_rss "$8" --argjson bare_rss "$9" \
    '{scenario: $scenario, unit: $unit, tensord: $tensord, bare: $bare, ratio: ($tensord / $bare),
      target: $target, tensord_cpu_ms: $tensord_cpu_ms, bare_cpu_ms: $bare_cpu_ms,
      tensord_rss_per_payload: $tensord_rss, bare_rss_per_payload: $bare_rss,
      rss_target: "≤ 1.25"}' >>"$work/rows.jsonl"
}
# The targets table: what is measured, its bound ("≥ 0.9", "≤ 1.25"), this
# run's figure, and whether the figure keeps the bound.
targets=()
target() {  # what bound figure
  local met
  met="$(awk -v f="$3" -v op="${2%% *}" -v b="${2##* }" \
    'BEGIN { print ((op == "≥" && f >= b) || (op == "≤" && f <= b)) ? "met" : "**not met**" }')"
  targets+=("| $1 | $2 | $3 | $met |")
}
# Beside tensord's figure: the baseline's (what gRPC itself holds for the same
# calls) and tensord's growth over it (what tensord's own work adds).
rss_target() {  # scenario tag in_flight payload_bytes
  local bare tensord over
  bare="$(rss_per_payload "$2.bare" "$3" "$4")"
  tensord="$(rss_per_payload "$2.tensord" "$3" "$4")"
  over="$(awk -v t="$tensord" -v b="$bare" 'BEGIN { printf "%.2f", t - b }')"
  target "$1: tensord's peak RSS per request in flight / payload (the bare baseline's: $bare; tensord's over it: $over)" \
    "≤ 1.25" "$tensord"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
cpu_ms() {  # label calls
  awk -v t="$(cat "$work/$1.cpu")" -v c="$2" -v hz="$ticks_per_second" \
    'BEGIN { printf "%.1f", t * 1000 / hz / c }'
}
rss_per_payload() {  # label in_flight payload_bytes
  awk -v kb="$(cat "$work/$1.hwm")" -v n="$2" -v p="$3" \
    'BEGIN { printf "%.2f", kb * 1024 / n / p }'
}

# Warm both servers up (connections, allocator, oneTBB's threads).
"$bin/bulk_driver" encode --bytes=$mib >"$work/warm.bin"
for server in tensord bare; do ghz_run "$server" "warm_$server" warm 50 2; done

# Round trips of a 1-D uint8 Slice copying all N bytes under ghz: `method`
# Run (the answer inline) or RunStream (in 1 MiB parts, which the baseline
# streams pre-serialized too).
round_trips() {  # method size_mib concurrency target label [order]
  local method="$1" size="$2" c="$3" bytes=$(( $2 * mib )) order="${6:-forward}" calls
  local payload="u$2.$order" tag="$1.u$2.$order.c$3" server r best errors
  calls=$(( 1024 / size )); [ "$calls" -lt 30 ] && calls=30; [ "$calls" -gt 500 ] && calls=500
  [ -f "$work/$payload.bin" ] ||
    "$bin/bulk_driver" encode --bytes="$bytes" --order="$order" >"$work/$payload.bin"
  drain_pool
  for r in $(seq 1 "$rounds"); do
    ghz_run tensord "$tag.tensord.$r" "$payload" "$calls" "$c" "$method"
    ghz_run bare "$tag.bare.$r" "$payload" "$calls" "$c" "$method"
  done
  for server in tensord bare; do
    best="$(for r in $(seq 1 "$rounds"); do
              echo "$(jq -r .rps "$work/$tag.$server.$r.json") $r"; done |
            sort -g | sed -n "$(( (rounds + 1) / 2 ))p" | cut -d' ' -f2)"
    eval "${server}_round=$best"
    eval "${server}_rps=$(jq -r .rps "$work/$tag.$server.$best.json")"
    errors="$(jq -r '[.statusCodeDistribution | to_entries[] | select(.key != "OK") | .value] | add // 0' \
      "$work/$tag.$server.$best.json")"
    [ "$errors" = 0 ] || { echo "run: $errors failed calls against $server:" >&2;
      jq -r '.errorDistribution' "$work/$tag.$server.$best.json" >&2; exit 1; }
  done
  peak_hwm "$tag" tensord
  peak_hwm "$tag" bare
  [ -z "$4" ] || target "$5 (ghz -c $c): calls/s, tensord / bare" "$4" \
    "$(ratio "$tensord_rps" "$bare_rps")"
  rss_target "$5 (ghz -c $c)" "$tag" "$c" $((2 * bytes))
  json_row "$5 (ghz -c $c, $calls calls)" calls/s "$tensord_rps" "$bare_rps" "$4" \
    "$(cpu_ms "$tag.tensord.$tensord_round" "$calls")" "$(cpu_ms "$tag.bare.$bare_round" "$calls")" \
    "$(rss_per_payload "$tag.tensord" "$c" $((2 * bytes)))" \
    "$(rss_per_payload "$tag.bare" "$c" $((2 * bytes)))"
  row "$5 (ghz -c $c, $calls calls)" \
    "$(printf '%.1f' "$tensord_rps") calls/s" "$(printf '%.1f' "$bare_rps") calls/s" \
    "**$(ratio "$tensord_rps" "$bare_rps")**" "$4" \
    "$(cpu_ms "$tag.tensord.$tensord_round" "$calls")" \
    "$(cpu_ms "$tag.bare.$bare_round" "$calls")" \
    "$(rss_per_payload "$tag.tensord" "$c" $((2 * bytes)))" \
    "$(rss_per_payload "$tag.bare" "$c" $((2 * bytes)))"
}

for size in $unary_mib; do
  for c in 1 2; do
    target=""
    [ "$size" -ge 32 ] && [ "$c" = 2 ] && target="≥ 0.85"
    [ "$size" -le 1 ] && target="≥ 0.9"
    round_trips Run "$size" "$c" "$target" "Run, $size MiB in + $size MiB out"
  done
done
# The same bytes read backwards: the forward copy is answered with the bytes
# tensord received, this one goes through the CPU kernel.
for size in $unary_mib; do
  target="≥ 0.85"
  [ "$size" -le 1 ] && target="≥ 0.9"
  round_trips Run "$size" 2 "$target" "Run, $size MiB in + $size MiB out read backwards" reversed
done
# The largest round trip through RunStream: the input read where it was
# received, the result streamed.
largest="$(printf '%s\n' $unary_mib | sort -n | tail -n 1)"
round_trips RunStream "$largest" 2 "" \
  "RunStream, $largest MiB in + $largest MiB out in 1 MiB parts"

# A streamed result and a chunked upload: GB/s of the median call.
streamed() {  # what label mode mib calls target [flag]
  local bytes=$(( $4 * mib )) server r s
  drain_pool
  for r in $(seq 1 "$rounds"); do
    driver_run tensord "$2.tensord.$r" "$3" "$bytes" "$5" "${7:-}"
    driver_run bare "$2.bare.$r" "$3" "$bytes" "$5" "${7:-}"
  done
  for server in tensord bare; do
    s="$(cat "$work/$2.$server".*.jsonl | jq -r .seconds | median)"
    eval "${server}_s=$s"
    eval "${server}_cpu=$(for r in $(seq 1 "$rounds"); do cat "$work/$2.$server.$r.cpu"; done | median)"
  done
  peak_hwm "$2" tensord
  peak_hwm "$2" bare
  echo "$tensord_cpu" >"$work/$2.tensord.cpu"
  echo "$bare_cpu" >"$work/$2.bare.cpu"
  [ -z "$6" ] || target "$1: GB/s, tensord / bare" "$6" "$(ratio "$bare_s" "$tensord_s")"
  rss_target "$1" "$2" 1 "$bytes"
  json_row "$1 ($5 calls a round)" GB/s \
    "$(awk -v b="$bytes" -v s="$tensord_s" 'BEGIN { printf "%.4f", b / s / 1e9 }')" \
    "$(awk -v b="$bytes" -v s="$bare_s" 'BEGIN { printf "%.4f", b / s / 1e9 }')" "$6" \
    "$(cpu_ms "$2.tensord" "$5")" "$(cpu_ms "$2.bare" "$5")" \
    "$(rss_per_payload "$2.tensord" 1 "$bytes")" "$(rss_per_payload "$2.bare" 1 "$bytes")"
  row "$1 ($5 calls a round)" \
    "$(awk -v b="$bytes" -v s="$tensord_s" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }')" \
    "$(awk -v b="$bytes" -v s="$bare_s" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }')" \
    "**$(ratio "$bare_s" "$tensord_s")**" "$6" \
    "$(cpu_ms "$2.tensord" "$5")" "$(cpu_ms "$2.bare" "$5")" \
    "$(rss_per_payload "$2.tensord" 1 "$bytes")" "$(rss_per_payload "$2.bare" 1 "$bytes")"
}
streamed "RunStream, a $stream_mib MiB result in 1 MiB parts" stream stream "$stream_mib" 3 "≥ 0.85"
streamed "RunChunked, a $upload_mib MiB upload in 1 MiB chunks, 4 KiB result" upload chunked \
  "$upload_mib" 2 "≥ 0.85"
# The same upload for an op that reads across all of it: tensord stores every byte.
streamed "RunChunked, the same upload, the op reading across all of it" upload-spread chunked \
  "$upload_mib" 2 "" --read=spread

echo "tensord $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') against the bare" \
  "baseline, loopback, $(nproc) cores shared by the clients and both servers; each row is the" \
  "median of $rounds rounds alternating between the two servers. Ratio: tensord's throughput" \
  "over the baseline's. Server CPU: user + system time of the server process per call." \
  "Peak RSS: each server's VmHWM growth over the run (tensord's counting the buffers its pool" \
  "kept from earlier calls) per request in flight, as a multiple of its payload (inputs +" \
  "outputs); the baseline's is what gRPC itself holds."
echo
echo "| scenario | tensord | bare baseline | ratio | target | tensord CPU ms/call | bare CPU ms/call | tensord peak RSS / payload | bare peak RSS / payload |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"

if [ "$python" = 1 ]; then
  # The client's venv, where scripts/python-test.sh makes it: the same wheel
  # (scripts/python-wheel.sh) and pins (tests/python/pins/newest.txt).
  venv="$root/build/python-venv"
  apt_install python3 python3-venv
  "$venv/bin/python" -c "" 2>/dev/null || { rm -rf "$venv"; python3 -m venv "$venv"; }
  if ! "$venv/bin/python" -c "import tensorop_client, numpy" 2>/dev/null; then
    wheel="$("$root/scripts/python-wheel.sh")"
    "$venv/bin/python" -m pip --disable-pip-version-check --quiet install "$wheel" \
      -r "$root/tests/python/pins/newest.txt" >&2
  fi
  echo "run: python_bench.py --bytes=$((python_mib * mib))" >&2
  "$venv/bin/python" "$here/python_bench.py" --tensord "127.0.0.1:$tensord_port" \
    --bare "127.0.0.1:$bare_port" --bytes $((python_mib * mib)) --rounds "$rounds" >"$work/python.json"
  echo
  jq -r '"Python, a \(.bytes / 1048576) MiB round trip (median of \(.rounds) rounds of \(.calls) calls, ms per call):",
    "Client.run against tensord \(.seconds.client_tensord * 1000 | round) ms;" +
    " raw grpcio against tensord \(.seconds.raw_tensord * 1000 | round) ms;" +
    " raw grpcio against the bare baseline \(.seconds.raw_bare * 1000 | round) ms;" +
    " numpy copy \(.seconds.numpy_copy * 1000 * 10 | round / 10) ms.",
    "- Client.run / raw grpcio on the bare baseline: **\(.client_vs_raw_bare * 100 | round / 100)×** the time" +
    " (as a throughput ratio: \(1 / .client_vs_raw_bare * 100 | round / 100); target ≥ 0.8)",
    "- raw grpcio, tensord / bare baseline: \(.raw_tensord_vs_raw_bare * 100 | round / 100)× the time",
    "- Client.run / numpy copy: \(.client_vs_numpy * 10 | round / 10)× the time"' "$work/python.json"
  target "Python Client.run, $python_mib MiB round trip: throughput / raw grpcio on the bare baseline" \
    "≥ 0.8" "$(jq -r '1 / .client_vs_raw_bare * 100 | round / 100' "$work/python.json")"

  if [ "$rss_gib" -gt 0 ]; then
    # The client holds the input and the result (2x the payload by themselves),
    # tensord as much again: skipped, and said so, where memory is short.
    available_gib=$(( $(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) >> 20 ))
    if [ "$available_gib" -ge $(( 8 * rss_gib )) ]; then
      echo "run: python_client.py --rss both --gib $rss_gib" >&2
      "$venv/bin/python" "$root/bench/python_client.py" --target "127.0.0.1:$tensord_port" \
        --rss both --gib "$rss_gib" --json >"$work/rss.json"
      echo
      jq -r '"Python, a \(.gib) GiB input and a \(.gib) GiB result in one Client.run:" +
        " \(.seconds * 100 | round / 100) s, peak client RSS \(.peak_bytes / 1073741824 * 100 | round / 100) GiB" +
        " = **\(.peak_per_payload * 100 | round / 100)×** the payload (target ≤ 2.5×; the input" +
        " and the result are 2× by themselves)"' "$work/rss.json"
      target "Python Client.run, a $rss_gib GiB input and result: peak client RSS / payload" \
        "≤ 2.5" "$(jq -r '.peak_per_payload * 100 | round / 100' "$work/rss.json")"
    else
      echo
      echo "Python, a $rss_gib GiB input and result: not run, $available_gib GiB available" \
        "(needs $(( 8 * rss_gib )))."
    fi
  fi

  if [ "$shm_mib" -gt 0 ]; then
    echo "run: shm_bench.py --mib $shm_mib" >&2
    "$venv/bin/python" "$root/bench/shm_bench.py" --tensord "$bin/tensord" --mib "$shm_mib" \
      --json "$work/shm.json" >&2
    echo
    jq -r '"Co-located (bench/shm_bench.py, its own tensord; medians of \(.rounds) alternating rounds):" +
      " a \(.mib) MiB Slice with input and output in shared memory \(.seconds.shm * 1e5 | round / 100) ms" +
      " against numpy np.copyto \(.seconds.numpy_copyto * 1e5 | round / 100) ms and .copy()" +
      " \(.seconds.numpy_copy * 1e5 | round / 100) ms: **\(.seconds.shm / .seconds.numpy_copyto * 100 | round / 100)×**" +
      " np.copyto (target ≤ 2×), \(.seconds.shm / .seconds.numpy_copy * 100 | round / 100)× .copy();" +
      " the bytes inline over the Unix socket \(.seconds.inline_uds * 1e3 | round) ms, over TCP" +
      " \(.seconds.inline_tcp * 1e3 | round) ms; 1 KiB calls (\(.small_rounds) rounds): the Unix socket" +
      " \(.seconds.small_tcp / .seconds.small_uds * 100 | round / 100)× the calls/s of TCP loopback."' \
      "$work/shm.json"
    target "Python, a $shm_mib MiB op with input and output in shared memory: time / numpy's np.copyto" \
      "≤ 2" "$(jq -r '.seconds.shm / .seconds.numpy_copyto * 100 | round / 100' "$work/shm.json")"
  fi
fi

echo
echo "Every target of the bulk-data issue, with this run's figure:"
echo
echo "| measured | target | this run | |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${targets[@]}"

if [ -n "$json_out" ]; then
  # The Python parts, where they ran, as their own scripts wrote them.
  for part in python rss shm; do
    [ -s "$work/$part.json" ] || echo null >"$work/$part.json"
  done
  jq -s --arg tree "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    --argjson rounds "$rounds" \
    --slurpfile python "$work/python.json" --slurpfile rss "$work/rss.json" \
    --slurpfile shm "$work/shm.json" \
    '{tree: $tree, rounds: $rounds, rows: ., python: $python[0], rss: $rss[0], shm: $shm[0]}' \
    "$work/rows.jsonl" >"$json_out"
fi
