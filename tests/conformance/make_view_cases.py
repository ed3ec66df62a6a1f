#!/usr/bin/env python3
"""Writes views.json: cases whose steps chain window operators (Slice,
StridedSlice, Split) and layout operators (Transpose, Reshape, Expand) over
padded, broadcast (zero), permuted and reversed (negative) strides, with
ScatterElements before and after windows. Their
expectations come from the NumPy reference below (OPERATORS.md's formulas),
not from tensord. Run: build/python-venv/bin/python tests/conformance/make_view_cases.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import as_strided

NAMES = {np.bool_: "bool", np.float64: "float64", np.float32: "float32", np.float16: "float16", np.int64: "int64",
         np.int32: "int32", np.int16: "int16", np.int8: "int8", np.uint8: "uint8", np.uint32: "uint32",
         np.uint16: "uint16"}


def values(array: np.ndarray) -> list:
    """The elements as the case format writes them: non-finite floats as "nan", "inf", "-inf"."""
    def value(v):
        if isinstance(v, float) and not np.isfinite(v):
            return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        return v
    return [value(v) for v in array.reshape(-1).tolist()]


def tensor_json(buffer: np.ndarray, sizes: list[int], strides: list[int] | None = None) -> dict:
    """A case tensor: `buffer` is the physical buffer, read through `strides`."""
    out = {"dtype": NAMES[buffer.dtype.type], "sizes": sizes, "data": values(buffer)}
    if strides is not None:
        out["strides"] = strides
    return out


def logical(buffer: np.ndarray, sizes: list[int], strides: list[int] | None) -> np.ndarray:
    if strides is None:
        return buffer.reshape(sizes).copy()
    item = buffer.itemsize
    return as_strided(buffer, shape=sizes, strides=[s * item for s in strides]).copy()


def slice_op(x: np.ndarray, offsets, window_sizes, window_strides, sizes) -> np.ndarray:
    # start = offset + (stride < 0 ? window - 1 : 0); output[c] = input[start + stride * c]
    index = [o + (w - 1 if s < 0 else 0) + s * np.arange(n)
             for o, w, s, n in zip(offsets, window_sizes, window_strides, sizes)]
    return x[np.ix_(*index)]


def split_op(x: np.ndarray, axis: int, sizes_along: list[int]) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes_along)[:-1], axis=axis)


def scatter_op(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int) -> np.ndarray:
    out = x.copy()
    for c in np.ndindex(indices.shape):
        k = int(indices[c])
        if k < 0:
            k += x.shape[axis]
        target = list(c)
        target[axis] = k
        out[tuple(target)] = updates[c]
    return out


def expand_op(x: np.ndarray, sizes: list[int]) -> np.ndarray:
    # ONNX Expand: numpy's broadcast, where a 1 in `sizes` keeps the input's size.
    rank = max(x.ndim, len(sizes))
    padded = [1] * (rank - len(sizes)) + list(sizes)
    shape = [1] * (rank - x.ndim) + list(x.shape)
    return np.broadcast_to(x, [max(a, b) for a, b in zip(shape, padded)]).copy()


def expect(*outputs: np.ndarray) -> dict:
    return {"outputs": [{"dtype": NAMES[o.dtype.type], "sizes": list(o.shape),
                         "data": values(o)} for o in outputs]}


def slice_attrs(offsets, window_sizes, window_strides) -> dict:
    return {"offsets": offsets, "window_sizes": window_sizes, "window_strides": window_strides}


def cases() -> list[dict]:
    made = []

    # Rows reversed, then every other column: two windows, one copy.
    buf = np.arange(1, 17, dtype=np.float32)
    x = logical(buf, [4, 4], None)
    a = slice_op(x, [0, 0], [4, 4], [-1, 1], [4, 4])
    b = slice_op(a, [0, 0], [4, 4], [1, 2], [4, 2])
    made.append({
        "name": "views/reversed_rows_then_every_other_column",
        "source": "derived: two Slice windows composed (negative then positive strides)",
        "op": "slice", "inputs": {"input": tensor_json(buf, [4, 4])},
        "attrs": slice_attrs([0, 0], [4, 4], [-1, 1]), "outputs": [{"sizes": [4, 4]}],
        "then": [{"op": "slice", "attrs": slice_attrs([0, 0], [4, 4], [1, 2]),
                  "outputs": [{"sizes": [4, 2]}]}],
        "expect": expect(b)})

    # A padded input (rows 6 apart), a row window, then columns reversed by
    # StridedSlice (all masks set, stride -1).
    buf = np.arange(-8, 8, dtype=np.int16)
    x = logical(buf, [3, 4], [6, 1])
    a = slice_op(x, [1, 0], [2, 4], [1, 1], [2, 4])
    b = a[:, ::-1]
    made.append({
        "name": "views/padded_rows_then_strided_slice_reversed_columns",
        "source": "derived: Slice over padded strides, then StridedSlice stride -1 with masks",
        "op": "slice", "inputs": {"input": tensor_json(buf, [3, 4], [6, 1])},
        "attrs": slice_attrs([1, 0], [2, 4], [1, 1]), "outputs": [{"sizes": [2, 4]}],
        "then": [{"op": "strided_slice",
                  "attrs": {"begin": [0, 0], "end": [0, 0], "stride": [1, -1],
                            "begin_mask": [1, 1], "end_mask": [1, 1]}}],
        "expect": expect(b)})

    # A broadcast input (stride 0: every row the same 4 bytes), split in two,
    # the second part windowed with a reversed row stride.
    buf = np.array([10, 20, 30, 40], dtype=np.uint8)
    x = logical(buf, [3, 4], [0, 1])
    parts = split_op(x, 0, [1, 2])
    b = slice_op(parts[1], [0, 1], [2, 3], [-1, 2], [2, 2])
    made.append({
        "name": "views/broadcast_rows_split_then_reversed_window",
        "source": "derived: Split over a zero stride, then Slice of its second output",
        "op": "split", "inputs": {"input": tensor_json(buf, [3, 4], [0, 1])},
        "attrs": {"axis": 0}, "outputs": [{"sizes": [1, 4]}, {"sizes": [2, 4]}],
        "then": [{"from": 1, "op": "slice", "attrs": slice_attrs([0, 1], [2, 3], [-1, 2]),
                  "outputs": [{"sizes": [2, 2]}]}],
        "expect": expect(b)})

    # A column-major input, three windows: columns reversed, every other row,
    # then a 2x2 corner.
    buf = np.arange(1, 10, dtype=np.float64) / 4
    x = logical(buf, [3, 3], [1, 3])
    a = slice_op(x, [0, 0], [3, 3], [1, -1], [3, 3])
    b = slice_op(a, [0, 0], [3, 3], [2, 1], [2, 3])
    c = slice_op(b, [0, 1], [2, 2], [1, 1], [2, 2])
    made.append({
        "name": "views/column_major_three_windows",
        "source": "derived: three Slice windows composed over permuted strides",
        "op": "slice", "inputs": {"input": tensor_json(buf, [3, 3], [1, 3])},
        "attrs": slice_attrs([0, 0], [3, 3], [1, -1]), "outputs": [{"sizes": [3, 3]}],
        "then": [{"op": "slice", "attrs": slice_attrs([0, 0], [3, 3], [2, 1]),
                  "outputs": [{"sizes": [2, 3]}]},
                 {"op": "slice", "attrs": slice_attrs([0, 1], [2, 2], [1, 1]),
                  "outputs": [{"sizes": [2, 2]}]}],
        "expect": expect(c)})

    # ScatterElements after windows: its input is a reversed inner window.
    buf = np.arange(16, dtype=np.int32)
    x = logical(buf, [4, 4], None)
    a = slice_op(x, [1, 1], [3, 3], [-1, -1], [3, 3])
    indices = np.array([[2], [0], [1]], dtype=np.int64)
    updates = np.array([[100], [200], [300]], dtype=np.int32)
    b = scatter_op(a, indices, updates, 1)
    made.append({
        "name": "views/scatter_after_a_reversed_window",
        "source": "derived: ScatterElements whose input is a Slice with negative strides",
        "op": "slice", "inputs": {"input": tensor_json(buf, [4, 4])},
        "attrs": slice_attrs([1, 1], [3, 3], [-1, -1]), "outputs": [{"sizes": [3, 3]}],
        "then": [{"op": "scatter_elements", "attrs": {"axis": 1},
                  "inputs": {"indices": tensor_json(indices.reshape(-1), [3, 1]),
                             "updates": tensor_json(updates.reshape(-1), [3, 1])}}],
        "expect": expect(b)})

    # Windows after ScatterElements: split, then a window of each part's rows.
    buf = np.zeros(6, dtype=np.int8)
    x = logical(buf, [2, 3], None)
    indices = np.array([[1, 0, 1]], dtype=np.int32)
    updates = np.array([[-1, -2, -3]], dtype=np.int8)
    a = scatter_op(x, indices, updates, 0)
    parts = split_op(a, 1, [2, 1])
    b = slice_op(parts[0], [0, 0], [2, 2], [-1, -1], [2, 2])
    made.append({
        "name": "views/split_and_window_after_scatter",
        "source": "derived: Split and Slice (negative strides) of a ScatterElements output",
        "op": "scatter_elements", "attrs": {"axis": 0},
        "inputs": {"input": tensor_json(buf, [2, 3]),
                   "indices": tensor_json(indices.reshape(-1), [1, 3]),
                   "updates": tensor_json(updates.reshape(-1), [1, 3])},
        "then": [{"op": "split", "attrs": {"axis": 1},
                  "outputs": [{"sizes": [2, 2]}, {"sizes": [2, 1]}]},
                 {"op": "slice", "attrs": slice_attrs([0, 0], [2, 2], [-1, -1]),
                  "outputs": [{"sizes": [2, 2]}]}],
        "expect": expect(b)})

    # Layout steps among windows: a padded input transposed, its rows reversed,
    # flattened and broadcast to two rows: one copy at the end.
    buf = np.arange(1, 19, dtype=np.float32)
    x = logical(buf, [3, 4], [6, 1])
    a = x.T
    b = slice_op(a, [0, 0], [4, 3], [-1, 1], [4, 3])
    c = b.reshape(-1)
    d = expand_op(c, [2, 1])
    made.append({
        "name": "views/transpose_window_reshape_expand",
        "source": "derived: Transpose, Slice (reversed rows), Reshape and Expand composed",
        "op": "transpose", "inputs": {"input": tensor_json(buf, [3, 4], [6, 1])},
        "attrs": {"perm": [1, 0]},
        "then": [{"op": "slice", "attrs": slice_attrs([0, 0], [4, 3], [-1, 1]),
                  "outputs": [{"sizes": [4, 3]}]},
                 {"op": "reshape", "attrs": {"sizes": [-1]}},
                 {"op": "expand", "attrs": {"sizes": [2, 1]}}],
        "expect": expect(d)})

    # A broadcast (expand) read by StridedSlice, transposed, then reshaped.
    buf = np.array([True, False, True], dtype=np.bool_)
    x = logical(buf, [3], None)
    a = expand_op(x, [4, 1])
    b = a[1::2, ::-1]
    c = b.T.reshape(3, 2)
    made.append({
        "name": "views/bool_expand_strided_slice_transpose_reshape",
        "source": "derived: Expand (stride 0), StridedSlice, Transpose and Reshape of bools",
        "op": "expand", "inputs": {"input": tensor_json(buf, [3])},
        "attrs": {"sizes": [4, 1]},
        "then": [{"op": "strided_slice",
                  "attrs": {"begin": [1, 0], "end": [0, 0], "stride": [2, -1],
                            "end_mask": [1, 1], "begin_mask": [0, 1]}},
                 {"op": "transpose"},
                 {"op": "reshape", "attrs": {"sizes": [3, 2]}}],
        "expect": expect(c)})

    # A column-major input is no window of its reshape: the reshape copies,
    # and a window of its output follows.
    buf = np.arange(12, dtype=np.int64) * -3
    x = logical(buf, [3, 4], [1, 3])
    a = x.reshape(2, 6)
    b = slice_op(a, [0, 1], [2, 5], [1, 2], [2, 3])
    made.append({
        "name": "views/column_major_reshape_then_window",
        "source": "derived: Reshape of permuted strides (a copy), then a Slice window",
        "op": "reshape", "inputs": {"input": tensor_json(buf, [3, 4], [1, 3])},
        "attrs": {"sizes": [2, 6]},
        "then": [{"op": "slice", "attrs": slice_attrs([0, 1], [2, 5], [1, 2]),
                  "outputs": [{"sizes": [2, 3]}]}],
        "expect": expect(b)})

    # Tile makes new bytes; the steps after it read them as views: a
    # reversed-column window, then a transpose, over a tile of a padded int16
    # input (its pitch 5 for rows of 3).
    buf = np.arange(-5, 5, dtype=np.int16)
    x = logical(buf, [2, 3], [5, 1])
    a = np.tile(x, (2, 3))
    b = slice_op(a, [1, 0], [3, 9], [1, -2], [3, 5])
    made.append({
        "name": "views/tile_then_window_and_transpose",
        "source": "derived: Tile of a padded input, then a reversed Slice window and a Transpose",
        "op": "tile", "inputs": {"input": tensor_json(buf, [2, 3], [5, 1])},
        "attrs": {"repeats": [2, 3]},
        "then": [{"op": "slice", "attrs": slice_attrs([1, 0], [3, 9], [1, -2]),
                  "outputs": [{"sizes": [3, 5]}]},
                 {"op": "transpose"}],
        "expect": expect(b.T)})

    # A window's view tiled: the tile reads the view through its strides.
    buf = np.array([1.5, -0.0, np.inf, 2.25, -7.0, np.nan], dtype=np.float32)
    x = logical(buf, [2, 3], None)
    a = x[:, ::-2]
    b = np.tile(a, (3, 1))
    made.append({
        "name": "views/window_then_tile",
        "source": "derived: a reversed StridedSlice window of float32 specials, then Tile",
        "op": "strided_slice", "inputs": {"input": tensor_json(buf, [2, 3])},
        "attrs": {"begin": [0, 0], "end": [0, 0], "stride": [1, -2],
                  "begin_mask": [1, 1], "end_mask": [1, 1]},
        "then": [{"op": "tile", "attrs": {"repeats": [3, 1]}}],
        "expect": expect(b)})

    # Gather makes new bytes too: whole rows of a padded float16 input chosen by
    # 2-D int64 indices (one negative), then a reversed window and a transpose.
    buf = np.array([0.5, -1.0, 2.0, 0.0, 0.0, -0.0, 3.5, np.inf, 0.0, 0.0,
                    -2.5, 8.0, 1.0, 0.0, 0.0, np.nan, -4.0, 0.25], dtype=np.float16)
    x = logical(buf, [4, 3], [5, 1])
    indices = np.array([[3, 0], [-3, 3]], dtype=np.int64)
    a = np.take(x, indices, axis=0)
    b = a[:, ::-1, :]
    made.append({
        "name": "views/gather_then_window_and_transpose",
        "source": "derived: Gather of padded rows, then a reversed StridedSlice window and a Transpose",
        "op": "gather",
        "inputs": {"input": tensor_json(buf, [4, 3], [5, 1]),
                   "indices": tensor_json(indices, [2, 2])},
        "attrs": {"axis": 0},
        "then": [{"op": "strided_slice",
                  "attrs": {"begin": [0, 0, 0], "end": [0, 0, 0], "stride": [1, -1, 1],
                            "begin_mask": [1, 1, 1], "end_mask": [1, 1, 1]}},
                 {"op": "transpose", "attrs": {"perm": [2, 0, 1]}}],
        "expect": expect(b.transpose(2, 0, 1))})

    # A reversed window's view read by GatherElements (uint32 indices): the walk
    # reads the view through its strides; ScatterElements' inverse.
    buf = np.arange(12, dtype=np.int32) * 7 - 40
    x = logical(buf, [3, 4], None)
    a = x[::-1, 1:]
    indices = np.array([[2, 0, 1, 1], [0, 0, 2, 1]], dtype=np.uint32).T[:3, :2].copy()
    b = np.take_along_axis(a, indices.astype(np.int64), axis=1)
    made.append({
        "name": "views/window_then_gather_elements",
        "source": "derived: a reversed Slice window, then GatherElements along its rows",
        "op": "slice", "inputs": {"input": tensor_json(buf, [3, 4])},
        "attrs": slice_attrs([0, 1], [3, 3], [-1, 1]), "outputs": [{"sizes": [3, 3]}],
        "then": [{"op": "gather_elements", "attrs": {"axis": 1},
                  "inputs": {"indices": tensor_json(indices, [3, 2])}}],
        "expect": expect(b)})

    # Pad makes new bytes: a reflection wider than a padded uint16 input (it
    # folds back twice), then a reversed-row window whose one contiguous run is
    # answered from the pad's output.
    buf = np.array([1, 2, 3, 0, 4, 5, 6, 0], dtype=np.uint16)
    x = logical(buf, [2, 3], [4, 1])
    a = np.pad(x, ((1, 2), (5, 4)), mode="reflect")
    b = a[3:4, ::1]
    made.append({
        "name": "views/pad_then_window",
        "source": "derived: a reflect Pad wider than a padded input, then a Slice of one row",
        "op": "pad", "inputs": {"input": tensor_json(buf, [2, 3], [4, 1])},
        "attrs": {"start_padding": [1, 5], "end_padding": [2, 4], "mode": "reflect"},
        "then": [{"op": "slice", "attrs": slice_attrs([3, 0], [1, 12], [1, 1]),
                  "outputs": [{"sizes": [1, 12]}]}],
        "expect": expect(b)})

    # A reversed window's view padded in symmetric mode and with a constant
    # -inf: the pad reads the view through its negative strides.
    buf = np.array([1.5, -0.0, 2.0, -3.25, 4.0, 0.125], dtype=np.float64)
    x = logical(buf, [2, 3], None)
    a = x[::-1, ::-1]
    b = np.pad(np.pad(a, ((2, 1), (0, 4)), mode="symmetric"), ((0, 0), (1, 1)),
               constant_values=-np.inf)
    made.append({
        "name": "views/window_then_pads",
        "source": "derived: a reversed StridedSlice window, then a symmetric Pad and a constant one",
        "op": "strided_slice", "inputs": {"input": tensor_json(buf, [2, 3])},
        "attrs": {"begin": [0, 0], "end": [0, 0], "stride": [-1, -1],
                  "begin_mask": [1, 1], "end_mask": [1, 1]},
        "then": [{"op": "pad", "attrs": {"start_padding": [2, 0], "end_padding": [1, 4],
                                         "mode": "symmetric"}},
                 {"op": "pad", "attrs": {"start_padding": [0, 1], "end_padding": [0, 1],
                                         "value": "-inf"}}],
        "expect": expect(b)})

    # A later step whose window does not fit the step before's output.
    made.append({
        "name": "views/invalid_window_past_the_step_before",
        "source": "derived: the second Slice's window exceeds the first's output",
        "op": "slice", "inputs": {"input": tensor_json(np.arange(16, dtype=np.float32), [4, 4])},
        "attrs": slice_attrs([0, 0], [2, 4], [1, 1]), "outputs": [{"sizes": [2, 4]}],
        "then": [{"op": "slice", "attrs": slice_attrs([0, 0], [3, 4], [1, 1]),
                  "outputs": [{"sizes": [3, 4]}]}],
        "expect": {"error": "INVALID_ARGUMENT"}})
    return made


if __name__ == "__main__":
    path = Path(__file__).with_name("views.json")
    # One case a line: a diff names the case that changed.
    path.write_text("[\n" + ",\n".join(json.dumps(case) for case in cases()) + "\n]\n")
    print(f"{path}: {len(cases())} cases")
