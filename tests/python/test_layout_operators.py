"""transpose, reshape, expand and broadcast_to against the real tensord, each
through Client and AsyncClient: the methods against numpy.transpose,
numpy.reshape, ONNX Expand (numpy.broadcast_to to the broadcast of both
shapes) and numpy.broadcast_to, shapes and bits, for float32, bfloat16, bool
and int64; strided and broadcast inputs on both backends; kept outputs and
RemoteTensors in; NumPy's errors raised here and the server's
INVALID_ARGUMENT naming the attribute; `run` without outputs; chains; and an
expand whose answer outgrows the message limit."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, TensorOpError
from test_operators import Caller, check_progress, same, values

DTYPES = [np.float32, ml_dtypes.bfloat16, np.bool_, np.int64]


def onnx_expand(x: np.ndarray, shape: Any) -> np.ndarray:
    """ONNX Expand's reference: x broadcast with `shape`, each aligned
    position taking the larger size (a 1 in `shape` keeps x's)."""
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(np.atleast_1d(shape))))


def refused(error: pytest.ExceptionInfo[TensorOpError], field: str) -> str:
    """The server's INVALID_ARGUMENT, whose message starts with `field`."""
    assert error.value.code == "INVALID_ARGUMENT", error.value
    assert error.value.message.startswith(field), error.value.message
    return error.value.message


# ---- transpose --------------------------------------------------------------

TRANSPOSES = [
    ((2, 3, 4), None),
    ((2, 3, 4), (1, 0, 2)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 3, 4), (-1, 0, -2)),  # negative axes, as NumPy
    ((2, 3, 4), [0, 1, 2]),  # the identity: a copy
    ((5,), None),
    ((5,), (0,)),
    ((1, 2, 1, 3), (3, 2, 1, 0)),
    ((3, 5), np.array([1, 0])),
    ((2, 1, 3, 1, 2, 1, 2, 1), (7, 0, 6, 1, 5, 2, 4, 3)),  # rank 8
]


@pytest.mark.parametrize("shape, axes", TRANSPOSES, ids=repr)
def test_transpose_is_numpys(caller: Caller, shape: tuple[int, ...], axes: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        got = caller.call("transpose", x, axes)
        same(got, np.transpose(x, axes))
        assert not got.flags.writeable


def test_transpose_of_strided_views_and_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    cube = values((4, 3, 5), np.int64)
    for backend in ("cpu", "opencl"):
        for x in (base.T, base[:, ::2], base[1::2, ::-3], np.broadcast_to(base[:1], (4, 8))):
            for axes in (None, (0, 1), (1, 0)):
                same(caller.call("transpose", x, axes, backend=backend), np.transpose(x, axes))
        for axes in (None, (1, 2, 0), (2, 1, 0)):
            x = cube.transpose(2, 0, 1)[::2]
            same(caller.call("transpose", x, axes, backend=backend), np.transpose(x, axes))


def test_transpose_errors(caller: Caller) -> None:
    x = values((2, 3, 4), np.float32)
    # NumPy's, before anything is sent.
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of bounds"):
        caller.call("transpose", x, (0, 1, 3))
    with pytest.raises(ValueError, match="axes don't match array"):
        caller.call("transpose", x, ())  # an empty perm would mean reversed
    # The server's, naming transpose.perm.
    with pytest.raises(TensorOpError) as error:
        caller.call("transpose", x, (1, 0))
    assert refused(error, "transpose.perm") == "transpose.perm has 2 entries; input has rank 3"
    with pytest.raises(TensorOpError) as error:
        caller.call("transpose", x, (1, -2, 0))  # -2 is 1: repeated
    assert refused(error, "transpose.perm[1]") == "transpose.perm[1] = 1 repeats transpose.perm[0]"
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "transpose", {"input": x}, {"perm": [0, 1, 3]})
    assert refused(error, "transpose.perm[2]") == "transpose.perm[2] = 3 is outside [0, 3)"
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "transpose", {"input": x}, {"perm": [0, 0, 1]})
    assert refused(error, "transpose.perm[1]") == "transpose.perm[1] = 0 repeats transpose.perm[0]"
    with pytest.raises(TensorOpError) as error:  # run does not count axes from the end
        caller.call("run", "transpose", {"input": x}, {"perm": [-1, 0, 1]})
    refused(error, "transpose.perm[0]")


# ---- reshape ----------------------------------------------------------------

