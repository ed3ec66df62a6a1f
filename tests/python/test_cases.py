"""Conformance case reading (exact values) and comparing (bit for bit), without a server."""

from __future__ import annotations

import json
import struct
import warnings
from math import inf
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Result, TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.case_compare import find_mismatch
from tensorop_client.cases import (
    CaseError,
    FloatText,
    case_from_json,
    load_cases,
    parse_cases,
    parse_json,
    tensor_from_json,
)


def encoded(dtype: str, values: list[object]) -> bytes:
    """The little-endian bytes tensor values encode to (FloatText: a JSON number's
    text; a Python float: its exact value)."""
    return tensor_from_json({"dtype": dtype, "sizes": [len(values)], "data": values}).data


def u16(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 2}H", data))


def test_float16_values_and_specials_are_exact() -> None:
    # max, min normal, min subnormal, -0.0, 1/3 rounded, and the strings.
    values = [
        65504.0,
        6.103515625e-05,
        5.960464477539063e-08,
        -0.0,
        0.333251953125,
        "nan",
        "inf",
        "-inf",
    ]
    assert u16(encoded("float16", values)) == [
        0x7BFF,
        0x0400,
        0x0001,
        0x8000,
        0x3555,
        0x7E00,
        0x7C00,
        0xFC00,
    ]
    # Integers round once too: 65519 is the largest below the overflow tie.
    assert u16(encoded("float16", [65519, 65520, -3])) == [0x7BFF, 0x7C00, 0xC200]


def test_narrow_floats_round_from_the_decimal_text_not_via_double() -> None:
    # 1 + 2^-24 is the float32 tie between 1 and 1 + 2^-23. Text a hair above it
    # reads as that very double, which would round to even (1.0): the text must win.
    assert encoded("float32", [FloatText("1.000000059604644775390625")]) == struct.pack(
        "<I", 0x3F800000
    )
    assert encoded("float32", [FloatText("1.00000005960464477539062500000000001")]) == struct.pack(
        "<I", 0x3F800001
    )
    # The same for float16 around 1 + 2^-11.
    assert u16(encoded("float16", [FloatText("1.00048828125")])) == [0x3C00]
    assert u16(encoded("float16", [FloatText("1.000488281250000000000001")])) == [0x3C01]
    assert u16(encoded("float16", [FloatText("-1e-400"), FloatText("1e400")])) == [0x8000, 0x7C00]


def test_bfloat16_values_and_specials_are_exact() -> None:
    # max, min normal, min subnormal, -0.0, 1/3 rounded (from the text), the strings.
    values = [
        3.3895313892515355e38,
        1.1754943508222875e-38,
        9.183549615799121e-41,
        -0.0,
        FloatText("0.333333333"),
        "nan",
        "inf",
        "-inf",
    ]
    assert u16(encoded("bfloat16", values)) == [
        0x7F7F,
        0x0080,
        0x0001,
        0x8000,
        0x3EAB,
        0x7FC0,
        0x7F80,
        0xFF80,
    ]
    # Integers round once too, to nearest even: 257 and 259 are ties (8 significant
    # bits); 2^128 - 2^119 is the overflow tie (to inf), one below it the largest value.
    assert u16(
        encoded("bfloat16", [256, 257, 259, -3, 2**128 - 2**119 - 1, 2**128 - 2**119, -(2**200)])
    ) == [0x4380, 0x4380, 0x4382, 0xC040, 0x7F7F, 0x7F80, 0xFF80]


def test_bfloat16_rounds_from_the_decimal_text_not_via_double_or_float32() -> None:
    # 1 + 2^-8 is the tie between 1 and 1 + 2^-7: exactly it rounds to even (1.0).
    assert u16(encoded("bfloat16", [FloatText("1.00390625"), FloatText("-1.01171875")])) == [
        0x3F80,
        0xBF82,
    ]
    # Text a hair above the tie reads as the tie's very double: the text must win.
    assert u16(encoded("bfloat16", [FloatText("1.003906250000000000000001")])) == [0x3F81]
    # A value just above the tie that binary32 would round onto the tie first (and
    # then to even, 1.0): rounded once, from its exact value, it is 1 + 2^-7.
    assert u16(encoded("bfloat16", [1 + 2**-8 + 2**-30])) == [0x3F81]
    # Half the smallest subnormal ties to zero (keeping the sign); a hair more is it.
    assert u16(encoded("bfloat16", [2.0**-134, -(2.0**-134), 2.0**-134 + 2.0**-160])) == [
        0x0000,
        0x8000,
        0x0001,
    ]
    # Beyond binary64's range: zero and inf, signed.
    assert u16(encoded("bfloat16", [FloatText("-1e-400"), FloatText("1e400")])) == [0x8000, 0x7F80]
    assert u16(encoded("bfloat16", [FloatText("-1e400"), FloatText("3.4e38")])) == [0xFF80, 0x7F80]


