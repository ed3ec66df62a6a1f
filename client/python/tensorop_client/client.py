"""tensorop_client.Client: tensord's calls with numpy arrays, any size.

    with Client("127.0.0.1:50051") as client:
        result = client.run("slice", {"input": x},
                            {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]},
                            outputs=[(2, 2)])
        result.outputs[0]  # a read-only numpy array with the strides the server returned

Every failure is a TensorOpError carrying the gRPC status code name and message
(INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED, UNAVAILABLE, ...), or
INTERNAL when what the server sent cannot be a valid answer, so the arrays of a
Result are always safe to read.

`run` picks the call: Run while the request and its answer fit in one message
(max_message_bytes) and are small (stream_threshold_bytes), RunChunked for
larger inputs and the streamed answer for outputs that may be larger. Tensor
bytes never pass through protobuf messages (tensorop_client.wire): inputs go
from the arrays' memory into the one `bytes` gRPC sends, and outputs are
read-only arrays over the received bytes (unary) or over one buffer per output
that the chunks are copied into. `run_many` pipelines many requests over
RunBidi. AsyncClient (tensorop_client.aio) has the same calls for asyncio.

Handles keep tensors on the server: `put` uploads an array and returns a
RemoteTensor, which `run` takes wherever it takes an array (the request then
names it instead of carrying its bytes); `run(..., keep=True)` leaves every
output on the server and returns RemoteTensors; `fetch`, `release` and
`list_handles` do the rest. A handle lives on one replica (its
`handle.replica`): every call using RemoteTensors goes there, over a channel
of its own, and the other calls balance over the target. A call reading
handles of two replicas raises INVALID_ARGUMENT before anything is sent;
`put(..., replica=h.handle.replica)` keeps a tensor beside another.

    with client.put(x) as h:  # released on leaving the block
        kept = client.run("strided_slice", {"input": h}, attrs, keep=True).outputs[0]
        kept.fetch()  # the array; kept.release() frees it

`chain` runs Steps one after another in one RunChain call, each reading
arrays, RemoteTensors or earlier steps' outputs (step.output(k), StepRef),
which stay on the server in between; it answers the outputs asked for, as
arrays or (kept) RemoteTensors, streamed like run_stream's.

    first = Step("slice", {"input": x}, attrs, outputs=[(4, 4)])
    halves = Step("split", {"input": first}, {"axis": 0}, outputs=[(2, 4), (2, 4)])
    top, bottom = client.chain([first, halves]).outputs  # the last step's outputs
"""

from __future__ import annotations

import atexit
import enum
import math
import re
import threading
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client._proto import tensorop_pb2_grpc as pb_grpc
from tensorop_client.channel import (
    channel_credentials,
    channel_options,
    channel_target,
    explain_security_error,
    replica_channel_options,
    target_authority,
)
from tensorop_client.tensors import (
    LayoutError,
    WireTensor,
    check_layout,
    decode_array,
    encode_array,
    numpy_dtype,
    span_elements,
    to_tensor,
)
from tensorop_client.wire import (
    WireError,
    chain_request_meta,
    encode_chain_request,
    encode_request,
    input_chunk_prefix,
    parse_result_part,
    parse_run_response,
    pieces_bytes,
    put_chunk_prefix,
    request_meta,
)

BACKENDS: dict[str, int] = {"auto": pb.AUTO, "cpu": pb.CPU, "opencl": pb.OPENCL}
OPS: tuple[str, ...] = tuple(f.name for f in pb.RunRequest.DESCRIPTOR.oneofs_by_name["op"].fields)

Attrs = Mapping[str, int | Sequence[int]]
# What received tensors are read from: the answer's bytes or a chunk buffer.
Buffer = bytes | bytearray | memoryview | np.ndarray


