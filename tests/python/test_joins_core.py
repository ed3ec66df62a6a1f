"""Join's methods (Client.concatenate, join) without a server: NumPy's
arrays and axes as the operator's numbered inputs and its attribute, the
Reshape steps a flattened RemoteTensor needs, empty inputs dropped and empty
results made here, NumPy's errors (and the dtype error NumPy has not) before
sending, and join's output sizes derived from its numbered inputs wherever
the package derives them: requests, answers' bytes, chains, the conformance
runner. Beside test_gathers_core.py, the gathers'."""

from __future__ import annotations

import inspect
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from conftest import REPO
from tensorop_client import (
    AsyncClient,
    Client,
    Step,
    keep_outputs,
    make_chain_request,
    make_request,
)
from tensorop_client._core import joins
from tensorop_client._core.requests import OPS, answer_bytes_bound
from tensorop_client._core.routing import Target
from tensorop_client._core.shapes import (
    DERIVED_SIZES,
    MAX_JOIN_INPUTS,
    answer_bytes,
    chain_answer_bytes,
    derived_output_sizes,
    derived_sizes,
    join_input_names,
    join_sizes,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.cases import load_cases
from tensorop_client.conformance import one_step_chain
from test_core import FakeClient, FakeRemote, finish, response, start


def _sent(call: Any) -> pb.RunRequest:
    assert call.method == "run"
    return pb.RunRequest.FromString(call.request)


def _chain(call: Any) -> pb.RunChainRequest:
    assert call.method == "run_chain"
    return pb.RunChainRequest.FromString(call.request)


def _remote(
    client: FakeClient, id: str, sizes: tuple[int, ...], dtype: int = pb.FLOAT32
) -> FakeRemote:
    """A RemoteTensor of `sizes`, packed, on replica "r1"."""
    strides = [int(np.prod(sizes[d + 1 :])) for d in range(len(sizes))]
    handle = pb.TensorHandle(id=id, replica="r1", dtype=dtype, sizes=sizes, strides=strides)
    return FakeRemote(client, handle)


def _numbered(message: pb.RunRequest | pb.ChainStep) -> list[Any]:
    """The numbered inputs, in order (checked to be exactly those)."""
    names = join_input_names(message.inputs)
    assert names is not None, sorted(message.inputs)
    return [message.inputs[name] for name in names]


def _sizes(message: pb.RunRequest) -> list[list[int]]:
    return [list(t.sizes) for t in _numbered(message)]


def _done(plan: Any) -> Any:
    """What a plan returns without a call."""
    with pytest.raises(StopIteration) as done:
        next(plan)
    return done.value.value


# ---- requests ---------------------------------------------------------------------


def test_concatenate_sends_numbered_inputs_and_numpys_axis() -> None:
    client = FakeClient()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(8, dtype=np.float32).reshape(2, 4)
    for arrays, axis, sent_axis, sizes in [
        ([a, b], 1, 1, [[2, 3], [2, 4]]),
        ([a, b], -1, 1, [[2, 3], [2, 4]]),  # from the end
        ((a, a, a), 0, 0, [[2, 3]] * 3),  # a tuple
        ([a.T, b.T], -2, 0, [[3, 2], [4, 2]]),
        ([a, b], None, 0, [[6], [8]]),  # None: each raveled here
        ([a], 0, 0, [[2, 3]]),  # one array: a copy on the server
        ([np.float32(1), a], None, 0, [[1], [6]]),  # None takes 0-d arrays, as NumPy's
    ]:
        sent = _sent(start(joins.concatenate(client, arrays, axis)))
        assert sent.WhichOneof("op") == "join" and sent.join.axis == sent_axis
        assert not sent.outputs and _sizes(sent) == sizes
        expected = np.concatenate(arrays, axis)
        assert answer_bytes(sent) == answer_bytes_bound(sent) == expected.nbytes
    # Lists as NumPy reads them, each on its own.
    sent = _sent(start(joins.concatenate(client, [[1, 2], [3]])))
    assert _sizes(sent) == [[2], [1]] and {t.dtype for t in _numbered(sent)} == {pb.INT64}
    # The inputs' order is theirs: "inputs_10" after "inputs_9".
    rows = [np.full((1, 2), k, np.int16) for k in range(12)]
    sent = _sent(start(joins.join(client, rows)))
    assert [t.data for t in _numbered(sent)] == [r.tobytes() for r in rows]
    assert sent.inputs["inputs_10"].data == rows[10].tobytes()
    # An array as `arrays`: its rows are the arrays, as NumPy reads one.
    sent = _sent(start(joins.concatenate(client, np.ones((3, 2, 5), np.uint8), axis=1)))
    assert _sizes(sent) == [[2, 5]] * 3 and sent.join.axis == 1
    assert answer_bytes(sent) == 2 * 15


def test_join_is_concatenate_under_directmls_name() -> None:
    client = FakeClient()
    a = np.zeros((2, 3), ml_dtypes.bfloat16)
    for axis in (0, 1, -1, None):
        left = _sent(start(joins.join(client, [a, a], axis)))
        right = _sent(start(joins.concatenate(client, [a, a], axis)))
        assert left == right and left.join.axis == (0 if axis is None else axis % 2)
    # Both default to axis 0, NumPy's and ONNX's alike.
    assert _sent(start(joins.join(client, [a, a]))).join.axis == 0
    assert _sent(start(joins.concatenate(client, [a, a]))).join.axis == 0


def test_inputs_go_as_they_lie_and_answers_come_back_read_only() -> None:
    client = FakeClient()
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    row = np.broadcast_to(base[:1, :1], (4, 2))  # stride 0: one element sent
    arrays = [base[:, ::2], base[::-1, :3], row, np.asfortranarray(base[:, :1])]
    plan = joins.concatenate(client, arrays, axis=1)
    sent = _sent(start(plan))
    strided, flipped, broadcast, fortran = _numbered(sent)
    assert (list(strided.sizes), list(strided.strides)) == ([4, 3], [6, 2])
    assert len(strided.data) == (3 * 6 + 4 + 1) * 4  # its span, padding included
    assert list(flipped.sizes) == [4, 3] and len(flipped.data) == 12 * 4  # packed here
    assert (list(broadcast.strides), len(broadcast.data)) == ([0, 0], 4)
    assert list(fortran.sizes) == [4, 1]
    expected = np.concatenate(arrays, 1)
    assert answer_bytes(sent) == expected.nbytes
    got = finish(plan, response(expected))
    assert got.tolist() == expected.tolist() and not got.flags.writeable
    # A big-endian array is the same dtype on the wire (swapped here).
    sent = _sent(start(joins.concatenate(client, [base.astype(">f4"), base], axis=0)))
    assert [t.dtype for t in _numbered(sent)] == [pb.FLOAT32, pb.FLOAT32]


def test_zero_sizes_along_the_axis_are_dropped_and_empty_results_made_here() -> None:
    client = FakeClient()
    a = np.ones((2, 3), np.int16)
    nothing = np.zeros((2, 0), np.int16)
    sent = _sent(start(joins.concatenate(client, [nothing, a, nothing, a], axis=1)))
    assert _sizes(sent) == [[2, 3], [2, 3]]  # renumbered from "inputs_0"
    assert answer_bytes(sent) == 2 * 6 * 2
    sent = _sent(start(joins.concatenate(client, [np.zeros(0, np.int16), a], axis=None)))
    assert _sizes(sent) == [[6]]
    seen: list[tuple[int, int]] = []
    for arrays, axis, shape in [
        ([nothing, nothing], 1, (2, 0)),  # every one empty
        ([np.zeros((0, 3), np.int16), np.zeros((0, 3), np.int16)], 1, (0, 6)),  # a 0 elsewhere
        ([np.zeros((0, 3), np.int16)], None, (0,)),
        ([np.zeros((2, 0), ">i2")], 0, (2, 0)),  # the server's dtype: little-endian
    ]:
        empty = _done(joins.concatenate(client, arrays, axis, progress=lambda *p: seen.append(p)))
        assert empty.shape == shape and empty.dtype == np.dtype("<i2")
        assert not empty.flags.writeable
    assert seen == [(0, 0)] * 4
    # Kept, it is sent as it is: the server refuses its zero sizes.
    sent = _sent(start(joins.concatenate(client, [nothing, nothing], 1, keep=True)))
    assert _sizes(sent) == [[2, 0], [2, 0]] and [o.keep for o in sent.outputs] == [True]
    # Kept, a result with elements still drops the empty inputs.
    sent = _sent(start(joins.join(client, [nothing, a], 1, keep=True)))
    assert _sizes(sent) == [[2, 3]] and answer_bytes(sent) == 0


# ---- RemoteTensors ----------------------------------------------------------------


def test_remote_tensors_are_named_by_handle_in_one_run() -> None:
    client = FakeClient()
    kept = _remote(client, "ab" * 16, (2, 3))
    plan = joins.concatenate(client, [kept, np.ones((1, 3), np.float32), kept], axis=0)
    call = start(plan)
    assert call.to == Target("r1", "ab" * 16)
    sent = _sent(call)
    first, middle, last = _numbered(sent)
    assert first.handle.id == last.handle.id == "ab" * 16 and not first.data
    assert len(middle.data) == 12 and not middle.HasField("handle")
    assert answer_bytes(sent) == answer_bytes_bound(sent) == 5 * 3 * 4
    sent = _sent(start(joins.join(client, [kept, kept], -1, keep=True)))
    assert sent.join.axis == 1 and [o.keep for o in sent.outputs] == [True]


def test_flattened_remote_tensors_go_through_reshape_steps_in_one_chain() -> None:
    client = FakeClient()
    square = _remote(client, "ab" * 16, (2, 2))
    row = _remote(client, "cd" * 16, (3,))
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    call = start(joins.concatenate(client, [square, x, row, square], axis=None, keep=True))
    assert call.to.replica == "r1"
    chain = _chain(call)
    flat, joined = chain.steps  # one Reshape for the tensor joined twice
    assert flat.WhichOneof("op") == "reshape" and list(flat.reshape.sizes) == [-1]
    assert flat.inputs["input"].tensor.handle.id == "ab" * 16
    assert joined.WhichOneof("op") == "join" and joined.join.axis == 0
    first, array, one_d, last = _numbered(joined)
    assert first.step == last.step == pb.StepOutput(step=0, output=0)
    assert list(array.tensor.sizes) == [6] and array.tensor.data == x.tobytes()  # raveled here
    assert one_d.tensor.handle.id == "cd" * 16  # rank 1: as it is
    assert [(r.step, r.output, r.keep) for r in chain.results] == [(1, 0, True)]
    chain = _chain(start(joins.concatenate(client, [square, row, square], axis=None)))
    assert chain_answer_bytes(chain) == (4 + 3 + 4) * 4
    # Each RemoteTensor its own Reshape step.
    other = _remote(client, "ef" * 16, (1, 2))
    chain = _chain(start(joins.join(client, [other, square, other, square], axis=None)))
    assert [step.WhichOneof("op") for step in chain.steps] == ["reshape", "reshape", "join"]
    assert [t.step.step for t in _numbered(chain.steps[2])] == [0, 1, 0, 1]
    # Only RemoteTensors of rank 1 and arrays: one Run.
    sent = _sent(start(joins.concatenate(client, [row, x], axis=None)))
    assert _sizes(sent) == [[3], [6]]
    # A 0-d RemoteTensor cannot be flattened on the server.
    scalar = FakeRemote(client, pb.TensorHandle(id="01" * 16, dtype=pb.FLOAT32))
    with pytest.raises(ValueError) as error:
        start(joins.concatenate(client, [row, scalar], axis=None))
    assert str(error.value) == (
        "concatenate: a 0-d RemoteTensor cannot be flattened on the server (Reshape takes rank "
        "1..8): fetch it and pass the array"
    )


# ---- errors before sending --------------------------------------------------------


def _numpys_error(arrays: list[np.ndarray], axis: int | None) -> str:
    with pytest.raises(ValueError) as error:
        np.concatenate(arrays, axis)
    return str(error.value)


@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3), (2,)], 0),  # ranks
        ([(2, 3), (3, 3), (2, 4)], 0),  # a size outside the axis
        ([(2, 3), (3, 2)], 1),
        ([(2, 3, 4), (2, 3, 4), (2, 5, 4)], -1),
        ([(1,), ()], 0),  # a 0-d one after the first: ranks
        ([(), (1,)], 0),  # the first 0-d
        ([()], -1),
        ([], 0),
    ],
)
def test_numpys_value_errors_in_numpys_words(shapes: list[tuple[int, ...]], axis: int) -> None:
    arrays = [np.zeros(shape, np.float32) for shape in shapes]
    with pytest.raises(ValueError) as error:
        start(joins.concatenate(FakeClient(), arrays, axis))
    assert str(error.value) == _numpys_error(arrays, axis)