def test_bools_are_json_true_and_false() -> None:
    assert encoded("bool", [True, False, False, True]) == bytes([1, 0, 0, 1])
    case = case_from_json(
        {
            "name": "bool/split",
            "op": "split",
            "inputs": {
                "input": {"dtype": "bool", "sizes": [2, 2], "data": [True, False, False, True]}
            },
            "attrs": {"axis": 0},
            "outputs": [{"sizes": [1, 2]}, {"sizes": [1, 2]}],
            "expect": {
                "outputs": [
                    {"dtype": "bool", "sizes": [1, 2], "data": [True, False]},
                    {"dtype": "bool", "sizes": [1, 2], "data": [False, True]},
                ]
            },
        }
    )
    tensor = case.request.inputs["input"]
    assert (tensor.dtype, tensor.data) == (pb.BOOL, bytes([1, 0, 0, 1]))
    assert [t.data for t in case.expected_outputs] == [bytes([1, 0]), bytes([0, 1])]
    assert [t.dtype for t in case.expected_outputs] == [pb.BOOL, pb.BOOL]


def test_64_bit_integers_from_strings_are_exact() -> None:
    data = encoded("int64", ["-9223372036854775808", "9223372036854775807", 9007199254740993])
    assert list(struct.unpack("<3q", data)) == [-(2**63), 2**63 - 1, 2**53 + 1]
    data = encoded("uint64", ["18446744073709551615", 1.0])
    assert list(struct.unpack("<2Q", data)) == [2**64 - 1, 1]


@pytest.mark.parametrize(
    ("dtype", "value", "message"),
    [
        (
            "uint64",
            "18446744073709551616",
            'data[0]: "18446744073709551616" is out of range for uint64',
        ),
        ("int16", 70000, "data[0]: 70000 is out of range for int16"),
        (
            "int64",
            FloatText("9007199254740992.0"),
            "data[0]: 9007199254740992.0 is too large for a JSON float to be exact; "
            "write it as a string",
        ),
        ("int32", FloatText("1.5"), "data[0]: 1.5 is not an integer"),
        ("int32", "12a", 'data[0]: "12a" is not a decimal integer'),
        ("float32", "NaN", 'data[0]: "NaN" is not a number (the strings are "nan", "inf", "-inf")'),
        ("uint8", True, "data[0]: expected an integer, got true"),
        ("bool", 1, "data[0]: expected true or false (bool), got 1"),
        ("bool", 0, "data[0]: expected true or false (bool), got 0"),
        ("bool", FloatText("1.0"), "data[0]: expected true or false (bool), got 1.0"),
        ("bool", "true", 'data[0]: expected true or false (bool), got "true"'),
        ("bool", None, "data[0]: expected true or false (bool), got null"),
        ("bfloat16", True, 'data[0]: expected a number, "nan", "inf" or "-inf", got true'),
        (
            "bfloat16",
            "NaN",
            'data[0]: "NaN" is not a number (the strings are "nan", "inf", "-inf")',
        ),
        ("bfloat16", [1], 'data[0]: expected a number, "nan", "inf" or "-inf", got [1]'),
    ],
)
def test_bad_values_name_the_field(dtype: str, value: object, message: str) -> None:
    with pytest.raises(CaseError) as error:
        tensor_from_json({"dtype": dtype, "sizes": [1], "data": [value]})
    assert str(error.value) == message


SLICE_CASE = {
    "name": "slice/t",
    "op": "slice",
    "inputs": {
        "input": {
            "dtype": "uint8",
            "sizes": [2, 3],
            "strides": [5, 1],
            "data": [1, 2, 3, 0, 0, 4, 5, 6],
        }
    },
    "attrs": {"offsets": [0, "1"], "window_sizes": [2, 2], "window_strides": [1, 1]},
    "outputs": [{"sizes": [2, 2], "strides": [1, 2]}],
    "expect": {"outputs": [{"dtype": "uint8", "sizes": [2, 2], "data": [2, 3, 5, 6]}]},
}


def test_a_case_becomes_a_request() -> None:
    case = case_from_json(SLICE_CASE)
    request = case.request
    assert request.id == "slice/t" and request.WhichOneof("op") == "slice"
    assert list(request.slice.offsets) == [0, 1]
    tensor = request.inputs["input"]
    assert (tensor.dtype, list(tensor.sizes), list(tensor.strides)) == (pb.UINT8, [2, 3], [5, 1])
    assert tensor.data == bytes([1, 2, 3, 0, 0, 4, 5, 6])
    assert (list(request.outputs[0].sizes), list(request.outputs[0].strides)) == ([2, 2], [1, 2])
    assert case.expected_error is None and case.expected_outputs[0].data == bytes([2, 3, 5, 6])


