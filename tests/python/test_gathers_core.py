"""Gather's and GatherElements' methods (Client.take, gather,
take_along_axis, gather_elements) without a server: NumPy's indices and
axes as the operators' inputs and attributes, the steps a RemoteTensor
needs around the gather, NumPy's errors before sending, and output sizes
derived from both inputs. Beside test_operators_core.py, the other
operators' methods."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, make_chain_request, make_request
from tensorop_client._core import gathers
from tensorop_client._core.requests import answer_bytes_bound
from tensorop_client._core.routing import Target
from tensorop_client._core.shapes import (
    answer_bytes,
    chain_answer_bytes,
    derived_sizes,
    gather_elements_sizes,
    gather_sizes,
)
from tensorop_client._proto import tensorop_pb2 as pb
from test_core import FakeClient, FakeRemote, finish, handle, response, start


def _sent(call: Any) -> pb.RunRequest:
    assert call.method == "run"
    return pb.RunRequest.FromString(call.request)


def test_take_sends_numpys_indices_and_axis_and_derives_the_output() -> None:
    client = FakeClient()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for indices, axis, sizes, sent_axis, index_sizes, index_dtype in [
        ([[0, 2]], -1, [2, 3, 4], 2, [1, 2], pb.INT64),  # a list: NumPy's intp, int64
        ([5, -1], None, [24], 0, [2], pb.INT64),  # None: x flattened here
        (np.array([2, 0], np.int8), 1, [2, 3, 4], 1, [2], pb.INT64),  # widened
        (np.array([[1], [0]], np.uint32), -3, [2, 3, 4], 0, [2, 1], pb.UINT32),  # as it is
        (np.array([3], np.uint64), 2, [2, 3, 4], 2, [1], pb.UINT64),
        (np.array([-1, 0], np.int32), 0, [2, 3, 4], 0, [2], pb.INT32),
    ]:
        sent = _sent(start(gathers.take(client, x, indices, axis)))
        assert sent.WhichOneof("op") == "gather" and sent.gather.axis == sent_axis
        assert list(sent.inputs["input"].sizes) == sizes and not sent.outputs
        got = sent.inputs["indices"]
        assert (list(got.sizes), got.dtype) == (index_sizes, index_dtype)
        expected = np.take(x, np.asarray(indices).astype(np.int64), axis)
        assert answer_bytes(sent) == answer_bytes_bound(sent) == expected.nbytes
    # gather: the operator's default axis, 0; a negative one counts from the end.
    sent = _sent(start(gathers.gather(client, x, [1, 1, 0])))
    assert sent.gather.axis == 0 and answer_bytes(sent) == 3 * 12 * 4
    assert _sent(start(gathers.gather(client, x, [1], -2))).gather.axis == 1
    # NumPy takes a 0-d x as x.reshape(1).
    sent = _sent(start(gathers.take(client, np.float32(3), [0, 0], axis=-1)))
    assert list(sent.inputs["input"].sizes) == [1] and sent.gather.axis == 0


def test_a_scalar_index_goes_as_indices_of_sizes_1_and_drops_the_axis() -> None:
    client = FakeClient()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    plan = gathers.take(client, x, 2, axis=1)
    sent = _sent(start(plan))
    assert list(sent.inputs["indices"].sizes) == [1] and sent.gather.axis == 1
    got = finish(plan, response(np.ascontiguousarray(x[:, 2:3])))
    assert got.shape == (2,) and got.tolist() == np.take(x, 2, axis=1).tolist()
    assert not got.flags.writeable
    # Of a 1-d x: a 0-d result, as NumPy's scalar.
    plan = gathers.gather(client, x[0], np.int64(-1))
    start(plan)
    got = finish(plan, response(np.array([2.0], np.float32)))
    assert got.shape == () and got.item() == 2.0
    # Kept: the dimension dropped on the server, a StridedSlice after the Gather.
    call = start(gathers.take(client, x, 0, axis=-2, keep=True))
    assert call.method == "run_chain"
    chain = pb.RunChainRequest.FromString(call.request)
    gathered, shrink = chain.steps
    assert gathered.WhichOneof("op") == "gather" and gathered.gather.axis == 0
    assert list(gathered.inputs["indices"].tensor.sizes) == [1]
    assert shrink.WhichOneof("op") == "strided_slice"
    assert list(shrink.strided_slice.shrink_axis_mask) == [1]
    assert shrink.inputs["input"].step == pb.StepOutput(step=0, output=0)
    assert [(r.step, r.output, r.keep) for r in chain.results] == [(1, 0, True)]


def test_take_of_remote_tensors_flattens_on_the_server_in_one_chain() -> None:
    client = FakeClient()
    remote = FakeRemote(client, handle("ab" * 16, "r2", (2, 3)))
    plan = gathers.take(client, remote, [4, 1])
    call = start(plan)
    assert call.method == "run_chain" and call.to == Target("r2", "ab" * 16)
    chain = pb.RunChainRequest.FromString(call.request)
    flat, gathered = chain.steps
    assert flat.WhichOneof("op") == "reshape" and list(flat.reshape.sizes) == [-1]
    assert flat.inputs["input"].tensor.handle.id == "ab" * 16
    assert gathered.gather.axis == 0
    assert gathered.inputs["input"].step == pb.StepOutput(step=0, output=0)
    assert list(gathered.inputs["indices"].tensor.sizes) == [2]
    assert chain_answer_bytes(chain) == 8
    # Along an axis, or of a 1-d RemoteTensor: one Run naming the handle.
    sent = _sent(start(gathers.take(client, remote, [[0, 1]], axis=-1, keep=True)))
    assert sent.inputs["input"].handle.id == "ab" * 16 and sent.gather.axis == 1
    assert [o.keep for o in sent.outputs] == [True]
    row = FakeRemote(client, handle("cd" * 16, "r2", (3,)))
    assert _sent(start(gathers.take(client, row, [0]))).inputs["input"].handle.id == "cd" * 16
    # RemoteTensor indices: named by their handle, sizes known.
    index = pb.TensorHandle(
        id="ef" * 16, replica="r2", dtype=pb.INT64, sizes=[2, 2], strides=[2, 1]
    )
    sent = _sent(start(gathers.gather(client, remote, FakeRemote(client, index), 1)))
    assert sent.inputs["indices"].handle.id == "ef" * 16
    assert answer_bytes_bound(sent) == 2 * 2 * 2 * 4
    # What Reshape cannot make: a 0-d RemoteTensor flattened, 0-d RemoteTensor indices.
    scalar = FakeRemote(client, pb.TensorHandle(id="01" * 16, dtype=pb.FLOAT32))
    with pytest.raises(ValueError, match="take: a 0-d RemoteTensor cannot be flattened"):
        start(gathers.take(client, scalar, [0]))
    scalar_index = FakeRemote(client, pb.TensorHandle(id="02" * 16, dtype=pb.INT64))
    with pytest.raises(ValueError, match="gather: 0-d RemoteTensor indices"):
        start(gathers.gather(client, remote, scalar_index))


def test_take_raises_numpys_errors_before_sending() -> None:
    client = FakeClient()
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        start(gathers.take(client, x, [0], axis=2))
    with pytest.raises(np.exceptions.AxisError):
        start(gathers.gather(client, x, [0], -3))
    with pytest.raises(np.exceptions.AxisError):
        start(gathers.take(client, np.float32(1), [0], axis=1))
    for indices in ([0.0, 1.0], np.array([1.5]), np.array([1], ml_dtypes.bfloat16)):
        with pytest.raises(TypeError, match="indices must be integers, not"):
            start(gathers.take(client, x, indices))
    with pytest.raises(TypeError, match="not bool .a boolean mask"):
        start(gathers.take_along_axis(client, x, np.ones((2, 3), bool), 1))
    with pytest.raises(TypeError, match="gather: axis must be an integer"):
        start(gathers.gather(client, x, [0], None))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="axis must be an integer, not float"):
        start(gathers.take(client, x, [0], 1.0))  # type: ignore[arg-type]


def test_an_empty_take_is_made_here_without_a_call() -> None:
    x = np.zeros((2, 3), np.int16)
    seen: list[tuple[int, int]] = []
    for plan, shape in [
        (gathers.take(FakeClient(), x, [], axis=1, progress=lambda *p: seen.append(p)), (2, 0)),
        (gathers.take(FakeClient(), np.zeros((0, 3), np.int16), [1, 2], 1), (0, 2)),
        (gathers.take_along_axis(FakeClient(), x, np.zeros((2, 0), np.int64)), (2, 0)),
    ]:
        with pytest.raises(StopIteration) as done:
            next(plan)
        empty = done.value.value
        assert empty.shape == shape and empty.dtype == np.int16 and not empty.flags.writeable
    assert seen == [(0, 0)]
    # Kept, it is sent: the server refuses its zero sizes.
    sent = _sent(start(gathers.take(FakeClient(), x, np.zeros(0, np.int32), keep=True)))
    assert list(sent.inputs["indices"].sizes) == [0]


def test_take_along_axis_broadcasts_outside_the_axis_as_numpy() -> None:
    client = FakeClient()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # Indices of size 1 outside the axis: a broadcast view, stride 0.
    sent = _sent(start(gathers.take_along_axis(client, x, [[2, 0]], axis=1)))
    assert sent.WhichOneof("op") == "gather_elements" and sent.gather_elements.axis == 1
    index = sent.inputs["indices"]
    assert (list(index.sizes), list(index.strides)) == ([2, 2], [0, 1])
    assert list(sent.inputs["input"].sizes) == [2, 3]
    assert answer_bytes(sent) == np.take_along_axis(x, np.array([[2, 0]]), 1).nbytes
    # x of size 1 outside the axis: x broadcast, along the axis its own size.
    column = x[:, :1]
    indices = np.zeros((3, 4), np.int32)
    sent = _sent(start(gathers.gather_elements(client, column, indices)))
    source = sent.inputs["input"]
    assert (list(source.sizes), list(source.strides)) == ([2, 4], [3, 0])
    assert sent.gather_elements.axis == 0 and list(sent.inputs["indices"].sizes) == [3, 4]
    assert answer_bytes(sent) == np.take_along_axis(column, indices, 0).nbytes
    # The default axis: NumPy's -1 for take_along_axis, ONNX's 0 for gather_elements.
    same = np.zeros((2, 3), np.int64)
    assert _sent(start(gathers.take_along_axis(client, x, same))).gather_elements.axis == 1
    assert _sent(start(gathers.gather_elements(client, x, same))).gather_elements.axis == 0
    # None: along x flattened, for 1-d indices.
    sent = _sent(start(gathers.take_along_axis(client, x, [5, 0, 1], None)))
    assert list(sent.inputs["input"].sizes) == [6] and sent.gather_elements.axis == 0


def test_take_along_axis_of_remote_tensors_broadcasts_with_expand_steps() -> None:
    client = FakeClient()
    column = FakeRemote(client, handle("ab" * 16, "r1", (2, 1)))
    call = start(gathers.take_along_axis(client, column, np.zeros((3, 4), np.int64), 0))
    assert call.method == "run_chain" and call.to.replica == "r1"
    chain = pb.RunChainRequest.FromString(call.request)
    expanded, gathered = chain.steps
    assert expanded.WhichOneof("op") == "expand" and list(expanded.expand.sizes) == [2, 4]
    assert gathered.inputs["input"].step == pb.StepOutput(step=0, output=0)
    assert list(gathered.inputs["indices"].tensor.sizes) == [3, 4]
    assert chain_answer_bytes(chain) == 3 * 4 * 4
    index = pb.TensorHandle(
        id="cd" * 16, replica="r1", dtype=pb.UINT32, sizes=[1, 2], strides=[2, 1]
    )
    x = np.zeros((3, 5), np.float32)
    call = start(gathers.gather_elements(client, x, FakeRemote(client, index), -1, keep=True))
    chain = pb.RunChainRequest.FromString(call.request)
    expanded, gathered = chain.steps
    assert list(expanded.expand.sizes) == [3, 2]
    assert expanded.inputs["input"].tensor.handle.id == "cd" * 16
    assert gathered.inputs["indices"].step == pb.StepOutput(step=0, output=0)
    assert gathered.gather_elements.axis == 1
    assert list(gathered.inputs["input"].tensor.sizes) == [3, 5]
    assert [(r.step, r.output, r.keep) for r in chain.results] == [(1, 0, True)]
    # Flattened: a Reshape step, as take's.
    square = FakeRemote(client, handle("ef" * 16, "r1", (2, 2)))
    call = start(gathers.take_along_axis(client, square, [3, 0], axis=None))
    flat, gathered = pb.RunChainRequest.FromString(call.request).steps
    assert list(flat.reshape.sizes) == [-1] and gathered.WhichOneof("op") == "gather_elements"


def test_take_along_axis_raises_numpys_errors_before_sending() -> None:
    client = FakeClient()
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="must have the same number of dimensions"):
        start(gathers.take_along_axis(client, x, [0, 1], 0))
    with pytest.raises(ValueError, match="when axis=None, `indices` must have a single dimension"):
        start(gathers.take_along_axis(client, x, [[0]], None))
    with pytest.raises(IndexError) as error:
        start(gathers.take_along_axis(client, x, np.zeros((3, 2), np.int64), 1))
    assert str(error.value) == (
        "shape mismatch: indices of shape (3, 2) do not broadcast against x of shape (2, 3) "
        "in dimension 0 (only axis 1 may differ)"
    )
    with pytest.raises(np.exceptions.AxisError):
        start(gathers.gather_elements(client, x, [[0]], 2))
    with pytest.raises(TypeError, match="indices must be integers, not float64"):
        start(gathers.take_along_axis(client, x, [[0.5]], 0))
    with pytest.raises(TypeError, match="gather_elements: axis must be an integer"):
        start(gathers.gather_elements(client, x, [[0]], None))  # type: ignore[arg-type]


def test_gather_sizes_follow_from_both_inputs() -> None:
    assert gather_sizes([4, 5, 6], [2, 3], 1) == [4, 2, 3, 6]
    assert gather_sizes([4], [7], 0) == [7]
    # What the server refuses: an axis outside [0, rank), an output rank over 8,
    # zero sizes, an output over 2^32 - 1 elements.
    assert gather_sizes([4, 5], [2], -1) is None
    assert gather_sizes([4, 5], [2], 2) is None
    assert gather_sizes([2] * 5, [2] * 5, 0) is None
    assert gather_sizes([2] * 4, [2] * 5, 0) == [2] * 8
    assert gather_sizes([4, 0], [1], 0) is None and gather_sizes([4], [], 0) is None
    assert gather_sizes([2, 65536], [65536], 0) is None
    assert gather_elements_sizes([4, 5], [7, 5], 0) == [7, 5]
    assert gather_elements_sizes([4, 5], [4, 1], 1) == [4, 1]
    assert gather_elements_sizes([4, 5], [7, 4], 0) is None  # differ outside the axis
    assert gather_elements_sizes([4, 5], [4], 0) is None  # ranks differ
    assert gather_elements_sizes([4, 5], [4, 5], 2) is None
    # Without indices nothing is derived; with them, make_request leaves the
    # output to the server and counts its bytes; `run`'s negative axis counts
    # from the end, as split's and scatter_elements'.
    x = np.zeros((4, 5), np.float32)
    i = np.zeros((2, 3), np.uint64)
    assert derived_sizes("gather", pb.GatherAttrs(axis=1), [4, 5]) is None
    request = make_request("gather", {"input": x, "indices": i}, {"axis": -1})
    assert request.gather.axis == 1 and not request.outputs
    assert answer_bytes(request) == answer_bytes_bound(request) == 4 * 2 * 3 * 4
    rows = {"input": x, "indices": np.zeros((2, 5), np.int32)}
    kept = make_request("gather_elements", rows, {"axis": 0}, keep=True)
    assert [(list(o.sizes), o.keep) for o in kept.outputs] == [([], True)]
    assert answer_bytes(kept) == answer_bytes_bound(kept) == 0
    refused = make_request("gather_elements", {"input": x, "indices": i}, {"axis": 0})
    assert answer_bytes(refused) is None and answer_bytes_bound(refused) == 80
    step = Step("gather", {"input": x, "indices": i}, {"axis": 0})
    assert step.output_count() == 1
    assert chain_answer_bytes(make_chain_request([step])) == 2 * 3 * 5 * 4
