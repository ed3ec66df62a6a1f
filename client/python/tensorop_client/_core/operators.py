"""One method per operator, beside `run`: each takes arrays or RemoteTensors
with NumPy's conventions where NumPy has the operation (numpy.split,
`x[key]`, numpy.transpose, numpy.reshape, numpy.broadcast_to, numpy.tile;
numpy.take and numpy.take_along_axis in gathers.py, numpy.concatenate in
joins.py), computes the outputs
itself, and is a plan over `run`'s (or, for the splits one Split cannot
make and a tile of a RemoteTensor that needs leading dimensions, `chain`'s),
so the choice of call, the
chunking, `keep` and progress are run's. Results are what `run` returns: a
read-only array per output, or a RemoteTensor with `keep`."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorop_client._core.chains import Step
from tensorop_client._core.handles import _Remote
from tensorop_client._core.indexing import (
    normalize_axis,
    range_attrs,
    split_parts,
    strided_slice_key,
    tiles,
)
from tensorop_client._core.plans import Plan, Planning, chain, run
from tensorop_client._core.progress import ProgressFn
from tensorop_client.tensors import wire_dtype

# The largest rank Split takes (docs/operators.md, "Limits"); StridedSlice takes 32.
_MAX_SPLIT_RANK = 8

Operand = npt.ArrayLike | _Remote


def _operand(x: Operand) -> np.ndarray | _Remote:
    """An input whose shape and dtype can be read: a RemoteTensor as it is,
    anything else as numpy sees it (np.asarray: arrays, views and all, as
    they are), TypeError for a dtype no tensor has, even where nothing is
    sent."""
    if isinstance(x, _Remote):
        return x
    array = np.asarray(x)
    wire_dtype(array.dtype)
    return array


def _one_output(
    client: Planning[Any],
    op: str,
    inputs: dict[str, Any],
    attrs: dict[str, Any],
    outputs: list[tuple[int, ...]] | None,
    backend: str,
    device_index: int | None,
    progress: ProgressFn | None,
    keep: bool,
) -> Plan[Any]:
    """`run`'s one output (an array, or a RemoteTensor with `keep`)."""
    result = yield from run(
        client, op, inputs, attrs, outputs, backend, device_index, progress=progress, keep=keep
    )
    return result.outputs[0]


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An empty part made here, read-only as the server's outputs are."""
    part = np.empty(shape, dtype)
    part.flags.writeable = False
    return part


