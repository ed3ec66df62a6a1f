"""Chains, built without I/O: Step and StepRef (what Client.chain takes), and
the RunChainRequest they make, its inputs' bytes kept beside it as in
_core.requests, with what it takes to fit one message (inputs to Put
instead)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from tensorop_client._core.errors import TensorOpError
from tensorop_client._core.handles import _refer, _Remote
from tensorop_client._core.requests import (
    Attrs,
    OutputLike,
    _backend,
    _output_count,
    _output_desc,
    _set_input,
    derive_slice_output,
    set_attrs,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import WireTensor
from tensorop_client.wire import encode_chain_request, pieces_bytes


@dataclass(eq=False)  # compared and hashed by identity: a chain finds its steps so
class Step:
    """One operator of a chain (Client.chain), with run's arguments. Each input
    is an array, a RemoteTensor, or an earlier step's output: `step.output(k)`
    (or StepRef), or the Step itself for its only output."""

    op: str
    inputs: Mapping[str, npt.ArrayLike | _Remote | StepRef | Step]
    attrs: Attrs | None = None
    outputs: Sequence[OutputLike] | None = None

    def output(
        self, index: int = 0, *, strides: Sequence[int] | None = None, keep: bool = False
    ) -> StepRef:
        """Output `index` of this step, as a later step's input or as a chain
        result (where `strides` and `keep` apply: see StepRef)."""
        return StepRef(self, index, strides, keep)

    def output_count(self) -> int:
        """How many outputs it makes (a slice without `outputs`: its whole
        window, one output; derive_slice_output)."""
        if self.op == "slice" and not self.outputs:
            return 1
        return _output_count(self.op, self.outputs or ())


@dataclass(frozen=True)
class StepRef:
    """Output `output` of a chain step: `step` is the Step or its index in the
    chain's steps. As an input it is read on the server; as a chain result it
    comes back as an array (in `strides`, elements, when given: they become
    the step output's strides) or, with `keep`, stays on the server and comes
    back as a RemoteTensor."""

    step: int | Step
    output: int = 0
    strides: Sequence[int] | None = None
    keep: bool = False


# A chain step: a Step, a mapping of its keyword arguments or a tuple of its
# positional ones (run_many's forms of run's arguments).
StepLike = Step | Mapping[str, Any] | Sequence[Any]
# A chain result: a StepRef, a (step, output) pair, or a Step for every output.
ChainResultLike = StepRef | Step | tuple[int | Step, int]


@dataclass
class _PreparedChain:
    """A RunChainRequest ready to send: itself without its input tensors'
    bytes, and those bytes by (step, input name), as _Prepared. It goes in one
    message: inputs that would take it over the limit, or its data past the
    stream threshold, go as handles instead."""

    header: pb.RunChainRequest
    data: dict[tuple[int, str], memoryview]

    def payload(self) -> bytes:
        """The serialized request: the one copy of the inputs' bytes on our side."""
        return b"".join(encode_chain_request(self.header, self.data))

    @property
    def data_bytes(self) -> int:
        return sum(view.nbytes for view in self.data.values())

    def next_to_put(self, limit: int, data_limit: int) -> tuple[int, str] | None:
        """The input to Put, so that the request fits `limit` bytes and carries
        at most `data_limit` of tensor data (past a few MiB, gRPC moves one
        large message much slower than a Put's chunks): None when it does,
        else the largest one still carrying bytes."""
        size = pieces_bytes(encode_chain_request(self.header, self.data))
        if size <= limit and self.data_bytes <= data_limit:
            return None
        carried = [key for key, view in self.data.items() if view.nbytes]
        if not carried:
            raise TensorOpError(
                "RESOURCE_EXHAUSTED",
                f"the RunChainRequest takes {size} bytes without its tensors' data, more than "
                f"the message limit of {limit} bytes (max_message_bytes)",
            )
        return max(carried, key=lambda key: self.data[key].nbytes)

    def wire(self, key: tuple[int, str]) -> WireTensor:
        """An input as Put takes it: its layout as written, and its bytes."""
        tensor = self.header.steps[key[0]].inputs[key[1]].tensor
        return WireTensor(
            tensor.dtype, tuple(tensor.sizes), tuple(tensor.strides) or None, self.data[key]
        )

    def refer(self, key: tuple[int, str], handle: pb.TensorHandle) -> int:
        """Names `handle` for the input instead of sending it; its bytes."""
        _refer(self.header.steps[key[0]].inputs[key[1]].tensor, handle)
        return self.data.pop(key).nbytes


class _StepIndex:
    """Where each Step object of a chain stands."""

    def __init__(self, steps: Sequence[Any]) -> None:
        self._positions = {id(step): i for i, step in enumerate(steps) if isinstance(step, Step)}

    def position(self, step: int | Step) -> int:
        if not isinstance(step, Step):
            return int(step)  # the server judges the index
        position = self._positions.get(id(step))
        if position is None:
            raise ValueError(f"a StepRef names a Step that is not in the chain: {step.op}")
        return position


def _as_step(step: StepLike) -> Step:
    if isinstance(step, Step):
        return step
    if isinstance(step, Mapping):
        return Step(**step)
    return Step(*step)


def _input_source(source: pb.ChainInput, value: Any, steps: _StepIndex) -> memoryview | None:
    """One input of a chain step: an earlier step's output, or a tensor
    (_set_input: its bytes, or None for a handle)."""
    if isinstance(value, Step):
        count = value.output_count()
        if count != 1:
            raise ValueError(
                f"a {value.op} step with {count} outputs as an input: name one with step.output(k)"
            )
        value = value.output(0)
    if isinstance(value, StepRef):
        if value.strides is not None or value.keep:
            raise ValueError("a step output read as an input takes no strides or keep")
        source.step.step = steps.position(value.step)
        source.step.output = int(value.output)
        return None
    return _set_input(source.tensor, value)


def _result_refs(
    results: Sequence[ChainResultLike] | None, header: pb.RunChainRequest
) -> Iterator[tuple[int, StepRef]]:
    """The StepRefs a chain's results stand for, each with the position of
    the item that named it; None: every output of the last step."""
    if results is None:
        last = header.steps[-1] if header.steps else pb.ChainStep()
        count = _output_count(last.WhichOneof("op"), last.outputs)
        results = [(len(header.steps) - 1, k) for k in range(count)]
    for j, item in enumerate(results):
        if isinstance(item, StepRef):
            yield j, item
        elif isinstance(item, Step):
            yield from ((j, item.output(k)) for k in range(item.output_count()))
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            yield j, StepRef(*item)
        else:
            raise ValueError(
                f"results[{j}]: expected a StepRef, a Step or a (step, output) pair, got {item!r}"
            )


def _prepare_chain(
    steps: Sequence[StepLike],
    results: Sequence[ChainResultLike] | None,
    backend: str,
    device_index: int | None,
    request_id: str,
    keep: bool,
) -> _PreparedChain:
    header = pb.RunChainRequest(id=request_id, backend=_backend(backend))  # type: ignore[arg-type]  # a Backend value
    if device_index is not None:
        header.device_index = device_index
    steps = list(steps)
    index = _StepIndex(steps)
    data: dict[tuple[int, str], memoryview] = {}
    for i, item in enumerate(steps):
        message = header.steps.add()
        try:
            step = _as_step(item)
            set_attrs(message, step.op, step.attrs)
            message.outputs.extend(_output_desc(o) for o in step.outputs or ())
            derive_slice_output(message)
            for name, value in step.inputs.items():
                payload = _input_source(message.inputs[name], value, index)
                if payload is not None:
                    data[(i, name)] = payload
        except (ValueError, TypeError) as e:
            raise type(e)(f"steps[{i}]: {e}") from None
    for j, ref in _result_refs(results, header):
        try:
            step_index = index.position(ref.step)
        except ValueError as e:
            raise ValueError(f"results[{j}]: {e}") from None
        header.results.add(
            step=step_index,
            output=int(ref.output),
            strides=[int(s) for s in ref.strides or ()],
            keep=ref.keep or keep,
        )
    return _PreparedChain(header, data)


def make_chain_request(
    steps: Sequence[StepLike],
    results: Sequence[ChainResultLike] | None = None,
    backend: str = "auto",
    device_index: int | None = None,
    *,
    id: str = "",
    keep: bool = False,
) -> pb.RunChainRequest:
    """The RunChainRequest Client.chain sends for these arguments (its
    tensors hold copies of the inputs' bytes)."""
    prepared = _prepare_chain(steps, results, backend, device_index, id, keep)
    return pb.RunChainRequest.FromString(prepared.payload())
