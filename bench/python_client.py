#!/usr/bin/env python3
"""The Python client against raw grpcio, and its peak memory on 1 GiB tensors.
(One file a little past the project's ~600 lines: its modes share one tensord
launcher, timing and JSON output, which bench/write_tables.py reads.)

    # the 32 MiB round trip: Client.run against grpcio sending the request
    # pre-serialized and taking the answer's bytes unparsed, same tensord
    build/python-venv/bin/python bench/python_client.py [--tensord build/bin/tensord]
        [--target HOST:PORT] [--mib 32] [--rounds 5] [--calls 4]

    # peak client RSS (ru_maxrss of a child process) for a GiB-sized input,
    # result, or both, against the payload
    build/python-venv/bin/python bench/python_client.py --rss input|output|both [--gib 1]

    # many small requests: Client.run one by one against run_many over RunBidi
    build/python-venv/bin/python bench/python_client.py --many 2000 [--window 32]

    # window steps on one 32 MiB tensor: four separate runs, put + kept runs +
    # fetch, one chain; and chains of 1 and 16 steps on a resident tensor; a
    # join of 8 kept 4 MiB tensors then a slice in one chain, against fetching
    # them, numpy.concatenate and the slice here, and a put of the result
    build/python-venv/bin/python bench/python_client.py --chain [--rounds 3]

Every mode takes --json [FILE]: the figures as one JSON object, on stdout (the
lines above then go to stderr) or into FILE (for bench/bulk/run.sh and
bench/run-all.sh).

Rounds alternate raw and client calls on the same server: grpcio sending the
request pre-serialized to Run (one message each way), grpcio sending it
pre-serialized as RunChunked parts (1 MiB chunks; the answer's parts taken as
bytes, unassembled), and Client.run (which picks RunChunked for inputs this
large), and AsyncClient.run likewise. Each round prints the median seconds per call; the summary gives the
client's throughput relative to each raw call (1.0: as fast as grpcio's floor).
Run it with the tensorop-client package importable (scripts/python-test.sh
installs it into build/python-venv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from tensorop_client import AsyncClient, Client, Result, Step, TensorOpError, make_request
from tensorop_client._proto import tensorop_pb2 as pb

REPO = Path(__file__).resolve().parents[1]
# Where the human-readable lines go: stderr when the JSON object takes stdout.
_human = sys.stdout


def say(*args: object, **kwargs: object) -> None:
    print(*args, file=_human, **kwargs)  # type: ignore[call-overload]
LISTENING = re.compile(r"tensord listening on (\S+:\d+)")
RUN = "/tensorop.v1.TensorOp/Run"
RUN_CHUNKED = "/tensorop.v1.TensorOp/RunChunked"


def start_tensord(binary: str, *flags: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [binary, "--address=127.0.0.1:0", "--metrics_address=", "--http_address=", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if match := LISTENING.search(line):
            return process, match.group(1)
    raise SystemExit(f"{binary} did not print its address")


def slice_all(n: int) -> tuple[str, dict, dict, list]:
    """A slice copying all n float32 elements: n*4 bytes in, n*4 bytes out."""
    return "slice", {"offsets": [0], "window_sizes": [n], "window_strides": [1]}, {}, [(n,)]


def round_trip(target: str, mib: float, rounds: int, calls: int) -> dict:
    n = int(mib * (1 << 20)) // 4
    x = np.arange(n, dtype=np.float32)
    op, attrs, _, outputs = slice_all(n)
    limit = 2 * n * 4 + (1 << 20)
    options = [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
    ]
    request = make_request(op, {"input": x}, attrs, outputs, backend="cpu")
    serialized = request.SerializeToString()
    # The same request as RunChunked's parts, pre-serialized too: the header,
    # then 1 MiB chunks (what Client.run sends for inputs this large).
    header = pb.RunRequest()
    header.CopyFrom(request)
    header.inputs["input"].ClearField("data")
    data = request.inputs["input"].data
    parts = [pb.RequestPart(request=header).SerializeToString()] + [
        pb.RequestPart(chunk=pb.InputChunk(input="input", data=data[at : at + (1 << 20)]))
        .SerializeToString()
        for at in range(0, len(data), 1 << 20)
    ]
    del request, header, data
    with grpc.insecure_channel(target, options=options) as channel, Client(
        target, max_message_bytes=limit
    ) as client:
        raw = channel.unary_unary(RUN)  # bytes in, bytes out: grpcio's floor
        raw_chunked = channel.stream_stream(RUN_CHUNKED)

        def raw_call() -> None:
            answer = raw(serialized, timeout=60)
            assert len(answer) > n * 4

        def raw_chunked_call() -> None:
            received = sum(len(part) for part in raw_chunked(iter(parts), timeout=60))
            assert received > n * 4

        def client_call() -> None:
            out = client.run(op, {"input": x}, attrs, outputs, backend="cpu").outputs[0]
            assert out.shape == (n,)

        # AsyncClient on a loop of its own, driven call by call.
        loop = asyncio.new_event_loop()

        async def connect() -> AsyncClient:
            return AsyncClient(target, max_message_bytes=limit)

        async_client = loop.run_until_complete(connect())

        def async_call() -> None:
            coroutine = async_client.run(op, {"input": x}, attrs, outputs, backend="cpu")
            assert loop.run_until_complete(coroutine).outputs[0].shape == (n,)

        calls_by_name = {
            "raw": raw_call,
            "raw_chunked": raw_chunked_call,
            "client": client_call,
            "async_client": async_call,
        }
        times: dict[str, list[float]] = {name: [] for name in calls_by_name}
        for call in calls_by_name.values():
            call()  # warm the channels and the server
        for r in range(rounds):
            for name, call in calls_by_name.items():
                for _ in range(calls):
                    start = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - start)
            medians = {name: statistics.median(t[-calls:]) for name, t in times.items()}
            say(
                f"round {r + 1}: "
                + ", ".join(f"{name} {m * 1e3:.1f} ms" for name, m in medians.items())
                + f"; raw / client {medians['raw'] / medians['client']:.2f}",
                flush=True,
            )
        medians = {name: statistics.median(t) for name, t in times.items()}
        say(
            f"{mib:g} MiB in + {mib:g} MiB out, median of {len(times['raw'])} calls each: "
            f"raw grpcio Run {medians['raw'] * 1e3:.1f} ms, "
            f"raw grpcio RunChunked {medians['raw_chunked'] * 1e3:.1f} ms, "
            f"Client.run {medians['client'] * 1e3:.1f} ms, "
            f"AsyncClient.run {medians['async_client'] * 1e3:.1f} ms; "
            f"client throughput / raw Run {medians['raw'] / medians['client']:.2f}, "
            f"/ raw RunChunked {medians['raw_chunked'] / medians['client']:.2f}; "
            f"async client / raw Run {medians['raw'] / medians['async_client']:.2f}"
        )
        loop.run_until_complete(async_client.close())
        loop.close()
        # Check the answer once, byte for byte.
        out = client.run(op, {"input": x}, attrs, outputs, backend="cpu").outputs[0]
        assert np.array_equal(out.view(np.uint32), x.view(np.uint32))
    return {"mode": "round_trip", "mib": mib, "rounds": rounds, "calls": calls,
            "seconds": medians}


def many(target: str, count: int, window: int) -> dict:
    """`count` small slices (4 KiB in, 64 bytes out): one Client.run after
    another, against run_many over RunBidi (sync and async)."""
    x = np.arange(1024, dtype=np.float32)
    requests = [
        ("slice", {"input": x}, {"offsets": [i % 1000], "window_sizes": [16],
                                 "window_strides": [1]}, [(16,)], "cpu")
        for i in range(count)
    ]
    with Client(target) as client:
        client.run(*requests[0])  # warm the channel
        start = time.perf_counter()
        for request in requests:
            client.run(*request)
        sequential = time.perf_counter() - start
        start = time.perf_counter()
        outcomes = list(client.run_many(requests, window=window))
        pipelined = time.perf_counter() - start
        assert all(isinstance(o, Result) for o in outcomes)

    async def run_async() -> float:
        async with AsyncClient(target) as aclient:
            await aclient.run(*requests[0])
            start = time.perf_counter()
            got = [o async for o in aclient.run_many(requests, window=window)]
            seconds = time.perf_counter() - start
            assert all(isinstance(o, Result) for o in got)
            return seconds

    pipelined_async = asyncio.run(run_async())
    say(
        f"{count} small slices: Client.run one by one {count / sequential:.0f}/s, "
        f"run_many(window={window}) {count / pipelined:.0f}/s "
        f"({sequential / pipelined:.2f}x), AsyncClient.run_many {count / pipelined_async:.0f}/s "
        f"({sequential / pipelined_async:.2f}x)"
    )
    return {"mode": "many", "count": count, "window": window,
            "seconds": {"sequential": sequential, "run_many": pipelined,
                        "async_run_many": pipelined_async}}


def rss_child(target: str, kind: str, gib: int) -> None:
    """In a child process: one GiB-sized call, then prints ru_maxrss in bytes."""
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    n = (gib << 30) // 4
    with Client(target, timeout=600) as client:
        if kind == "output":
            # A broadcast input (stride 0) sends 4 bytes; the answer is n floats.
            x = np.broadcast_to(np.float32(7.0), (n,))
        else:
            x = np.arange(n, dtype=np.float32)
        window = 1024 if kind == "input" else n
        start = time.perf_counter()
        out = client.run(
            "slice",
            {"input": x},
            {"offsets": [0], "window_sizes": [window], "window_strides": [1]},
            outputs=[(window,)],
            backend="cpu",
        ).outputs[0]
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
        # Checked after the peak was read, and in slices: a whole-array
        # comparison would allocate its own n-element temporary.
        assert out.shape == (window,)
        step = 1 << 24
        for at in range(0, window, step):
            end = min(at + step, window)
            assert np.array_equal(out[at:end], x[at:end])
    print(f"{base} {peak} {seconds}")


def rss(target: str, kind: str, gib: int) -> dict:
    child = subprocess.run(
        [sys.executable, __file__, "--target", target, "--rss-child", kind, "--gib", str(gib)],
        capture_output=True,
        text=True,
        check=True,
    )
    base, peak, seconds = child.stdout.split()
    payload = gib << 30
    say(
        f"{gib} GiB {kind}: {float(seconds):.2f} s, peak client RSS {int(peak) / 2**30:.2f} GiB "
        f"= {int(peak) / payload:.2f}x the payload ({int(base) / 2**20:.0f} MiB before the call; "
        f"for 'both' the process holds the input and the result, 2x by themselves)"
    )
    return {"kind": kind, "gib": gib, "seconds": float(seconds),
            "base_bytes": int(base), "peak_bytes": int(peak),
            "peak_per_payload": int(peak) / payload}


def resident_kib(pid: int | None) -> int | None:
    """tensord's resident memory (VmRSS), when it runs here."""
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def chain_steps(client: Client, rounds: int, server_pid: int | None) -> dict:
    """Four whole-window Slices of a float32 [4096, 2048] (32 MiB): as four
    runs sending and returning the tensor, as put + four run(keep=True) +
    fetch, and as one chain (the tensor inline, the result back). Then chains
    of 1 and 16 such steps on a resident tensor, their result kept. Best of
    `rounds` each; every answer checked equal to the input."""
    x = np.arange(4096 * 2048, dtype=np.float32).reshape(4096, 2048)
    attrs = {"offsets": [0, 0], "window_sizes": [4096, 2048], "window_strides": [1, 1]}
    outputs = [(4096, 2048)]

    def separate() -> np.ndarray:
        y = x
        for _ in range(4):
            y = client.run("slice", {"input": y}, attrs, outputs=outputs).outputs[0]
        return y

    def kept() -> np.ndarray:
        made = [client.put(x)]
        for _ in range(4):
            made.append(client.run("slice", {"input": made[-1]}, attrs, outputs=outputs,
                                   keep=True).outputs[0])
        y = made[-1].fetch()
        for handle in made:
            handle.release()
        return y

    def steps(source: object, count: int) -> list[Step]:
        chain = [Step("slice", {"input": source}, attrs, outputs)]
        for _ in range(count - 1):
            chain.append(Step("slice", {"input": chain[-1]}, attrs, outputs))
        return chain

    def chained() -> np.ndarray:
        return client.chain(steps(x, 4)).outputs[0]

    def best(fn) -> float:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            y = fn()
            times.append(time.perf_counter() - start)
            if y is not None:
                assert np.array_equal(y, x)
        return min(times)

    rows = [("4 separate runs", best(separate)), ("put + 4 kept runs + fetch", best(kept)),
            ("one chain of the 4 steps", best(chained))]
    base = rows[0][1]
    say("32 MiB, four Slice steps (best of %d)" % rounds)
    for name, seconds in rows:
        say(f"  {name:28s} {seconds * 1e3:7.1f} ms  {base / seconds:5.2f}x separate")
    resident = client.put(x)
    try:
        def on_resident(count: int):
            def call() -> None:
                client.chain(steps(resident, count), keep=True).outputs[0].release()
            return call
        one, sixteen = best(on_resident(1)), best(on_resident(16))
    finally:
        resident.release()
    say(f"  resident: chain of 1 step {one * 1e3:.1f} ms, of 16 steps {sixteen * 1e3:.1f} ms "
          f"({sixteen / one:.2f}x), result kept")

    def kept_slice(tensor, window: list[int]) -> tuple[float, int | None]:
        """Best time of run(keep=True) of rows [0, window[0]) (release not
        timed), and the server's RSS growth over the first."""
        attrs = {"offsets": [0, 0], "window_sizes": window, "window_strides": [1, 1]}
        before, growth, times = resident_kib(server_pid), None, []
        for _ in range(rounds):
            start = time.perf_counter()
            kept = client.run("slice", {"input": tensor}, attrs, outputs=[tuple(window)],
                              keep=True).outputs[0]
            times.append(time.perf_counter() - start)
            if growth is None and before is not None:
                growth = resident_kib(server_pid) - before
            kept.release()
        return min(times), growth

    # run(keep=True) of a Slice (half the rows) on a resident 1 GiB tensor,
    # and the same on a 16-byte tensor: the floor of a call from here.
    big = client.put(np.ones((16384, 16384), dtype=np.float32))
    try:
        seconds, growth = kept_slice(big, [8192, 16384])
    finally:
        big.release()
    tiny = client.put(np.ones((2, 2), dtype=np.float32))
    try:
        floor, _ = kept_slice(tiny, [1, 2])
    finally:
        tiny.release()
    rss = "" if growth is None else f", server RSS {growth / 1024:+.1f} MiB"
    say(f"  run(keep=True) of half a resident 1 GiB tensor: {seconds * 1e3:.2f} ms{rss}; "
        f"of half a 16-byte one: {floor * 1e3:.2f} ms")
    figures = {"separate": rows[0][1], "kept": rows[1][1], "chain": rows[2][1],
               "resident_chain_1": one, "resident_chain_16": sixteen,
               "keep_half_of_1gib": seconds, "keep_half_of_16_bytes": floor}
    figures.update(layout_views(client, rounds, server_pid))
    figures.update(join_slice(client, rounds))
    figures.update(device_views(client, rounds))
    return {"mode": "chain", "rounds": rounds, "seconds": figures,
            "server_rss_growth_kib": growth}