def test_malformed_cases_are_reported_one_by_one() -> None:
    bad_attr = dict(SLICE_CASE, name="a", attrs={"bogus": [1]})
    bad_error = dict(SLICE_CASE, name="b", expect={"error": "WRONG"})
    bad_expect = dict(
        SLICE_CASE, name="c", expect={"outputs": [{"dtype": "uint8", "sizes": [2, 2], "data": [1]}]}
    )
    loaded = parse_cases(json.dumps([bad_attr, bad_error, bad_expect, {"op": "slice"}, SLICE_CASE]))
    assert [(c.name, c.error) for c in loaded] == [
        ("a", "attrs.bogus: not an attribute of slice; its attributes are offsets, window_sizes, "
              "window_strides"),
        ("b", 'expect: error: "WRONG" is not a gRPC error code name'),
        ("c", "expect: outputs[0]: sizes [2, 2] hold 4 elements but data has 1 values"),
        ("#3", 'missing field "name"'),
        ("slice/t", None),
    ]


def test_load_cases_reads_a_directory_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps(SLICE_CASE))
    (tmp_path / "a.json").write_text(
        json.dumps([dict(SLICE_CASE, name="x"), dict(SLICE_CASE, name="y")])
    )
    (tmp_path / "notes.txt").write_text("not a case")
    assert [c.name for c in load_cases(tmp_path)] == ["x", "y", "slice/t"]
    (tmp_path / "c.json").write_text("[1,")
    with pytest.raises(CaseError, match=r"c\.json: "):
        load_cases(tmp_path)


def half_case(bits: list[int]) -> dict[str, object]:
    """A float16 identity-slice case expecting the given bit patterns (as JSON values)."""
    values = [
        float(v) if not np.isnan(v) else "nan" for v in np.array(bits, dtype="<u2").view("<f2")
    ]
    return {
        "name": "half",
        "op": "slice",
        "inputs": {"input": {"dtype": "float16", "sizes": [len(bits)], "data": values}},
        "attrs": {"offsets": [0], "window_sizes": [len(bits)], "window_strides": [1]},
        "outputs": [{"sizes": [len(bits)]}],
        "expect": {"outputs": [{"dtype": "float16", "sizes": [len(bits)], "data": values}]},
    }


def result_of(bits: list[int], strides: int = 1) -> Result:
    data = np.zeros(len(bits) * strides, dtype="<u2")
    data[::strides] = bits
    view = np.lib.stride_tricks.as_strided(data.view("<f2"), (len(bits),), (2 * strides,))
    return Result([view], "cpu")


def test_comparison_is_by_bits_through_the_returned_strides() -> None:
    case = case_from_json(parse_json(json.dumps(half_case([0x3C00, 0x0000, 0x7E00]))))
    assert find_mismatch(case, result_of([0x3C00, 0x0000, 0x7E00], strides=3)) is None
    # -0.0 is not 0.0.
    assert find_mismatch(case, result_of([0x3C00, 0x8000, 0x7E00])) == (
        "outputs[0]: element [1] is -0.0, expected 0.0 (1 of 3 elements differ)"
    )
    # A NaN with another payload: the message shows the bits.
    assert find_mismatch(case, result_of([0x3C00, 0x0000, 0x7E01])) == (
        'outputs[0]: element [2] is "nan" (bits 0x7e01), expected "nan" (bits 0x7e00) '
        "(1 of 3 elements differ)"
    )


def test_comparison_checks_dtype_sizes_requested_strides_and_errors() -> None:
    case = case_from_json(SLICE_CASE)
    column_major = np.lib.stride_tricks.as_strided(
        np.array([2, 5, 3, 6], dtype=np.uint8), (2, 2), (1, 2)
    )
    assert find_mismatch(case, Result([column_major], "cpu")) is None
    assert find_mismatch(case, Result([np.array([[2, 3], [5, 6]], dtype=np.uint8)], "cpu")) == (
        "outputs[0]: strides are [2, 1], expected [1, 2]"
    )
    assert find_mismatch(case, Result([column_major.astype(np.int8)], "cpu")).startswith(
        "outputs[0]: dtype is int8 (7), expected uint8"
    )
    assert find_mismatch(case, Result([], "cpu")) == "expected 1 outputs, got 0"
    assert find_mismatch(case, TensorOpError("INVALID_ARGUMENT", "no")) == (
        "expected outputs, got INVALID_ARGUMENT: no"
    )
    erring = case_from_json(dict(SLICE_CASE, expect={"error": "INVALID_ARGUMENT"}))
    assert find_mismatch(erring, TensorOpError("INVALID_ARGUMENT", "x")) is None
    assert find_mismatch(erring, TensorOpError("RESOURCE_EXHAUSTED", "big")) == (
        "expected INVALID_ARGUMENT, got RESOURCE_EXHAUSTED: big"
    )
    assert find_mismatch(erring, Result([column_major], "opencl:0")) == (
        "expected INVALID_ARGUMENT, got 1 outputs from opencl:0"
    )


