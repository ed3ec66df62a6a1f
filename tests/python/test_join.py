"""concatenate and join against the real tensord, through Client and
AsyncClient: the methods against numpy.concatenate, shapes and bits, for
float32, int64, uint8, float16, bfloat16 and bool, along every axis
(negative ones, None flattening the arrays), for one array, 150 and 4096;
strided, reversed, broadcast and Fortran-order inputs on both backends;
RemoteTensors in (flattened ones through Reshape steps in one chain) and
kept outputs out; `run`, its streamed and chunked forms and chains with join
steps; answers past the message limit; and the errors: NumPy's and the dtype
error raised here, the server's INVALID_ARGUMENT and RESOURCE_EXHAUSTED in
its words."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from test_operators import Caller, check_progress, same, values

DTYPES = [np.float32, np.int64, np.uint8, np.float16, ml_dtypes.bfloat16, np.bool_]


def refused(error: pytest.ExceptionInfo[TensorOpError], code: str = "INVALID_ARGUMENT") -> str:
    """The server's message, of `code`."""
    assert error.value.code == code, error.value
    return error.value.message


def arrays_of(shapes: list[tuple[int, ...]], dtype: Any) -> list[np.ndarray]:
    """One array per shape, each in an order of its own."""
    return [values(shape, dtype, seed=k) for k, shape in enumerate(shapes)]


# ---- numpy.concatenate ------------------------------------------------------------

JOINS = [
    ([(4,), (2,), (5,)], 0),
    ([(2, 3), (2, 4)], 1),
    ([(2, 3), (1, 3), (3, 3)], 0),
    ([(2, 3), (2, 3)], -1),  # negative axes
    ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], -2),
    ([(2, 3, 4), (2, 3, 1)], -1),
    ([(2, 3), (4,), (1, 1, 2)], None),  # None: every array flattened
    ([(), (2,), (2, 2)], None),  # ... 0-d ones too, as NumPy's
    ([(3,)], 0),  # one array: a copy
    ([(2, 5)], -1),
    ([(1, 1, 2, 3), (1, 1, 2, 4)], 3),  # DirectML's example 1
    ([(1, 2, 1, 2, 1, 2, 1, 2), (1, 2, 1, 2, 1, 1, 1, 2)], 5),  # rank 8
    ([(2, 0), (2, 3), (2, 0), (2, 1)], 1),  # empty ones along the axis: not sent
]


@pytest.mark.parametrize("shapes, axis", JOINS, ids=repr)
def test_concatenate_is_numpys(caller: Caller, shapes: list[tuple[int, ...]], axis: Any) -> None:
    for dtype in DTYPES:
        arrays = arrays_of(shapes, dtype)
        expected = np.concatenate(arrays, axis)
        for name in ("concatenate", "join"):
            got = caller.call(name, arrays, axis)
            same(got, expected)
            assert not got.flags.writeable
    # Lists, as NumPy reads them (each on its own: int64 here), and the default axis, 0.
    if all(math.prod(shape) for shape in shapes):  # [] would be NumPy's float64
        lists = [a.tolist() for a in arrays_of(shapes, np.int64)]
        same(caller.call("concatenate", lists, axis), np.concatenate(lists, axis))
    if axis == 0:
        arrays = arrays_of(shapes, np.float32)
        same(caller.call("join", arrays), np.concatenate(arrays))
        same(caller.call("concatenate", arrays), np.concatenate(arrays))


def test_join_values_are_the_operators_examples(caller: Caller) -> None:
    first = np.array([[[[1, 2, 3], [4, 5, 6]]]], np.float32)
    second = np.array([[[[7, 8, 9, 10], [11, 12, 13, 14]]]], np.float32)
    assert caller.call("join", [first, second], 3).tolist() == [[[[1, 2, 3, 7, 8, 9, 10],
                                                                   [4, 5, 6, 11, 12, 13, 14]]]]
    parts = [np.array([[[[1, 2], [3, 4]]]]) + 4 * k for k in range(3)]  # example 2
    assert caller.call("concatenate", parts, 1).reshape(-1).tolist() == list(range(1, 13))
    assert caller.call("concatenate", parts, -1).tolist() == [[[[1, 2, 5, 6, 9, 10],
                                                                [3, 4, 7, 8, 11, 12]]]]
    # Eleven inputs in numeric order: inputs_10 after inputs_9.
    eleven = [np.array([k], np.int8) for k in range(-5, 6)]
    assert caller.call("join", eleven).tolist() == list(range(-5, 6))
    # Bits: bfloat16's -0.0 and inf, a bool byte other than 0 and 1, int64's extremes.
    halves = np.array([1.5, -0.0, np.inf], ml_dtypes.bfloat16)
    got = caller.call("concatenate", [halves[1:], halves])
    assert got.dtype == ml_dtypes.bfloat16
    assert got.view(np.uint16).tolist() == np.concatenate([halves[1:], halves]).view(
        np.uint16).tolist()  # fmt: skip
    flags = np.array([1, 0, 7], np.uint8).view(np.bool_)
    assert caller.call("join", [flags, flags[::-1]]).view(np.uint8).tolist() == [1, 0, 7, 7, 0, 1]
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    assert caller.call("join", [extremes[::-1], extremes]).tolist() == [
        *extremes[::-1].tolist(), *extremes.tolist()]  # fmt: skip


