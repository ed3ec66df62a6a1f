"""Pad's method (Client.pad) without a server: numpy.pad's pad_width as the
operator's start_padding and end_padding (checked against numpy.pad itself),
its modes, and its constant_values as Pad's `value`, the exact text of one
element of x's dtype (floats cast as NumPy casts, integers not cast);
NumPy's errors before sending, empty results made here, RemoteTensors by
handle; text attributes in run, chains and conformance cases; and pad's
output sizes derived wherever the package derives them. Beside
test_joins_core.py, join's."""

from __future__ import annotations

import inspect
import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import (
    AsyncClient,
    Client,
    Step,
    keep_outputs,
    make_chain_request,
    make_request,
)
from tensorop_client._core import pads
from tensorop_client._core.requests import OPS, answer_bytes_bound, attribute_names, set_attrs
from tensorop_client._core.routing import Target
from tensorop_client._core.shapes import (
    DERIVED_SIZES,
    PAD_MODES,
    answer_bytes,
    chain_answer_bytes,
    derived_output_sizes,
    derived_sizes,
    pad_sizes,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.cases import parse_cases
from tensorop_client.conformance import one_step_chain
from test_core import FakeClient, FakeRemote, finish, response, start

FLOATS = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]


def _sent(call: Any) -> pb.RunRequest:
    assert call.method == "run"
    return pb.RunRequest.FromString(call.request)


def _done(plan: Any) -> Any:
    """What a plan returns without a call."""
    with pytest.raises(StopIteration) as done:
        next(plan)
    return done.value.value


def _numpys_pairs(shape: tuple[int, ...], pad_width: Any) -> list[tuple[int, int]]:
    """The (before, after) pairs numpy.pad itself reads from `pad_width`:
    where ones padded with zeros land."""
    padded = np.pad(np.ones(shape, np.uint8), pad_width)
    pairs = []
    for axis, n in enumerate(shape):
        ones = np.flatnonzero(padded.any(axis=tuple(d for d in range(len(shape)) if d != axis)))
        before = int(ones[0])
        pairs.append((before, padded.shape[axis] - n - before))
    return pairs


def _numpys_error(shape: tuple[int, ...], pad_width: Any) -> tuple[type[Exception], str]:
    with pytest.raises((TypeError, ValueError)) as error:
        np.pad(np.zeros(shape, np.float32), pad_width)
    return type(error.value), str(error.value)


# ---- pad_width ----------------------------------------------------------------------

WIDTHS = [
    ((5,), 2),
    ((5,), (1, 3)),
    ((5,), ((0, 4),)),
    ((2, 3), 1),  # every side of every dimension
    ((2, 3), (1, 2)),  # (before, after) for every dimension
    ((2, 3), ((1, 2),)),
    ((2, 3), [[1], [2]]),  # shape (2, 1): one count per dimension, both sides
    ((2, 3), ((1, 2), (3, 0))),  # one pair per dimension
    ((2, 3), np.array([[0, 1], [2, 3]], np.int8)),
    ((2, 3), [np.int64(1), 2]),
    ((2, 3, 4), ((1, 0), (0, 3), (2, 2))),
    ((2, 3, 4), [[1, 2]]),
    ((2, 3, 4), [[1], [0], [2]]),
    ((1,) * 8, 3),
    ((1,) * 8, [[0, 1]] * 7 + [[2, 0]]),
]


@pytest.mark.parametrize("shape, pad_width", WIDTHS, ids=repr)
def test_pad_width_is_read_as_numpy_pad_reads_it(shape: tuple[int, ...], pad_width: Any) -> None:
    assert pads.pad_pairs(pad_width, len(shape)) == _numpys_pairs(shape, pad_width)
    # Counts past what an array here could hold go as they are.
    assert pads.pad_pairs(2**32, len(shape)) == [(2**32, 2**32)] * len(shape)
    assert pads.pad_pairs(np.uint64(2**63), 1) == [(2**63, 2**63)]


