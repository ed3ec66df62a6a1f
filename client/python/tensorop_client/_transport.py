"""What Client and AsyncClient share over gRPC: the constructor and its
options, the channels to the target and to single replicas (made on first
use), gRPC's errors as TensorOpErrors, and the public methods made from the
plans (_core.plans) that each transport drives its own way."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.plans import Call, Planning
from tensorop_client._core.routing import Target
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client._proto import tensorop_pb2_grpc as pb_grpc
from tensorop_client.channel import (
    channel_credentials,
    channel_options,
    channel_target,
    explain_security_error,
    replica_channel_options,
    target_authority,
)

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def _status_error(
    error: grpc.RpcError, tls: bool = False, via: _Via | None = None
) -> TensorOpError:
    # Calls' RpcErrors are also grpc.Call objects (grpc.aio's AioRpcError alike).
    call: grpc.Call = error  # type: ignore[assignment]
    code = call.code().name
    # TLS and token failures say which part failed.
    message = explain_security_error(code, call.details() or "", tls)
    # A replica that answered UNAVAILABLE itself did so over a ready
    # connection; any other state means the call never got through.
    if via is not None and via.replica and code == "UNAVAILABLE" and not via.calls.ready():
        message = f"replica {via.replica}{via.holding} is unreachable: {message}"
    return TensorOpError(code, message)


_METHOD = "/tensorop.v1.TensorOp/"


class _Calls:
    """One channel's calls (grpc or grpc.aio): raw-bytes ones, requests framed
    by tensorop_client.wire and answers parsed there without protobuf copying
    the tensors' bytes, and the stub for the small unary ones. `ready` says
    whether its connection is up (replica channels)."""

    def __init__(self, channel: Any, ready: Callable[[], bool] = lambda: True) -> None:
        self.run = channel.unary_unary(_METHOD + "Run")
        self.run_stream = channel.unary_stream(_METHOD + "RunStream")
        self.run_chunked = channel.stream_stream(_METHOD + "RunChunked")
        self.run_bidi = channel.stream_stream(_METHOD + "RunBidi")
        self.put = channel.stream_unary(
            _METHOD + "Put", response_deserializer=pb.TensorHandle.FromString
        )
        self.fetch = channel.unary_stream(_METHOD + "Fetch")
        self.run_chain = channel.unary_stream(_METHOD + "RunChain")
        self.stub = pb_grpc.TensorOpStub(channel)
        self.release = self.stub.Release
        self.list_handles = self.stub.ListHandles
        self.channel = channel
        self.ready = ready


@dataclass(frozen=True)
class _Via:
    """Where a call goes: the target's channel, or the one replica holding the
    handles it reads (`holding`: " holding 0123abcd...", or "" for a Put)."""

    calls: _Calls
    replica: str = ""
    holding: str = ""


class _ReplicaChannels:
    """A client's channels to single replicas (handle calls), by replica
    address, each made on first use. Once `close` took them, asking for one
    raises ValueError, as a call on a closed gRPC channel does, rather than
    opening a channel nothing would close."""

    def __init__(self) -> None:
        self._calls: dict[str, _Calls] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, replica: str, make: Callable[[str], _Calls]) -> _Calls:
        with self._lock:
            if self._closed:
                raise ValueError("Cannot invoke RPC on closed channel!")
            calls = self._calls.get(replica)
            if calls is None:
                calls = self._calls[replica] = make(replica)
            return calls

    def close(self) -> list[_Calls]:
        """Every channel made so far, for the caller to close; none later."""
        with self._lock:
            self._closed = True
            calls = list(self._calls.values())
            self._calls.clear()
            return calls


@contextmanager
def _cancelled_on_error(call: Any) -> Iterator[None]:
    """Cancels `call` when reading its answer fails on our side (a broken
    stream, a failed progress callback, a cancelled task): that error is the
    one worth reporting, and the call ends here. gRPC's own errors end it."""
    try:
        yield
    except grpc.RpcError:
        raise
    except BaseException:
        call.cancel()
        raise