def test_many_arrays(caller: Caller) -> None:
    rows = [values((k % 3 + 1, 4), np.float16, seed=k) for k in range(150)]
    same(caller.call("concatenate", rows), np.concatenate(rows))
    columns = [row.T for row in rows]  # strided, each (4, n)
    same(caller.call("join", columns, -1), np.concatenate(columns, -1))
    # The server's most, 4096, one element each.
    many = [np.array([k], np.int32) for k in range(4096)]
    same(caller.call("concatenate", many), np.arange(4096, dtype=np.int32))


def test_strided_reversed_broadcast_and_fortran_inputs_on_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    mixed = [base[:, ::2], base[::-1, 1::2], np.broadcast_to(base[:1, :1], (6, 3)),
             np.asfortranarray(base[:, :3]), base.T[:, :6].T[:, ::-1]]  # fmt: skip
    for backend in ("cpu", "opencl"):
        same(caller.call("concatenate", mixed, 1, backend=backend), np.concatenate(mixed, 1))
        turned = [np.ascontiguousarray(a).T for a in mixed]  # F-order views, (n, 6)
        same(caller.call("join", turned, 0, backend=backend), np.concatenate(turned, 0))
        same(caller.call("concatenate", mixed, None, backend=backend),
             np.concatenate(mixed, None))  # fmt: skip
        big_endian = [a.astype(">f4") for a in mixed]  # swapped here, float32 on the wire
        got = caller.call("concatenate", big_endian, -1, backend=backend)
        assert got.dtype == np.dtype("<f4")
        same(got, np.concatenate(mixed, -1))


# ---- kept outputs, RemoteTensors in -----------------------------------------------


def test_remote_tensors_in_and_kept_results_out(caller: Caller) -> None:
    x = values((4, 6), np.int64)
    view = x[:, ::2]  # (4, 3)
    remote = caller.call("put", view)  # strided on the server too
    made = [remote]
    try:
        same(caller.call("concatenate", [remote, view, remote], 0),
             np.concatenate([view, view, view], 0))  # fmt: skip
        same(caller.call("join", [x, remote], -1), np.concatenate([x, view], -1))
        # axis=None: a Reshape step flattens each RemoteTensor, in one chain.
        same(caller.call("concatenate", [remote, x, remote], None),
             np.concatenate([view, x, view], None))  # fmt: skip
        # Kept: fetched as NumPy's; then the next input.
        kept = caller.call("concatenate", [remote, view[:1]], keep=True)
        made.append(kept)
        assert (kept.shape, kept.dtype) == ((5, 3), np.int64)
        same(caller.fetch(kept), np.concatenate([view, view[:1]]))
        again = caller.call("join", [kept, kept, remote], 0, keep=True)
        made.append(again)
        assert again.shape == (14, 3)
        same(caller.fetch(again), np.concatenate([view, view[:1], view, view[:1], view]))
        flat = caller.call("join", [again, kept], None, keep=True)
        made.append(flat)
        same(caller.fetch(flat), np.concatenate([caller.fetch(again), caller.fetch(kept)], None))
        # A transposed kept tensor (a view on the server) joined.
        turned = caller.call("transpose", remote, keep=True)  # (3, 4)
        made.append(turned)
        same(caller.call("concatenate", [turned, x[:, :4]], 0), np.concatenate([view.T, x[:, :4]]))
        # A kept join split again: the inverse.
        pair = caller.call("join", [remote, remote], 1, keep=True)
        made.append(pair)
        left, right = caller.call("split", pair, 2, 1)
        same(left, view)
        same(right, view)
    finally:
        for tensor in made:
            caller.release(tensor)


def test_a_0d_remote_tensor_is_not_flattened(caller: Caller) -> None:
    x = values((5,), np.float32)
    scalar = caller.call("strided_slice", x, np.s_[2], keep=True)  # kept, rank 0
    try:
        assert scalar.shape == ()
        with pytest.raises(ValueError) as error:
            caller.call("concatenate", [x, scalar], None)
        assert str(error.value) == (
            "concatenate: a 0-d RemoteTensor cannot be flattened on the server (Reshape takes "
            "rank 1..8): fetch it and pass the array"
        )
        same(caller.call("concatenate", [x, caller.fetch(scalar)], None), np.append(x, x[2]))
        with pytest.raises(ValueError, match="^zero-dimensional arrays cannot be concatenated$"):
            caller.call("join", [scalar, scalar])
    finally:
        caller.release(scalar)