def split(
    client: Planning[Any],
    x: Operand,
    indices_or_sections: int | Sequence[int] | npt.NDArray[np.integer],
    axis: int = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[list[Any]]:
    """numpy.split(x, indices_or_sections, axis) on the server: a list of
    arrays (RemoteTensors with `keep`), parts as NumPy makes them. An
    integer N: N equal sections (ValueError when N does not divide the
    axis); indices: the parts between them, clipped as x[a:b] is, empty
    ones included. `axis` may be negative (AxisError, a ValueError and an
    IndexError, outside the rank).

    Without `keep`, empty parts are never sent (Split refuses them): each
    is an empty read-only array of the input's dtype made here; an input
    without elements makes no call (`progress` then reports (0, 0) once).
    One Split makes the other parts when its rules allow
    (docs/operators.md): they follow one another, and the input has rank
    8 or less. Otherwise (indices that decrease, so that parts overlap; a
    rank over 8), and for empty parts with `keep` (empty RemoteTensors, so
    that every part can be fetched), one RunChain makes each part with a
    StridedSlice, reading the input once. `backend`, `device_index`,
    `progress` and `keep` as for `run`."""
    x = _operand(x)
    shape = tuple(x.shape)
    axis = normalize_axis(axis, len(shape))
    parts = split_parts(shape[axis], indices_or_sections)
    shapes = [(*shape[:axis], stop - start, *shape[axis + 1 :]) for start, stop in parts]
    made = [k for k, part in enumerate(shapes) if math.prod(part)]  # non-empty parts
    if not keep and not made:  # nothing to move: no call, one report
        if progress is not None:
            progress(0, 0)
        return [_empty(part, x.dtype) for part in shapes]
    one_split = len(shape) <= _MAX_SPLIT_RANK and bool(made) and tiles(parts, shape[axis])
    if one_split and (not keep or len(made) == len(parts)):
        result = yield from run(
            client,
            "split",
            {"input": x},
            {"axis": axis},
            [shapes[k] for k in made],
            backend,
            device_index,
            progress=progress,
            keep=keep,
        )
        return _in_order(shapes, dict(zip(made, result.outputs, strict=True)), x.dtype)
    wanted = range(len(parts)) if keep else made
    steps: list[Step] = []
    source: Any = x
    if not isinstance(x, _Remote) and len(wanted) > 1:
        steps.append(Step("strided_slice", {"input": x}, {"begin": [], "end": []}))  # a copy
        source = steps[0]
    pieces = [
        Step("strided_slice", {"input": source}, range_attrs(axis, *parts[k])) for k in wanted
    ]
    result = yield from chain(
        client,
        [*steps, *pieces],
        [piece.output(0) for piece in pieces],
        backend,
        device_index,
        progress=progress,
        keep=keep,
    )
    return _in_order(shapes, dict(zip(wanted, result.outputs, strict=True)), x.dtype)


def _in_order(shapes: list[tuple[int, ...]], made: dict[int, Any], dtype: np.dtype) -> list[Any]:
    """Every part in order: those the server made, and empty ones made here."""
    return [made[k] if k in made else _empty(part, dtype) for k, part in enumerate(shapes)]


def strided_slice(
    client: Planning[Any],
    x: Operand,
    key: Any,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """`x[key]` on the server, NumPy's basic indexing: `key` is an integer,
    a slice, None (np.newaxis), Ellipsis or a tuple of them, as
    `np.s_[1:3, ::-2, None, ...]` makes. The result equals x[key], shape
    and bits: an array (a copy, read-only; where NumPy gives a scalar, a
    0-d array), or a RemoteTensor with `keep`. Keys NumPy refuses raise
    what NumPy raises (IndexError, ValueError) before anything is sent;
    advanced indexing (arrays, lists, booleans) raises TypeError.

    The key becomes StridedSlice's begin, end, stride and masks (one step
    per item: an integer shrinks its axis, None adds one, Ellipsis stands
    for the dimensions no item names); bounds are sent as NumPy resolves
    them, so the result is NumPy's even where the operator's clamping
    differs. `backend`, `device_index`, `progress` and `keep` as for
    `run`."""
    x = _operand(x)
    mapped = strided_slice_key(key, tuple(x.shape))
    # The shape goes as the output's sizes: the server checks it is what it derives.
    outputs = [mapped.shape] if mapped.shape else None
    return (
        yield from _one_output(
            client, "strided_slice", {"input": x}, mapped.attrs, outputs, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def scatter_elements(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    updates: Operand,
    axis: int = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """ScatterElements: a copy of `x` with `updates` written where `indices`
    point along `axis` (numpy.put_along_axis's writes, into a new array;
    the last of two updates to one element wins). `axis` may be negative
    (AxisError outside the rank); `indices` negative count from the end of
    the axis. `updates` that is not an array (a list, a scalar) becomes
    one of x's dtype; an array that is not of indices' shape is broadcast
    to it where NumPy can (sent as a broadcast view, one copy of its
    elements). The server checks the rest (INVALID_ARGUMENT naming the
    first bad index). `backend`, `device_index`, `progress` and `keep` as
    for `run`."""
    x = _operand(x)
    indices = _operand(indices)
    if not isinstance(updates, _Remote | np.ndarray):
        updates = np.asarray(updates, dtype=x.dtype)
    if isinstance(updates, np.ndarray) and updates.shape != tuple(indices.shape):
        try:
            updates = np.broadcast_to(updates, tuple(indices.shape))
        except ValueError:
            pass  # the server names the sizes that differ
    axis = normalize_axis(axis, len(x.shape))
    inputs = {"input": x, "indices": indices, "updates": updates}
    return (
        yield from _one_output(
            client, "scatter_elements", inputs, {"axis": axis}, None, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def _shape(shape: int | Sequence[int], name: str) -> list[int]:
    """A shape as NumPy takes one: an integer or a sequence of integers (a
    list, a tuple, an integer array), as a list; TypeError for anything else,
    before anything is sent."""
    value: Any = shape
    try:
        return [operator.index(value)]
    except TypeError:
        pass
    try:
        return [operator.index(n) for n in value]
    except TypeError:
        raise TypeError(
            f"{name} must be an integer or a sequence of integers, not {shape!r}"
        ) from None


def transpose(
    client: Planning[Any],
    x: Operand,
    axes: Sequence[int] | None = None,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.transpose(x, axes) on the server (ONNX Transpose): output
    dimension i is x's dimension axes[i]; None (the default) reverses the
    dimensions. A read-only array (a copy, where NumPy gives a view), or a
    RemoteTensor with `keep` (of a RemoteTensor: a view of its bytes on the
    server, no copy). Axes may be negative (counted from the end, as NumPy; an
    axis outside [-rank, rank) raises NumPy's AxisError before anything is
    sent, and so does an empty `axes` for an input with dimensions, NumPy's
    ValueError, since an empty perm means reversed); the server checks the
    rest: axes that are not a permutation of the dimensions (one repeated,
    too few or too many) are INVALID_ARGUMENT naming transpose.perm.
    `backend`, `device_index`, `progress` and `keep` as for `run`."""
    x = _operand(x)
    rank = len(x.shape)
    perm = [] if axes is None else [normalize_axis(axis, rank) for axis in axes]
    if axes is not None and not perm and rank:
        raise ValueError("axes don't match array")  # NumPy's words
    return (
        yield from _one_output(
            client, "transpose", {"input": x}, {"perm": perm}, None, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def reshape(
    client: Planning[Any],
    x: Operand,
    shape: int | Sequence[int],
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.reshape(x, shape) on the server (ONNX Reshape): x's elements in
    row-major order (whatever x's strides: order="C") with sizes `shape`,
    an integer or a sequence of integers of which one may be -1 (the rest of
    the element count). A read-only array (a copy), or a RemoteTensor with
    `keep` (of a RemoteTensor whose strides allow it, NumPy's rule: a view
    of its bytes on the server). The server checks the shape: a second -1, a
    size below 1 (the operator's sizes are >= 1, so NumPy's empty arrays and
    its shape () are refused), a count that differs from x's, more than 8
    dimensions are INVALID_ARGUMENT naming reshape.sizes. `backend`,
    `device_index`, `progress` and `keep` as for `run`."""
    x = _operand(x)
    sizes = _shape(shape, "shape")
    return (
        yield from _one_output(
            client, "reshape", {"input": x}, {"sizes": sizes}, None, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def expand(
    client: Planning[Any],
    x: Operand,
    shape: int | Sequence[int],
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """ONNX Expand: x broadcast with `shape` (an integer or a sequence of
    integers), the two aligned at their last entry, the shorter padded with
    leading 1s, and at each position the larger size: where x has 1 the
    size is shape's, and, unlike numpy.broadcast_to, where `shape` has 1 (or
    no entry) the size stays x's. So the result's shape is
    np.broadcast_shapes(x.shape, shape), not always `shape`; for NumPy's
    rule, broadcast_to. A read-only array (a packed copy), or a RemoteTensor
    with `keep` (of a RemoteTensor: a view of its bytes, stride 0 where it
    broadcasts). The server checks the shape: sizes that differ and are
    both other than 1, a size below 1, more than 8 entries are
    INVALID_ARGUMENT naming expand.sizes, an output over 2^32 - 1 elements
    RESOURCE_EXHAUSTED. `backend`, `device_index`, `progress` and `keep`
    as for `run`."""
    x = _operand(x)
    sizes = _shape(shape, "shape")
    return (
        yield from _one_output(
            client, "expand", {"input": x}, {"sizes": sizes}, None, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def broadcast_to(
    client: Planning[Any],
    x: Operand,
    shape: int | Sequence[int],
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.broadcast_to(x, shape) on the server: an Expand to `shape` (an
    integer or a sequence of integers) whose result has exactly that shape.
    NumPy's stricter rule is checked here, before anything is sent: where
    numpy.broadcast_to refuses (`shape` shorter than x's rank, or a 1 or
    another size where x's size is not 1, which ONNX Expand would take),
    NumPy's own ValueError is raised. `shape` also goes as the output's
    sizes, which the server checks are the ones it derives. A packed copy,
    not a read-only view: a read-only array, or a RemoteTensor with `keep`.
    The operator's sizes are >= 1: a 0 in `shape` (NumPy's empty result) is
    the server's INVALID_ARGUMENT naming expand.sizes. `backend`,
    `device_index`, `progress` and `keep` as for `run`."""
    x = _operand(x)
    sizes = _shape(shape, "shape")
    # numpy.broadcast_to itself judges the shapes, on a stand-in of x's shape
    # with no elements behind it (stride 0 everywhere: one byte).
    stand_in = np.lib.stride_tricks.as_strided(
        np.zeros(1, np.uint8), shape=tuple(x.shape), strides=(0,) * len(x.shape)
    )
    np.broadcast_to(stand_in, tuple(sizes))
    return (
        yield from _one_output(
            client, "expand", {"input": x}, {"sizes": sizes}, [tuple(sizes)], backend,
            device_index, progress, keep,
        )
    )  # fmt: skip


def tile(
    client: Planning[Any],
    x: Operand,
    reps: int | Sequence[int],
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.tile(x, reps) on the server (ONNX Tile): x repeated reps[i]
    times along each dimension i. `reps` is an integer or a sequence of
    integers; as in NumPy, one shorter than x's rank is padded with leading
    1s (the leading dimensions are not repeated), and one longer makes x
    take leading dimensions of size 1, so the result has rank max(len(reps),
    x.ndim) and shape x.shape * reps, both so aligned. An array given those
    dimensions is a view of it, made here; a RemoteTensor gets them from a
    Reshape step before the Tile in one RunChain (its errors then name
    steps[1].tile), and a 0-d RemoteTensor, which Reshape does not take
    (rank 1..8), raises ValueError before anything is sent. A read-only
    array (a new copy), or a RemoteTensor with `keep`. The server checks
    the rest: a repeat below 1 (NumPy's 0, an empty result, included) is
    INVALID_ARGUMENT naming tile.repeats[i], i counted in the padded
    `reps`; a rank over 8, or a 0-d x with an empty `reps`, INVALID_ARGUMENT;
    an output over 2^32 - 1 elements RESOURCE_EXHAUSTED. `backend`,
    `device_index`, `progress` and `keep` as for `run`."""
    x = _operand(x)
    repeats = _shape(reps, "reps")
    shape = tuple(x.shape)
    rank = max(len(repeats), len(shape))
    repeats = [1] * (rank - len(repeats)) + repeats
    leading = (1,) * (rank - len(shape))
    if leading and isinstance(x, _Remote):
        if not shape:
            raise ValueError(
                f"tile: reps {repeats} give a 0-d RemoteTensor leading dimensions, which "
                "the server's Reshape cannot (it takes rank 1..8): fetch it and tile the array"
            )
        # Its leading 1s from a Reshape (a view of its bytes where the strides
        # allow), read by the Tile in the same call.
        padded = Step("reshape", {"input": x}, {"sizes": [*leading, *shape]})
        tiled = Step("tile", {"input": padded}, {"repeats": repeats})
        result = yield from chain(
            client, [padded, tiled], [tiled.output(0)], backend, device_index,
            progress=progress, keep=keep,
        )  # fmt: skip
        return result.outputs[0]
    if leading:
        assert isinstance(x, np.ndarray)
        x = x.reshape(leading + shape)  # leading 1s: always a view
    return (
        yield from _one_output(
            client, "tile", {"input": x}, {"repeats": repeats}, None, backend, device_index,
            progress, keep,
        )
    )  # fmt: skip


def slice(
    client: Planning[Any],
    x: Operand,
    offsets: Sequence[int],
    window_sizes: Sequence[int],
    window_strides: Sequence[int] | None = None,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """Slice (DML_SLICE1) in DirectML's window form: the window of
    `window_sizes` at `offsets`, walked with `window_strides` (default: all
    1; a negative one walks it backwards), whole: sizes 1 +
    (window_sizes[i] - 1) // |window_strides[i]|. For NumPy's `x[key]`,
    strided_slice. An array, or a RemoteTensor with `keep`; `backend`,
    `device_index`, `progress` as for `run`."""
    strides = [1] * len(window_sizes) if window_strides is None else window_strides
    attrs = {"offsets": offsets, "window_sizes": window_sizes, "window_strides": strides}
    return (
        yield from _one_output(
            client, "slice", {"input": x}, attrs, None, backend, device_index, progress, keep
        )
    )
