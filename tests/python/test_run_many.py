"""run_many: many requests pipelined over one RunBidi stream, outcomes in request
order, a bad request failing alone; Client's and AsyncClient's alike."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Iterable, Iterator

import numpy as np
import pytest

from conftest import SMALL_CHUNK_BYTES, SMALL_MESSAGE_BYTES, Tensord
from tensorop_client import AsyncClient, Client, Result, TensorOpError, make_request
from tensorop_client.client import RequestLike

Outcome = Result | TensorOpError


def collect(address: str, requests: Iterable[RequestLike], window: int, asynchronous: bool,
            **options: int) -> list[Outcome]:
    """Every outcome of run_many, through Client or AsyncClient."""
    if not asynchronous:
        with Client(address, timeout=60, **options) as client:
            return list(client.run_many(requests, window=window))

    async def main() -> list[Outcome]:
        async with AsyncClient(address, timeout=60, **options) as client:
            return [outcome async for outcome in client.run_many(requests, window=window)]

    return asyncio.run(main())


def window_of(x: np.ndarray, start: int, size: int) -> tuple:
    """run's positional arguments for a slice of x[start:start+size]."""
    return ("slice", {"input": x}, {"offsets": [start], "window_sizes": [size],
                                    "window_strides": [1]}, [(size,)])