def layout_views(client: Client, rounds: int, server_pid: int | None) -> dict:
    """Issue 44's targets: run(keep=True) of a transpose, a reshape and an
    expand of a resident 1 GiB tensor (views: no bytes, no RSS); a chain of 16
    layout and window steps on a resident 32 MiB tensor against one step,
    result kept; a 32 MiB transpose then a 1 MiB slice of it as one chain
    against two runs.
    Best of `rounds`; answers checked against NumPy."""
    def best(fn) -> float:
        """The best time of fn(); what it returns (a RemoteTensor) is
        released after the clock stops."""
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            made = fn()
            times.append(time.perf_counter() - start)
            if made is not None:
                made.release()
        return min(times)

    figures: dict[str, float] = {}
    big = client.put(np.ones((16384, 16384), dtype=np.float32))
    try:
        before = resident_kib(server_pid)
        for op, attrs in (("transpose", {"perm": [1, 0]}), ("reshape", {"sizes": [8192, -1]}),
                          ("expand", {"sizes": [2, 16384, 16384]})):
            figures[f"keep_{op}_of_1gib"] = best(
                lambda op=op, attrs=attrs: client.run(op, {"input": big}, attrs,
                                                      keep=True).outputs[0])
        after = resident_kib(server_pid)
        if before is not None and after is not None:
            figures["layout_views_rss_growth_kib"] = after - before
    finally:
        big.release()

    x = np.arange(4096 * 2048, dtype=np.float32).reshape(4096, 2048)
    # Each step a view of the one before (no reshape merges dimensions, which
    # would make the step before it run): transposes, whole windows, splitting
    # reshapes and expands.
    mixed = [("transpose", {"perm": [1, 0]}), ("strided_slice", {"begin": [0], "end": [0],
                                                                 "end_mask": [1]}),
             ("transpose", {"perm": [1, 0]}), ("reshape", {"sizes": [2, 2048, 2048]}),
             ("transpose", {"perm": [1, 0, 2]}), ("transpose", {"perm": [1, 0, 2]}),
             ("strided_slice", {"begin": [0], "end": [0], "end_mask": [1]}),
             ("expand", {"sizes": [2, 2048, 2048]}), ("reshape", {"sizes": [2, 2048, 2, 1024]}),
             ("transpose", {"perm": [0, 1, 3, 2]}), ("transpose", {"perm": [0, 1, 3, 2]}),
             ("strided_slice", {"begin": [0], "end": [0], "end_mask": [1]}),
             ("transpose", {"perm": [3, 2, 1, 0]}), ("transpose", {"perm": [3, 2, 1, 0]}),
             ("expand", {"sizes": [1, 2, 2048, 2, 1024]}),
             ("strided_slice", {"begin": [0], "end": [0], "end_mask": [1]})]

    def chain_of(source: object, count: int) -> list[Step]:
        chain: list[Step] = []
        for op, attrs in mixed[:count]:
            chain.append(Step(op, {"input": chain[-1] if chain else source}, attrs))
        return chain

    resident = client.put(x)
    try:
        last = client.chain(chain_of(resident, 16), keep=True).outputs[0]
        assert np.array_equal(last.fetch(), x.reshape(1, 2, 2048, 2, 1024))
        last.release()
        for count in (1, 16):
            figures[f"layout_chain_{count}"] = best(
                lambda count=count: client.chain(chain_of(resident, count),
                                                 keep=True).outputs[0])
    finally:
        resident.release()

    def two_runs() -> None:
        t = client.transpose(x)
        client.run("slice", {"input": t}, {"offsets": [0, 0], "window_sizes": [64, 4096],
                                           "window_strides": [1, 1]}, outputs=[(64, 4096)])

    def one_chain() -> None:
        first = Step("transpose", {"input": x}, {"perm": [1, 0]})
        client.chain([first, Step("slice", {"input": first},
                                  {"offsets": [0, 0], "window_sizes": [64, 4096],
                                   "window_strides": [1, 1]}, [(64, 4096)])])

    figures["transpose_slice_runs"] = best(two_runs)
    figures["transpose_slice_chain"] = best(one_chain)
    say(f"  layout views of a resident 1 GiB tensor: transpose "
        f"{figures['keep_transpose_of_1gib'] * 1e3:.2f} ms, reshape "
        f"{figures['keep_reshape_of_1gib'] * 1e3:.2f} ms, expand "
        f"{figures['keep_expand_of_1gib'] * 1e3:.2f} ms; chain of 16 layout steps "
        f"{figures['layout_chain_16'] * 1e3:.1f} ms against 1: "
        f"{figures['layout_chain_1'] * 1e3:.1f} ms; transpose+slice as a chain "
        f"{figures['transpose_slice_chain'] * 1e3:.1f} ms, as two runs "
        f"{figures['transpose_slice_runs'] * 1e3:.1f} ms")
    return figures


