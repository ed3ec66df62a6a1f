"""One element of a dtype between JSON values and little-endian bytes, exactly:
floats round once, from the decimal text, to the dtype (so every float16,
bfloat16 and float32 value written exactly is exact); 64-bit integers may be
decimal strings; "nan" is the canonical quiet NaN; bools are JSON true and false.
Mirrors the C++ client's element_codec.cc.
"""

from __future__ import annotations

import json
import math
import re
import struct
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.exact_json import CaseError, FloatText, describe
from tensorop_client.tensors import numpy_dtype

DTYPES: dict[str, int] = {
    "float64": pb.FLOAT64, "float32": pb.FLOAT32, "float16": pb.FLOAT16,
    "int64": pb.INT64, "int32": pb.INT32, "int16": pb.INT16, "int8": pb.INT8,
    "uint64": pb.UINT64, "uint32": pb.UINT32, "uint16": pb.UINT16, "uint8": pb.UINT8,
    "bfloat16": pb.BFLOAT16, "bool": pb.BOOL,
}  # fmt: skip
DTYPE_NAMES: dict[int, str] = {wire: name for name, wire in DTYPES.items()}

# Per float dtype: (mantissa bits incl. the implicit one, min normal exponent,
# max exponent, struct format, canonical quiet NaN bits). bfloat16, which struct
# lacks, is the upper half of the binary32 of the same value (_pack).
_FLOATS: dict[int, tuple[int, int, int, str, int]] = {
    pb.FLOAT64: (53, -1022, 1023, "<d", 0x7FF8000000000000),
    pb.FLOAT32: (24, -126, 127, "<f", 0x7FC00000),
    pb.FLOAT16: (11, -14, 15, "<e", 0x7E00),
    pb.BFLOAT16: (8, -126, 127, "<f", 0x7FC0),
}
_TWO_TO_53 = 1 << 53
_DECIMAL = re.compile(r"-?[0-9]{1,20}")


def integer_value(value: Any) -> int:
    """A JSON integer, integral float below 2^53, or decimal string."""
    if isinstance(value, (FloatText, float)):
        number = float(value)
        if not math.isfinite(number) or number != math.trunc(number):
            raise CaseError(f"{describe(value)} is not an integer")
        # From 2^53 on, neighbouring integers share a double: the text may have
        # named another one.
        if abs(number) >= _TWO_TO_53:
            raise CaseError(
                f"{describe(value)} is too large for a JSON float to be exact; write it as a string"
            )
        return int(number)
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise CaseError(f"{json.dumps(value)} is not a decimal integer")
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise CaseError(f"expected an integer, got {describe(value)}")


def int64_value(value: Any) -> int:
    integer = integer_value(value)
    if not -(1 << 63) <= integer < 1 << 63:
        raise CaseError(f"{describe(value)} is out of range for int64")
    return integer


def round_to_float(
    value: Fraction, mantissa_bits: int, min_exponent: int, max_exponent: int
) -> float:
    """`value` rounded to nearest-even in a binary format (subnormals included;
    too large: inf), as the exactly equal Python float."""
    magnitude = abs(value)
    if magnitude == 0:
        return 0.0
    # The exponent e with 2^e <= magnitude < 2^(e+1).
    e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if magnitude < Fraction(2) ** e:
        e -= 1
    quantum = max(e, min_exponent) - (mantissa_bits - 1)
    mantissa = round(magnitude / Fraction(2) ** quantum)  # Fraction rounds half to even
    if mantissa * Fraction(2) ** quantum >= Fraction(2) ** (max_exponent + 1):
        return math.inf
    return math.ldexp(mantissa, quantum)


def _pack(dtype: int, number: float) -> bytes:
    """The little-endian bytes of `number`, a value of float `dtype` (exactly)."""
    packed = struct.pack(_FLOATS[dtype][3], number)
    # A bfloat16 value is a binary32 one whose low 16 bits are 0: its bits are the high half.
    return packed[2:] if dtype == pb.BFLOAT16 else packed


def _float_bytes(dtype: int, value: Any) -> bytes:
    """One float element's little-endian bytes."""
    mantissa_bits, min_exponent, max_exponent, _, quiet_nan = _FLOATS[dtype]
    size = numpy_dtype(dtype).itemsize
    if isinstance(value, (FloatText, float)):
        # FloatText from JSON text; a Python float (a case built in code) stands
        # for its exact binary64 value.
        nearest = float(value)  # correctly rounded to binary64
        if math.isnan(nearest):
            return quiet_nan.to_bytes(size, "little")
        if isinstance(value, FloatText):
            negative = value.lstrip().startswith("-")
        else:
            negative = math.copysign(1.0, value) < 0
        if dtype == pb.FLOAT64 or math.isinf(nearest) or nearest == 0:
            # Beyond binary64's range the narrow result is inf or zero too; and
            # this spares Fraction a 10^huge exponent.
            number = nearest
        else:
            exact = Fraction(str(value)) if isinstance(value, FloatText) else Fraction(value)
            number = round_to_float(exact, mantissa_bits, min_exponent, max_exponent)
        return _pack(dtype, math.copysign(number, -1.0 if negative else 1.0))
    if isinstance(value, int) and not isinstance(value, bool):
        number = round_to_float(Fraction(value), mantissa_bits, min_exponent, max_exponent)
        return _pack(dtype, math.copysign(number, -1.0 if value < 0 else 1.0))
    if isinstance(value, str):
        if value == "nan":
            return quiet_nan.to_bytes(size, "little")
        if value in ("inf", "-inf"):
            return _pack(dtype, float(value))
        raise CaseError(
            f'{json.dumps(value)} is not a number (the strings are "nan", "inf", "-inf")'
        )
    raise CaseError(f'expected a number, "nan", "inf" or "-inf", got {describe(value)}')


def element_bytes(dtype: int, value: Any) -> bytes:
    if dtype == pb.BOOL:
        # JSON true or false only: 0 and 1 are numbers, not bools.
        if not isinstance(value, bool):
            raise CaseError(f"expected true or false (bool), got {describe(value)}")
        return b"\x01" if value else b"\x00"
    if dtype in _FLOATS:
        return _float_bytes(dtype, value)
    dt = numpy_dtype(dtype)
    integer = integer_value(value)
    info = np.iinfo(dt)
    if not int(info.min) <= integer <= int(info.max):
        raise CaseError(f"{describe(value)} is out of range for {DTYPE_NAMES[dtype]}")
    return integer.to_bytes(dt.itemsize, "little", signed=integer < 0)


def element_text(value: np.generic) -> str:
    """One element for messages: integers exact, floats shortest at their precision,
    bools true and false."""
    if isinstance(value, np.bool_):
        # numpy reads any nonzero byte as True; a message that needs the byte shows
        # the bits (case_compare).
        return "true" if value else "false"
    if isinstance(value, np.floating) or value.dtype.type is ml_dtypes.bfloat16:
        # Exact for every float dtype, and no "invalid value" warning on a
        # signalling NaN (numpy's isnan gives one for bfloat16).
        number = float(value)
        if math.isnan(number):
            return '"nan"'
        if math.isinf(number):
            return '"inf"' if number > 0 else '"-inf"'
        if value.dtype == np.float64:
            return repr(number)
        # float16 and bfloat16 via their exact float32 value, as the C++ client prints them.
        return str(np.float32(number))
    return str(int(value))