BAD = {
    "op": "slice",
    "inputs": {"input": np.zeros(4, np.uint8)},
    "attrs": {"offsets": [0], "window_sizes": [2], "window_strides": [0]},
    "outputs": [(2,)],
}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("window", [1, 3, 64])
def test_outcomes_come_in_request_order_and_a_bad_request_fails_alone(
    tensord: Tensord, window: int, asynchronous: bool
) -> None:
    x = np.arange(1000, dtype=np.int32)
    requests: list[RequestLike] = [window_of(x, i, 1 + i % 7) for i in range(40)]
    requests[17] = BAD
    # A ready RunRequest and a mapping of keyword arguments are requests too.
    requests[3] = make_request("strided_slice", {"input": x}, {"begin": [999], "end": [990],
                                                                "stride": [-3]})
    outcomes = collect(tensord.address, requests, window, asynchronous)
    assert len(outcomes) == 40
    for i, outcome in enumerate(outcomes):
        if i == 17:
            assert isinstance(outcome, TensorOpError)
            assert (outcome.code, outcome.message) == (
                "INVALID_ARGUMENT",
                "slice.window_strides[0] must not be 0",
            )
        elif i == 3:
            assert isinstance(outcome, Result)
            assert outcome.outputs[0].tolist() == [999, 996, 993]
        else:
            assert isinstance(outcome, Result), outcome
            np.testing.assert_array_equal(outcome.outputs[0], x[i : i + 1 + i % 7])


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_requests_over_the_message_limit_run_on_their_own_in_their_turn(
    tensord_small_messages: Tensord, asynchronous: bool
) -> None:
    small = np.arange(100, dtype=np.int64)
    large = np.arange(50_000, dtype=np.int64)  # 400 KB: over the 64 KiB limit
    requests = [
        window_of(small, 1, 2),
        window_of(large, 49_000, 3),  # input over the limit: RunChunked
        BAD,
        window_of(large, 0, 20_000),  # answer over the limit: streamed
        window_of(small, 5, 1),
    ]
    outcomes = collect(
        tensord_small_messages.address, requests, 2, asynchronous,
        max_message_bytes=SMALL_MESSAGE_BYTES, chunk_bytes=SMALL_CHUNK_BYTES,
    )
    assert [o.outputs[0].tolist() if isinstance(o, Result) else o.code for o in outcomes[:3]] == [
        [1, 2],
        [49_000, 49_001, 49_002],
        "INVALID_ARGUMENT",
    ]
    assert isinstance(outcomes[3], Result)
    np.testing.assert_array_equal(outcomes[3].outputs[0], large[:20_000])
    assert isinstance(outcomes[4], Result) and outcomes[4].outputs[0].tolist() == [5]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_requests_are_read_lazily_and_a_malformed_one_raises_in_its_turn(
    tensord: Tensord, asynchronous: bool
) -> None:
    x = np.arange(10, dtype=np.uint8)
    taken: list[int] = []

    def requests() -> Iterator[RequestLike]:
        for i in range(5):
            taken.append(i)
            yield window_of(x, i, 1)
        yield ("matmul", {"input": x})
        taken.append(99)  # never reached: nothing is read past the bad one
        yield window_of(x, 0, 1)

    got: list[Outcome] = []

    async def consume_async() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            async for outcome in client.run_many(requests(), window=2):
                got.append(outcome)

    with pytest.raises(ValueError, match="unknown operator 'matmul'"):
        if asynchronous:
            asyncio.run(consume_async())
        else:
            with Client(tensord.address, timeout=60) as client:
                for outcome in client.run_many(requests(), window=2):
                    got.append(outcome)
    assert [o.outputs[0].tolist() for o in got if isinstance(o, Result)] == [[i] for i in range(5)]
    assert len(got) == 5
    assert taken == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_no_requests_and_bad_windows(tensord: Tensord, asynchronous: bool) -> None:
    assert collect(tensord.address, [], 4, asynchronous) == []
    with pytest.raises(ValueError, match="window must be at least 1, got 0"):
        collect(tensord.address, [BAD], 0, asynchronous)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_unreachable_server_fails_the_sent_requests_and_raises(asynchronous: bool) -> None:
    x = np.zeros(4, np.uint8)
    got: list[Outcome] = []

    async def consume_async() -> None:
        async with AsyncClient("127.0.0.1:1", timeout=10) as client:
            async for outcome in client.run_many([window_of(x, 0, 1)] * 3, window=2):
                got.append(outcome)

    with pytest.raises(TensorOpError) as error:
        if asynchronous:
            asyncio.run(consume_async())
        else:
            with Client("127.0.0.1:1", timeout=10) as client:
                for outcome in client.run_many([window_of(x, 0, 1)] * 3, window=2):
                    got.append(outcome)
    # The requests in flight get the stream's error; the third was never sent
    # (the window held it back), so the iteration raises the error after them.
    assert error.value.code == "UNAVAILABLE"
    assert all(isinstance(o, TensorOpError) and o.code == "UNAVAILABLE" for o in got)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_window_bounds_the_requests_taken_ahead(tensord: Tensord, asynchronous: bool) -> None:
    x = np.arange(300, dtype=np.uint16)
    window = 2
    taken = 0

    def requests() -> Iterator[RequestLike]:
        nonlocal taken
        for i in range(300):
            taken += 1
            yield window_of(x, i, 1)

    ahead: list[int] = []  # requests taken when outcome i came out, minus i

    async def consume_async() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            async for outcome in client.run_many(requests(), window=window):
                ahead.append(taken - len(ahead))
                assert isinstance(outcome, Result)

    if asynchronous:
        asyncio.run(consume_async())
    else:
        with Client(tensord.address, timeout=60) as client:
            for outcome in client.run_many(requests(), window=window):
                ahead.append(taken - len(ahead))
                assert isinstance(outcome, Result)
    assert len(ahead) == 300
    # `window` sent and not yet handed out (an answer that overtakes a slow
    # request holds its slot until it is handed out), one more taken and
    # waiting for a slot, and, with the sync client's sender running beside
    # the caller, one more taken once the slot of the outcome handed out is free.
    assert max(ahead) <= window + 2


def test_requests_may_wait_for_earlier_outcomes(tensord: Tensord) -> None:
    # Each request is made from the previous outcome: the iterable is read on
    # gRPC's thread while outcomes are handed out here, neither waiting on the other.
    x = np.arange(10, dtype=np.int8)
    feedback: queue.Queue[int] = queue.Queue()
    feedback.put(0)

    def requests() -> Iterator[RequestLike]:
        for _ in range(5):
            yield window_of(x, feedback.get(timeout=30), 1)

    got = []
    with Client(tensord.address, timeout=60) as client:
        for outcome in client.run_many(requests(), window=4):
            assert isinstance(outcome, Result)
            got.append(int(outcome.outputs[0][0]))
            feedback.put(got[-1] + 2)
    assert got == [0, 2, 4, 6, 8]
