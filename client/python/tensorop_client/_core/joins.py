"""Join with NumPy's conventions (numpy.concatenate), beside the other
operators' methods (tensorop_client._core.operators and gathers, whose
helpers it shares): a plan over `run`'s, or `chain`'s where RemoteTensors
are flattened by Reshape steps before the join (axis=None)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorop_client._core.chains import Step, StepRef
from tensorop_client._core.gathers import _flat, _last_output, _nothing_to_move
from tensorop_client._core.handles import _Remote
from tensorop_client._core.indexing import normalize_axis
from tensorop_client._core.operators import Operand, _operand
from tensorop_client._core.plans import Plan, Planning
from tensorop_client._core.progress import ProgressFn
from tensorop_client.tensors import numpy_dtype, wire_dtype


def _operands(arrays: Sequence[Operand] | np.ndarray, what: str) -> list[np.ndarray | _Remote]:
    """The arrays to join, each as _operand makes it (a RemoteTensor as it
    is, anything else through np.asarray); TypeError, before anything is
    sent, for `arrays` that is no sequence (NumPy's rule: a list, a tuple
    or an array, whose rows are then the arrays) and for a chain step's
    output among them (a chain joins those with a Step of its own);
    ValueError, NumPy's, for an empty one."""
    if isinstance(arrays, _Remote) or not isinstance(arrays, Sequence | np.ndarray):
        raise TypeError(
            f"{what}: arrays must be a sequence (a list or a tuple) of arrays or RemoteTensors, "
            f"not {type(arrays).__name__}"
        )
    operands: list[np.ndarray | _Remote] = []
    for k, array in enumerate(arrays):
        if isinstance(array, Step | StepRef):
            raise TypeError(
                f"{what}: arrays[{k}] is a chain step's output, which only a chain reads: join "
                'it there, Step("join", {"inputs_0": ..., "inputs_1": ...}, {"axis": ...})'
            )
        operands.append(_operand(array))
    if not operands:
        raise ValueError("need at least one array to concatenate")  # NumPy's
    return operands


def _check_shapes(shapes: list[tuple[int, ...]], axis: int) -> None:
    """NumPy's ValueError (its words) for ranks that differ, or sizes that
    differ outside `axis` (the rank's and axis' checks come first)."""
    first = shapes[0]
    for k, shape in enumerate(shapes[1:], start=1):
        if len(shape) != len(first):
            raise ValueError(
                "all the input arrays must have same number of dimensions, but the array at "
                f"index 0 has {len(first)} dimension(s) and the array at index {k} has "
                f"{len(shape)} dimension(s)"
            )
        for d, (n, m) in enumerate(zip(first, shape, strict=True)):
            if d != axis and n != m:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size {n} "
                    f"and the array at index {k} has size {m}"
                )


def _one_dtype(operands: list[np.ndarray | _Remote], what: str) -> np.dtype:
    """The arrays' one dtype, as the server returns it (little-endian);
    TypeError naming the first two that differ, before anything is sent:
    the server joins one dtype, where NumPy would promote."""
    wires = [wire_dtype(x.dtype) for x in operands]
    for k, wire in enumerate(wires):
        if wire != wires[0]:
            first, other = numpy_dtype(wires[0]), numpy_dtype(wire)
            try:
                promoted = f" (NumPy would promote them to {np.result_type(first, other)})"
            except TypeError:  # no common dtype (bfloat16 with int64, say)
                promoted = ""
            raise TypeError(
                f"{what}: arrays[{k}].dtype is {other}; arrays[0].dtype is {first}: the server "
                f"joins arrays of one dtype{promoted}; cast them to one first, e.g. "
                f'arrays[{k}].astype("{first}")'
            )
    return numpy_dtype(wires[0])


