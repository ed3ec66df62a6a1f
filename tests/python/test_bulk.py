"""Tensors over the message limit from Python: `run` uploads inputs with RunChunked
and takes answers through the streamed path without being asked, byte for byte,
with a progress callback; against tensord with a 64 KiB message limit so the
tensors stay small (the 1 GiB round trip runs where 8 GiB of memory are available)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from conftest import SMALL_CHUNK_BYTES, SMALL_MESSAGE_BYTES, Tensord
from tensorop_client import AsyncClient, Client, Output, TensorOpError, make_request
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.client import _prepare, answer_bytes_bound
from tensorop_client.wire import encode_request, parse_run_response, request_meta

RNG = np.random.default_rng(11)


def calls(server: Tensord, method: str) -> int:
    """Calls of `method` the server finished OK, from its /metrics."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = re.compile(
        r'^tensorop_requests_total\{method="' + method + r'",[^}]*code="OK"\} (\d+)$', re.M
    )
    return sum(int(n) for n in pattern.findall(text))


@pytest.fixture
def small(tensord_small_messages: Tensord) -> Iterator[Client]:
    """A client whose limit is the server's 64 KiB, uploading 16 KiB chunks."""
    with Client(
        tensord_small_messages.address,
        timeout=60,
        max_message_bytes=SMALL_MESSAGE_BYTES,
        chunk_bytes=SMALL_CHUNK_BYTES,
    ) as c:
        yield c


