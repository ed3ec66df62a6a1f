"""The Python side of bench/bulk/run.sh: one round trip of BYTES (a 1-D uint8
Slice copying all of them: BYTES in, BYTES out), timed four ways in alternating
rounds, printing one JSON object:

  client_tensord  tensorop_client.Client.run against tensord
  raw_tensord     raw grpcio (pre-serialized request, answer kept as bytes)
                  against tensord
  raw_bare        raw grpcio against the bare baseline (the RPC path's limit)
  numpy_copy      numpy copying the same bytes locally

    python_bench.py --tensord HOST:PORT --bare HOST:PORT --bytes N --calls K --rounds R

Each figure is the median over rounds of the round's mean seconds per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import grpc
import numpy as np

from tensorop_client import Client
from tensorop_client._proto import tensorop_pb2 as pb

RUN = "/tensorop.v1.TensorOp/Run"
OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def raw_request(data: np.ndarray) -> bytes:
    request = pb.RunRequest(id="bulk")
    request.slice.offsets.append(0)
    request.slice.window_sizes.append(data.size)
    request.slice.window_strides.append(1)
    request.outputs.add().sizes.append(data.size)
    tensor = request.inputs["input"]
    tensor.dtype = pb.UINT8
    tensor.sizes.append(data.size)
    tensor.data = data.tobytes()
    return request.SerializeToString()


def timed(call, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tensord", required=True)
    parser.add_argument("--bare", required=True)
    parser.add_argument("--bytes", type=int, default=32 << 20)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    data = (np.arange(args.bytes, dtype=np.uint64) * 7).astype(np.uint8)
    request = raw_request(data)
    client = Client(args.tensord, max_message_bytes=max(64 << 20, 2 * args.bytes))
    channels = {
        name: grpc.insecure_channel(target, options=OPTIONS)
        for name, target in (("tensord", args.tensord), ("bare", args.bare))
    }
    # No serializer: the request goes as the bytes given, the answer stays bytes.
    raw = {name: channel.unary_unary(RUN) for name, channel in channels.items()}

    def client_run() -> None:
        result = client.run(
            "slice",
            {"input": data},
            {"offsets": [0], "window_sizes": [args.bytes], "window_strides": [1]},
            outputs=[(args.bytes,)],
        )
        assert result.outputs[0].nbytes == args.bytes

    ways = {
        "client_tensord": client_run,
        "raw_tensord": lambda: raw["tensord"](request, timeout=600),
        "raw_bare": lambda: raw["bare"](request, timeout=600),
        "numpy_copy": lambda: np.copy(data),
    }
    for call in ways.values():  # warm: connections, allocator, the server's threads
        call()
    rounds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, call in ways.items():
            rounds[name].append(timed(call, args.calls))
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    print(
        json.dumps(
            {
                "bytes": args.bytes,
                "calls": args.calls,
                "rounds": args.rounds,
                "seconds": medians,
                "client_vs_raw_bare": medians["client_tensord"] / medians["raw_bare"],
                "raw_tensord_vs_raw_bare": medians["raw_tensord"] / medians["raw_bare"],
                "client_vs_numpy": medians["client_tensord"] / medians["numpy_copy"],
            }
        )
    )
    client.close()
    for channel in channels.values():
        channel.close()


if __name__ == "__main__":
    main()
