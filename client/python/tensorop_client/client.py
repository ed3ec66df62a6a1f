"""tensorop_client.Client: tensord's calls with numpy arrays, any size.

    with Client("127.0.0.1:50051") as client:
        result = client.run("slice", {"input": x},
                            {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]},
                            outputs=[(2, 2)])
        result.outputs[0]  # a read-only numpy array with the strides the server returned

Every failure is a TensorOpError carrying the gRPC status code name and message
(INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED, UNAVAILABLE, ...), or
INTERNAL when what the server sent cannot be a valid answer, so the arrays of a
Result are always safe to read.

`run` picks the call: Run while the request and its answer fit in one message
(max_message_bytes) and are small (stream_threshold_bytes), RunChunked for
larger inputs and the streamed answer for outputs that may be larger. Tensor
bytes never pass through protobuf messages (tensorop_client.wire): inputs go
from the arrays' memory into the one `bytes` gRPC sends, and outputs are
read-only arrays over the received bytes (unary) or over one buffer per output
that the chunks are copied into. `run_many` pipelines many requests over
RunBidi. AsyncClient (tensorop_client.aio) has the same calls for asyncio.

Handles keep tensors on the server: `put` uploads an array and returns a
RemoteTensor, which `run` takes wherever it takes an array (the request then
names it instead of carrying its bytes); `run(..., keep=True)` leaves every
output on the server and returns RemoteTensors; `fetch`, `release` and
`list_handles` do the rest. A handle lives on one replica (its
`handle.replica`): every call using RemoteTensors goes there, over a channel
of its own, and the other calls balance over the target. A call reading
handles of two replicas raises INVALID_ARGUMENT before anything is sent;
`put(..., replica=h.handle.replica)` keeps a tensor beside another.

    with client.put(x) as h:  # released on leaving the block
        kept = client.run("strided_slice", {"input": h}, attrs, keep=True).outputs[0]
        kept.fetch()  # the array; kept.release() frees it

`chain` runs Steps one after another in one RunChain call, each reading
arrays, RemoteTensors or earlier steps' outputs (step.output(k), StepRef),
which stay on the server in between; it answers the outputs asked for, as
arrays or (kept) RemoteTensors, streamed like run_stream's.

    first = Step("slice", {"input": x}, attrs, outputs=[(4, 4)])
    halves = Step("split", {"input": first}, {"axis": 0}, outputs=[(2, 4), (2, 4)])
    top, bottom = client.chain([first, halves]).outputs  # the last step's outputs

One method per operator computes the outputs itself, with NumPy's
conventions where NumPy has the operation, over the same core as `run`
(arrays or RemoteTensors in, arrays or, with keep=True, RemoteTensors out):

    a, b, c = client.split(x, [1, 3], axis=-1)  # numpy.split(x, [1, 3], axis=-1)
    client.strided_slice(x, np.s_[1:3, ::-2, None, ...])  # x[1:3, ::-2, None, ...]
    client.slice(x, offsets=[0, 1], window_sizes=[4, 3], window_strides=[2, 2])
    client.scatter_elements(x, indices, updates, axis=-1)
    client.transpose(x, (1, 0))  # numpy.transpose(x, (1, 0)); axes=None reverses
    client.reshape(x, (2, -1))  # numpy.reshape(x, (2, -1))
    client.broadcast_to(x[:, :1], (4, 3))  # numpy.broadcast_to, NumPy's rule
    client.expand(x[:, :1], (1, 3))  # ONNX Expand: a 1 in the shape keeps x's size
    client.tile(x, (2, 1, 3))  # numpy.tile(x, (2, 1, 3)): shape (2, rows, 3 * columns)
    client.take(x, [2, 0], axis=1)  # numpy.take(x, [2, 0], axis=1); gather's axis defaults to 0
    client.take_along_axis(x, order, axis=1)  # numpy.take_along_axis; also gather_elements
    client.concatenate([x, y], axis=-1)  # numpy.concatenate; also join, DirectML's name
    client.pad(x, ((1, 0), (2, 2)), "reflect")  # numpy.pad(x, ((1, 0), (2, 2)), "reflect")
"""

