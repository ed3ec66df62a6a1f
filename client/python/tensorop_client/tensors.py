"""numpy arrays <-> tensorop.v1.Tensor.

A tensor on the wire is a dtype, sizes, strides counted in ELEMENTS and the
little-endian bytes of its buffer in memory order. A numpy array is the same
thing with strides in bytes, so an array whose byte strides are non-negative
multiples of its itemsize is sent as it lies in memory: its strides divided by
the itemsize, and the bytes from its first to its last element (the span) taken
straight from the array's buffer, with no repacking. Padding inside the span
travels too (a[::100] sends the whole span; np.ascontiguousarray(a) first if
that matters more than the copy), and a broadcast (stride 0) array sends only
what it really holds. Other layouts (negative strides, strides that are not a
multiple of the itemsize) and big-endian arrays are copied to packed
little-endian first.

Results come back as read-only numpy views over the received bytes that keep
the returned strides, so padded or permuted outputs are not repacked either.
All of it moves bits: float16 and bfloat16 NaN payloads, -0.0, every 64-bit
integer and every byte of a bool (even one that is neither 0 nor 1) are exact.

The dtypes: numpy's float64, float32, float16, the signed and unsigned integers of
1, 2, 4 and 8 bytes, bool (np.bool_, one byte) and ml_dtypes.bfloat16 (numpy has
no bfloat16; ml_dtypes is the package numpy users, JAX and TensorFlow among them,
take it from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import numpy.typing as npt

from tensorop_client._proto import tensorop_pb2 as pb

# Wire dtype <-> numpy dtype (always little-endian).
_NUMPY_BY_WIRE: dict[int, np.dtype] = {
    pb.FLOAT64: np.dtype("<f8"),
    pb.FLOAT32: np.dtype("<f4"),
    pb.FLOAT16: np.dtype("<f2"),
    pb.INT64: np.dtype("<i8"),
    pb.INT32: np.dtype("<i4"),
    pb.INT16: np.dtype("<i2"),
    pb.INT8: np.dtype("i1"),
    pb.UINT64: np.dtype("<u8"),
    pb.UINT32: np.dtype("<u4"),
    pb.UINT16: np.dtype("<u2"),
    pb.UINT8: np.dtype("u1"),
    pb.BFLOAT16: np.dtype(ml_dtypes.bfloat16).newbyteorder("<"),
    pb.BOOL: np.dtype("?"),
}
# Keyed by (kind, itemsize) so that every spelling (np.intc, np.longlong, '>i4')
# finds its wire type. Not bfloat16: its kind is "V" (void), which a raw 2-byte
# void (np.dtype("V2")) shares, so wire_dtype finds it by its scalar type.
_WIRE_BY_KIND: dict[tuple[str, int], int] = {
    (dt.kind, dt.itemsize): wire for wire, dt in _NUMPY_BY_WIRE.items() if dt.kind != "V"
}

# The most elements one tensor may hold (OPERATORS.md).
MAX_ELEMENTS = (1 << 32) - 1


class LayoutError(ValueError):
    """A tensor whose layout reaches outside its data (or is otherwise unreadable)."""


def wire_dtype(dtype: npt.DTypeLike) -> int:
    """The tensorop.v1.DType of a numpy dtype; TypeError for types the service lacks."""
    dt = np.dtype(dtype)
    if dt.type is ml_dtypes.bfloat16:  # either byte order
        return pb.BFLOAT16
    wire = _WIRE_BY_KIND.get((dt.kind, dt.itemsize))
    if wire is None:
        raise TypeError(
            f"tensorop has no dtype for numpy {dt} (kinds f, i, u of 1..8 bytes, "
            "bool, ml_dtypes.bfloat16)"
        )
    return wire


def numpy_dtype(wire: int) -> np.dtype:
    """The little-endian numpy dtype of a tensorop.v1.DType; LayoutError if unknown."""
    dt = _NUMPY_BY_WIRE.get(wire)
    if dt is None:
        raise LayoutError(f"dtype {wire} is not an element type")
    return dt


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides for `sizes`."""
    strides = [0] * len(sizes)
    stride = 1
    for i in range(len(sizes) - 1, -1, -1):
        strides[i] = stride
        stride *= sizes[i]
    return tuple(strides)


def span_elements(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """Elements from the first to the last one: 1 + sum((n-1)*s); 0 when empty."""
    if any(n == 0 for n in sizes):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))


@dataclass(frozen=True)
class WireTensor:
    """A tensor as it goes on the wire; `data` may share the memory of an array."""

    dtype: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None  # None: packed row-major
    data: memoryview  # format "B", the tensor's buffer span

    def to_proto(self) -> pb.Tensor:
        # protobuf's bytes fields take only `bytes`: this is where the span is
        # copied once, into the message.
        return pb.Tensor(
            dtype=self.dtype,  # type: ignore[arg-type]  # a DType value
            sizes=self.sizes,
            strides=self.strides or (),
            data=bytes(self.data),
        )


