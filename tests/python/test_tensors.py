"""numpy <-> wire tensor mapping: zero-copy strided views, exact dtypes, strided results."""

from __future__ import annotations

import numpy as np
import pytest

from tensorop_client import LayoutError, decode_array, encode_array, from_tensor, to_tensor
from tensorop_client._proto import tensorop_pb2 as pb


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


@pytest.mark.parametrize("dtype", [np.bool_, np.complex64, np.object_])
def test_unsupported_dtypes_are_rejected(dtype: type) -> None:
    with pytest.raises(TypeError, match="tensorop has no dtype"):
        encode_array(np.zeros(2, dtype=dtype))


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