@pytest.mark.parametrize(
    "pad_width",
    [
        1.0, (1.0, 2), "1", None, True, [],  # not integers: TypeError
        -1, (1, -1), [[0, 1], [-2, 0]], np.array([], np.int64),  # negative, or empty
        [1, 2, 3], [[1, 2, 3]], [[1, 2], [3, 4], [5, 6]], [[[1, 2]]], [[[1, 2]], [[3, 4]]],
    ],
    ids=repr,
)  # fmt: skip
def test_pad_widths_numpy_refuses_raise_its_errors_in_its_words(pad_width: Any) -> None:
    kind, message = _numpys_error((2, 3), pad_width)
    with pytest.raises(kind) as error:
        pads.pad_pairs(pad_width, 2)
    assert str(error.value) == message
    with pytest.raises(kind):  # through the method, before anything is sent
        next(pads.pad(FakeClient(), np.zeros((2, 3), np.float32), pad_width))


def test_pad_widths_of_a_0d_array_are_none() -> None:
    assert pads.pad_pairs(3, 0) == [] and pads.pad_pairs((1, 2), 0) == []
    assert pads.pad_pairs(np.uint8(2), 1) == [(2, 2)]  # unsigned: the integers they are


# ---- modes --------------------------------------------------------------------------


def test_the_four_modes_pad_has_are_taken_and_numpys_others_refused() -> None:
    assert PAD_MODES == ("constant", "edge", "reflect", "symmetric")
    for mode in PAD_MODES:
        assert pads.pad_mode(mode) == mode
    for mode in ("wrap", "linear_ramp", "maximum", "mean", "median", "minimum", "empty",
                 "Constant", "REFLECT", "", "foo"):  # fmt: skip
        with pytest.raises(ValueError) as error:
            pads.pad_mode(mode)
        assert str(error.value) == (
            f"pad: mode {mode!r} is not supported; the server's Pad has 'constant', 'edge', "
            "'reflect', 'symmetric' (numpy.pad's other modes are not taken)"
        )
    with pytest.raises(ValueError, match="pad: mode <function"):
        pads.pad_mode(lambda *a: None)  # type: ignore[arg-type]  # numpy.pad's callables
    with pytest.raises(ValueError, match="mode 'wrap' is not supported"):
        next(pads.pad(FakeClient(), np.zeros(3, np.float32), 1, "wrap"))
    with pytest.raises(TypeError, match="reflect_type"):  # numpy.pad's, not taken
        pads.pad(FakeClient(), np.zeros(3), 1, "reflect", reflect_type="odd")  # type: ignore[call-arg]


# ---- constant values ----------------------------------------------------------------

TEXTS = [
    # Integers: their decimal text, not cast (the server judges the range).
    (0, np.int64, "0"),
    (-(2**63), np.int64, "-9223372036854775808"),
    (2**64 - 1, np.uint64, "18446744073709551615"),
    (np.uint64(2**64 - 1), np.uint64, "18446744073709551615"),
    (-128, np.int8, "-128"),
    (256, np.uint8, "256"),  # out of range: the server's INVALID_ARGUMENT (NumPy wraps)
    (-1, np.uint32, "-1"),
    (2.0, np.int32, "2"),  # a float that is an integer: exactly it
    (-0.0, np.int16, "0"),
    (1e19, np.uint64, "10000000000000000000"),
    (np.float16(3), np.uint8, "3"),
    (ml_dtypes.bfloat16(-4), np.int8, "-4"),
    (2.5, np.int32, "2.5"),  # a fraction: the server refuses (NumPy truncates)
    (float("nan"), np.int32, "nan"),
    (float("-inf"), np.int64, "-inf"),
    (True, np.int32, "1"),
    (np.False_, np.uint8, "0"),
    # Bool: true and false; numbers as for an integer dtype.
    (True, np.bool_, "true"),
    (np.False_, np.bool_, "false"),
    (1, np.bool_, "1"),
    (0.0, np.bool_, "0"),
    (2, np.bool_, "2"),  # the server refuses (NumPy: True)
    # Floats: cast as NumPy casts, then the element's exact text.
    (0, np.float32, "0.0"),
    (-0.0, np.float32, "-0.0"),
    (-0.0, ml_dtypes.bfloat16, "-0.0"),
    (0.1, np.float64, "0.1"),
    (0.1, np.float32, "0.10000000149011612"),
    (0.1, np.float16, "0.0999755859375"),
    (0.1, ml_dtypes.bfloat16, "0.10009765625"),
    (float("nan"), np.float16, "nan"),
    (-float("nan"), np.float32, "nan"),  # the server's NaN: sign 0, no payload
    (float("inf"), np.float64, "inf"),
    (-np.inf, ml_dtypes.bfloat16, "-inf"),
    (65520, np.float16, "inf"),  # past the largest float16, rounded away
    (1e300, np.float32, "inf"),
    (2**-25, np.float16, "0.0"),  # a tie: to even
    (3 * 2**-25, np.float16, "1.1920928955078125e-07"),
    (1 + 2**-8 + 2**-30, ml_dtypes.bfloat16, "1.0"),  # ml_dtypes' cast, as numpy.pad's
    (np.float16(0.1), np.float32, "0.0999755859375"),
    (ml_dtypes.bfloat16(1.5), np.float16, "1.5"),
    (2**64 - 1, np.float64, "1.8446744073709552e+19"),
    (True, np.float16, "1.0"),
    (-(2**63), np.float32, "-9.223372036854776e+18"),
]


