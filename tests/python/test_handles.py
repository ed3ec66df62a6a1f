"""Handles through the Python client against the real tensord: put and fetch,
RemoteTensors as inputs, kept outputs, release, list_handles, and the same
through AsyncClient. Every public case through handles: test_conformance.py
(--handles)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import (
    AsyncClient,
    AsyncRemoteTensor,
    Client,
    RemoteTensor,
    TensorOpError,
    make_request,
)

CALLS = ["run", "run_stream", "run_chunked"]
SLICE = {"offsets": [0, 1], "window_sizes": [3, 2], "window_strides": [2, 1]}  # 2x2 out


def bits(array: np.ndarray) -> np.ndarray:
    """The elements' bits, row-major: equal arrays of bits are byte-exact."""
    return np.ascontiguousarray(array).view(f"u{array.itemsize}")


def not_found(h: RemoteTensor | AsyncRemoteTensor) -> str:
    return (
        f"handle {h.id[:8]}... does not exist on replica {h.handle.replica} "
        "(released, expired, or never made here)"
    )


# An array and the element strides its handle keeps: strided views keep their
# layout, padding included; negative strides are packed first.
PUTS = {
    "float32": (  # random bits: NaN payloads, -0.0, subnormals
        np.random.default_rng(7).integers(0, 2**32, (5, 7), dtype=np.uint32).view(np.float32),
        (7, 1),
    ),
    "int16": (np.arange(-60, 60, dtype=np.int16).reshape(4, 30), (30, 1)),
    "int16_strided": (np.arange(96, dtype=np.int16).reshape(8, 12)[1::2, ::3], (24, 3)),
    "float32_transposed": (np.arange(12, dtype=np.float32).reshape(3, 4).T, (1, 4)),
    "int64_reversed": (np.arange(-5, 5, dtype=np.int64)[::-1], (1,)),
}


@pytest.mark.parametrize("name", PUTS)
def test_put_then_fetch_is_byte_exact(client: Client, name: str) -> None:
    array, strides = PUTS[name]
    with client.put(array) as h:
        assert isinstance(h, RemoteTensor) and len(h.id) == 32
        assert (h.dtype, h.shape, h.strides) == (array.dtype, array.shape, strides)
        span = 1 + sum((n - 1) * s for n, s in zip(array.shape, strides, strict=True))
        assert (h.handle.backend, h.handle.byte_size) == ("cpu", span * array.itemsize)
        out = h.fetch()
        assert out.dtype == array.dtype and out.shape == array.shape
        assert out.flags.c_contiguous and not out.flags.writeable
        np.testing.assert_array_equal(bits(out), bits(array))


def test_put_and_fetch_in_chunks_report_progress(tensord: Tensord) -> None:
    x = np.arange(25_000, dtype=np.uint32)  # 100000 bytes: 25 chunks of 4096
    uploaded: list[tuple[int, int]] = []
    downloaded: list[tuple[int, int]] = []
    with Client(tensord.address, timeout=60, chunk_bytes=4096) as client:
        with client.put(x, progress=lambda d, t: uploaded.append((d, t))) as h:
            out = h.fetch(progress=lambda d, t: downloaded.append((d, t)))
        with pytest.raises(RuntimeError, match="stop here"):  # the callback's, not gRPC's
            client.put(x, progress=stop_after_a_chunk)
    np.testing.assert_array_equal(out, x)
    assert uploaded == [(min(i * 4096, 100_000), 100_000) for i in range(26)]
    assert downloaded[-1] == (100_000, 100_000)


def stop_after_a_chunk(done: int, total: int) -> None:
    if done:
        raise RuntimeError("stop here")


def test_fetch_with_padded_strides(client: Client) -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    with client.put(x) as h:
        padded = h.fetch(strides=(6, 1))
        column_major = client.fetch(h.id, strides=[1, 3])
    assert padded.strides == (24, 4) and column_major.strides == (4, 12)
    np.testing.assert_array_equal(padded, x)
    np.testing.assert_array_equal(column_major, x)


