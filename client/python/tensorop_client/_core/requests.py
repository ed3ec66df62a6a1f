"""Run requests, built without I/O: the operator and its attributes, the
outputs wanted, and the inputs described (arrays by layout, with their bytes
kept beside as memoryviews of the callers' arrays; RemoteTensors by handle).
Also the bound on an answer's bytes that the choice of call reads."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf.descriptor import FieldDescriptor

from tensorop_client._core.handles import _refer, _Remote
from tensorop_client._core.shapes import (
    DERIVED_SIZES,
    derived_output_sizes,
    slice_window_sizes,
    source_input,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import (
    LayoutError,
    encode_array,
    numpy_dtype,
    span_elements,
    to_tensor,
)
from tensorop_client.wire import encode_request, pieces_bytes, request_meta

BACKENDS: dict[str, int] = {"auto": pb.AUTO, "cpu": pb.CPU, "opencl": pb.OPENCL}
OPS: tuple[str, ...] = tuple(f.name for f in pb.RunRequest.DESCRIPTOR.oneofs_by_name["op"].fields)

# An operator's attributes by proto field name: integers, lists of them, and
# text (pad's mode and value).
Attrs = Mapping[str, int | str | Sequence[int]]


@dataclass(frozen=True)
class Output:
    """The layout wanted for one output: sizes (required for split; a slice's
    default to its whole window) and optional strides in elements (None:
    packed)."""

    sizes: Sequence[int] = ()
    strides: Sequence[int] | None = None


# An Output, a {"sizes": ..., "strides": ...} mapping, or just the sizes.
OutputLike = Output | Mapping[str, Sequence[int]] | Sequence[int]

# Operators whose one output follows from the inputs: an OutputDesc is optional
# (strided_slice, scatter_elements, transpose, reshape, expand, tile, gather,
# gather_elements, join, pad).
_DERIVED_OUTPUT_OPS = DERIVED_SIZES


def _output_count(op: str | None, outputs: Sequence[Any]) -> int:
    """How many outputs a step or request of `op` with `outputs` makes."""
    return 1 if op in _DERIVED_OUTPUT_OPS else len(outputs)


def derive_slice_output(message: pb.RunRequest | pb.ChainStep) -> None:
    """A slice request (or chain step) without outputs, or whose one output
    gives no sizes (only strides), gets the whole window: sizes 1 +
    (window_sizes[i] - 1) // |window_strides[i]| (slice_window_sizes: 1
    where that is no size, so that the server names what is wrong with the
    attributes). Without window_sizes it is left as it is."""
    if message.WhichOneof("op") != "slice" or len(message.outputs) > 1:
        return
    if message.outputs and message.outputs[0].sizes:
        return
    sizes = slice_window_sizes(message.slice.window_sizes, message.slice.window_strides)
    if not sizes:
        return
    if message.outputs:
        message.outputs[0].sizes.extend(sizes)
    else:
        message.outputs.add(sizes=sizes)


def keep_outputs(request: pb.RunRequest) -> None:
    """Marks every output of `request` kept. strided_slice, scatter_elements,
    transpose, reshape, expand, tile, gather, gather_elements, join and pad
    derive their one output: an empty OutputDesc (sizes not given) describes
    it."""
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


def attribute_names(op: str) -> list[str]:
    """The attributes `op` takes, in the proto's order (its integer fields,
    and its text fields: pad's mode and value)."""
    fields = getattr(pb.RunRequest(), op).DESCRIPTOR.fields
    return [f.name for f in fields if f.type in _ATTRIBUTE_TYPES]


# The proto field types attributes have: integers (one, or a list) and text.
_ATTRIBUTE_TYPES = (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_STRING)


def set_attrs(request: pb.RunRequest | pb.ChainStep, op: str, attrs: Attrs | None) -> None:
    """Selects `op` in the request's (or chain step's) oneof and sets its
    attributes by proto field name, so the attribute names are exactly the
    proto's: integer fields take an integer or a list of integers, text
    fields (pad's mode and value) a string, sent as it is."""
    if op not in OPS:
        raise ValueError(f"unknown operator {op!r} (one of {', '.join(OPS)})")
    message = getattr(request, op)
    message.SetInParent()  # an operator without attributes is still chosen
    for name, value in (attrs or {}).items():
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None or field.type not in _ATTRIBUTE_TYPES:
            raise ValueError(
                f"attrs.{name}: not an attribute of {op}; its attributes are "
                f"{', '.join(attribute_names(op))}"
            )
        if field.type == FieldDescriptor.TYPE_STRING:
            if not isinstance(value, str):
                raise ValueError(f"attrs.{name}: expected a string, got {value!r}")
            setattr(message, name, value)
        elif field.is_repeated:
            if isinstance(value, (int, np.integer, str)):
                raise ValueError(f"attrs.{name}: expected a list of integers")
            getattr(message, name).extend(int(v) for v in value)
        else:
            if not isinstance(value, (int, np.integer)):
                raise ValueError(f"attrs.{name}: expected an integer")
            setattr(message, name, int(value))