@pytest.mark.parametrize("value, dtype, text", TEXTS, ids=repr)
def test_constant_values_become_the_exact_text_of_one_element(
    value: Any, dtype: Any, text: str
) -> None:
    assert pads.value_text(value, dtype) == text
    assert pads.constant_text(value, dtype, 2) == text
    if np.dtype(dtype) in [np.dtype(f) for f in FLOATS]:
        # The text's value is numpy.pad's element exactly: the server, rounding
        # it to the dtype, finds that element.
        with np.errstate(over="ignore"):  # NumPy's cast to an infinity warns
            padded = np.pad(np.zeros(1, dtype), 1, constant_values=value)
        expected = float(padded[0])
        if math.isnan(expected):
            assert text == "nan"
        else:
            assert float(text) == expected and math.copysign(1, float(text)) == math.copysign(
                1, expected
            )


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_float_texts_read_back_as_numpys_cast(dtype: Any) -> None:
    rng = np.random.default_rng(5)
    doubles = np.concatenate(
        [
            rng.standard_normal(300) * 10.0 ** rng.integers(-40, 40, 300),
            # Ties of the narrow formats: odd multiples of half their units.
            (2 * rng.integers(1, 1 << 10, 100) + 1) * 2.0 ** rng.integers(-40, 10, 100),
        ]
    )
    for value in doubles:
        with np.errstate(over="ignore"):
            cast = np.asarray(value).astype(dtype)
        text = pads.value_text(float(value), dtype)
        if math.isinf(float(cast)):
            assert text == ("inf" if float(cast) > 0 else "-inf")
            continue
        # Exactly an element of the dtype, the cast's: no second rounding.
        assert float(text) == float(cast), (value, text)
        assert float(np.asarray(float(text)).astype(dtype)) == float(text)


def test_pairs_of_constant_values_must_give_one_value() -> None:
    assert pads.constant_text((3, 3), np.float32, 2) == "3.0"
    assert pads.constant_text([[7, 7], [7, 7]], np.int8, 2) == "7"
    assert pads.constant_text(((1, 1),), np.uint8, 3) == "1"
    assert pads.constant_text(np.array(5, np.int16), np.int64, 1) == "5"
    assert pads.constant_text((0.1, np.float32(0.1)), np.float32, 1) == "0.10000000149011612"
    assert pads.constant_text([np.nan, -np.nan], np.float16, 1) == "nan"
    assert pads.constant_text(np.zeros((0, 2)), np.float32, 0) == "0.0"  # nothing: 0
    with pytest.raises(ValueError) as error:
        pads.constant_text((3, 4), np.float32, 2)
    assert str(error.value) == (
        "pad: constant_values must be one value for every side (the server's Pad takes one); "
        "got (3, 4), which is ['3.0', '4.0'] in float32"
    )
    with pytest.raises(ValueError, match=r"got \[\[0, 0\], \[0, 1\]\], which is \['0', '1'\]"):
        pads.constant_text([[0, 0], [0, 1]], np.int64, 2)
    with pytest.raises(ValueError, match="one value for every side"):  # different as uint8 text
        pads.constant_text((1, 1.5), np.uint8, 1)
    # Shapes NumPy refuses: its ValueError.
    with pytest.raises(ValueError, match="could not be broadcast"):
        pads.constant_text([1, 1, 1], np.int64, 2)
    # Not numbers.
    for value in ("1", b"1", None, 1 + 2j, np.complex64(1), [1, "a"], np.datetime64(1, "s")):
        with pytest.raises(TypeError, match="pad: constant_values must be"):
            pads.constant_text(value, np.float32, 1)


