"""Answers decoded without I/O: Result, outputs as read-only arrays over the
received bytes (or the RemoteTensors of kept outputs), a unary RunResponse,
and the ResultParts of a streamed answer reassembled (_Assembler), each
checked so that what the server sent is a valid answer or an INTERNAL
TensorOpError."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
import numpy as np

from tensorop_client._core.errors import TensorOpError, protocol_error
from tensorop_client._core.progress import _Progress
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import LayoutError, check_layout, decode_array
from tensorop_client.wire import WireError, parse_result_part, parse_run_response

# What received tensors are read from: the answer's bytes or a chunk buffer.
Buffer = bytes | bytearray | memoryview | np.ndarray


class _Owner(Protocol):
    """What makes the RemoteTensors of kept outputs: a client."""

    def _remote(self, handle: pb.TensorHandle) -> Any: ...


@dataclass(frozen=True)
class Result:
    """What one request produced: read-only arrays honouring the returned strides
    (a RemoteTensor, or AsyncRemoteTensor, for each output the request kept), and
    where it ran ("cpu" or "opencl:<device>")."""

    outputs: list[Any]  # np.ndarray | RemoteTensor
    backend: str


# google.rpc.Code values -> names, for the statuses RunBidi answers carry.
_CODE_NAMES: dict[int, str] = {c.value[0]: c.name for c in grpc.StatusCode}


def _decode(
    index: int, dtype: int, sizes: Sequence[int], strides: Sequence[int], data: Buffer
) -> np.ndarray:
    try:
        return decode_array(dtype, sizes, strides, data)
    except LayoutError as e:
        raise protocol_error(f"output {index}: {e}") from None


def _output(
    owner: _Owner | None, index: int, layout: pb.Tensor | pb.OutputHeader, data: Buffer
) -> Any:
    """One output: a read-only array over `data`, or, for an output the
    request kept, the owner's RemoteTensor for the handle the answer carries."""
    if not layout.HasField("handle"):
        return _decode(index, layout.dtype, layout.sizes, layout.strides, data)
    if not layout.handle.id:
        raise protocol_error(f"output {index} is a handle without an id")
    if owner is None:
        raise protocol_error(f"output {index} is a handle, which no request here kept")
    return owner._remote(layout.handle)


# ---- streamed results -------------------------------------------------------


class _Assembler:
    """Reassembles ResultParts: per output in order, a header and then exactly
    byte_length bytes of chunks (the C++ client's checks), each output's chunks
    copied into one buffer allocated when its header arrives."""

    def __init__(self, progress: _Progress | None = None, owner: _Owner | None = None) -> None:
        self._progress = progress or _Progress(None)
        self._owner = owner  # makes the RemoteTensors of kept outputs
        self._headers: list[pb.OutputHeader] = []
        self._buffers: list[np.ndarray] = []
        self._filled = 0  # bytes of the last output received
        self._remaining = 0  # bytes still due for the last output

    def feed(self, part: bytes | pb.ResultPart) -> None:
        """One part, serialized (as the client receives them) or parsed."""
        if isinstance(part, pb.ResultPart):
            kind = part.WhichOneof("part")
            parsed = part.header if kind == "header" else memoryview(part.chunk) if kind else None
        else:
            try:
                parsed = parse_result_part(part)
            except WireError as e:
                raise protocol_error(f"a ResultPart that does not parse: {e}") from None
        if isinstance(parsed, pb.OutputHeader):
            self._header(parsed)
        elif parsed is not None:
            self._chunk(parsed)
        else:
            raise protocol_error("an empty ResultPart")

    def _header(self, header: pb.OutputHeader) -> None:
        index = len(self._headers)
        if self._remaining:
            raise protocol_error(
                f"header of output {header.index} arrived {self._remaining} bytes before "
                f"output {index - 1} was complete"
            )
        if header.index != index:
            raise protocol_error(
                f"expected the header of output {index}, got output {header.index}"
            )
        if header.byte_length < 0:
            raise protocol_error(f"output {header.index} has byte_length {header.byte_length}")
        if header.HasField("handle"):  # kept on the server: no chunks follow
            if header.byte_length:
                raise protocol_error(
                    f"output {index} is a handle but has {header.byte_length} bytes"
                )
            self._headers.append(header)
            self._buffers.append(np.empty(0, dtype=np.uint8))
            self._filled = 0
            return
        # Checked before allocating, so a bogus header costs no memory.
        try:
            check_layout(header.dtype, header.sizes, header.strides, header.byte_length)
        except LayoutError as e:
            raise protocol_error(f"output {index}: {e}") from None
        try:
            # Uninitialized: the chunks overwrite every byte (pages are touched
            # as they arrive, not zeroed first).
            buffer = np.empty(header.byte_length, dtype=np.uint8)
        except MemoryError:
            raise TensorOpError(
                "RESOURCE_EXHAUSTED",
                f"cannot allocate {header.byte_length} bytes for output {index}",
            ) from None
        self._headers.append(header)
        self._buffers.append(buffer)
        self._filled = 0
        self._remaining = header.byte_length
        if self._progress.announce(header.byte_length):
            self._progress.add()

    def _chunk(self, chunk: memoryview) -> None:
        size = chunk.nbytes
        if not self._headers or size > self._remaining:
            raise protocol_error(
                f"a chunk of {size} bytes exceeds what the headers announced by "
                f"{size - self._remaining}"
            )
        self._buffers[-1].data[self._filled : self._filled + size] = chunk
        self._filled += size
        self._remaining -= size
        self._progress.add(done=size)

    def result(self) -> Result:
        if self._remaining:
            raise protocol_error(
                f"the stream ended {self._remaining} bytes short of output {len(self._headers) - 1}"
            )
        if self._progress.settle():
            self._progress.add()
        outputs = [
            _output(self._owner, i, h, data)
            for i, (h, data) in enumerate(zip(self._headers, self._buffers, strict=True))
        ]
        return Result(outputs, self._headers[0].backend if self._headers else "")


def _read_parts(parts: Iterable[bytes | pb.ResultPart], owner: _Owner | None = None) -> Result:
    """Reassembles a RunStream or RunChunked answer (see _Assembler)."""
    assembler = _Assembler(owner=owner)
    for part in parts:
        assembler.feed(part)
    return assembler.result()


def _result_from_response(data: bytes, owner: _Owner) -> tuple[pb.RunResponse, Result, int]:
    """A serialized RunResponse: its small fields, its outputs as read-only
    arrays over `data` itself (no copy) or RemoteTensors, and their bytes."""
    try:
        meta, tensors = parse_run_response(data)
    except WireError as e:
        raise protocol_error(f"a RunResponse that does not parse: {e}") from None
    outputs = [_output(owner, i, t, payload) for i, (t, payload) in enumerate(tensors)]
    return meta, Result(outputs, meta.backend), sum(payload.nbytes for _, payload in tensors)


def _fetched(result: Result) -> np.ndarray:
    """Fetch's one output."""
    if len(result.outputs) != 1 or not isinstance(result.outputs[0], np.ndarray):
        raise protocol_error(f"Fetch answered {len(result.outputs)} outputs, not one array")
    output: np.ndarray = result.outputs[0]
    return output
