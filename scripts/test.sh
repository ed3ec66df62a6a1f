#!/usr/bin/env bash
# The test command: installs what is missing, checks the formatting, builds,
# runs clang-tidy over what changed, and runs every test twice, in the release
# build and under AddressSanitizer + UndefinedBehaviorSanitizer (clang, which builds
# the fuzz targets in the same tree), the server's unit tests under ThreadSanitizer,
# each fuzz target for a bounded
# time, then the public conformance cases through a real tensord with tensorctl,
# the Python client's static checks (ruff, mypy --strict) and tests, the
# Kubernetes manifests' validation, every example in README.md and docs/ in a
# fresh clone of HEAD with nothing beside it (and in the working tree when it
# has changes), and the container
# image's build and test. Nothing here needs
# ../shared: the public cases are in tests/conformance/cases (ctest's
# docs.PublicCasesMatchShared compares them with ../shared's where it exists).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"
# Each stage's seconds, printed last (also when a stage fails), so that a CI
# log's tail says where the time went.
stage_names=() stage_seconds=() stage_start=$SECONDS
stage() {
  if [ "${#stage_names[@]}" -gt 0 ]; then stage_seconds+=($((SECONDS - stage_start))); fi
  stage_names+=("$1") stage_start=$SECONDS
  echo "== $1"
}
stage_times() {
  stage_seconds+=($((SECONDS - stage_start)))
  echo "== stage times (total $((SECONDS / 60)) min $((SECONDS % 60)) s)"
  for i in "${!stage_names[@]}"; do
    printf '%6d s  %s\n' "${stage_seconds[$i]}" "${stage_names[$i]}"
  done
}
trap stage_times EXIT
stage "setup (scripts/setup.sh)"
"$root/scripts/setup.sh"
# The sources as .clang-format writes them (include order too): seconds, so first.
stage "format (scripts/format.sh --check)"
"$root/scripts/format.sh" --check
# server/'s rooms: every include and link where docs/ARCHITECTURE.md allows it.
stage "rooms (scripts/check_rooms.py)"
python3 "$root/scripts/check_rooms.py"
# ghz for the load smoke test (server.GhzSmoke); a no-op once installed.
"$root/bench/load/install-ghz.sh" >/dev/null

run_suite() {
  local flavour="$1" dir="$2"
  stage "$flavour: build"
  "$root/scripts/build.sh" "$flavour"
  stage "$flavour: ctest"
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" --timeout 300
}

run_suite release "$root/build"

# clang-tidy (.clang-tidy: bugprone-*, functions of at most 80 lines and 7
# parameters) over the C++ changed since its tidy-base commit, with the release
# build's compile commands.
stage "tidy (scripts/tidy.py)"
python3 "$root/scripts/tidy.py"

# Sanitizers: abort on the first report. Container-overflow checks are off
# because Debian's gRPC and protobuf are not instrumented (false positives
# across that boundary).
export ASAN_OPTIONS="detect_container_overflow=0:abort_on_error=1:detect_leaks=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_suite asan "$root/build-asan"
unset ASAN_OPTIONS UBSAN_OPTIONS

# ThreadSanitizer: the server's unit tests (the scheduler's oneTBB hand-offs,
# concurrent metrics and logging), halting on the first report. The suites
# that go through gRPC are not run under TSan: Debian's gRPC and Abseil are not
# instrumented (RELIABILITY.md). tests/tsan.supp names only library frames.
stage "tsan: build (server unit tests)"
"$root/scripts/build.sh" tsan server_unit_tests
stage "tsan: ctest"
# CalibrationTest is left out: its CPU phase forks tbb::parallel_for from a
# thread outside oneTBB, a hand-off synchronised only inside the uninstrumented
# libtbb.so.12 (TSan reports the kernel's reads of the job's bytes); it runs in
# the release and ASan suites.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
  ctest --test-dir "$root/build-tsan" -R '^server\.' -E '^server\.CalibrationTest\.' \
        -LE integration --output-on-failure -j "$(nproc)" --timeout 300

# Fuzzing smoke: each libFuzzer target 30 s from its kept corpus (built in the ASan
# tree above: ASan + UBSan).
stage "fuzz (scripts/fuzz.sh)"
"$root/scripts/fuzz.sh" 30

# The public cases through the real server, as a user would run them.
stage "conformance (tests/conformance/cases and tests/conformance: release tensord, both backends, unary, streamed, through handles and as chains)"
log="$(mktemp)"
"$root/build/bin/tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"; stage_times' EXIT
port="$(tensord_port "$log" "$server")" || { cat "$log" >&2; exit 1; }
status=0
for backend in cpu opencl; do
  for mode in "" "--stream" "--handles" "--chain"; do
    echo "-- tensorctl conformance --backend $backend $mode"
    "$root/build/bin/tensorctl" conformance --target "127.0.0.1:$port" --backend "$backend" \
      $mode "$root/tests/conformance/cases" "$root/tests/conformance" || status=1
  done
done
kill -TERM "$server"
wait "$server" || status=1

# The Python client's static checks: ruff, and mypy --strict over the package.
stage "python lint (scripts/python-lint.sh)"
"$root/scripts/python-lint.sh" || status=1

# The Python client and grpcurl against the release tensord (pytest in tests/python).
stage "python client and grpcurl (tests/python)"
"$root/scripts/python-test.sh" || status=1

# The Kubernetes manifests: every overlay rendered and decoded strictly.
stage "kubernetes manifests (deploy/k8s)"
"$root/scripts/k8s-validate.sh" || status=1

# Every example in README.md and docs/ as written, against a real tensord on the
# addresses the docs dial, outputs compared. Here, not in ctest: it needs the venv
# and grpcurl that python-test.sh installs after the ctest suites, and its fixed
# ports (50051, 8000, 9464) would collide with tests that ctest runs beside it.
# In a tree that differs from HEAD (edits, new files) they run here as well;
# in a clean one (CI's clone) the fresh clone below runs the very same pages.
if [ -n "$(git -C "$root" status --porcelain)" ]; then
  stage "doc examples (scripts/run_doc_examples.py)"
  python3 "$root/scripts/run_doc_examples.py" --tensord "$root/build/bin/tensord" || status=1
fi

# The repository stands alone: the examples of README.md (its tour) and docs/ as
# written in a `git clone` of HEAD in a scratch directory, with no ../shared beside
# it, build/bin's tensord and tensorctl in its build/bin.
stage "doc examples in a fresh clone of HEAD (scripts/run_doc_examples.py --fresh-clone)"
python3 "$root/scripts/run_doc_examples.py" --fresh-clone --tensord "$root/build/bin/tensord" ||
  status=1

# The container image: built with podman, its tensord health-checked and run
# against the public cases.
stage "container image (Dockerfile)"
TENSORCTL="$root/build/bin/tensorctl" "$root/scripts/container-test.sh" || status=1
exit "$status"