def test_empty_results_are_made_here_and_refused_kept(caller: Caller) -> None:
    nothing = np.zeros((2, 0), np.float32)
    for arrays, axis in [([nothing, nothing], 1), ([np.zeros((0, 3), np.float32)] * 2, 0),
                         ([np.zeros(0, np.float32)], None)]:  # fmt: skip
        empty = caller.call("concatenate", arrays, axis)
        same(empty, np.concatenate(arrays, axis))
        assert not empty.flags.writeable
    with pytest.raises(TensorOpError) as error:
        caller.call("concatenate", [nothing, nothing], 1, keep=True)
    assert refused(error) == "inputs_0.sizes[1] must be >= 1, got 0"
    # With elements, the empty ones are left out, kept or not.
    kept = caller.call("join", [nothing, np.ones((2, 2), np.float32)], 1, keep=True)
    try:
        assert kept.shape == (2, 2)
        same(caller.fetch(kept), np.ones((2, 2), np.float32))
    finally:
        caller.release(kept)


# ---- run, chains, large answers ---------------------------------------------------


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_run_derives_the_output_sizes(caller: Caller, call: str) -> None:
    a, b = values((3, 2), np.uint16), values((3, 5), np.uint16, seed=1)
    inputs = {"inputs_0": a, "inputs_1": b, "inputs_2": a}
    (out,) = caller.call(call, "join", inputs, {"axis": 1}).outputs
    same(out, np.concatenate([a, b, a], 1))
    (out,) = caller.call(call, "join", inputs, {"axis": -1}).outputs  # from the end
    same(out, np.concatenate([a, b, a], 1))
    (out,) = caller.call(call, "join", inputs, {"axis": 1}, [(3, 9)]).outputs  # checked
    same(out, np.concatenate([a, b, a], 1))
    (out,) = caller.call(call, "join", {"inputs_0": a}, {"axis": 0},
                         [{"sizes": [3, 2], "strides": [1, 3]}]).outputs  # fmt: skip
    same(out, a)
    assert [s // out.itemsize for s in out.strides] == [1, 3]
    (kept,) = caller.call(call, "join", inputs, {"axis": 1}, keep=True).outputs
    same(caller.fetch(kept), np.concatenate([a, b, a], 1))
    caller.release(kept)


def test_a_chain_joins_steps_outputs_arrays_and_kept_tensors(caller: Caller) -> None:
    x = values((4, 6), np.float32)
    remote = caller.call("put", x[:, :2])
    try:
        turned = Step("transpose", {"input": x})  # (6, 4)
        top = Step("strided_slice", {"input": turned}, {"begin": [0], "end": [2]})  # (2, 4)
        joined = Step("join", {"inputs_0": top, "inputs_1": x[:3, :4], "inputs_2": turned,
                               "inputs_3": Step("transpose", {"input": remote})}, {"axis": 0})
        window = Step("slice", {"input": joined}, {"offsets": [1, 0], "window_sizes": [12, 4],
                                                   "window_strides": [3, 2]})  # fmt: skip
        chain = [turned, top, joined.inputs["inputs_3"], joined, window]
        got_joined, got_window = caller.call("chain", chain, [joined, window]).outputs
        expected = np.concatenate([x.T[:2], x[:3, :4], x.T, x[:, :2].T])  # (13, 4)
        same(got_joined, expected)
        same(got_window, expected[1:13:3, ::2])
    finally:
        caller.release(remote)


def test_answers_larger_than_a_message_stream(small: Caller) -> None:
    parts = [values((100, 100), np.float32, seed=k) for k in range(3)]  # 40000 bytes each
    seen: list[tuple[int, int]] = []
    got = small.call("concatenate", parts, -1, progress=lambda d, t: seen.append((d, t)))
    same(got, np.concatenate(parts, -1))
    check_progress(seen, 2 * 120_000)
    remote = small.call("put", parts[0])
    try:
        seen.clear()
        got = small.call("join", [remote, parts[1], remote], None,
                         progress=lambda d, t: seen.append((d, t)))  # fmt: skip
        same(got, np.concatenate([parts[0], parts[1], parts[0]], None))
        check_progress(seen, 40_000 + 120_000)
    finally:
        small.release(remote)


# ---- errors ---------------------------------------------------------------------


def test_numpys_errors_and_the_dtype_error_are_raised_here(caller: Caller) -> None:
    x = values((2, 3), np.float32)
    with pytest.raises(ValueError, match="^need at least one array to concatenate$"):
        caller.call("concatenate", [])
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        caller.call("concatenate", [x, x], 2)
    with pytest.raises(np.exceptions.AxisError, match="axis -3 is out of bounds"):
        caller.call("join", [x], -3)
    with pytest.raises(ValueError) as error:
        caller.call("concatenate", [x, x[0]])
    assert str(error.value) == (
        "all the input arrays must have same number of dimensions, but the array at index 0 "
        "has 2 dimension(s) and the array at index 1 has 1 dimension(s)"
    )
    with pytest.raises(ValueError) as error:
        caller.call("join", [x, x.T], 1)
    assert str(error.value) == (
        "all the input array dimensions except for the concatenation axis must match exactly, "
        "but along dimension 0, the array at index 0 has size 2 and the array at index 1 has "
        "size 3"
    )
    with pytest.raises(TypeError) as error:
        caller.call("concatenate", [x, x.astype(np.float64)])
    assert str(error.value) == (
        "concatenate: arrays[1].dtype is float64; arrays[0].dtype is float32: the server joins "
        "arrays of one dtype (NumPy would promote them to float64); cast them to one first, "
        'e.g. arrays[1].astype("float32")'
    )
    same(caller.call("concatenate", [x, x.astype(np.float64).astype(np.float32)]),
         np.concatenate([x, x]))  # fmt: skip


def test_the_servers_errors_in_its_words(caller: Caller) -> None:
    a, b = values((2, 3), np.float32), values((3, 4), np.float32)
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "join", {"inputs_0": a, "inputs_1": a.astype(np.float64)}, {"axis": 0})
    assert refused(error) == (
        "inputs_1.dtype is float64; inputs_0.dtype is float32 (join's inputs have one dtype)"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "join", {"inputs_0": a, "inputs_1": a}, {"axis": 2})
    assert refused(error) == "join.axis = 2 is outside [0, 2)"
    with pytest.raises(TensorOpError) as error:  # outside [-rank, rank): sent as it is
        caller.call("run", "join", {"inputs_0": a}, {"axis": -3})
    assert refused(error) == "join.axis = -3 is outside [0, 2)"
    request = pb.RunRequest(join=pb.JoinAttrs(axis=-1))  # a ready request: no NumPy axis
    request.inputs["inputs_0"].CopyFrom(pb.Tensor(dtype=pb.FLOAT32, sizes=[2, 3],
                                                  data=a.tobytes()))  # fmt: skip
    with pytest.raises(TensorOpError) as error:
        caller.call("run_request", request)
    assert refused(error) == "join.axis = -1 is outside [0, 2)"
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "join", {"inputs_0": a, "inputs_1": b}, {"axis": 1})
    assert refused(error) == (
        "inputs_1.sizes[0] = 3 must equal inputs_0.sizes[0] = 2 (only join.axis = 1 may differ)"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "join", {"inputs_0": a, "inputs_2": a}, {"axis": 0})
    assert refused(error) == (
        'inputs has "inputs_2" but not "inputs_1"; join\'s inputs are numbered from "inputs_0" '
        "without gaps"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "join", {}, {"axis": 0})
    assert refused(error) == 'inputs is empty; join takes one or more, "inputs_0" first'


