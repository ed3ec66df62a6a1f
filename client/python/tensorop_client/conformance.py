"""The conformance runner: every case through a real server, compared exactly.

    python -m tensorop_client conformance --target ADDR [--backend auto|cpu|opencl]
        [--stream | --chunked | --handles | --chain] [--tls] [--ca_file PEM]
        [--cert_file PEM --key_file PEM] [--token_file FILE] PATH...

The security options may come from TENSOROP_TLS, TENSOROP_CA_FILE,
TENSOROP_CERT_FILE, TENSOROP_KEY_FILE and TENSOROP_TOKEN_FILE instead.

Prints each failure ("FAIL name: what differs") and ends with
"conformance: N passed, M failed"; exits 1 on any failure, 2 on usage errors
(as tensorctl conformance does).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tensorop_client._core.requests import _output_count
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.case_compare import find_mismatch, run_case
from tensorop_client.cases import CaseError, LoadedCase, load_cases
from tensorop_client.channel import channel_credentials, channel_target
from tensorop_client.client import (
    BACKENDS,
    Client,
    RemoteTensor,
    Result,
    keep_outputs,
)
from tensorop_client.tensors import WireTensor

EXIT_FAILURE = 1
EXIT_USAGE = 2


def run_with_handles(client: Client, request: pb.RunRequest) -> Result:
    """`request` through handles (tensorctl's --handles): each input Put as it
    is written (even an invalid one: Put then refuses it), all on one replica
    (a call reads handles of one), the op run on the handles with every output
    kept, each output Fetched with the strides the request asked for; every
    handle made is released."""
    run = pb.RunRequest()
    run.CopyFrom(request)
    made: list[RemoteTensor] = []
    replica = next((t.handle.replica for t in run.inputs.values() if t.HasField("handle")), None)
    try:
        for name in sorted(run.inputs):
            tensor = run.inputs[name]
            if tensor.HasField("handle"):
                continue
            strides = tuple(tensor.strides) or None
            wire = WireTensor(tensor.dtype, tuple(tensor.sizes), strides, memoryview(tensor.data))
            # The inputs live where the case runs (on a device for OPENCL), on one replica.
            on_device = run.backend == pb.OPENCL
            made.append(
                client.put(
                    wire,
                    backend="opencl" if on_device else "cpu",
                    device_index=(
                        run.device_index if on_device and run.HasField("device_index") else None
                    ),
                    replica=replica,
                )
            )
            replica = made[-1].handle.replica
            # Replaces the data; the layout stays beside it, as written.
            tensor.handle.id = made[-1].id
            tensor.handle.replica = replica
        keep_outputs(run)
        kept = client.run_request(run)
        outputs = []
        for i, output in enumerate(kept.outputs):
            if isinstance(output, RemoteTensor):
                made.append(output)
                output = output.fetch(run.outputs[i].strides if i < len(run.outputs) else None)
            outputs.append(output)
        return Result(outputs, kept.backend)
    finally:
        client.release(made)


def one_step_chain(request: pb.RunRequest) -> pb.RunChainRequest:
    """`request` as a chain of one step (tensorctl's --chain): its operator,
    inputs (as ChainInput.tensor) and output descriptions are steps[0], every
    output of it a result with bytes in the step's layout (no result
    strides), on the request's backend and device."""
    chain = pb.RunChainRequest(id=request.id, backend=request.backend)
    if request.HasField("device_index"):
        chain.device_index = request.device_index
    step = chain.steps.add()
    op = request.WhichOneof("op")
    if op is not None:
        getattr(step, op).CopyFrom(getattr(request, op))
    for name, tensor in request.inputs.items():
        step.inputs[name].tensor.CopyFrom(tensor)
    step.outputs.extend(request.outputs)
    for k in range(_output_count(op, request.outputs)):
        chain.results.add(step=0, output=k)
    return chain


def run_conformance(
    target: str,
    paths: Sequence[str],
    backend: str = "auto",
    stream: bool = False,
    security: Mapping[str, Any] | None = None,
    chunked: bool = False,
    handles: bool = False,
    chain: bool = False,
) -> tuple[int, int]:
    """Runs every case of `paths`, printing failures; returns (passed, failed).
    `stream`: through RunStream; `chunked`: through RunChunked (inputs
    uploaded in chunks); `handles`: through run_with_handles; `chain`: as a
    one-step RunChain (one_step_chain). `security`: Client's tls, ca_file,
    cert_file, key_file, token_file."""
    cases: list[LoadedCase] = []
    for path in paths:
        cases.extend(load_cases(path))
    passed = failed = 0
    with Client(target, **(security or {})) as client:
        call = (
            (lambda request: run_with_handles(client, request))
            if handles
            else (lambda request: client.chain_request(one_step_chain(request)))
            if chain
            else client.run_chunked_request
            if chunked
            else client.run_stream_request
            if stream
            else client.run_request
        )
        for loaded in cases:
            if loaded.case is None:
                mismatch: str | None = f"invalid case: {loaded.error}"
            else:
                mismatch = find_mismatch(
                    loaded.case, run_case(call, loaded.case, BACKENDS[backend])
                )
            if mismatch is None:
                passed += 1
            else:
                failed += 1
                print(f"FAIL {loaded.name}: {mismatch}", flush=True)
    print(f"conformance: {passed} passed, {failed} failed", flush=True)
    return passed, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorop_client")
    commands = parser.add_subparsers(dest="command", required=True)
    conformance = commands.add_parser(
        "conformance", help="run conformance cases against a server, exact comparison"
    )
    conformance.add_argument(
        "--target",
        required=True,
        help="host:port of a running tensord, a list ip:port,ip:port of replicas, "
        "or dns:///name:port",
    )
    conformance.add_argument("--backend", choices=list(BACKENDS), default="auto")
    style = conformance.add_mutually_exclusive_group()
    style.add_argument("--stream", action="store_true", help="call RunStream instead of Run")
    style.add_argument(
        "--chunked", action="store_true", help="call RunChunked (inputs uploaded in chunks)"
    )
    style.add_argument(
        "--handles",
        action="store_true",
        help="Put each input, run on the handles keeping every output, Fetch the outputs",
    )
    style.add_argument(
        "--chain",
        action="store_true",
        help="call RunChain with the case as its one step, every output a result",
    )
    conformance.add_argument("--tls", action="store_true", help="connect with TLS")
    conformance.add_argument("--ca_file", help="PEM CA of the server's certificate (implies --tls)")
    conformance.add_argument("--cert_file", help="PEM client certificate, for mutual TLS")
    conformance.add_argument("--key_file", help="PEM private key of --cert_file")
    conformance.add_argument("--token_file", help="a file holding the bearer token (implies --tls)")
    conformance.add_argument(
        "paths", nargs="+", metavar="PATH", help="a case file, or a directory of *.json case files"
    )
    args = parser.parse_args(argv)
    try:
        channel_target(args.target)
    except ValueError as e:
        parser.error(f"--target: {e}")  # exits 2, like every usage error
    security = {
        "tls": args.tls,
        "ca_file": args.ca_file,
        "cert_file": args.cert_file,
        "key_file": args.key_file,
        "token_file": args.token_file,
    }
    try:
        channel_credentials(**security)
    except ValueError as e:
        parser.error(str(e))
    try:
        _, failed = run_conformance(
            args.target,
            args.paths,
            args.backend,
            args.stream,
            security,
            args.chunked,
            args.handles,
            args.chain,
        )
    except CaseError as e:
        print(f"tensorop_client: {e}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FAILURE if failed else 0
