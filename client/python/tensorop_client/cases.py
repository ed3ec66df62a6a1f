"""Conformance cases (shared/conformance/FORMAT.md): reading them into requests and
comparing results with them bit for bit. Mirrors the C++ client's case_format.cc.

Values are encoded exactly: floats round once, from the decimal text, to the
dtype (so every float16/float32 value written exactly is exact); 64-bit
integers may be decimal strings; "nan" is the canonical quiet NaN.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.client import Result, TensorOpError, set_attrs
from tensorop_client.tensors import numpy_dtype, wire_dtype

DTYPES: dict[str, int] = {
    "float64": pb.FLOAT64, "float32": pb.FLOAT32, "float16": pb.FLOAT16,
    "int64": pb.INT64, "int32": pb.INT32, "int16": pb.INT16, "int8": pb.INT8,
    "uint64": pb.UINT64, "uint32": pb.UINT32, "uint16": pb.UINT16, "uint8": pb.UINT8,
}  # fmt: skip
DTYPE_NAMES: dict[int, str] = {wire: name for name, wire in DTYPES.items()}
ERROR_CODES: frozenset[str] = frozenset(c.name for c in grpc.StatusCode if c != grpc.StatusCode.OK)

# Per float dtype: (mantissa bits incl. the implicit one, min normal exponent,
# max exponent, struct format, canonical quiet NaN bits).
_FLOATS: dict[int, tuple[int, int, int, str, int]] = {
    pb.FLOAT64: (53, -1022, 1023, "<d", 0x7FF8000000000000),
    pb.FLOAT32: (24, -126, 127, "<f", 0x7FC00000),
    pb.FLOAT16: (11, -14, 15, "<e", 0x7E00),
}
_TWO_TO_53 = 1 << 53
_DECIMAL = re.compile(r"-?[0-9]{1,20}")


class CaseError(ValueError):
    """A case (or a value in it) that cannot be read; the message names the field."""


class FloatText(str):
    """A JSON number with a fraction or exponent, kept as its text so that it
    rounds once, from the decimal value, to a narrow float type."""


@contextmanager
def _within(context: str) -> Iterator[None]:
    """Puts `context` in front of the message of a CaseError raised inside."""
    try:
        yield
    except CaseError as e:
        raise CaseError(f"{context}{e}") from None


def _describe(value: Any) -> str:
    """A JSON value for messages, short."""
    text = str(value) if isinstance(value, FloatText) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_json(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise CaseError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_float=FloatText, parse_constant=reject)
    except json.JSONDecodeError as e:
        raise CaseError(str(e)) from None


# ---- Values -------------------------------------------------------------------


def _integer(value: Any) -> int:
    """A JSON integer, integral float below 2^53, or decimal string."""
    if isinstance(value, (FloatText, float)):
        number = float(value)
        if not math.isfinite(number) or number != math.trunc(number):
            raise CaseError(f"{_describe(value)} is not an integer")
        # From 2^53 on, neighbouring integers share a double: the text may have
        # named another one.
        if abs(number) >= _TWO_TO_53:
            raise CaseError(
                f"{_describe(value)} is too large for a JSON float to be exact; "
                "write it as a string"
            )
        return int(number)
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise CaseError(f"{json.dumps(value)} is not a decimal integer")
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise CaseError(f"expected an integer, got {_describe(value)}")


def _int64(value: Any) -> int:
    integer = _integer(value)
    if not -(1 << 63) <= integer < 1 << 63:
        raise CaseError(f"{_describe(value)} is out of range for int64")
    return integer


def _int64_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise CaseError(f"{where}: expected a list, got {_describe(value)}")
    result = []
    for i, element in enumerate(value):
        with _within(f"{where}[{i}]: "):
            result.append(_int64(element))
    return result


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


def _float_bytes(dtype: int, value: Any) -> bytes:
    """One float element's little-endian bytes."""
    mantissa_bits, min_exponent, max_exponent, fmt, quiet_nan = _FLOATS[dtype]
    size = struct.calcsize(fmt)
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
        return struct.pack(fmt, math.copysign(number, -1.0 if negative else 1.0))
    if isinstance(value, int) and not isinstance(value, bool):
        number = round_to_float(Fraction(value), mantissa_bits, min_exponent, max_exponent)
        return struct.pack(fmt, math.copysign(number, -1.0 if value < 0 else 1.0))
    if isinstance(value, str):
        if value == "nan":
            return quiet_nan.to_bytes(size, "little")
        if value in ("inf", "-inf"):
            return struct.pack(fmt, float(value))
        raise CaseError(
            f'{json.dumps(value)} is not a number (the strings are "nan", "inf", "-inf")'
        )
    raise CaseError(f'expected a number, "nan", "inf" or "-inf", got {_describe(value)}')


