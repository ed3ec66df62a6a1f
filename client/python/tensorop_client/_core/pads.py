"""Pad with NumPy's conventions (numpy.pad), beside the other operators'
methods (tensorop_client._core.operators, whose helpers it shares): numpy.pad's
`pad_width` as Pad's start_padding and end_padding, its mode names, and its
`constant_values` as Pad's `value`, the exact text of one element of x's dtype;
a plan over `run`'s."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorop_client._core.gathers import _nothing_to_move
from tensorop_client._core.operators import Operand, _one_output, _operand
from tensorop_client._core.plans import Plan, Planning
from tensorop_client._core.progress import ProgressFn
from tensorop_client._core.shapes import PAD_MODES
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import numpy_dtype, wire_dtype

# The float dtypes, whose value is rounded as NumPy casts (then exact); the
# others (integers, bool) take a value they hold exactly, or the server refuses.
_FLOATS = (pb.FLOAT64, pb.FLOAT32, pb.FLOAT16, pb.BFLOAT16)


def _as_pairs(values: np.ndarray, ndim: int) -> list[tuple[Any, Any]]:
    """numpy.pad's reading of `pad_width` and `constant_values` (its
    _as_pairs): one (before, after) pair per dimension from one value, one
    pair (any shape of 2 values but (2, 1)), or anything that broadcasts to
    (ndim, 2); what does not raises NumPy's own ValueError (np.broadcast_to's
    words)."""
    if values.ndim < 3:
        if values.size == 1:
            one = values.reshape(-1)[0]
            return [(one, one)] * ndim
        if values.size == 2 and values.shape != (2, 1):
            before, after = values.reshape(-1)
            return [(before, after)] * ndim
    rows = np.broadcast_to(values, (ndim, 2))
    return [(row[0], row[1]) for row in rows]


def pad_pairs(pad_width: npt.ArrayLike, ndim: int) -> list[tuple[int, int]]:
    """numpy.pad's `pad_width` for an array of `ndim` dimensions as one
    (before, after) pair per dimension: an integer (every side), (before,
    after) or ((before, after),) (every dimension), or one pair per
    dimension, anything that broadcasts to (ndim, 2). NumPy's errors in its
    words, before anything is sent: TypeError for counts that are not
    integers, ValueError for a negative one (the operator's counts are >= 0)
    and for a shape that does not broadcast. Unsigned integers are taken as
    the integers they are."""
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")  # NumPy's
    if widths.min() < 0:  # an empty one: NumPy's ValueError too
        raise ValueError("index can't contain negative values")  # NumPy's
    return [(int(before), int(after)) for before, after in _as_pairs(widths, ndim)]


def pad_mode(mode: str) -> str:
    """`mode` when Pad has it (PAD_MODES: numpy.pad's constant, edge, reflect
    and symmetric); ValueError for numpy.pad's others ("wrap", "linear_ramp",
    "maximum", "mean", "median", "minimum", "empty"), a function, or any other
    name, before anything is sent."""
    if isinstance(mode, str) and mode in PAD_MODES:
        return mode
    raise ValueError(
        f"pad: mode {mode!r} is not supported; the server's Pad has "
        f"{', '.join(repr(m) for m in PAD_MODES)} (numpy.pad's other modes are not taken)"
    )


def _float_text(value: float) -> str:
    """A double's exact text as Pad's value takes it: the shortest decimal
    that reads back as it (repr), "nan", "inf" or "-inf"."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _bfloat16(value: Any) -> bool:
    """Whether `value` is an ml_dtypes bfloat16 scalar (no np.number)."""
    return isinstance(value, np.generic) and value.dtype == numpy_dtype(pb.BFLOAT16)


def value_text(value: Any, dtype: npt.DTypeLike) -> str:
    """One constant value as Pad's `value` for an input of `dtype`: exact
    text the server reads as one element of that dtype (docs/operators.md,
    Pad). For a float dtype the value is first cast to it as NumPy casts
    (numpy.pad's result, bit for bit: rounded to nearest, ties to even, out
    of range to an infinity), then written as that element's exact text ("nan"
    for every NaN: the server's is the quiet one with sign 0, no payload). For
    an integer dtype it is not cast: an integer as its decimal text (a float
    that is an integer too: 2.0 is "2"), anything else as its text (2.5,
    "nan"), which the server refuses, as it refuses an integer out of the
    dtype's range (256 for uint8), naming pad.value; a bool is 1 or 0. For
    bool, a bool is "true" or "false" and a number as for an integer dtype
    (the server takes 1 and 0). TypeError for what is no number or bool (a
    complex, a string, None)."""
    wire = wire_dtype(np.dtype(dtype))
    if not isinstance(value, bool | int | float | np.bool_ | np.number) and not _bfloat16(value):
        raise TypeError(
            f"pad: constant_values must be numbers or bools, not {type(value).__name__} ({value!r})"
        )
    if isinstance(value, np.complexfloating):
        raise TypeError(f"pad: constant_values must be real numbers, not {value!r}")
    if wire in _FLOATS:
        with np.errstate(over="ignore", invalid="ignore"):
            cast = np.asarray(value).astype(numpy_dtype(wire))
        return _float_text(float(cast))
    if isinstance(value, bool | np.bool_):
        flag = bool(value)
        if wire == pb.BOOL:
            return "true" if flag else "false"
        return "1" if flag else "0"
    if isinstance(value, int | np.integer):
        return str(int(value))
    number = float(value)
    if math.isfinite(number) and number.is_integer():
        return str(int(number))  # exact: a float that is an integer is one
    return _float_text(number)


