"""Requests in chunks, built without I/O: RunChunked's parts (the request
without its inputs' bytes, then the bytes input by input), Put's parts, and
the message limits they fit, including the limit a server's refusal names."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy.typing as npt

from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.requests import _backend, _Prepared
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import (
    LayoutError,
    WireTensor,
    check_layout,
    encode_array,
    numpy_dtype,
    span_elements,
)
from tensorop_client.wire import input_chunk_prefix, put_chunk_prefix


def _chunk_size(chunk_bytes: int | None, default: int, max_message_bytes: int) -> int:
    """`chunk_bytes`, or the client's (`default`), checked here rather than in
    the generators of parts, which run on gRPC's side."""
    size = default if chunk_bytes is None else chunk_bytes
    if not 0 < size <= max_message_bytes - 1024:
        raise ValueError(
            f"chunk_bytes must be in [1, max_message_bytes - 1024 = "
            f"{max_message_bytes - 1024}], got {size}"
        )
    return size


def _chunk_parts(prepared: _Prepared, size: int) -> Iterator[tuple[bytes, int]]:
    """RunChunked's parts (each with the data bytes it carries): the request
    without its inputs' bytes, then the bytes in chunks of `size`, input by
    input in name order (as the C++ client)."""
    yield pb.RequestPart(request=prepared.header).SerializeToString(), 0
    for name in sorted(prepared.data):
        view = prepared.data[name]
        for at in range(0, view.nbytes, size):
            piece = view[at : at + size]
            # The one copy of the bytes on our side: gRPC sends only `bytes`.
            yield b"".join((input_chunk_prefix(name, piece.nbytes), piece)), piece.nbytes


def _put_header(
    array: npt.ArrayLike | WireTensor, backend: str, ttl_seconds: int, device_index: int | None
) -> tuple[pb.PutHeader, memoryview]:
    """Put's header and the bytes it sends (_put_data), sliced from the
    array's memory. Strided arrays keep their layout, padding and all
    (encode_array), as run sends them."""
    wire = array if isinstance(array, WireTensor) else encode_array(array)
    header = pb.PutHeader(
        dtype=wire.dtype,  # type: ignore[arg-type]  # a DType value
        sizes=wire.sizes,
        strides=wire.strides or (),
        backend=_backend(backend),  # type: ignore[arg-type]  # a Backend value
        ttl_seconds=ttl_seconds,
    )
    if device_index is not None:
        header.device_index = device_index
    return header, _put_data(wire)


def _put_parts(header: pb.PutHeader, data: memoryview, size: int) -> Iterator[tuple[bytes, int]]:
    """Put's parts (each with the data bytes it carries): the header, then
    `data` in chunks of `size`."""
    yield pb.PutPart(header=header).SerializeToString(), 0
    for at in range(0, data.nbytes, size):
        piece = data[at : at + size]
        # The one copy of the bytes on our side: gRPC sends only `bytes`.
        yield b"".join((put_chunk_prefix(piece.nbytes), piece)), piece.nbytes


def _put_data(wire: WireTensor) -> memoryview:
    """The bytes Put takes: exactly the layout's, where a strided tensor may hold
    more (never read; as the C++ client). Anything else goes as it is, for the
    server to judge."""
    if not wire.strides:
        return wire.data
    try:
        check_layout(wire.dtype, wire.sizes, wire.strides, wire.data.nbytes)
    except LayoutError:
        return wire.data
    itemsize = numpy_dtype(wire.dtype).itemsize
    return wire.data[: span_elements(wire.sizes, wire.strides) * itemsize]


def _too_big(error: TensorOpError) -> bool:
    """A message over a limit: the server's or gRPC's refusal of one message,
    which the streaming calls avoid."""
    message = error.message.lower()
    return error.code == "RESOURCE_EXHAUSTED" and (
        "--max_message_bytes" in message or "larger than max" in message
    )


def _refused_limit(error: TensorOpError) -> int | None:
    """The message limit a refusal names: tensord's "message limit of LIMIT
    bytes", gRPC's "Sent message larger than max (SIZE vs. LIMIT)" (this
    client's own), or half of gRPC's "Received ... (SIZE vs. LIMIT)": tensord
    refuses a message over --max_message_bytes itself, naming it, so gRPC's
    refusal on its side comes from its backstop at twice the flag (half of it
    is the limit, and below any other server's)."""
    match = re.search(
        r"(Received|Sent) message larger than max \(\d+ vs\. (\d+)\)|message limit of (\d+) bytes",
        error.message,
    )
    if match is None:
        return None
    if match.group(3):
        return int(match.group(3))
    return int(match.group(2)) // (2 if match.group(1) == "Received" else 1)


def _chunks_within(limit: int, chunk_bytes: int) -> int:
    """Chunks of at most `chunk_bytes` whose messages fit `limit` bytes."""
    return max(1, min(chunk_bytes, limit - 1024))


def _fallback_chunk_bytes(error: TensorOpError, chunk_bytes: int) -> int:
    """Chunks that fit the limit a refusal names."""
    limit = _refused_limit(error)
    return chunk_bytes if limit is None else _chunks_within(limit, chunk_bytes)


def _smaller_limit(error: TensorOpError, limit: int) -> int | None:
    """After a refused chain: the server's lower message limit to fit, or None
    when the refusal is not that (and stands)."""
    refused = _refused_limit(error) if _too_big(error) else None
    return refused if refused is not None and refused < limit else None