def _element_bytes(dtype: int, value: Any) -> bytes:
    if dtype in _FLOATS:
        return _float_bytes(dtype, value)
    dt = numpy_dtype(dtype)
    integer = _integer(value)
    info = np.iinfo(dt)
    if not int(info.min) <= integer <= int(info.max):
        raise CaseError(f"{_describe(value)} is out of range for {DTYPE_NAMES[dtype]}")
    return integer.to_bytes(dt.itemsize, "little", signed=integer < 0)


# ---- Structure ----------------------------------------------------------------


def _check_keys(obj: dict[str, Any], allowed: Sequence[str], what: str) -> None:
    for key in obj:
        if key not in allowed:
            raise CaseError(f"unknown field {json.dumps(key)} in {what}")


def _required(obj: dict[str, Any], key: str) -> Any:
    if key not in obj:
        raise CaseError(f'missing field "{key}"')
    return obj[key]


@dataclass
class HostTensor:
    """A tensor of a case: dtype, sizes, strides (empty: packed), little-endian data."""

    dtype: int
    sizes: list[int]
    strides: list[int]
    data: bytes


def tensor_from_json(obj: Any) -> HostTensor:
    """A tensor object {"dtype", "sizes", "strides"?, "data"}, values encoded
    exactly; the number of values is not checked here."""
    if not isinstance(obj, dict):
        raise CaseError(f"a tensor is an object, got {_describe(obj)}")
    _check_keys(obj, ("dtype", "sizes", "strides", "data"), "a tensor")
    name = _required(obj, "dtype")
    if not isinstance(name, str) or name not in DTYPES:
        raise CaseError(f"dtype: {_describe(name)} is not a dtype")
    dtype = DTYPES[name]
    sizes = _int64_list(_required(obj, "sizes"), "sizes")
    strides = _int64_list(obj["strides"], "strides") if "strides" in obj else []
    data = _required(obj, "data")
    if not isinstance(data, list):
        raise CaseError(f"data: expected a list, got {_describe(data)}")
    parts = []
    for i, value in enumerate(data):
        with _within(f"data[{i}]: "):
            parts.append(_element_bytes(dtype, value))
    return HostTensor(dtype, sizes, strides, b"".join(parts))


def _expected_tensor(obj: Any) -> HostTensor:
    tensor = tensor_from_json(obj)
    if tensor.strides:
        raise CaseError(
            "strides: an expected tensor lists its values packed; output strides belong in "
            'the case\'s "outputs"'
        )
    elements = math.prod(tensor.sizes)
    values = len(tensor.data) // numpy_dtype(tensor.dtype).itemsize
    if any(n < 0 for n in tensor.sizes) or values != elements:
        raise CaseError(
            f"sizes {tensor.sizes} hold {elements} elements but data has {values} values"
        )
    return tensor


@dataclass
class Case:
    """One case, ready to send: the request (id = name, backend AUTO) with inputs as
    written, even invalid ones (rejecting those is the server's job), and either
    the expected error code name or the expected outputs, packed row-major."""

    name: str
    request: pb.RunRequest
    expected_error: str | None = None
    expected_outputs: list[HostTensor] = field(default_factory=list)