def random_bits(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Every bit pattern is fair (NaN payloads, -0.0): the service moves bits."""
    dt = np.dtype(dtype)
    raw = RNG.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    width = np.dtype(f"<u{got.itemsize}")
    np.testing.assert_array_equal(got.view(width), np.ascontiguousarray(expected).view(width))


def test_an_input_over_the_limit_is_uploaded_in_chunks(
    small: Client, tensord_small_messages: Tensord
) -> None:
    x = random_bits((300, 257), "<f2")  # 154200 bytes: more than two messages
    before = calls(tensord_small_messages, "RunChunked")
    result = small.run(
        "slice",
        {"input": x[:, 1:]},  # a strided view: its span goes up in chunks as it lies
        {"offsets": [3, 5], "window_sizes": [4, 6], "window_strides": [-1, 2]},
        outputs=[(4, 3)],
        backend="cpu",
    )
    same_bits(result.outputs[0], x[:, 1:][6:2:-1, 5:11:2])
    assert result.backend == "cpu"
    assert calls(tensord_small_messages, "RunChunked") == before + 1


def test_an_answer_over_the_limit_streams_back(
    small: Client, tensord_small_messages: Tensord
) -> None:
    # A broadcast input (stride 0) travels as one element; the answer is 400 KB.
    x = np.broadcast_to(np.float32(-0.0), (1000, 100))
    before = calls(tensord_small_messages, "RunStream")
    result = small.run("split", {"input": x}, {"axis": 0}, outputs=[(999, 100), (1, 100)])
    same_bits(result.outputs[0], np.full((999, 100), -0.0, dtype=np.float32))
    same_bits(result.outputs[1], np.full((1, 100), -0.0, dtype=np.float32))
    assert not result.outputs[0].flags.writeable
    assert calls(tensord_small_messages, "RunStream") == before + 1


def test_padded_output_strides_over_the_limit_stream_back(small: Client) -> None:
    x = np.arange(100, dtype=np.int64)
    result = small.run(
        "slice",
        {"input": x},
        {"offsets": [0], "window_sizes": [100], "window_strides": [1]},
        outputs=[Output((100,), strides=(1000,))],  # 792 KB of mostly padding
    )
    (out,) = result.outputs
    assert out.strides == (8000,)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_several_inputs_and_the_answer_over_the_limit(small: Client, backend: str) -> None:
    data = random_bits((64, 512), "<u4")  # 128 KiB
    indices = RNG.integers(-512, 512, size=(64, 400), dtype=np.int64)  # 200 KiB
    updates = random_bits((64, 400), "<u4")
    expected = data.copy()
    for row in range(64):  # later updates win, in row-major order
        for col in range(400):
            expected[row, indices[row, col] % 512] = updates[row, col]
    result = small.run(
        "scatter_elements",
        {"input": data, "indices": indices, "updates": updates},
        {"axis": 1},
        backend=backend,
    )
    same_bits(result.outputs[0], expected)


def test_progress_counts_every_byte_in_order(small: Client) -> None:
    x = random_bits((100_000,), "<u2")  # 200000 bytes up, 150000 down
    seen: list[tuple[int, int]] = []
    result = small.run(
        "slice",
        {"input": x},
        {"offsets": [10], "window_sizes": [75_000], "window_strides": [1]},
        outputs=[(75_000,)],
        progress=lambda done, total: seen.append((done, total)),
    )
    same_bits(result.outputs[0], x[10:75_010])
    dones = [d for d, _ in seen]
    assert dones == sorted(dones)
    # The output's bytes are known before the call: every report has the whole total.
    assert {t for _, t in seen} == {350_000}
    assert seen[0] == (0, 350_000)
    assert seen[-1] == (350_000, 350_000)
    # Uploaded in 16 KiB chunks, downloaded in the server's 16 KiB chunks.
    steps = {b - a for a, b in zip(dones, dones[1:], strict=False)} - {0}
    assert max(steps) == SMALL_CHUNK_BYTES


class Stop(Exception):
    pass


@pytest.mark.parametrize("phase", ["upload", "download"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_progress_callback_that_raises_stops_the_call_with_its_exception(
    tensord_small_messages: Tensord, phase: str, asynchronous: bool
) -> None:
    # Upload: a 400 KB input in chunks. Download: a 4-byte broadcast input, a
    # 400 KB answer.
    x = (
        np.arange(100_000, dtype=np.int32)
        if phase == "upload"
        else np.broadcast_to(np.int32(3), (100_000,))
    )
    attrs = {"offsets": [0], "window_sizes": [50_000], "window_strides": [1]}

    def progress(done: int, total: int) -> None:
        if done > 60_000:
            raise Stop(f"{phase} stopped at {done} of {total}")

    options = {
        "timeout": 60,
        "max_message_bytes": SMALL_MESSAGE_BYTES,
        "chunk_bytes": SMALL_CHUNK_BYTES,
    }
    if asynchronous:

        async def main() -> None:
            async with AsyncClient(tensord_small_messages.address, **options) as c:
                with pytest.raises(Stop, match=f"{phase} stopped at"):
                    await c.run("slice", {"input": x}, attrs, [(50_000,)], progress=progress)
                # The client is still good.
                got = await c.run("slice", {"input": x}, attrs, [(50_000,)])
                np.testing.assert_array_equal(got.outputs[0], x[:50_000])

        asyncio.run(main())
    else:
        with Client(tensord_small_messages.address, **options) as c:
            with pytest.raises(Stop, match=f"{phase} stopped at"):
                c.run("slice", {"input": x}, attrs, [(50_000,)], progress=progress)
            got = c.run("slice", {"input": x}, attrs, [(50_000,)])
            np.testing.assert_array_equal(got.outputs[0], x[:50_000])


def test_progress_of_a_unary_call_is_one_report(client: Client) -> None:
    seen: list[tuple[int, int]] = []
    client.run(
        "slice",
        {"input": np.arange(10, dtype=np.int8)},
        {"offsets": [0], "window_sizes": [4], "window_strides": [1]},
        outputs=[(4,)],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(14, 14)]


def test_a_client_with_a_larger_limit_than_the_server_falls_back(
    tensord_small_messages: Tensord,
) -> None:
    # Our 64 MiB limit lets the call go unary; the server's 64 KiB refuses it,
    # and the call is repeated through RunChunked in chunks that fit.
    x = random_bits((50_000,), "<i4")
    with Client(tensord_small_messages.address, timeout=60) as c:
        result = c.run(
            "slice", {"input": x}, {"offsets": [1], "window_sizes": [3], "window_strides": [1]},
            outputs=[(3,)],
        )
        same_bits(result.outputs[0], x[1:4])
        # And an answer the server would not send in one message.
        result = c.run(
            "slice",
            {"input": x},
            {"offsets": [0], "window_sizes": [40_000], "window_strides": [1]},
            outputs=[(40_000,)],
        )
        same_bits(result.outputs[0], x[:40_000])


def test_errors_come_back_through_the_chunked_path(small: Client) -> None:
    x = np.zeros(100_000, dtype=np.uint8)
    with pytest.raises(TensorOpError) as error:
        small.run(
            "slice", {"input": x}, {"offsets": [0], "window_sizes": [2], "window_strides": [0]},
            outputs=[(2,)],
        )
    assert (error.value.code, error.value.message) == (
        "INVALID_ARGUMENT",
        "slice.window_strides[0] must not be 0",
    )


def test_explicit_calls_and_ready_requests(small: Client) -> None:
    x = random_bits((5000,), "<f8")
    attrs = {"begin": [4999], "end": [0], "stride": [-7]}
    expected = x[4999:0:-7]
    for call in (small.run_chunked, small.run_stream, small.run):
        same_bits(call("strided_slice", {"input": x}, attrs).outputs[0], expected)
    request = make_request("strided_slice", {"input": x}, attrs)
    for call in (small.run_request, small.run_stream_request, small.run_chunked_request):
        same_bits(call(request).outputs[0], expected)
    same_bits(small.run_chunked("strided_slice", {"input": x}, attrs, chunk_bytes=1000).outputs[0],
              expected)
    with pytest.raises(ValueError, match="chunk_bytes must be in"):
        small.run_chunked("strided_slice", {"input": x}, attrs, chunk_bytes=0)


@pytest.mark.parametrize("device_index", [None, 0, 2])
def test_requests_are_framed_as_protobuf_would(device_index: int | None) -> None:
    x = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    request = make_request(
        "scatter_elements",
        {"input": x, "indices": np.zeros((1, 1), np.int32), "updates": np.ones((1, 1), np.int16)},
        {"axis": 1},
        outputs=[{"strides": [3, 1]}],
        backend="opencl",
        device_index=device_index,
    )
    request.id = "r1"
    header, data = request_meta(request)
    assert not any(t.data for t in header.inputs.values())
    framed = b"".join(encode_request(header, data))
    parsed = pb.RunRequest.FromString(framed)
    assert parsed == request
    assert parsed.HasField("device_index") == (device_index is not None)
    # What run sends for numpy inputs, built without a RunRequest holding them.
    pieces, size = _prepare(
        "scatter_elements",
        {"input": x, "indices": np.zeros((1, 1), np.int32), "updates": np.ones((1, 1), np.int16)},
        {"axis": 1},
        [{"strides": [3, 1]}],
        "opencl",
        device_index,
    ).pieces()
    framed = b"".join(pieces)
    assert len(framed) == size
    request.id = ""
    assert pb.RunRequest.FromString(framed) == request
    # An operator chosen without attributes (split's axis 0) stays chosen.
    split = make_request("split", {"input": x}, {"axis": 0}, outputs=[(3, 2)])
    framed = b"".join(encode_request(*request_meta(split)))
    assert pb.RunRequest.FromString(framed).WhichOneof("op") == "split"


def test_answers_are_read_in_place_whatever_the_field_order() -> None:
    tensor = pb.Tensor(dtype=pb.UINT8, sizes=[2], strides=[1], data=b"\x07\x08")
    # Fields out of order, an unknown field (15), data before the layout.
    layout = pb.Tensor(dtype=pb.UINT8, sizes=[2], strides=[1]).SerializeToString()
    data_first = b"\x22\x02\x07\x08" + layout
    raw = (
        pb.RunResponse(backend="cpu").SerializeToString()
        + b"\x12" + bytes([len(data_first)]) + data_first
        + b"\x78\x01"
        + pb.RunResponse(id="x", outputs=[tensor]).SerializeToString()
    )
    meta, outputs = parse_run_response(raw)
    assert (meta.id, meta.backend) == ("x", "cpu")
    assert [(t.sizes[:], bytes(d)) for t, d in outputs] == [([2], b"\x07\x08")] * 2
    assert outputs[0][1].obj is raw  # a view of the received bytes, not a copy


def test_answer_bounds_are_never_below_the_answer() -> None:
    x = np.zeros((10, 20), np.float32)
    assert answer_bytes_bound(make_request("slice", {"input": x}, outputs=[(5, 4)])) == 80
    split = make_request(
        "split", {"input": x}, outputs=[(4, 20), {"sizes": [6, 20], "strides": [40, 1]}]
    )
    assert answer_bytes_bound(split) == 4 * (80 + 5 * 40 + 20)
    assert answer_bytes_bound(make_request("scatter_elements", {"input": x})) == 800
    assert answer_bytes_bound(make_request("strided_slice", {"input": x})) == 800
    # Strides without sizes: each size is at most the input's elements.
    padded = make_request("strided_slice", {"input": x}, outputs=[{"strides": [2, 3]}])
    assert answer_bytes_bound(padded) == 800 * 6
    assert answer_bytes_bound(make_request("slice", {"input": x}, outputs=[(-1, 4)])) == 0


def available_memory_bytes() -> int:
    """MemAvailable from /proc/meminfo (0 where unreadable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


# The client holds 2 GiB and more, the server as much again: about 5 GiB.
GIB_ROUND_TRIP_MEMORY = 8 << 30


@pytest.mark.skipif(
    available_memory_bytes() < GIB_ROUND_TRIP_MEMORY,
    reason=f"1 GiB round trip: needs {GIB_ROUND_TRIP_MEMORY >> 30} GiB of available memory",
)
def test_a_gib_in_and_a_gib_out_within_2_5x_the_payload(tensord: Tensord) -> None:
    # In a child process, so its peak RSS is this call's alone.
    script = textwrap.dedent(
        """
        import resource, sys
        import numpy as np
        from tensorop_client import Client
        n = (1 << 30) // 4
        x = np.arange(n, dtype=np.uint32)
        with Client(sys.argv[1], timeout=600) as client:
            out = client.run("slice", {"input": x},
                             {"offsets": [0], "window_sizes": [n], "window_strides": [-1]},
                             outputs=[(n,)], backend="cpu").outputs[0]
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
        step = 1 << 24
        for at in range(0, n, step):
            assert np.array_equal(out[at : at + step], x[::-1][at : at + step]), at
        print(peak)
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", script, tensord.address], capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, child.stderr
    peak = int(child.stdout)
    # The process holds the 1 GiB input and the 1 GiB result: 2x by themselves.
    assert peak <= 2.5 * (1 << 30), f"peak RSS {peak / 2**30:.2f} GiB"