def test_resource_exhausted_passes_through(caller: Caller) -> None:
    # More than 4096 arrays.
    many = [np.array([k], np.int32) for k in range(4097)]
    with pytest.raises(TensorOpError) as error:
        caller.call("concatenate", many)
    assert refused(error, "RESOURCE_EXHAUSTED") == (
        "inputs has 4097 entries; join takes at most 4096"
    )
    # An output over 2^32 - 1 elements (inputs of one byte each: broadcast views).
    wide = np.broadcast_to(np.uint8(1), (65536, 32768))
    with pytest.raises(TensorOpError) as error:
        caller.call("join", [wide, wide], 1)
    assert refused(error, "RESOURCE_EXHAUSTED") == (
        "outputs[0].sizes [65536, 65536] hold 4294967296 elements; the limit is 4294967295"
    )
    # Flattened, each RemoteTensor takes a Reshape step (one however often it
    # is joined): 64 of them and the join are more steps than a chain takes
    # (--max_chain_steps, 64).
    squares = [values((2, 2), np.float32, seed=k) for k in range(64)]
    remotes = [caller.call("put", square) for square in squares]
    try:
        same(caller.call("concatenate", [remotes[0]] * 100, None), np.tile(squares[0].ravel(), 100))
        same(caller.call("concatenate", remotes[:63], None), np.concatenate(squares[:63], None))
        with pytest.raises(TensorOpError) as error:
            caller.call("concatenate", remotes, None)
        assert error.value.code == "RESOURCE_EXHAUSTED", error.value
        assert "64" in error.value.message, error.value
    finally:
        caller.release(remotes)
