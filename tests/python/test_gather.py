"""take, gather, take_along_axis and gather_elements against the real tensord,
through Client and AsyncClient: the methods against numpy.take and
numpy.take_along_axis, shapes and bits, for float32, int64, uint8, float16,
bfloat16 and bool, with every index dtype the server takes (int32, int64,
uint32, uint64), negative indices and axes, axis=None (x flattened), a scalar
index (its axis dropped) and indices broadcast against x; strided and
broadcast inputs on both backends; kept outputs and RemoteTensors in, for x
and for the indices (a flattened or broadcast RemoteTensor through a Reshape
or an Expand step in one chain); `run` without outputs; chains whose indices
are another step's output; answers and indices past the message limit; and
the errors: the server's INVALID_ARGUMENT naming the first index out of
range, the indices dtypes it refuses, ranks and sizes, RESOURCE_EXHAUSTED,
and NumPy's errors raised here."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, TensorOpError
from test_operators import Caller, check_progress, same, values

DTYPES = [np.float32, np.int64, np.uint8, np.float16, ml_dtypes.bfloat16, np.bool_]
INDEX_DTYPES = [np.int32, np.int64, np.uint32, np.uint64]


def refused(error: pytest.ExceptionInfo[TensorOpError]) -> str:
    """The server's INVALID_ARGUMENT message."""
    assert error.value.code == "INVALID_ARGUMENT", error.value
    return error.value.message


def index_arrays(indices: Any) -> list[np.ndarray]:
    """`indices` in every index dtype that holds them (unsigned ones only
    without negative indices)."""
    given = np.asarray(indices)
    return [
        given.astype(dtype)
        for dtype in INDEX_DTYPES
        if np.dtype(dtype).kind == "i" or given.min(initial=0) >= 0
    ]


def as_numpy(indices: np.ndarray) -> np.ndarray:
    """The indices as NumPy reads them (intp), whatever their dtype."""
    return indices.astype(np.int64)


# ---- numpy.take -----------------------------------------------------------------

TAKES = [
    ((4,), [3, 1, 3, 0, 2], 0),  # DirectML's example 1
    ((3, 2), [[0, 1], [1, 2]], 0),  # ONNX's, axis 0: sizes [2, 2, 2]
    ((3, 3), [[0, 2]], 1),  # ONNX's, axis 1
    ((2, 3, 4), [-1, 0, -4], -1),  # negative indices and axis
    ((2, 3, 4), [[1, -2], [0, 1]], 1),
    ((2, 3, 4), [5, 23, -24, 0], None),  # None: x flattened
    ((2, 3, 4), [[7], [3]], None),
    ((4, 3), 2, 0),  # a scalar index: the axis dropped
    ((4, 3), -1, -1),
    ((4,), -1, 0),  # ... to a 0-d result
    ((5,), 3, None),
    ((4, 3), [[[1]]], 1),  # indices of rank 3
    ((), [0, 0], None),  # a 0-d x: taken as x.reshape(1), as NumPy's
    ((), [0], 0),
    ((2, 1, 2, 1), np.zeros((1, 2, 1, 1, 2), np.int64), 2),  # an output of rank 8
    ((1, 2, 1, 2, 1, 2, 1, 2), [1, 0, 1], 7),  # an input of rank 8
]


