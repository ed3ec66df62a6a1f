"""tensorop_client.aio.AsyncClient: Client's calls for asyncio (grpc.aio).

    async with AsyncClient("127.0.0.1:50051") as client:
        result = await client.run("slice", {"input": x}, attrs, outputs=[(2, 2)])
        async for outcome in client.run_many(requests, window=32):
            ...

The same choice of call (Run, RunStream, RunChunked), the same results and
errors as Client; progress callbacks run on the event loop. Handles too:
`put` returns an AsyncRemoteTensor (`await h.fetch()`, `await h.release()`,
`async with`), and `run(..., keep=True)` returns them. Chains:
`await client.chain(steps, results)`, with Client.chain's Steps. The
operators' own methods (Client.split, strided_slice, slice,
scatter_elements, transpose, reshape, expand, broadcast_to, tile, take,
gather, take_along_axis, gather_elements, concatenate, join, pad) too:
`await client.split(x, 2)`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import nullcontext
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc
import numpy as np

from tensorop_client._core import gathers, joins, operators, pads, plans
from tensorop_client._core.chains import ChainResultLike, StepLike
from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.handles import HandleLike, _Remote
from tensorop_client._core.plans import Call, Plan, PlanRunner
from tensorop_client._core.progress import ProgressFn
from tensorop_client._core.requests import Attrs, OutputLike, RequestLike, _Prepared
from tensorop_client._core.results import Result
from tensorop_client._core.trace import (
    call_metadata,
    current_traceparent,
    metadata_of,
    traceparent,
)
from tensorop_client._core.window import _Window
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client._transport import (
    _cancelled_on_error,
    _public,
    _status_error,
    _Transport,
)
from tensorop_client.tensors import WireTensor

__all__ = [
    "AsyncClient",
    "AsyncRemoteTensor",
    "Attrs",
    "ChainResultLike",
    "HandleLike",
    "OutputLike",
    "ProgressFn",
    "RequestLike",
    "Result",
    "StepLike",
    "TensorOpError",
    "WireTensor",
]

P = ParamSpec("P")
T = TypeVar("T")


class AsyncRemoteTensor(_Remote):
    """RemoteTensor (tensorop_client.RemoteTensor) of an AsyncClient: `fetch` and
    `release` are coroutines, and `async with` releases it on leaving."""

    _client: AsyncClient

    async def fetch(
        self, strides: Sequence[int] | None = None, *, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """AsyncClient.fetch."""
        return await self._client.fetch(self, strides, progress=progress)

    async def release(self) -> None:
        """AsyncClient.release."""
        await self._client.release(self)

    async def __aenter__(self) -> AsyncRemoteTensor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


def _awaiting(
    plan: Callable[Concatenate[AsyncClient, P], Plan[T]], doc: str, returns: str | None = None
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """An AsyncClient method: a coroutine driving `plan` to its result
    (AsyncClient._drive)."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._drive(plan(self, *args, **kwargs))

    return _public(method, plan, doc, returns)