# ---- requests -----------------------------------------------------------------------


def test_pad_sends_start_and_end_padding_mode_and_value() -> None:
    client = FakeClient()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for pad_width, mode, value, before, after, text in [
        (1, "constant", 0, [1, 1], [1, 1], "0.0"),
        ((1, 2), "edge", 5, [1, 1], [2, 2], None),  # other modes: no value sent
        (((0, 1), (4, 0)), "reflect", 0, [0, 4], [1, 0], None),
        ([[2], [0]], "symmetric", 0, [2, 0], [2, 0], None),
        ((0, 3), "constant", -np.inf, [0, 0], [3, 3], "-inf"),
        (0, "constant", np.float16(0.1), [0, 0], [0, 0], "0.0999755859375"),
    ]:
        sent = _sent(start(pads.pad(client, x, pad_width, mode, value)))
        assert sent.WhichOneof("op") == "pad" and not sent.outputs
        attrs = sent.pad
        assert (list(attrs.start_padding), list(attrs.end_padding)) == (before, after)
        assert attrs.mode == mode and attrs.value == (text or "")
        assert list(sent.inputs["input"].sizes) == [2, 3]
        kwargs = {"constant_values": value} if mode == "constant" else {}
        expected = np.pad(x, pad_width, mode, **kwargs)  # type: ignore[call-overload]
        assert answer_bytes(sent) == answer_bytes_bound(sent) == expected.nbytes
    # The answer comes back read-only.
    plan = pads.pad(client, x, 1)
    start(plan)
    got = finish(plan, response(np.pad(x, 1)))
    assert got.tolist() == np.pad(x, 1).tolist() and not got.flags.writeable


def test_inputs_go_as_they_lie_in_every_dtype() -> None:
    client = FakeClient()
    base = np.arange(24, dtype=np.int64).reshape(4, 6)
    sent = _sent(start(pads.pad(client, base[:, ::2], 1)))
    tensor = sent.inputs["input"]
    assert (list(tensor.sizes), list(tensor.strides)) == ([4, 3], [6, 2])
    assert sent.pad.value == "0"
    sent = _sent(start(pads.pad(client, np.broadcast_to(base[:1], (3, 6)), (1, 0), "edge")))
    assert list(sent.inputs["input"].strides) == [0, 1] and len(sent.inputs["input"].data) == 48
    for dtype, value, text in [
        (np.bool_, True, "true"),
        (ml_dtypes.bfloat16, 0.1, "0.10009765625"),
        (">i4", -7, "-7"),  # big-endian: swapped here, the same dtype on the wire
        (np.uint64, 2**64 - 1, "18446744073709551615"),
    ]:
        sent = _sent(start(pads.pad(client, np.zeros((2, 2), dtype), 1, constant_values=value)))
        assert sent.pad.value == text and list(sent.pad.start_padding) == [1, 1]
        assert answer_bytes(sent) == 16 * np.dtype(dtype).itemsize
    with pytest.raises(TypeError, match="tensorop has no dtype for numpy <U1"):
        next(pads.pad(client, np.array(["a"]), 1))


def test_a_remote_tensor_is_named_by_its_handle_in_one_run() -> None:
    client = FakeClient()
    handle = pb.TensorHandle(id="ab" * 16, replica="r1", dtype=pb.UINT8, sizes=[2, 3],
                             strides=[3, 1])  # fmt: skip
    remote = FakeRemote(client, handle)
    call = start(pads.pad(client, remote, ((1, 0), (0, 2)), constant_values=255, keep=True))
    assert call.to == Target("r1", "ab" * 16)
    sent = _sent(call)
    assert sent.inputs["input"].handle.id == "ab" * 16 and not sent.inputs["input"].data
    assert sent.pad.value == "255" and [o.keep for o in sent.outputs] == [True]
    assert answer_bytes(sent) == answer_bytes_bound(sent) == 0  # kept: nothing comes back
    sent = _sent(start(pads.pad(client, remote, 2, "symmetric")))
    assert answer_bytes(sent) == 6 * 7
    # The dtype of a RemoteTensor is its handle's: 256 goes as it is, for the server.
    assert _sent(start(pads.pad(client, remote, 1, constant_values=256))).pad.value == "256"


