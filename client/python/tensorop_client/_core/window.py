"""run_many's bookkeeping without I/O (_Window): which requests were taken
from the caller's iterable and sent over RunBidi, which were answered, and
the outcomes in request order. Client feeds it from threads, AsyncClient from
tasks."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from tensorop_client._core.errors import TensorOpError, protocol_error
from tensorop_client._core.plans import Planning
from tensorop_client._core.requests import RequestLike, _prepare_any, _Prepared
from tensorop_client._core.results import _CODE_NAMES, Result, _output
from tensorop_client._core.routing import _Route, _tensor_reads
from tensorop_client.wire import WireError, parse_run_response


@dataclass
class _Slot:
    """One request's place in run_many's order: its outcome, or the prepared
    request when it goes through run (too large for one message)."""

    value: Result | TensorOpError | None = None
    local: _Prepared | None = None

    def outcome(self) -> Result | TensorOpError:
        assert self.value is not None
        return self.value


class _Window:
    """run_many's bookkeeping, shared by Client and AsyncClient: which requests
    were taken from the caller's iterable and sent (each with its index as its
    id), which were answered, and the outcomes in request order. Not
    thread-safe: Client holds a lock around the other calls, and passes it to
    next_to_send."""

    def __init__(self, client: Planning[Any], requests: Iterable[RequestLike]) -> None:
        self._client = client
        self._requests = iter(requests)
        self._taken = 0  # requests taken from the iterable
        self._next = 0  # the next index to hand out
        self._slots: dict[int, _Slot] = {}
        self._pending: dict[str, int] = {}  # id -> index: sent, not answered
        self._exhausted = False
        self._ended = False
        self._stream_error: TensorOpError | None = None
        self._request_error: BaseException | None = None  # raised in its turn

    def next_to_send(self, lock: AbstractContextManager[Any]) -> bytes | None:
        """The next request for the stream, serialized; None when there is none.
        Requests too large for one message are set aside for run. Only the
        sender calls this; it reads the caller's iterable outside `lock`, so
        an iterable that waits for earlier outcomes does not stall them."""
        while True:
            with lock:
                if self._exhausted or self._ended:
                    return None
            try:
                item = next(self._requests)
                index = self._taken
                self._taken += 1
                prepared = _prepare_any(item)
            except StopIteration:
                with lock:
                    self._exhausted = True
                return None
            except Exception as e:  # a request that cannot be built: raised in its turn
                with lock:
                    self._request_error = e
                    self._exhausted = True
                return None
            prepared.header.id = str(index)
            pieces, size = prepared.pieces()
            # The stream goes over the target: a request reading a replica's
            # handles goes through run, to that replica.
            local = self._client._route(prepared, size, stream=False) is not _Route.UNARY or any(
                h.replica for _, h in _tensor_reads(prepared.header.inputs)
            )
            with lock:
                if self._ended:
                    return None
                if local:
                    self._slots[index] = _Slot(local=prepared)
                    continue
                self._pending[prepared.header.id] = index
            return b"".join(pieces)

    def answer(self, raw: bytes) -> bool:
        """Files one answer; False when it breaks the protocol (the stream is
        then over)."""
        try:
            meta, tensors = parse_run_response(raw)
        except WireError as e:
            self.fail(protocol_error(f"a RunResponse that does not parse: {e}"))
            return False
        index = self._pending.pop(meta.id, None)
        if index is None:
            self.fail(
                protocol_error(f'an answer for id "{meta.id}", which no unanswered request has')
            )
            return False
        outcome: Result | TensorOpError
        if meta.status.code != 0:
            name = _CODE_NAMES.get(meta.status.code, "UNKNOWN")
            outcome = TensorOpError(name, meta.status.message)
        else:
            try:
                outcome = Result(
                    [_output(self._client, i, t, data) for i, (t, data) in enumerate(tensors)],
                    meta.backend,
                )
            except TensorOpError as e:
                outcome = e
        self._slots[index] = _Slot(outcome)
        return True

    def fail(self, error: TensorOpError) -> None:
        if self._stream_error is None:
            self._stream_error = error

    def end(self) -> None:
        """The stream is over: requests sent and unanswered get its error."""
        self._ended = True
        error = self._stream_error or protocol_error(
            "the stream ended without answering this request"
        )
        for index in self._pending.values():
            self._slots[index] = _Slot(error)
        self._pending.clear()

    def pop_ready(self) -> _Slot | None:
        """The next outcome in request order, if it is known."""
        slot = self._slots.pop(self._next, None)
        if slot is not None:
            self._next += 1
        return slot

    def raise_if_unfinished(self) -> None:
        """After the last outcome: the reason requests were left unsent."""
        if self._request_error is not None:
            raise self._request_error
        if not self._exhausted:
            raise self._stream_error or protocol_error(
                "the stream ended before every request was sent"
            )