def _concatenate(
    client: Planning[Any],
    arrays: Sequence[Operand] | np.ndarray,
    axis: int | None,
    what: str,
    keep: bool,
    backend: str,
    device_index: int | None,
    progress: ProgressFn | None,
) -> Plan[Any]:
    """concatenate's and join's one plan (their docs say what it does)."""
    operands = _operands(arrays, what)
    steps: list[Step] = []
    sources: list[Any] = list(operands)
    shapes = [tuple(x.shape) for x in operands]
    if axis is None:  # each flattened in row-major order, as NumPy's
        flat: dict[int, Any] = {}  # each once, however often it is joined
        for x in operands:
            if id(x) not in flat:
                flat[id(x)] = _flat(x, what, steps)
        sources = [flat[id(x)] for x in operands]
        shapes = [(math.prod(shape),) for shape in shapes]
        axis = 0
    if not shapes[0]:
        raise ValueError("zero-dimensional arrays cannot be concatenated")  # NumPy's
    axis = normalize_axis(axis, len(shapes[0]))
    _check_shapes(shapes, axis)
    dtype = _one_dtype(operands, what)
    out = (*shapes[0][:axis], sum(shape[axis] for shape in shapes), *shapes[0][axis + 1 :])
    if not math.prod(out):
        if not keep:
            return _nothing_to_move(out, dtype, progress)
    else:  # the empty ones add nothing; the server takes no zero sizes
        sources = [x for x, shape in zip(sources, shapes, strict=True) if shape[axis]]
    joined = Step("join", {f"inputs_{k}": x for k, x in enumerate(sources)}, {"axis": axis})
    return (yield from _last_output(client, steps, joined, backend, device_index, progress, keep))


def concatenate(
    client: Planning[Any],
    arrays: Sequence[Operand] | np.ndarray,
    axis: int | None = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """numpy.concatenate(arrays, axis) on the server (ONNX Concat,
    DML_JOIN): the arrays one after another along `axis`, shape theirs
    with the sizes along `axis` summed. `arrays` is a sequence (a list, a
    tuple; an array's rows, as NumPy reads one) of arrays, anything
    np.asarray takes, and RemoteTensors, in any mix (sent as one Join's
    inputs "inputs_0", "inputs_1", ...: arrays with their strides,
    RemoteTensors by handle); a chain step's output raises TypeError (a
    chain joins those with Step("join", ...)). `axis` defaults to 0 and
    may be negative (AxisError outside the rank); None joins the arrays
    flattened in row-major order (an array's np.ravel, made here; a
    RemoteTensor's a Reshape step to [-1] before the Join, one for each
    RemoteTensor however often it is joined, in one RunChain whose errors
    then name the join step, and which takes at most 64 steps, the server's
    RESOURCE_EXHAUSTED past 63 RemoteTensors of rank 2 or more; a 0-d
    RemoteTensor raises ValueError, fetch it).

    The server joins one dtype: arrays of dtypes that differ raise
    TypeError naming two of them, before anything is sent, where NumPy
    would promote them (cast them first). NumPy's errors are raised here,
    in its words: no arrays, 0-d arrays (axis None aside), ranks that
    differ, sizes that differ outside `axis` (ValueError). Arrays with a
    zero size along `axis` add nothing and are not sent (the server takes
    no zero sizes); an empty result (all of them so, or a 0 among the
    other sizes) is an empty read-only array made here without a call;
    with `keep` it is sent, and the server refuses its zero sizes. More
    than 4096 arrays are the server's RESOURCE_EXHAUSTED, and so is a
    result of more than 2^32 - 1 elements. numpy.concatenate's `out`,
    `dtype` and `casting` are not taken. A read-only array (a new copy,
    even of one array), or a RemoteTensor with `keep`. `backend`,
    `device_index`, `progress` and `keep` as for `run`."""
    return (
        yield from _concatenate(
            client, arrays, axis, "concatenate", keep, backend, device_index, progress
        )
    )  # fmt: skip


def join(
    client: Planning[Any],
    arrays: Sequence[Operand] | np.ndarray,
    axis: int | None = 0,
    *,
    keep: bool = False,
    backend: str = "auto",
    device_index: int | None = None,
    progress: ProgressFn | None = None,
) -> Plan[Any]:
    """Join (DML_JOIN, ONNX Concat), the inverse of split: concatenate
    under DirectML's name, with the same arguments and defaults (axis 0;
    negative counting from the end as in NumPy, where the server itself
    takes [0, rank) only; None flattening the arrays, as NumPy's).
    Everything as concatenate: the same plan."""
    return (
        yield from _concatenate(client, arrays, axis, "join", keep, backend, device_index, progress)
    )
