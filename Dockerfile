# tensord (gRPC server) and tensorctl (CLI) on Debian 12.
#
#   docker build -t tensorop .
#   docker run --rm -p 50051:50051 -p 9464:9464 -p 8000:8000 tensorop
#
# Two stages: the build stage has the -dev packages and builds only tensord and
# tensorctl (no tests, no benchmarks); the runtime stage has only the shared
# libraries they load, plus PoCL so the OpenCL backend has a CPU device.
# scripts/container-test.sh builds this image and runs the conformance cases
# against it.

# ---------------------------------------------------------------- build stage
FROM debian:bookworm AS build

# Packages first: this layer only changes when the list does.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      libtbb-dev \
      opencl-headers ocl-icd-opencl-dev \
      nlohmann-json3-dev libcpp-httplib-dev \
 && rm -rf /var/lib/apt/lists/*

# Only what tensord and tensorctl are built from (.dockerignore keeps
# client/python and build output out of the context).
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY proto/ proto/
COPY core/ core/
COPY kernels/ kernels/
COPY server/ server/
COPY client/ client/

# Release at -O2, the optimisation of the tested build (scripts/build.sh builds
# RelWithDebInfo): CMake's -O3 default would differ, and GCC 12 warns differently
# at -O3 (warnings are errors). No debug info, so nothing to strip but symbols.
# The version tensord reports (.git is not in the context):
# scripts/container-test.sh passes cmake/version.cmake's answer.
ARG TENSOROP_VERSION=
RUN cmake -S . -B /build -G Ninja \
      -DTENSOROP_VERSION_OVERRIDE="$TENSOROP_VERSION" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
      -DTENSOROP_BUILD_TESTS=OFF \
      -DTENSOROP_BUILD_BENCH=OFF \
 && ninja -C /build -j"$(nproc)" tensord tensorctl \
 && strip /build/bin/tensord /build/bin/tensorctl

# -------------------------------------------------------------- runtime stage
FROM debian:bookworm

# The runtime libraries of tensord and tensorctl (gRPC pulls in its own:
# c-ares, re2, OpenSSL, zlib), the OpenCL ICD loader and PoCL, the CPU OpenCL
# device. PoCL compiles kernels at run time, so it brings clang/LLVM 15 and a
# linker: most of the image's size.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 \
      libtbb12 \
      ocl-icd-libopencl1 pocl-opencl-icd \
      libcpp-httplib0.11 \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 10001 tensord \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tensord

COPY --from=build /build/bin/tensord /build/bin/tensorctl /usr/local/bin/

# PoCL compiles each kernel once and caches it. In Kubernetes the root
# filesystem is read-only and /tmp an emptyDir, so the cache lives there.
ENV POCL_CACHE_DIR=/tmp/pocl

USER 10001:10001
EXPOSE 50051 9464 8000

# grpc.health.v1.Health/Check on the server (""): exit 0 when SERVING.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/tensorctl", "health", "--target", "127.0.0.1:50051"]

# SIGTERM drains (docs/deploy.md, "Stopping"): within --shutdown_grace_seconds (30) and
# 5 s more at most, so give `docker stop -t 35` (docker's default 10 s can cut a drain
# short with SIGKILL); a second SIGTERM stops at once.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tensord"]
# Inside a container 127.0.0.1 (tensord's default for /metrics) is unreachable
# from the published port, so the image asks for every interface explicitly.
CMD ["--address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9464"]

LABEL org.opencontainers.image.title="tensord" \
      org.opencontainers.image.description="gRPC server for tensor data-movement operators (Slice, StridedSlice, Split, ScatterElements) on oneTBB and OpenCL, with the tensorctl CLI" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm"
