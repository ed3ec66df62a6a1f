"""W3C Trace Context (https://www.w3.org/TR/trace-context/) for the calls of
Client and AsyncClient, without I/O: the traceparent in force (a context
variable, so each thread and each asyncio task has its own) and the gRPC
metadata it makes.

    with traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"):
        client.run(...)  # sends ("traceparent", that value) in its metadata

tensord joins the trace: its request log line for the call gets "trace_id",
"span_id" (its own) and "parent_span_id" (the span named here), and it
answers initial metadata `traceparent: 00-<trace id>-<its span id>-<flags>`.
A malformed value is sent as given and ignored by tensord, as the
recommendation asks (no log fields, nothing answered)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

TRACEPARENT_KEY = "traceparent"

_traceparent: ContextVar[str | None] = ContextVar("tensorop_client.traceparent", default=None)

Metadata = tuple[tuple[str, str], ...]


@contextmanager
def traceparent(value: str | None) -> Iterator[str | None]:
    """Every call Client and AsyncClient make inside the block (in this
    thread, or this asyncio task and the tasks it creates) sends
    ("traceparent", `value`) in its gRPC metadata; None sends none. Blocks
    nest: the innermost value wins, and the outer one is back on leaving.

    `value` is sent as given (a malformed one is ignored by tensord); it must
    be a str of printable ASCII, which gRPC metadata requires (ValueError,
    before the block runs). Threads started inside do not inherit it
    (contextvars: run them with contextvars.copy_context().run)."""
    if value is not None:
        if not isinstance(value, str):
            raise TypeError(f"traceparent is a str, not {type(value).__name__}")
        if not all(" " <= c <= "~" for c in value):
            raise ValueError(f"traceparent {value!r}: gRPC metadata takes printable ASCII only")
    token = _traceparent.set(value)
    try:
        yield value
    finally:
        _traceparent.reset(token)


def current_traceparent() -> str | None:
    """The traceparent the calls made here would send, or None."""
    return _traceparent.get()


def new_traceparent() -> str:
    """A fresh traceparent of version 00 starting a sampled trace:
    "00-<32 random hex digits>-<16 random hex digits>-01" (neither id all
    zeros, which the recommendation makes invalid)."""
    trace_id = span_id = ""
    while not trace_id.strip("0"):
        trace_id = secrets.token_hex(16)
    while not span_id.strip("0"):
        span_id = secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01"


def metadata_of(value: str | None) -> Metadata | None:
    """The metadata of a call under traceparent(`value`): None for None
    (gRPC's default: none)."""
    return None if value is None else ((TRACEPARENT_KEY, value),)


def call_metadata() -> Metadata | None:
    """The metadata of a call starting now: ("traceparent", value) inside
    traceparent(value), else None."""
    return metadata_of(_traceparent.get())
