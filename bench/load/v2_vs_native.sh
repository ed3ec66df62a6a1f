#!/usr/bin/env bash
# The Open Inference Protocol's ModelInfer against native Run on one tensord,
# in one run with the same ghz settings: a small slice (the 64-byte case of
# cases/slice_small.json) and a 1 MiB one (a whole [1024,1024] UINT8 window),
# alternating rounds, the median round of each. Prints the BENCHMARKS.md rows
# and the ratio ModelInfer / Run in calls/s.
#
#   bench/load/v2_vs_native.sh       builds release tensord in build/ (or TENSOROP_BIN)
#   bench/load/v2_vs_native.sh [--rounds N] [--json FILE]
#       --rounds: rounds per API (default 3); --json: also writes the rows to
#       FILE (for bench/run-all.sh)
#
# The payloads are serialized with the Python venv of scripts/python-test.sh
# (build/python-venv: tensorop_client's and tritonclient's generated messages).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/scripts/lib.sh"

bench_load_options "$@"

bin="$(bench_bin_dir "$root" tensord)"
ghz="$("$here/install-ghz.sh")"
python="$root/build/python-venv/bin/python"
[ -x "$python" ] || { echo "v2_vs_native: run scripts/python-test.sh once first" >&2; exit 1; }
apt_install jq
bench_scratch

"$python" - "$work" <<'PY'
import sys
import numpy as np
from tensorop_client._proto import tensorop_pb2 as pb
from tritonclient.grpc import service_pb2 as v2

work = sys.argv[1]
def write(name, native, infer):
    open(f"{work}/{name}.run.bin", "wb").write(native.SerializeToString())
    open(f"{work}/{name}.v2.bin", "wb").write(infer.SerializeToString())

def pair(name, dtype, v2type, data, sizes, offsets, windows, strides):
    native = pb.RunRequest(id=name, backend=pb.CPU)
    native.slice.offsets.extend(offsets)
    native.slice.window_sizes.extend(windows)
    native.slice.window_strides.extend(strides)
    native.inputs["input"].CopyFrom(pb.Tensor(dtype=dtype, sizes=sizes, data=data))
    native.outputs.add(sizes=[1 + (w - 1) // abs(s) for w, s in zip(windows, strides)])
    infer = v2.ModelInferRequest(model_name="slice", id=name)
    infer.parameters["backend"].string_param = "cpu"
    infer.inputs.add(name="input", datatype=v2type, shape=sizes)
    infer.raw_input_contents.append(data)
    for key, values in (("offsets", offsets), ("window_sizes", windows),
                        ("window_strides", strides)):
        infer.inputs.add(name=key, datatype="INT64", shape=[len(values)])
        infer.raw_input_contents.append(np.array(values, dtype="<i8").tobytes())
    write(name, native, infer)

pair("small", pb.FLOAT32, "FP32", np.arange(1, 17, dtype="<f4").tobytes(), [1, 1, 4, 4],
     [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, 2, 2])
pair("1mib", pb.UINT8, "UINT8", (np.arange(1 << 20) % 251).astype(np.uint8).tobytes(),
     [1024, 1024], [0, 0], [1024, 1024], [1, 1])
PY

"$bin/tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= \
  >"$work/tensord.out" 2>"$work/tensord.log" &
servers+=("$!")
port="$(tensord_port "$work/tensord.out" "${servers[-1]}")"

load() {  # label call payload [ghz flags...]
  local label="$1" call="$2" payload="$3"
  shift 3
  echo "v2_vs_native: $label: $call $*" >&2
  "$ghz" --insecure --call "$call" -B "$work/$payload" \
    --max-recv-message-size=80MB --max-send-message-size=80MB \
    -O json -o "$work/$label.json" "$@" "127.0.0.1:$port"
}
median() {  # label
  for round in $(seq 1 "$rounds"); do jq -r '.rps' "$work/$1.$round.json"; done |
    sort -g | sed -n "$(( (rounds + 1) / 2 ))p"
}
errors() { jq -r '([.statusCodeDistribution | to_entries[] | select(.key != "OK") | .value]
                   | add // 0)' "$1"; }

load warm_run tensorop.v1.TensorOp/Run small.run.bin -n 2000 -c 16
load warm_v2 inference.GRPCInferenceService/ModelInfer small.v2.bin -n 2000 -c 16
for round in $(seq 1 "$rounds"); do
  load "small_run.$round" tensorop.v1.TensorOp/Run small.run.bin -n 10000 -c 16
  load "small_v2.$round" inference.GRPCInferenceService/ModelInfer small.v2.bin -n 10000 -c 16
  load "1mib_run.$round" tensorop.v1.TensorOp/Run 1mib.run.bin -n 300 -c 4
  load "1mib_v2.$round" inference.GRPCInferenceService/ModelInfer 1mib.v2.bin -n 300 -c 4
done

echo "| request | Run calls/s | ModelInfer calls/s | ModelInfer / Run | errors |"
echo "| --- | --- | --- | --- | --- |"
for what in small 1mib; do
  run="$(median "${what}_run")" v2="$(median "${what}_v2")"
  errs=0
  for round in $(seq 1 "$rounds"); do
    errs=$(( errs + $(errors "$work/${what}_run.$round.json") + $(errors "$work/${what}_v2.$round.json") ))
  done
  printf '| %s | %.0f | %.0f | %.2f× | %s |\n' "$what" "$run" "$v2" \
    "$(jq -rn --argjson a "$v2" --argjson b "$run" '$a / $b')" "$errs"
  jq -nc --arg what "$what" --argjson run "$run" --argjson v2 "$v2" --argjson errors "$errs" \
    '{request: $what, run_rps: $run, model_infer_rps: $v2, errors: $errors}' >>"$work/rows.jsonl"
done
if [ -n "$json_out" ]; then
  jq -s --arg tree "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    --argjson rounds "$rounds" '{tree: $tree, rounds: $rounds, rows: .}' "$work/rows.jsonl" >"$json_out"
fi