@pytest.mark.parametrize("shape, indices, axis", TAKES, ids=repr)
def test_take_is_numpys(caller: Caller, shape: tuple[int, ...], indices: Any, axis: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        for index in index_arrays(indices):
            got = caller.call("take", x, index, axis)
            same(got, np.asarray(np.take(x, as_numpy(index), axis)))
            assert not got.flags.writeable
    # Indices as a list (or a Python integer): NumPy's int64.
    x = values(shape, np.float32)
    given = indices.tolist() if isinstance(indices, np.ndarray) else indices
    same(caller.call("take", x, given, axis=axis), np.asarray(np.take(x, given, axis)))


@pytest.mark.parametrize("shape, indices, axis", [t for t in TAKES if t[2] is not None], ids=repr)
def test_gather_is_take_with_axis_0_by_default(
    caller: Caller, shape: tuple[int, ...], indices: Any, axis: int
) -> None:
    x = values(shape, np.int64)
    same(caller.call("gather", x, indices, axis), np.asarray(np.take(x, indices, axis)))
    n = x.reshape(-1, *x.shape[1:]).shape[0]  # axis 0's size (a 0-d x: 1)
    if -n <= np.min(indices) and np.max(indices) < n:
        same(caller.call("gather", x, indices), np.asarray(np.take(x, indices, 0)))


def test_take_values_are_the_operators_examples(caller: Caller) -> None:
    x = np.array([11, 12, 13, 14], np.float32)
    assert caller.call("gather", x, np.array([3, 1, 3, 0, 2], np.uint32)).tolist() == [
        14, 12, 14, 11, 13]  # fmt: skip
    rows = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    assert caller.call("take", rows, [[0, 1], [1, 2]], axis=0).tolist() == [
        [[1, 2], [3, 4]], [[3, 4], [5, 6]]]  # fmt: skip
    assert caller.call("gather", rows, [1, 0], axis=1).tolist() == [[2, 1], [4, 3], [6, 5]]
    small = np.arange(-5, 5, dtype=np.int8)
    assert caller.call("take", small, np.arange(-5, 5)).tolist() == [0, 1, 2, 3, 4, -5, -4,
                                                                      -3, -2, -1]  # fmt: skip
    flags = np.array([True, False, True])
    assert caller.call("take", flags, [1, 2, -3]).tolist() == [False, True, True]
    halves = np.array([1.5, -0.0, np.inf], ml_dtypes.bfloat16)
    got = caller.call("take", halves, [1, 1, 2])
    assert got.dtype == ml_dtypes.bfloat16
    assert got.view(np.uint16).tolist() == halves.view(np.uint16)[[1, 1, 2]].tolist()  # -0.0
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    assert caller.call("take", extremes, [1, 0]).tolist() == extremes[::-1].tolist()


# ---- numpy.take_along_axis --------------------------------------------------------

ALONG = [
    ((2, 2), [[0, 0], [1, 0]], 1),  # ONNX's example 1
    ((3, 3), [[1, 2, 0], [2, 0, 0]], 0),  # ONNX's example 2: fewer along the axis
    ((2, 3), [[-1], [0]], 1),  # negative indices
    ((2, 3), [[2, 0, 1, 1, 2]], -1),  # indices broadcast (1 -> 2), more along the axis
    ((2, 1), [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 0]], 0),  # x broadcast (1 -> 4)
    ((6,), [5, 0, -1, 1], None),  # None: along x flattened
    ((2, 3), [5, 0, 1], None),
    ((1, 2, 1, 2, 1, 2, 1, 2), np.ones((1, 2, 1, 3, 1, 2, 1, 2), np.int64), 3),  # rank 8
]


@pytest.mark.parametrize("shape, indices, axis", ALONG, ids=repr)
def test_take_along_axis_is_numpys(
    caller: Caller, shape: tuple[int, ...], indices: Any, axis: Any
) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        for index in index_arrays(indices):
            got = caller.call("take_along_axis", x, index, axis)
            same(got, np.take_along_axis(x, as_numpy(index), axis))
            assert not got.flags.writeable
    x = values(shape, np.float16)
    given = np.asarray(indices).tolist()
    expected = np.take_along_axis(x, np.array(given), axis)
    same(caller.call("take_along_axis", x, given, axis), expected)
    if axis is not None:
        same(caller.call("gather_elements", x, given, axis), expected)


def test_take_along_axis_sorts_as_numpy(caller: Caller) -> None:
    x = values((3, 4, 5), np.float32, seed=3)
    for axis in (0, 1, -1):
        order = np.argsort(x, axis=axis)
        same(caller.call("take_along_axis", x, order, axis=axis), np.sort(x, axis=axis))
    same(caller.call("take_along_axis", x, np.argsort(x, axis=-1)), np.sort(x))  # axis -1
    first = np.argmax(x, axis=1, keepdims=True)
    same(caller.call("gather_elements", x, first, 1), np.max(x, axis=1, keepdims=True))
    # ONNX's default axis 0 for gather_elements.
    same(caller.call("gather_elements", x, np.argsort(x, axis=0)), np.sort(x, axis=0))


