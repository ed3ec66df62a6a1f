"""AsyncClient (grpc.aio) against the real tensord: every public case and every
bfloat16 and bool case through each of its calls on both backends, bfloat16 and bool
arrays bit for bit, tensors over the message limit, errors, and calls running
concurrently on one channel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import SMALL_CHUNK_BYTES, SMALL_MESSAGE_BYTES, Tensord
from tensorop_client import AsyncClient, Result, TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.case_compare import find_mismatch
from tensorop_client.cases import load_cases
from tensorop_client.client import BACKENDS


@pytest.mark.parametrize("call", ["run_request", "run_stream_request", "run_chunked_request"])
@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_every_public_case_passes(
    tensord: Tensord,
    cases_dir: Path,
    case_count: int,
    dtype_cases: Path,
    dtype_case_count: int,
    backend: str,
    call: str,
) -> None:
    cases = [loaded.case for path in (cases_dir, dtype_cases) for loaded in load_cases(path)]
    assert None not in cases and len(cases) == case_count + dtype_case_count

    async def run_all() -> list[str]:
        failures = []
        async with AsyncClient(tensord.address, timeout=60) as client:
            for case in cases:
                assert case is not None
                request = pb.RunRequest()
                request.CopyFrom(case.request)
                request.backend = BACKENDS[backend]  # type: ignore[assignment]
                got: Result | TensorOpError
                try:
                    got = await getattr(client, call)(request)
                except TensorOpError as e:
                    got = e
                mismatch = find_mismatch(case, got)
                if mismatch is not None:
                    failures.append(f"{case.name}: {mismatch}")
        return failures

    assert asyncio.run(run_all()) == []


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_bfloat16_and_bool_arrays_round_trip_bit_for_bit(tensord: Tensord, backend: str) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)  # every pattern: NaN payloads, -0.0, infs
    halves = bits.view(ml_dtypes.bfloat16).reshape(256, 256)
    flags = np.frombuffer(bytes([1, 0, 0, 1, 2, 255]), dtype=np.bool_).reshape(2, 3)

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            for call in (client.run, client.run_stream, client.run_chunked):
                result = await call(
                    "slice",
                    {"input": halves[::2, 1::3]},  # strided view: element strides (512, 3)
                    {"offsets": [0, 0], "window_sizes": [128, 85], "window_strides": [-1, 1]},
                    outputs=[(128, 85)],
                    backend=backend,
                )
                (out,) = result.outputs
                assert out.dtype == np.dtype(ml_dtypes.bfloat16)
                np.testing.assert_array_equal(
                    out.view(np.uint16), bits.reshape(256, 256)[::2, 1::3][::-1]
                )
                result = await call(
                    "split", {"input": flags.T}, {"axis": 1}, outputs=[(3, 1), (3, 1)],
                    backend=backend,
                )
                assert [o.dtype for o in result.outputs] == [np.bool_, np.bool_]
                assert [o.view(np.uint8).tolist() for o in result.outputs] == [
                    [[1], [0], [0]],
                    [[1], [2], [255]],
                ]

    asyncio.run(main())


def test_tensors_over_the_limit_both_ways_with_progress(tensord_small_messages: Tensord) -> None:
    x = np.arange(60_000, dtype=np.uint32)  # 240000 bytes up, 160000 down
    seen: list[tuple[int, int]] = []

    async def main() -> Result:
        async with AsyncClient(
            tensord_small_messages.address,
            timeout=60,
            max_message_bytes=SMALL_MESSAGE_BYTES,
            chunk_bytes=SMALL_CHUNK_BYTES,
        ) as client:
            return await client.run(
                "slice",
                {"input": x},
                {"offsets": [20_000], "window_sizes": [40_000], "window_strides": [-1]},
                outputs=[(40_000,)],
                progress=lambda done, total: seen.append((done, total)),
            )

    result = asyncio.run(main())
    np.testing.assert_array_equal(result.outputs[0], x[59_999:19_999:-1])
    assert not result.outputs[0].flags.writeable
    assert seen[0] == (0, 400_000) and seen[-1] == (400_000, 400_000)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert {t for _, t in seen} == {400_000}  # the whole total from the first report


def test_errors_and_concurrent_calls(tensord: Tensord) -> None:
    x = np.arange(100, dtype=np.int16)

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            results = await asyncio.gather(
                *(
                    client.run(
                        "slice",
                        {"input": x},
                        {"offsets": [i], "window_sizes": [3], "window_strides": [1]},
                        outputs=[(3,)],
                    )
                    for i in range(20)
                )
            )
            got = [r.outputs[0].tolist() for r in results]
            assert got == [[i, i + 1, i + 2] for i in range(20)]
            for call in (client.run, client.run_stream, client.run_chunked):
                with pytest.raises(TensorOpError) as error:
                    await call(
                        "slice",
                        {"input": x},
                        {"offsets": [0], "window_sizes": [3], "window_strides": [0]},
                        outputs=[(3,)],
                    )
                assert (error.value.code, error.value.message) == (
                    "INVALID_ARGUMENT",
                    "slice.window_strides[0] must not be 0",
                )
        async with AsyncClient("127.0.0.1:1", timeout=10) as client:
            with pytest.raises(TensorOpError) as error:
                await client.run("split", {"input": x}, {"axis": 0}, outputs=[(100,)])
            assert error.value.code == "UNAVAILABLE"

    asyncio.run(main())


def test_an_unknown_attribute_is_answered_with_the_valid_ones(tensord: Tensord) -> None:
    x = np.zeros(4, dtype=np.uint8)

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            for call in (client.run, client.run_stream, client.run_chunked):
                with pytest.raises(
                    ValueError,
                    match=r"attrs\.offset: not an attribute of slice; its attributes are offsets, "
                    r"window_sizes, window_strides$",
                ):
                    await call("slice", {"input": x}, {"offset": [0]}, outputs=[(2,)])

    asyncio.run(main())


def test_a_negative_axis_counts_from_the_end_as_in_numpy(tensord: Tensord) -> None:
    x = np.arange(8, dtype=np.int32).reshape(2, 4)

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            for call in (client.run, client.run_stream, client.run_chunked):
                result = await call("split", {"input": x}, {"axis": -1}, outputs=[(2, 1), (2, 3)])
                expected = np.split(x, [1], axis=-1)
                assert [o.tolist() for o in result.outputs] == [e.tolist() for e in expected]

    asyncio.run(main())
