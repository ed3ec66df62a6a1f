#!/usr/bin/env bash
# Installs the Debian 12 packages tensorop needs, only those missing.
# Idempotent and quick when everything is present.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/lib.sh"

# Besides the build's: the commands the tests run, prometheus (a real scrape of
# /metrics), openssl (the tests' certificates), curl (docs/kserve-v2.md's v2 HTTP
# example, run as written by tests/integration/inference_http_test.cc), python3
# (scripts/check_rooms.py), and for the package tests (tests/install/):
# dpkg-dev and file (cpack's DEB dependencies) and systemd (systemd-analyze),
# clang-tidy-14 (scripts/tidy.py).
apt_install \
  cmake ninja-build g++ pkg-config git ca-certificates \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
  libtbb-dev \
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd \
  libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libcpp-httplib-dev prometheus \
  libssl-dev openssl curl \
  python3 dpkg-dev file systemd \
  clang libclang-rt-14-dev \
  clang-tidy-14  # clang: sanitizer runtimes and libFuzzer for scripts/fuzz.sh