def test_strided_and_broadcast_inputs_on_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    index = np.array([[2, 0, -1], [2, 2, 1], [0, -3, 1], [1, 1, 1]], np.int64)  # any x's
    for backend in ("cpu", "opencl"):
        for x in (base.T, base[:, ::2], base[::-1, 1::3], np.broadcast_to(base[:1], (4, 8))):
            for indices in (index, index[::-1, ::2], index.T, np.broadcast_to(index[:1], (3, 3))):
                for axis in (0, 1):
                    same(caller.call("take", x, indices, axis, backend=backend),
                         np.take(x, indices, axis))  # fmt: skip
            along = np.broadcast_to(np.array([[1], [0], [2], [-1]]), (4, x.shape[1]))
            same(caller.call("take_along_axis", x[:4], along, 0, backend=backend),
                 np.take_along_axis(x[:4], along, 0))  # fmt: skip
            same(caller.call("take_along_axis", x[:4], along[:, :2][:, ::-1], 1, backend=backend),
                 np.take_along_axis(x[:4], along[:, :2][:, ::-1], 1))  # fmt: skip


# ---- kept outputs, RemoteTensors in -----------------------------------------------


def test_kept_outputs_fetch_as_numpys(caller: Caller) -> None:
    x = values((4, 3), ml_dtypes.bfloat16)
    along = np.array([[2], [0], [1], [1]])
    for name, indices, axis, expected in [
        ("take", [[2, 0], [1, 1]], -1, np.take(x, [[2, 0], [1, 1]], -1)),
        ("take", [3, 0], 0, np.take(x, [3, 0], 0)),
        ("take", [11, 0, 5], None, np.take(x, [11, 0, 5])),
        ("take", 2, 1, np.take(x, 2, 1)),  # the axis dropped on the server
        ("gather", -1, 0, np.take(x, -1, 0)),
        ("take", 7, None, np.asarray(np.take(x, 7))),  # 0-d, kept
        ("take_along_axis", along, 1, np.take_along_axis(x, along, 1)),
        ("take_along_axis", along[:1], 0, np.take_along_axis(x, along[:1], 0)),  # broadcast
        ("gather_elements", [[0, 1, 0]], 0, np.take_along_axis(x, np.array([[0, 1, 0]]), 0)),
    ]:
        kept = caller.call(name, x, indices, axis, keep=True)
        assert (kept.shape, kept.dtype) == (expected.shape, expected.dtype), (name, indices)
        same(caller.fetch(kept), expected)
        caller.release(kept)


def test_remote_tensors_in_and_kept_results_as_the_next_input(caller: Caller) -> None:
    x = values((4, 6), np.int64)
    view = x[:, ::2]  # (4, 3)
    remote = caller.call("put", view)  # strided on the server too
    index = np.array([[2, 0], [-1, 1]], np.int32)
    remote_index = caller.call("put", index)
    made = [remote, remote_index]
    try:
        same(caller.call("take", remote, index, 1), np.take(view, index, 1))
        same(caller.call("gather", view, remote_index), np.take(view, index, 0))
        same(caller.call("gather", remote, remote_index, -1), np.take(view, index, -1))
        same(caller.call("take", remote, 1, 0), view[1])
        # axis=None: a Reshape step flattens the RemoteTensor, in one chain.
        same(caller.call("take", remote, [11, 0, 4]), np.take(view, [11, 0, 4]))
        same(caller.call("take", remote, remote_index), np.take(view, index))
        same(caller.call("take_along_axis", remote, [7, 1], None),
             np.take_along_axis(view.reshape(-1), np.array([7, 1]), None))  # fmt: skip
        # Broadcast on the server: Expand steps before the GatherElements.
        column = caller.call("put", view[:, :1])  # (4, 1)
        made.append(column)
        along = np.array([[0, 0, 0, 0, 0]] * 2, np.uint64)
        same(caller.call("take_along_axis", column, along, 0),
             np.take_along_axis(view[:, :1], along, 0))  # fmt: skip
        # Kept indices of size 1 outside the axis, broadcast by an Expand step.
        row = caller.call("take", remote_index, [0], 0, keep=True)  # (1, 2), kept
        made.append(row)
        assert row.shape == (1, 2)
        same(caller.call("take_along_axis", remote, row, 1),
             np.take_along_axis(view, index[:1], 1))  # fmt: skip
        # A kept result as the next input, through gather and another operator.
        picked = caller.call("take", remote, index, 0, keep=True)  # (2, 2, 3)
        made.append(picked)
        assert picked.shape == (2, 2, 3)
        same(caller.fetch(picked), np.take(view, index, 0))
        again = caller.call("gather_elements", picked, np.zeros((2, 1, 3), np.int64), 1,
                            keep=True)  # fmt: skip
        made.append(again)
        same(caller.fetch(again), np.take(view, index, 0)[:, :1])
        same(caller.call("transpose", picked, (2, 0, 1)),
             np.take(view, index, 0).transpose(2, 0, 1))  # fmt: skip
        # A transposed kept tensor (a view on the server) gathered.
        turned = caller.call("transpose", remote, keep=True)
        made.append(turned)
        same(caller.call("take", turned, [2, 0], 1), np.take(view.T, [2, 0], 1))
        same(caller.call("take", turned, [5, 1]), np.take(view.T, [5, 1]))
    finally:
        for kept in made:
            caller.release(kept)


