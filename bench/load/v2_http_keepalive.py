#!/usr/bin/env python3
"""tritonclient.http small infers against tensord over HTTP and HTTPS, with
HTTP/1.1 keep-alive (the default) and without (--http_keep_alive_seconds=0,
one request per connection: how tensord answered before keep-alive), in one run.

    build/python-venv/bin/python bench/load/v2_http_keepalive.py [--calls N] [--rounds R]

Four tensord processes (release build/bin/tensord, CPU backend), one client
each, alternating rounds of N sequential 4-element Slice infers; prints each
setup's median latency (median round) and the BENCHMARKS.md rows. The targets:
HTTPS within 1.5x of HTTP, and HTTP with keep-alive at least as fast as without.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[2]


def make_certificates(directory):
    key, cert = f"{directory}/server.key", f"{directory}/server.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


def start(extra):
    process = subprocess.Popen(
        [
            str(ROOT / "build/bin/tensord"),
            "--backends=cpu",
            "--address=127.0.0.1:0",
            "--metrics_address=",
            "--http_address=127.0.0.1:0",
            "--request_log=off",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in process.stdout:
        match = re.match(r"tensord http on (\S+)", line)
        if match:
            return process, match.group(1)
    raise RuntimeError("tensord did not say its http address")


def one_round(client, calls):
    data = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    inputs = [httpclient.InferInput("input", [1, 1, 4, 4], "FP32")]
    inputs[0].set_data_from_numpy(data, binary_data=False)
    for name, values in (
        ("offsets", [0, 0, 0, 1]),
        ("window_sizes", [1, 1, 4, 3]),
        ("window_strides", [1, 1, 2, 2]),
    ):
        tensor = httpclient.InferInput(name, [4], "INT64")
        tensor.set_data_from_numpy(np.array(values, dtype=np.int64), binary_data=False)
        inputs.append(tensor)
    latencies = []
    for _ in range(calls):
        began = time.perf_counter()
        result = client.infer("slice", inputs)
        latencies.append(time.perf_counter() - began)
        assert result.as_numpy("output").tolist() == [[[[2.0, 4.0], [10.0, 12.0]]]]
    return statistics.median(latencies)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        key, cert = make_certificates(directory)
        tls = [f"--tls_cert_file={cert}", f"--tls_key_file={key}"]
        setups = {
            "HTTP, keep-alive": ([], False),
            "HTTP, a connection per request": (["--http_keep_alive_seconds=0"], False),
            "HTTPS, keep-alive": (tls, True),
            "HTTPS, a connection per request": (
                tls + ["--http_keep_alive_seconds=0"],
                True,
            ),
        }
        servers, clients, rounds = [], {}, {name: [] for name in setups}
        try:
            for name, (flags, secure) in setups.items():
                process, address = start(flags)
                servers.append(process)
                clients[name] = httpclient.InferenceServerClient(
                    address,
                    ssl=secure,
                    ssl_options={"ca_certs": cert} if secure else None,
                    insecure=False,
                )
            for _ in range(args.rounds):
                for name, client in clients.items():
                    rounds[name].append(one_round(client, args.calls))
        finally:
            for process in servers:
                process.terminate()
                process.wait()
    median = {name: statistics.median(values) for name, values in rounds.items()}
    http = median["HTTP, keep-alive"]
    print(
        f"{args.rounds} rounds of {args.calls} sequential tritonclient.http infers "
        f"(median latency of the median round), {os.cpu_count()} cores"
    )
    print("| setup | median latency | / HTTP with keep-alive |")
    print("| --- | --- | --- |")
    for name, seconds in median.items():
        print(f"| {name} | {seconds * 1e3:.2f} ms | {seconds / http:.2f} |")
    https_ratio = median["HTTPS, keep-alive"] / http
    plain_gain = median["HTTP, a connection per request"] / http
    print(
        f"HTTPS / HTTP with keep-alive: {https_ratio:.2f} (target <= 1.5: "
        f"{'met' if https_ratio <= 1.5 else 'missed'}); HTTP without / with keep-alive: "
        f"{plain_gain:.2f} (target >= 1.0: {'met' if plain_gain >= 1.0 else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