def join_slice(client: Client, rounds: int) -> dict:
    """A join of 8 kept float32 [512, 2048] tensors (4 MiB each) along axis 0,
    then a Slice of the middle half of the joined rows ([1024, 3072): 16 MiB,
    parts of 4 of them), as one chain keeping the result on the server (the
    end state of the round trip) and returning it, against the round trip
    the join saves: fetching the 8, numpy.concatenate and the
    same slice here, and a put of the result (its release not timed). Best
    of `rounds`; the two results checked equal."""
    parts = [np.arange(512 * 2048, dtype=np.float32).reshape(512, 2048) + k * (1 << 20)
             for k in range(8)]
    kept = [client.put(part) for part in parts]
    window = {"offsets": [1024, 0], "window_sizes": [2048, 2048], "window_strides": [1, 1]}

    def chained(keep: bool = False) -> Any:
        joined = Step("join", {f"inputs_{k}": h for k, h in enumerate(kept)}, {"axis": 0})
        steps = [joined, Step("slice", {"input": joined}, window)]
        return client.chain(steps, keep=keep).outputs[0]

    def local() -> object:
        joined = np.concatenate([h.fetch() for h in kept], axis=0)
        return client.put(joined[1024:3072])

    def best(fn) -> float:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            made = fn()
            times.append(time.perf_counter() - start)
            if not isinstance(made, np.ndarray):
                made.release()
        return min(times)

    try:
        expected = np.concatenate(parts)[1024:3072]
        assert np.array_equal(chained(), expected)
        back = local()
        assert np.array_equal(back.fetch(), expected)
        back.release()
        figures = {"join_slice_chain": best(chained),
                   "join_slice_chain_kept": best(lambda: chained(keep=True)),
                   "join_slice_local": best(local)}
    finally:
        client.release(kept)
    say(f"  join of 8 kept 4 MiB tensors + slice of the middle half as one chain "
        f"{figures['join_slice_chain'] * 1e3:.1f} ms (result kept: "
        f"{figures['join_slice_chain_kept'] * 1e3:.1f} ms); fetch 8 + numpy.concatenate + slice + put "
        f"{figures['join_slice_local'] * 1e3:.1f} ms "
        f"({figures['join_slice_local'] / figures['join_slice_chain']:.2f}x)")
    return figures