class TensorOpError(Exception):
    """A call that failed: `code` is the gRPC status code name, `message` its text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def protocol_error(what: str) -> TensorOpError:
    return TensorOpError("INTERNAL", f"server broke the protocol: {what}")


@dataclass(frozen=True)
class Output:
    """The layout wanted for one output: sizes (required for slice and split) and
    optional strides in elements (None: packed)."""

    sizes: Sequence[int] = ()
    strides: Sequence[int] | None = None


# An Output, a {"sizes": ..., "strides": ...} mapping, or just the sizes.
OutputLike = Output | Mapping[str, Sequence[int]] | Sequence[int]

# Operators whose one output follows from the inputs: an OutputDesc is optional.
_DERIVED_OUTPUT_OPS = ("strided_slice", "scatter_elements")


def _output_count(op: str | None, outputs: Sequence[Any]) -> int:
    """How many outputs a step or request of `op` with `outputs` makes."""
    return 1 if op in _DERIVED_OUTPUT_OPS else len(outputs)


@dataclass(eq=False)  # compared and hashed by identity: a chain finds its steps so
class Step:
    """One operator of a chain (Client.chain), with run's arguments. Each input
    is an array, a RemoteTensor, or an earlier step's output: `step.output(k)`
    (or StepRef), or the Step itself for its only output."""

    op: str
    inputs: Mapping[str, npt.ArrayLike | _Remote | StepRef | Step]
    attrs: Attrs | None = None
    outputs: Sequence[OutputLike] | None = None

    def output(
        self, index: int = 0, *, strides: Sequence[int] | None = None, keep: bool = False
    ) -> StepRef:
        """Output `index` of this step, as a later step's input or as a chain
        result (where `strides` and `keep` apply: see StepRef)."""
        return StepRef(self, index, strides, keep)


@dataclass(frozen=True)
class StepRef:
    """Output `output` of a chain step: `step` is the Step or its index in the
    chain's steps. As an input it is read on the server; as a chain result it
    comes back as an array (in `strides`, elements, when given: they become
    the step output's strides) or, with `keep`, stays on the server and comes
    back as a RemoteTensor."""

    step: int | Step
    output: int = 0
    strides: Sequence[int] | None = None
    keep: bool = False


# A chain step: a Step, a mapping of its keyword arguments or a tuple of its
# positional ones (run_many's forms of run's arguments).
StepLike = Step | Mapping[str, Any] | Sequence[Any]
# A chain result: a StepRef, a (step, output) pair, or a Step for every output.
ChainResultLike = StepRef | Step | tuple[int | Step, int]


@dataclass(frozen=True)
class Result:
    """What one request produced: read-only arrays honouring the returned strides
    (a RemoteTensor, or AsyncRemoteTensor, for each output the request kept), and
    where it ran ("cpu" or "opencl:<device>")."""

    outputs: list[Any]  # np.ndarray | RemoteTensor
    backend: str


class _Remote:
    """What RemoteTensor and AsyncRemoteTensor share: the handle and its layout."""

    def __init__(self, client: Any, handle: pb.TensorHandle) -> None:
        self._client = client
        self.handle = handle

    @property
    def id(self) -> str:
        return self.handle.id

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.handle.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.handle.sizes)

    @property
    def strides(self) -> tuple[int, ...]:
        """In elements (numpy's are in bytes)."""
        return tuple(self.handle.strides)

    def __repr__(self) -> str:
        # Only the id's first 8 characters: the id is the access right.
        return (
            f"{type(self).__name__}(id='{self.id[:8]}...', dtype={self.dtype}, "
            f"shape={self.shape}, strides={self.strides})"
        )


class RemoteTensor(_Remote):
    """A tensor kept on the server (Client.put, or an output of run(keep=True)):
    its TensorHandle as `handle`, and `id`, `dtype`, `shape`, `strides`
    (elements). Client.run takes it wherever it takes an array. A context
    manager: leaving the block releases it."""

    _client: Client

    def fetch(
        self, strides: Sequence[int] | None = None, *, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """Client.fetch: the tensor as a read-only array, packed or with `strides`."""
        return self._client.fetch(self, strides, progress=progress)

    def release(self) -> None:
        """Client.release: frees it on the server (later uses are NOT_FOUND)."""
        self._client.release(self)

    def __enter__(self) -> RemoteTensor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


# What the handle calls take: RemoteTensors or their ids.
HandleLike = str | _Remote


def _handle_id(tensor: HandleLike) -> str:
    return tensor.id if isinstance(tensor, _Remote) else tensor


def _by_replica(tensors: HandleLike | Iterable[HandleLike]) -> dict[str, list[str]]:
    """Handle ids by the replica holding them ("": an id alone, or a handle of
    an older server, which names none: the target's)."""
    if isinstance(tensors, (str, _Remote)):
        tensors = [tensors]
    groups: dict[str, list[str]] = {}
    for t in tensors:
        replica = t.handle.replica if isinstance(t, _Remote) else ""
        groups.setdefault(replica, []).append(_handle_id(t))
    return groups


def _refer(tensor: pb.Tensor, handle: pb.TensorHandle) -> None:
    """Makes `tensor` name the handle (its id, and its replica to route the
    call by), its layout beside it (the handle's, so the answer's size can be
    bounded)."""
    tensor.dtype = handle.dtype
    tensor.sizes[:] = handle.sizes
    tensor.strides[:] = handle.strides
    tensor.handle.id = handle.id
    tensor.handle.replica = handle.replica


# ---- routing ----------------------------------------------------------------

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


def keep_outputs(request: pb.RunRequest) -> None:
    """Marks every output of `request` kept. strided_slice and scatter_elements
    derive their one output: an empty OutputDesc (sizes not given) describes it."""
    if not request.outputs and request.WhichOneof("op") in _DERIVED_OUTPUT_OPS:
        request.outputs.add()
    for desc in request.outputs:
        desc.keep = True


def _output_desc(output: OutputLike) -> pb.OutputDesc:
    if isinstance(output, Output):
        sizes, strides = output.sizes, output.strides
    elif isinstance(output, Mapping):
        unknown = set(output) - {"sizes", "strides"}
        if unknown:
            raise ValueError(f"an output has sizes and strides, not {sorted(unknown)}")
        sizes, strides = output.get("sizes", ()), output.get("strides")
    else:
        sizes, strides = output, None
    return pb.OutputDesc(sizes=[int(n) for n in sizes], strides=[int(s) for s in strides or ()])


def set_attrs(request: pb.RunRequest | pb.ChainStep, op: str, attrs: Attrs | None) -> None:
    """Selects `op` in the request's (or chain step's) oneof and sets its
    attributes by proto field name, so the attribute names are exactly the
    proto's."""
    if op not in OPS:
        raise ValueError(f"unknown operator {op!r} (one of {', '.join(OPS)})")
    message = getattr(request, op)
    message.SetInParent()  # an operator without attributes is still chosen
    for name, value in (attrs or {}).items():
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None or field.type != field.TYPE_INT64:
            raise ValueError(f"attrs.{name}: not an attribute of {op}")
        if field.is_repeated:
            if isinstance(value, (int, np.integer)):
                raise ValueError(f"attrs.{name}: expected a list of integers")
            getattr(message, name).extend(int(v) for v in value)
        else:
            if not isinstance(value, (int, np.integer)):
                raise ValueError(f"attrs.{name}: expected an integer")
            setattr(message, name, int(value))


def _request_header(
    op: str,
    attrs: Attrs | None,
    outputs: Sequence[OutputLike] | None,
    backend: str,
    device_index: int | None,
    keep: bool = False,
) -> pb.RunRequest:
    request = pb.RunRequest(backend=_backend(backend))  # type: ignore[arg-type]
    set_attrs(request, op, attrs)
    request.outputs.extend(_output_desc(o) for o in outputs or ())
    if device_index is not None:
        request.device_index = device_index
    if keep:
        keep_outputs(request)
    return request


def _backend(backend: str) -> int:
    if backend not in BACKENDS:
        raise ValueError(f"backend is one of {', '.join(BACKENDS)}, not {backend!r}")
    return BACKENDS[backend]


def make_request(
    op: str,
    inputs: Mapping[str, npt.ArrayLike | _Remote],
    attrs: Attrs | None = None,
    outputs: Sequence[OutputLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    keep: bool = False,
) -> pb.RunRequest:
    """A RunRequest from numpy inputs (strided views travel with their strides)
    or RemoteTensors (named by their handle). Its tensors hold copies of the
    inputs' bytes (protobuf's bytes fields copy); Client.run sends numpy inputs
    without building one. `keep`: every output stays on the server."""
    request = _request_header(op, attrs, outputs, backend, device_index, keep)
    for name, array in inputs.items():
        if isinstance(array, _Remote):
            _refer(request.inputs[name], array.handle)
        else:
            request.inputs[name].CopyFrom(to_tensor(array))
    return request


def _status_error(
    error: grpc.RpcError, tls: bool = False, via: _Via | None = None
) -> TensorOpError:
    # Calls' RpcErrors are also grpc.Call objects (grpc.aio's AioRpcError alike).
    call: grpc.Call = error  # type: ignore[assignment]
    code = call.code().name
    # TLS and token failures say which part failed.
    message = explain_security_error(code, call.details() or "", tls)
    # A replica that answered UNAVAILABLE itself did so over a ready
    # connection; any other state means the call never got through.
    if via is not None and via.replica and code == "UNAVAILABLE" and not via.calls.ready():
        message = f"replica {via.replica}{via.holding} is unreachable: {message}"
    return TensorOpError(code, message)


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
    owner: _ClientBase | None, index: int, layout: pb.Tensor | pb.OutputHeader, data: Buffer
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


# ---- progress ---------------------------------------------------------------

# progress(done, total): bytes of tensor data moved so far and in all, counting
# the inputs sent and the outputs received.
ProgressFn = Callable[[int, int], None]


class _Progress:
    """Counts the bytes of one call for its progress callback. `total` starts
    with the inputs and grows by each output's byte_length as its header
    arrives, so both numbers only grow and the last call has done == total."""

    def __init__(self, callback: ProgressFn | None, total: int = 0, done: int = 0) -> None:
        self.callback = callback
        self.total = total
        self.done = done

    def add(self, done: int = 0, total: int = 0) -> None:
        self.done += done
        self.total += total
        if self.callback is not None:
            self.callback(self.done, self.total)


def _counted(
    parts: Iterable[tuple[bytes, int]], counter: _Progress, failed: list[Exception]
) -> Iterator[bytes]:
    """The parts of an upload (each with the data bytes it carries), counted as
    gRPC takes them: it takes the next part once the last one was written, so
    the memory in flight stays a chunk or two. An exception raised here (the
    progress callback's) goes into `failed` for the caller to raise, as gRPC
    only cancels the call."""
    try:
        counter.add()
        for part, data_bytes in parts:
            yield part
            if data_bytes:
                counter.add(done=data_bytes)
    except Exception as e:
        failed.append(e)
        raise


# ---- streamed results -------------------------------------------------------


class _Assembler:
    """Reassembles ResultParts: per output in order, a header and then exactly
    byte_length bytes of chunks (the C++ client's checks), each output's chunks
    copied into one buffer allocated when its header arrives."""

    def __init__(self, progress: _Progress | None = None, owner: _ClientBase | None = None) -> None:
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
            parsed = (
                part.header if kind == "header" else memoryview(part.chunk) if kind else None
            )
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
        self._progress.add(total=header.byte_length)

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
        outputs = [
            _output(self._owner, i, h, data)
            for i, (h, data) in enumerate(zip(self._headers, self._buffers, strict=True))
        ]
        return Result(outputs, self._headers[0].backend if self._headers else "")


def _read_parts(
    parts: Iterable[bytes | pb.ResultPart], owner: _ClientBase | None = None
) -> Result:
    """Reassembles a RunStream or RunChunked answer (see _Assembler)."""
    assembler = _Assembler(owner=owner)
    for part in parts:
        assembler.feed(part)
    return assembler.result()


def _result_from_response(
    data: bytes, owner: _ClientBase
) -> tuple[pb.RunResponse, Result, int]:
    """A serialized RunResponse: its small fields, its outputs as read-only
    arrays over `data` itself (no copy) or RemoteTensors, and their bytes."""
    try:
        meta, tensors = parse_run_response(data)
    except WireError as e:
        raise protocol_error(f"a RunResponse that does not parse: {e}") from None
    outputs = [_output(owner, i, t, payload) for i, (t, payload) in enumerate(tensors)]
    return meta, Result(outputs, meta.backend), sum(payload.nbytes for _, payload in tensors)


# ---- requests ---------------------------------------------------------------

# Room left in a message for what surrounds an answer's data (ids, backend,
# layouts): an answer whose data is within this of the limit streams back.
_ANSWER_SLACK_BYTES = 64 << 10


@dataclass
class _Prepared:
    """A request ready to send: the RunRequest without its inputs' bytes, and
    those bytes (memoryviews of the callers' arrays where the layout allows)."""

    header: pb.RunRequest
    data: dict[str, memoryview]

    def pieces(self) -> tuple[list[bytes | memoryview], int]:
        """The serialized RunRequest in pieces for one join, and its size."""
        pieces = encode_request(self.header, self.data)
        return pieces, pieces_bytes(pieces)

    @property
    def data_bytes(self) -> int:
        return sum(view.nbytes for view in self.data.values())


def _prepare(
    op: str,
    inputs: Mapping[str, npt.ArrayLike | _Remote],
    attrs: Attrs | None,
    outputs: Sequence[OutputLike] | None,
    backend: str,
    device_index: int | None,
    keep: bool = False,
) -> _Prepared:
    header = _request_header(op, attrs, outputs, backend, device_index, keep)
    data: dict[str, memoryview] = {}
    for name, array in inputs.items():
        payload = _set_input(header.inputs[name], array)
        if payload is not None:
            data[name] = payload
    return _Prepared(header, data)


def _set_input(tensor: pb.Tensor, array: npt.ArrayLike | _Remote) -> memoryview | None:
    """Describes one input in `tensor`, which gets no bytes: a RemoteTensor by
    its handle (None), an array by its layout, returning its bytes (a view of
    the array's memory where the layout allows) to send beside it."""
    tensor.SetInParent()
    if isinstance(array, _Remote):
        _refer(tensor, array.handle)  # no bytes: no data field (wire.py)
        return None
    wire = encode_array(array)
    tensor.dtype = wire.dtype  # type: ignore[assignment]
    tensor.sizes.extend(wire.sizes)
    tensor.strides.extend(wire.strides or ())
    return wire.data


def _prepare_request(request: pb.RunRequest) -> _Prepared:
    return _Prepared(*request_meta(request))


RequestLike = pb.RunRequest | Mapping[str, Any] | Sequence[Any]


def _prepare_any(request: RequestLike) -> _Prepared:
    """run_many's requests: a RunRequest, a mapping of run's keyword arguments
    or a tuple of its positional ones."""
    if isinstance(request, pb.RunRequest):
        return _prepare_request(request)
    if isinstance(request, Mapping):
        return _prepare(**_run_arguments(**request))
    return _prepare(**_run_arguments(*request))


def _run_arguments(
    op: str,
    inputs: Mapping[str, npt.ArrayLike | _Remote],
    attrs: Attrs | None = None,
    outputs: Sequence[OutputLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    return {
        "op": op,
        "inputs": inputs,
        "attrs": attrs,
        "outputs": outputs,
        "backend": backend,
        "device_index": device_index,
        "keep": keep,
    }


# ---- chains -----------------------------------------------------------------


@dataclass
class _PreparedChain:
    """A RunChainRequest ready to send: itself without its input tensors'
    bytes, and those bytes by (step, input name), as _Prepared. It goes in one
    message: inputs that would take it over the limit go as handles instead."""

    header: pb.RunChainRequest
    data: dict[tuple[int, str], memoryview]

    def payload(self) -> bytes:
        """The serialized request: the one copy of the inputs' bytes on our side."""
        return b"".join(encode_chain_request(self.header, self.data))

    @property
    def data_bytes(self) -> int:
        return sum(view.nbytes for view in self.data.values())

    def next_to_put(self, limit: int) -> tuple[int, str] | None:
        """The input to Put, so that the request fits `limit` bytes: None when
        it fits, else the largest one still carrying bytes."""
        size = pieces_bytes(encode_chain_request(self.header, self.data))
        if size <= limit:
            return None
        carried = [key for key, view in self.data.items() if view.nbytes]
        if not carried:
            raise TensorOpError(
                "RESOURCE_EXHAUSTED",
                f"the RunChainRequest takes {size} bytes without its tensors' data, more than "
                f"the message limit of {limit} bytes (max_message_bytes)",
            )
        return max(carried, key=lambda key: self.data[key].nbytes)

    def wire(self, key: tuple[int, str]) -> WireTensor:
        """An input as Put takes it: its layout as written, and its bytes."""
        tensor = self.header.steps[key[0]].inputs[key[1]].tensor
        return WireTensor(
            tensor.dtype, tuple(tensor.sizes), tuple(tensor.strides) or None, self.data[key]
        )

    def refer(self, key: tuple[int, str], handle: pb.TensorHandle) -> int:
        """Names `handle` for the input instead of sending it; its bytes."""
        _refer(self.header.steps[key[0]].inputs[key[1]].tensor, handle)
        return self.data.pop(key).nbytes


class _StepIndex:
    """Where each Step object of a chain stands."""

    def __init__(self, steps: Sequence[Any]) -> None:
        self._positions = {id(step): i for i, step in enumerate(steps) if isinstance(step, Step)}

    def position(self, step: int | Step) -> int:
        if not isinstance(step, Step):
            return int(step)  # the server judges the index
        position = self._positions.get(id(step))
        if position is None:
            raise ValueError(f"a StepRef names a Step that is not in the chain: {step.op}")
        return position


def _as_step(step: StepLike) -> Step:
    if isinstance(step, Step):
        return step
    if isinstance(step, Mapping):
        return Step(**step)
    return Step(*step)


def _input_source(source: pb.ChainInput, value: Any, steps: _StepIndex) -> memoryview | None:
    """One input of a chain step: an earlier step's output, or a tensor
    (_set_input: its bytes, or None for a handle)."""
    if isinstance(value, Step):
        count = _output_count(value.op, value.outputs or ())
        if count != 1:
            raise ValueError(
                f"a {value.op} step with {count} outputs as an input: name one "
                "with step.output(k)"
            )
        value = value.output(0)
    if isinstance(value, StepRef):
        if value.strides is not None or value.keep:
            raise ValueError("a step output read as an input takes no strides or keep")
        source.step.step = steps.position(value.step)
        source.step.output = int(value.output)
        return None
    return _set_input(source.tensor, value)


def _result_refs(
    results: Sequence[ChainResultLike] | None, header: pb.RunChainRequest
) -> Iterator[tuple[int, StepRef]]:
    """The StepRefs a chain's results stand for, each with the position of
    the item that named it; None: every output of the last step."""
    if results is None:
        last = header.steps[-1] if header.steps else pb.ChainStep()
        count = _output_count(last.WhichOneof("op"), last.outputs)
        results = [(len(header.steps) - 1, k) for k in range(count)]
    for j, item in enumerate(results):
        if isinstance(item, StepRef):
            yield j, item
        elif isinstance(item, Step):
            count = _output_count(item.op, item.outputs or ())
            yield from ((j, item.output(k)) for k in range(count))
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            yield j, StepRef(*item)
        else:
            raise ValueError(
                f"results[{j}]: expected a StepRef, a Step or a (step, output) pair, got {item!r}"
            )


def _prepare_chain(
    steps: Sequence[StepLike],
    results: Sequence[ChainResultLike] | None,
    backend: str,
    device_index: int | None,
    request_id: str,
    keep: bool,
) -> _PreparedChain:
    header = pb.RunChainRequest(id=request_id, backend=_backend(backend))  # type: ignore[arg-type]
    if device_index is not None:
        header.device_index = device_index
    steps = list(steps)
    index = _StepIndex(steps)
    data: dict[tuple[int, str], memoryview] = {}
    for i, item in enumerate(steps):
        message = header.steps.add()
        try:
            step = _as_step(item)
            set_attrs(message, step.op, step.attrs)
            message.outputs.extend(_output_desc(o) for o in step.outputs or ())
            for name, value in step.inputs.items():
                payload = _input_source(message.inputs[name], value, index)
                if payload is not None:
                    data[(i, name)] = payload
        except (ValueError, TypeError) as e:
            raise type(e)(f"steps[{i}]: {e}") from None
    for j, ref in _result_refs(results, header):
        try:
            step_index = index.position(ref.step)
        except ValueError as e:
            raise ValueError(f"results[{j}]: {e}") from None
        header.results.add(
            step=step_index,
            output=int(ref.output),
            strides=[int(s) for s in ref.strides or ()],
            keep=ref.keep or keep,
        )
    return _PreparedChain(header, data)


def make_chain_request(
    steps: Sequence[StepLike],
    results: Sequence[ChainResultLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    *,
    id: str = "",
    keep: bool = False,
) -> pb.RunChainRequest:
    """The RunChainRequest Client.chain sends for these arguments (its
    tensors hold copies of the inputs' bytes)."""
    prepared = _prepare_chain(steps, results, backend, device_index, id, keep)
    return pb.RunChainRequest.FromString(prepared.payload())


def _span_bytes(sizes: Sequence[int], strides: Sequence[int], itemsize: int) -> int:
    if strides and len(strides) == len(sizes):
        return span_elements(sizes, strides) * itemsize
    return math.prod(sizes) * itemsize


def answer_bytes_bound(request: pb.RunRequest) -> int:
    """At least the bytes of output data `request` can produce: exact where the
    caller gave the output sizes (slice, split, and the others when given), and
    an upper bound from the input otherwise (a strided slice reads each input
    element at most once). 0 for requests the server will refuse anyway, which
    then go unary and come back with its error."""
    try:
        source = request.inputs.get("input")
        if source is None:
            return 0
        itemsize = numpy_dtype(source.dtype).itemsize
        if any(n < 0 for n in source.sizes) or any(
            n < 0 for o in request.outputs for n in (*o.sizes, *o.strides)
        ):
            return 0
        op = request.WhichOneof("op")
        if op in ("slice", "split"):
            return sum(
                _span_bytes(o.sizes, o.strides, itemsize) for o in request.outputs if not o.keep
            )
        wanted = request.outputs[0] if request.outputs else pb.OutputDesc()
        if wanted.keep:  # kept outputs send no bytes
            return 0
        if op == "scatter_elements":
            return _span_bytes(wanted.sizes or source.sizes, wanted.strides, itemsize)
        if wanted.sizes:
            return _span_bytes(wanted.sizes, wanted.strides, itemsize)
        elements = math.prod(source.sizes)
        # Strides without sizes: each size is at most `elements`.
        return elements * itemsize * (1 + sum(wanted.strides))
    except LayoutError:
        return 0


def _too_big(error: TensorOpError) -> bool:
    """A message over a limit: the server's or gRPC's refusal of one message,
    which the streaming calls avoid."""
    message = error.message.lower()
    return error.code == "RESOURCE_EXHAUSTED" and (
        "--max_message_bytes" in message or "larger than max" in message
    )


# ---- many requests over RunBidi ---------------------------------------------


@dataclass
class _Slot:
    """One request's place in run_many's order: its outcome, or the prepared
    request when it goes through run (too large for one message)."""

    value: Result | TensorOpError | None = None
    local: _Prepared | None = None

    def outcome(self) -> Result | TensorOpError:
        assert self.value is not None
        return self.value


class _Window:
    """run_many's bookkeeping, shared by Client and AsyncClient: which requests
    were taken from the caller's iterable and sent (each with its index as its
    id), which were answered, and the outcomes in request order. Not
    thread-safe: Client holds a lock around the other calls, and passes it to
    next_to_send."""

    def __init__(self, client: _ClientBase, requests: Iterable[RequestLike]) -> None:
        self._client = client
        self._requests = iter(requests)
        self._taken = 0  # requests taken from the iterable
        self._next = 0  # the next index to hand out
        self._slots: dict[int, _Slot] = {}
        self._pending: dict[str, int] = {}  # id -> index: sent, not answered
        self._exhausted = False
        self._ended = False
        self._stream_error: TensorOpError | None = None
        self._request_error: BaseException | None = None  # raised in its turn

    def next_to_send(self, lock: AbstractContextManager[Any]) -> bytes | None:
        """The next request for the stream, serialized; None when there is none.
        Requests too large for one message are set aside for run. Only the
        sender calls this; it reads the caller's iterable outside `lock`, so
        an iterable that waits for earlier outcomes does not stall them."""
        while True:
            with lock:
                if self._exhausted or self._ended:
                    return None
            try:
                item = next(self._requests)
                index = self._taken
                self._taken += 1
                prepared = _prepare_any(item)
            except StopIteration:
                with lock:
                    self._exhausted = True
                return None
            except Exception as e:  # a request that cannot be built: raised in its turn
                with lock:
                    self._request_error = e
                    self._exhausted = True
                return None
            prepared.header.id = str(index)
            pieces, size = prepared.pieces()
            # The stream goes over the target: a request reading a replica's
            # handles goes through run, to that replica.
            local = self._client._route(prepared, size, stream=False) is not _Route.UNARY or any(
                h.replica for _, h in _tensor_reads(prepared.header.inputs)
            )
            with lock:
                if self._ended:
                    return None
                if local:
                    self._slots[index] = _Slot(local=prepared)
                    continue
                self._pending[prepared.header.id] = index
            return b"".join(pieces)

    def answer(self, raw: bytes) -> bool:
        """Files one answer; False when it breaks the protocol (the stream is
        then over)."""
        try:
            meta, tensors = parse_run_response(raw)
        except WireError as e:
            self.fail(protocol_error(f"a RunResponse that does not parse: {e}"))
            return False
        index = self._pending.pop(meta.id, None)
        if index is None:
            self.fail(
                protocol_error(f'an answer for id "{meta.id}", which no unanswered request has')
            )
            return False
        outcome: Result | TensorOpError
        if meta.status.code != 0:
            name = _CODE_NAMES.get(meta.status.code, "UNKNOWN")
            outcome = TensorOpError(name, meta.status.message)
        else:
            try:
                outcome = Result(
                    [_output(self._client, i, t, data) for i, (t, data) in enumerate(tensors)],
                    meta.backend,
                )
            except TensorOpError as e:
                outcome = e
        self._slots[index] = _Slot(outcome)
        return True

    def fail(self, error: TensorOpError) -> None:
        if self._stream_error is None:
            self._stream_error = error

    def end(self) -> None:
        """The stream is over: requests sent and unanswered get its error."""
        self._ended = True
        error = self._stream_error or protocol_error(
            "the stream ended without answering this request"
        )
        for index in self._pending.values():
            self._slots[index] = _Slot(error)
        self._pending.clear()

    def pop_ready(self) -> _Slot | None:
        """The next outcome in request order, if it is known."""
        slot = self._slots.pop(self._next, None)
        if slot is not None:
            self._next += 1
        return slot

    def raise_if_unfinished(self) -> None:
        """After the last outcome: the reason requests were left unsent."""
        if self._request_error is not None:
            raise self._request_error
        if not self._exhausted:
            raise self._stream_error or protocol_error(
                "the stream ended before every request was sent"
            )


def _refused_limit(error: TensorOpError) -> int | None:
    """The message limit a refusal names: gRPC's "(SIZE vs. LIMIT)" or
    tensord's "message limit of LIMIT bytes"."""
    match = re.search(r"vs\. (\d+)\)|message limit of (\d+) bytes", error.message)
    return None if match is None else int(match.group(1) or match.group(2))


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


class _Route(enum.Enum):
    UNARY = "Run"
    STREAM = "RunStream"
    CHUNKED = "RunChunked"


_METHOD = "/tensorop.v1.TensorOp/"


class _Calls:
    """One channel's calls (grpc or grpc.aio): raw-bytes ones, requests framed
    by tensorop_client.wire and answers parsed there without protobuf copying
    the tensors' bytes, and the stub for the small unary ones. `ready` says
    whether its connection is up (replica channels)."""

    def __init__(self, channel: Any, ready: Callable[[], bool] = lambda: True) -> None:
        self.run = channel.unary_unary(_METHOD + "Run")
        self.run_stream = channel.unary_stream(_METHOD + "RunStream")
        self.run_chunked = channel.stream_stream(_METHOD + "RunChunked")
        self.run_bidi = channel.stream_stream(_METHOD + "RunBidi")
        self.put = channel.stream_unary(
            _METHOD + "Put", response_deserializer=pb.TensorHandle.FromString
        )
        self.fetch = channel.unary_stream(_METHOD + "Fetch")
        self.run_chain = channel.unary_stream(_METHOD + "RunChain")
        self.stub = pb_grpc.TensorOpStub(channel)
        self.channel = channel
        self.ready = ready


@dataclass(frozen=True)
class _Via:
    """Where a call goes: the target's channel, or the one replica holding the
    handles it reads (`holding`: " holding 0123abcd...", or "" for a Put)."""

    calls: _Calls
    replica: str = ""
    holding: str = ""


class _ReplicaChannels:
    """A client's channels to single replicas (handle calls), by replica
    address, each made on first use. Once `close` took them, asking for one
    raises ValueError, as a call on a closed gRPC channel does, rather than
    opening a channel nothing would close."""

    def __init__(self) -> None:
        self._calls: dict[str, _Calls] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, replica: str, make: Callable[[str], _Calls]) -> _Calls:
        with self._lock:
            if self._closed:
                raise ValueError("Cannot invoke RPC on closed channel!")
            calls = self._calls.get(replica)
            if calls is None:
                calls = self._calls[replica] = make(replica)
            return calls

    def close(self) -> list[_Calls]:
        """Every channel made so far, for the caller to close; none later."""
        with self._lock:
            self._closed = True
            calls = list(self._calls.values())
            self._calls.clear()
            return calls


class _ClientBase:
    """What Client and AsyncClient share: options, channel arguments and the
    choice of call."""

    def __init__(
        self,
        target: str,
        timeout: float | None,
        max_message_bytes: int,
        chunk_bytes: int,
        stream_threshold_bytes: int,
        security: Mapping[str, Any],
    ) -> None:
        if max_message_bytes < 4096:
            raise ValueError(f"max_message_bytes must be at least 4096, got {max_message_bytes}")
        if not 0 < chunk_bytes <= max_message_bytes - 1024:
            raise ValueError(
                "chunk_bytes must be in [1, max_message_bytes - 1024 = "
                f"{max_message_bytes - 1024}], got {chunk_bytes}"
            )
        self._target = channel_target(target)
        self._options = channel_options(max_message_bytes)
        self._credentials = channel_credentials(**security)
        self._tls = self._credentials is not None
        # Replica channels present the target's authority over TLS, so its
        # certificate verifies when a pod is reached by its IP.
        self._replica_options = replica_channel_options(
            max_message_bytes, target_authority(target) if self._tls else None
        )
        self._replicas = _ReplicaChannels()
        self._timeout = timeout
        self._max_message_bytes = max_message_bytes
        self._chunk_bytes = chunk_bytes
        self._stream_threshold_bytes = stream_threshold_bytes

    def _route(self, prepared: _Prepared, request_bytes: int, stream: bool) -> _Route:
        """Unary while the request and its answer fit in one message and are
        small; larger inputs upload in chunks (RunChunked, which streams the
        answer too), larger answers stream back (RunStream). Past a few MiB
        gRPC moves one large message much slower than the same bytes in
        chunks (bench/python_client.py), hence stream_threshold_bytes."""
        if (
            request_bytes > self._max_message_bytes
            or prepared.data_bytes > self._stream_threshold_bytes
        ):
            return _Route.CHUNKED
        answer_bytes = answer_bytes_bound(prepared.header)
        if (
            stream
            or answer_bytes > self._max_message_bytes - _ANSWER_SLACK_BYTES
            or answer_bytes > self._stream_threshold_bytes
        ):
            return _Route.STREAM
        return _Route.UNARY

    def _chunk_parts(
        self, prepared: _Prepared, chunk_bytes: int | None
    ) -> Iterator[tuple[bytes, int]]:
        """RunChunked's parts: the request without its inputs' bytes, then the
        bytes in chunks, input by input in name order (as the C++ client)."""
        size = self._chunk_size(chunk_bytes)

        def parts() -> Iterator[tuple[bytes, int]]:
            yield pb.RequestPart(request=prepared.header).SerializeToString(), 0
            for name in sorted(prepared.data):
                view = prepared.data[name]
                for at in range(0, view.nbytes, size):
                    piece = view[at : at + size]
                    # The one copy of the bytes on our side: gRPC sends only `bytes`.
                    yield b"".join((input_chunk_prefix(name, piece.nbytes), piece)), piece.nbytes

        return parts()

    def _chunk_size(self, chunk_bytes: int | None) -> int:
        """`chunk_bytes`, or the client's, checked here rather than in the
        generators of parts, which run on gRPC's side."""
        size = self._chunk_bytes if chunk_bytes is None else chunk_bytes
        if not 0 < size <= self._max_message_bytes - 1024:
            raise ValueError(
                f"chunk_bytes must be in [1, max_message_bytes - 1024 = "
                f"{self._max_message_bytes - 1024}], got {size}"
            )
        return size

    def _remote(self, handle: pb.TensorHandle) -> _Remote:
        """The RemoteTensor of this kind of client for a handle it received."""
        raise NotImplementedError

    def _main(self) -> _Calls:
        """The target's calls."""
        raise NotImplementedError

    def _replica_calls(self, replica: str) -> _Calls:
        """A new channel to one replica (replica_channel_options), its calls."""
        raise NotImplementedError

    def _via(self, replica: str, handle_id: str = "") -> _Via:
        """To `replica` (""; the target), for a call on `handle_id` ("": a Put);
        its channel is made on first use and kept until the client closes."""
        if not replica:
            return _Via(self._main())
        calls = self._replicas.get(replica, self._replica_calls)
        return _Via(calls, replica, f" holding {handle_id[:8]}..." if handle_id else "")

    def _via_handle(self, handle: pb.TensorHandle | None) -> _Via:
        return self._via(handle.replica, handle.id) if handle is not None else self._via("")

    def _put_parts(
        self,
        array: npt.ArrayLike | WireTensor,
        backend: str,
        ttl_seconds: int,
        device_index: int | None,
        chunk_bytes: int | None = None,
    ) -> tuple[Iterator[tuple[bytes, int]], int]:
        """Put's parts (each with the data bytes it carries) and the bytes in all:
        the header, then the tensor's buffer in chunks of chunk_bytes, sliced
        from the array's memory. Strided arrays keep their layout, padding and
        all (encode_array), as run sends them."""
        wire = array if isinstance(array, WireTensor) else encode_array(array)
        header = pb.PutHeader(
            dtype=wire.dtype,  # type: ignore[arg-type]
            sizes=wire.sizes,
            strides=wire.strides or (),
            backend=_backend(backend),  # type: ignore[arg-type]
            ttl_seconds=ttl_seconds,
        )
        if device_index is not None:
            header.device_index = device_index
        data = _put_data(wire)
        size = self._chunk_size(chunk_bytes)

        def parts() -> Iterator[tuple[bytes, int]]:
            yield pb.PutPart(header=header).SerializeToString(), 0
            for at in range(0, data.nbytes, size):
                piece = data[at : at + size]
                # The one copy of the bytes on our side: gRPC sends only `bytes`.
                yield b"".join((put_chunk_prefix(piece.nbytes), piece)), piece.nbytes

        return parts(), data.nbytes


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


def _fetch_request(tensor: HandleLike, strides: Sequence[int] | None) -> bytes:
    request = pb.FetchRequest(id=_handle_id(tensor), strides=[int(s) for s in strides or ()])
    return request.SerializeToString()


def _fetched(result: Result) -> np.ndarray:
    """Fetch's one output."""
    if len(result.outputs) != 1 or not isinstance(result.outputs[0], np.ndarray):
        raise protocol_error(f"Fetch answered {len(result.outputs)} outputs, not one array")
    output: np.ndarray = result.outputs[0]
    return output


def _next_page_token(page: pb.ListHandlesResponse, token: str) -> str:
    if page.next_page_token and page.next_page_token == token:
        raise protocol_error(f'ListHandles answered page token "{token}" with itself')
    return page.next_page_token


class _Connectivity:
    """A sync channel's state as subscribe() last reported it (grpc.aio
    channels answer get_state() instead)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._state = grpc.ChannelConnectivity.IDLE
        channel.subscribe(self._update)

    def _update(self, state: grpc.ChannelConnectivity) -> None:
        self._state = state

    def ready(self) -> bool:
        return self._state is grpc.ChannelConnectivity.READY


# ---- closing ----------------------------------------------------------------

# How long interpreter exit waits for the channels of each Client collected
# just before it, being closed on a thread of their own (_ClientChannels).
_EXIT_CLOSE_SECONDS = 5.0

# The channels of Clients not closed yet, closed at interpreter exit, and the
# threads closing those of collected Clients, waited for there.
_open_channels: set[_ClientChannels] = set()
_closing_threads: set[threading.Thread] = set()
_registry_lock = threading.Lock()


class _ClientChannels:
    """A Client's channels (the target's and the replicas'), closed by
    Client.close, when the Client is garbage-collected, or at interpreter
    exit, whichever comes first. It holds no reference to the Client.

    Closing matters beyond the sockets: a replica channel's connectivity
    subscription (_Connectivity) keeps a gRPC polling thread alive until the
    channel closes, and a gRPC channel still open when the interpreter shuts
    down is closed by grpc's own finalizers, which then wait forever for that
    thread (frozen by the shutdown) to finish its connectivity watch: the
    program never exits. Closing at exit (atexit, while every thread still
    runs) ends those threads first."""

    def __init__(self, main: grpc.Channel, replicas: _ReplicaChannels) -> None:
        self._main = main
        self._replicas = replicas
        # run_many's iterations not finished yet.
        self._streams: weakref.WeakSet[Generator[Any, None, None]] = weakref.WeakSet()
        with _registry_lock:
            _open_channels.add(self)

    def track(self, stream: Generator[Any, None, None]) -> None:
        """Ends `stream` (a run_many iteration) when the channels close."""
        with _registry_lock:
            self._streams.add(stream)

    def close(self) -> None:
        """Ends the run_many iterations still open (their calls cancelled),
        then closes the channels, here: it returns once gRPC's threads let go
        of them (at most a connectivity poll, 0.2 s). Idempotent.

        An iteration left open must end now rather than when the interpreter
        finally drops it: by then gRPC's threads are stopped, possibly holding
        the lock that cancelling the call, or dropping it, takes."""
        with _registry_lock:
            _open_channels.discard(self)
            streams = list(self._streams)
            self._streams.clear()
        for stream in streams:
            # One being iterated on another thread ("generator already
            # executing") ends with its call, cancelled by the channel's close.
            with suppress(ValueError):
                stream.close()
        for calls in self._replicas.close():
            calls.channel.close()
        self._main.close()

    def collected(self) -> None:
        """The Client's finalizer (weakref.finalize): closes them on a thread
        of its own, so that the thread the Client was collected on, which may
        be one of gRPC's, never waits on gRPC."""
        thread = threading.Thread(
            target=self._close_collected, name="tensorop-client-close", daemon=True
        )
        with _registry_lock:
            _closing_threads.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no new threads at interpreter shutdown
            with _registry_lock:
                _closing_threads.discard(thread)
            self.close()

    def _close_collected(self) -> None:
        try:
            self.close()
        finally:
            with _registry_lock:
                _closing_threads.discard(threading.current_thread())


@atexit.register
def _close_at_exit() -> None:
    """Closes the channels of every Client still open, and waits (bounded) for
    those of collected Clients, while gRPC's threads still run (atexit comes
    before the interpreter stops them)."""
    with _registry_lock:
        channels = list(_open_channels)
        threads = list(_closing_threads)
    for c in channels:
        with suppress(Exception):  # the others are closed all the same
            c.close()
    for thread in threads:
        thread.join(_EXIT_CLOSE_SECONDS)


class Client(_ClientBase):
    """A connection to tensord. Connects lazily: an unreachable target shows up as
    TensorOpError("UNAVAILABLE", ...) from the first call. Close it (`close`,
    or `with`); one left open closes its channels when it is garbage-collected
    or at interpreter exit.

    Results are read-only numpy arrays with the strides the server returned,
    over the received bytes (unary answers) or over one buffer per output that
    the streamed chunks are copied into; `np.array(a)` makes a writable copy."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float | None = 600.0,
        max_message_bytes: int = 64 << 20,
        chunk_bytes: int = 1 << 20,
        stream_threshold_bytes: int = 8 << 20,
        tls: bool = False,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        token_file: str | None = None,
    ) -> None:
        """`target`: "host:port", a comma-separated list of replicas' IP
        addresses ("10.0.0.1:50051,10.0.0.2:50051") or a gRPC target such as
        "dns:///tensord-headless:50051" or "unix:///run/tensord/tensord.sock";
        calls go round-robin over the healthy replicas and are retried on
        UNAVAILABLE (ValueError for a malformed list). `timeout`: seconds per
        call (None: no deadline).

        `max_message_bytes`: the largest message sent or received, which
        should be tensord's --max_message_bytes (both default to 64 MiB).
        `run` sends a request larger than that with RunChunked in pieces of
        `chunk_bytes`, and takes an answer that may be larger through the
        streamed path, so any size works; if the server's limit is lower
        than ours and it refuses a message, the call is repeated that way.
        Inputs or answers over `stream_threshold_bytes` take those paths too,
        being faster there than in one message.

        Transport security (tensorop_client.channel.channel_credentials): `tls`,
        `ca_file` (the CA of the server's certificate; default: the system's
        roots), `cert_file` and `key_file` (mutual TLS), `token_file` (a file
        holding the bearer token); what is left None comes from TENSOROP_TLS,
        TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE and
        TENSOROP_TOKEN_FILE, and any file implies TLS. ValueError names a file
        that cannot be read."""
        super().__init__(
            target,
            timeout,
            max_message_bytes,
            chunk_bytes,
            stream_threshold_bytes,
            {
                "tls": tls,
                "ca_file": ca_file,
                "cert_file": cert_file,
                "key_file": key_file,
                "token_file": token_file,
            },
        )
        self._channel = self._open(self._target, self._options)
        self._calls = _Calls(self._channel)
        # Closed when this Client is collected, or at exit, if close() was not
        # called; atexit=False: _close_at_exit closes the channels instead.
        self._channels = _ClientChannels(self._channel, self._replicas)
        weakref.finalize(self, self._channels.collected).atexit = False

    def _open(self, target: str, options: list[tuple[str, Any]]) -> grpc.Channel:
        if self._credentials is None:
            return grpc.insecure_channel(target, options=options)
        return grpc.secure_channel(target, self._credentials, options=options)

    def _main(self) -> _Calls:
        return self._calls

    def _replica_calls(self, replica: str) -> _Calls:
        channel = self._open(replica, self._replica_options)
        return _Calls(channel, _Connectivity(channel).ready)

    def close(self) -> None:
        """Closes the channels (the target's and every replica's); calls in
        flight end CANCELLED, later calls raise ValueError. A Client never
        closed is closed when it is garbage-collected or at interpreter exit."""
        self._channels.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def run(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """Runs one operator, any size: Run when the request and its answer
        fit in one message, else RunChunked for the inputs and the streamed
        answer (RunStream) for the outputs. The inputs' bytes are sent from
        the arrays' own memory (strided views keep their strides); a
        RemoteTensor input is named by its handle and sends no bytes.

        `keep`: every output stays on the server and comes back as a
        RemoteTensor (strided_slice and scatter_elements need no `outputs`
        for it; slice and split need their sizes as always).

        `progress(done, total)`, if given, is called as bytes move in chunks
        (and once at the end of a unary call): the bytes of input and output
        data moved so far and in all; `total` grows by each output's size as
        its header arrives, and the last call has done == total. During a
        chunked upload it is called from a gRPC thread. An exception it raises
        cancels the call and comes out of `run`."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return self._call(prepared, progress)

    def run_stream(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """RunStream: each output arrives as a header and chunks, reassembled here,
        so results larger than one message come back (inputs over the limit go
        through RunChunked, which streams too)."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return self._call(prepared, progress, stream=True)

    def run_chunked(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
        keep: bool = False,
    ) -> Result:
        """RunChunked whatever the size: inputs uploaded in chunks of
        `chunk_bytes` (default: the client's), the answer streamed back."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    def run_request(self, request: pb.RunRequest, *, progress: ProgressFn | None = None) -> Result:
        """`run` with a ready RunRequest (any size, as `run`)."""
        return self._call(_prepare_request(request), progress)

    def run_stream_request(
        self, request: pb.RunRequest, *, progress: ProgressFn | None = None
    ) -> Result:
        """`run_stream` with a ready RunRequest."""
        return self._call(_prepare_request(request), progress, stream=True)

    def run_chunked_request(
        self,
        request: pb.RunRequest,
        *,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
    ) -> Result:
        """`run_chunked` with a ready RunRequest."""
        prepared = _prepare_request(request)
        return self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    def chain(
        self,
        steps: Sequence[StepLike],
        results: Sequence[ChainResultLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        id: str = "",
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """RunChain: `steps` (Steps, or mappings or tuples of Step's
        arguments) run one after another on one backend, in one call. A
        step's inputs are arrays, RemoteTensors, or earlier steps' outputs
        (`step.output(k)`, StepRef(index, k), or a one-output Step itself),
        which stay on the server between steps. `results` name what comes
        back, in that order: StepRefs (with `strides` for the bytes, or
        `keep`), (step, output) pairs, or Steps for all their outputs; None:
        every output of the last step. The Result holds an array for each,
        or a RemoteTensor for each kept one (all of them with `keep`), as
        run(keep=True) does; its backend is where the chain ran.

        The request is one message, so it must fit max_message_bytes (the
        server's --max_message_bytes): the largest array inputs that would
        take it over are Put first (handles in host memory), named instead,
        and released after the call. Errors name steps[i] or results[j], as
        the server does; ValueError or TypeError for steps that cannot be
        built here. `progress` as for `run`."""
        prepared = _prepare_chain(steps, results, backend, device_index, id, keep)
        return self._chain(prepared, progress)

    def chain_request(
        self, request: pb.RunChainRequest, *, progress: ProgressFn | None = None
    ) -> Result:
        """`chain` with a ready RunChainRequest (inputs over the message limit
        are Put, as by `chain`)."""
        return self._chain(_PreparedChain(*chain_request_meta(request)), progress)

    def _chain(self, prepared: _PreparedChain, progress: ProgressFn | None) -> Result:
        counter = _Progress(progress, prepared.data_bytes)
        made: list[RemoteTensor] = []  # inputs Put to fit the message limit
        limit = self._max_message_bytes
        try:
            while True:
                while (key := prepared.next_to_put(limit)) is not None:
                    chunk_bytes = _chunks_within(limit, self._chunk_bytes)
                    beside = _replica_read(_chain_reads(prepared.header))
                    made.append(
                        self.put(
                            prepared.wire(key),
                            chunk_bytes=chunk_bytes,
                            replica=beside.replica if beside is not None else None,
                        )
                    )
                    counter.add(done=prepared.refer(key, made[-1].handle))
                via = self._via_handle(_replica_read(_chain_reads(prepared.header)))
                call = via.calls.run_chain(prepared.payload(), timeout=self._timeout)
                try:
                    # The request went in one message: its inputs are sent.
                    return self._read(
                        call, _Progress(progress, counter.total, counter.total), via
                    )
                except TensorOpError as e:
                    # A server whose limit is lower than ours: Put more to fit it.
                    smaller = _smaller_limit(e, limit)
                    if smaller is None:
                        raise
                    limit = smaller
        finally:
            with suppress(TensorOpError):  # else they expire: the outcome matters more
                self.release(made)

    def _call(
        self, prepared: _Prepared, progress: ProgressFn | None, stream: bool = False
    ) -> Result:
        via = self._via_handle(_replica_read(_tensor_reads(prepared.header.inputs)))
        pieces, request_bytes = prepared.pieces()
        route = self._route(prepared, request_bytes, stream)
        counter = _Progress(progress, prepared.data_bytes)
        if route is _Route.CHUNKED:
            del pieces
            return self._chunked(prepared, counter, None)
        payload = b"".join(pieces)  # the one copy of the inputs' bytes on our side
        del pieces
        try:
            if route is _Route.STREAM:
                counter.done = prepared.data_bytes  # sent in one message
                call = via.calls.run_stream(payload, timeout=self._timeout)
                return self._read(call, counter, via)
            try:
                response = via.calls.run(payload, timeout=self._timeout)
            except grpc.RpcError as e:
                raise _status_error(e, self._tls, via) from None
            _, result, out = _result_from_response(response, self)
            counter.add(done=prepared.data_bytes + out, total=out)
            return result
        except TensorOpError as e:
            if not _too_big(e):
                raise
            chunk_bytes = _fallback_chunk_bytes(e, self._chunk_bytes)
        # The server's limit is lower than ours: the streaming calls avoid it,
        # in chunks that fit its limit.
        del payload
        return self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    def _chunked(
        self, prepared: _Prepared, counter: _Progress, chunk_bytes: int | None
    ) -> Result:
        via = self._via_handle(_replica_read(_tensor_reads(prepared.header.inputs)))
        chunks = self._chunk_parts(prepared, chunk_bytes)
        failed: list[Exception] = []  # the progress callback's, raised to the caller
        parts = _counted(chunks, counter, failed)
        try:
            return self._read(via.calls.run_chunked(parts, timeout=self._timeout), counter, via)
        except TensorOpError:
            if failed:
                raise failed[0] from None
            raise

    def _read(self, call: Any, counter: _Progress, via: _Via) -> Result:
        assembler = _Assembler(counter, self)
        try:
            for part in call:
                assembler.feed(part)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls, via) from None
        except BaseException:
            # Ours (a broken stream, a failed progress callback, a cancelled
            # task) is the error worth reporting; the call ends here.
            call.cancel()
            raise
        return assembler.result()

    # ---- handles ----

    def put(
        self,
        array: npt.ArrayLike | WireTensor,
        backend: str = "cpu",
        ttl_seconds: int = 0,
        *,
        device_index: int | None = None,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
        replica: str | None = None,
    ) -> RemoteTensor:
        """Put: uploads `array` in chunks of `chunk_bytes` (default: the
        client's) to stay on the server, and returns its RemoteTensor. A
        strided view keeps its layout (element strides, and the padding
        between its elements, as `run` sends it; np.ascontiguousarray(a)
        first to keep only the elements); other layouts are packed.
        `backend`: "cpu" or "auto" (host memory) or "opencl" (on device
        `device_index`, else the least-loaded one). `ttl_seconds`: it lives that long after its last use (0:
        the server's --handle_ttl_seconds). `progress` as for `run`, called
        from a gRPC thread. `replica`: the replica to keep it on (another
        handle's `handle.replica`, so that one call can read both); None:
        any, as the target balances."""
        chunks, data_bytes = self._put_parts(
            array, backend, ttl_seconds, device_index, chunk_bytes
        )
        via = self._via(replica or "")
        failed: list[Exception] = []  # the progress callback's, raised to the caller
        parts = _counted(chunks, _Progress(progress, data_bytes), failed)
        try:
            handle = via.calls.put(parts, timeout=self._timeout)
        except grpc.RpcError as e:
            if failed:
                raise failed[0] from None
            raise _status_error(e, self._tls, via) from None
        return RemoteTensor(self, handle)

    def fetch(
        self,
        tensor: HandleLike,
        strides: Sequence[int] | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Fetch: a handle's tensor as a read-only array, packed or with
        `strides` (elements); streamed back in chunks, any size. A
        RemoteTensor's comes from its replica; an id's, from whichever
        replica the target reaches."""
        via = self._via_handle(tensor.handle if isinstance(tensor, _Remote) else None)
        call = via.calls.fetch(_fetch_request(tensor, strides), timeout=self._timeout)
        return _fetched(self._read(call, _Progress(progress), via))

    def release(self, tensors: HandleLike | Iterable[HandleLike]) -> None:
        """Release: frees handles (RemoteTensors or ids) on the server at once
        (a call already using one finishes first); later uses are NOT_FOUND.
        Unknown ids are ignored. RemoteTensors are released on their replicas
        (a call each), ids on whichever replica the target reaches; the first
        error is raised after trying every replica."""
        errors: list[TensorOpError] = []
        for replica, ids in _by_replica(tensors).items():
            via = self._via(replica, ids[0])
            try:
                self._unary(via.calls.stub.Release, pb.ReleaseRequest(ids=ids), via)
            except TensorOpError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def list_handles(self, page_size: int = 0) -> list[pb.TensorHandle]:
        """ListHandles: every handle of this caller, by id, read a page of
        `page_size` (0: the server's default) at a time, on whichever replica
        the target reaches."""
        handles: list[pb.TensorHandle] = []
        token = ""
        while True:
            page = self._unary(
                self._calls.stub.ListHandles,
                pb.ListHandlesRequest(page_size=page_size, page_token=token),
            )
            handles.extend(page.handles)
            token = _next_page_token(page, token)
            if not token:
                return handles

    def _unary(self, method: Any, request: Any, via: _Via | None = None) -> Any:
        try:
            return method(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls, via) from None

    def _remote(self, handle: pb.TensorHandle) -> RemoteTensor:
        return RemoteTensor(self, handle)

    def run_many(
        self, requests: Iterable[RequestLike], *, window: int = 16
    ) -> Iterator[Result | TensorOpError]:
        """Many requests over one RunBidi stream, at most `window` of them sent
        and not yet handed out, yielding each one's outcome in the order of
        `requests`: its Result, or its TensorOpError (a bad request fails alone; the others
        still run). `requests` is read lazily; each is a RunRequest, a mapping
        of `run`'s keyword arguments or a tuple of its positional ones (a
        request that cannot be built raises ValueError or TypeError from the
        iteration). A request or answer too large for one message runs through
        `run` instead, in its turn. If the stream fails, the requests sent and
        unanswered get its error, and the iteration then raises it when
        requests remain unsent. `timeout` bounds the whole stream. Closing
        the client ends the iteration (its call cancelled)."""
        outcomes = self._run_many(requests, window)
        self._channels.track(outcomes)
        return outcomes

    def _run_many(
        self, requests: Iterable[RequestLike], window: int
    ) -> Generator[Result | TensorOpError, None, None]:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        window_state = _Window(self, requests)
        slots = threading.Semaphore(window)
        closed = threading.Event()
        lock = threading.Lock()

        def outgoing() -> Iterator[bytes]:
            # Runs on a gRPC thread, which takes each request once it may go.
            while not closed.is_set():
                item = window_state.next_to_send(lock)
                if item is None:
                    return
                while not slots.acquire(timeout=0.1):
                    if closed.is_set():
                        return
                yield item

        call = self._calls.run_bidi(outgoing(), timeout=self._timeout)
        try:
            while True:
                while True:
                    with lock:
                        ready = window_state.pop_ready()
                    if ready is None:
                        break
                    if ready.local is not None:
                        yield self._local(ready.local)
                        continue
                    # Its slot is free once it is handed out, not when it is
                    # answered: answers that overtake a slow request then wait
                    # in the window instead of piling up.
                    slots.release()
                    yield ready.outcome()
                try:
                    raw = next(call)
                except StopIteration:
                    break
                except grpc.RpcError as e:
                    with lock:
                        window_state.fail(_status_error(e, self._tls))
                    break
                with lock:
                    answered = window_state.answer(raw)
                if not answered:
                    call.cancel()
                    break
            closed.set()
            with lock:
                window_state.end()
            while (ready := window_state.pop_ready()) is not None:
                yield ready.outcome() if ready.local is None else self._local(ready.local)
            window_state.raise_if_unfinished()
        finally:
            closed.set()
            call.cancel()

    def _local(self, prepared: _Prepared) -> Result | TensorOpError:
        try:
            return self._call(prepared, None)
        except TensorOpError as e:
            return e
