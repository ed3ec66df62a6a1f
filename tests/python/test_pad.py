"""pad against the real tensord, through Client and AsyncClient: the method
against numpy.pad, shapes and bits, for float32, bfloat16, bool, int64, uint8
and float16 in every mode (constant, edge, reflect, symmetric), padding wider
than the input folding back; constant values exact (-0.0, nan, the
infinities, 64-bit extremes, NumPy's cast of a float to a narrow dtype);
strided and broadcast inputs on both backends; kept outputs and RemoteTensors
in; `run` without outputs and with text attributes; a chain that pads then
slices; an answer past the message limit; and the errors: NumPy's raised here,
the server's INVALID_ARGUMENT (reflect of one element, a value the dtype
cannot hold) and RESOURCE_EXHAUSTED."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, TensorOpError
from test_operators import Caller, check_progress, same, values

DTYPES = [np.float32, ml_dtypes.bfloat16, np.bool_, np.int64, np.uint8, np.float16]
MODES = ["constant", "edge", "reflect", "symmetric"]


def refused(error: pytest.ExceptionInfo[TensorOpError], code: str = "INVALID_ARGUMENT") -> str:
    """The server's message, of `code`."""
    assert error.value.code == code, error.value
    return error.value.message


# ---- numpy.pad ------------------------------------------------------------------

PADS = [
    ((5,), 2),
    ((3,), (5, 0)),  # wider than the input: folds back again and again
    ((3,), (0, 7)),
    ((2,), (4, 5)),
    ((2, 3), ((1, 2),)),
    ((2, 3), ((0, 0), (4, 1))),
    ((4, 2), [[3], [1]]),  # one count per dimension, both sides
    ((2, 3, 4), ((1, 0), (0, 3), (2, 2))),
    ((1, 1, 2, 3, 1, 1, 1, 2), [[0, 0]] * 2 + [[1, 1], [0, 2]] + [[0, 0]] * 3 + [[3, 0]]),
    ((2, 2), 0),  # no padding: a copy
]