def constant_text(constant_values: Any, dtype: npt.DTypeLike, ndim: int) -> str:
    """numpy.pad's `constant_values` as Pad's one `value` (value_text): a
    number or a bool, or numpy.pad's pairs of them (a (before, after) pair,
    one per dimension, as `pad_width`), which must all give one value, the
    server's Pad taking one for every side (ValueError naming them
    otherwise); shapes NumPy refuses raise its ValueError."""
    values = np.asarray(constant_values)
    if values.dtype.kind not in "biufV" and values.dtype != object:
        raise TypeError(
            f"pad: constant_values must be numbers or bools, not {values.dtype} "
            f"({constant_values!r})"
        )
    _as_pairs(values, ndim)  # NumPy's ValueError for a shape it refuses
    texts = [value_text(v, dtype) for v in values.reshape(-1)]
    if not texts:
        return value_text(0, dtype)
    if any(text != texts[0] for text in texts):
        raise ValueError(
            "pad: constant_values must be one value for every side (the server's Pad takes "
            f"one); got {constant_values!r}, which is {sorted(set(texts))} in "
            f"{numpy_dtype(wire_dtype(np.dtype(dtype)))}"
        )
    return texts[0]


def pad(
    client: Planning[Any],
    x: Operand,
    pad_width: npt.ArrayLike,
    mode: str = "constant",
    constant_values: Any = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.pad(x, pad_width, mode, constant_values=...) on the server (ONNX
    Pad, DML_PADDING1): x with pad_width[i] = (before, after) elements added
    before and after it along each dimension i, shape x.shape[i] + before +
    after. `pad_width` is numpy.pad's: an integer (every side of every
    dimension), (before, after) or ((before, after),) (every dimension), or
    one (before, after) per dimension; NumPy's errors for others, before
    anything is sent (TypeError for counts that are not integers, ValueError
    for a negative one and for a shape that does not broadcast to (ndim, 2)).

    `mode` is one of numpy.pad's four that Pad has: "constant" (the
    default: `constant_values`), "edge" (the edge element repeated),
    "reflect" (mirrored about the edge element, NumPy's default
    reflect_type="even") and "symmetric" (mirrored, the edge repeated),
    padding wider than x folding back again and again, as NumPy's does.
    numpy.pad's other modes ("wrap", "linear_ramp", "maximum", "mean",
    "median", "minimum", "empty", a function) and `reflect_type` are not
    taken (ValueError, TypeError). Reflect needs two elements in every
    padded dimension: where NumPy repeats the one element, the server
    answers INVALID_ARGUMENT naming reflect.

    `constant_values` (constant mode; the other modes ignore it, where NumPy
    refuses it) is one number or bool (numpy.pad's pairs of values are
    taken when they all give one value, ValueError otherwise: Pad has one
    for every side), sent as the exact text of an element of x's dtype. For
    a float dtype it is cast as NumPy casts (rounded to nearest, ties to
    even), so the result is numpy.pad's bit for bit (NaN aside: any NaN
    becomes the quiet NaN with sign 0 and no payload); -0.0, nan and the
    infinities are kept. For an integer or bool dtype it is not cast:
    unlike NumPy, which wraps 256 to 0 in uint8 and truncates 2.5 to 2,
    a value the dtype cannot hold exactly (out of its range, a fraction,
    nan, for bool a number other than 0 and 1) is the server's
    INVALID_ARGUMENT naming pad.value; every 64-bit integer is exact.

    A read-only array (a new copy), or a RemoteTensor with `keep`; x may be
    a RemoteTensor, read on the server (one Run). An empty result (a zero
    size left unpadded) is an empty read-only array made here without a
    call; with `keep` it is sent, and the server refuses its zero sizes, as
    it does an empty x padded into a result with elements. NumPy's
    ValueError for extending an empty axis in a mode other than constant is
    raised here. A 0-d x (which NumPy copies) is the server's
    INVALID_ARGUMENT: Pad takes rank 1..8; an output of more than 2^32 - 1
    elements is RESOURCE_EXHAUSTED. `backend`, `device_index`, `progress`
    and `keep` as for `run`."""
    x = _operand(x)
    shape = tuple(x.shape)
    pairs = pad_pairs(pad_width, len(shape))
    mode = pad_mode(mode)
    attrs: dict[str, Any] = {
        "start_padding": [before for before, _ in pairs],
        "end_padding": [after for _, after in pairs],
        "mode": mode,
    }
    if mode == "constant":
        attrs["value"] = constant_text(constant_values, x.dtype, len(shape))
    else:
        for axis, (n, (before, after)) in enumerate(zip(shape, pairs, strict=True)):
            if n == 0 and (before or after):
                raise ValueError(  # NumPy's
                    f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'"
                )
    out = tuple(n + before + after for n, (before, after) in zip(shape, pairs, strict=True))
    if not math.prod(out) and not keep:
        return _nothing_to_move(out, numpy_dtype(wire_dtype(x.dtype)), progress)
    return (
        yield from _one_output(
            client, "pad", {"input": x}, attrs, None, backend, device_index, progress, keep
        )
    )
