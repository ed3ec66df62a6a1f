"""Where a call goes and which call it is, decided without I/O: the handles a
request reads and the one replica they must share (Target), and the choice
between Run, RunStream and RunChunked by the sizes involved (_choose_route)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.requests import _Prepared, answer_bytes_bound
from tensorop_client._proto import tensorop_pb2 as pb

# The handles a call reads, each with the field naming it.
_Reads = list[tuple[str, pb.TensorHandle]]


def _tensor_reads(inputs: Mapping[str, pb.Tensor], prefix: str = "") -> _Reads:
    """The handles among a request's inputs, in name order."""
    return [
        (f'{prefix}inputs["{name}"]', inputs[name].handle)
        for name in sorted(inputs)
        if inputs[name].HasField("handle")
    ]


def _chain_reads(chain: pb.RunChainRequest) -> _Reads:
    """The handles a chain's steps read, step by step."""
    reads: _Reads = []
    for i, step in enumerate(chain.steps):
        tensors = {n: s.tensor for n, s in step.inputs.items() if s.HasField("tensor")}
        reads.extend(_tensor_reads(tensors, f"steps[{i}]."))
    return reads


def _replica_read(reads: _Reads) -> pb.TensorHandle | None:
    """The handle whose replica the call goes to, or None for the target (no
    handle, or only older servers', which name no replica). INVALID_ARGUMENT
    naming both inputs when two name different replicas."""
    chosen: tuple[str, pb.TensorHandle] | None = None
    for field, handle in reads:
        if not handle.replica:
            continue
        if chosen is None:
            chosen = (field, handle)
        elif handle.replica != chosen[1].replica:
            raise TensorOpError(
                "INVALID_ARGUMENT",
                f"{chosen[0]} lives on replica {chosen[1].replica} and {field} on replica "
                f"{handle.replica}; a call reads handles of one replica",
            )
    return None if chosen is None else chosen[1]


@dataclass(frozen=True)
class Target:
    """Where a call goes: `replica` ("": the target, balanced over its
    replicas), for a call on `handle_id` ("": none named, as a Put), which
    messages about an unreachable replica name."""

    replica: str = ""
    handle_id: str = ""


def _target(handle: pb.TensorHandle | None) -> Target:
    """The replica holding `handle`, or the target for None."""
    return Target(handle.replica, handle.id) if handle is not None else Target()


class _Route(enum.Enum):
    UNARY = "Run"
    STREAM = "RunStream"
    CHUNKED = "RunChunked"


# Room left in a message for what surrounds an answer's data (ids, backend,
# layouts): an answer whose data is within this of the limit streams back.
_ANSWER_SLACK_BYTES = 64 << 10


def _choose_route(
    prepared: _Prepared,
    request_bytes: int,
    stream: bool,
    max_message_bytes: int,
    stream_threshold_bytes: int,
) -> _Route:
    """Unary while the request and its answer fit in one message and are
    small; larger inputs upload in chunks (RunChunked, which streams the
    answer too), larger answers stream back (RunStream). Past a few MiB
    gRPC moves one large message much slower than the same bytes in
    chunks (bench/python_client.py), hence stream_threshold_bytes."""
    if request_bytes > max_message_bytes or prepared.data_bytes > stream_threshold_bytes:
        return _Route.CHUNKED
    answer_bytes = answer_bytes_bound(prepared.header)
    if (
        stream
        or answer_bytes > max_message_bytes - _ANSWER_SLACK_BYTES
        or answer_bytes > stream_threshold_bytes
    ):
        return _Route.STREAM
    return _Route.UNARY