def test_axes_outside_the_rank_and_arguments_numpy_refuses() -> None:
    client = FakeClient()
    a = np.zeros((2, 3), np.float32)
    for axis in (2, -3):
        with pytest.raises(np.exceptions.AxisError) as error:
            start(joins.concatenate(client, [a, a], axis))
        assert str(error.value) == f"axis {axis} is out of bounds for array of dimension 2"
    with pytest.raises(TypeError, match="axis must be an integer, not float"):
        start(joins.join(client, [a], 1.0))  # type: ignore[arg-type]
    kept = _remote(client, "ab" * 16, (2, 3))
    for arrays, name in [(kept, "FakeRemote"), ((x for x in [a]), "generator"),
                         (a[0, 0], "float32"), (7, "int")]:  # fmt: skip
        with pytest.raises(TypeError) as error:
            start(joins.concatenate(client, arrays))  # type: ignore[arg-type]
        assert str(error.value) == (
            "concatenate: arrays must be a sequence (a list or a tuple) of arrays or "
            f"RemoteTensors, not {name}"
        )
    step = Step("transpose", {"input": a})
    for output in (step, step.output(0)):
        with pytest.raises(TypeError) as error:
            start(joins.join(client, [a, output]))  # type: ignore[list-item]
        assert str(error.value) == (
            "join: arrays[1] is a chain step's output, which only a chain reads: join it there, "
            'Step("join", {"inputs_0": ..., "inputs_1": ...}, {"axis": ...})'
        )
    with pytest.raises(TypeError, match="tensorop has no dtype for numpy <U1"):
        start(joins.concatenate(client, [a, np.array(["x"])]))