RESHAPES = [
    ((2, 3, 4), (4, -1)),
    ((2, 3, 4), 24),
    ((2, 3, 4), -1),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), [2, -1, 3]),
    ((2, 3, 4), (4, 3, 2)),
    ((6,), (1, 2, 1, 3)),
    ((6,), np.array([3, 2])),
    ((1, 1, 1), (1,)),
    ((2, 3, 4), (1, 2, 1, 3, 1, 2, 1, 2)),  # rank 8
]


@pytest.mark.parametrize("shape, new_shape", RESHAPES, ids=repr)
def test_reshape_is_numpys(caller: Caller, shape: tuple[int, ...], new_shape: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        got = caller.call("reshape", x, new_shape)
        same(got, np.reshape(x, new_shape))
        assert not got.flags.writeable


def test_reshape_reads_strided_views_in_row_major_order(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    for backend in ("cpu", "opencl"):
        for x in (base.T, base[:, ::2], base[::-2, 1::3], np.broadcast_to(base[:1], (3, 8))):
            for new_shape in (-1, (x.shape[1], x.shape[0]), (2, -1)):
                if x.size % 2 and new_shape == (2, -1):
                    continue
                same(
                    caller.call("reshape", x, new_shape, backend=backend),
                    np.reshape(x, new_shape),
                )


def test_reshape_errors(caller: Caller) -> None:
    x = values((2, 3), np.float32)
    with pytest.raises(TypeError, match="shape must be an integer or a sequence of integers"):
        caller.call("reshape", x, (2.0, 3))
    with pytest.raises(TensorOpError) as error:
        caller.call("reshape", x, (-1, -1))
    assert refused(error, "reshape.sizes[1]") == (
        "reshape.sizes[1] is a second -1 (reshape.sizes[0] is one); at most one"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("reshape", x, (6, 0))  # NumPy's empty shapes: the operator's sizes are >= 1
    assert refused(error, "reshape.sizes[1]") == "reshape.sizes[1] must be >= 1 or -1, got 0"
    with pytest.raises(TensorOpError) as error:
        caller.call("reshape", x, (2, 2))
    assert refused(error, "reshape.sizes [2, 2]") == (
        "reshape.sizes [2, 2] hold 4 elements; the input has 6"
    )
    with pytest.raises(TensorOpError) as error:  # more than the input holds
        caller.call("run", "reshape", {"input": x}, {"sizes": [4, 2]})
    assert "6" in refused(error, "reshape.sizes [4, 2]")
    with pytest.raises(TensorOpError) as error:  # -1 with a product that does not divide
        caller.call("reshape", x, (4, -1))
    assert "6" in refused(error, "reshape.sizes [4, -1]")


# ---- expand and broadcast_to -------------------------------------------------

EXPANDS = [
    ((3, 1), (2, 1, 6)),  # ONNX's dim_changed: (2, 3, 6)
    ((3, 1), (3, 4)),
    ((3, 4), (1,)),  # a 1 keeps the input's size: a copy
    ((3, 4), (2, 1, 1)),
    ((1,), (2, 3)),
    ((2, 1, 3), (2, 4, 1)),
    ((3,), 3),
    ((1, 3), [5, 1]),
    ((1,), (1, 1, 2, 1, 1, 1, 1, 3)),  # rank 8
]


@pytest.mark.parametrize("shape, sizes", EXPANDS, ids=repr)
def test_expand_is_onnx_expand(caller: Caller, shape: tuple[int, ...], sizes: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        got = caller.call("expand", x, sizes)
        same(got, onnx_expand(x, sizes))
        assert not got.flags.writeable


BROADCASTS = [
    ((3, 1), (2, 3, 4)),
    ((1,), 5),
    ((1,), (5,)),
    ((2, 1, 3), (2, 4, 3)),
    ((4,), (3, 4)),
    ((3, 4), (3, 4)),  # the same shape: a copy
]


@pytest.mark.parametrize("shape, target", BROADCASTS, ids=repr)
def test_broadcast_to_is_numpys(caller: Caller, shape: tuple[int, ...], target: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        got = caller.call("broadcast_to", x, target)
        same(got, np.ascontiguousarray(np.broadcast_to(x, target)))
        assert not got.flags.writeable


def test_expand_of_strided_views_and_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    for backend in ("cpu", "opencl"):
        for x, sizes in (
            (base.T[:, :1], (8, 5)),
            (base[::2, ::3][:, None], (3, 4, 3)),
            (base[::-1, :1], (2, 1, 4)),
            (np.broadcast_to(base[:1, :1], (4, 1)), (4, 6)),  # stride 0 in
        ):
            same(caller.call("expand", x, sizes, backend=backend), onnx_expand(x, sizes))
            if np.broadcast_shapes(x.shape, sizes) == sizes:
                same(
                    caller.call("broadcast_to", x, sizes, backend=backend),
                    np.broadcast_to(x, sizes),
                )


def numpys_error(x: np.ndarray, shape: Any) -> str:
    with pytest.raises(ValueError) as error:
        np.broadcast_to(x, shape)
    return str(error.value)


def test_broadcast_to_refuses_what_numpy_refuses(caller: Caller) -> None:
    x = values((3, 4), np.float32)
    # ONNX Expand takes these (a 1, or fewer entries, where x is larger)...
    same(caller.call("expand", x, (1, 4)), x)
    same(caller.call("expand", x, (4,)), x)
    # ...numpy.broadcast_to does not: its own ValueError, before anything is sent.
    for shape in ((1, 4), (4,), (3, 1), (2, 4), (5, 3, 1), -1):
        with pytest.raises(ValueError) as error:
            caller.call("broadcast_to", x, shape)
        assert str(error.value) == numpys_error(x, shape), shape
    with pytest.raises(TypeError, match="shape must be an integer or a sequence of integers"):
        caller.call("broadcast_to", x, "3, 4")
    # NumPy's empty result: the operator's sizes are >= 1.
    with pytest.raises(TensorOpError) as error:
        caller.call("broadcast_to", values((1,), np.float32), (0,))
    assert refused(error, "expand.sizes[0]") == "expand.sizes[0] must be >= 1, got 0"


def test_expand_errors(caller: Caller) -> None:
    x = values((3,), np.float32)
    with pytest.raises(TensorOpError) as error:
        caller.call("expand", x, (4,))
    assert refused(error, "expand.sizes[0]") == (
        "expand.sizes[0] = 4 does not broadcast with input.sizes[0] = 3: "
        "they must be equal or one of them 1"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "expand", {"input": values((2, 3), np.int64)}, {"sizes": [5, 2, 2]})
    assert refused(error, "expand.sizes[2]").startswith("expand.sizes[2] = 2 does not broadcast")
    with pytest.raises(TensorOpError) as error:
        caller.call("expand", x, (2, -1))
    assert refused(error, "expand.sizes[1]") == "expand.sizes[1] must be >= 1, got -1"


# ---- kept outputs, RemoteTensors in -----------------------------------------


def test_kept_outputs_fetch_as_numpy_computes(caller: Caller) -> None:
    x = values((2, 3, 4), ml_dtypes.bfloat16)
    cases = [
        ("transpose", (2, 0, 1), np.transpose(x, (2, 0, 1))),
        ("reshape", (4, -1), np.reshape(x, (4, -1))),
        ("expand", (2, 1, 1, 1), onnx_expand(x, (2, 1, 1, 1))),
        ("broadcast_to", (5, 2, 3, 4), np.broadcast_to(x, (5, 2, 3, 4))),
    ]
    for name, argument, expected in cases:
        kept = caller.call(name, x, argument, keep=True)
        assert (kept.shape, kept.dtype) == (expected.shape, expected.dtype), name
        same(caller.fetch(kept), np.ascontiguousarray(expected))
        caller.release(kept)


def test_remote_tensors_in_and_kept_results_as_the_next_input(caller: Caller) -> None:
    x = values((4, 6), np.int64)
    remote = caller.call("put", x[:, ::2])  # strided on the server too
    made = [remote]
    try:
        view = x[:, ::2]
        same(caller.call("transpose", remote), view.T)
        same(caller.call("reshape", remote, -1), view.reshape(-1))
        same(caller.call("expand", remote, (2, 1, 1)), onnx_expand(view, (2, 1, 1)))
        same(caller.call("broadcast_to", remote, (2, 4, 3)), np.broadcast_to(view, (2, 4, 3)))
        # Kept from a kept input (views on the server), then read again.
        transposed = caller.call("transpose", remote, keep=True)
        made.append(transposed)
        assert transposed.shape == (3, 4)
        same(caller.fetch(transposed), view.T)
        flat = caller.call("reshape", transposed, (2, 6), keep=True)
        made.append(flat)
        same(caller.fetch(flat), view.T.reshape(2, 6))
        wide = caller.call("expand", transposed, (2, 3, 4), keep=True)
        made.append(wide)
        same(caller.fetch(wide), np.broadcast_to(view.T, (2, 3, 4)))
        broadcast = np.broadcast_to(view.T, (2, 3, 4))
        same(caller.call("transpose", wide, (2, 0, 1)), broadcast.transpose(2, 0, 1))
        same(caller.call("reshape", wide, (4, 6)), broadcast.reshape(4, 6))
    finally:
        for kept in made:
            caller.release(kept)


# ---- run, chains, large answers ---------------------------------------------


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_run_derives_the_output_sizes(caller: Caller, call: str) -> None:
    x = values((2, 3, 4), np.bool_)
    (out,) = caller.call(call, "transpose", {"input": x}, {"perm": [1, 0, 2]}).outputs
    same(out, x.transpose(1, 0, 2))
    (out,) = caller.call(call, "transpose", {"input": x}).outputs  # no perm: reversed
    same(out, x.T)
    (out,) = caller.call(call, "reshape", {"input": x}, {"sizes": [3, -1]}).outputs
    same(out, x.reshape(3, -1))
    column = x[:, :, :1]  # (2, 3, 1), strided
    (out,) = caller.call(call, "expand", {"input": column}, {"sizes": [2, 1, 1, 5]}).outputs
    same(out, onnx_expand(column, (2, 1, 1, 5)))  # (2, 2, 3, 5)
    (out,) = caller.call(call, "reshape", {"input": x}, {"sizes": [4, 6]}, [(4, 6)]).outputs
    same(out, x.reshape(4, 6))  # sizes given: the server checks them
    (kept,) = caller.call(call, "expand", {"input": x}, {"sizes": [3, 1, 1, 1]}, keep=True).outputs
    same(caller.fetch(kept), np.broadcast_to(x, (3, 2, 3, 4)))
    caller.release(kept)


def test_a_chain_transposes_then_slices(caller: Caller) -> None:
    x = values((4, 6), np.float32)
    transposed = Step("transpose", {"input": x}, {"perm": [1, 0]})
    rows = Step("strided_slice", {"input": transposed}, {"begin": [5], "end": [0], "stride": [-2]})
    window = Step(
        "slice",
        {"input": transposed},
        {"offsets": [0, 1], "window_sizes": [6, 3], "window_strides": [3, 1]},
    )
    flat = Step("reshape", {"input": rows}, {"sizes": [-1]})
    wide = Step("expand", {"input": flat}, {"sizes": [2, 1]})
    result = caller.call(
        "chain",
        [transposed, rows, window, flat, wide],
        [rows, window, wide, transposed.output(0, keep=True)],
    )
    got_rows, got_window, got_wide, kept = result.outputs
    same(got_rows, x.T[5:0:-2])
    same(got_window, x.T[::3, 1:4])
    same(got_wide, np.broadcast_to(x.T[5:0:-2].reshape(-1), (2, 12)))
    same(caller.fetch(kept), x.T)
    caller.release(kept)


def test_a_chain_step_error_names_the_attribute(caller: Caller) -> None:
    x = values((4, 6), np.float32)
    first = Step("transpose", {"input": x}, {"perm": [1, 1]})
    with pytest.raises(TensorOpError) as error:
        caller.call("chain", [first, Step("reshape", {"input": first}, {"sizes": [-1]})])
    assert error.value.code == "INVALID_ARGUMENT"
    assert error.value.message.startswith("steps[0].transpose.perm[1]"), error.value.message


def test_an_expand_larger_than_a_message_streams_back(small: Caller) -> None:
    x = values((1, 1000), np.float32)  # 4000 bytes up; 400000 down, over the 64 KiB limit
    seen: list[tuple[int, int]] = []
    got = small.call("broadcast_to", x, (100, 1000), progress=lambda d, t: seen.append((d, t)))
    same(got, np.broadcast_to(x, (100, 1000)))
    check_progress(seen, 4000 + 400_000)
    seen.clear()
    result = small.call(
        "run",
        "expand",
        {"input": x},
        {"sizes": [100, 1]},
        progress=lambda d, t: seen.append((d, t)),
    )
    (out,) = result.outputs
    same(out, np.broadcast_to(x, (100, 1000)))
    check_progress(seen, 4000 + 400_000)
