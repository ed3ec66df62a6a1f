"""tensorop_client.aio.AsyncClient: Client's calls for asyncio (grpc.aio).

    async with AsyncClient("127.0.0.1:50051") as client:
        result = await client.run("slice", {"input": x}, attrs, outputs=[(2, 2)])
        async for outcome in client.run_many(requests, window=32):
            ...

The same choice of call (Run, RunStream, RunChunked), the same results and
errors as Client; progress callbacks run on the event loop. Handles too:
`put` returns an AsyncRemoteTensor (`await h.fetch()`, `await h.release()`,
`async with`), and `run(..., keep=True)` returns them. Chains:
`await client.chain(steps, results)`, with Client.chain's Steps.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import nullcontext
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.client import (
    Attrs,
    ChainResultLike,
    HandleLike,
    OutputLike,
    ProgressFn,
    RequestLike,
    Result,
    StepLike,
    TensorOpError,
    _Assembler,
    _by_replica,
    _Calls,
    _chain_reads,
    _ClientBase,
    _chunks_within,
    _counted,
    _fetch_request,
    _fetched,
    _next_page_token,
    _Prepared,
    _PreparedChain,
    _Remote,
    _replica_read,
    _prepare,
    _prepare_chain,
    _prepare_request,
    _Progress,
    _result_from_response,
    _Route,
    _smaller_limit,
    _status_error,
    _tensor_reads,
    _too_big,
    _fallback_chunk_bytes,
    _Via,
    _Window,
)
from tensorop_client.tensors import WireTensor
from tensorop_client.wire import chain_request_meta


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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.release()


class AsyncClient(_ClientBase):
    """Client (tensorop_client.Client) for asyncio: the same options and calls,
    as coroutines; `run_many` is an async iterator. Create it inside a running
    event loop; close it with `await client.close()` or `async with`."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float | None = 600.0,
        max_message_bytes: int = 64 << 20,
        chunk_bytes: int = 1 << 20,
        stream_threshold_bytes: int = 8 << 20,
        tls: bool = False,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        token_file: str | None = None,
    ) -> None:
        super().__init__(
            target,
            timeout,
            max_message_bytes,
            chunk_bytes,
            stream_threshold_bytes,
            {
                "tls": tls,
                "ca_file": ca_file,
                "cert_file": cert_file,
                "key_file": key_file,
                "token_file": token_file,
            },
        )
        self._channel = self._open(self._target, self._options)
        self._calls = _Calls(self._channel)

    def _open(self, target: str, options: list[tuple[str, Any]]) -> grpc.aio.Channel:
        if self._credentials is None:
            return grpc.aio.insecure_channel(target, options=options)
        return grpc.aio.secure_channel(target, self._credentials, options=options)

    def _main(self) -> _Calls:
        return self._calls

    def _replica_calls(self, replica: str) -> _Calls:
        channel = self._open(replica, self._replica_options)
        return _Calls(
            channel, lambda: channel.get_state(False) is grpc.ChannelConnectivity.READY
        )

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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def run(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """Client.run."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return await self._call(prepared, progress)

    async def run_stream(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """Client.run_stream."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return await self._call(prepared, progress, stream=True)

    async def run_chunked(
        self,
        op: str,
        inputs: Mapping[str, npt.ArrayLike | _Remote],
        attrs: Attrs | None = None,
        outputs: Sequence[OutputLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
        keep: bool = False,
    ) -> Result:
        """Client.run_chunked."""
        prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
        return await self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    async def run_request(
        self, request: pb.RunRequest, *, progress: ProgressFn | None = None
    ) -> Result:
        """Client.run_request."""
        return await self._call(_prepare_request(request), progress)

    async def run_stream_request(
        self, request: pb.RunRequest, *, progress: ProgressFn | None = None
    ) -> Result:
        """Client.run_stream_request."""
        return await self._call(_prepare_request(request), progress, stream=True)

    async def run_chunked_request(
        self,
        request: pb.RunRequest,
        *,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
    ) -> Result:
        """Client.run_chunked_request."""
        prepared = _prepare_request(request)
        return await self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    async def chain(
        self,
        steps: Sequence[StepLike],
        results: Sequence[ChainResultLike] | None = None,
        backend: str = "auto",
        device_index: int | None = None,
        *,
        id: str = "",
        progress: ProgressFn | None = None,
        keep: bool = False,
    ) -> Result:
        """Client.chain (kept results are AsyncRemoteTensors)."""
        prepared = _prepare_chain(steps, results, backend, device_index, id, keep)
        return await self._chain(prepared, progress)

    async def chain_request(
        self, request: pb.RunChainRequest, *, progress: ProgressFn | None = None
    ) -> Result:
        """Client.chain_request."""
        return await self._chain(_PreparedChain(*chain_request_meta(request)), progress)

    async def _chain(self, prepared: _PreparedChain, progress: ProgressFn | None) -> Result:
        """Client._chain."""
        counter = _Progress(progress, prepared.data_bytes)
        made: list[AsyncRemoteTensor] = []  # inputs Put to fit the message limit
        limit = self._max_message_bytes
        try:
            while True:
                while (key := prepared.next_to_put(limit)) is not None:
                    chunk_bytes = _chunks_within(limit, self._chunk_bytes)
                    beside = _replica_read(_chain_reads(prepared.header))
                    made.append(
                        await self.put(
                            prepared.wire(key),
                            chunk_bytes=chunk_bytes,
                            replica=beside.replica if beside is not None else None,
                        )
                    )
                    counter.add(done=prepared.refer(key, made[-1].handle))
                via = self._via_handle(_replica_read(_chain_reads(prepared.header)))
                call = via.calls.run_chain(prepared.payload(), timeout=self._timeout)
                try:
                    return await self._read(
                        call, _Progress(progress, counter.total, counter.total), via
                    )
                except TensorOpError as e:
                    smaller = _smaller_limit(e, limit)
                    if smaller is None:
                        raise
                    limit = smaller
        finally:
            with contextlib.suppress(TensorOpError):  # else they expire
                await self.release(made)

    async def put(
        self,
        array: npt.ArrayLike | WireTensor,
        backend: str = "cpu",
        ttl_seconds: int = 0,
        *,
        device_index: int | None = None,
        progress: ProgressFn | None = None,
        chunk_bytes: int | None = None,
        replica: str | None = None,
    ) -> AsyncRemoteTensor:
        """Client.put."""
        chunks, data_bytes = self._put_parts(
            array, backend, ttl_seconds, device_index, chunk_bytes
        )
        via = self._via(replica or "")
        failed: list[Exception] = []  # the progress callback's, raised to the caller

        async def send() -> AsyncIterator[bytes]:
            for part in _counted(chunks, _Progress(progress, data_bytes), failed):
                yield part

        try:
            handle = await via.calls.put(send(), timeout=self._timeout)
        except (grpc.RpcError, asyncio.CancelledError) as e:
            # grpc.aio ends a call whose request iterator raised as cancelled.
            if failed:
                raise failed[0] from None
            if isinstance(e, grpc.RpcError):
                raise _status_error(e, self._tls, via) from None
            raise
        return AsyncRemoteTensor(self, handle)

    async def fetch(
        self,
        tensor: HandleLike,
        strides: Sequence[int] | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Client.fetch."""
        via = self._via_handle(tensor.handle if isinstance(tensor, _Remote) else None)
        call = via.calls.fetch(_fetch_request(tensor, strides), timeout=self._timeout)
        return _fetched(await self._read(call, _Progress(progress), via))

    async def release(self, tensors: HandleLike | Iterable[HandleLike]) -> None:
        """Client.release."""
        errors: list[TensorOpError] = []
        for replica, ids in _by_replica(tensors).items():
            via = self._via(replica, ids[0])
            try:
                await self._unary(via.calls.stub.Release, pb.ReleaseRequest(ids=ids), via)
            except TensorOpError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    async def list_handles(self, page_size: int = 0) -> list[pb.TensorHandle]:
        """Client.list_handles."""
        handles: list[pb.TensorHandle] = []
        token = ""
        while True:
            request = pb.ListHandlesRequest(page_size=page_size, page_token=token)
            page = await self._unary(self._calls.stub.ListHandles, request)
            handles.extend(page.handles)
            token = _next_page_token(page, token)
            if not token:
                return handles

    async def _unary(self, method: Any, request: Any, via: _Via | None = None) -> Any:
        try:
            return await method(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls, via) from None

    def _remote(self, handle: pb.TensorHandle) -> AsyncRemoteTensor:
        return AsyncRemoteTensor(self, handle)

    async def run_many(
        self, requests: Iterable[RequestLike], *, window: int = 16
    ) -> AsyncIterator[Result | TensorOpError]:
        """Client.run_many: outcomes in request order, at most `window`
        requests sent and not yet handed out. `requests` is a plain iterable,
        read on the loop."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        state = _Window(self, requests)
        slots = asyncio.Semaphore(window)
        call = self._calls.run_bidi(timeout=self._timeout)

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
                        yield await self._local(ready.local)
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
                yield ready.outcome() if ready.local is None else await self._local(ready.local)
            state.raise_if_unfinished()
        finally:
            writer.cancel()
            call.cancel()

    async def _local(self, prepared: _Prepared) -> Result | TensorOpError:
        try:
            return await self._call(prepared, None)
        except TensorOpError as e:
            return e

    async def _call(
        self, prepared: _Prepared, progress: ProgressFn | None, stream: bool = False
    ) -> Result:
        via = self._via_handle(_replica_read(_tensor_reads(prepared.header.inputs)))
        pieces, request_bytes = prepared.pieces()
        route = self._route(prepared, request_bytes, stream)
        counter = _Progress(progress, prepared.data_bytes)
        if route is _Route.CHUNKED:
            del pieces
            return await self._chunked(prepared, counter, None)
        payload = b"".join(pieces)  # the one copy of the inputs' bytes on our side
        del pieces
        try:
            if route is _Route.STREAM:
                counter.done = prepared.data_bytes  # sent in one message
                call = via.calls.run_stream(payload, timeout=self._timeout)
                return await self._read(call, counter, via)
            try:
                response = await via.calls.run(payload, timeout=self._timeout)
            except grpc.RpcError as e:
                raise _status_error(e, self._tls, via) from None
            _, result, out = _result_from_response(response, self)
            counter.add(done=prepared.data_bytes + out, total=out)
            return result
        except TensorOpError as e:
            if not _too_big(e):
                raise
            chunk_bytes = _fallback_chunk_bytes(e, self._chunk_bytes)
        # The server's limit is lower than ours: the streaming calls avoid it,
        # in chunks that fit its limit.
        del payload
        return await self._chunked(prepared, _Progress(progress, prepared.data_bytes), chunk_bytes)

    async def _chunked(
        self, prepared: _Prepared, counter: _Progress, chunk_bytes: int | None
    ) -> Result:
        via = self._via_handle(_replica_read(_tensor_reads(prepared.header.inputs)))
        chunks = self._chunk_parts(prepared, chunk_bytes)  # checks chunk_bytes now
        failed: list[Exception] = []  # the progress callback's, raised to the caller

        async def send() -> AsyncIterator[bytes]:
            for part in _counted(chunks, counter, failed):
                yield part

        try:
            call = via.calls.run_chunked(send(), timeout=self._timeout)
            return await self._read(call, counter, via)
        except (TensorOpError, asyncio.CancelledError):
            # grpc.aio ends a call whose request iterator raised as cancelled.
            if failed:
                raise failed[0] from None
            raise

    async def _read(self, call: Any, counter: _Progress, via: _Via) -> Result:
        assembler = _Assembler(counter, self)
        try:
            async for part in call:
                assembler.feed(part)
        except grpc.RpcError as e:
            raise _status_error(e, self._tls, via) from None
        except BaseException:
            # Ours (a broken stream, a failed progress callback, a cancelled
            # task) is the error worth reporting; the call ends here.
            call.cancel()
            raise
        return assembler.result()
