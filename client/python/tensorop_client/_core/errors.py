"""TensorOpError, the one exception a call raises for what the server (or
gRPC) said, and protocol_error for answers that cannot be valid."""

from __future__ import annotations


class TensorOpError(Exception):
    """A call that failed: `code` is the gRPC status code name, `message` its text."""

    __module__ = "tensorop_client.client"  # where users import it from (tracebacks name it)

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def protocol_error(what: str) -> TensorOpError:
    return TensorOpError("INTERNAL", f"server broke the protocol: {what}")
