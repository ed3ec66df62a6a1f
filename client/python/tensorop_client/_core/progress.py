"""Progress callbacks: the bytes of tensor data one call has moved so far and
in all, counted as uploads are taken and answers arrive."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

# progress(done, total): bytes of tensor data moved so far and in all, counting
# the inputs sent and the outputs received.
ProgressFn = Callable[[int, int], None]


class _Progress:
    """Counts the bytes of one call for its progress callback. `total` starts
    with the inputs and grows by each output's byte_length as its header
    arrives, so both numbers only grow and the last call has done == total."""

    def __init__(self, callback: ProgressFn | None, total: int = 0, done: int = 0) -> None:
        self.callback = callback
        self.total = total
        self.done = done

    def add(self, done: int = 0, total: int = 0) -> None:
        self.done += done
        self.total += total
        if self.callback is not None:
            self.callback(self.done, self.total)


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