def test_a_0d_remote_tensor_is_not_flattened_nor_taken_as_indices(caller: Caller) -> None:
    x = values((5,), np.float32)
    scalar = caller.call("strided_slice", x, np.s_[2], keep=True)  # kept, rank 0
    index = caller.call("strided_slice", np.array([3, 1], np.int64), np.s_[0], keep=True)
    try:
        assert scalar.shape == () and index.shape == ()
        with pytest.raises(ValueError) as error:
            caller.call("take", scalar, [0])
        assert str(error.value) == (
            "take: a 0-d RemoteTensor cannot be flattened on the server (Reshape takes rank "
            "1..8): fetch it and pass the array"
        )
        with pytest.raises(ValueError, match="gather: 0-d RemoteTensor indices cannot become"):
            caller.call("gather", x, index)
        # Fetched, they are NumPy's.
        same(caller.call("take", caller.fetch(scalar), [0, 0]), np.take(x[2], [0, 0]))
        same(caller.call("gather", x, caller.fetch(index)), np.asarray(x[3]))
    finally:
        caller.release(scalar)
        caller.release(index)


# ---- run, chains, large answers ---------------------------------------------------


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_run_derives_the_output_sizes(caller: Caller, call: str) -> None:
    x = values((3, 4), np.bool_)
    index = np.array([[2, 0, 1]], np.uint32)
    inputs = {"input": x, "indices": index}
    (out,) = caller.call(call, "gather", inputs, {"axis": 0}).outputs
    same(out, np.take(x, as_numpy(index), 0))
    (out,) = caller.call(call, "gather", inputs, {"axis": -1}).outputs  # from the end
    same(out, np.take(x, as_numpy(index), 1))
    (out,) = caller.call(call, "gather", inputs, {"axis": 1}, [(3, 1, 3)]).outputs
    same(out, np.take(x, as_numpy(index), 1))  # sizes given: the server checks them
    along = np.array([[2, 1, 0, 0]], np.int64)
    inputs = {"input": x, "indices": along}
    (out,) = caller.call(call, "gather_elements", inputs, {"axis": 0}).outputs
    same(out, np.take_along_axis(x, along, 0))
    (kept,) = caller.call(call, "gather_elements", {"input": x[:1], "indices": along[:, :2]},
                          {"axis": -1}, keep=True).outputs  # fmt: skip
    assert kept.shape == (1, 2)
    caller.release(kept)
    (kept,) = caller.call(call, "gather_elements", {"input": x[:1], "indices": along},
                          {"axis": -1}, keep=True).outputs  # fmt: skip
    same(caller.fetch(kept), np.take_along_axis(x[:1], along, 1))
    caller.release(kept)


def test_a_chain_gathers_with_indices_from_another_step(caller: Caller) -> None:
    x = values((4, 5), np.float32)
    index = np.array([[3, 0, 1, 1, 2], [0, 0, 2, 3, 1], [4, 4, 4, 4, 4]], np.int64)
    # Indices made on the server: a slice of the index array, then read twice.
    rows = Step("strided_slice", {"input": index}, {"begin": [0], "end": [2]})  # (2, 5)
    picked = Step("gather", {"input": x, "indices": rows}, {"axis": 1})  # (4, 2, 5)
    along = Step("gather_elements", {"input": x, "indices": rows}, {"axis": 0})  # (2, 5)
    window = Step("slice", {"input": picked}, {"offsets": [1, 0, 1], "window_sizes": [2, 2, 3],
                                               "window_strides": [2, 1, 2]})  # fmt: skip
    result = caller.call(
        "chain", [rows, picked, along, window], [window, along, picked.output(0, keep=True)]
    )
    got_window, got_along, kept = result.outputs
    big = np.take(x, index[:2], 1)
    same(got_window, big[1:3:2, 0:2, 1:4:2])
    same(got_along, np.take_along_axis(x, index[:2], 0))
    same(caller.fetch(kept), big)
    caller.release(kept)