def test_dtypes_that_differ_raise_type_error_where_numpy_would_promote() -> None:
    client = FakeClient()
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError) as error:
        start(joins.concatenate(client, [a, a, a.astype(np.float64)]))
    assert str(error.value) == (
        "concatenate: arrays[2].dtype is float64; arrays[0].dtype is float32: the server joins "
        "arrays of one dtype (NumPy would promote them to float64); cast them to one first, "
        'e.g. arrays[2].astype("float32")'
    )
    with pytest.raises(TypeError) as error:  # no common dtype: no promotion named
        start(joins.join(client, [a.astype(ml_dtypes.bfloat16), a.astype(np.int64)]))
    assert str(error.value) == (
        "join: arrays[1].dtype is int64; arrays[0].dtype is bfloat16: the server joins arrays "
        'of one dtype; cast them to one first, e.g. arrays[1].astype("bfloat16")'
    )
    # An empty array counts too (NumPy would promote with it): [] is float64.
    with pytest.raises(TypeError, match=r"arrays\[1\].dtype is float64; arrays\[0\].dtype is bool"):
        start(joins.concatenate(client, [[True], []]))
    # A RemoteTensor's dtype is its handle's.
    kept = _remote(client, "ab" * 16, (2, 3), dtype=pb.UINT8)
    with pytest.raises(TypeError, match=r"arrays\[1\].dtype is uint8; arrays\[0\].dtype is flo"):
        start(joins.concatenate(client, [a, kept]))


