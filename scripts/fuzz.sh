#!/usr/bin/env bash
# Builds the libFuzzer targets (scripts/build.sh fuzz: the ASan tree, clang) and
# runs each for a bounded time from its kept corpus (tests/fuzz/corpus/TARGET),
# as many at a time as there are cores (FUZZ_JOBS=N to choose); fails on any
# crash, leak, timeout or out-of-memory.
#   scripts/fuzz.sh [SECONDS]        each target SECONDS (default 30)
#   scripts/fuzz.sh --seed           regenerate seeds from the conformance cases
#                                    and the flag files and merge them (and any
#                                    FUZZ_WORK_DIR corpora) into the kept corpus
# FUZZ_TARGETS="run_fuzzer ..." picks targets; FUZZ_WORK_DIR keeps what a run
# finds (new inputs in FUZZ_WORK_DIR/TARGET, crashes as FUZZ_WORK_DIR/TARGET-*).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build-asan/bin"
corpus="$root/tests/fuzz/corpus"
targets=(${FUZZ_TARGETS:-run_fuzzer run_bidi_fuzzer run_chunked_fuzzer case_format_fuzzer
         flag_file_fuzzer http_request_fuzzer handles_fuzzer})

"$root/scripts/setup.sh"
"$root/scripts/build.sh" fuzz >/dev/null

# libstdc++ and Debian's gRPC/protobuf/TBB are not instrumented: no container
# annotations to trust across that boundary.
export ASAN_OPTIONS="detect_container_overflow=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

# Inputs up to 64 KiB (make_seeds skips longer cases); a single input may not
# allocate past rss_limit_mb (the harness caps requests at 48 MiB,
# tests/fuzz/fuzz_support.h).
options=(-timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1)

if [ "${1:-}" = "--seed" ]; then
  seeds="$(mktemp -d)"
  trap 'rm -rf "$seeds"' EXIT
  "$bin/make_seeds" "$root/tests/conformance/cases" "$seeds" \
    "$root"/deploy/k8s/base/*.flags "$root"/deploy/k8s/overlays/*/*.flags
  for target in "${targets[@]}"; do
    name="${target%_fuzzer}"
    mkdir -p "$corpus/$name"
    extra=()
    for dir in "$seeds/$name" "$root/tests/fuzz/seeds/$name" "${FUZZ_WORK_DIR:-/nonexistent}/$name"; do
      if [ -d "$dir" ]; then extra+=("$dir"); fi
    done
    echo "== merge $target"
    "$bin/$target" "${options[@]}" -merge=1 "$corpus/$name" "${extra[@]}" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true
  done
  du -sh "$corpus"
  exit 0
fi

seconds="${1:-30}"
work="${FUZZ_WORK_DIR:-}"
if [ -z "$work" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
# One target per core at a time: each libFuzzer run is one process, so the
# test command's fuzzing takes its time per core, not per target.
jobs="${FUZZ_JOBS:-$(nproc)}"
run_target() {
  local target="$1" name="${1%_fuzzer}"
  mkdir -p "$work/$name"
  # New inputs go to the scratch directory (the first); the kept corpus is read.
  "$bin/$target" "${options[@]}" -max_total_time="$seconds" \
    -artifact_prefix="$work/$name-" "$work/$name" "$corpus/$name" >"$work/$name.log" 2>&1
}
report() {
  local target="$1" code="$2" name="${1%_fuzzer}"
  echo "== fuzz $target for ${seconds}s (corpus tests/fuzz/corpus/$name)"
  if [ "$code" -ne 0 ]; then
    echo "FAILED: $target (log below; reproducer: $bin/$target $work/$name-*)"
    tail -n 60 "$work/$name.log"
    return 1
  fi
  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb" \
    "$work/$name.log" | tail -n 5
}
status=0
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  batch=("${targets[@]:first:jobs}")
  pids=()
  for target in "${batch[@]}"; do
    run_target "$target" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    code=0
    wait "${pids[$i]}" || code=$?
    report "${batch[$i]}" "$code" || status=1
  done
done
exit "$status"
