"""RunStream reassembly without a server: header + chunks per output, and the
protocol checks that keep a broken stream from yielding unreadable arrays."""

from __future__ import annotations

import pytest

from tensorop_client import TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.client import _read_parts


def header(index: int, byte_length: int, sizes: list[int], strides: list[int]) -> pb.ResultPart:
    return pb.ResultPart(
        header=pb.OutputHeader(
            index=index,
            dtype=pb.UINT8,
            sizes=sizes,
            strides=strides,
            byte_length=byte_length,
            backend="cpu",
        )
    )


def kept(index: int, byte_length: int, id: str) -> pb.ResultPart:
    part = header(index, byte_length, [2], [1])
    part.header.handle.id = id
    return part


def chunk(data: bytes) -> pb.ResultPart:
    return pb.ResultPart(chunk=data)


def test_outputs_are_reassembled_with_their_strides() -> None:
    result = _read_parts(
        iter(
            [
                header(0, 6, [2, 3], [1, 2]),
                chunk(b"\x00\x01\x02"),
                chunk(b"\x03\x04\x05"),
                header(1, 0, [0], [1]),
            ]
        )
    )
    assert result.backend == "cpu"
    assert result.outputs[0].tolist() == [[0, 2, 4], [1, 3, 5]]
    assert result.outputs[0].strides == (1, 2)
    assert result.outputs[1].shape == (0,)


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([header(1, 1, [1], [1])], "expected the header of output 0, got output 1"),
        (
            [header(0, 2, [2], [1]), chunk(b"\x00"), header(1, 1, [1], [1])],
            "header of output 1 arrived 1 bytes before output 0 was complete",
        ),
        (
            [header(0, 1, [1], [1]), chunk(b"\x00\x01")],
            "a chunk of 2 bytes exceeds what the headers announced by 1",
        ),
        ([chunk(b"\x00")], "a chunk of 1 bytes exceeds what the headers announced by 1"),
        ([header(0, 4, [4], [1]), chunk(b"\x00")], "the stream ended 3 bytes short of output 0"),
        (
            [header(0, 2, [2, 2], [2, 1]), chunk(b"\x00\x01")],
            "output 0: data holds 2 bytes but strides [2, 1] over sizes [2, 2] reach 4",
        ),
        ([pb.ResultPart()], "an empty ResultPart"),
        ([kept(0, 4, "ab")], "output 0 is a handle but has 4 bytes"),
        ([kept(0, 0, "")], "output 0 is a handle without an id"),
        ([kept(0, 0, "ab")], "output 0 is a handle, which no request here kept"),
    ],
)
def test_broken_streams_are_internal_errors(parts: list[pb.ResultPart], message: str) -> None:
    with pytest.raises(TensorOpError) as error:
        _read_parts(iter(parts))
    assert (error.value.code, error.value.message) == (
        "INTERNAL",
        f"server broke the protocol: {message}",
    )
