"""W3C Trace Context through the Python client (tensorop_client.traceparent):
the context variable and the metadata it makes, without a server; every call
of Client and AsyncClient carrying it (recorded on the client's channel); and
the real tensord joining the trace: its request log line for the call names
the trace, its own span and ours as the parent, and its answer's initial
metadata carries its span. Untraced and malformed: no trace fields."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import numpy as np
import pytest

import tensorop_client
from conftest import SMALL_CHUNK_BYTES, SMALL_MESSAGE_BYTES, Tensord
from tensorop_client import AsyncClient, Client, Step, make_request, new_traceparent, traceparent
from tensorop_client._core.trace import call_metadata, current_traceparent
from tensorop_client._proto import tensorop_pb2_grpc as pb_grpc
from tensorop_client._transport import _Transport
from tensorop_client.shared_memory import SharedRegion, shared_memory_status

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
TP = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
TRACE_FIELDS = ("trace_id", "span_id", "parent_span_id")
SPAN = re.compile(r"^[0-9a-f]{16}$")

X = np.arange(16, dtype=np.float32).reshape(4, 4)
ATTRS = {"offsets": [0, 0], "window_sizes": [4, 4], "window_strides": [2, 2]}
EXPECTED = np.array([[0, 2], [8, 10]], dtype=np.float32)


def span_parent(k: int) -> str:
    """A parent span id of our own per call, to find each call's log line."""
    return f"{k:016x}"


def request(request_id: str) -> Any:
    """A RunRequest with an id of its own: its log line is the one with that id."""
    r = make_request("slice", {"input": X}, ATTRS, outputs=[(2, 2)])
    r.id = request_id
    return r


def log_lines(server: Tensord) -> list[dict[str, Any]]:
    lines = []
    for text in server.log.read_text().splitlines():
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict) and "method" in line:
            lines.append(line)
    return lines


def wait_for_lines(
    server: Tensord, wanted: Callable[[dict[str, Any]], bool], count: int = 1
) -> list[dict[str, Any]]:
    """The request log lines `wanted` picks, once there are `count` of them: the
    log is written by a thread of its own after the answer, so wait (bounded)."""
    deadline = time.monotonic() + 30
    while True:
        found = [line for line in log_lines(server) if wanted(line)]
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) == count, f"{len(found)} lines, wanted {count}: {found}"
            return found
        time.sleep(0.05)


def line_with_id(server: Tensord, request_id: str) -> dict[str, Any]:
    (line,) = wait_for_lines(server, lambda line: line.get("id") == request_id)
    return line


def assert_joined(line: dict[str, Any], parent: str = PARENT_SPAN_ID) -> None:
    assert line["status"] == "OK"
    assert line["trace_id"] == TRACE_ID
    assert line["parent_span_id"] == parent
    # tensord's own span: fresh, 16 lowercase hex digits, not ours.
    assert SPAN.match(line["span_id"]) and line["span_id"] not in (parent, "0" * 16)


def assert_untraced(line: dict[str, Any]) -> None:
    assert line["status"] == "OK"
    assert [f for f in TRACE_FIELDS if f in line] == []


# ---- the context, without a server ------------------------------------------


def test_the_context_sets_nests_and_restores() -> None:
    assert current_traceparent() is None and call_metadata() is None
    other = f"00-{TRACE_ID}-{span_parent(1)}-00"
    with traceparent(TP) as value:
        assert value == TP
        assert call_metadata() == (("traceparent", TP),)
        with traceparent(other):
            assert call_metadata() == (("traceparent", other),)
            with traceparent(None):
                assert call_metadata() is None
            assert call_metadata() == (("traceparent", other),)
        assert call_metadata() == (("traceparent", TP),)
    assert current_traceparent() is None and call_metadata() is None


def test_the_context_is_restored_when_the_block_raises() -> None:
    with pytest.raises(KeyError), traceparent(TP):
        raise KeyError("x")
    assert call_metadata() is None


def test_values_grpc_cannot_send_are_refused_before_the_block() -> None:
    with pytest.raises(ValueError, match="printable ASCII"), traceparent(f"{TP}\n"):
        pytest.fail("the block ran")
    with pytest.raises(TypeError, match="str, not bytes"), traceparent(TP.encode()):  # type: ignore[arg-type]
        pytest.fail("the block ran")
    assert call_metadata() is None


