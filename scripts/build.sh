#!/usr/bin/env bash
# Configures (once) and builds one flavour of tensorop with Ninja.
#   scripts/build.sh          release build in build/ (binaries in build/bin/)
#   scripts/build.sh asan     AddressSanitizer + UBSan build in build-asan/
#   scripts/build.sh tsan     ThreadSanitizer build in build-tsan/ (no benchmarks)
#   scripts/build.sh fuzz     libFuzzer targets (clang, ASan + UBSan) in build-fuzz/
#                             (default target: fuzzers; scripts/fuzz.sh runs them)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
flavour="${1:-release}"
case "$flavour" in
  release) dir="$root/build"; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir="$root/build-asan"
        flags=(-DCMAKE_BUILD_TYPE=Debug -DTENSOROP_SANITIZE=ON -DTENSOROP_BUILD_BENCH=OFF) ;;
  # -O1: ThreadSanitizer's advice, and a fifth less compile time than -O2 here.
  tsan) dir="$root/build-tsan"
        flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG"
               -DTENSOROP_TSAN=ON -DTENSOROP_BUILD_BENCH=OFF) ;;
  fuzz) dir="$root/build-fuzz"
        flags=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" -DTENSOROP_FUZZ=ON
               -DTENSOROP_BUILD_TESTS=OFF -DTENSOROP_BUILD_BENCH=OFF) ;;
  *) echo "usage: $0 [release|asan|tsan|fuzz]" >&2; exit 2 ;;
esac
shift || true
if [ "$flavour" = fuzz ] && [ "$#" -eq 0 ]; then set -- fuzzers; fi
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DTENSOROP_WERROR=ON "${flags[@]}"
fi
# Two cores: one job per core keeps memory and the machine responsive.
ninja -C "$dir" -j "${TENSOROP_JOBS:-$(nproc)}" "$@"
