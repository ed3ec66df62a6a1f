"""JSON text read for the conformance case format (docs/operators.md, "Conformance cases"):
numbers with a fraction or exponent keep their decimal text, so they can round
once, from the text, to a narrow float type. Mirrors the C++ client's
exact_json.cc.
"""

from __future__ import annotations

import json
from typing import Any


class CaseError(ValueError):
    """A case (or a value in it) that cannot be read; the message names the field."""


class FloatText(str):
    """A JSON number with a fraction or exponent, kept as its text so that it
    rounds once, from the decimal value, to a narrow float type."""


def describe(value: Any) -> str:
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
