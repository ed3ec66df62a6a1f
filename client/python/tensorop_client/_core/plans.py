"""Each of the client's calls as a plan: a generator that does no I/O itself
but yields the gRPC calls to make (Call), is sent back what each answered (or
has the error thrown in), and returns the call's result. Client drives a plan
with blocking gRPC, AsyncClient with grpc.aio (PlanRunner steps it for both),
so the choice of call, the fallbacks, the chain's Puts and the errors are
written once, here.

    plan = run(client, "slice", {"input": x}, attrs, outputs=[(2, 2)])
    call = next(plan)  # Call(method="run", request=b"...", to=Target())
    plan.send(answer)  # StopIteration(Result(...))
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from tensorop_client._core.chains import (
    ChainResultLike,
    StepLike,
    _prepare_chain,
    _PreparedChain,
)
from tensorop_client._core.chunking import (
    _chunk_parts,
    _chunk_size,
    _chunks_within,
    _fallback_chunk_bytes,
    _put_header,
    _put_parts,
    _smaller_limit,
    _too_big,
)
from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.handles import (
    HandleLike,
    _by_replica,
    _fetch_request,
    _next_page_token,
    _Remote,
)
from tensorop_client._core.progress import ProgressFn, _counted, _Progress
from tensorop_client._core.requests import (
    Attrs,
    OutputLike,
    _prepare,
    _prepare_request,
    _Prepared,
)
from tensorop_client._core.results import (
    Result,
    _Assembler,
    _fetched,
    _result_from_response,
)
from tensorop_client._core.routing import (
    Target,
    _chain_reads,
    _choose_route,
    _replica_read,
    _Route,
    _target,
    _tensor_reads,
)
from tensorop_client._core.shapes import answer_bytes, chain_answer_bytes, layout_bytes
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import WireTensor
from tensorop_client.wire import chain_request_meta

T = TypeVar("T")
R = TypeVar("R")  # the RemoteTensor kind of a client
# Ids one Release call may name (the server refuses more).
MAX_RELEASE_IDS = 1000


@dataclass(eq=False)
class Call:
    """One gRPC call for the transport to make: `method`, the name of a
    _Calls attribute ("run", "run_stream", "run_chunked", "run_chain", "put",
    "fetch", "release", "list_handles"), with `request` (serialized bytes, a
    message, or an iterator of serialized parts for a streamed request), to
    `to`. A streamed answer is fed part by part to `answer`, and the plan is
    sent answer.result(); else the plan is sent the one answer message.
    `failed` collects what a streamed request's iterator raised (a progress
    callback's exception), which the transport raises instead of the call's
    error."""

    method: str
    request: Any
    to: Target = field(default_factory=Target)
    answer: _Assembler | None = None
    failed: list[Exception] = field(default_factory=list)


# A call's plan: yields Calls, is sent their answers, returns T.
Plan = Generator[Call, Any, T]


class PlanRunner(Generic[T]):
    """Steps a plan for a transport:

        runner = PlanRunner(plan)
        for call in runner:
            try:
                runner.answer(perform(call))
            except BaseException as e:
                runner.fail(e)
        return runner.result

    Iterating raises what the plan raises (an error thrown in that the plan
    did not handle, or its own); every error is thrown in, so the plan's
    cleanup (a chain's release) runs, itself through the transport."""

    def __init__(self, plan: Plan[T]) -> None:
        self._plan = plan
        self._answer: Any = None
        self._error: BaseException | None = None

    def next_call(self) -> Call | None:
        """The next call to make, or None once the plan returned `result`."""
        answer, error = self._answer, self._error
        self._answer = self._error = None
        try:
            if error is not None:
                return self._plan.throw(error)
            return self._plan.send(answer)
        except StopIteration as done:
            self.result: T = done.value
            return None

    def __iter__(self) -> Iterator[Call]:
        while (call := self.next_call()) is not None:
            yield call

    def answer(self, value: Any) -> None:
        self._answer = value

    def fail(self, error: BaseException) -> None:
        self._error = error


class Planning(Generic[R]):
    """What the plans read of a client: its size options, and `_remote`,
    which makes the client's kind of RemoteTensor (R) for a handle."""

    def __init__(
        self, max_message_bytes: int, chunk_bytes: int, stream_threshold_bytes: int
    ) -> None:
        if max_message_bytes < 4096:
            raise ValueError(f"max_message_bytes must be at least 4096, got {max_message_bytes}")
        if not 0 < chunk_bytes <= max_message_bytes - 1024:
            raise ValueError(
                "chunk_bytes must be in [1, max_message_bytes - 1024 = "
                f"{max_message_bytes - 1024}], got {chunk_bytes}"
            )
        self._max_message_bytes = max_message_bytes
        self._chunk_bytes = chunk_bytes
        self._stream_threshold_bytes = stream_threshold_bytes

    def _remote(self, handle: pb.TensorHandle) -> R:
        """The RemoteTensor of this kind of client for a handle it received."""
        raise NotImplementedError

    def _route(self, prepared: _Prepared, request_bytes: int, stream: bool) -> _Route:
        """The call for `prepared` (_choose_route) under this client's options."""
        return _choose_route(
            prepared,
            request_bytes,
            stream,
            self._max_message_bytes,
            self._stream_threshold_bytes,
        )

    def _chunk_size(self, chunk_bytes: int | None) -> int:
        return _chunk_size(chunk_bytes, self._chunk_bytes, self._max_message_bytes)


def _streamed(call: Call) -> Plan[Result]:
    """A call whose answer streams back (call.answer): its Result."""
    result: Result = yield call
    return result


# ---- run --------------------------------------------------------------------


def run(
    client: Planning[Any],
    op: str,
    inputs: Mapping[str, npt.ArrayLike | _Remote],
    attrs: Attrs | None = None,
    outputs: Sequence[OutputLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    *,
    progress: ProgressFn | None = None,
    keep: bool = False,
) -> Plan[Result]:
    """Runs one operator, any size: Run when the request and its answer
    fit in one message, else RunChunked for the inputs and the streamed
    answer (RunStream) for the outputs. The inputs' bytes are sent from
    the arrays' own memory (strided views keep their strides); a
    RemoteTensor input is named by its handle and sends no bytes.

    `outputs`: one size list (or Output, or mapping) per output. Only
    split needs them: a slice without them makes its whole window, sizes
    1 + (window_sizes[i] - 1) // |window_strides[i]| (an Output with
    strides and no sizes gets those sizes too), and those of
    strided_slice, scatter_elements, transpose, reshape, expand, tile,
    gather, gather_elements, join and pad follow from the inputs.

    `keep`: every output stays on the server and comes back as a
    RemoteTensor.

    `progress(done, total)`, if given, is called as bytes move in chunks
    (and once at the end of a unary call): the bytes of input and output
    data moved so far and in all. `total` is the same in every call, the
    outputs' bytes counted from the first (their sizes follow from the
    request: given, or derived as the server derives them), and the last
    call has done == total. (Only where they cannot be known before, a
    RunRequest naming a handle without its layout, does `total` grow by
    each output's size as its header arrives.) During a chunked upload it is
    called from a gRPC thread. An exception it raises cancels the call
    and comes out of `run`."""
    prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
    return (yield from run_prepared(client, prepared, progress))


def run_stream(
    client: Planning[Any],
    op: str,
    inputs: Mapping[str, npt.ArrayLike | _Remote],
    attrs: Attrs | None = None,
    outputs: Sequence[OutputLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    *,
    progress: ProgressFn | None = None,
    keep: bool = False,
) -> Plan[Result]:
    """RunStream: each output arrives as a header and chunks, reassembled here,
    so results larger than one message come back (inputs over the limit go
    through RunChunked, which streams too)."""
    prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
    return (yield from run_prepared(client, prepared, progress, stream=True))


def run_chunked(
    client: Planning[Any],
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
) -> Plan[Result]:
    """RunChunked whatever the size: inputs uploaded in chunks of
    `chunk_bytes` (default: the client's), the answer streamed back."""
    prepared = _prepare(op, inputs, attrs, outputs, backend, device_index, keep)
    return (yield from _chunked(client, prepared, _counter(prepared, progress), chunk_bytes))


def run_request(
    client: Planning[Any], request: pb.RunRequest, *, progress: ProgressFn | None = None
) -> Plan[Result]:
    """`run` with a ready RunRequest (any size, as `run`)."""
    return (yield from run_prepared(client, _prepare_request(request), progress))


def run_stream_request(
    client: Planning[Any], request: pb.RunRequest, *, progress: ProgressFn | None = None
) -> Plan[Result]:
    """`run_stream` with a ready RunRequest."""
    return (yield from run_prepared(client, _prepare_request(request), progress, stream=True))


def run_chunked_request(
    client: Planning[Any],
    request: pb.RunRequest,
    *,
    progress: ProgressFn | None = None,
    chunk_bytes: int | None = None,
) -> Plan[Result]:
    """`run_chunked` with a ready RunRequest."""
    prepared = _prepare_request(request)
    return (yield from _chunked(client, prepared, _counter(prepared, progress), chunk_bytes))


def run_prepared(
    client: Planning[Any], prepared: _Prepared, progress: ProgressFn | None, stream: bool = False
) -> Plan[Result]:
    """One request by the call that suits it (_choose_route); a unary or
    streamed one the server refuses as too large for its message limit is
    sent again in chunks that fit it."""
    to = _target(_replica_read(_tensor_reads(prepared.header.inputs)))
    pieces, request_bytes = prepared.pieces()
    route = client._route(prepared, request_bytes, stream)
    counter = _counter(prepared, progress)
    if route is _Route.CHUNKED:
        del pieces
        return (yield from _chunked(client, prepared, counter, None))
    payload = b"".join(pieces)  # the one copy of the inputs' bytes on our side
    del pieces
    try:
        if route is _Route.STREAM:
            counter.done = prepared.data_bytes  # sent in one message
            call = Call("run_stream", payload, to, _Assembler(counter, client))
            return (yield from _streamed(call))
        response = yield Call("run", payload, to)
        _, result, out = _result_from_response(response, client)
        counter.announce(out)
        counter.settle()
        counter.add(done=prepared.data_bytes + out)
        return result
    except TensorOpError as e:
        if not _too_big(e):
            raise
        chunk_bytes = _fallback_chunk_bytes(e, client._chunk_bytes)
    # The server's limit is lower than ours: the streaming calls avoid it,
    # in chunks that fit its limit.
    del payload
    return (yield from _chunked(client, prepared, _counter(prepared, progress), chunk_bytes))


def _counter(prepared: _Prepared, progress: ProgressFn | None) -> _Progress:
    """The progress count of one request: its inputs' bytes, and its outputs'
    from the start where they are known before the call (answer_bytes)."""
    return _Progress(progress, prepared.data_bytes, answer=answer_bytes(prepared.header))


def _chunked(
    client: Planning[Any], prepared: _Prepared, counter: _Progress, chunk_bytes: int | None
) -> Plan[Result]:
    to = _target(_replica_read(_tensor_reads(prepared.header.inputs)))
    chunks = _chunk_parts(prepared, client._chunk_size(chunk_bytes))
    failed: list[Exception] = []  # the progress callback's, raised to the caller
    parts = _counted(chunks, counter, failed)
    call = Call("run_chunked", parts, to, _Assembler(counter, client), failed)
    return (yield from _streamed(call))


# ---- chains -----------------------------------------------------------------


def chain(
    client: Planning[Any],
    steps: Sequence[StepLike],
    results: Sequence[ChainResultLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    *,
    id: str = "",
    progress: ProgressFn | None = None,
    keep: bool = False,
) -> Plan[Result]:
    """RunChain: `steps` (Steps, or mappings or tuples of Step's
    arguments) run one after another on one backend, in one call. A
    step's inputs are arrays, RemoteTensors, or earlier steps' outputs
    (`step.output(k)`, StepRef(index, k), or a one-output Step itself),
    which stay on the server between steps. `results` name what comes
    back, in that order: StepRefs (with `strides` for the bytes, or
    `keep`), (step, output) pairs, or Steps for all their outputs; None:
    every output of the last step. The Result holds an array for each,
    or a RemoteTensor for each kept one (all of them with `keep`), as
    run(keep=True) does; its backend is where the chain ran.

    The request is one message, so it must fit max_message_bytes (the
    server's --max_message_bytes): the largest array inputs that would
    take it over, or take its data past stream_threshold_bytes (as `run`
    then uploads in chunks), are Put first (handles in host memory),
    named instead, and released after the call. Errors name steps[i] or results[j], as
    the server does; ValueError or TypeError for steps that cannot be
    built here. `progress` as for `run`."""
    prepared = _prepare_chain(steps, results, backend, device_index, id, keep)
    return (yield from _chain(client, prepared, progress))


def chain_request(
    client: Planning[Any], request: pb.RunChainRequest, *, progress: ProgressFn | None = None
) -> Plan[Result]:
    """`chain` with a ready RunChainRequest (inputs over the message limit
    are Put, as by `chain`)."""
    return (yield from _chain(client, _PreparedChain(*chain_request_meta(request)), progress))


def _chain(
    client: Planning[Any], prepared: _PreparedChain, progress: ProgressFn | None
) -> Plan[Result]:
    sent = prepared.data_bytes  # the inputs' bytes, Put or in the request
    expected = chain_answer_bytes(prepared.header)  # the results', where known
    counter = _Progress(progress, sent, answer=expected)
    made: list[_Remote] = []  # inputs Put to fit the message limit
    limit = client._max_message_bytes
    try:
        while True:
            while (key := prepared.next_to_put(limit, client._stream_threshold_bytes)) is not None:
                chunk_bytes = _chunks_within(limit, client._chunk_bytes)
                beside = _replica_read(_chain_reads(prepared.header))
                made.append(
                    (
                        yield from put(
                            client,
                            prepared.wire(key),
                            chunk_bytes=chunk_bytes,
                            replica=beside.replica if beside is not None else None,
                        )
                    )
                )
                counter.add(done=prepared.refer(key, made[-1].handle))
            to = _target(_replica_read(_chain_reads(prepared.header)))
            # The request goes in one message: its inputs are sent.
            answer = _Assembler(_Progress(progress, sent, sent, expected), client)
            try:
                return (yield from _streamed(Call("run_chain", prepared.payload(), to, answer)))
            except TensorOpError as e:
                # A server whose limit is lower than ours: Put more to fit it.
                smaller = _smaller_limit(e, limit)
                if smaller is None:
                    raise
                limit = smaller
    finally:
        with suppress(TensorOpError):  # else they expire: the outcome matters more
            yield from release(client, made)


# ---- handles ----------------------------------------------------------------


def put(
    client: Planning[R],
    array: npt.ArrayLike | WireTensor,
    backend: str = "cpu",
    ttl_seconds: int = 0,
    *,
    device_index: int | None = None,
    progress: ProgressFn | None = None,
    chunk_bytes: int | None = None,
    replica: str | None = None,
) -> Plan[R]:
    """Put: uploads `array` in chunks of `chunk_bytes` (default: the
    client's) to stay on the server, and returns its RemoteTensor. A
    strided view keeps its layout (element strides, and the padding
    between its elements, as `run` sends it; np.ascontiguousarray(a)
    first to keep only the elements); other layouts are packed.
    `backend`: "cpu" or "auto" (host memory) or "opencl" (on device
    `device_index`, else the least-loaded one). `ttl_seconds`: it lives
    that long after its last use (0: the server's --handle_ttl_seconds).
    `progress` as for `run`, called
    from a gRPC thread. `replica`: the replica to keep it on (another
    handle's `handle.replica`, so that one call can read both); None:
    any, as the target balances."""
    header, data = _put_header(array, backend, ttl_seconds, device_index)
    chunks = _put_parts(header, data, client._chunk_size(chunk_bytes))
    failed: list[Exception] = []  # the progress callback's, raised to the caller
    parts = _counted(chunks, _Progress(progress, data.nbytes), failed)
    handle = yield Call("put", parts, Target(replica or ""), failed=failed)
    return client._remote(handle)


def fetch(
    client: Planning[Any],
    tensor: HandleLike,
    strides: Sequence[int] | None = None,
    *,
    progress: ProgressFn | None = None,
) -> Plan[np.ndarray]:
    """Fetch: a handle's tensor as a read-only array, packed or with
    `strides` (elements); streamed back in chunks, any size. A
    RemoteTensor's comes from its replica; an id's, from whichever
    replica the target reaches."""
    to = _target(tensor.handle if isinstance(tensor, _Remote) else None)
    request = _fetch_request(tensor, strides)
    expected = None  # the bytes coming, known for a RemoteTensor
    if isinstance(tensor, _Remote):
        layout = (tensor.handle.dtype, tuple(tensor.handle.sizes))
        expected = layout_bytes(layout, [int(s) for s in strides or ()])
    counter = _Progress(progress, answer=expected)
    return _fetched((yield Call("fetch", request, to, _Assembler(counter, client))))


def release(client: Planning[Any], tensors: HandleLike | Iterable[HandleLike]) -> Plan[None]:
    """Release: frees handles (RemoteTensors or ids) on the server at once
    (a call already using one finishes first); later uses are NOT_FOUND.
    Unknown ids are ignored. RemoteTensors are released on their replicas
    (a call each), ids on whichever replica the target reaches; the first
    error is raised after trying every replica."""
    errors: list[TensorOpError] = []
    for replica, ids in _by_replica(tensors).items():
        # The server takes at most MAX_RELEASE_IDS ids a call.
        for begin in range(0, len(ids), MAX_RELEASE_IDS):
            batch = ids[begin : begin + MAX_RELEASE_IDS]
            try:
                yield Call("release", pb.ReleaseRequest(ids=batch), Target(replica, batch[0]))
            except TensorOpError as e:
                errors.append(e)
    if errors:
        raise errors[0]


def list_handles(client: Planning[Any], page_size: int = 0) -> Plan[list[pb.TensorHandle]]:
    """ListHandles: every handle of this caller, by id, read a page of
    `page_size` (0: the server's default) at a time, on whichever replica
    the target reaches."""
    handles: list[pb.TensorHandle] = []
    token = ""
    while True:
        request = pb.ListHandlesRequest(page_size=page_size, page_token=token)
        page = yield Call("list_handles", request, Target())
        handles.extend(page.handles)
        token = _next_page_token(page, token)
        if not token:
            return handles
