"""Conformance cases (docs/operators.md, "Conformance cases") read into requests and their
expectations. Mirrors the C++ client's case_format.cc; the JSON reading is
exact_json.py, the element values element_codec.py, the comparison with
results case_compare.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.client import OPS, set_attrs
from tensorop_client.element_codec import DTYPES, element_bytes, int64_value
from tensorop_client.exact_json import CaseError, FloatText, describe, parse_json
from tensorop_client.tensors import numpy_dtype

__all__ = [
    "Case", "CaseError", "FloatText", "HostTensor", "LoadedCase", "case_files",
    "case_from_json", "load_cases", "parse_cases", "parse_json", "tensor_from_json",
]  # fmt: skip

ERROR_CODES: frozenset[str] = frozenset(c.name for c in grpc.StatusCode if c != grpc.StatusCode.OK)


@contextmanager
def _within(context: str) -> Iterator[None]:
    """Puts `context` in front of the message of a CaseError raised inside."""
    try:
        yield
    except CaseError as e:
        raise CaseError(f"{context}{e}") from None


def _int64_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise CaseError(f"{where}: expected a list, got {describe(value)}")
    result = []
    for i, element in enumerate(value):
        with _within(f"{where}[{i}]: "):
            result.append(int64_value(element))
    return result


def _check_keys(obj: dict[str, Any], allowed: Sequence[str], what: str) -> None:
    for key in obj:
        if key not in allowed:
            raise CaseError(f"unknown field {json.dumps(key)} in {what}")


def _required(obj: dict[str, Any], key: str) -> Any:
    if key not in obj:
        raise CaseError(f'missing field "{key}"')
    return obj[key]


def _is_text_attribute(op: str, key: str) -> bool:
    """Whether attribute `key` of `op` is a text field (pad's mode and value)."""
    if op not in OPS:
        return False  # set_attrs names the operator
    field = getattr(pb.RunRequest(), op).DESCRIPTOR.fields_by_name.get(key)
    return field is not None and field.type == FieldDescriptor.TYPE_STRING


def _attribute_text(value: Any, where: str) -> str:
    """A text attribute's JSON value, as case_format.cc reads it: a string as
    it is, a number as its JSON text (a float's decimal text as written, so
    that the server rounds it once), a bool as "true" or "false"."""
    if isinstance(value, str):  # FloatText too: the number's text
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise CaseError(f"{where}: expected a string, number or bool, got {describe(value)}")


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
        raise CaseError(f"a tensor is an object, got {describe(obj)}")
    _check_keys(obj, ("dtype", "sizes", "strides", "data"), "a tensor")
    name = _required(obj, "dtype")
    if not isinstance(name, str) or name not in DTYPES:
        raise CaseError(f"dtype: {describe(name)} is not a dtype")
    dtype = DTYPES[name]
    sizes = _int64_list(_required(obj, "sizes"), "sizes")
    strides = _int64_list(obj["strides"], "strides") if "strides" in obj else []
    data = _required(obj, "data")
    if not isinstance(data, list):
        raise CaseError(f"data: expected a list, got {describe(data)}")
    parts = []
    for i, value in enumerate(data):
        with _within(f"data[{i}]: "):
            parts.append(element_bytes(dtype, value))
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
        raise CaseError(f"a case is an object, got {describe(obj)}")
    name = _required(obj, "name")
    if not isinstance(name, str) or not name:
        raise CaseError(f"name: expected a non-empty string, got {describe(name)}")
    request = pb.RunRequest(id=name)

    op = _required(obj, "op")
    if not isinstance(op, str):
        raise CaseError(f"op: expected a string, got {describe(op)}")
    attrs = obj.get("attrs", {})
    if not isinstance(attrs, dict):
        raise CaseError(f"attrs: expected an object, got {describe(attrs)}")
    values: dict[str, int | str | list[int]] = {}
    for key, value in attrs.items():
        where = f"attrs.{key}"
        if _is_text_attribute(op, key):
            values[key] = _attribute_text(value, where)
        elif isinstance(value, list):
            values[key] = _int64_list(value, where)
        else:
            with _within(f"{where}: "):
                values[key] = int64_value(value)
    try:
        set_attrs(request, op, values)
    except ValueError as e:
        raise CaseError(str(e) if str(e).startswith("attrs.") else f"op: {e}") from None

    inputs = _required(obj, "inputs")
    if not isinstance(inputs, dict):
        raise CaseError(f"inputs: expected an object, got {describe(inputs)}")
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
            raise CaseError(f"outputs: expected a list, got {describe(outputs)}")
        for i, output in enumerate(outputs):
            with _within(f"outputs[{i}]: "):
                if not isinstance(output, dict):
                    raise CaseError(f"expected an object, got {describe(output)}")
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
        raise CaseError(f"expected an object, got {describe(expect)}")
    _check_keys(expect, ("outputs", "error"), "expect")
    if ("error" in expect) == ("outputs" in expect):
        raise CaseError('needs exactly one of "outputs" and "error"')
    if "error" in expect:
        code = expect["error"]
        if not isinstance(code, str) or code not in ERROR_CODES:
            raise CaseError(f"error: {describe(code)} is not a gRPC error code name")
        case.expected_error = code
        return
    outputs = expect["outputs"]
    if not isinstance(outputs, list):
        raise CaseError(f"outputs: expected a list, got {describe(outputs)}")
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