def test_empty_results_are_made_here_and_empty_axes_follow_numpy() -> None:
    client = FakeClient()
    seen: list[tuple[int, int]] = []
    for x, pad_width, mode in [
        (np.zeros((0, 3), np.float16), ((0, 0), (1, 1)), "constant"),
        (np.zeros((0, 3), ">f2"), ((0, 0), (2, 0)), "edge"),  # the empty axis not padded
        (np.zeros((2, 0), np.float16), 0, "reflect"),
    ]:
        got = _done(pads.pad(client, x, pad_width, mode, progress=lambda *p: seen.append(p)))
        expected = np.pad(x, pad_width, mode)
        assert got.shape == expected.shape and got.dtype == np.dtype("<f2")
        assert not got.flags.writeable
    assert seen == [(0, 0)] * 3
    # An empty axis padded in another mode than constant: NumPy's ValueError.
    for mode in ("edge", "reflect", "symmetric"):
        with pytest.raises(ValueError) as error:
            next(pads.pad(client, np.zeros((2, 0)), ((0, 0), (0, 1)), mode))
        assert str(error.value) == (
            "can't extend empty axis 1 using modes other than 'constant' or 'empty'"
        )
    # In constant mode it is sent (the server refuses the zero size), as is an
    # empty result kept.
    sent = _sent(start(pads.pad(client, np.zeros((2, 0)), 1)))
    assert list(sent.inputs["input"].sizes) == [2, 0]
    sent = _sent(start(pads.pad(client, np.zeros((0, 2)), ((0, 0), (1, 1)), keep=True)))
    assert [o.keep for o in sent.outputs] == [True]
    # A 0-d x goes as it is too: Pad takes rank 1..8, the server says so.
    sent = _sent(start(pads.pad(client, np.float32(1), 2)))
    assert list(sent.pad.start_padding) == [] and list(sent.inputs["input"].sizes) == []


# ---- output sizes -------------------------------------------------------------------


def test_pad_sizes_follow_from_the_input_and_the_counts() -> None:
    assert "pad" in OPS and "pad" in DERIVED_SIZES
    assert pad_sizes([2, 3], [1, 0], [2, 4]) == [5, 7]
    assert pad_sizes([3], [5], [0], "reflect") == [8]
    assert pad_sizes([1, 3], [0, 2], [0, 1], "reflect") == [1, 6]  # size 1 not padded
    assert pad_sizes([1], [4], [2], "edge") == [7]
    assert pad_sizes([1], [4], [2], "symmetric") == [7]
    assert pad_sizes([1], [4], [2], "") == [7]  # "": constant
    assert pad_sizes([4294967295], [0], [0]) == [4294967295]
    # What the server refuses.
    for sizes, before, after, mode in [
        ([2, 3], [1], [1, 1], "constant"), ([2, 3], [1, 1], [1], "constant"),
        ([2], [-1], [0], "constant"), ([2], [0], [-1], "edge"), ([], [], [], "constant"),
        ([0], [1], [1], "constant"), ([1] * 9, [0] * 9, [0] * 9, "constant"),
        ([2], [1], [1], "wrap"), ([2], [1], [1], "Constant"), ([1, 3], [1, 0], [0, 0], "reflect"),
        ([1], [2**32], [0], "constant"), ([65536], [0], [65536 * 65535], "constant"),
    ]:  # fmt: skip
        assert pad_sizes(sizes, before, after, mode) is None, (sizes, before, after, mode)
    attrs = pb.PadAttrs(start_padding=[1, 0], end_padding=[0, 2], mode="symmetric")
    assert derived_sizes("pad", attrs, [2, 3]) == [3, 5]
    assert derived_output_sizes("pad", attrs, {"input": [2, 3]}) == [3, 5]
    assert derived_output_sizes("pad", attrs, {"inputs_0": [2, 3]}) is None
    assert derived_sizes("pad", pb.TileAttrs(repeats=[2, 2]), [2, 3]) is None


