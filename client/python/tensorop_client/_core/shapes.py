"""Output layouts that follow from a request, derived without I/O: a slice's
whole window (its output sizes when the caller gives none), a strided
slice's sizes (docs/operators.md, StridedSlice), a scatter's, a
transpose's, a reshape's, an expand's, a tile's, a gather's, a gather_elements',
a join's and a pad's (docs/operators.md, Transpose, Reshape, Expand, Tile,
Gather, GatherElements, Join, Pad), and from them the bytes of output data an
answer, or a chain's, carries, which progress counts from its first report.

Each derivation answers None where the request is not one the server runs
(a stride of 0, an index out of range, ...): the request is then sent as
given, for the server to name what is wrong."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.tensors import MAX_ELEMENTS, LayoutError, numpy_dtype, span_elements

# StridedSlice's rank limit (docs/operators.md, "Limits").
_MAX_STRIDED_SLICE_RANK = 32
# The other operators' rank limit (DirectML's), which Transpose, Reshape,
# Expand and Tile also hold their size lists to, and Gather its output.
_MAX_RANK = 8
# Pad's modes (docs/operators.md, Pad): "" is constant.
PAD_MODES = ("constant", "edge", "reflect", "symmetric")
# The most inputs one Join takes (docs/operators.md, "Limits").
MAX_JOIN_INPUTS = 4096

# An output's dtype (a DType value) and sizes.
Layout = tuple[int, tuple[int, ...]]


def slice_window_sizes(window_sizes: Sequence[int], window_strides: Sequence[int]) -> list[int]:
    """A slice's whole window, its largest valid output: 1 + (window_sizes[i]
    - 1) // |window_strides[i]| per dimension of window_sizes. Where that is
    no valid size (a window size below 1, a stride of 0 or none), 1: the
    server then names what is wrong with the attributes, not a missing
    output."""
    sizes = []
    for i, size in enumerate(window_sizes):
        stride = window_strides[i] if i < len(window_strides) else 0
        sizes.append(1 + (size - 1) // abs(stride) if size >= 1 and stride != 0 else 1)
    return sizes


def _ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for b > 0."""
    return -(-a // b)


def _range_size(n: int, begin: int | None, end: int | None, stride: int) -> int:
    """Elements of one strided range over a dimension of size n (None: the
    mask is set), as docs/operators.md's StridedSlice section computes them."""
    if n == 0:
        return 0
    if stride > 0:
        b = 0 if begin is None else begin + n if begin < 0 else begin
        e = n if end is None else end + n if end < 0 else end
        b, e = min(max(b, 0), n), min(max(e, 0), n)
        return max(0, _ceil_div(e - b, stride))
    b = n - 1 if begin is None else begin + n if begin < 0 else begin
    e = -1 if end is None else end + n if end < 0 else end
    b, e = min(max(b, 0), n - 1), min(max(e, -1), n)
    return max(0, _ceil_div(b - e, -stride))


def strided_slice_sizes(sizes: Sequence[int], attrs: pb.StridedSliceAttrs) -> list[int] | None:
    """The sizes of a strided slice of an input of `sizes` (docs/operators.md,
    StridedSlice), or None for a request the server refuses."""
    steps = len(attrs.begin)
    strides = list(attrs.stride) or [1] * steps
    if len(attrs.end) != steps or len(strides) != steps:
        return None
    if not 1 <= len(sizes) <= _MAX_STRIDED_SLICE_RANK or any(n < 0 for n in sizes):
        return None
    masks = (
        attrs.begin_mask,
        attrs.end_mask,
        attrs.new_axis_mask,
        attrs.shrink_axis_mask,
        attrs.ellipsis_mask,
    )
    if any(bit not in (0, 1) for mask in masks for bit in mask):
        return None
    begin_mask, end_mask, new_axis, shrink, ellipsis = (
        [bool(m[i]) if i < len(m) else False for i in range(steps)] for m in masks
    )
    if sum(ellipsis) > 1:
        return None
    out: list[int] = []
    dim = 0  # the next input dimension
    for i in range(steps):
        if ellipsis[i] + new_axis[i] + shrink[i] > 1:
            return None
        if ellipsis[i]:
            whole = len(sizes) - (steps - sum(new_axis) - 1)
            if whole < 0:
                return None
            out.extend(sizes[dim : dim + whole])
            dim += whole
            continue
        if new_axis[i]:
            out.append(1)
            continue
        if dim >= len(sizes):
            return None  # more input-consuming steps than input dimensions
        n = sizes[dim]
        dim += 1
        if shrink[i]:
            index = attrs.begin[i] + n if attrs.begin[i] < 0 else attrs.begin[i]
            if not 0 <= index < n:
                return None
            continue
        if strides[i] == 0:
            return None
        out.append(
            _range_size(
                n,
                None if begin_mask[i] else attrs.begin[i],
                None if end_mask[i] else attrs.end[i],
                strides[i],
            )
        )
    out.extend(sizes[dim:])
    return out


def _tensor_sizes_valid(sizes: Sequence[int]) -> bool:
    """An input Transpose, Reshape, Expand, Tile, Gather, GatherElements and Pad
    take (its indices too): rank 1..8, every size >= 1."""
    return 1 <= len(sizes) <= _MAX_RANK and all(n >= 1 for n in sizes)


def transpose_sizes(sizes: Sequence[int], perm: Sequence[int]) -> list[int] | None:
    """The sizes of a transpose of an input of `sizes` (docs/operators.md,
    Transpose): input.sizes[perm[i]], an empty `perm` reversing the
    dimensions; None for a request the server refuses (a `perm` that is no
    permutation of 0..rank-1)."""
    if not _tensor_sizes_valid(sizes):
        return None
    if not perm:
        return list(reversed(sizes))
    if sorted(perm) != list(range(len(sizes))):
        return None
    return [sizes[axis] for axis in perm]


def reshape_sizes(sizes: Sequence[int], target: Sequence[int]) -> list[int] | None:
    """The sizes of a reshape of an input of `sizes` to `target` (docs/operators.md,
    Reshape): `target` with its one -1, if any, standing for the rest of the
    element count; None for a request the server refuses (an entry below 1
    other than -1, two -1s, a count that differs)."""
    if not _tensor_sizes_valid(sizes) or not 1 <= len(target) <= _MAX_RANK:
        return None
    if any(n < 1 and n != -1 for n in target) or list(target).count(-1) > 1:
        return None
    count = math.prod(sizes)
    known = math.prod(n for n in target if n != -1)
    if -1 not in target:
        return list(target) if known == count else None
    if count % known:
        return None
    return [count // known if n == -1 else n for n in target]


def expand_sizes(sizes: Sequence[int], target: Sequence[int]) -> list[int] | None:
    """The sizes of an expand of an input of `sizes` to `target` (docs/operators.md,
    Expand, ONNX's broadcast): both lists aligned at their last entry, the
    shorter padded with leading 1s, and at each position the larger size;
    None for a request the server refuses (two sizes that differ and are
    both other than 1, an entry below 1, an output of more than 2^32 - 1
    elements)."""
    if not _tensor_sizes_valid(sizes) or not 1 <= len(target) <= _MAX_RANK:
        return None
    if any(n < 1 for n in target):
        return None
    rank = max(len(sizes), len(target))
    padded_input = [1] * (rank - len(sizes)) + list(sizes)
    padded_target = [1] * (rank - len(target)) + list(target)
    out = []
    for a, b in zip(padded_input, padded_target, strict=True):
        if a != b and 1 not in (a, b):
            return None
        out.append(max(a, b))
    return out if math.prod(out) <= MAX_ELEMENTS else None


def tile_sizes(sizes: Sequence[int], repeats: Sequence[int]) -> list[int] | None:
    """The sizes of a tile of an input of `sizes` by `repeats` (docs/operators.md,
    Tile): input.sizes[i] * repeats[i]; None for a request the server refuses
    (a `repeats` of another length than the rank, an entry below 1, an output
    of more than 2^32 - 1 elements)."""
    if not _tensor_sizes_valid(sizes) or len(repeats) != len(sizes):
        return None
    if any(r < 1 for r in repeats):
        return None
    out = [n * r for n, r in zip(sizes, repeats, strict=True)]
    return out if math.prod(out) <= MAX_ELEMENTS else None


def pad_sizes(
    sizes: Sequence[int], start: Sequence[int], end: Sequence[int], mode: str = "constant"
) -> list[int] | None:
    """The sizes of a pad of an input of `sizes` by `start` and `end`
    padding (docs/operators.md, Pad): input.sizes[i] + start[i] + end[i];
    None for a request the server refuses (`start` or `end` of another length
    than the rank, a count below 0, a `mode` that is none of PAD_MODES or
    "", a reflect of a padded dimension of size 1, an output of more than
    2^32 - 1 elements). Its `value` is not judged here."""
    if not _tensor_sizes_valid(sizes) or not len(start) == len(end) == len(sizes):
        return None
    if any(n < 0 for n in (*start, *end)) or mode not in ("", *PAD_MODES):
        return None
    if mode == "reflect" and any(
        n < 2 and (a or b) for n, a, b in zip(sizes, start, end, strict=True)
    ):
        return None
    out = [n + a + b for n, a, b in zip(sizes, start, end, strict=True)]
    return out if math.prod(out) <= MAX_ELEMENTS else None


def gather_sizes(sizes: Sequence[int], indices: Sequence[int], axis: int) -> list[int] | None:
    """The sizes of a gather from an input of `sizes` by indices of sizes
    `indices` along `axis` (docs/operators.md, Gather): input.sizes[:axis] ++
    indices ++ input.sizes[axis + 1:]; None for a request the server refuses
    (an axis outside [0, rank), an output rank over 8, an output of more than
    2^32 - 1 elements)."""
    if not _tensor_sizes_valid(sizes) or not _tensor_sizes_valid(indices):
        return None
    if not 0 <= axis < len(sizes) or len(sizes) + len(indices) - 1 > _MAX_RANK:
        return None
    out = [*sizes[:axis], *indices, *sizes[axis + 1 :]]
    return out if math.prod(out) <= MAX_ELEMENTS else None


def gather_elements_sizes(
    sizes: Sequence[int], indices: Sequence[int], axis: int
) -> list[int] | None:
    """The sizes of a gather_elements from an input of `sizes` by indices of
    sizes `indices` along `axis` (docs/operators.md, GatherElements): the
    indices' sizes; None for a request the server refuses (ranks that
    differ, an axis outside [0, rank), indices whose sizes differ from the
    input's outside `axis`, an output of more than 2^32 - 1 elements)."""
    if not _tensor_sizes_valid(sizes) or not _tensor_sizes_valid(indices):
        return None
    if len(indices) != len(sizes) or not 0 <= axis < len(sizes):
        return None
    if any(k != n for d, (n, k) in enumerate(zip(sizes, indices, strict=True)) if d != axis):
        return None
    return list(indices) if math.prod(indices) <= MAX_ELEMENTS else None


def join_input_names(names: Iterable[str]) -> list[str] | None:
    """join's inputs in order, "inputs_0", "inputs_1", ..., when `names`
    are exactly those: one to MAX_JOIN_INPUTS of them, numbered from 0 in
    decimal without gaps or leading zeros (docs/operators.md, Join); None
    otherwise (the server then names what is wrong)."""
    given = set(names)
    if not 1 <= len(given) <= MAX_JOIN_INPUTS:
        return None
    wanted = [f"inputs_{k}" for k in range(len(given))]
    return wanted if given == set(wanted) else None


def join_sizes(inputs: Sequence[Sequence[int]], axis: int) -> list[int] | None:
    """The sizes of a join of inputs of sizes `inputs`, in order, along
    `axis` (docs/operators.md, Join): theirs, with the sizes along `axis`
    summed; None for a request the server refuses (no inputs or more than
    MAX_JOIN_INPUTS, ranks that differ, an axis outside [0, rank), sizes
    that differ outside `axis`, an output of more than 2^32 - 1 elements)."""
    if not 1 <= len(inputs) <= MAX_JOIN_INPUTS:
        return None
    if not all(_tensor_sizes_valid(sizes) for sizes in inputs):
        return None
    first = inputs[0]
    if not 0 <= axis < len(first):
        return None
    for sizes in inputs[1:]:
        if len(sizes) != len(first):
            return None
        if any(n != m for d, (n, m) in enumerate(zip(sizes, first, strict=True)) if d != axis):
            return None
    out = list(first)
    out[axis] = sum(sizes[axis] for sizes in inputs)
    return out if math.prod(out) <= MAX_ELEMENTS else None


# The operators whose one output's sizes follow from their inputs and
# attributes: input "input", input "indices" where the operator has one
# (scatter_elements': the input's, whatever its attributes), join's numbered
# inputs "inputs_0", "inputs_1", ... (derived_output_sizes).
DERIVED_SIZES = (
    "strided_slice",
    "scatter_elements",
    "transpose",
    "reshape",
    "expand",
    "tile",
    "gather",
    "gather_elements",
    "join",
    "pad",
)


def source_input(op: str | None) -> str:
    """The input whose dtype the outputs of `op` have, and whose rank a
    negative axis counts from: "inputs_0" for join, "input" for the others."""
    return "inputs_0" if op == "join" else "input"


def derived_sizes(
    op: str | None, attrs: object, sizes: Sequence[int], indices: Sequence[int] | None = None
) -> list[int] | None:
    """The sizes of the one output of `op` (one of DERIVED_SIZES but join,
    whose inputs are numbered: derived_output_sizes) with `attrs` (its
    attributes message) on an input of `sizes` and, for gather and
    gather_elements, indices of sizes `indices`; None for another operator,
    a request the server refuses, or indices not given."""
    if op == "strided_slice" and isinstance(attrs, pb.StridedSliceAttrs):
        return strided_slice_sizes(sizes, attrs)
    if op == "scatter_elements":
        return list(sizes)
    if op == "transpose" and isinstance(attrs, pb.TransposeAttrs):
        return transpose_sizes(sizes, list(attrs.perm))
    if op == "reshape" and isinstance(attrs, pb.ReshapeAttrs):
        return reshape_sizes(sizes, list(attrs.sizes))
    if op == "expand" and isinstance(attrs, pb.ExpandAttrs):
        return expand_sizes(sizes, list(attrs.sizes))
    if op == "tile" and isinstance(attrs, pb.TileAttrs):
        return tile_sizes(sizes, list(attrs.repeats))
    if op == "pad" and isinstance(attrs, pb.PadAttrs):
        return pad_sizes(sizes, list(attrs.start_padding), list(attrs.end_padding), attrs.mode)
    if indices is None:
        return None
    if op == "gather" and isinstance(attrs, pb.GatherAttrs):
        return gather_sizes(sizes, indices, attrs.axis)
    if op == "gather_elements" and isinstance(attrs, pb.GatherElementsAttrs):
        return gather_elements_sizes(sizes, indices, attrs.axis)
    return None


def derived_output_sizes(
    op: str | None, attrs: object, inputs: Mapping[str, Sequence[int]]
) -> list[int] | None:
    """derived_sizes with the inputs' sizes by name: join's from its
    numbered inputs (join_input_names, join_sizes), the others' from input
    "input" and, where given, "indices"; None where derived_sizes answers
    None, or the inputs are not the operator's."""
    if op == "join":
        names = join_input_names(inputs)
        if names is None or not isinstance(attrs, pb.JoinAttrs):
            return None
        return join_sizes([inputs[name] for name in names], attrs.axis)
    source = inputs.get("input")
    if source is None:
        return None
    return derived_sizes(op, attrs, source, inputs.get("indices"))


def step_outputs(
    op: str | None,
    attrs: object,
    inputs: Mapping[str, Layout | None],
    outputs: Sequence[pb.OutputDesc],
) -> list[Layout | None]:
    """The layout of each output of one operator (a request, or a chain
    step), None where it is not known here: every output has the dtype of
    input "input" (join's: of "inputs_0", the one dtype of its inputs);
    slice's and split's sizes are the caller's, those of the others
    (DERIVED_SIZES: strided_slice, scatter_elements, transpose, reshape,
    expand, tile, gather, gather_elements, join, pad) follow from the inputs
    when not given."""
    source = inputs.get(source_input(op))
    if op in ("slice", "split"):
        return [(source[0], tuple(o.sizes)) if source and o.sizes else None for o in outputs]
    given = tuple(outputs[0].sizes) if outputs else ()
    if source is None:
        return [None]
    if given:
        return [(source[0], given)]
    if op == "join" and any(layout is None or layout[0] != source[0] for layout in inputs.values()):
        return [None]  # an input's layout not known here, or two dtypes (the server refuses)
    known = {name: layout[1] for name, layout in inputs.items() if layout is not None}
    sizes = derived_output_sizes(op, attrs, known)
    return [None if sizes is None else (source[0], tuple(sizes))]


def layout_bytes(layout: Layout, strides: Sequence[int]) -> int | None:
    """The bytes a tensor of `layout` in `strides` (empty: packed) takes on
    the wire; None for a layout the server refuses."""
    dtype, sizes = layout
    try:
        itemsize = numpy_dtype(dtype).itemsize
    except LayoutError:
        return None
    if any(n < 0 for n in sizes) or any(s < 0 for s in strides):
        return None
    if not strides:
        return math.prod(sizes) * itemsize
    if len(strides) != len(sizes):
        return None
    return span_elements(sizes, strides) * itemsize


def _tensor_layout(tensor: pb.Tensor) -> Layout:
    return tensor.dtype, tuple(tensor.sizes)


def answer_bytes(request: pb.RunRequest) -> int | None:
    """The bytes of output data the answer to `request` carries, where every
    output's layout is known before it is sent (kept outputs and outputs in
    shared memory carry none); None otherwise."""
    op = request.WhichOneof("op")
    inputs = {name: _tensor_layout(t) for name, t in request.inputs.items()}
    layouts = step_outputs(op, getattr(request, op) if op else None, inputs, request.outputs)
    descs = list(request.outputs) or [pb.OutputDesc()]
    if len(layouts) != len(descs):
        return None
    total = 0
    for layout, desc in zip(layouts, descs, strict=True):
        if desc.keep or desc.HasField("shared_memory"):
            continue
        size = None if layout is None else layout_bytes(layout, desc.strides)
        if size is None:
            return None
        total += size
    return total


def chain_answer_bytes(chain: pb.RunChainRequest) -> int | None:
    """answer_bytes for a chain: its results' bytes, each step's outputs
    derived from the layouts of the steps before it; None when one is not
    known here."""
    produced: list[list[Layout | None]] = []
    for step in chain.steps:
        inputs: dict[str, Layout | None] = {}
        for name, source in step.inputs.items():
            if source.HasField("step"):
                inputs[name] = _produced(produced, source.step.step, source.step.output)
            else:
                inputs[name] = _tensor_layout(source.tensor)
        op = step.WhichOneof("op")
        produced.append(step_outputs(op, getattr(step, op) if op else None, inputs, step.outputs))
    total = 0
    for result in chain.results:
        if result.keep:
            continue
        layout = _produced(produced, result.step, result.output)
        if layout is None:
            return None
        strides: Sequence[int] = result.strides
        step = chain.steps[result.step]
        if not strides and result.output < len(step.outputs):
            strides = step.outputs[result.output].strides
        size = layout_bytes(layout, strides)
        if size is None:
            return None
        total += size
    return total


def _produced(produced: list[list[Layout | None]], step: int, output: int) -> Layout | None:
    if not 0 <= step < len(produced) or not 0 <= output < len(produced[step]):
        return None
    return produced[step][output]
