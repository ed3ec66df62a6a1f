"""The Python client against the real tensord, on both backends, Run and RunStream."""

from __future__ import annotations

import math

import grpc
import ml_dtypes
import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import Client, Output, TensorOpError, make_request
from tensorop_client._proto import tensorop_pb2_grpc as pb_grpc

BACKENDS = ["cpu", "opencl"]
CALLS = ["run", "run_stream"]


def check_backend(requested: str, got: str) -> None:
    # "cpu", or "opencl:<device>" (tensord's OpenCL pool: PoCL on CI machines).
    assert got == "cpu" if requested == "cpu" else got.startswith("opencl:")


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_of_a_strided_view_with_requested_output_strides(
    client: Client, backend: str, call: str
) -> None:
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = base[1::2, ::3]  # 3x3, byte strides (64, 12): sent as element strides (16, 3)
    result = getattr(client, call)(
        "slice",
        {"input": view},
        {"offsets": [0, 1], "window_sizes": [3, 2], "window_strides": [2, 1]},
        outputs=[Output((2, 2), strides=(1, 3))],  # column-major with padding
        backend=backend,
    )
    check_backend(backend, result.backend)
    (out,) = result.outputs
    assert out.dtype == np.float32 and out.shape == (2, 2)
    assert out.strides == (4, 12)  # the requested element strides (1, 3), in bytes
    assert not out.flags.writeable
    np.testing.assert_array_equal(out, [[11.0, 14.0], [43.0, 46.0]])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_16_bit_float_pattern_survives_the_server(
    client: Client, backend: str, call: str, dtype: type
) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)  # NaN payloads, -0.0, infs, subnormals
    # Reversed on the server (negative window stride) so the data really moves.
    result = getattr(client, call)(
        "slice",
        {"input": bits.view(dtype)},
        {"offsets": [0], "window_sizes": [1 << 16], "window_strides": [-1]},
        outputs=[(1 << 16,)],
        backend=backend,
    )
    check_backend(backend, result.backend)
    out = result.outputs[0]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.view(np.uint16), bits[::-1])


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_specials_of_a_strided_view_split_exactly(
    client: Client, backend: str, call: str
) -> None:
    # -0.0, a quiet NaN with a payload, a signalling NaN, -inf, inf, the smallest
    # subnormal, the largest value, 1.5: in a 2x4 matrix sent transposed (strides (1, 4)).
    bits = np.array(
        [[0x8000, 0x7FC1, 0x7F81, 0xFF80], [0x7F80, 0x0001, 0x7F7F, 0x3FC0]], dtype="<u2"
    )
    values = bits.view(ml_dtypes.bfloat16)
    result = getattr(client, call)(
        "split", {"input": values.T}, {"axis": 0}, outputs=[(1, 2), (3, 2)], backend=backend
    )
    check_backend(backend, result.backend)
    first, rest = result.outputs
    assert first.dtype == rest.dtype == np.dtype(ml_dtypes.bfloat16)
    assert first.view(np.uint16).tolist() == [[0x8000, 0x7F80]]
    assert rest.view(np.uint16).tolist() == [[0x7FC1, 0x0001], [0x7F81, 0x7F7F], [0xFF80, 0x3FC0]]
    assert float(rest[2, 1]) == 1.5 and float(rest[1, 1]) == 3.3895313892515355e38


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_arrays_are_copied_byte_for_byte(client: Client, backend: str, call: str) -> None:
    flags = np.array([True, False, False, True, True, False, True, True])
    result = getattr(client, call)(
        "slice",
        {"input": flags.reshape(2, 4)[:, ::2]},  # strided view: element strides (4, 2)
        {"offsets": [0, 0], "window_sizes": [2, 2], "window_strides": [-1, 1]},
        outputs=[Output((2, 2), strides=(1, 2))],
        backend=backend,
    )
    check_backend(backend, result.backend)
    (out,) = result.outputs
    assert out.dtype == np.bool_ and out.strides == (1, 2)
    assert out.tolist() == [[True, True], [True, False]]
    # Bytes that are neither 0 nor 1 are copied as they are, never checked.
    odd = np.frombuffer(bytes([0, 1, 2, 255, 128, 1]), dtype=np.bool_)
    result = getattr(client, call)(
        "strided_slice", {"input": odd}, {"begin": [5], "end": [0], "stride": [-1]},
        backend=backend,
    )
    (out,) = result.outputs
    assert out.dtype == np.bool_ and out.view(np.uint8).tolist() == [1, 128, 255, 2, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_elements_moves_bool_and_bfloat16_but_refuses_them_as_indices(
    client: Client, backend: str
) -> None:
    data = np.array([[1.5, -0.0, 2.0], [4.0, 8.0, -16.0]], dtype=ml_dtypes.bfloat16)
    indices = np.array([[2], [0]], dtype=np.int32)
    updates = np.array([[0x7FC1], [0xFF80]], dtype="<u2").view(ml_dtypes.bfloat16)
    result = client.run(
        "scatter_elements",
        {"input": data, "indices": indices, "updates": updates},
        {"axis": 1},
        backend=backend,
    )
    assert result.outputs[0].view(np.uint16).tolist() == [
        [0x3FC0, 0x8000, 0x7FC1],
        [0xFF80, 0x4100, 0xC180],
    ]
    flags = np.zeros((2, 3), dtype=np.bool_)
    result = client.run_stream(
        "scatter_elements",
        {"input": flags, "indices": indices.astype(np.uint64), "updates": np.ones((2, 1), bool)},
        {"axis": 1},
        backend=backend,
    )
    assert result.outputs[0].view(np.uint8).tolist() == [[0, 0, 1], [1, 0, 0]]
    for bad in (np.array([[1], [0]], dtype=np.bool_), np.array([[1], [0]], ml_dtypes.bfloat16)):
        with pytest.raises(TensorOpError) as error:
            client.run(
                "scatter_elements",
                {"input": flags, "indices": bad, "updates": np.ones((2, 1), bool)},
                {"axis": 1},
                backend=backend,
            )
        name = "bool" if bad.dtype == np.bool_ else "bfloat16"
        assert (error.value.code, error.value.message) == (
            "INVALID_ARGUMENT",
            f"indices.dtype is {name}; it must be int32, int64, uint32 or uint64",
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_64_bit_integers_split_exactly(client: Client, backend: str) -> None:
    signed = np.array([[-(2**63), 2**63 - 1, 2**53 + 1], [-(2**53) - 1, 0, -1]], dtype=np.int64)
    result = client.run(
        "split",
        {"input": signed.T},
        {"axis": 0},  # transposed: strides (1, 3)
        outputs=[(1, 2), (2, 2)],
        backend=backend,
    )
    assert [o.tolist() for o in result.outputs] == [
        [[-(2**63), -(2**53) - 1]],
        [[2**63 - 1, 0], [2**53 + 1, -1]],
    ]
    unsigned = np.array([2**64 - 1, 2**63, 2**53 + 1, 7], dtype=np.uint64)
    result = client.run_stream(
        "strided_slice",
        {"input": unsigned},
        {"begin": [1], "end": [4], "stride": [2]},
        backend=backend,
    )
    assert result.outputs[0].dtype == np.uint64 and result.outputs[0].tolist() == [2**63, 7]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_elements_with_negative_int64_indices_and_a_reversed_input(
    client: Client, backend: str
) -> None:
    data = np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::-1]  # negative strides: packed copy
    indices = np.array([[-1], [0]], dtype=np.int64)
    updates = np.array([[100], [200]], dtype=np.int32)
    result = client.run(
        "scatter_elements",
        {"input": data, "indices": indices, "updates": updates},
        {"axis": 1},
        backend=backend,
    )
    assert result.outputs[0].tolist() == [[2, 1, 100], [200, 4, 3]]


@pytest.mark.parametrize("call", CALLS)
def test_invalid_requests_raise_with_the_status_code_and_message(client: Client, call: str) -> None:
    with pytest.raises(TensorOpError) as error:
        getattr(client, call)(
            "slice",
            {"input": np.zeros((2, 2), dtype=np.uint8)},
            {"offsets": [0, 0], "window_sizes": [2, 2], "window_strides": [1, 0]},
            outputs=[(2, 2)],
        )
    assert error.value.code == "INVALID_ARGUMENT"
    assert error.value.message == "slice.window_strides[1] must not be 0"
    assert str(error.value) == "INVALID_ARGUMENT: slice.window_strides[1] must not be 0"


def test_an_unreachable_server_is_unavailable() -> None:
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    with Client("127.0.0.1:1", timeout=10) as client:
        with pytest.raises(TensorOpError) as error:
            client.run("split", {"input": np.zeros(2, dtype=np.uint8)}, {"axis": 0}, outputs=[(2,)])
    assert error.value.code == "UNAVAILABLE"


def test_bad_arguments_fail_before_sending() -> None:
    x = np.zeros(2, dtype=np.uint8)
    with pytest.raises(ValueError, match="unknown operator 'matmul'"):
        make_request("matmul", {"input": x})
    with pytest.raises(ValueError, match="attrs.axes: not an attribute of split"):
        make_request("split", {"input": x}, {"axes": 0})
    with pytest.raises(ValueError, match="backend is one of auto, cpu, opencl, not 'gpu'"):
        make_request("split", {"input": x}, {"axis": 0}, backend="gpu")
    request = make_request(
        "split",
        {"input": x},
        {"axis": 0},
        outputs=[{"sizes": [2]}],
        backend="opencl",
        device_index=0,
    )
    assert request.HasField("device_index") and request.device_index == 0


def test_streamed_results_are_reassembled_from_many_chunks(tensord_small_chunks: Tensord) -> None:
    x = np.arange(3000, dtype=np.uint16).reshape(3, 1000)
    request = make_request("split", {"input": x}, {"axis": 0}, outputs=[(1, 1000), (2, 1000)])
    # The server really sends several chunks per output (64 bytes each)...
    with grpc.insecure_channel(tensord_small_chunks.address) as channel:
        parts = list(pb_grpc.TensorOpStub(channel).RunStream(request, timeout=60))
    kinds = [p.WhichOneof("part") for p in parts]
    assert kinds.count("header") == 2
    assert kinds.count("chunk") == math.ceil(2000 / 64) + math.ceil(4000 / 64)
    # ...and the client puts them back together.
    with Client(tensord_small_chunks.address, timeout=60) as client:
        first, second = client.run_stream(
            "split", {"input": x}, {"axis": 0}, outputs=[(1, 1000), (2, 1000)]
        ).outputs
    np.testing.assert_array_equal(first, x[:1])
    np.testing.assert_array_equal(second, x[1:])


def test_an_unknown_attribute_is_answered_with_the_valid_ones(client: Client) -> None:
    x = np.zeros(4, dtype=np.uint8)
    for call in (client.run, client.run_stream, client.run_chunked):
        with pytest.raises(
            ValueError,
            match=r"attrs\.offset: not an attribute of slice; its attributes are offsets, "
            r"window_sizes, window_strides$",
        ):
            call("slice", {"input": x}, {"offset": [0]}, outputs=[(2,)])


def test_a_negative_axis_counts_from_the_end_as_in_numpy(client: Client) -> None:
    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    for call in (client.run, client.run_stream, client.run_chunked):
        result = call("split", {"input": x}, {"axis": -1}, outputs=[(2, 1), (2, 3)])
        expected = np.split(x, [1], axis=-1)
        assert [o.tolist() for o in result.outputs] == [e.tolist() for e in expected]
    # Past the rank it is the server's to refuse, naming the range.
    with pytest.raises(TensorOpError) as error:
        client.run("split", {"input": x}, {"axis": -3}, outputs=[(2, 4)])
    assert error.value.code == "INVALID_ARGUMENT" and "[0, 2)" in error.value.message


def test_make_request_turns_a_negative_axis_into_numpys() -> None:
    x = np.zeros((2, 3, 4), dtype=np.uint8)
    assert make_request("split", {"input": x}, {"axis": -1}).split.axis == 2
    indices = np.zeros((2, 3, 1), dtype=np.int64)
    request = make_request(
        "scatter_elements", {"input": x, "indices": indices, "updates": x[..., :1]}, {"axis": -2}
    )
    assert request.scatter_elements.axis == 1
    assert make_request("split", {"input": x}, {"axis": -4}).split.axis == -4
