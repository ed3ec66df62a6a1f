"""Shared memory for clients on tensord's host or pod (docs/colocated.md).

A SharedRegion is a POSIX shared memory object (multiprocessing.shared_memory)
registered with tensord under a name. Its `ndarray` views are ordinary numpy
arrays backed by the region; passed to `run` as inputs, tensord reads them in
place (with their strides), and passed as outputs, tensord writes the results
straight into them (with their strides): no tensor bytes travel over gRPC.

    with Client("unix:///run/tensord/tensord.sock") as client, \\
            SharedRegion(client, "frames", 64 << 20) as region:
        x = region.ndarray((4096, 2048), np.float32)           # offset 0
        y = region.ndarray((2048, 2048), np.float32, offset=x.nbytes)
        x[...] = frames
        region.run("slice", {"input": x},
                   {"offsets": [0, 0], "window_sizes": [4096, 2048], "window_strides": [2, 1]},
                   outputs=[y])
        y  # the result, written by tensord

tensord unmaps a region no request used for --shared_memory_idle_seconds, so
one left behind by a client that died goes away; `close` unregisters it and
unlinks the object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from multiprocessing import shared_memory
from types import TracebackType
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
from google.protobuf.message import Message

from tensorop_client._core.shapes import DERIVED_SIZES, derived_output_sizes, source_input
from tensorop_client._core.trace import call_metadata
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client._transport import _status_error
from tensorop_client.client import BACKENDS, Attrs, Client, Result, set_attrs
from tensorop_client.tensors import wire_dtype


def register_shared_memory(client: Client, region: str, key: str, byte_size: int = 0) -> None:
    """Maps the shared memory object `key` in tensord as `region` (byte_size 0: all of it)."""
    _call(
        client,
        "RegisterSharedMemory",
        pb.RegisterSharedMemoryRequest(region=region, key=key, byte_size=byte_size),
    )


def unregister_shared_memory(client: Client, region: str) -> None:
    """Unmaps `region`; TensorOpError FAILED_PRECONDITION while a request uses it."""
    _call(client, "UnregisterSharedMemory", pb.UnregisterSharedMemoryRequest(region=region))


def shared_memory_status(client: Client, region: str = "") -> pb.SharedMemoryStatusResponse:
    """Every region tensord maps, or the one named (which renews its lease)."""
    response: pb.SharedMemoryStatusResponse = _call(
        client, "SharedMemoryStatus", pb.SharedMemoryStatusRequest(region=region)
    )
    return response


def _call(client: Client, method: str, request: Message) -> Any:
    try:
        return getattr(client._calls.stub, method)(
            request, timeout=client._timeout, metadata=call_metadata()
        )
    except grpc.RpcError as e:
        raise _status_error(e, client._tls) from None


class SharedRegion:
    """A shared memory object of `byte_size` bytes created here and registered
    with tensord as `name`."""

    def __init__(self, client: Client, name: str, byte_size: int) -> None:
        self._client = client
        self.name = name
        self._shm = shared_memory.SharedMemory(create=True, size=byte_size)
        assert self._shm.buf is not None  # None only once closed
        self._base = np.frombuffer(self._shm.buf, dtype=np.uint8)
        self._address = self._base.__array_interface__["data"][0]
        self.byte_size = byte_size
        try:
            register_shared_memory(client, name, self._shm.name, byte_size)
        except BaseException:
            self._release()
            raise

    @property
    def key(self) -> str:
        """The object's name in /dev/shm."""
        return self._shm.name

    def ndarray(
        self,
        shape: Sequence[int],
        dtype: npt.DTypeLike,
        offset: int = 0,
        strides: Sequence[int] | None = None,
    ) -> np.ndarray:
        """A writeable array of `shape` in the region at byte `offset`, packed or
        with `strides` in elements."""
        dt = np.dtype(dtype)
        byte_strides = None if strides is None else tuple(int(s) * dt.itemsize for s in strides)
        return np.ndarray(
            tuple(shape), dtype=dt, buffer=self._shm.buf, offset=offset, strides=byte_strides
        )

    def _ref(self, array: np.ndarray, what: str) -> tuple[pb.SharedMemoryRef, list[int]]:
        """Where `array` lies in the region, and its strides in elements."""
        itemsize = array.dtype.itemsize
        offset = array.__array_interface__["data"][0] - self._address
        strides = []
        for i, s in enumerate(array.strides):
            if s < 0 or s % itemsize:
                raise ValueError(
                    f"{what}: stride {s} bytes of dimension {i} is not a "
                    f"non-negative multiple of the element size {itemsize}"
                )
            strides.append(s // itemsize)
        extent = (
            0
            if 0 in array.shape
            else (1 + sum((n - 1) * s for n, s in zip(array.shape, strides, strict=True)))
            * itemsize
        )
        if offset < 0 or offset + extent > self.byte_size:
            raise ValueError(f"{what}: the array does not lie in region {self.name!r}")
        return pb.SharedMemoryRef(region=self.name, offset=offset, byte_length=extent), strides

    def request(
        self,
        op: str,
        inputs: Mapping[str, np.ndarray],
        attrs: Attrs | None = None,
        outputs: Sequence[np.ndarray] = (),
        backend: str = "auto",
    ) -> pb.RunRequest:
        """A RunRequest reading `inputs` and writing `outputs`, arrays of this region."""
        request = pb.RunRequest(backend=BACKENDS[backend])  # type: ignore[arg-type]  # a Backend value
        set_attrs(request, op, attrs)
        for name, array in inputs.items():
            ref, strides = self._ref(array, f"inputs[{name!r}]")
            tensor = request.inputs[name]
            tensor.dtype = wire_dtype(array.dtype)  # type: ignore[assignment]  # a DType value
            tensor.sizes.extend(array.shape)
            tensor.strides.extend(strides)
            tensor.shared_memory.CopyFrom(ref)
        for i, array in enumerate(outputs):
            ref, strides = self._ref(array, f"outputs[{i}]")
            desc = request.outputs.add()
            desc.sizes.extend(array.shape)
            desc.strides.extend(strides)
            desc.shared_memory.CopyFrom(ref)
        return request

    def run(
        self,
        op: str,
        inputs: Mapping[str, np.ndarray],
        attrs: Attrs | None = None,
        outputs: Sequence[np.ndarray] = (),
        backend: str = "auto",
    ) -> Result:
        """Run with every input read from, and every output written into, this
        region: the Result's outputs are the `outputs` arrays, filled in."""
        try:
            response = self._client._calls.stub.Run(
                self.request(op, inputs, attrs, outputs, backend),
                timeout=self._client._timeout,
                metadata=call_metadata(),
            )
        except grpc.RpcError as e:
            raise _status_error(e, self._client._tls) from None
        return Result(list(outputs), response.backend)

    def close(self) -> None:
        """Unregisters the region (if tensord still has it) and unlinks the object."""
        if self._shm is None:
            return
        try:
            unregister_shared_memory(self._client, self.name)
        except Exception as e:  # noqa: BLE001 - an expired region is fine
            if getattr(e, "code", "") != "NOT_FOUND":
                raise
        finally:
            self._release()

    def _release(self) -> None:
        del self._base
        self._shm.unlink()
        try:
            self._shm.close()
        except BufferError:
            pass  # arrays from ndarray() still use it: unmapped once they are gone
        self._shm = None  # type: ignore[assignment]  # closed: close() checks for None

    def __enter__(self) -> SharedRegion:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# The operators whose one output's sizes run_request_in_region derives here:
# all whose sizes follow from the input but strided_slice (asked of the server).
_FROM_INPUT = tuple(op for op in DERIVED_SIZES if op != "strided_slice")

_ALIGN = 64  # every tensor starts at a multiple: any element size divides it


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _output_room(desc: pb.OutputDesc, itemsize: int) -> int | None:
    if not desc.sizes:
        return None
    if any(n <= 0 for n in desc.sizes):
        return 0
    if len(desc.strides) == len(desc.sizes):
        return (
            1 + sum((n - 1) * max(s, 0) for n, s in zip(desc.sizes, desc.strides, strict=True))
        ) * itemsize
    return int(np.prod(desc.sizes, dtype=object)) * itemsize


def run_request_in_region(client: Client, request: pb.RunRequest, name: str) -> Result:
    """Runs `request` (unary Run) with its inputs copied into a fresh region and
    its outputs written by tensord into the same region, and returns the outputs
    as arrays read from it: the answer client.run_request(request) gives, through
    shared memory. A request without outputs gets them described (scatter:
    the input's sizes; transpose, reshape, expand, tile, gather,
    gather_elements, join and pad: the sizes that follow from the inputs,
    shapes.derived_output_sizes; strided_slice: a plain Run's); outputs
    without sizes get room for as many elements as the inputs hold. The
    region is unregistered and unlinked afterwards."""
    from tensorop_client._core.results import _decode  # the client's layout checks

    shared = pb.RunRequest()
    shared.CopyFrom(request)
    # Outputs left to the server get a description, so they too go to the
    # region: scatter's, transpose's, reshape's, expand's, tile's, the
    # gathers', join's and pad's sizes follow from the inputs (derived_output_sizes;
    # a request it refuses goes without, for the server to name what is
    # wrong), strided_slice's are asked of the server with a plain Run.
    op = shared.WhichOneof("op")
    if not shared.outputs:
        if op in _FROM_INPUT:
            inputs = {name: tensor.sizes for name, tensor in shared.inputs.items()}
            sizes = derived_output_sizes(op, getattr(shared, op), inputs)
            if sizes is not None:
                shared.outputs.add().sizes.extend(sizes)
        elif op == "strided_slice":
            try:
                probe = client._calls.stub.Run(
                    request, timeout=client._timeout, metadata=call_metadata()
                )
                for t in probe.outputs:
                    shared.outputs.add().sizes.extend(t.sizes)
            except grpc.RpcError:
                pass  # the shared-memory run reports the error
    end = 0
    elements = 0
    itemsize = 1
    placed: list[tuple[str, int]] = []
    for key in sorted(shared.inputs):
        tensor = shared.inputs[key]
        size = max(1, np.dtype(_itemsize_dtype(tensor.dtype)).itemsize)
        if key == source_input(op):  # the outputs' dtype
            itemsize = size
        elements += len(tensor.data) // size
        end = _align(end)
        placed.append((key, end))
        end += len(tensor.data)
    rooms: list[tuple[int, int]] = []
    for desc in shared.outputs:
        room = _output_room(desc, itemsize)
        if room is None:
            room = max(elements, 1) * itemsize
        end = _align(end)
        rooms.append((end, room))
        desc.shared_memory.CopyFrom(pb.SharedMemoryRef(region=name, offset=end, byte_length=room))
        end += room
    with SharedRegion(client, name, max(end, 1)) as region:
        buf = region._shm.buf
        assert buf is not None  # None only once closed
        for key, offset in placed:
            tensor = shared.inputs[key]
            buf[offset : offset + len(tensor.data)] = tensor.data
            tensor.shared_memory.CopyFrom(
                pb.SharedMemoryRef(region=name, offset=offset, byte_length=len(tensor.data))
            )
            tensor.ClearField("data")
        try:
            response = client._calls.stub.Run(
                shared, timeout=client._timeout, metadata=call_metadata()
            )
        except grpc.RpcError as e:
            raise _status_error(e, client._tls) from None
        outputs = []
        for i, t in enumerate(response.outputs):
            if i >= len(rooms):  # not described: inline
                outputs.append(_decode(i, t.dtype, t.sizes, t.strides, t.data))
                continue
            offset, room = rooms[i]
            data = bytes(buf[offset : offset + room])  # a copy: the region goes away
            outputs.append(_decode(i, t.dtype, t.sizes, t.strides, data[: _extent(t)]))
    return Result(outputs, response.backend)


def _itemsize_dtype(wire: int) -> np.dtype:
    from tensorop_client.tensors import numpy_dtype

    try:
        return numpy_dtype(wire)
    except Exception:  # noqa: BLE001 - an invalid dtype is the server's to refuse
        return np.dtype("u1")


def _extent(tensor: pb.Tensor) -> int:
    if any(n == 0 for n in tensor.sizes):
        return 0
    elements = 1 + sum((n - 1) * s for n, s in zip(tensor.sizes, tensor.strides, strict=False))
    return elements * _itemsize_dtype(tensor.dtype).itemsize