def device_views(client: Client, rounds: int) -> dict:
    """On the server's first OpenCL device, if it has one: run(keep=True) of
    half the rows of a resident 256 MiB tensor (a view: no kernel) against the
    same window reversed (a copy on the device, what every kept window cost
    before views)."""
    try:
        big = client.put(np.ones((8192, 8192), dtype=np.float32), backend="opencl")
    except TensorOpError as error:
        say(f"  no OpenCL device to keep views on ({error})")
        return {}

    def kept(stride: int) -> float:
        attrs = {"offsets": [0, 0], "window_sizes": [4096, 8192], "window_strides": [stride, 1]}
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            out = client.run("slice", {"input": big}, attrs, outputs=[(4096, 8192)], keep=True,
                             backend="opencl").outputs[0]
            times.append(time.perf_counter() - start)
            out.release()
        return min(times)

    try:
        view, copy = kept(1), kept(-1)
    finally:
        big.release()
    say(f"  on OpenCL: run(keep=True) of half a resident 256 MiB tensor {view * 1e3:.2f} ms; "
        f"reversed (a copy on the device) {copy * 1e3:.2f} ms ({copy / view:.0f}x)")
    return {"device_keep_half_view": view, "device_keep_half_copy": copy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tensord", default=os.environ.get("TENSORD", str(REPO / "build/bin/tensord"))
    )
    parser.add_argument("--target", help="a running tensord (default: start --tensord)")
    parser.add_argument("--mib", type=float, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--rss", choices=["input", "output", "both"])
    parser.add_argument("--rss-child", choices=["input", "output", "both"], help=argparse.SUPPRESS)
    parser.add_argument("--gib", type=int, default=1)
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help="the figures as one JSON object, on stdout or into FILE")
    parser.add_argument("--many", type=int, help="time this many small requests instead")
    parser.add_argument("--window", type=int, default=32, help="run_many's window (--many)")
    parser.add_argument("--chain", action="store_true", help="time window steps (see above)")
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.target, args.rss_child, args.gib)
        return
    process = None
    target = args.target
    if target is None:
        # A message limit that fits the unary round trip; chunked and streamed
        # calls are not bounded by it.
        limit = int((2 * args.mib + 2) * (1 << 20))
        process, target = start_tensord(args.tensord, f"--max_message_bytes={limit}")
    global _human
    if args.json == "-":
        _human = sys.stderr
    try:
        if args.many:
            figures = many(target, args.many, args.window)
        elif args.chain:
            with Client(target, timeout=600) as client:
                figures = chain_steps(client, args.rounds,
                                      process.pid if process is not None else None)
        elif args.rss:
            figures = rss(target, args.rss, args.gib)
        else:
            figures = round_trip(target, args.mib, args.rounds, args.calls)
        if args.json == "-":
            print(json.dumps(figures))
        elif args.json:
            Path(args.json).write_text(json.dumps(figures) + "\n")
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