async def _sent(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A streamed request's parts as grpc.aio takes them."""
    for part in parts:
        yield part


class AsyncClient(_Transport[AsyncRemoteTensor]):
    """Client (tensorop_client.Client) for asyncio: the same options and calls,
    as coroutines; `run_many` is an async iterator. Create it inside a running
    event loop; close it with `await client.close()` or `async with`."""

    _grpc = grpc.aio

    def _ready(self, channel: grpc.aio.Channel) -> Callable[[], bool]:
        return lambda: channel.get_state(False) is grpc.ChannelConnectivity.READY

    async def close(self) -> None:
        """Closes the channels (the target's and every replica's). One never
        closed needs no finalizer of ours: a grpc.aio channel closes itself,
        without waiting, when it is garbage-collected (at exit too), and keeps
        no thread of its own alive (AsyncClient tracks replicas' connectivity
        with get_state, not a subscription)."""
        for calls in self._replicas.close():
            await calls.channel.close()
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    run = _awaiting(plans.run, "Client.run.")
    run_stream = _awaiting(plans.run_stream, "Client.run_stream.")
    run_chunked = _awaiting(plans.run_chunked, "Client.run_chunked.")
    run_request = _awaiting(plans.run_request, "Client.run_request.")
    run_stream_request = _awaiting(plans.run_stream_request, "Client.run_stream_request.")
    run_chunked_request = _awaiting(plans.run_chunked_request, "Client.run_chunked_request.")
    chain = _awaiting(plans.chain, "Client.chain (kept results are AsyncRemoteTensors).")
    chain_request = _awaiting(plans.chain_request, "Client.chain_request.")
    put = _awaiting(plans.put, "Client.put.", returns="AsyncRemoteTensor")
    fetch = _awaiting(plans.fetch, "Client.fetch.")
    release = _awaiting(plans.release, "Client.release.")
    list_handles = _awaiting(plans.list_handles, "Client.list_handles.")
    split = _awaiting(
        operators.split,
        "Client.split (kept parts are AsyncRemoteTensors).",
        returns="list[np.ndarray | AsyncRemoteTensor]",
    )
    strided_slice = _awaiting(
        operators.strided_slice, "Client.strided_slice.", "np.ndarray | AsyncRemoteTensor"
    )
    slice = _awaiting(operators.slice, "Client.slice.", "np.ndarray | AsyncRemoteTensor")
    scatter_elements = _awaiting(
        operators.scatter_elements, "Client.scatter_elements.", "np.ndarray | AsyncRemoteTensor"
    )
    transpose = _awaiting(
        operators.transpose, "Client.transpose.", "np.ndarray | AsyncRemoteTensor"
    )
    reshape = _awaiting(operators.reshape, "Client.reshape.", "np.ndarray | AsyncRemoteTensor")
    expand = _awaiting(operators.expand, "Client.expand.", "np.ndarray | AsyncRemoteTensor")
    broadcast_to = _awaiting(
        operators.broadcast_to, "Client.broadcast_to.", "np.ndarray | AsyncRemoteTensor"
    )
    tile = _awaiting(operators.tile, "Client.tile.", "np.ndarray | AsyncRemoteTensor")
    take = _awaiting(gathers.take, "Client.take.", "np.ndarray | AsyncRemoteTensor")
    gather = _awaiting(gathers.gather, "Client.gather.", "np.ndarray | AsyncRemoteTensor")
    take_along_axis = _awaiting(
        gathers.take_along_axis, "Client.take_along_axis.", "np.ndarray | AsyncRemoteTensor"
    )
    gather_elements = _awaiting(
        gathers.gather_elements, "Client.gather_elements.", "np.ndarray | AsyncRemoteTensor"
    )
    concatenate = _awaiting(
        joins.concatenate, "Client.concatenate.", "np.ndarray | AsyncRemoteTensor"
    )
    join = _awaiting(joins.join, "Client.join.", "np.ndarray | AsyncRemoteTensor")
    pad = _awaiting(pads.pad, "Client.pad.", "np.ndarray | AsyncRemoteTensor")

    def _remote(self, handle: pb.TensorHandle) -> AsyncRemoteTensor:
        return AsyncRemoteTensor(self, handle)

    async def _drive(self, plan: Plan[T]) -> T:
        """Makes the plan's calls one after another, awaiting each."""
        runner = PlanRunner(plan)
        for call in runner:
            try:
                runner.answer(await self._perform(call))
            except BaseException as e:  # noqa: BLE001 (thrown into the plan, which raises it)
                runner.fail(e)
        return runner.result

    async def _perform(self, call: Call) -> Any:
        """One call of a plan: its answer message, or its streamed answer
        reassembled (Call.answer)."""
        via = self._via(call.to)
        request = _sent(call.request) if isinstance(call.request, Iterator) else call.request
        with self._errors(via, call):
            started = getattr(via.calls, call.method)(
                request, timeout=self._timeout, metadata=call_metadata()
            )
            if call.answer is None:
                return await started
            with _cancelled_on_error(started):
                async for part in started:
                    call.answer.feed(part)
            return call.answer.result()

    def run_many(
        self, requests: Iterable[RequestLike], *, window: int = 16
    ) -> AsyncIterator[Result | TensorOpError]:
        """Client.run_many: outcomes in request order, at most `window`
        requests sent and not yet handed out. `requests` is a plain iterable,
        read on the loop. The stream carries the traceparent in force here,
        at the call (traceparent)."""
        return self._run_many(requests, window, current_traceparent())

    async def _run_many(
        self, requests: Iterable[RequestLike], window: int, trace: str | None
    ) -> AsyncIterator[Result | TensorOpError]:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        state = _Window(self, requests)
        slots = asyncio.Semaphore(window)
        call = self._calls.run_bidi(timeout=self._timeout, metadata=metadata_of(trace))

        async def write() -> None:
            try:
                while (item := state.next_to_send(nullcontext())) is not None:
                    await slots.acquire()
                    await call.write(item)
                await call.done_writing()
            except (grpc.RpcError, asyncio.InvalidStateError):
                pass  # the call is over; reading says why

        writer = asyncio.create_task(write())
        try:
            while True:
                while (ready := state.pop_ready()) is not None:
                    if ready.local is not None:
                        yield await self._local(ready.local, trace)
                        continue
                    slots.release()  # once handed out (Client.run_many)
                    yield ready.outcome()
                try:
                    raw = await call.read()
                except grpc.RpcError as e:
                    state.fail(_status_error(e, self._tls))
                    break
                if raw is grpc.aio.EOF:
                    break
                if not state.answer(raw):
                    call.cancel()
                    break
            if not writer.done():
                writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
            state.end()
            while (ready := state.pop_ready()) is not None:
                yield (
                    ready.outcome()
                    if ready.local is None
                    else await self._local(ready.local, trace)
                )
            state.raise_if_unfinished()
        finally:
            writer.cancel()
            call.cancel()

    async def _local(self, prepared: _Prepared, trace: str | None) -> Result | TensorOpError:
        try:
            with traceparent(trace):  # run_many's, wherever it is iterated
                return await self._drive(plans.run_prepared(self, prepared, None))
        except TensorOpError as e:
            return e
