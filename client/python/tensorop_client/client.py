"""tensorop_client.Client: tensord's Run and RunStream with numpy arrays.

    with Client("127.0.0.1:50051") as client:
        result = client.run("slice", {"input": x},
                            {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]},
                            outputs=[(2, 2)])
        result.outputs[0]  # a read-only numpy array with the strides the server returned

Every failure is a TensorOpError carrying the gRPC status code name and message
(INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED, UNAVAILABLE, ...), or
INTERNAL when what the server sent cannot be a valid answer, so the arrays of a
Result are always safe to read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

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
)
from tensorop_client.tensors import LayoutError, decode_array, to_tensor

BACKENDS: dict[str, int] = {"auto": pb.AUTO, "cpu": pb.CPU, "opencl": pb.OPENCL}
OPS: tuple[str, ...] = tuple(f.name for f in pb.RunRequest.DESCRIPTOR.oneofs_by_name["op"].fields)

Attrs = Mapping[str, int | Sequence[int]]


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


@dataclass(frozen=True)
class Result:
    """What one request produced: read-only arrays honouring the returned strides,
    and where it ran ("cpu" or "opencl:<device>")."""

    outputs: list[np.ndarray]
    backend: str


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


def set_attrs(request: pb.RunRequest, op: str, attrs: Attrs | None) -> None:
    """Selects `op` in the request's oneof and sets its attributes by proto field
    name, so the attribute names are exactly the proto's."""
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


def make_request(
    op: str,
    inputs: Mapping[str, npt.ArrayLike],
    attrs: Attrs | None = None,
    outputs: Sequence[OutputLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
) -> pb.RunRequest:
    """A RunRequest from numpy inputs (strided views travel with their strides)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend is one of {', '.join(BACKENDS)}, not {backend!r}")
    request = pb.RunRequest(backend=BACKENDS[backend])  # type: ignore[arg-type]
    set_attrs(request, op, attrs)
    for name, array in inputs.items():
        request.inputs[name].CopyFrom(to_tensor(array))
    request.outputs.extend(_output_desc(o) for o in outputs or ())
    if device_index is not None:
        request.device_index = device_index
    return request


def _status_error(error: grpc.RpcError, tls: bool = False) -> TensorOpError:
    # Calls' RpcErrors are also grpc.Call objects, with the status.
    call: grpc.Call = error  # type: ignore[assignment]
    code = call.code().name
    # TLS and token failures say which part failed.
    return TensorOpError(code, explain_security_error(code, call.details() or "", tls))


def _decode(
    index: int, dtype: int, sizes: Sequence[int], strides: Sequence[int], data: bytes | bytearray
) -> np.ndarray:
    try:
        return decode_array(dtype, sizes, strides, data)
    except LayoutError as e:
        raise protocol_error(f"output {index}: {e}") from None


def _read_parts(parts: Iterator[pb.ResultPart]) -> Result:
    """Reassembles ResultParts: per output in order, a header and then exactly
    byte_length bytes of chunks (the C++ client's checks)."""
    headers: list[pb.OutputHeader] = []
    buffers: list[bytearray] = []
    remaining = 0  # bytes still due for the last output
    for part in parts:
        kind = part.WhichOneof("part")
        if kind == "header":
            header = part.header
            if remaining:
                raise protocol_error(
                    f"header of output {header.index} arrived {remaining} bytes before "
                    f"output {len(headers) - 1} was complete"
                )
            if header.index != len(headers):
                raise protocol_error(
                    f"expected the header of output {len(headers)}, got output {header.index}"
                )
            if header.byte_length < 0:
                raise protocol_error(f"output {header.index} has byte_length {header.byte_length}")
            headers.append(header)
            buffers.append(bytearray())
            remaining = header.byte_length
        elif kind == "chunk":
            size = len(part.chunk)
            if not headers or size > remaining:
                raise protocol_error(
                    f"a chunk of {size} bytes exceeds what the headers announced by "
                    f"{size - remaining}"
                )
            buffers[-1] += part.chunk
            remaining -= size
        else:
            raise protocol_error("an empty ResultPart")
    if remaining:
        raise protocol_error(
            f"the stream ended {remaining} bytes short of output {len(headers) - 1}"
        )
    outputs = [
        _decode(i, h.dtype, h.sizes, h.strides, data)
        for i, (h, data) in enumerate(zip(headers, buffers, strict=True))
    ]
    return Result(outputs, headers[0].backend if headers else "")


class Client:
    """A connection to tensord. Connects lazily: an unreachable target shows up as
    TensorOpError("UNAVAILABLE", ...) from the first call."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float | None = 600.0,
        max_message_bytes: int = 64 << 20,
        tls: bool = False,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        token_file: str | None = None,
    ) -> None:
        """`target`: "host:port", a comma-separated list of replicas' IP
        addresses ("10.0.0.1:50051,10.0.0.2:50051") or a gRPC target such as
        "dns:///tensord-headless:50051"; calls go round-robin over the healthy
        replicas and are retried on UNAVAILABLE (ValueError for a malformed
        list). `timeout`: seconds per call (None: no deadline).
        `max_message_bytes` bounds Run's answers, which carry every output
        inline (gRPC's own default is 4 MiB).

        Transport security (tensorop_client.channel.channel_credentials): `tls`,
        `ca_file` (the CA of the server's certificate; default: the system's
        roots), `cert_file` and `key_file` (mutual TLS), `token_file` (a file
        holding the bearer token); what is left None comes from TENSOROP_TLS,
        TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE and
        TENSOROP_TOKEN_FILE, and any file implies TLS. ValueError names a file
        that cannot be read."""
        target = channel_target(target)
        options = channel_options(max_message_bytes)
        credentials = channel_credentials(tls, ca_file, cert_file, key_file, token_file)
        self._channel = (
            grpc.insecure_channel(target, options=options)
            if credentials is None
            else grpc.secure_channel(target, credentials, options=options)
        )
        self._stub = pb_grpc.TensorOpStub(self._channel)
        self._tls = credentials is not None
        self._timeout = timeout

    def close(self) -> None:
        self._channel.close()

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
        inputs: Mapping[str, npt.ArrayLike],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
    ) -> Result:
        """Unary Run: one response with every output inline."""
        return self.run_request(make_request(op, inputs, attrs, outputs, backend, device_index))

    def run_stream(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
    ) -> Result:
        """RunStream: each output arrives as a header and chunks, reassembled here,
        so results larger than one message come back."""
        return self.run_stream_request(
            make_request(op, inputs, attrs, outputs, backend, device_index)
        )

    def run_request(self, request: pb.RunRequest) -> Result:
        """Run with a ready RunRequest."""
        try:
            response = self._stub.Run(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls) from None
        outputs = [
            _decode(i, t.dtype, t.sizes, t.strides, t.data) for i, t in enumerate(response.outputs)
        ]
        return Result(outputs, response.backend)

    def run_stream_request(self, request: pb.RunRequest) -> Result:
        """RunStream with a ready RunRequest."""
        call = self._stub.RunStream(request, timeout=self._timeout)
        try:
            return _read_parts(call)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls) from None
        except TensorOpError:
            call.cancel()  # our own error is the one worth reporting
            raise