# The work is done by a core without I/O (tensorop_client._core: requests,
# chains, chunking, routing, results, and each call as a plan of gRPC calls);
# this module is its blocking transport, and aio.py its asyncio one.

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import suppress
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc
import numpy as np

from tensorop_client._core import gathers, joins, operators, pads, plans
from tensorop_client._core.chains import (
    ChainResultLike,
    Step,
    StepLike,
    StepRef,
    make_chain_request,
)
from tensorop_client._core.errors import TensorOpError, protocol_error
from tensorop_client._core.handles import HandleLike, _Remote
from tensorop_client._core.plans import Call, Plan, PlanRunner
from tensorop_client._core.progress import ProgressFn
from tensorop_client._core.requests import (
    BACKENDS,
    OPS,
    Attrs,
    Output,
    OutputLike,
    RequestLike,
    _output_count,  # noqa: F401 (here before the core moved out: tests, scripts)
    _prepare,  # noqa: F401 (likewise)
    _Prepared,
    answer_bytes_bound,
    keep_outputs,
    make_request,
    set_attrs,
)
from tensorop_client._core.results import (
    Buffer,
    Result,
    _decode,  # noqa: F401 (likewise)
    _read_parts,  # noqa: F401 (likewise)
)
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
    _ReplicaChannels,
    _status_error,
    _Transport,
)
from tensorop_client.tensors import LayoutError, WireTensor
from tensorop_client.wire import WireError

__all__ = [
    "BACKENDS",
    "OPS",
    "Attrs",
    "Buffer",
    "ChainResultLike",
    "Client",
    "HandleLike",
    "LayoutError",
    "Output",
    "OutputLike",
    "ProgressFn",
    "RemoteTensor",
    "RequestLike",
    "Result",
    "Step",
    "StepLike",
    "StepRef",
    "TensorOpError",
    "WireError",
    "WireTensor",
    "answer_bytes_bound",
    "keep_outputs",
    "make_chain_request",
    "make_request",
    "protocol_error",
    "set_attrs",
]

P = ParamSpec("P")
T = TypeVar("T")