# ---- output sizes ------------------------------------------------------------------


def test_join_sizes_follow_from_the_numbered_inputs() -> None:
    assert "join" in OPS and "join" in DERIVED_SIZES
    assert join_input_names(["inputs_1", "inputs_0"]) == ["inputs_0", "inputs_1"]
    assert join_input_names([f"inputs_{k}" for k in range(11)])[-2:] == ["inputs_9", "inputs_10"]
    for names in ([], ["inputs_1"], ["inputs_0", "inputs_2"], ["inputs_0", "inputs_01"],
                  ["input"], ["inputs_0", "input"], ["inputs_00"]):  # fmt: skip
        assert join_input_names(names) is None, names
    assert join_input_names(f"inputs_{k}" for k in range(MAX_JOIN_INPUTS)) is not None
    assert join_input_names(f"inputs_{k}" for k in range(MAX_JOIN_INPUTS + 1)) is None
    assert join_sizes([[2, 3], [2, 4], [2, 1]], 1) == [2, 8]
    assert join_sizes([[5]], 0) == [5]
    # What the server refuses: no inputs, an axis outside [0, rank), ranks or
    # sizes that differ outside the axis, zero sizes, ranks over 8, more than
    # 4096 inputs, an output over 2^32 - 1 elements.
    for inputs, axis in [
        ([], 0), ([[2, 3]], 2), ([[2, 3]], -1), ([[2, 3], [2]], 0), ([[2, 3], [3, 3]], 1),
        ([[2, 0], [2, 1]], 1), ([[1] * 9], 0), ([[1]] * (MAX_JOIN_INPUTS + 1), 0),
        ([[65536, 32768], [65536, 32768]], 1),
    ]:  # fmt: skip
        assert join_sizes(inputs, axis) is None, (inputs, axis)
    assert join_sizes([[65536, 32768], [65536, 32767]], 1) == [65536, 65535]
    attrs = pb.JoinAttrs(axis=0)
    assert derived_output_sizes("join", attrs, {"inputs_0": [2], "inputs_1": [3]}) == [5]
    assert derived_output_sizes("join", attrs, {"inputs_0": [2], "inputs_2": [3]}) is None
    assert derived_output_sizes("join", pb.GatherAttrs(), {"inputs_0": [2]}) is None
    assert derived_sizes("join", attrs, [2]) is None  # one input's sizes are not join's
    # The other operators' as before, from "input" and "indices".
    assert derived_output_sizes("tile", pb.TileAttrs(repeats=[2]), {"input": [3]}) == [6]
    assert derived_output_sizes("gather", pb.GatherAttrs(axis=0),
                                {"input": [3, 2], "indices": [4]}) == [4, 2]  # fmt: skip
    assert derived_output_sizes("transpose", pb.TransposeAttrs(), {"inputs_0": [3]}) is None