@pytest.mark.parametrize("shape, pad_width", PADS, ids=repr)
def test_pad_is_numpys(caller: Caller, shape: tuple[int, ...], pad_width: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        for mode in MODES:
            got = caller.call("pad", x, pad_width, mode)
            same(got, np.pad(x, pad_width, mode))  # type: ignore[call-overload]
            assert not got.flags.writeable


def test_pad_values_are_the_operators_examples(caller: Caller) -> None:
    x = np.array([1, 2, 3], np.int32)
    assert caller.call("pad", x, (5, 0), "reflect").tolist() == [2, 1, 2, 3, 2, 1, 2, 3]
    assert caller.call("pad", x, (5, 0), "symmetric").tolist() == [2, 3, 3, 2, 1, 1, 2, 3]
    assert caller.call("pad", x, (2, 1), "edge").tolist() == [1, 1, 1, 2, 3, 3]
    assert caller.call("pad", x, 1, constant_values=9).tolist() == [9, 1, 2, 3, 9]
    # A dimension of size 1 reflects when it is not padded.
    row = np.array([[1, 2, 3]], np.uint16)
    assert caller.call("pad", row, ((0, 0), (2, 1)), "reflect").tolist() == [[3, 2, 1, 2, 3, 2]]


CONSTANTS = [
    (np.float32, -0.0),
    (np.float32, np.nan),
    (np.float32, np.inf),
    (np.float32, 0.1),
    (np.float32, 1e300),  # past float32: inf, as NumPy casts
    (np.float32, np.float16(0.1)),
    (np.float16, -np.inf),
    (np.float16, 0.1),
    (np.float16, 65520),  # rounds to inf
    (np.float16, 3 * 2**-25),  # a tie: to even
    (ml_dtypes.bfloat16, 1 + 2**-8 + 2**-30),  # ml_dtypes' cast, as numpy.pad's
    (ml_dtypes.bfloat16, np.nan),
    (ml_dtypes.bfloat16, -0.0),
    (np.float64, 0.1),
    (np.float64, -np.inf),
    (np.int64, -(2**63)),
    (np.int64, 2**63 - 1),
    (np.uint64, 2**64 - 1),
    (np.int8, -128),
    (np.uint8, 255),
    (np.uint8, 2.0),  # a float that is an integer
    (np.int32, np.float16(-7)),
    (np.bool_, True),
    (np.bool_, 1),
    (np.bool_, np.False_),
    (np.int16, True),
]


@pytest.mark.parametrize("dtype, value", CONSTANTS, ids=repr)
def test_constant_values_are_exact(caller: Caller, dtype: Any, value: Any) -> None:
    x = values((2, 3), dtype)
    got = caller.call("pad", x, ((1, 0), (2, 1)), constant_values=value)
    with np.errstate(over="ignore"):
        expected = np.pad(x, ((1, 0), (2, 1)), constant_values=value)
    same(got, expected)  # bits: -0.0, the NaN, the infinities


def test_pad_of_strided_views_and_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    for backend in ("cpu", "opencl"):
        for x in (base.T, base[:, ::2], base[::-1, 1::3], np.broadcast_to(base[:1], (4, 8))):
            for mode in MODES:
                width = ((1, 2), (3, 0)) if mode != "constant" else ((0, 9), (2, 2))
                got = caller.call("pad", x, width, mode, constant_values=-0.0, backend=backend)
                kwargs = {"constant_values": -0.0} if mode == "constant" else {}
                same(got, np.pad(x, width, mode, **kwargs))  # type: ignore[call-overload]


# ---- kept outputs, RemoteTensors in -----------------------------------------------


def test_kept_outputs_and_remote_tensors_in(caller: Caller) -> None:
    x = values((4, 6), ml_dtypes.bfloat16)
    view = x[:, ::2]
    remote = caller.call("put", view)  # strided on the server too
    made = [remote]
    try:
        for mode in MODES:
            same(caller.call("pad", remote, ((1, 2), (3, 3)), mode),
                 np.pad(view, ((1, 2), (3, 3)), mode))  # fmt: skip
        kept = caller.call("pad", remote, 2, "symmetric", keep=True)
        made.append(kept)
        assert (kept.shape, kept.dtype) == ((8, 7), view.dtype)
        same(caller.fetch(kept), np.pad(view, 2, "symmetric"))
        # A kept result as the next input, through pad and another operator.
        again = caller.call("pad", kept, ((0, 1), (1, 0)), constant_values=np.inf, keep=True)
        made.append(again)
        expected = np.pad(np.pad(view, 2, "symmetric"), ((0, 1), (1, 0)), constant_values=np.inf)
        same(caller.fetch(again), expected)
        same(caller.call("transpose", again), expected.T)
        # A transposed kept tensor (a view on the server) padded.
        turned = caller.call("transpose", remote, keep=True)
        made.append(turned)
        same(caller.call("pad", turned, (1, 4), "reflect"), np.pad(view.T, (1, 4), "reflect"))
    finally:
        for tensor in made:
            caller.release(tensor)


# ---- run, chains, large answers ---------------------------------------------------


def test_run_derives_the_output_sizes_and_takes_text_attributes(caller: Caller) -> None:
    x = values((2, 3), np.int64)
    attrs = {"start_padding": [1, 0], "end_padding": [0, 2], "mode": "constant",
             "value": "-9223372036854775808"}  # fmt: skip
    expected = np.pad(x, ((1, 0), (0, 2)), constant_values=-(2**63))
    for call in ("run", "run_stream", "run_chunked"):
        (out,) = caller.call(call, "pad", {"input": x}, attrs).outputs
        same(out, expected)
    # Without mode and value: constant, 0.
    (out,) = caller.call("run", "pad", {"input": x}, {"start_padding": [0, 1],
                                                       "end_padding": [1, 0]}).outputs  # fmt: skip
    same(out, np.pad(x, ((0, 1), (1, 0))))
    (out,) = caller.call("run", "pad", {"input": x}, {**attrs, "mode": "edge"}, [(3, 5)]).outputs
    same(out, np.pad(x, ((1, 0), (0, 2)), "edge"))  # sizes given: the server checks them
    (kept,) = caller.call("run", "pad", {"input": x}, attrs, keep=True).outputs
    assert kept.shape == (3, 5)
    same(caller.fetch(kept), expected)
    caller.release(kept)


def test_a_chain_pads_then_slices(caller: Caller) -> None:
    x = values((3, 4), np.float16)
    padded = Step("pad", {"input": x}, {"start_padding": [2, 1], "end_padding": [1, 3],
                                        "mode": "reflect"})  # fmt: skip  # (6, 8)
    window = Step(
        "slice",
        {"input": padded},
        {"offsets": [1, 0], "window_sizes": [5, 8], "window_strides": [2, -3]},
    )
    rows = Step("strided_slice", {"input": padded}, {"begin": [5], "end": [0], "stride": [-2]})
    framed = Step("pad", {"input": window}, {"start_padding": [1, 1], "end_padding": [0, 0],
                                             "value": "nan"})  # fmt: skip
    result = caller.call(
        "chain", [padded, window, rows, framed], [window, rows, framed, padded.output(0, keep=True)]
    )
    got_window, got_rows, got_framed, kept = result.outputs
    big = np.pad(x, ((2, 1), (1, 3)), "reflect")
    same(got_window, big[1:6:2, 7::-3])
    same(got_rows, big[5:0:-2])
    same(got_framed, np.pad(big[1:6:2, 7::-3], ((1, 0), (1, 0)), constant_values=np.nan))
    same(caller.fetch(kept), big)
    caller.release(kept)


def test_a_pad_larger_than_a_message_streams_back(small: Caller) -> None:
    x = values((10, 100), np.float32)  # 4000 bytes up; 400000 down, over the 64 KiB limit
    seen: list[tuple[int, int]] = []
    width = ((45, 45), (400, 500))
    got = small.call("pad", x, width, "symmetric", progress=lambda d, t: seen.append((d, t)))
    same(got, np.pad(x, width, "symmetric"))
    check_progress(seen, 4000 + 400_000)


# ---- errors -------------------------------------------------------------------------


def test_pad_errors(caller: Caller) -> None:
    x = values((2, 3), np.float32)
    # Refused here, before anything is sent: numpy.pad's other modes, NumPy's errors.
    with pytest.raises(ValueError, match="pad: mode 'wrap' is not supported"):
        caller.call("pad", x, 1, "wrap")
    with pytest.raises(ValueError, match="index can't contain negative values"):
        caller.call("pad", x, (1, -1))
    with pytest.raises(TypeError, match="`pad_width` must be of integral type."):
        caller.call("pad", x, 1.5)
    with pytest.raises(ValueError, match="one value for every side"):
        caller.call("pad", x, 1, constant_values=(1, 2))
    # Reflect of one element: the server's, naming reflect.
    with pytest.raises(TensorOpError) as error:
        caller.call("pad", values((1, 3), np.float32), ((1, 0), (0, 0)), "reflect")
    assert refused(error) == (
        "pad.mode is reflect and dimension 0 is padded (start_padding[0] = 1, end_padding[0] "
        "= 0) but input.sizes[0] = 1: one element has no mirror image (reflect needs two)"
    )
    # Values the dtype cannot hold: the server's, naming pad.value (NumPy casts them).
    with pytest.raises(TensorOpError) as error:
        caller.call("pad", values((2,), np.uint8), 1, constant_values=256)
    assert refused(error) == (
        'pad.value is "256", out of range; uint8 takes an integer from 0 to 255'
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("pad", values((2,), np.int32), 1, constant_values=2.5)
    assert refused(error) == (
        'pad.value is "2.5", not an integer; int32 takes an integer from -2147483648 to '
        "2147483647"
    )
    for dtype, value in [(np.int8, -129), (np.bool_, 2), (np.uint64, -1), (np.int64, np.nan),
                         (np.uint64, 1e20), (np.int16, 0.5)]:  # fmt: skip
        with pytest.raises(TensorOpError) as error:
            caller.call("pad", values((2,), dtype), 1, constant_values=value)
        assert "pad.value" in refused(error), (dtype, value)
    # run sends what it is given: a negative count, counts of another length,
    # ONNX's wrap, a value that is no number.
    for attrs, field in [
        ({"start_padding": [-1, 0], "end_padding": [0, 0]}, "pad.start_padding"),
        ({"start_padding": [1], "end_padding": [1]}, "pad.start_padding"),
        ({"start_padding": [1, 1], "end_padding": [1, 1], "mode": "wrap"}, "pad.mode"),
        ({"start_padding": [1, 1], "end_padding": [1, 1], "value": "one"}, "pad.value"),
    ]:
        with pytest.raises(TensorOpError) as error:
            caller.call("run", "pad", {"input": x}, attrs)
        assert field in refused(error), attrs
    # Rank 1..8: a 0-d x.
    with pytest.raises(TensorOpError) as error:
        caller.call("pad", values((), np.float32), 1)
    refused(error)
    # An output over 2^32 - 1 elements.
    with pytest.raises(TensorOpError) as error:
        caller.call("pad", values((1,), np.uint8), (2**32, 0))
    assert refused(error, "RESOURCE_EXHAUSTED") == (
        "outputs[0].sizes [4294967297] hold 4294967297 elements; the limit is 4294967295"
    )