def case_from_json(obj: Any) -> Case:
    if not isinstance(obj, dict):
        raise CaseError(f"a case is an object, got {_describe(obj)}")
    name = _required(obj, "name")
    if not isinstance(name, str) or not name:
        raise CaseError(f"name: expected a non-empty string, got {_describe(name)}")
    request = pb.RunRequest(id=name)

    op = _required(obj, "op")
    if not isinstance(op, str):
        raise CaseError(f"op: expected a string, got {_describe(op)}")
    attrs = obj.get("attrs", {})
    if not isinstance(attrs, dict):
        raise CaseError(f"attrs: expected an object, got {_describe(attrs)}")
    values: dict[str, int | list[int]] = {}
    for key, value in attrs.items():
        where = f"attrs.{key}"
        if isinstance(value, list):
            values[key] = _int64_list(value, where)
        else:
            with _within(f"{where}: "):
                values[key] = _int64(value)
    try:
        set_attrs(request, op, values)
    except ValueError as e:
        raise CaseError(str(e) if str(e).startswith("attrs.") else f"op: {e}") from None

    inputs = _required(obj, "inputs")
    if not isinstance(inputs, dict):
        raise CaseError(f"inputs: expected an object, got {_describe(inputs)}")
    for input_name, tensor_json in inputs.items():
        with _within(f"inputs.{input_name}: "):
            tensor = tensor_from_json(tensor_json)
        wire = request.inputs[input_name]
        wire.dtype = tensor.dtype  # type: ignore[assignment]  # a DType value
        wire.sizes.extend(tensor.sizes)
        wire.strides.extend(tensor.strides)
        wire.data = tensor.data

    if "outputs" in obj:
        outputs = obj["outputs"]
        if not isinstance(outputs, list):
            raise CaseError(f"outputs: expected a list, got {_describe(outputs)}")
        for i, output in enumerate(outputs):
            with _within(f"outputs[{i}]: "):
                if not isinstance(output, dict):
                    raise CaseError(f"expected an object, got {_describe(output)}")
                _check_keys(output, ("sizes", "strides"), "an output")
                request.outputs.add(
                    sizes=_int64_list(output.get("sizes", []), "sizes"),
                    strides=_int64_list(output.get("strides", []), "strides"),
                )

    case = Case(name, request)
    with _within("expect: "):
        _set_expectation(_required(obj, "expect"), case)
    return case


def _set_expectation(expect: Any, case: Case) -> None:
    if not isinstance(expect, dict):
        raise CaseError(f"expected an object, got {_describe(expect)}")
    _check_keys(expect, ("outputs", "error"), "expect")
    if ("error" in expect) == ("outputs" in expect):
        raise CaseError('needs exactly one of "outputs" and "error"')
    if "error" in expect:
        code = expect["error"]
        if not isinstance(code, str) or code not in ERROR_CODES:
            raise CaseError(f"error: {_describe(code)} is not a gRPC error code name")
        case.expected_error = code
        return
    outputs = expect["outputs"]
    if not isinstance(outputs, list):
        raise CaseError(f"outputs: expected a list, got {_describe(outputs)}")
    for i, output in enumerate(outputs):
        with _within(f"outputs[{i}]: "):
            case.expected_outputs.append(_expected_tensor(output))


@dataclass
class LoadedCase:
    """One entry of a case file: the case, or why it cannot be run (so one
    malformed case does not hide the others). `name` is "#<index>" when the entry
    has no readable name."""

    name: str
    case: Case | None
    error: str | None = None


def parse_cases(text: str) -> list[LoadedCase]:
    """The cases of one file's text (a case object or an array of them); CaseError
    when the text as a whole is unusable."""
    root = parse_json(text)
    if isinstance(root, dict):
        entries = [root]
    elif isinstance(root, list):
        entries = root
    else:
        raise CaseError("a case file holds a case object or an array of cases")
    loaded = []
    for i, entry in enumerate(entries):
        name = f"#{i}"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
            name = entry["name"]
        try:
            loaded.append(LoadedCase(name, case_from_json(entry)))
        except CaseError as e:
            loaded.append(LoadedCase(name, None, str(e)))
    return loaded