class RemoteTensor(_Remote):
    """A tensor kept on the server (Client.put, or an output of run(keep=True)):
    its TensorHandle as `handle`, and `id`, `dtype`, `shape`, `strides`
    (elements). Client.run takes it wherever it takes an array. A context
    manager: leaving the block releases it."""

    _client: Client

    def fetch(
        self, strides: Sequence[int] | None = None, *, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """Client.fetch: the tensor as a read-only array, packed or with `strides`."""
        return self._client.fetch(self, strides, progress=progress)

    def release(self) -> None:
        """Client.release: frees it on the server (later uses are NOT_FOUND)."""
        self._client.release(self)

    def __enter__(self) -> RemoteTensor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class _Connectivity:
    """A sync channel's state as subscribe() last reported it (grpc.aio
    channels answer get_state() instead)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._state = grpc.ChannelConnectivity.IDLE
        self._channel = channel
        channel.subscribe(self._update)

    def _update(self, state: grpc.ChannelConnectivity) -> None:
        self._state = state

    def stop(self) -> None:
        """Unsubscribes, before the channel closes: closing a channel that is
        still watched makes grpcio's polling thread raise "Cannot monitor
        channel state: Channel closed!" (grpc/grpc#18995)."""
        with suppress(ValueError):
            self._channel.unsubscribe(self._update)

    def ready(self) -> bool:
        return self._state is grpc.ChannelConnectivity.READY


# ---- closing ----------------------------------------------------------------

# How long interpreter exit waits for the channels of each Client collected
# just before it, being closed on a thread of their own (_ClientChannels).
_EXIT_CLOSE_SECONDS = 5.0

# The channels of Clients not closed yet, closed at interpreter exit, and the
# threads closing those of collected Clients, waited for there.
_open_channels: set[_ClientChannels] = set()
_closing_threads: set[threading.Thread] = set()
# Re-entrant: a garbage collection can run wherever the lock is held (any
# allocation, a WeakSet's pending removals) and finalize a collected Client,
# whose `collected` takes the lock on the same thread; a plain Lock would wait
# for itself there for ever (a test run hung so in Caller.close).
_registry_lock = threading.RLock()


class _ClientChannels:
    """A Client's channels (the target's and the replicas'), closed by
    Client.close, when the Client is garbage-collected, or at interpreter
    exit, whichever comes first. It holds no reference to the Client.

    Closing matters beyond the sockets: a replica channel's connectivity
    subscription (_Connectivity) keeps a gRPC polling thread alive until the
    channel closes, and a gRPC channel still open when the interpreter shuts
    down is closed by grpc's own finalizers, which then wait forever for that
    thread (frozen by the shutdown) to finish its connectivity watch: the
    program never exits. Closing at exit (atexit, while every thread still
    runs) ends those threads first."""

    def __init__(self, main: grpc.Channel, replicas: _ReplicaChannels) -> None:
        self._main = main
        self._replicas = replicas
        # run_many's iterations not finished yet.
        self._streams: weakref.WeakSet[Generator[Any, None, None]] = weakref.WeakSet()
        # Replica channels' connectivity subscriptions, stopped on close.
        self._connectivities: list[_Connectivity] = []
        with _registry_lock:
            _open_channels.add(self)

    def watch(self, connectivity: _Connectivity) -> None:
        """Stops `connectivity`'s subscription before the channels close."""
        with _registry_lock:
            self._connectivities.append(connectivity)

    def track(self, stream: Generator[Any, None, None]) -> None:
        """Ends `stream` (a run_many iteration) when the channels close."""
        with _registry_lock:
            self._streams.add(stream)

    def close(self) -> None:
        """Ends the run_many iterations still open (their calls cancelled),
        then closes the channels, here: it returns once gRPC's threads let go
        of them (at most a connectivity poll, 0.2 s). Idempotent.

        An iteration left open must end now rather than when the interpreter
        finally drops it: by then gRPC's threads are stopped, possibly holding
        the lock that cancelling the call, or dropping it, takes."""
        with _registry_lock:
            _open_channels.discard(self)
            streams = list(self._streams)
            self._streams.clear()
        for stream in streams:
            # One being iterated on another thread ("generator already
            # executing") ends with its call, cancelled by the channel's close.
            with suppress(ValueError):
                stream.close()
        with _registry_lock:
            watched = list(self._connectivities)
            self._connectivities.clear()
        for connectivity in watched:
            connectivity.stop()
        for calls in self._replicas.close():
            calls.channel.close()
        self._main.close()

    def collected(self) -> None:
        """The Client's finalizer (weakref.finalize): closes them on a thread
        of its own, so that the thread the Client was collected on, which may
        be one of gRPC's, never waits on gRPC."""
        thread = threading.Thread(
            target=self._close_collected, name="tensorop-client-close", daemon=True
        )
        with _registry_lock:
            _closing_threads.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no new threads at interpreter shutdown
            with _registry_lock:
                _closing_threads.discard(thread)
            self.close()

    def _close_collected(self) -> None:
        try:
            self.close()
        finally:
            with _registry_lock:
                _closing_threads.discard(threading.current_thread())


@atexit.register
def _close_at_exit() -> None:
    """Closes the channels of every Client still open, and waits (bounded) for
    those of collected Clients, while gRPC's threads still run (atexit comes
    before the interpreter stops them)."""
    with _registry_lock:
        channels = list(_open_channels)
        threads = list(_closing_threads)
    for c in channels:
        with suppress(Exception):  # the others are closed all the same
            c.close()
    for thread in threads:
        thread.join(_EXIT_CLOSE_SECONDS)


def _blocking(
    plan: Callable[Concatenate[Client, P], Plan[T]],
    doc: str | None = None,
    returns: str | None = None,
) -> Callable[Concatenate[Client, P], T]:
    """A Client method: `plan` driven to its result (Client._drive)."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._drive(plan(self, *args, **kwargs))

    return _public(method, plan, doc, returns)


class Client(_Transport[RemoteTensor]):
    """A connection to tensord. Connects lazily: an unreachable target shows up as
    TensorOpError("UNAVAILABLE", ...) from the first call. Close it (`close`,
    or `with`); one left open closes its channels when it is garbage-collected
    or at interpreter exit.

    Results are read-only numpy arrays with the strides the server returned,
    over the received bytes (unary answers) or over one buffer per output that
    the streamed chunks are copied into; `np.array(a)` makes a writable copy."""

    _grpc = grpc

    def _opened(self) -> None:
        # Closed when this Client is collected, or at exit, if close() was not
        # called; atexit=False: _close_at_exit closes the channels instead.
        self._channels = _ClientChannels(self._channel, self._replicas)
        weakref.finalize(self, self._channels.collected).atexit = False

    def _ready(self, channel: grpc.Channel) -> Callable[[], bool]:
        connectivity = _Connectivity(channel)
        self._channels.watch(connectivity)
        return connectivity.ready

    def close(self) -> None:
        """Closes the channels (the target's and every replica's); calls in
        flight end CANCELLED, later calls raise ValueError. A Client never
        closed is closed when it is garbage-collected or at interpreter exit."""
        self._channels.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    run = _blocking(plans.run)
    run_stream = _blocking(plans.run_stream)
    run_chunked = _blocking(plans.run_chunked)
    run_request = _blocking(plans.run_request)
    run_stream_request = _blocking(plans.run_stream_request)
    run_chunked_request = _blocking(plans.run_chunked_request)
    chain = _blocking(plans.chain)
    chain_request = _blocking(plans.chain_request)
    put = _blocking(plans.put, returns="RemoteTensor")
    fetch = _blocking(plans.fetch)
    release = _blocking(plans.release)
    list_handles = _blocking(plans.list_handles)
    split = _blocking(operators.split, returns="list[np.ndarray | RemoteTensor]")
    strided_slice = _blocking(operators.strided_slice, returns="np.ndarray | RemoteTensor")
    slice = _blocking(operators.slice, returns="np.ndarray | RemoteTensor")
    scatter_elements = _blocking(operators.scatter_elements, returns="np.ndarray | RemoteTensor")
    transpose = _blocking(operators.transpose, returns="np.ndarray | RemoteTensor")
    reshape = _blocking(operators.reshape, returns="np.ndarray | RemoteTensor")
    expand = _blocking(operators.expand, returns="np.ndarray | RemoteTensor")
    broadcast_to = _blocking(operators.broadcast_to, returns="np.ndarray | RemoteTensor")
    tile = _blocking(operators.tile, returns="np.ndarray | RemoteTensor")
    take = _blocking(gathers.take, returns="np.ndarray | RemoteTensor")
    gather = _blocking(gathers.gather, returns="np.ndarray | RemoteTensor")
    take_along_axis = _blocking(gathers.take_along_axis, returns="np.ndarray | RemoteTensor")
    gather_elements = _blocking(gathers.gather_elements, returns="np.ndarray | RemoteTensor")
    concatenate = _blocking(joins.concatenate, returns="np.ndarray | RemoteTensor")
    join = _blocking(joins.join, returns="np.ndarray | RemoteTensor")
    pad = _blocking(pads.pad, returns="np.ndarray | RemoteTensor")

    def _remote(self, handle: pb.TensorHandle) -> RemoteTensor:
        return RemoteTensor(self, handle)

    def _drive(self, plan: Plan[T]) -> T:
        """Makes the plan's calls one after another, blocking on each."""
        runner = PlanRunner(plan)
        for call in runner:
            try:
                runner.answer(self._perform(call))
            except BaseException as e:  # noqa: BLE001 (thrown into the plan, which raises it)
                runner.fail(e)
        return runner.result

    def _perform(self, call: Call) -> Any:
        """One call of a plan: its answer message, or its streamed answer
        reassembled (Call.answer)."""
        via = self._via(call.to)
        with self._errors(via, call):
            started = getattr(via.calls, call.method)(
                call.request, timeout=self._timeout, metadata=call_metadata()
            )
            if call.answer is None:
                return started
            with _cancelled_on_error(started):
                for part in started:
                    call.answer.feed(part)
            return call.answer.result()

    def run_many(
        self, requests: Iterable[RequestLike], *, window: int = 16
    ) -> Iterator[Result | TensorOpError]:
        """Many requests over one RunBidi stream, at most `window` of them sent
        and not yet handed out, yielding each one's outcome in the order of
        `requests`: its Result, or its TensorOpError (a bad request fails alone; the others
        still run). `requests` is read lazily; each is a RunRequest, a mapping
        of `run`'s keyword arguments or a tuple of its positional ones (a
        request that cannot be built raises ValueError or TypeError from the
        iteration). A request or answer too large for one message runs through
        `run` instead, in its turn. If the stream fails, the requests sent and
        unanswered get its error, and the iteration then raises it when
        requests remain unsent. `timeout` bounds the whole stream. Closing
        the client ends the iteration (its call cancelled). The stream
        carries the traceparent in force here, at the call (traceparent)."""
        outcomes = self._run_many(requests, window, current_traceparent())
        self._channels.track(outcomes)
        return outcomes

    def _run_many(
        self, requests: Iterable[RequestLike], window: int, trace: str | None
    ) -> Generator[Result | TensorOpError, None, None]:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        window_state = _Window(self, requests)
        slots = threading.Semaphore(window)
        closed = threading.Event()
        lock = threading.Lock()

        def outgoing() -> Iterator[bytes]:
            # Runs on a gRPC thread, which takes each request once it may go.
            while not closed.is_set():
                item = window_state.next_to_send(lock)
                if item is None:
                    return
                while not slots.acquire(timeout=0.1):
                    if closed.is_set():
                        return
                yield item

        call = self._calls.run_bidi(outgoing(), timeout=self._timeout, metadata=metadata_of(trace))
        try:
            while True:
                while True:
                    with lock:
                        ready = window_state.pop_ready()
                    if ready is None:
                        break
                    if ready.local is not None:
                        yield self._local(ready.local, trace)
                        continue
                    # Its slot is free once it is handed out, not when it is
                    # answered: answers that overtake a slow request then wait
                    # in the window instead of piling up.
                    slots.release()
                    yield ready.outcome()
                try:
                    raw = next(call)
                except StopIteration:
                    break
                except grpc.RpcError as e:
                    with lock:
                        window_state.fail(_status_error(e, self._tls))
                    break
                with lock:
                    answered = window_state.answer(raw)
                if not answered:
                    call.cancel()
                    break
            closed.set()
            with lock:
                window_state.end()
            while (ready := window_state.pop_ready()) is not None:
                yield ready.outcome() if ready.local is None else self._local(ready.local, trace)
            window_state.raise_if_unfinished()
        finally:
            closed.set()
            call.cancel()

    def _local(self, prepared: _Prepared, trace: str | None) -> Result | TensorOpError:
        try:
            with traceparent(trace):  # run_many's, wherever it is iterated
                return self._drive(plans.run_prepared(self, prepared, None))
        except TensorOpError as e:
            return e