def test_run_requests_and_chains_derive_joins_output() -> None:
    a, b = np.zeros((2, 3), np.float16), np.zeros((2, 5), np.float16)
    request = make_request("join", {"inputs_0": a, "inputs_1": b}, {"axis": -1})
    assert request.join.axis == 1 and not request.outputs  # counted from inputs_0's rank
    assert answer_bytes(request) == answer_bytes_bound(request) == 2 * 8 * 2
    # An axis outside [-rank, rank) goes as it is, for the server to name.
    assert make_request("join", {"inputs_0": a}, {"axis": -3}).join.axis == -3
    kept = make_request("join", {"inputs_0": a, "inputs_1": a}, {"axis": 0}, keep=True)
    assert [(list(o.sizes), o.keep) for o in kept.outputs] == [([], True)]
    assert answer_bytes(kept) == answer_bytes_bound(kept) == 0
    again = make_request("join", {"inputs_0": a}, {"axis": 0})
    keep_outputs(again)  # join derives its one output: an empty OutputDesc describes it
    assert [(list(o.sizes), o.keep) for o in again.outputs] == [([], True)]
    # Sizes given are the server's to check; strides count.
    strided = make_request("join", {"inputs_0": a, "inputs_1": a}, {"axis": 0},
                           [{"sizes": [4, 3], "strides": [1, 4]}])  # fmt: skip
    assert answer_bytes(strided) == answer_bytes_bound(strided) == 12 * 2
    # What the server refuses: nothing derived; the bound holds every input's elements.
    refused = make_request("join", {"inputs_0": a, "inputs_1": b}, {"axis": 0})
    assert answer_bytes(refused) is None and answer_bytes_bound(refused) == (6 + 10) * 2
    gap = make_request("join", {"inputs_0": a, "inputs_2": a}, {"axis": 0})
    assert answer_bytes(gap) is None and answer_bytes_bound(gap) == 12 * 2
    two = make_request("join", {"inputs_0": a, "inputs_1": a.astype(np.float32)}, {"axis": 0})
    assert answer_bytes(two) is None
    assert answer_bytes_bound(make_request("join", {"inputs_1": a}, {"axis": 0})) == 0
    # In a chain: one output, derived from the steps before it.
    first = Step("transpose", {"input": b})  # (5, 2)
    joined = Step("join", {"inputs_0": first, "inputs_1": b.T, "inputs_2": first}, {"axis": 0})
    last = Step("slice", {"input": joined},
                {"offsets": [1, 0], "window_sizes": [12, 2], "window_strides": [3, 1]})  # fmt: skip
    assert joined.output_count() == 1
    chain = make_chain_request([first, joined, last], [joined, last])
    assert [(r.step, r.output) for r in chain.results] == [(1, 0), (2, 0)]
    assert chain_answer_bytes(chain) == (15 * 2 + 4 * 2) * 2
    assert chain_answer_bytes(make_chain_request([first, joined])) == 15 * 2 * 2