def test_a_chain_gathers_from_a_kept_input(caller: Caller) -> None:
    x = values((3, 2), np.int64)
    remote = caller.call("put", x)
    try:
        gathered = Step("gather", {"input": remote, "indices": np.array([2, 2, 0])}, {"axis": 0})
        turned = Step("transpose", {"input": gathered})
        (out,) = caller.call("chain", [gathered, turned]).outputs
        same(out, np.take(x, [2, 2, 0], 0).T)
    finally:
        caller.release(remote)


def test_answers_and_indices_larger_than_a_message_stream(small: Caller) -> None:
    x = values((100, 100), np.float32)  # 40000 bytes up
    rows = np.arange(1000, dtype=np.int64) % 100  # 8000 bytes up; 400000 down
    seen: list[tuple[int, int]] = []
    got = small.call("take", x, rows, 0, progress=lambda d, t: seen.append((d, t)))
    same(got, np.take(x, rows, 0))
    check_progress(seen, 40_000 + 8000 + 400_000)
    # Indices over the limit go up in chunks.
    flat = values((1000,), np.float32)
    many = np.random.default_rng(5).integers(-1000, 1000, 20_000)  # 160000 bytes
    same(small.call("take", flat, many), np.take(flat, many))
    same(small.call("take_along_axis", flat, many), np.take_along_axis(flat, many, -1))
    seen.clear()
    remote = small.call("put", x)
    try:  # through the chain: the Reshape step, then the Gather
        got = small.call("take", remote, many, progress=lambda d, t: seen.append((d, t)))
        same(got, np.take(x, many))
        check_progress(seen, 160_000 + 80_000)
    finally:
        small.release(remote)


# ---- errors ---------------------------------------------------------------------