def _as_bytes(array: np.ndarray) -> memoryview:
    """A 1-D contiguous array's memory as bytes, without copying."""
    return array.view(np.uint8).data if array.size else memoryview(b"")


def encode_array(array: npt.ArrayLike) -> WireTensor:
    """The wire form of `array`, sharing its memory whenever the layout allows."""
    a = np.asarray(array)
    wire = wire_dtype(a.dtype)
    sizes = tuple(int(n) for n in a.shape)
    if a.dtype.byteorder == ">":
        # The wire is little-endian: byte-swap into a packed copy.
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    itemsize = a.itemsize
    if a.size == 0 or a.flags.c_contiguous:
        # Packed already: send it without strides.
        return WireTensor(wire, sizes, None, _as_bytes(a.reshape(-1)))
    if any(s < 0 or s % itemsize for s in a.strides):
        # Not expressible as element strides: pack it (the one copying path).
        return WireTensor(wire, sizes, None, _as_bytes(np.ascontiguousarray(a).reshape(-1)))
    strides = tuple(s // itemsize for s in a.strides)
    # Every element lies in [first, last] of the array's single memory block, so
    # a contiguous 1-D view from the first element over the span is in bounds.
    span = np.lib.stride_tricks.as_strided(
        a, shape=(span_elements(sizes, strides),), strides=(itemsize,), writeable=False
    )
    return WireTensor(wire, sizes, strides, _as_bytes(span))


def to_tensor(array: npt.ArrayLike) -> pb.Tensor:
    """A tensorop.v1.Tensor holding `array` (see encode_array)."""
    return encode_array(array).to_proto()


def check_layout(dtype: int, sizes: Sequence[int], strides: Sequence[int], nbytes: int) -> int:
    """Checks that every element of the tensor lies inside `nbytes` of data.

    Mirrors the C++ client's CheckLayout: a known dtype, sizes >= 0 with at most
    MAX_ELEMENTS elements, strides empty or one per size and each >= 0; packed
    data exactly product(sizes) elements, strided data at least the span.
    Returns the element count; raises LayoutError naming what is wrong.
    """
    itemsize = numpy_dtype(dtype).itemsize
    if strides and len(strides) != len(sizes):
        raise LayoutError(f"strides {list(strides)} do not match sizes {list(sizes)}")
    elements = 1
    for i, n in enumerate(sizes):
        if n < 0:
            raise LayoutError(f"sizes[{i}] is negative ({n})")
        elements *= n
    if elements > MAX_ELEMENTS:
        raise LayoutError(f"sizes {list(sizes)} hold more than {MAX_ELEMENTS} elements")
    if not strides:
        if nbytes != elements * itemsize:
            raise LayoutError(
                f"data holds {nbytes} bytes but packed sizes {list(sizes)} "
                f"need {elements * itemsize}"
            )
        return elements
    for i, s in enumerate(strides):
        if s < 0:
            raise LayoutError(f"strides[{i}] is negative ({s})")
    reach = span_elements(sizes, strides) * itemsize
    if nbytes < reach:
        raise LayoutError(
            f"data holds {nbytes} bytes but strides {list(strides)} over sizes "
            f"{list(sizes)} reach {reach}"
        )
    return elements


def decode_array(
    dtype: int,
    sizes: Sequence[int],
    strides: Sequence[int],
    data: bytes | bytearray | memoryview | np.ndarray,
) -> np.ndarray:
    """A read-only numpy view of a received tensor, with its strides (no copy).

    Raises LayoutError when the layout reaches past `data`.
    """
    check_layout(dtype, sizes, strides, len(data))
    dt = numpy_dtype(dtype)
    element_strides = tuple(strides) if strides else packed_strides(sizes)
    byte_strides = tuple(s * dt.itemsize for s in element_strides)
    if any(s >= 1 << 63 for s in byte_strides):
        # Legal on a size-1 dimension, but numpy's strides are 64-bit.
        raise LayoutError(f"strides {list(element_strides)} overflow 64 bits")
    flat = np.frombuffer(data, dtype=dt, count=len(data) // dt.itemsize)
    return np.lib.stride_tricks.as_strided(
        flat, shape=tuple(sizes), strides=byte_strides, writeable=False
    )


def from_tensor(tensor: pb.Tensor) -> np.ndarray:
    """A read-only numpy view of a tensorop.v1.Tensor (see decode_array)."""
    return decode_array(tensor.dtype, tensor.sizes, tensor.strides, tensor.data)
