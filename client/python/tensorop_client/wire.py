"""tensorop.v1 messages with bulk bytes, encoded and decoded without protobuf
copying the bytes.

protobuf's Python messages take `bytes` fields only as `bytes` and hand them
back as new `bytes`, so a tensor travelling through them is copied several times
on each side. Here the small parts of a message (dtype, sizes, ids, headers) go
through protobuf as usual and only the bulk bytes are framed by hand, straight
from the numpy buffer into the one `bytes` object gRPC sends, and read back as
memoryview slices of the `bytes` gRPC received. Protobuf parsers accept fields
in any order, so a request serialized without its inputs followed by the inputs'
map entries is the same RunRequest.

Field numbers are tensorop.proto's:
  RunRequest.inputs = 6 (map entry: key = 1, value = 2), Tensor.data = 4,
  RunResponse.outputs = 2, ResultPart.header = 1, ResultPart.chunk = 2,
  RequestPart.request = 1, RequestPart.chunk = 2 (InputChunk: input = 1, data = 2),
  PutPart.chunk = 2, RunChainRequest.steps = 2, ChainStep.inputs = 5 (map entry
  as above), ChainInput.tensor = 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from google.protobuf import field_mask_pb2
from google.protobuf.message import DecodeError, Message

from tensorop_client._proto import tensorop_pb2 as pb

_LEN = 2  # wire type of length-delimited fields
_VARINT = 0

_M = TypeVar("_M", bound=Message)


class WireError(ValueError):
    """Bytes that are not the message they should be."""


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int = _LEN) -> bytes:
    return varint((field << 3) | wire_type)


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("a varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise WireError("a varint longer than 10 bytes")


def fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, field start, value start, value end) of each field in
    buf[start:end]; for varints the value span is the varint's bytes."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _read_varint(buf, pos, end)
        field, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value_start = pos
            _, pos = _read_varint(buf, pos, end)
        elif wire_type == _LEN:
            length, value_start = _read_varint(buf, pos, end)
            pos = value_start + length
        elif wire_type == 1:
            value_start, pos = pos, pos + 8
        elif wire_type == 5:
            value_start, pos = pos, pos + 4
        else:
            raise WireError(f"field {field} has wire type {wire_type}")
        if field == 0 or pos > end:
            raise WireError(f"field {field} runs past the end of its message")
        yield field, field_start, value_start, pos


def _parse(message_type: type[_M], data: bytes) -> _M:
    try:
        return message_type.FromString(data)
    except DecodeError as e:
        raise WireError(f"not a {message_type.DESCRIPTOR.full_name}: {e}") from None


# ---- requests ---------------------------------------------------------------


def _enclose(field: int, prefix: bytes, data_bytes: int) -> bytes:
    """Field `field` holding `prefix` and then `data_bytes` bytes that follow."""
    return _key(field) + varint(len(prefix) + data_bytes) + prefix


def _tensor_prefix(meta: pb.Tensor, data_bytes: int) -> bytes:
    """A Tensor's bytes up to its data: `meta` (the Tensor without its data),
    then data's key and length."""
    # No data: no field, since a data field (even empty) after `meta`'s
    # shared_memory or handle would replace it (they are one oneof).
    return meta.SerializeToString() + (_key(4) + varint(data_bytes) if data_bytes else b"")


def _entry_prefix(field: int, name: str, value: bytes, data_bytes: int) -> bytes:
    """Map entry `name` of map field `field`, its value `value` up to the data."""
    key = name.encode()
    entry = _key(1) + varint(len(key)) + key + _enclose(2, value, data_bytes)
    return _enclose(field, entry, data_bytes)


def input_entry_prefix(name: str, meta: pb.Tensor, data_bytes: int) -> bytes:
    """The bytes of RunRequest.inputs[name] up to its Tensor's data, which
    follow: key 6, the map entry's key and value, the Tensor's small fields,
    then data's key and length. `meta` is the Tensor without its data."""
    return _entry_prefix(6, name, _tensor_prefix(meta, data_bytes), data_bytes)


def chain_input_entry_prefix(name: str, meta: pb.Tensor, data_bytes: int) -> bytes:
    """ChainStep.inputs[name] as a ChainInput holding a Tensor, up to the
    Tensor's data (as input_entry_prefix)."""
    tensor = _enclose(1, _tensor_prefix(meta, data_bytes), data_bytes)
    return _entry_prefix(5, name, tensor, data_bytes)


def input_chunk_prefix(name: str, data_bytes: int) -> bytes:
    """A RequestPart holding InputChunk(input=name, data=...), up to its data."""
    key = name.encode()
    chunk = _key(1) + varint(len(key)) + key + _key(2) + varint(data_bytes)
    return _key(2) + varint(len(chunk) + data_bytes) + chunk


def put_chunk_prefix(data_bytes: int) -> bytes:
    """A PutPart holding chunk=..., up to its data."""
    return _key(2) + varint(data_bytes)


# ---- responses --------------------------------------------------------------