def test_each_asyncio_task_has_its_own() -> None:
    async def traced(value: str) -> str | None:
        with traceparent(value):
            await asyncio.sleep(0.01)  # the other task sets its own meanwhile
            return current_traceparent()

    async def main() -> tuple[list[str | None], str | None]:
        a, b = f"00-{TRACE_ID}-{span_parent(1)}-01", f"00-{TRACE_ID}-{span_parent(2)}-01"
        got = await asyncio.gather(traced(a), traced(b))
        return [*got, a, b], current_traceparent()

    (got_a, got_b, a, b), after = asyncio.run(main())
    assert (got_a, got_b, after) == (a, b, None)


def test_new_traceparent_is_a_fresh_sampled_version_00() -> None:
    made = {new_traceparent() for _ in range(100)}
    assert len(made) == 100
    for value in made:
        assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", value), value
        _, trace_id, span_id, _ = value.split("-")
        assert trace_id != "0" * 32 and span_id != "0" * 16


def test_exported() -> None:
    assert tensorop_client.traceparent is traceparent
    assert tensorop_client.new_traceparent is new_traceparent
    assert {"traceparent", "new_traceparent"} <= set(tensorop_client.__all__)


# ---- every call carries it: recorded on the client's channel ----------------


class Recorder(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Each call's method and traceparent metadata, as the channel sends them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def record(self, details: grpc.ClientCallDetails) -> None:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        sent = [v for k, v in details.metadata or () if k == "traceparent"]
        self.calls.append((method.rsplit("/", 1)[-1], sent))

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self.record(details)
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self.record(details)
        return continuation(details, request)

    def intercept_stream_unary(self, continuation, details, requests):  # type: ignore[no-untyped-def]
        self.record(details)
        return continuation(details, requests)

    def intercept_stream_stream(self, continuation, details, requests):  # type: ignore[no-untyped-def]
        self.record(details)
        return continuation(details, requests)


class AsyncRecorder:
    """Recorder for grpc.aio, whose channels take one kind of call from each
    interceptor: one interceptor per kind, recording into one list."""

    def __init__(self) -> None:
        self.sync = Recorder()
        self.calls = self.sync.calls
        record = self.sync.record

        class UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
            async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
                record(details)
                return await continuation(details, request)

        class UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
            async def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
                record(details)
                return await continuation(details, request)

        class StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
            async def intercept_stream_unary(self, continuation, details, requests):  # type: ignore[no-untyped-def]
                record(details)
                return await continuation(details, requests)

        class StreamStream(grpc.aio.StreamStreamClientInterceptor):
            async def intercept_stream_stream(self, continuation, details, requests):  # type: ignore[no-untyped-def]
                record(details)
                return await continuation(details, requests)

        self.interceptors = [UnaryUnary(), UnaryStream(), StreamUnary(), StreamStream()]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Client's channels, recorded."""
    recorder = Recorder()
    opened = _Transport._open

    def record(self: _Transport[Any], target: str, options: list[tuple[str, Any]]) -> Any:
        return grpc.intercept_channel(opened(self, target, options), recorder)

    monkeypatch.setattr(Client, "_open", record)
    yield recorder


@pytest.fixture
def async_recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[AsyncRecorder]:
    """AsyncClient's channels, recorded."""
    recorder = AsyncRecorder()

    def record(self: _Transport[Any], target: str, options: list[tuple[str, Any]]) -> Any:
        assert self._credentials is None
        return grpc.aio.insecure_channel(
            target, options=options, interceptors=recorder.interceptors
        )

    monkeypatch.setattr(AsyncClient, "_open", record)
    yield recorder


# The calls the sequences below make, in order.
EVERY_CALL = [
    "Run", "RunStream", "RunChunked", "Put", "Fetch", "ListHandles", "Run", "Release",
    "RunChain", "RunBidi",
]


def sync_calls(client: Client) -> None:
    for call in ("run", "run_stream", "run_chunked"):
        out = getattr(client, call)("slice", {"input": X}, ATTRS, outputs=[(2, 2)]).outputs[0]
        np.testing.assert_array_equal(out, EXPECTED)
    h = client.put(X)
    np.testing.assert_array_equal(h.fetch(), X)
    assert h.id in {x.id for x in client.list_handles()}
    client.run("slice", {"input": h}, ATTRS, outputs=[(2, 2)])
    h.release()
    client.chain([Step("slice", {"input": X}, ATTRS, outputs=[(2, 2)])])
    (outcome,) = client.run_many([("slice", {"input": X}, ATTRS, [(2, 2)])])
    np.testing.assert_array_equal(outcome.outputs[0], EXPECTED)  # type: ignore[union-attr]


async def async_calls(client: AsyncClient) -> None:
    for call in ("run", "run_stream", "run_chunked"):
        result = await getattr(client, call)("slice", {"input": X}, ATTRS, outputs=[(2, 2)])
        np.testing.assert_array_equal(result.outputs[0], EXPECTED)
    h = await client.put(X)
    np.testing.assert_array_equal(await h.fetch(), X)
    assert h.id in {x.id for x in await client.list_handles()}
    await client.run("slice", {"input": h}, ATTRS, outputs=[(2, 2)])
    await h.release()
    await client.chain([Step("slice", {"input": X}, ATTRS, outputs=[(2, 2)])])
    outcomes = [o async for o in client.run_many([("slice", {"input": X}, ATTRS, [(2, 2)])])]
    np.testing.assert_array_equal(outcomes[0].outputs[0], EXPECTED)  # type: ignore[union-attr]


def test_every_client_call_sends_it(tensord: Tensord, recorded: Recorder) -> None:
    with Client(tensord.address, timeout=60) as client:
        with traceparent(TP):
            sync_calls(client)
            with SharedRegion(client, "trace-region", 4096) as region:
                shared_memory_status(client)
                y = region.ndarray((2, 2), np.float32, offset=256)
                region.run("slice", {"input": region.ndarray((4, 4), np.float32)}, ATTRS, [y])
        traced = list(recorded.calls)
        recorded.calls.clear()
        sync_calls(client)  # outside: none
    shared = ["RegisterSharedMemory", "SharedMemoryStatus", "Run", "UnregisterSharedMemory"]
    assert traced == [(method, [TP]) for method in EVERY_CALL + shared]
    assert recorded.calls == [(method, []) for method in EVERY_CALL]


def test_every_async_client_call_sends_it(
    tensord: Tensord, async_recorded: AsyncRecorder
) -> None:
    async def main() -> list[tuple[str, list[str]]]:
        async with AsyncClient(tensord.address, timeout=60) as client:
            with traceparent(TP):
                await async_calls(client)
            traced = list(async_recorded.calls)
            async_recorded.calls.clear()
            await async_calls(client)
            return traced

    traced = asyncio.run(main())
    assert traced == [(method, [TP]) for method in EVERY_CALL]
    assert async_recorded.calls == [(method, []) for method in EVERY_CALL]


def test_run_many_carries_the_traceparent_of_its_call(
    tensord_small_messages: Tensord, recorded: Recorder
) -> None:
    """The stream is started on the first next(), outside the block here, and
    a request too large for the stream runs through `run` in its turn: both
    carry the traceparent in force when run_many was called."""
    big = np.zeros(1 << 15, dtype=np.float32)  # 128 KiB: over the 64 KiB limit
    whole = {"offsets": [0], "window_sizes": [1 << 15], "window_strides": [1]}
    small = ("slice", {"input": X}, ATTRS, [(2, 2)])
    large = ("slice", {"input": big}, whole, [(1 << 15,)])
    with Client(
        tensord_small_messages.address,
        timeout=60,
        max_message_bytes=SMALL_MESSAGE_BYTES,
        chunk_bytes=SMALL_CHUNK_BYTES,
    ) as client:
        with traceparent(TP):
            outcomes = client.run_many([small, large])
        got = list(outcomes)
    assert [type(o).__name__ for o in got] == ["Result", "Result"], got
    assert recorded.calls[0] == ("RunBidi", [TP])
    assert len(recorded.calls) > 1 and all(sent == [TP] for _, sent in recorded.calls)


def test_async_run_many_carries_the_traceparent_of_its_call(
    tensord: Tensord, async_recorded: AsyncRecorder
) -> None:
    async def main() -> list[Any]:
        async with AsyncClient(tensord.address, timeout=60) as client:
            with traceparent(TP):
                outcomes = client.run_many([("slice", {"input": X}, ATTRS, [(2, 2)])])
            return [o async for o in outcomes]  # iterated outside the block

    (outcome,) = asyncio.run(main())
    np.testing.assert_array_equal(outcome.outputs[0], EXPECTED)
    assert async_recorded.calls == [("RunBidi", [TP])]


# ---- tensord joins the trace -------------------------------------------------


def test_sync_run_inside_traceparent_joins_the_trace(tensord: Tensord, client: Client) -> None:
    with traceparent(TP):
        result = client.run_request(request("trace-sync-run"))
    np.testing.assert_array_equal(result.outputs[0], EXPECTED)
    line = line_with_id(tensord, "trace-sync-run")
    assert line["method"] == "Run"
    assert_joined(line)


def test_async_run_inside_traceparent_joins_the_trace(tensord: Tensord) -> None:
    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            with traceparent(TP):
                result = await client.run_request(request("trace-async-run"))
            np.testing.assert_array_equal(result.outputs[0], EXPECTED)
            # Concurrent tasks, each in a trace of its own (span_parent(k)).

            async def traced(k: int) -> None:
                with traceparent(f"00-{TRACE_ID}-{span_parent(k)}-01"):
                    await asyncio.sleep(0)
                    await client.run_request(request(f"trace-async-task-{k}"))

            await asyncio.gather(*(traced(k) for k in range(1, 9)))

    asyncio.run(main())
    line = line_with_id(tensord, "trace-async-run")
    assert line["method"] == "Run"
    assert_joined(line)
    for k in range(1, 9):
        assert_joined(line_with_id(tensord, f"trace-async-task-{k}"), span_parent(k))


def test_every_logged_method_joins_the_trace(tensord: Tensord, client: Client) -> None:
    """Each call in a span of its own (parent span ids 0x101...): its log line
    names it."""
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("Run", lambda: client.run("slice", {"input": X}, ATTRS, outputs=[(2, 2)])),
        ("RunStream", lambda: client.run_stream("slice", {"input": X}, ATTRS, outputs=[(2, 2)])),
        ("RunChunked", lambda: client.run_chunked("slice", {"input": X}, ATTRS, outputs=[(2, 2)])),
        ("RunChain", lambda: client.chain([Step("slice", {"input": X}, ATTRS, outputs=[(2, 2)])])),
        ("RunBidi", lambda: list(client.run_many([("slice", {"input": X}, ATTRS, [(2, 2)])]))),
    ]
    for k, (_, call) in enumerate(calls, start=0x101):
        with traceparent(f"00-{TRACE_ID}-{span_parent(k)}-01"):
            call()
    with traceparent(f"00-{TRACE_ID}-{span_parent(0x1E0)}-01"):
        h = client.put(X)
    try:
        with traceparent(f"00-{TRACE_ID}-{span_parent(0x1F0)}-01"):
            h.fetch()
    finally:
        h.release()
    expected = [(method, k) for k, (method, _) in enumerate(calls, start=0x101)]
    expected += [("Put", 0x1E0), ("Fetch", 0x1F0)]
    for method, k in expected:
        (line,) = wait_for_lines(
            tensord, lambda line, k=k: line.get("parent_span_id") == span_parent(k)
        )
        assert line["method"] == method
        assert_joined(line, span_parent(k))


