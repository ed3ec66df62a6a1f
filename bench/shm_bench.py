#!/usr/bin/env python3
"""Co-located clients: a 32 MiB op with input and output in shared memory, against
numpy's own copy of the same bytes, and small calls over the Unix socket against
TCP loopback. Starts its own tensord (build/bin/tensord) on both.

    build/python-venv/bin/python bench/shm_bench.py [--tensord PATH] [--rounds N] [--json FILE]

Prints one line per measurement (median of --rounds, after a warm-up) and the
ratios BENCHMARKS.md keeps; --json also writes the seconds to FILE (for
bench/bulk/run.sh). Needs the tensorop-client package (scripts/python-test.sh
installs it into build/python-venv).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from tensorop_client import Client
from tensorop_client.shared_memory import SharedRegion

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def median_seconds(fn, rounds: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up: page faults in both processes' mappings, connections
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternating(fns, rounds: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Medians of `fns` timed in turn, round after round (a load that comes and
    goes on a shared machine hits them alike)."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, samples in zip(fns, times):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensord", default=str(REPO / "build/bin/tensord"))
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--json", help="also write the medians (seconds) to this file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tensorop-shm-bench-") as tmp:
        socket = f"unix://{tmp}/tensord.sock"
        server = subprocess.Popen(
            [args.tensord, "--address=127.0.0.1:0", f"--address={socket}",
             "--metrics_address=", "--http_address=", "--backends=cpu"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            assert server.stdout is not None
            tcp = ""
            while not tcp:
                line = server.stdout.readline()
                if not line:
                    raise SystemExit("tensord did not start")
                if match := re.match(r"tensord listening on (\S+:\d+)$", line.strip()):
                    tcp = match.group(1)
            server.stdout.readline()  # the socket's line
            run(args, socket, tcp)
        finally:
            server.terminate()
            server.wait()


def run(args: argparse.Namespace, socket: str, tcp: str) -> None:
    n = args.mib * MIB // 4
    rows = 4096
    cols = n // rows
    source = np.arange(n, dtype=np.float32).reshape(rows, cols)
    local_out = np.empty_like(source)

    attrs = {"offsets": [0, 0], "window_sizes": [rows, cols], "window_strides": [1, 1]}

    with Client(socket, timeout=60) as client, \
            SharedRegion(client, "bench", 2 * source.nbytes) as region:
        x = region.ndarray(source.shape, np.float32)
        y = region.ndarray(source.shape, np.float32, offset=source.nbytes)
        x[...] = source
        numpy_copyto, numpy_copy, shm = alternating(
            [lambda: np.copyto(local_out, source), lambda: source.copy(),
             lambda: region.run("slice", {"input": x}, attrs, outputs=[y])],
            args.rounds)
        assert np.array_equal(y, source)
        del x, y
        inline_uds = median_seconds(
            lambda: client.run("slice", {"input": source}, attrs, outputs=[(rows, cols)]),
            max(3, args.rounds // 3))

    small = np.arange(256, dtype=np.float32)
    small_attrs = {"offsets": [0], "window_sizes": [256], "window_strides": [1]}
    small_rounds = args.rounds * 20
    with Client(socket, timeout=60) as uds_client, Client(tcp, timeout=60) as client:
        small_uds, small_tcp = alternating(
            [lambda: uds_client.run("slice", {"input": small}, small_attrs, outputs=[(256,)]),
             lambda: client.run("slice", {"input": small}, small_attrs, outputs=[(256,)])],
            small_rounds)
        inline_tcp = median_seconds(
            lambda: client.run("slice", {"input": source}, attrs, outputs=[(rows, cols)]),
            max(3, args.rounds // 3))

    ms = 1e3
    print(f"{args.mib} MiB float32 [{rows}x{cols}], medians of {args.rounds} alternating rounds:")
    print(f"  numpy np.copyto (preallocated)        {numpy_copyto * ms:8.2f} ms")
    print(f"  numpy .copy() (allocates)             {numpy_copy * ms:8.2f} ms")
    print(f"  tensord Run, in+out in shared memory  {shm * ms:8.2f} ms   "
          f"{shm / numpy_copyto:.2f}x np.copyto, {shm / numpy_copy:.2f}x .copy()")
    print(f"  tensord Run, inline bytes, Unix       {inline_uds * ms:8.2f} ms")
    print(f"  tensord Run, inline bytes, TCP        {inline_tcp * ms:8.2f} ms")
    print(f"1 KiB Run, medians of {small_rounds} alternating rounds:")
    print(f"  Unix socket                           {small_uds * ms:8.3f} ms   "
          f"{small_tcp / small_uds:.2f}x the calls/s of TCP loopback")
    print(f"  TCP loopback                          {small_tcp * ms:8.3f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"mib": args.mib, "rounds": args.rounds, "small_rounds": small_rounds,
                       "seconds": {"numpy_copyto": numpy_copyto, "numpy_copy": numpy_copy,
                                   "shm": shm, "inline_uds": inline_uds,
                                   "inline_tcp": inline_tcp, "small_uds": small_uds,
                                   "small_tcp": small_tcp}}, out)


if __name__ == "__main__":
    main()
