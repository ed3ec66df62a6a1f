"""Gather and GatherElements with NumPy's conventions (numpy.take,
numpy.take_along_axis), beside the other operators' methods
(tensorop_client._core.operators, whose helpers they share): plans over
`run`'s, or `chain`'s where a RemoteTensor needs a Reshape, an Expand or a
StridedSlice step around the gather."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from tensorop_client._core.chains import Step
from tensorop_client._core.handles import _Remote
from tensorop_client._core.indexing import normalize_axis, strided_slice_key
from tensorop_client._core.operators import Operand, _empty, _one_output, _operand
from tensorop_client._core.plans import Plan, Planning, chain
from tensorop_client._core.progress import ProgressFn

# The index dtypes Gather and GatherElements take, sent as they are; other
# integer arrays are widened to int64 here (NumPy reads every index as intp).
_INDEX_DTYPES = (np.int32, np.int64, np.uint32, np.uint64)


def _indices(indices: Operand) -> np.ndarray | _Remote:
    """Indices as the gathers send them: a RemoteTensor as it is (its dtype
    the server's to judge), anything else as an integer array: an empty
    list as int64 (NumPy's intp, as numpy.take reads []), integers of 1 or
    2 bytes widened to int64 (a copy); TypeError for booleans and
    non-integers, before anything is sent."""
    if isinstance(indices, _Remote):
        return indices
    array = np.asarray(indices)
    if not isinstance(indices, np.ndarray) and array.size == 0 and array.dtype.kind == "f":
        return array.astype(np.int64)
    if array.dtype.kind not in "iu":
        mask = " (a boolean mask selects with x[mask], not as indices)"
        raise TypeError(
            f"indices must be integers, not {array.dtype}{mask if array.dtype.kind == 'b' else ''}"
        )
    if array.dtype.type not in _INDEX_DTYPES:
        return array.astype(np.int64)
    return array


def _flat(x: np.ndarray | _Remote, what: str, steps: list[Step]) -> Any:
    """x in row-major order as one dimension (numpy's axis=None): an array's
    np.ravel (a view where its strides allow), a RemoteTensor of rank 2 or
    more through a Reshape step to [-1] appended to `steps` (one of rank 1
    as it is); a 0-d RemoteTensor, which Reshape does not take (rank 1..8),
    raises ValueError before anything is sent."""
    if isinstance(x, np.ndarray):
        return x.reshape(-1)
    if len(x.shape) == 1:
        return x
    if not x.shape:
        raise ValueError(
            f"{what}: a 0-d RemoteTensor cannot be flattened on the server (Reshape takes "
            "rank 1..8): fetch it and pass the array"
        )
    flat = Step("reshape", {"input": x}, {"sizes": [-1]})
    steps.append(flat)
    return flat


def _last_output(
    client: Planning[Any],
    steps: list[Step],
    last: Step,
    backend: str,
    device_index: int | None,
    progress: ProgressFn | None,
    keep: bool,
) -> Plan[Any]:
    """`last`'s one output: one Run when nothing comes before it (its inputs
    arrays or RemoteTensors), else one RunChain of `steps` then `last`."""
    if not steps:
        return (
            yield from _one_output(
                client, last.op, dict(last.inputs), dict(last.attrs or {}), None, backend,
                device_index, progress, keep,
            )
        )  # fmt: skip
    result = yield from chain(
        client, [*steps, last], [last.output(0)], backend, device_index, progress=progress,
        keep=keep,
    )  # fmt: skip
    return result.outputs[0]


def _nothing_to_move(
    shape: tuple[int, ...], dtype: np.dtype, progress: ProgressFn | None
) -> np.ndarray:
    """An empty result, made here: the server's tensors have no zero sizes."""
    if progress is not None:
        progress(0, 0)
    return _empty(shape, dtype)


def _take(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int | None,
    what: str,
    keep: bool,
    backend: str,
    device_index: int | None,
    progress: ProgressFn | None,
) -> Plan[Any]:
    """take's and gather's one plan (their docs say what it does)."""
    x = _operand(x)
    indices = _indices(indices)
    steps: list[Step] = []
    source: Any = x
    shape = tuple(x.shape)
    if axis is None or not shape:  # flattened; NumPy takes a 0-d x as x.reshape(1)
        if axis is not None:
            normalize_axis(axis, 1)
        source = _flat(x, what, steps)
        shape = (math.prod(shape),)
        axis = 0
    axis = normalize_axis(axis, len(shape))
    wanted = tuple(indices.shape)
    if not wanted:  # NumPy's scalar index: Gather's indices of sizes [1], the axis dropped
        if isinstance(indices, _Remote):
            raise ValueError(
                f"{what}: 0-d RemoteTensor indices cannot become Gather's indices of sizes [1] "
                "on the server (Reshape takes rank 1..8): fetch them and pass the array"
            )
        indices = indices.reshape(1)
    gathered_shape = (*shape[:axis], *indices.shape, *shape[axis + 1 :])
    out = (*shape[:axis], *wanted, *shape[axis + 1 :])
    if not keep and not math.prod(out):
        return _nothing_to_move(out, x.dtype, progress)
    gathered = Step("gather", {"input": source, "indices": indices}, {"axis": axis})
    if wanted:
        return (
            yield from _last_output(client, steps, gathered, backend, device_index, progress, keep)
        )
    if keep:  # the axis of size 1 dropped on the server: a StridedSlice of its one index
        key = (builtins.slice(None),) * axis + (0,)
        shrink = Step(
            "strided_slice", {"input": gathered}, strided_slice_key(key, gathered_shape).attrs
        )
        return (
            yield from _last_output(
                client, [*steps, gathered], shrink, backend, device_index, progress, keep
            )
        )
    result = yield from _last_output(client, steps, gathered, backend, device_index, progress, keep)
    return result.reshape(out)  # the axis of size 1 dropped: a view


def take(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int | None = None,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.take(x, indices, axis) on the server (ONNX Gather): the
    elements of x at `indices` along `axis`, shape x.shape[:axis] +
    indices.shape + x.shape[axis + 1:]. `axis` None (the default, as
    NumPy's) takes from x flattened in row-major order (an array's
    np.ravel, made here; a RemoteTensor's a Reshape step before the Gather
    in one RunChain, whose errors then name steps[1].gather); a negative
    axis counts from the end (AxisError outside the rank, before anything
    is sent); a 0-d x is taken as x.reshape(1), as NumPy takes it.

    `indices`: an integer, a list or an integer array (int32, int64,
    uint32 and uint64 sent as they are, smaller integers widened to int64;
    a list as NumPy's int64), or a RemoteTensor; negative indices count
    from the end of the axis. Booleans and non-integers raise TypeError
    here (NumPy's take would read booleans as 0 and 1). A 0-d index (an
    integer) removes the axis, as in NumPy: it goes as indices of sizes
    [1] and the result drops that dimension (an array's: a view; with
    `keep`, a StridedSlice step after the Gather, in one RunChain); 0-d
    RemoteTensor indices raise ValueError (fetch them). An index outside
    [-n, n) is the server's INVALID_ARGUMENT naming the first one
    (`indices[1] = 4 is outside [-4, 4) for input.sizes[0] = 4
    (gather.axis = 0)`), where NumPy raises IndexError; numpy.take's `out`
    and `mode` are not taken (mode "raise" only). An empty result (no
    indices, or a 0 in x's other sizes) is an empty read-only array made
    here without a call; with `keep` it is sent, and the server refuses
    its zero sizes. A result of rank over 8 is INVALID_ARGUMENT, one of
    more than 2^32 - 1 elements RESOURCE_EXHAUSTED. A read-only array (a
    new copy), or a RemoteTensor with `keep`. `backend`, `device_index`,
    `progress` and `keep` as for `run`."""
    return (
        yield from _take(
            client, x, indices, axis, "take", keep, backend, device_index, progress
        )
    )  # fmt: skip


def gather(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """ONNX Gather (DML_GATHER): take(x, indices, axis) with the operator's
    name and its default, axis 0; `axis` is an integer (None raises
    TypeError: take(x, indices) flattens x), negative counting from the
    end as in NumPy (the server itself takes [0, rank) only). As ONNX's, a
    0-d index removes the axis. Everything else as take: the same plan."""
    if axis is None:
        raise TypeError("gather: axis must be an integer (take(x, indices) flattens x)")
    return (
        yield from _take(
            client, x, indices, axis, "gather", keep, backend, device_index, progress
        )
    )  # fmt: skip


def _broadcast(operand: Any, shape: tuple[int, ...], to: tuple[int, ...], steps: list[Step]) -> Any:
    """`operand` (of `shape`) broadcast to `to`: as it is when equal, an
    array as np.broadcast_to's view (sent with stride 0, one copy of its
    elements), a RemoteTensor through an Expand step appended to `steps`."""
    if shape == to:
        return operand
    if isinstance(operand, np.ndarray):
        return np.broadcast_to(operand, to)
    expanded = Step("expand", {"input": operand}, {"sizes": list(to)})
    steps.append(expanded)
    return expanded


def _take_along_axis(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int | None,
    what: str,
    keep: bool,
    backend: str,
    device_index: int | None,
    progress: ProgressFn | None,
) -> Plan[Any]:
    """take_along_axis's and gather_elements' one plan (their docs say what
    it does)."""
    x = _operand(x)
    indices = _indices(indices)
    steps: list[Step] = []
    source: Any = x
    shape = tuple(x.shape)
    wanted = tuple(indices.shape)
    if axis is None:
        if len(wanted) != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")  # NumPy's
        source = _flat(x, what, steps)
        shape = (math.prod(shape),)
        axis = 0
    axis = normalize_axis(axis, len(shape))
    if len(wanted) != len(shape):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")  # NumPy's
    out: list[int] = []
    for d, (n, k) in enumerate(zip(shape, wanted, strict=True)):
        if d == axis or n == k or n == 1:
            out.append(k)
        elif k == 1:
            out.append(n)
        else:
            raise IndexError(  # NumPy's IndexError, naming the shapes given
                f"shape mismatch: indices of shape {wanted} do not broadcast against x of "
                f"shape {shape} in dimension {d} (only axis {axis} may differ)"
            )
    sizes = tuple(out)
    if not keep and not math.prod(sizes):
        return _nothing_to_move(sizes, x.dtype, progress)
    # Sizes 1 broadcast, as NumPy does, where the other has more.
    source = _broadcast(source, shape, (*sizes[:axis], shape[axis], *sizes[axis + 1 :]), steps)
    indices = _broadcast(indices, wanted, sizes, steps)
    gathered = Step("gather_elements", {"input": source, "indices": indices}, {"axis": axis})
    return (yield from _last_output(client, steps, gathered, backend, device_index, progress, keep))


def take_along_axis(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int | None = -1,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.take_along_axis(x, indices, axis) on the server (ONNX
    GatherElements): output[c] = x[c with c[axis] = indices[c]], for
    indices of x's rank (ValueError otherwise, NumPy's) and any size >= 1
    along `axis`. `axis` defaults to -1 (NumPy 2.3's default) and may be
    negative (AxisError outside the rank); None takes along x flattened in
    row-major order, for 1-d indices (ValueError otherwise, NumPy's): an
    array's np.ravel, a RemoteTensor's a Reshape step before the
    GatherElements in one RunChain.

    As NumPy's, the two broadcast against each other outside `axis` (the
    server requires equal sizes there): a size 1 in either takes the
    other's, by np.broadcast_to for an array (a view, sent with stride 0)
    and by an Expand step before the GatherElements for a RemoteTensor (in
    one RunChain, whose errors then name the gather_elements step); other
    sizes that differ raise IndexError (NumPy's) naming both shapes, before
    anything is sent. `indices` as for take (integers, a list, an integer
    array, or a RemoteTensor; booleans and non-integers TypeError; negative
    indices from the end; an index outside [-n, n) the server's
    INVALID_ARGUMENT naming it). An empty result is made here without a
    call (with `keep` it is sent, and the server refuses its zero sizes).
    A read-only array (a new copy), or a RemoteTensor with `keep`.
    `backend`, `device_index`, `progress` and `keep` as for `run`."""
    return (
        yield from _take_along_axis(
            client, x, indices, axis, "take_along_axis", keep, backend, device_index, progress
        )
    )  # fmt: skip


def gather_elements(
    client: Planning[Any],
    x: Operand,
    indices: Operand,
    axis: int = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """ONNX GatherElements (DML_GATHER_ELEMENTS), the inverse of
    scatter_elements: take_along_axis(x, indices, axis) with the
    operator's name and its default, axis 0; `axis` is an integer (None
    raises TypeError: take_along_axis flattens x with it), negative
    counting from the end as in NumPy (the server itself takes [0, rank)
    only). Indices broadcast against x outside `axis` as NumPy's do.
    Everything else as take_along_axis: the same plan."""
    if axis is None:
        raise TypeError(
            "gather_elements: axis must be an integer (take_along_axis(x, indices, None) "
            "flattens x)"
        )
    return (
        yield from _take_along_axis(
            client, x, indices, axis, "gather_elements", keep, backend, device_index, progress
        )
    )  # fmt: skip


# Last: from here on `slice` is this plan, not the builtin (the operator's
# name, as the other methods have theirs).
