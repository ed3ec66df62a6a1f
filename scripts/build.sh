#!/usr/bin/env bash
# Configures (once) and builds one flavour of tensorop with Ninja.
#   scripts/build.sh          release build in build/ (binaries in build/bin/)
#   scripts/build.sh asan     AddressSanitizer + UBSan build in build-asan/
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
flavour="${1:-release}"
case "$flavour" in
  release) dir="$root/build"; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir="$root/build-asan"
        flags=(-DCMAKE_BUILD_TYPE=Debug -DTENSOROP_SANITIZE=ON -DTENSOROP_BUILD_BENCH=OFF) ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
shift || true
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root" -B "$dir" -G Ninja -DTENSOROP_WERROR=ON "${flags[@]}"
fi
# Two cores: one job per core keeps memory and the machine responsive.
ninja -C "$dir" -j "${TENSOROP_JOBS:-$(nproc)}" "$@"
