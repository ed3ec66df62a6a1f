"""Tensors kept on the server, as the client sees them: _Remote (what
RemoteTensor and AsyncRemoteTensor share: the handle and its layout), the
handle arguments of Fetch, Release and ListHandles, and requests naming a
handle instead of carrying bytes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tensorop_client._core.errors import protocol_error
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import numpy_dtype


class _Remote:
    """What RemoteTensor and AsyncRemoteTensor share: the handle and its layout."""

    def __init__(self, client: Any, handle: pb.TensorHandle) -> None:
        self._client = client
        self.handle = handle

    @property
    def id(self) -> str:
        return self.handle.id

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.handle.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.handle.sizes)

    @property
    def strides(self) -> tuple[int, ...]:
        """In elements (numpy's are in bytes)."""
        return tuple(self.handle.strides)

    def __repr__(self) -> str:
        # Only the id's first 8 characters: the id is the access right.
        return (
            f"{type(self).__name__}(id='{self.id[:8]}...', dtype={self.dtype}, "
            f"shape={self.shape}, strides={self.strides})"
        )


# What the handle calls take: RemoteTensors or their ids.
HandleLike = str | _Remote


def _handle_id(tensor: HandleLike) -> str:
    return tensor.id if isinstance(tensor, _Remote) else tensor


def _by_replica(tensors: HandleLike | Iterable[HandleLike]) -> dict[str, list[str]]:
    """Handle ids by the replica holding them ("": an id alone, or a handle of
    an older server, which names none: the target's)."""
    if isinstance(tensors, (str, _Remote)):
        tensors = [tensors]
    groups: dict[str, list[str]] = {}
    for t in tensors:
        replica = t.handle.replica if isinstance(t, _Remote) else ""
        groups.setdefault(replica, []).append(_handle_id(t))
    return groups


def _refer(tensor: pb.Tensor, handle: pb.TensorHandle) -> None:
    """Makes `tensor` name the handle (its id, and its replica to route the
    call by), its layout beside it (the handle's, so the answer's size can be
    bounded)."""
    tensor.dtype = handle.dtype
    tensor.sizes[:] = handle.sizes
    tensor.strides[:] = handle.strides
    tensor.handle.id = handle.id
    tensor.handle.replica = handle.replica


def _fetch_request(tensor: HandleLike, strides: Sequence[int] | None) -> bytes:
    request = pb.FetchRequest(id=_handle_id(tensor), strides=[int(s) for s in strides or ()])
    return request.SerializeToString()


def _next_page_token(page: pb.ListHandlesResponse, token: str) -> str:
    if page.next_page_token and page.next_page_token == token:
        raise protocol_error(f'ListHandles answered page token "{token}" with itself')
    return page.next_page_token