# The operators whose `axis` attribute names an axis of their input "input"
# (join's: of "inputs_0", whose rank its other inputs share).
_AXIS_OPS = ("split", "scatter_elements", "gather", "gather_elements", "join")


def _numpy_axis(request: pb.RunRequest, inputs: Mapping[str, npt.ArrayLike | _Remote]) -> None:
    """A negative `axis` counts from the end, as in NumPy (-1: the last axis),
    when input "input" (join's "inputs_0") is given (its rank known); the
    server takes axes in [0, rank) and names that range when one is outside
    it."""
    op = request.WhichOneof("op")
    source = source_input(op)
    if op not in _AXIS_OPS or source not in inputs:
        return
    attrs = getattr(request, op)
    if attrs.axis >= 0:
        return
    rank = _rank(inputs[source])
    if -rank <= attrs.axis:
        attrs.axis += rank


def _rank(array: npt.ArrayLike | _Remote) -> int:
    if isinstance(array, _Remote):
        return len(array.handle.sizes)
    return int(np.ndim(array))


def _request_header(
    op: str,
    attrs: Attrs | None,
    outputs: Sequence[OutputLike] | None,
    backend: str,
    device_index: int | None,
    keep: bool = False,
) -> pb.RunRequest:
    request = pb.RunRequest(backend=_backend(backend))  # type: ignore[arg-type]  # a Backend value
    set_attrs(request, op, attrs)
    request.outputs.extend(_output_desc(o) for o in outputs or ())
    derive_slice_output(request)
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
    _numpy_axis(request, inputs)
    return request


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
    _numpy_axis(header, inputs)
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
    tensor.dtype = wire.dtype  # type: ignore[assignment]  # a DType value
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


def _span_bytes(sizes: Sequence[int], strides: Sequence[int], itemsize: int) -> int:
    if strides and len(strides) == len(sizes):
        return span_elements(sizes, strides) * itemsize
    return math.prod(sizes) * itemsize


def answer_bytes_bound(request: pb.RunRequest) -> int:
    """At least the bytes of output data `request` can produce: exact where the
    caller gave the output sizes (slice, split, and the others when given) or
    they follow from the inputs (scatter_elements, transpose, reshape, expand,
    tile, gather, gather_elements, join, pad: derived_output_sizes), and an upper
    bound from the inputs otherwise (a strided slice reads each input element
    at most once; a join's output holds its inputs' elements). 0 for requests
    the server will refuse anyway, which then go unary and come back with its
    error."""
    try:
        op = request.WhichOneof("op")
        source = request.inputs.get(source_input(op))
        if source is None:
            return 0
        itemsize = numpy_dtype(source.dtype).itemsize
        read = request.inputs.values() if op == "join" else [source]
        if any(n < 0 for t in read for n in t.sizes) or any(
            n < 0 for o in request.outputs for n in (*o.sizes, *o.strides)
        ):
            return 0
        if op in ("slice", "split"):
            return sum(
                _span_bytes(o.sizes, o.strides, itemsize) for o in request.outputs if not o.keep
            )
        wanted = request.outputs[0] if request.outputs else pb.OutputDesc()
        if wanted.keep:  # kept outputs send no bytes
            return 0
        if wanted.sizes:
            return _span_bytes(wanted.sizes, wanted.strides, itemsize)
        if op != "strided_slice":  # its bound is below: its output is never larger
            sizes = derived_output_sizes(
                op,
                getattr(request, op) if op else None,
                {name: tensor.sizes for name, tensor in request.inputs.items()},
            )
            if sizes is not None:  # an expand's, tile's, gather's, join's or pad's may be larger
                return _span_bytes(sizes, wanted.strides, itemsize)
        if op == "join":  # its output holds every input's elements
            elements = sum(math.prod(t.sizes) for t in request.inputs.values())
        else:
            elements = math.prod(source.sizes)
        # Strides without sizes: each size is at most `elements`.
        return elements * itemsize * (1 + sum(wanted.strides))
    except LayoutError:
        return 0