@pytest.mark.parametrize("call", CALLS)
def test_a_remote_input_runs_like_the_array(client: Client, call: str) -> None:
    x = np.arange(48, dtype=np.float32).reshape(6, 8)[1::2, ::2]  # strided: (16, 2)
    expected = client.run("slice", {"input": x}, SLICE, outputs=[(2, 2)]).outputs[0]
    assert expected.tolist() == [[10.0, 12.0], [42.0, 44.0]]
    with client.put(x) as h:
        result = getattr(client, call)("slice", {"input": h}, SLICE, outputs=[(2, 2)])
        np.testing.assert_array_equal(result.outputs[0], expected)
        # make_request names it too (no bytes travel: the handle replaces data).
        request = make_request("slice", {"input": h}, SLICE, outputs=[(2, 2)])
        assert request.inputs["input"].WhichOneof("location") == "handle"
        assert list(request.inputs["input"].strides) == [16, 2]
        np.testing.assert_array_equal(client.run_request(request).outputs[0], expected)


KEPT = {
    "slice": ({"input": np.arange(24, dtype=np.int16).reshape(4, 6)}, SLICE, [(2, 2)]),
    "split": ({"input": np.arange(10, dtype=np.uint8)}, {"axis": 0}, [(3,), (7,)]),
    # No outputs given: one empty OutputDesc with keep goes out.
    "strided_slice": (
        {"input": np.arange(20, dtype=np.float64).reshape(4, 5)},
        {"begin": [3, 0], "end": [0, 5], "stride": [-1, 2]},
        None,
    ),
    "scatter_elements": (
        {
            "input": np.zeros((2, 3), dtype=np.int32),
            "indices": np.array([[2], [0]], dtype=np.int64),
            "updates": np.array([[7], [9]], dtype=np.int32),
        },
        {"axis": 1},
        None,
    ),
}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("op", KEPT)
def test_kept_outputs_are_remote_tensors_that_fetch_the_result(
    client: Client, op: str, call: str
) -> None:
    inputs, attrs, outputs = KEPT[op]
    expected = client.run(op, inputs, attrs, outputs).outputs
    kept = getattr(client, call)(op, inputs, attrs, outputs, keep=True)
    assert len(kept.outputs) == len(expected) and kept.backend == "cpu"
    for remote, array in zip(kept.outputs, expected, strict=True):
        assert isinstance(remote, RemoteTensor)
        assert (remote.dtype, remote.shape) == (array.dtype, array.shape)
        np.testing.assert_array_equal(bits(remote.fetch()), bits(array))
    client.release(kept.outputs)


def test_kept_outputs_of_ready_requests_and_run_many(client: Client) -> None:
    x = np.arange(24, dtype=np.int16).reshape(4, 6)
    request = make_request("slice", {"input": x}, SLICE, outputs=[(2, 2)])
    request.outputs[0].keep = True  # set by the caller
    with client.put(x) as h:
        kept = {"op": "slice", "inputs": {"input": h}, "attrs": SLICE, "outputs": [(2, 2)]}
        requests = [request, {**kept, "keep": True}, ("slice", {"input": h}, SLICE, [(2, 2)])]
        outcomes = list(client.run_many(requests))
        outcomes.append(client.run_stream_request(request))
    remotes = [outcomes[0].outputs[0], outcomes[1].outputs[0], outcomes[3].outputs[0]]
    assert all(isinstance(r, RemoteTensor) for r in remotes)
    for remote in remotes:
        assert remote.fetch().tolist() == [[1, 2], [13, 14]]
    assert outcomes[2].outputs[0].tolist() == [[1, 2], [13, 14]]
    client.release(remotes)


def test_a_released_handle_is_not_found(client: Client) -> None:
    h = client.put(np.arange(4, dtype=np.uint8))
    kept = client.run("split", {"input": h}, {"axis": 0}, [(4,)], keep=True).outputs[0]
    client.release([h.id, kept])  # ids or RemoteTensors
    with pytest.raises(TensorOpError) as error:
        h.fetch()
    assert (error.value.code, error.value.message) == ("NOT_FOUND", f"id: {not_found(h)}")
    with pytest.raises(TensorOpError) as error:
        client.run("split", {"input": h}, {"axis": 0}, [(4,)])
    assert (error.value.code, error.value.message) == (
        "NOT_FOUND",
        f'inputs["input"].handle: {not_found(h)}',
    )
    with pytest.raises(TensorOpError) as error:
        kept.fetch()
    assert error.value.code == "NOT_FOUND"
    h.release()  # unknown ids are ignored
    client.release([])


