#!/usr/bin/env bash
# Installs the Debian 12 packages tensorop needs, only those missing.
# Idempotent and quick when everything is present.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

apt_install \
  cmake ninja-build g++ pkg-config git ca-certificates \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
  libtbb-dev \
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd \
  libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libcpp-httplib-dev prometheus \
  libssl-dev openssl \
  clang libclang-rt-14-dev  # clang's sanitizer runtimes and libFuzzer: scripts/fuzz.sh