def case_files(path: str | Path) -> list[Path]:
    """`path` itself, or the *.json files of a directory in name order."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
    if not files:
        raise CaseError(f"{path}: no *.json files")
    return files


def load_cases(path: str | Path) -> list[LoadedCase]:
    """The cases of a file, or of every *.json file in a directory (name order)."""
    loaded = []
    for file in case_files(path):
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as e:
            raise CaseError(f"{file}: {e.strerror}") from None
        with _within(f"{file}: "):
            loaded.extend(parse_cases(text))
    return loaded


# ---- Comparing ----------------------------------------------------------------


def element_text(value: np.generic) -> str:
    """One element for messages: integers exact, floats shortest at their precision."""
    if isinstance(value, np.floating):
        if np.isnan(value):
            return '"nan"'
        if np.isinf(value):
            return '"inf"' if value > 0 else '"-inf"'
        if value.dtype == np.float64:
            return repr(float(value))
        # float16 via its exact float32 value, as the C++ client prints it.
        return str(np.float32(value))
    return str(int(value))


def _compare_tensor(expected: HostTensor, requested: pb.OutputDesc | None, got: np.ndarray) -> str:
    """What differs between one expected output and the returned one, or ""."""
    got_dtype = wire_dtype(got.dtype)
    if got_dtype != expected.dtype:
        return (
            f"dtype is {DTYPE_NAMES[got_dtype]} ({got_dtype}), "
            f"expected {DTYPE_NAMES[expected.dtype]}"
        )
    if list(got.shape) != expected.sizes:
        return f"sizes are {list(got.shape)}, expected {expected.sizes}"
    got_strides = [s // got.itemsize for s in got.strides]
    if requested is not None and requested.strides and got_strides != list(requested.strides):
        return f"strides are {got_strides}, expected {list(requested.strides)}"
    # Bits, not values: NaN payloads and -0.0 count. Viewing as unsigned integers
    # of the same width reads every element through the returned strides.
    bits = np.dtype(f"<u{got.itemsize}")
    got_bits = got.view(bits)
    expected_bits = np.frombuffer(expected.data, dtype=bits).reshape(expected.sizes)
    differ = got_bits != expected_bits
    count = int(np.count_nonzero(differ))
    if count == 0:
        return ""
    # The first differing element in row-major order (rank 0 included).
    first = tuple(int(c) for c in np.unravel_index(int(np.argmax(differ)), differ.shape))
    expected_values = np.frombuffer(expected.data, dtype=got.dtype).reshape(expected.sizes)
    got_text, expected_text = element_text(got[first]), element_text(expected_values[first])
    if got_text == expected_text:  # NaN payloads, say: show the bits
        width = 2 * got.itemsize
        got_text += f" (bits 0x{int(got_bits[first]):0{width}x})"
        expected_text += f" (bits 0x{int(expected_bits[first]):0{width}x})"
    return (
        f"element {list(first)} is {got_text}, expected {expected_text} "
        f"({count} of {differ.size} elements differ)"
    )


def find_mismatch(case: Case, got: Result | TensorOpError) -> str | None:
    """Compares a result with what the case expects, exactly: an expected error by
    its code name; else the number of outputs and for each its dtype, sizes,
    strides (where the case asked for output strides) and the bits of every
    logical element read through the returned strides. None on a match."""
    if case.expected_error is not None:
        if isinstance(got, Result):
            return (
                f"expected {case.expected_error}, got {len(got.outputs)} outputs from {got.backend}"
            )
        if got.code != case.expected_error:
            return f"expected {case.expected_error}, got {got}"
        return None
    if isinstance(got, TensorOpError):
        return f"expected outputs, got {got}"
    if len(got.outputs) != len(case.expected_outputs):
        return f"expected {len(case.expected_outputs)} outputs, got {len(got.outputs)}"
    differences = []
    for i, (expected, array) in enumerate(zip(case.expected_outputs, got.outputs, strict=True)):
        requested = case.request.outputs[i] if i < len(case.request.outputs) else None
        difference = _compare_tensor(expected, requested, array)
        if difference:
            differences.append(f"outputs[{i}]: {difference}")
    return "; ".join(differences) or None


def run_case(
    call: Callable[[pb.RunRequest], Result], case: Case, backend: int
) -> Result | TensorOpError:
    """Sends one case's request with `backend`; the result or the error."""
    request = pb.RunRequest()
    request.CopyFrom(case.request)
    request.backend = backend  # type: ignore[assignment]
    try:
        return call(request)
    except TensorOpError as e:
        return e
