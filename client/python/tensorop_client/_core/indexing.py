"""NumPy's conventions for the operators, without I/O: an axis counted from
the end, numpy.split's indices or sections as the parts of an axis, and a
basic-indexing key (`x[key]`: integers, slices, None, Ellipsis) as
StridedSlice's attributes, with the shape `x[key]` has. Arguments NumPy
refuses raise what NumPy raises (IndexError, ValueError, TypeError) before
anything is sent."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def normalize_axis(axis: int, rank: int) -> int:
    """`axis` in [0, rank), a negative one counting from the end; numpy's
    AxisError (a ValueError and an IndexError) outside [-rank, rank)."""
    try:
        value = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, not {type(axis).__name__}") from None
    if not -rank <= value < rank:
        raise np.exceptions.AxisError(value, rank)
    return value % rank


def _sections(value: Any) -> int:
    """A number of sections: an integer, or a float holding one (as numpy.split)."""
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, float | np.floating):
        if not float(value).is_integer():
            raise ValueError("array split does not result in an equal division")
        return int(value)
    raise TypeError(
        "indices_or_sections must be an integer or a sequence of integers, not "
        f"{type(value).__name__}"
    )


def split_parts(n: int, indices_or_sections: Any) -> list[tuple[int, int]]:
    """numpy.split's parts of an axis of size `n`, as (start, stop) with
    start <= stop: N equal sections for an integer N (ValueError when N
    does not divide n), else the ranges between the indices, each taken as
    the slice x[a:b] is (negative indices count from the end, bounds clip,
    a part may be empty, and parts overlap where the indices decrease)."""
    try:
        len(indices_or_sections)
    except TypeError:
        sections = _sections(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.") from None
        if n % sections:
            raise ValueError("array split does not result in an equal division") from None
        each = n // sections
        return [(k * each, (k + 1) * each) for k in range(sections)]
    points = [0, *indices_or_sections, n]
    parts = []
    for a, b in zip(points, points[1:], strict=False):
        start, stop, _ = slice(a, b).indices(n)  # TypeError, as numpy, for non-integers
        parts.append((start, max(start, stop)))
    return parts


def tiles(parts: Sequence[tuple[int, int]], n: int) -> bool:
    """Whether the non-empty parts follow one another from 0 to n, as one
    Split's outputs do."""
    covered = 0
    for start, stop in parts:
        if start == stop:
            continue
        if start != covered:
            return False
        covered = stop
    return covered == n


def range_attrs(axis: int, start: int, stop: int) -> dict[str, list[int]]:
    """StridedSlice's attributes for x[..., start:stop] along `axis` (every
    other dimension whole); start == stop: an empty range."""
    return {
        "begin": [0] * axis + [start],
        "end": [0] * axis + [stop],
        "begin_mask": [1] * axis + [0],
        "end_mask": [1] * axis + [0],
    }


@dataclass(frozen=True)
class StridedKey:
    """A basic-indexing key as StridedSlice's attributes, and the shape of
    the result (`x[key].shape`)."""

    attrs: dict[str, list[int]]
    shape: tuple[int, ...]


_INVALID_INDEX = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)


def _kind(item: Any) -> str:
    """One key item's kind: "slice", "int", "new" (None) or "ellipsis".
    TypeError for NumPy's advanced indexing (arrays, lists, booleans), which
    no strided slice does; IndexError, as NumPy, for what is no index."""
    if item is None:
        return "new"
    if item is Ellipsis:
        return "ellipsis"
    if isinstance(item, slice):
        return "slice"
    advanced = isinstance(item, bool | np.bool_ | list | tuple) or (
        isinstance(item, np.ndarray) and (item.ndim > 0 or item.dtype == np.bool_)
    )
    if advanced:
        raise TypeError(
            "strided_slice takes basic indexing (integers, slices, None, ...): "
            f"a {type(item).__name__} index is advanced indexing, which it does not do"
        )
    try:
        operator.index(item)
    except TypeError:
        raise IndexError(_INVALID_INDEX) from None
    return "int"


def strided_slice_key(key: Any, shape: Sequence[int]) -> StridedKey:
    """StridedSlice's attributes for `x[key]` on an array of `shape` (NumPy's
    basic indexing), with its result's shape; IndexError, ValueError or
    TypeError where NumPy raises them.

    Each key item is one step. Slices are sent as NumPy resolves them
    (slice.indices: negative bounds counted from the end, clipped), with
    begin_mask and end_mask for omitted bounds, and end_mask for a reversed
    range that runs past element 0; an empty range is sent as begin == end.
    So the server's one departure from NumPy (a reversed range whose begin
    is below -n takes element 0) never arises."""
    items = key if isinstance(key, tuple) else (key,)
    kinds = [_kind(item) for item in items]
    if kinds.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    rank = len(shape)
    consumed = sum(kind in ("int", "slice") for kind in kinds)
    if consumed > rank:
        raise IndexError(
            f"too many indices for array: array is {rank}-dimensional, but {consumed} were indexed"
        )
    names = ("begin", "end", "stride", "begin_mask", "end_mask")
    masks = ("new_axis_mask", "shrink_axis_mask", "ellipsis_mask")
    attrs: dict[str, list[int]] = {name: [] for name in (*names, *masks)}
    out: list[int] = []
    dim = 0  # the input dimension the next item indexes

    def step(begin: int, end: int, stride: int, begin_mask: int, end_mask: int, mask: str) -> None:
        for name, value in zip(names, (begin, end, stride, begin_mask, end_mask), strict=True):
            attrs[name].append(value)
        for name in masks:
            attrs[name].append(int(name == mask))

    for item, kind in zip(items, kinds, strict=True):
        if kind == "new":
            step(0, 0, 1, 0, 0, "new_axis_mask")
            out.append(1)
        elif kind == "ellipsis":
            step(0, 0, 1, 0, 0, "ellipsis_mask")
            whole = rank - consumed
            out.extend(shape[dim : dim + whole])
            dim += whole
        elif kind == "int":
            n, index = shape[dim], operator.index(item)
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of bounds for axis {dim} with size {n}")
            step(index % n, index % n + 1, 1, 0, 0, "shrink_axis_mask")
            dim += 1
        else:
            start, stop, stride = item.indices(shape[dim])  # ValueError for a step of 0
            count = len(range(start, stop, stride))
            if count == 0:
                step(0, 0, stride, 0, 0, "")
            else:
                begin_mask = item.start is None
                end_mask = item.stop is None or stop < 0  # a reversed range past element 0
                step(
                    0 if begin_mask else start,
                    0 if end_mask else stop,
                    stride,
                    int(begin_mask),
                    int(end_mask),
                    "",
                )
            out.append(count)
            dim += 1
    out.extend(shape[dim:])
    return StridedKey(attrs, tuple(out))