def test_an_index_out_of_range_is_the_servers_invalid_argument(caller: Caller) -> None:
    x = values((4,), np.float32)
    with pytest.raises(TensorOpError) as error:
        caller.call("take", x, [0, 4, 9])
    assert refused(error) == (
        "indices[1] = 4 is outside [-4, 4) for input.sizes[0] = 4 (gather.axis = 0)"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("gather", values((2, 3), np.int8), [[0, 1], [-4, 2]], 1)
    assert refused(error) == (
        "indices[1, 0] = -4 is outside [-3, 3) for input.sizes[1] = 3 (gather.axis = 1)"
    )
    # Unsigned indices are never negative: uint64's largest is out of range, not -1.
    with pytest.raises(TensorOpError) as error:
        caller.call("take", x, np.array([2**64 - 1], np.uint64))
    assert refused(error) == (
        "indices[0] = 18446744073709551615 is outside [-4, 4) for input.sizes[0] = 4 "
        "(gather.axis = 0)"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("take_along_axis", values((2, 2), np.float32), [[0, 1], [2, 0]], 0)
    assert refused(error) == (
        "indices[1, 0] = 2 is outside [-2, 2) for input.sizes[0] = 2 (gather_elements.axis = 0)"
    )
    # A scalar index, taken as indices of sizes [1].
    with pytest.raises(TensorOpError) as error:
        caller.call("take", x, -5)
    assert refused(error) == (
        "indices[0] = -5 is outside [-4, 4) for input.sizes[0] = 4 (gather.axis = 0)"
    )
    # Through a chain (a flattened RemoteTensor, a scalar index kept).
    remote = caller.call("put", values((2, 2), np.float32))
    try:
        with pytest.raises(TensorOpError) as error:
            caller.call("take", remote, [1, 9])
        assert "indices[1] = 9 is outside [-4, 4) for input.sizes[0] = 4" in refused(error)
        with pytest.raises(TensorOpError) as error:
            caller.call("take", remote, 2, 1, keep=True)
        assert "indices[0] = 2 is outside [-2, 2) for input.sizes[1] = 2" in refused(error)
    finally:
        caller.release(remote)


def test_indices_dtypes_the_server_refuses(caller: Caller) -> None:
    x = values((4,), np.float32)
    # The methods refuse booleans and non-integers here, before sending.
    for indices in (np.array([1.0, 2.0]), [0.5], np.array([1], ml_dtypes.bfloat16)):
        with pytest.raises(TypeError, match="indices must be integers, not"):
            caller.call("take", x, indices)
        with pytest.raises(TypeError, match="indices must be integers, not"):
            caller.call("take_along_axis", x, indices, 0)
    with pytest.raises(TypeError, match=r"not bool \(a boolean mask selects with x\[mask\]"):
        caller.call("gather", x, np.array([True, False]))
    # Integers of 1 and 2 bytes are widened to int64 here; run sends them as
    # they are, and the server refuses them, as it refuses floats and bools.
    same(caller.call("take", x, np.array([3, -1], np.int16)), np.take(x, [3, -1]))
    for dtype, name in [(np.int16, "int16"), (np.uint8, "uint8"), (np.float32, "float32"),
                        (np.bool_, "bool"), (ml_dtypes.bfloat16, "bfloat16")]:  # fmt: skip
        for op in ("gather", "gather_elements"):
            with pytest.raises(TensorOpError) as error:
                caller.call("run", op, {"input": x, "indices": np.zeros(2, dtype)}, {"axis": 0})
            assert refused(error) == (
                f"indices.dtype is {name}; it must be int32, int64, uint32 or uint64"
            )


def test_ranks_sizes_and_axes(caller: Caller) -> None:
    x = values((2, 3), np.float32)
    # NumPy's errors, raised here.
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        caller.call("take", x, [0], 2)
    with pytest.raises(np.exceptions.AxisError):
        caller.call("gather_elements", x, [[0]], -3)
    with pytest.raises(ValueError, match="must have the same number of dimensions"):
        caller.call("take_along_axis", x, [0], 1)
    with pytest.raises(ValueError, match="when axis=None, `indices` must have a single dimension"):
        caller.call("take_along_axis", x, [[0]], None)
    with pytest.raises(IndexError, match=r"indices of shape \(3, 2\) do not broadcast"):
        caller.call("take_along_axis", x, np.zeros((3, 2), np.int64), 1)
    # The server's: an output rank over 8, an axis outside [0, rank) sent by run,
    # sizes and ranks gather_elements refuses.
    with pytest.raises(TensorOpError) as error:
        caller.call("take", values((2,) * 5, np.float32), np.zeros((1,) * 5, np.int64), 0)
    assert refused(error) == (
        "the output's rank would be 9 (input rank 5 + indices rank 5 - 1); gather's output "
        "takes rank 1..8"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "gather", {"input": x, "indices": np.zeros(1, np.int32)}, {"axis": -3})
    assert refused(error) == "gather.axis = -3 is outside [0, 2)"
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "gather_elements", {"input": x, "indices": np.zeros((2, 2), np.int32)},
                    {"axis": 0})  # fmt: skip
    assert refused(error) == (
        "indices.sizes[1] = 2 must equal input.sizes[1] = 3 (only gather_elements.axis = 0 may "
        "differ)"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "gather_elements", {"input": x, "indices": np.zeros(2, np.int32)},
                    {"axis": 0})  # fmt: skip
    assert refused(error) == "indices has rank 1; input has rank 2"
    # An empty result: made here without a call; kept, the server's zero sizes.
    empty = caller.call("take", x, [], 1)
    assert empty.shape == (2, 0) and empty.dtype == np.float32
    with pytest.raises(TensorOpError) as error:
        caller.call("take", x, [], 1, keep=True)
    assert error.value.code == "INVALID_ARGUMENT"
    # An output over 2^32 - 1 elements (inputs of a few bytes: broadcast views).
    with pytest.raises(TensorOpError) as error:
        caller.call("take", np.broadcast_to(np.uint8(1), (65536, 2)),
                    np.broadcast_to(np.int32(0), (65536,)), 1)  # fmt: skip
    assert error.value.code == "RESOURCE_EXHAUSTED", error.value
    assert error.value.message == (
        "outputs[0].sizes [65536, 65536] hold 4294967296 elements; the limit is 4294967295"
    )