def parse_run_response(
    data: bytes,
) -> tuple[pb.RunResponse, list[tuple[pb.Tensor, memoryview]]]:
    """A serialized RunResponse as its small fields (id, backend, status) and,
    per output, the Tensor without its data and the data as a memoryview of
    `data` (no copy)."""
    view = memoryview(data)
    rest: list[bytes] = []  # every field but the outputs, for protobuf
    outputs: list[tuple[pb.Tensor, memoryview]] = []
    for field, field_start, start, end in fields(data, 0, len(data)):
        if field != 2:
            rest.append(data[field_start:end])
            continue
        meta: list[bytes] = []
        payload = view[0:0]
        for inner, inner_start, value_start, value_end in fields(data, start, end):
            if inner == 4:
                payload = view[value_start:value_end]  # proto3: the last one wins
            else:
                meta.append(data[inner_start:value_end])
        outputs.append((_parse(pb.Tensor, b"".join(meta)), payload))
    return _parse(pb.RunResponse, b"".join(rest)), outputs


def parse_result_part(data: bytes) -> pb.OutputHeader | memoryview | None:
    """A serialized ResultPart: its header, its chunk as a memoryview of `data`,
    or None when it holds neither."""
    part: pb.OutputHeader | memoryview | None = None
    for field, _, start, end in fields(data, 0, len(data)):
        if field == 1:
            part = _parse(pb.OutputHeader, data[start:end])
        elif field == 2:
            part = memoryview(data)[start:end]
    return part


def _copy_all_fields_except(source: Message, skip: str, destination: Message) -> None:
    """Copies every field of `source` but `skip` (the C++ client's
    CopyAllFieldsExcept), so fields added to the proto later travel too."""
    descriptor = source.DESCRIPTOR
    mask = field_mask_pb2.FieldMask(paths=[f.name for f in descriptor.fields if f.name != skip])
    mask.MergeMessage(source, destination)


def request_meta(request: pb.RunRequest) -> tuple[pb.RunRequest, dict[str, memoryview]]:
    """A RunRequest split into itself without its inputs' data, and that data."""
    header = pb.RunRequest()
    _copy_all_fields_except(request, "inputs", header)
    data: dict[str, memoryview] = {}
    for name, tensor in request.inputs.items():
        _copy_all_fields_except(tensor, "data", header.inputs[name])
        data[name] = memoryview(tensor.data)
    return header, data


def pieces_bytes(pieces: Sequence[bytes | memoryview]) -> int:
    """The bytes of a message in pieces."""
    return sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in pieces)


def encode_request(
    header: pb.RunRequest, data: Mapping[str, memoryview]
) -> list[bytes | memoryview]:
    """The pieces of the serialized RunRequest `header` with `data` as its
    inputs' bytes, for one b"".join (the one copy of the data)."""
    base = pb.RunRequest()
    base.CopyFrom(header)
    base.ClearField("inputs")
    pieces: list[bytes | memoryview] = [base.SerializeToString()]
    for name in sorted(header.inputs):
        payload = data.get(name, memoryview(b""))
        pieces.append(input_entry_prefix(name, header.inputs[name], payload.nbytes))
        pieces.append(payload)
    return pieces


# The data of a RunChainRequest's tensors, by (step index, input name).
ChainData = Mapping[tuple[int, str], memoryview]


def chain_request_meta(
    request: pb.RunChainRequest,
) -> tuple[pb.RunChainRequest, dict[tuple[int, str], memoryview]]:
    """A RunChainRequest split into itself without its input tensors' data,
    and that data (request_meta's for chains)."""
    header = pb.RunChainRequest()
    _copy_all_fields_except(request, "steps", header)
    data: dict[tuple[int, str], memoryview] = {}
    for i, step in enumerate(request.steps):
        step_header = header.steps.add()
        _copy_all_fields_except(step, "inputs", step_header)
        for name, source in step.inputs.items():
            if source.WhichOneof("source") != "tensor":
                step_header.inputs[name].CopyFrom(source)
                continue
            tensor = step_header.inputs[name].tensor
            tensor.SetInParent()  # a Tensor without fields is still the source
            _copy_all_fields_except(source.tensor, "data", tensor)
            data[(i, name)] = memoryview(source.tensor.data)
    return header, data


def encode_chain_request(header: pb.RunChainRequest, data: ChainData) -> list[bytes | memoryview]:
    """The pieces of the serialized RunChainRequest `header` with `data` as
    its input tensors' bytes, for one b"".join (encode_request's for chains).
    The steps go last, in order, each one message: a repeated message field
    is one element per occurrence."""
    base = pb.RunChainRequest()
    base.CopyFrom(header)
    base.ClearField("steps")
    pieces: list[bytes | memoryview] = [base.SerializeToString()]
    for i, step in enumerate(header.steps):
        framed = sorted(name for name in step.inputs if (i, name) in data)
        rest = pb.ChainStep()
        rest.CopyFrom(step)
        for name in framed:
            del rest.inputs[name]
        body: list[bytes | memoryview] = [rest.SerializeToString()]
        for name in framed:
            payload = data[(i, name)]
            body.append(chain_input_entry_prefix(name, step.inputs[name].tensor, payload.nbytes))
            body.append(payload)
        pieces.append(_key(2) + varint(pieces_bytes(body)))
        pieces.extend(body)
    return pieces
