"""Progress callbacks: the bytes of tensor data one call has moved so far and
in all, counted as uploads are taken and answers arrive."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

# progress(done, total): bytes of tensor data moved so far and in all, counting
# the inputs sent and the outputs received.
ProgressFn = Callable[[int, int], None]


class _Progress:
    """Counts the bytes of one call for its progress callback. `total` starts
    with the inputs and, where the caller knows them before the call
    (`answer`: shapes.answer_bytes), the outputs, so that it is the same in
    every report; else it grows by each output's byte_length as its header
    arrives. `done` only grows, and the last report has done == total (an
    answer of other sizes than counted, which a valid answer never is,
    moves `total` to what it carries)."""

    def __init__(
        self, callback: ProgressFn | None, total: int = 0, done: int = 0, answer: int | None = None
    ) -> None:
        self.callback = callback
        self.total = total + (answer or 0)
        self.done = done
        # Output bytes counted in `total` before their headers arrived (None:
        # none were; headers add theirs).
        self._unannounced = answer

    def add(self, done: int = 0, total: int = 0) -> None:
        self.done += done
        self.total += total
        if self.callback is not None:
            self.callback(self.done, self.total)

    def announce(self, nbytes: int) -> bool:
        """An output of `nbytes` announced (its header, or a unary answer's
        tensor): counted into `total` unless it was counted up front. Reports
        nothing; True when `total` changed."""
        if self._unannounced is None:
            self.total += nbytes
            return nbytes != 0
        counted = min(nbytes, self._unannounced)
        self._unannounced -= counted
        self.total += nbytes - counted
        return nbytes != counted

    def settle(self) -> bool:
        """The answer is complete: output bytes counted up front that it did
        not carry leave `total` (never, when the count was right). Reports
        nothing; True when `total` changed."""
        if not self._unannounced:
            return False
        self.total -= self._unannounced
        self._unannounced = 0
        return True


def _counted(
    parts: Iterable[tuple[bytes, int]], counter: _Progress, failed: list[Exception]
) -> Iterator[bytes]:
    """The parts of an upload (each with the data bytes it carries), counted as
    gRPC takes them: it takes the next part once the last one was written, so
    the memory in flight stays a chunk or two. An exception raised here (the
    progress callback's) goes into `failed` for the caller to raise, as gRPC
    only cancels the call."""
    try:
        counter.add()
        for part, data_bytes in parts:
            yield part
            if data_bytes:
                counter.add(done=data_bytes)
    except Exception as e:
        failed.append(e)
        raise