def test_list_handles_shows_puts_until_released(client: Client) -> None:
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    with client.put(x, ttl_seconds=30) as a, client.put(x[:, ::2]) as b:
        listed = {h.id: h for h in client.list_handles(page_size=1)}  # a page per handle
        assert {a.id, b.id} <= set(listed)
        assert set(listed) == {h.id for h in client.list_handles()}  # every page read
        for h in (a, b):
            got = listed[h.id]
            assert (got.dtype, got.sizes, got.strides, got.byte_size, got.backend) == (
                h.handle.dtype, h.handle.sizes, h.handle.strides, h.handle.byte_size, "cpu"
            )
        assert a.handle.expires_unix_ms - a.handle.last_use_unix_ms == 30_000
        assert list(b.handle.strides) == [3, 2]
    ids = {h.id for h in client.list_handles()}
    assert a.id not in ids and b.id not in ids


def test_put_refusals(client: Client) -> None:
    x = np.zeros(3, dtype=np.float32)
    with pytest.raises(TensorOpError) as error:
        client.put(x, backend="opencl", device_index=1_000_000)
    assert error.value.code == "INVALID_ARGUMENT"
    assert error.value.message.startswith("header.device_index = 1000000 is outside [0, ")
    with pytest.raises(ValueError, match="backend is one of auto, cpu, opencl, not 'gpu'"):
        client.put(x, backend="gpu")


def test_a_tensor_put_on_opencl_stays_there_and_ops_run_where_it_is(client: Client) -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    with client.put(x, backend="opencl") as h:
        assert (h.handle.backend, h.handle.device_index) == ("opencl", 0)
        np.testing.assert_array_equal(h.fetch(), x)
        result = client.run("slice", {"input": h}, SLICE, [(2, 2)], backend="auto", keep=True)
        assert result.backend.startswith("opencl:")
        (kept,) = result.outputs
        assert kept.handle.backend == "opencl"
        np.testing.assert_array_equal(kept.fetch(strides=(4, 1)), x[0:3:2, 1:3])
        on_cpu = client.run("slice", {"input": h}, SLICE, [(2, 2)], backend="cpu")
        assert on_cpu.backend == "cpu"
        np.testing.assert_array_equal(on_cpu.outputs[0], x[0:3:2, 1:3])
        kept.release()


def test_async_client_handles(tensord: Tensord) -> None:
    x = np.arange(24, dtype=np.int16).reshape(4, 6)

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            async with await client.put(x[:, ::-1]) as h:  # reversed: packed
                assert isinstance(h, AsyncRemoteTensor) and h.strides == (6, 1)
                np.testing.assert_array_equal(await h.fetch(), x[:, ::-1])
                for call in (client.run, client.run_stream, client.run_chunked):
                    result = await call("slice", {"input": h}, SLICE, [(2, 2)], keep=True)
                    (kept,) = result.outputs
                    assert isinstance(kept, AsyncRemoteTensor)
                    padded = await kept.fetch(strides=(4, 1))
                    assert padded.strides == (8, 2) and padded.tolist() == [[4, 3], [16, 15]]
                    await kept.release()
                assert h.id in {listed.id for listed in await client.list_handles(page_size=1)}
            assert h.id not in {listed.id for listed in await client.list_handles()}
            with pytest.raises(TensorOpError) as error:
                await client.fetch(h.id)
            assert (error.value.code, error.value.message) == ("NOT_FOUND", f"id: {not_found(h)}")
            async with await client.put(x, backend="opencl") as on_device:
                assert on_device.handle.backend == "opencl"
                np.testing.assert_array_equal(await on_device.fetch(), x)

    asyncio.run(main())


def test_put_of_an_empty_tensor(client: Client) -> None:
    with client.put(np.zeros((0, 3), dtype=np.uint16)) as h:
        assert h.shape == (0, 3) and h.handle.byte_size == 0
        out = h.fetch()
    assert out.shape == (0, 3) and out.dtype == np.uint16
