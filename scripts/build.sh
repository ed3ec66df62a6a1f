#!/usr/bin/env bash
# Configures (once) and builds one flavour of tensorop with Ninja.
#   scripts/build.sh          release build in build/ (binaries in build/bin/)
#   scripts/build.sh asan     AddressSanitizer + UBSan build in build-asan/ (clang), the
#                             libFuzzer targets with it
#   scripts/build.sh tsan     ThreadSanitizer build in build-tsan/ (no benchmarks)
#   scripts/build.sh fuzz     the same tree as asan, target fuzzers (what
#                             scripts/fuzz.sh runs)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
flavour="${1:-release}"
case "$flavour" in
  release) dir="$root/build"; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  # clang, not GCC: at -O0 it compiled a unity batch of the server in 25 s where
  # GCC took 40, and libFuzzer's targets build in the same tree (every object but
  # the tests' with fuzzer-no-link's coverage, only the targets with libFuzzer's main), so
  # the fuzzers need no build of their own.
  asan|fuzz) dir="$root/build-asan"
        flags=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DTENSOROP_FUZZ=ON
               -DTENSOROP_BUILD_BENCH=OFF) ;;
  # -O1: ThreadSanitizer's advice, and a fifth less compile time than -O2 here.
  tsan) dir="$root/build-tsan"
        flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG"
               -DTENSOROP_TSAN=ON -DTENSOROP_BUILD_BENCH=OFF) ;;
  *) echo "usage: $0 [release|asan|tsan|fuzz]" >&2; exit 2 ;;
esac
shift || true
if [ "$flavour" = fuzz ] && [ "$#" -eq 0 ]; then set -- fuzzers; fi
# An ASan tree configured before it was clang's (GCC, no fuzzers) starts afresh.
if [ "$dir" = "$root/build-asan" ] && [ -f "$dir/CMakeCache.txt" ] &&
   ! grep -q '^TENSOROP_FUZZ:BOOL=ON$' "$dir/CMakeCache.txt"; then
  rm -rf "$dir"
fi
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DTENSOROP_WERROR=ON "${flags[@]}"
fi
# Two cores: one job per core keeps memory and the machine responsive.
ninja -C "$dir" -j "${TENSOROP_JOBS:-$(nproc)}" "$@"