def test_run_requests_and_chains_derive_pads_output() -> None:
    x = np.zeros((2, 3), np.float16)
    attrs = {"start_padding": [1, 0], "end_padding": [1, 2], "mode": "edge"}
    request = make_request("pad", {"input": x}, attrs)
    assert request.pad.mode == "edge" and request.pad.value == "" and not request.outputs
    assert answer_bytes(request) == answer_bytes_bound(request) == 4 * 5 * 2
    kept = make_request("pad", {"input": x}, attrs, keep=True)
    assert [(list(o.sizes), o.keep) for o in kept.outputs] == [([], True)]
    again = make_request("pad", {"input": x}, attrs)
    keep_outputs(again)  # pad derives its one output: an empty OutputDesc describes it
    assert [(list(o.sizes), o.keep) for o in again.outputs] == [([], True)]
    # Refused: nothing derived, the bound the input's bytes.
    refused = make_request("pad", {"input": x}, {**attrs, "mode": "wrap"})
    assert answer_bytes(refused) is None and answer_bytes_bound(refused) == 12
    huge = make_request("pad", {"input": x}, {"start_padding": [2**32, 0], "end_padding": [0, 0]})
    assert answer_bytes(huge) is None and answer_bytes_bound(huge) == 12
    # In a chain: one output, derived from the steps before it, text attributes set.
    first = Step("transpose", {"input": x})  # (3, 2)
    padded = Step("pad", {"input": first}, {"start_padding": [0, 1], "end_padding": [2, 1],
                                            "mode": "constant", "value": "-inf"})  # fmt: skip
    last = Step("strided_slice", {"input": padded}, {"begin": [1], "end": [4]})
    assert padded.output_count() == 1
    chain = make_chain_request([first, padded, last], [padded, last])
    step = chain.steps[1]
    assert step.WhichOneof("op") == "pad"
    assert (step.pad.mode, step.pad.value) == ("constant", "-inf")
    assert chain_answer_bytes(chain) == (5 * 4 + 3 * 4) * 2


