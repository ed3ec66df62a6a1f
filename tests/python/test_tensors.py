"""numpy <-> wire tensor mapping: zero-copy strided views, exact dtypes (bool and
ml_dtypes.bfloat16 included), strided results."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import LayoutError, decode_array, encode_array, from_tensor, to_tensor
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import numpy_dtype, wire_dtype

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def wire_bytes(data: memoryview) -> np.ndarray:
    """The wire data as a uint8 array over the same memory (no copy)."""
    return np.frombuffer(data, dtype=np.uint8)


def test_strided_view_is_sent_from_its_own_buffer() -> None:
    base = np.arange(40, dtype=np.float32).reshape(5, 8)
    view = base[1:4, 2:8:2]  # rows 1..3, every other column from 2
    wire = encode_array(view)
    assert wire.dtype == pb.FLOAT32
    assert wire.sizes == (3, 3)
    assert wire.strides == (8, 2)  # byte strides (32, 8) / itemsize 4
    # The span from the first to the last element: 1 + 2*8 + 2*2 = 21 elements.
    assert len(wire.data) == 21 * 4
    data = wire_bytes(wire.data)
    # No copy: the bytes start at the view's first element, inside base's buffer...
    assert data.ctypes.data == view.ctypes.data
    assert np.shares_memory(data, base)
    # ...so a write to the array shows through the wire data.
    base[1, 2] = 99.0
    assert np.frombuffer(wire.data, dtype="<f4")[0] == 99.0
    # And read back through the strides it is the view.
    back = decode_array(wire.dtype, wire.sizes, wire.strides or (), bytes(wire.data))
    np.testing.assert_array_equal(back, view)


def test_transposed_and_broadcast_views_keep_their_strides() -> None:
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    wire = encode_array(x.T)
    assert (wire.sizes, wire.strides, len(wire.data)) == ((3, 2), (1, 3), 12)
    assert np.shares_memory(wire_bytes(wire.data), x)

    row = np.array([65, 66, 67], dtype=np.uint8)
    wire = encode_array(np.broadcast_to(row, (4, 3)))
    # Stride 0 broadcasts: 3 bytes travel for 12 logical elements.
    assert (wire.sizes, wire.strides, bytes(wire.data)) == ((4, 3), (0, 1), b"ABC")
    assert np.shares_memory(wire_bytes(wire.data), row)


def test_packed_array_is_sent_without_strides_and_without_copy() -> None:
    x = np.arange(12, dtype=np.uint32).reshape(3, 4)
    wire = encode_array(x)
    assert (wire.sizes, wire.strides) == ((3, 4), None)
    assert wire_bytes(wire.data).ctypes.data == x.ctypes.data
    tensor = to_tensor(x)
    assert (list(tensor.sizes), list(tensor.strides), tensor.data) == ([3, 4], [], x.tobytes())


def test_layouts_that_strides_cannot_express_are_packed() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    wire = encode_array(x[:, ::-1])  # negative strides
    assert wire.strides is None
    assert not np.shares_memory(wire_bytes(wire.data), x)
    assert np.frombuffer(wire.data, "<i4").tolist() == [2, 1, 0, 5, 4, 3]

    records = np.zeros(3, dtype=[("a", "<i4"), ("b", "u1")])  # 5-byte records
    records["a"] = [7, -8, 9]
    wire = encode_array(records["a"])  # byte stride 5: not a multiple of 4
    assert (wire.dtype, wire.strides) == (pb.INT32, None)
    assert np.frombuffer(wire.data, "<i4").tolist() == [7, -8, 9]


def test_big_endian_is_sent_little_endian() -> None:
    wire = encode_array(np.array([1, -2], dtype=">i4"))
    assert (wire.dtype, bytes(wire.data)) == (pb.INT32, b"\x01\x00\x00\x00\xfe\xff\xff\xff")


def test_rank0_and_empty_arrays() -> None:
    scalar = to_tensor(np.float64(2.5))
    assert (list(scalar.sizes), scalar.data) == ([], np.float64(2.5).tobytes())
    empty = to_tensor(np.zeros((0, 3), dtype=np.int8)[:, ::2])
    assert (list(empty.sizes), list(empty.strides), empty.data) == ([0, 2], [], b"")
    back = from_tensor(scalar)
    assert back.shape == () and back[()] == 2.5


# "V2": raw 2-byte voids share bfloat16's numpy kind and size, and are not it;
# float8_e4m3fn: another ml_dtypes type (kind "V", 1 byte).
@pytest.mark.parametrize("dtype", [np.complex64, np.object_, "V2", ml_dtypes.float8_e4m3fn])
def test_unsupported_dtypes_are_rejected(dtype: object) -> None:
    with pytest.raises(TypeError, match="tensorop has no dtype"):
        encode_array(np.zeros(2, dtype=dtype))


def test_bool_and_bfloat16_map_to_their_wire_dtypes_and_back() -> None:
    assert wire_dtype(np.bool_) == wire_dtype(bool) == wire_dtype("?") == pb.BOOL
    assert wire_dtype(ml_dtypes.bfloat16) == wire_dtype(BFLOAT16) == pb.BFLOAT16
    assert wire_dtype(BFLOAT16.newbyteorder(">")) == pb.BFLOAT16
    assert numpy_dtype(pb.BOOL) == np.dtype(np.bool_)
    assert numpy_dtype(pb.BFLOAT16) == BFLOAT16
    assert numpy_dtype(pb.BFLOAT16).type is ml_dtypes.bfloat16
    assert numpy_dtype(pb.BFLOAT16).itemsize == 2 and numpy_dtype(pb.BOOL).itemsize == 1


def test_bool_arrays_travel_byte_for_byte() -> None:
    flags = np.array([[True, False, True], [False, False, True]])
    tensor = to_tensor(flags)
    assert (tensor.dtype, list(tensor.sizes)) == (pb.BOOL, [2, 3])
    assert tensor.data == bytes([1, 0, 1, 0, 0, 1])
    back = from_tensor(tensor)
    assert back.dtype == np.bool_ and back.tolist() == flags.tolist()
    # A strided view keeps its strides (itemsize 1: byte strides are element strides).
    wire = encode_array(flags.T)
    assert (wire.dtype, wire.sizes, wire.strides) == (pb.BOOL, (3, 2), (1, 3))
    np.testing.assert_array_equal(
        decode_array(wire.dtype, wire.sizes, wire.strides or (), bytes(wire.data)), flags.T
    )
    # Bytes that are neither 0 nor 1 are sent and read back as they are, never checked.
    odd = np.frombuffer(bytes([0, 1, 2, 255]), dtype=np.bool_)
    tensor = to_tensor(odd)
    assert tensor.data == bytes([0, 1, 2, 255])
    assert from_tensor(tensor).view(np.uint8).tolist() == [0, 1, 2, 255]


def test_every_bfloat16_bit_pattern_round_trips() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)  # NaN payloads, -0.0, subnormals, infs
    values = bits.view(BFLOAT16)
    tensor = to_tensor(values)
    assert tensor.dtype == pb.BFLOAT16 and tensor.data == bits.astype("<u2").tobytes()
    back = from_tensor(tensor)
    assert back.dtype == BFLOAT16
    np.testing.assert_array_equal(back.view(np.uint16), bits)
    # Strided too: every third row, every fifth column of a 2-D view.
    view = values.reshape(256, 256)[::3, 1::5]
    wire = encode_array(view)
    assert wire.strides == (768, 5)
    np.testing.assert_array_equal(
        from_tensor(to_tensor(view)).view(np.uint16), view.view(np.uint16)
    )


def test_bfloat16_specials_are_exact_bits() -> None:
    # 1.0, -0.0, inf, -inf, the quiet NaN, a NaN with a payload, a signalling NaN,
    # the smallest subnormal, the largest finite value.
    bits = [0x3F80, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x7F7F]
    values = np.array(bits, dtype="<u2").view(BFLOAT16)
    tensor = to_tensor(values)
    assert tensor.data == b"".join(b.to_bytes(2, "little") for b in bits)
    back = from_tensor(tensor)
    assert back.view(np.uint16).tolist() == bits
    assert back[0] == 1.0 and np.signbit(back[1]) and back[2] == np.inf and back[3] == -np.inf
    assert all(math.isnan(float(v)) for v in back[4:7]) and float(back[8]) == 3.3895313892515355e38


def test_big_endian_bfloat16_is_sent_little_endian() -> None:
    big = np.array([1.0, -2.0, 0.5], dtype=BFLOAT16).astype(BFLOAT16.newbyteorder(">"))
    assert big.tobytes() == b"\x3f\x80\xc0\x00\x3f\x00"
    wire = encode_array(big)
    assert (wire.dtype, bytes(wire.data)) == (pb.BFLOAT16, b"\x80\x3f\x00\xc0\x00\x3f")
    assert from_tensor(wire.to_proto()).astype(np.float32).tolist() == [1.0, -2.0, 0.5]


def test_every_float16_bit_pattern_round_trips() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)  # NaN payloads, -0.0, subnormals, infs
    halves = bits.view(np.float16)
    back = from_tensor(to_tensor(halves))
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back.view(np.uint16), bits)
    # Strided too: every third row, every fifth column of a 2-D view.
    view = halves.reshape(256, 256)[::3, 1::5]
    np.testing.assert_array_equal(
        from_tensor(to_tensor(view)).view(np.uint16), view.view(np.uint16)
    )


def test_64_bit_integers_are_exact() -> None:
    signed = np.array([-(2**63), 2**63 - 1, 2**53 + 1, -(2**53) - 1], dtype=np.int64)
    unsigned = np.array([2**64 - 1, 2**63, 2**53 + 1], dtype=np.uint64)
    tensor = to_tensor(signed)
    assert tensor.dtype == pb.INT64
    assert tensor.data == b"".join(int(v).to_bytes(8, "little", signed=True) for v in signed)
    assert from_tensor(tensor).tolist() == [-(2**63), 2**63 - 1, 2**53 + 1, -(2**53) - 1]
    tensor = to_tensor(unsigned)
    assert tensor.dtype == pb.UINT64
    assert from_tensor(tensor).tolist() == [2**64 - 1, 2**63, 2**53 + 1]


def test_results_honour_the_returned_strides_without_copy() -> None:
    data = bytes(range(12))
    # Column-major 2x3: element (i, j) at i + 2j.
    out = decode_array(pb.UINT8, [2, 3], [1, 2], data)
    assert out.tolist() == [[0, 2, 4], [1, 3, 5]]
    assert out.strides == (1, 2)
    assert not out.flags.writeable
    assert np.shares_memory(out, np.frombuffer(data, dtype=np.uint8))
    # Padded rows (stride 5) and a broadcast dimension (stride 0), int16.
    data16 = np.arange(10, dtype="<i2").tobytes()
    padded = decode_array(pb.INT16, [2, 3], [5, 1], data16)
    assert padded.tolist() == [[0, 1, 2], [5, 6, 7]] and padded.strides == (10, 2)
    broadcast = decode_array(pb.INT16, [3, 2], [0, 1], data16)
    assert broadcast.tolist() == [[0, 1], [0, 1], [0, 1]] and broadcast.strides == (0, 2)
    # No strides: packed.
    packed = decode_array(pb.FLOAT16, [2], [], np.array([1.5, -0.0], dtype="<f2").tobytes())
    assert packed.view(np.uint16).tolist() == [0x3E00, 0x8000]
    # bfloat16 and bool results, strided: every other element.
    halves = decode_array(pb.BFLOAT16, [2], [2], bytes.fromhex("c03f11117fc0"))
    assert halves.dtype == BFLOAT16 and halves.strides == (4,)
    assert halves.view(np.uint16).tolist() == [0x3FC0, 0xC07F]
    assert halves.astype(np.float32).tolist() == [1.5, -3.984375]
    flags = decode_array(pb.BOOL, [2, 2], [1, 2], bytes([1, 0, 0, 1]))
    assert flags.dtype == np.bool_ and flags.tolist() == [[True, False], [False, True]]


@pytest.mark.parametrize(
    ("sizes", "strides", "nbytes", "message"),
    [
        ([2, 3], [3, 1], 5, "data holds 5 bytes but strides [3, 1] over sizes [2, 3] reach 6"),
        ([2, 3], [], 7, "data holds 7 bytes but packed sizes [2, 3] need 6"),
        ([2, 3], [1], 6, "strides [1] do not match sizes [2, 3]"),
        ([2, 3], [3, -1], 6, "strides[1] is negative (-1)"),
        ([-1], [], 0, "sizes[0] is negative (-1)"),
        ([1 << 32], [0], 1, "sizes [4294967296] hold more than 4294967295 elements"),
        ([1, 2], [1 << 63, 1], 2, "strides [9223372036854775808, 1] overflow 64 bits"),
    ],
)
def test_results_that_reach_past_their_data_are_rejected(
    sizes: list[int], strides: list[int], nbytes: int, message: str
) -> None:
    with pytest.raises(LayoutError) as error:
        decode_array(pb.UINT8, sizes, strides, bytes(nbytes))
    assert str(error.value) == message


def test_unknown_result_dtype_is_rejected() -> None:
    with pytest.raises(LayoutError, match="dtype 99 is not an element type"):
        decode_array(99, [1], [], b"\x00")
