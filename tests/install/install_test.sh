#!/usr/bin/env bash
# cmake --install into a temporary prefix, then a project outside the tree
# builds against it twice (find_package(tensorop CONFIG) and pkg-config
# tensorop) and each build runs one public conformance case byte-exact on the
# installed tensord. The headers are included as <tensorop/client/client.h>
# with <prefix>/include the only include path the package gives, beside the
# consumer's own client/client.h (issue 46: a generic client/ path collides);
# a planted copy of the headers with the tree's generic paths must not build.
#   install_test.sh BUILD_DIR CASES_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/scripts/lib.sh"
build="$(cd "$1" && pwd)"
cases="$2"
case_file="$cases/slice.json"
case_name="slice/doc_example_2_negative_strides"
bench_scratch  # $work, and $servers stopped on exit (scripts/lib.sh)
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for file in bin/tensord bin/tensorctl lib/libtensorop_client.a include/tensorop/client/client.h \
            include/tensorop/v1/tensorop.grpc.pb.h include/tensorop/grpc/health/v1/health.grpc.pb.h \
            lib/cmake/tensorop/tensoropConfig.cmake lib/pkgconfig/tensorop.pc; do
  [ -e "$prefix/$file" ] || { echo "install: no $file in the prefix" >&2; exit 1; }
done
# Nothing of the tree's own layout leaks into include/ itself.
[ "$(ls "$prefix/include")" = "tensorop" ] || { echo "install: include/ holds $(ls "$prefix/include")" >&2; exit 1; }
# The installed headers name one another by the package's prefix only.
if leaks="$(grep -rnE '#include ["<](client|core|server|kernels|proto|grpc/health)/|#include "tensorop/' \
              "$prefix/include")"; then
  echo "install: headers include generic paths:" >&2; echo "$leaks" >&2; exit 1
fi
# The one include path each way gives: <prefix>/include (never .../include/tensorop).
# shellcheck disable=SC2016
dirs="$(grep -h 'INTERFACE_INCLUDE_DIRECTORIES' "$prefix/lib/cmake/tensorop/tensoropTargets.cmake" | sort -u)"
[ "$dirs" = '  INTERFACE_INCLUDE_DIRECTORIES "${_IMPORT_PREFIX}/include"' ] ||
  { echo "install: the exported targets' include directories: $dirs" >&2; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
only_i="$(pkg-config --cflags-only-I tensorop | xargs)"
[[ "$only_i" == -I* && "$only_i" != *" "* && "$(realpath -m "${only_i#-I}")" == "$(realpath "$prefix/include")" ]] ||
  { echo "install: pkg-config --cflags-only-I tensorop: $only_i" >&2; exit 1; }

"$prefix/bin/tensord" --address=127.0.0.1:0 --metrics_address= --http_address= --backends=cpu \
  >"$work/tensord.out" 2>"$work/tensord.log" &
servers+=($!)
port="$(tensord_port "$work/tensord.out" "$!")"

# find_package(tensorop CONFIG REQUIRED), from outside the tree.
cp -r "$root/tests/install/consumer" "$work/consumer"
cmake -S "$work/consumer" -B "$work/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
ninja -C "$work/consumer-build" >"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
out="$("$work/consumer-build/consumer" "127.0.0.1:$port" "$case_file" "$case_name")"
[ "$out" = "$case_name: byte-exact (consumer)" ] || { echo "cmake consumer: $out" >&2; exit 1; }

# pkg-config --cflags --libs tensorop, the consumer's own folder first as in its CMakeLists.txt.
# shellcheck disable=SC2046
g++ -O1 -o "$work/consumer-pc" -I"$work/consumer" "$work/consumer/main.cc" \
  $(pkg-config --cflags --libs tensorop)
out_pc="$("$work/consumer-pc" "127.0.0.1:$port" "$case_file" "$case_name")"
[ "$out_pc" = "$case_name: byte-exact (consumer)" ] || { echo "pkg-config consumer: $out_pc" >&2; exit 1; }

# Planted: the same headers with the tree's generic paths ("client/case_format.h",
# as before issue 46) are not found through the package's include path, or would
# be the consumer's own: the consumer does not build.
mkdir -p "$work/leaky/lib"
cp -r "$prefix/include" "$work/leaky/include"
cp -r "$prefix/lib/pkgconfig" "$work/leaky/lib/pkgconfig"
find "$work/leaky/include/tensorop/client" -name '*.h' -exec \
  sed -i -E 's@#include <tensorop/(client/[^>]*)>@#include "\1"@' {} +
grep -q '#include "client/case_format.h"' "$work/leaky/include/tensorop/client/case_compare.h" ||
  { echo "install: the planted generic include is missing" >&2; exit 1; }
# shellcheck disable=SC2046
if g++ -fsyntax-only -I"$work/consumer" "$work/consumer/main.cc" \
     $(PKG_CONFIG_PATH="$work/leaky/lib/pkgconfig" pkg-config --cflags tensorop) >"$work/leaky.log" 2>&1; then
  echo "install: a consumer built against headers that include generic client/ paths" >&2; exit 1
fi
grep -q 'client/case_format.h: No such file' "$work/leaky.log" ||
  { echo "install: the planted leak failed otherwise:" >&2; cat "$work/leaky.log" >&2; exit 1; }
echo "install: find_package and pkg-config consumers (with a client/client.h of their own) ran $case_name byte-exact on the installed tensord ($(pkg-config --modversion tensorop)); a planted generic include is refused"