class _Transport(Planning[R]):
    """A client over gRPC channels, `_grpc` being grpc (Client) or grpc.aio
    (AsyncClient), whose RemoteTensors are R."""

    _grpc: Any  # the module whose channels this transport opens

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in vars(cls).items():
            if hasattr(value, "_plan"):  # a method _public made: named as the class's
                value.__qualname__ = f"{cls.__qualname__}.{name}"

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
        """`target`: "host:port", a comma-separated list of replicas' IP
        addresses ("10.0.0.1:50051,10.0.0.2:50051") or a gRPC target such as
        "dns:///tensord-headless:50051" or "unix:///run/tensord/tensord.sock";
        calls go round-robin over the healthy replicas and are retried on
        UNAVAILABLE (ValueError for a malformed list). `timeout`: seconds per
        call (None: no deadline).

        `max_message_bytes`: the largest message sent or received, which
        should be tensord's --max_message_bytes (both default to 64 MiB).
        `run` sends a request larger than that with RunChunked in pieces of
        `chunk_bytes`, and takes an answer that may be larger through the
        streamed path, so any size works; if the server's limit is lower
        than ours and it refuses a message, the call is repeated that way.
        Inputs or answers over `stream_threshold_bytes` take those paths too,
        being faster there than in one message.

        Transport security (tensorop_client.channel.channel_credentials): `tls`,
        `ca_file` (the CA of the server's certificate; default: the system's
        roots), `cert_file` and `key_file` (mutual TLS), `token_file` (a file
        holding the bearer token); what is left None comes from TENSOROP_TLS,
        TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE and
        TENSOROP_TOKEN_FILE, and any file implies TLS. ValueError names a file
        that cannot be read."""
        super().__init__(max_message_bytes, chunk_bytes, stream_threshold_bytes)
        self._target = channel_target(target)
        self._options = channel_options(max_message_bytes)
        self._credentials = channel_credentials(
            tls=tls, ca_file=ca_file, cert_file=cert_file, key_file=key_file, token_file=token_file
        )
        self._tls = self._credentials is not None
        # Replica channels present the target's authority over TLS, so its
        # certificate verifies when a pod is reached by its IP.
        self._replica_options = replica_channel_options(
            max_message_bytes, target_authority(target) if self._tls else None
        )
        self._replicas = _ReplicaChannels()
        self._timeout = timeout
        self._channel = self._open(self._target, self._options)
        self._calls = _Calls(self._channel)
        self._opened()

    def _opened(self) -> None:
        """Called once the target's channel is open."""

    def _open(self, target: str, options: list[tuple[str, Any]]) -> Any:
        if self._credentials is None:
            return self._grpc.insecure_channel(target, options=options)
        return self._grpc.secure_channel(target, self._credentials, options=options)

    def _ready(self, channel: Any) -> Callable[[], bool]:
        """Whether `channel`'s connection is up, asked when a call fails."""
        raise NotImplementedError

    def _replica_calls(self, replica: str) -> _Calls:
        """A new channel to one replica (replica_channel_options), its calls."""
        channel = self._open(replica, self._replica_options)
        return _Calls(channel, self._ready(channel))

    def _via(self, to: Target) -> _Via:
        """The channel for a call to `to`: the target's, or the replica's,
        made on first use and kept until the client closes."""
        if not to.replica:
            return _Via(self._calls)
        calls = self._replicas.get(to.replica, self._replica_calls)
        holding = f" holding {to.handle_id[:8]}..." if to.handle_id else ""
        return _Via(calls, to.replica, holding)

    @contextmanager
    def _errors(self, via: _Via, call: Call) -> Iterator[None]:
        """gRPC's errors as TensorOpErrors (_status_error). A call whose
        streamed request failed (call.failed: a progress callback raised, and
        gRPC cancelled the call) raises that failure instead; grpc.aio ends
        such a call as cancelled."""
        try:
            yield
        except grpc.RpcError as e:
            if call.failed:
                raise call.failed[0] from None
            raise _status_error(e, self._tls, via) from None
        except (TensorOpError, asyncio.CancelledError):
            if call.failed:
                raise call.failed[0] from None
            raise


def _public(method: F, plan: Callable[..., Any], doc: str | None, returns: str | None) -> F:
    """`method`, a transport's method driving `plan`, described as the plan:
    its name, `doc` (default: the plan's), and the plan's signature, `self`
    first and returning `returns` (default: what the plan's Plan[...] holds)."""
    signature = inspect.signature(plan)
    client, *parameters = signature.parameters.values()
    annotation = str(signature.return_annotation)
    if returns is None and annotation.startswith("Plan[") and annotation.endswith("]"):
        returns = annotation[len("Plan[") : -1]
    method.__name__ = plan.__name__
    method._plan = plan  # type: ignore[attr-defined]  # an attribute of our own on the method
    method.__doc__ = plan.__doc__ if doc is None else doc
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]  # what inspect.signature reads
        parameters=[client.replace(name="self", annotation=inspect.Parameter.empty), *parameters],
        return_annotation=inspect.Signature.empty if returns is None else returns,
    )
    return method
