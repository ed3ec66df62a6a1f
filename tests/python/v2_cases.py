"""The public conformance cases as Open Inference Protocol (KServe v2) requests:
which are run and which a stated rule excludes (test_v2_grpc.py's docstring),
shared by the gRPC and HTTP tritonclient tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.utils import InferenceServerException

from tensorop_client.cases import Case, load_cases

PARAMETERS = {
    "slice": ["offsets", "window_sizes", "window_strides"],
    "strided_slice": [
        "begin", "end", "stride", "begin_mask", "end_mask", "new_axis_mask",
        "shrink_axis_mask", "ellipsis_mask",
    ],
    "split": ["axis"],
    "scatter_elements": ["axis"],
    "transpose": ["perm"],
    "reshape": ["sizes"],
    "expand": ["sizes"],
    "tile": ["repeats"],
    "gather": ["axis"],
    "gather_elements": ["axis"],
    "join": ["axis"],
    "pad": ["start_padding", "end_padding", "mode", "value"],
}
# Parameters whose value is text: one BYTES element (shape [1]), absent when empty.
TEXT_PARAMETERS = {"mode", "value"}
DATA_INPUTS = {"slice": ["input"], "strided_slice": ["input"], "split": ["input"],
               "scatter_elements": ["input", "indices", "updates"], "transpose": ["input"],
               "reshape": ["input"], "expand": ["input"], "tile": ["input"],
               "gather": ["input", "indices"], "gather_elements": ["input", "indices"],
               "pad": ["input"]}
# join's data inputs are numbered (inputs_0, inputs_1, ...): the case's own, see data_inputs.
# The public cases excluded by the rules above, by rule; a change in the public
# cases shows up here rather than as silently skipped cases. strided: 5 each of
# slice and gather, 4 each of transpose, reshape, expand, tile and gather_elements,
# 2 of join, 3 of pad (per operator, one with output strides, the rest with strided
# inputs or broadcast indices); output sizes: slice/invalid_zero_stride,
# slice/invalid_output_too_large and transpose/invalid_output_sizes.
EXPECTED_EXCLUDED = {"strided": 35, "output sizes": 3}


def data_inputs(op: str, request) -> list[str]:
    """The names of the data inputs the model of `op` takes from `request`:
    DATA_INPUTS' for most, every input of the case's own for join (numbered;
    a gap is the server's to name)."""
    if op == "join":
        return sorted(request.inputs)
    return DATA_INPUTS[op]


@dataclass
class V2Case:
    case: Case
    op: str
    excluded: str | None  # the rule that excludes it, or None


def _derived_sizes_match(case: Case, op: str) -> bool:
    request = case.request
    outputs = [list(o.sizes) for o in request.outputs]
    if op == "slice":
        attrs = request.slice
        derived = []
        for i, size in enumerate(attrs.window_sizes):
            stride = attrs.window_strides[i] if i < len(attrs.window_strides) else 1
            derived.append(1 + (size - 1) // abs(stride) if size >= 1 and stride != 0 else size)
        return outputs == [derived]
    if op == "split":
        sizes = list(request.inputs["input"].sizes)
        axis = request.split.axis + (len(sizes) if request.split.axis < 0 else 0)
        if not 0 <= axis < len(sizes):
            return all(o == sizes for o in outputs)
        return all(o[:axis] + o[axis + 1:] == sizes[:axis] + sizes[axis + 1:]
                   and len(o) == len(sizes) for o in outputs)
    return not outputs or case.expected_error is None


def classify(case: Case) -> V2Case:
    op = case.request.WhichOneof("op")
    request = case.request
    if any(t.strides for t in request.inputs.values()) or any(o.strides for o in request.outputs):
        return V2Case(case, op, "strided")
    if not _derived_sizes_match(case, op):
        return V2Case(case, op, "output sizes")
    return V2Case(case, op, None)


def public_cases(cases_dir: Path) -> list[V2Case]:
    cases = []
    for file in sorted(cases_dir.glob("*.json")):
        for loaded in load_cases(file):
            assert loaded.case is not None, f"{loaded.name}: {loaded.error}"
            cases.append(classify(loaded.case))
    return cases


def parameter_tensors(v2: V2Case) -> list[tuple[str, str, Any]]:
    """The model's parameter tensors for the case: (name, datatype, numpy array),
    INT64 lists and text as one BYTES element; an optional one left out when the
    case leaves it empty (absent reads as the default)."""
    request = v2.case.request
    attrs = getattr(request, v2.op)
    tensors = []
    for name in PARAMETERS[v2.op]:
        value = getattr(attrs, name)
        if name in TEXT_PARAMETERS:
            if value:
                tensors.append((name, "BYTES", np.array([value.encode()], dtype=np.object_)))
            continue
        values = [value] if isinstance(value, int) else list(value)
        if not values and name not in ("begin", "end", "sizes"):
            continue
        tensors.append((name, "INT64", np.array(values, dtype=np.int64)))
    if v2.op == "split":
        tensors.append(("split", "INT64", np.array(split_sizes(request), dtype=np.int64)))
    return tensors


def split_sizes(request) -> list[int]:
    """split's "split" input: each output's size along the axis (the rest of its
    sizes are the input's)."""
    rank = len(request.inputs["input"].sizes)
    axis = request.split.axis + (rank if request.split.axis < 0 else 0)
    return [o.sizes[axis] if 0 <= axis < len(o.sizes) else 1 for o in request.outputs]


def run_public_cases(
    cases_dir: Path, case_count: int, infer: Callable[[V2Case], Any],
    status_of: Callable[[str], str], check: Callable[[V2Case, Any], None],
) -> None:
    """Runs every public case no rule excludes through `infer` (a tritonclient
    call returning its result): a case that expects an error must fail with
    `status_of(code)`, the status its client gives for that gRPC code name; any
    other must pass `check(case, result)`. Asserts the exclusion counts, then
    that no case failed, listing every failure."""
    cases = public_cases(cases_dir)
    assert len(cases) == case_count
    excluded = {rule: sum(c.excluded == rule for c in cases) for rule in EXPECTED_EXCLUDED}
    assert excluded == EXPECTED_EXCLUDED
    failures = []
    ran = 0
    for v2 in cases:
        if v2.excluded:
            continue
        ran += 1
        name = v2.case.name
        try:
            result = infer(v2)
        except InferenceServerException as error:
            if v2.case.expected_error is None:
                failures.append(f"{name}: {error.status()} {error.message()}")
            elif error.status() != status_of(v2.case.expected_error):
                failures.append(f"{name}: expected {v2.case.expected_error}, got "
                                f"{error.status()} {error.message()}")
            continue
        if v2.case.expected_error is not None:
            failures.append(f"{name}: expected {v2.case.expected_error}, got outputs")
            continue
        try:
            check(v2, result)
        except AssertionError as error:
            failures.append(f"{name}: {error}")
    assert failures == [], "\n".join(failures)
    assert ran == case_count - sum(EXPECTED_EXCLUDED.values())
