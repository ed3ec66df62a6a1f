#!/usr/bin/env bash
# What a lent GPU host checks beyond ../shared/gpu/run.sh (BENCHMARKS.md, "GPU"): every case
# of tests/conformance (every operator, views, dtypes) through handles and chains on the GPU,
# the OpenCL device tests, and the integration tests that keep tensors, views and chains on
# the device.
#
#   bench/gpu-host.sh pack BUNDLE     here, after ../shared/gpu/bundle.sh build BUNDLE
#   bash BUNDLE/gpu-host.sh           on the GPU host, after `bash BUNDLE/run.sh correct`
#                                     (which points the ICD loader at NVIDIA's alone)
#   bash bench/gpu-measure.sh BUNDLE  on the GPU host: both of those and the kernels' figures
#                                     by profiling events and wall clock (issue 48)
set -u
if [ "${1:-}" = pack ]; then
  set -e
  root=$(cd "$(dirname "$0")/.." && pwd); out=$2; mkdir -p "$out/extra"
  # bundle.sh takes the first tensord under build/, which may be cpack's staged copy in
  # build/_CPack_Packages, older than the build: the built binaries replace what it took.
  for b in tensord tensorctl operators_bench handles_bench transfer_bench; do
    if [ -x "$root/build/bin/$b" ]; then strip -o "$out/bin/$b" "$root/build/bin/$b"; else echo "pack: no build/bin/$b" >&2; fi
  done
  for b in tensord_integration_tests opencl_device_test; do
    if [ -x "$root/build/bin/$b" ]; then strip -o "$out/extra/$b" "$root/build/bin/$b"; else echo "pack: no build/bin/$b" >&2; fi
  done
  for x in "$out"/extra/*_test*; do ldd "$x"; done | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
    while read -r lib; do [ -f "$out/lib/$(basename "$lib")" ] || cp -L "$lib" "$out/lib/"; done
  # The integration tests start tensord from the path compiled into them.
  echo "$root/build/bin" >"$out/extra/tensord_dir"
  cp -r "$root/tests/conformance" "$out/views"
  cp "$0" "$out/gpu-host.sh"
  # bench/gpu-measure.sh's tools: OpenCL's own copies timed by profiling events too, and
  # PyTorch's, and the table of what came back.
  gcc -O2 -o "$out/bin/oclbw_events" "$root/bench/gpu/oclbw.c" -lOpenCL -lm
  mkdir -p "$out/gpu" && cp "$root/bench/gpu/torch_ref.py" "$root/bench/gpu/summary.py" "$out/gpu/"
  exit 0
fi

G=$(cd "$(dirname "$0")" && pwd); O=${OUT:-/tmp/gpu-out}; mkdir -p "$O"
export LD_LIBRARY_PATH=$G/lib OCL_ICD_VENDORS=/tmp/gpu-icd
[ -d /tmp/gpu-icd ] || { echo "gpu-host.sh: run 'bash $G/run.sh correct' first"; exit 1; }
port=50052
"$G/bin/tensord" --address=127.0.0.1:$port --metrics_address= --max_message_bytes=536870912 \
  >/tmp/gpu-host-tensord.log 2>&1 &
pid=$!
for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
grep -m1 '"device"' /tmp/gpu-host-tensord.log
# views/ is tests/conformance: its cases/ (the public cases and those of the operators landed
# since), views.json and dtypes.json, as the test command runs them.
for mode in --handles --chain --stream ""; do
  echo "== tests/conformance's cases, views and dtypes, backend opencl $mode"
  timeout 180 "$G/bin/tensorctl" conformance --target 127.0.0.1:$port --backend opencl $mode \
    "$G/views/cases" "$G/views" 2>&1 | tail -2
done
kill $pid; wait $pid 2>/dev/null
echo "== opencl_device_test"
timeout 120 "$G/extra/opencl_device_test" --gtest_brief=1 >"$O/opencl_device_test.log" 2>&1
echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/opencl_device_test.log" | tr '\n' ' ')"
want=$(cat "$G/extra/tensord_dir")
if [ ! -x "$G/extra/tensord_integration_tests" ]; then
  echo "no tensord_integration_tests in the bundle: integration tests not run"
elif [ -e "$want/tensord" ]; then
  echo "$want/tensord is already there (not this bundle's): integration tests not run"
elif mkdir -p "$want" && ln -s "$G/bin/tensord" "$want/tensord" && ln -s "$G/bin/tensorctl" "$want/tensorctl"; then
  echo "== tensord_integration_tests Device*, Chain*"
  timeout 180 "$G/extra/tensord_integration_tests" --gtest_filter='Device*:Chain*' --gtest_brief=1 \
    >"$O/integration_device.log" 2>&1
  echo "rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$O/integration_device.log" | head -8 | tr '\n' ' ')"
else
  echo "cannot create $want: integration tests not run"
fi
