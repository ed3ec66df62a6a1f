#!/usr/bin/env bash
# cmake --install into a temporary prefix, then a project outside the tree
# builds against it twice (find_package(tensorop CONFIG) and pkg-config
# tensorop) and each build runs one public conformance case byte-exact on the
# installed tensord.
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
            include/tensorop/tensorop/v1/tensorop.grpc.pb.h lib/cmake/tensorop/tensoropConfig.cmake \
            lib/pkgconfig/tensorop.pc; do
  [ -e "$prefix/$file" ] || { echo "install: no $file in the prefix" >&2; exit 1; }
done
# Nothing of the tree's own layout leaks into include/ itself.
[ "$(ls "$prefix/include")" = "tensorop" ] || { echo "install: include/ holds $(ls "$prefix/include")" >&2; exit 1; }

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
[ "$out" = "$case_name: byte-exact" ] || { echo "cmake consumer: $out" >&2; exit 1; }

# pkg-config --cflags --libs tensorop.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -O1 -o "$work/consumer-pc" "$work/consumer/main.cc" $(pkg-config --cflags --libs tensorop)
out_pc="$("$work/consumer-pc" "127.0.0.1:$port" "$case_file" "$case_name")"
[ "$out_pc" = "$case_name: byte-exact" ] || { echo "pkg-config consumer: $out_pc" >&2; exit 1; }
echo "install: find_package and pkg-config consumers ran $case_name byte-exact on the installed tensord ($(pkg-config --modversion tensorop))"