def test_the_conformance_cases_of_join_load_and_run_as_one_step_chains() -> None:
    loaded = load_cases(REPO / "tests/conformance/cases/join.json")
    assert len(loaded) > 10 and all(case.case is not None for case in loaded), [
        (case.name, case.error) for case in loaded if case.case is None
    ]
    for entry in loaded:
        assert entry.case is not None
        request = entry.case.request
        chain = one_step_chain(request)
        assert chain.steps[0].WhichOneof("op") == "join"
        assert sorted(chain.steps[0].inputs) == sorted(request.inputs)
        assert [(r.step, r.output) for r in chain.results] == [(0, 0)]  # one output
    example = next(e.case for e in loaded if e.name == "join/doc_example_1")
    assert example is not None and answer_bytes(example.request) == 14 * 4


# ---- the transports' methods ------------------------------------------------------


@pytest.mark.parametrize("name", ["concatenate", "join"])
def test_client_and_async_client_methods_take_the_plans_arguments(name: str) -> None:
    plan = inspect.signature(getattr(joins, name))
    expected = list(plan.parameters)[1:]
    assert expected == ["arrays", "axis", "keep", "backend", "device_index", "progress"]
    for cls in (Client, AsyncClient):
        method = inspect.signature(getattr(cls, name))
        assert list(method.parameters) == ["self", *expected]
    assert inspect.iscoroutinefunction(getattr(AsyncClient, name))
    assert not inspect.iscoroutinefunction(getattr(Client, name))
    assert getattr(Client, name).__doc__ == getattr(joins, name).__doc__
    assert getattr(AsyncClient, name).__doc__ == f"Client.{name}."
    assert inspect.signature(Client.join).return_annotation == "np.ndarray | RemoteTensor"
    assert inspect.signature(AsyncClient.join).return_annotation == "np.ndarray | AsyncRemoteTensor"