def bfloat16_case(bits: list[int]) -> dict[str, object]:
    """A bfloat16 identity-slice case expecting the given bit patterns (as JSON values)."""
    values: list[object] = []
    for v in np.array(bits, dtype="<u2").view(ml_dtypes.bfloat16).astype(np.float64).tolist():
        values.append("nan" if v != v else ("inf" if v > 0 else "-inf") if abs(v) == inf else v)
    return {
        "name": "bfloat16",
        "op": "slice",
        "inputs": {"input": {"dtype": "bfloat16", "sizes": [len(bits)], "data": values}},
        "attrs": {"offsets": [0], "window_sizes": [len(bits)], "window_strides": [1]},
        "outputs": [{"sizes": [len(bits)]}],
        "expect": {"outputs": [{"dtype": "bfloat16", "sizes": [len(bits)], "data": values}]},
    }


def test_bfloat16_comparison_is_by_bits() -> None:
    bits = [0x3F80, 0x0000, 0x7FC0, 0xC2F7, 0xFF80]
    case = case_from_json(parse_json(json.dumps(bfloat16_case(bits))))
    assert case.request.inputs["input"].data == b"".join(b.to_bytes(2, "little") for b in bits)

    def result(got: list[int]) -> Result:
        return Result([np.array(got, dtype="<u2").view(ml_dtypes.bfloat16)], "cpu")

    assert find_mismatch(case, result(bits)) is None
    assert find_mismatch(case, result([0x3F80, 0x8000, 0x7FC0, 0xC2F7, 0xFF80])) == (
        "outputs[0]: element [1] is -0.0, expected 0.0 (1 of 5 elements differ)"
    )
    assert find_mismatch(case, result([0x3F80, 0x0000, 0x7FC1, 0xC2F6, 0x7F80])) == (
        'outputs[0]: element [2] is "nan" (bits 0x7fc1), expected "nan" (bits 0x7fc0) '
        "(3 of 5 elements differ)"
    )
    # A signalling NaN (numpy's isnan warns on one; the message does not).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert find_mismatch(case, result([0x3F80, 0x0000, 0x7F81, 0xC2F7, 0xFF80])) == (
            'outputs[0]: element [2] is "nan" (bits 0x7f81), expected "nan" (bits 0x7fc0) '
            "(1 of 5 elements differ)"
        )
    assert find_mismatch(case, result([0x3F80, 0x0000, 0x7FC0, 0xC2F6, 0x7F80])) == (
        "outputs[0]: element [3] is -123.0, expected -123.5 (2 of 5 elements differ)"
    )
    assert find_mismatch(case, result([0x3F80, 0x0000, 0x7FC0, 0xC2F7, 0x7F80])) == (
        'outputs[0]: element [4] is "inf", expected "-inf" (1 of 5 elements differ)'
    )
    halves = np.array(bits, dtype="<u2").view(np.float16)
    assert find_mismatch(case, Result([halves], "cpu")) == (
        "outputs[0]: dtype is float16 (3), expected bfloat16"
    )


def test_bool_comparison_is_by_bytes() -> None:
    values = [True, False, True]
    case = case_from_json(
        dict(
            SLICE_CASE,
            inputs={"input": {"dtype": "bool", "sizes": [3], "data": values}},
            attrs={"offsets": [0], "window_sizes": [3], "window_strides": [1]},
            outputs=[{"sizes": [3]}],
            expect={"outputs": [{"dtype": "bool", "sizes": [3], "data": values}]},
        )
    )

    def result(got: list[int]) -> Result:
        return Result([np.frombuffer(bytes(got), dtype=np.bool_)], "cpu")

    assert find_mismatch(case, result([1, 0, 1])) is None
    assert find_mismatch(case, result([1, 1, 1])) == (
        "outputs[0]: element [1] is true, expected false (1 of 3 elements differ)"
    )
    # numpy reads any nonzero byte as True: the message shows the bytes.
    assert find_mismatch(case, result([2, 0, 1])) == (
        "outputs[0]: element [0] is true (bits 0x02), expected true (bits 0x01) "
        "(1 of 3 elements differ)"
    )
    assert find_mismatch(case, Result([np.array([1, 0, 1], dtype=np.uint8)], "cpu")) == (
        "outputs[0]: dtype is uint8 (11), expected bool"
    )