def test_tensord_answers_its_span_in_initial_metadata(tensord: Tensord) -> None:
    with grpc.insecure_channel(tensord.address) as channel:
        _, call = pb_grpc.TensorOpStub(channel).Run.with_call(
            request("trace-answer"), metadata=[("traceparent", TP)], timeout=60
        )
    answered = dict(call.initial_metadata())["traceparent"]
    line = line_with_id(tensord, "trace-answer")
    assert_joined(line)
    assert answered == f"00-{TRACE_ID}-{line['span_id']}-01"


def test_calls_outside_the_block_join_no_trace(tensord: Tensord, client: Client) -> None:
    client.run_request(request("trace-before"))
    with traceparent(TP):
        client.run_request(request("trace-inside"))
    client.run_request(request("trace-after"))
    assert_untraced(line_with_id(tensord, "trace-before"))
    assert_joined(line_with_id(tensord, "trace-inside"))
    assert_untraced(line_with_id(tensord, "trace-after"))


MALFORMED = {
    "garbage": "garbage",
    "short_trace_id": f"00-{TRACE_ID[:-1]}-{PARENT_SPAN_ID}-01",
    "uppercase": f"00-{TRACE_ID.upper()}-{PARENT_SPAN_ID}-01",
    "zero_trace_id": f"00-{'0' * 32}-{PARENT_SPAN_ID}-01",
    "zero_span_id": f"00-{TRACE_ID}-{'0' * 16}-01",
    "version_ff": f"ff-{TRACE_ID}-{PARENT_SPAN_ID}-01",
    "empty": "",
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_traceparent_is_harmless(tensord: Tensord, client: Client, name: str) -> None:
    with traceparent(MALFORMED[name]):
        result = client.run_request(request(f"trace-malformed-{name}"))

        async def run_async() -> Any:
            async with AsyncClient(tensord.address, timeout=60) as aclient:
                return await aclient.run_request(request(f"trace-malformed-async-{name}"))

        async_result = asyncio.run(run_async())
    np.testing.assert_array_equal(result.outputs[0], EXPECTED)
    np.testing.assert_array_equal(async_result.outputs[0], EXPECTED)
    assert_untraced(line_with_id(tensord, f"trace-malformed-{name}"))
    assert_untraced(line_with_id(tensord, f"trace-malformed-async-{name}"))