def test_text_attributes_take_strings_only() -> None:
    assert attribute_names("pad") == ["start_padding", "end_padding", "mode", "value"]
    request = pb.RunRequest()
    set_attrs(request, "pad", {"mode": "reflect", "value": "0.1", "start_padding": [1]})
    assert (request.pad.mode, request.pad.value, list(request.pad.start_padding)) == (
        "reflect", "0.1", [1],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^attrs\.value: expected a string, got 0$"):
        set_attrs(request, "pad", {"value": 0})
    with pytest.raises(ValueError, match=r"^attrs\.mode: expected a string, got \['edge'\]$"):
        set_attrs(request, "pad", {"mode": ["edge"]})
    with pytest.raises(ValueError, match=r"^attrs\.start_padding: expected a list of integers$"):
        set_attrs(request, "pad", {"start_padding": "1"})
    with pytest.raises(
        ValueError,
        match=r"^attrs\.pads: not an attribute of pad; its attributes are start_padding, "
        r"end_padding, mode, value$",
    ):
        set_attrs(request, "pad", {"pads": [1]})
    with pytest.raises(ValueError, match=r"steps\[0\]: attrs\.value: expected a string"):
        make_chain_request([Step("pad", {"input": np.zeros(2)}, {"value": 1.5})])
    # Other operators' attributes are integers, as before.
    with pytest.raises(ValueError, match=r"attrs\.axis: expected an integer"):
        set_attrs(request, "split", {"axis": "0"})


# ---- conformance cases ----------------------------------------------------------------

CASES = """[
 {"name": "pad/a", "op": "pad",
  "inputs": {"input": {"dtype": "float16", "sizes": [2], "data": [1, 2]}},
  "attrs": {"start_padding": [1], "end_padding": [0], "value": 0.1},
  "expect": {"outputs": [{"dtype": "float16", "sizes": [3], "data": [0.0999755859375, 1, 2]}]}},
 {"name": "pad/b", "op": "pad",
  "inputs": {"input": {"dtype": "uint64", "sizes": [1], "data": [0]}},
  "attrs": {"mode": "constant", "value": "18446744073709551615", "start_padding": [1],
            "end_padding": [0]},
  "expect": {"outputs": [{"dtype": "uint64", "sizes": [2], "data": ["18446744073709551615", 0]}]}},
 {"name": "pad/c", "op": "pad",
  "inputs": {"input": {"dtype": "bool", "sizes": [1], "data": [false]}},
  "attrs": {"value": true, "start_padding": [0], "end_padding": [1]},
  "expect": {"outputs": [{"dtype": "bool", "sizes": [2], "data": [false, true]}]}},
 {"name": "pad/d", "op": "pad",
  "inputs": {"input": {"dtype": "uint8", "sizes": [1], "data": [0]}},
  "attrs": {"mode": "edge", "value": 1000, "start_padding": [2], "end_padding": [0]},
  "expect": {"outputs": [{"dtype": "uint8", "sizes": [3], "data": [0, 0, 0]}]}},
 {"name": "pad/e", "op": "pad",
  "inputs": {"input": {"dtype": "int32", "sizes": [1], "data": [0]}},
  "attrs": {"value": 2.50, "start_padding": [1], "end_padding": [0]},
  "expect": {"error": "INVALID_ARGUMENT"}},
 {"name": "pad/f", "op": "pad",
  "inputs": {"input": {"dtype": "int32", "sizes": [1], "data": [0]}},
  "attrs": {"value": [1], "start_padding": [1], "end_padding": [0]},
  "expect": {"error": "INVALID_ARGUMENT"}},
 {"name": "pad/g", "op": "pad",
  "inputs": {"input": {"dtype": "int32", "sizes": [1], "data": [0]}},
  "attrs": {"mode": 1, "start_padding": [1], "end_padding": [0]},
  "expect": {"error": "INVALID_ARGUMENT"}}
]"""


def test_conformance_cases_of_pad_take_text_attributes_as_case_format_cc() -> None:
    loaded = parse_cases(CASES)
    a, b, c, d, e, f, g = loaded
    texts = [(x.case.request.pad.mode, x.case.request.pad.value)
             for x in (a, b, c, d, e, g) if x.case is not None]  # fmt: skip
    # Numbers as their JSON text (a float's as written), strings as they are,
    # bools as true and false.
    assert texts == [
        ("", "0.1"),
        ("constant", "18446744073709551615"),
        ("", "true"),
        ("edge", "1000"),
        ("", "2.50"),
        ("1", ""),
    ]
    assert f.case is None and f.error == "attrs.value: expected a string, number or bool, got [1]"
    assert b.case is not None and answer_bytes(b.case.request) == 16
    chain = one_step_chain(b.case.request)
    assert chain.steps[0].WhichOneof("op") == "pad"
    assert chain.steps[0].pad.value == "18446744073709551615"
    assert [(r.step, r.output) for r in chain.results] == [(0, 0)]  # one output


# ---- the transports' methods ----------------------------------------------------------


def test_client_and_async_client_methods_take_the_plans_arguments() -> None:
    plan = inspect.signature(pads.pad)
    expected = list(plan.parameters)[1:]
    assert expected == [
        "x", "pad_width", "mode", "constant_values", "keep", "backend", "device_index", "progress",
    ]  # fmt: skip
    assert plan.parameters["mode"].default == "constant"
    assert plan.parameters["constant_values"].default == 0
    for cls in (Client, AsyncClient):
        method = inspect.signature(cls.pad)
        assert list(method.parameters) == ["self", *expected]
    assert inspect.iscoroutinefunction(AsyncClient.pad)
    assert not inspect.iscoroutinefunction(Client.pad)
    assert Client.pad.__doc__ == pads.pad.__doc__
    assert AsyncClient.pad.__doc__ == "Client.pad."
    assert inspect.signature(Client.pad).return_annotation == "np.ndarray | RemoteTensor"
    assert inspect.signature(AsyncClient.pad).return_annotation == "np.ndarray | AsyncRemoteTensor"
