"""Results against conformance cases, bit for bit. Mirrors the C++ client's
case_compare.cc.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.cases import Case, HostTensor
from tensorop_client.client import Result, TensorOpError
from tensorop_client.element_codec import DTYPE_NAMES, element_text
from tensorop_client.tensors import wire_dtype


def _compare_tensor(expected: HostTensor, requested: pb.OutputDesc | None, got: np.ndarray) -> str:
    """What differs between one expected output and the returned one, or ""."""
    got_dtype = wire_dtype(got.dtype)
    if got_dtype != expected.dtype:
        return (
            f"dtype is {DTYPE_NAMES[got_dtype]} ({got_dtype}), "
            f"expected {DTYPE_NAMES[expected.dtype]}"
        )
    if list(got.shape) != expected.sizes:
        return f"sizes are {list(got.shape)}, expected {expected.sizes}"
    got_strides = [s // got.itemsize for s in got.strides]
    if requested is not None and requested.strides and got_strides != list(requested.strides):
        return f"strides are {got_strides}, expected {list(requested.strides)}"
    # Bits, not values: NaN payloads and -0.0 count. Viewing as unsigned integers
    # of the same width reads every element through the returned strides.
    bits = np.dtype(f"<u{got.itemsize}")
    got_bits = got.view(bits)
    expected_bits = np.frombuffer(expected.data, dtype=bits).reshape(expected.sizes)
    differ = got_bits != expected_bits
    count = int(np.count_nonzero(differ))
    if count == 0:
        return ""
    # The first differing element in row-major order (rank 0 included).
    first = tuple(int(c) for c in np.unravel_index(int(np.argmax(differ)), differ.shape))
    expected_values = np.frombuffer(expected.data, dtype=got.dtype).reshape(expected.sizes)
    got_text, expected_text = element_text(got[first]), element_text(expected_values[first])
    if got_text == expected_text:  # NaN payloads, say: show the bits
        width = 2 * got.itemsize
        got_text += f" (bits 0x{int(got_bits[first]):0{width}x})"
        expected_text += f" (bits 0x{int(expected_bits[first]):0{width}x})"
    return (
        f"element {list(first)} is {got_text}, expected {expected_text} "
        f"({count} of {differ.size} elements differ)"
    )


def find_mismatch(case: Case, got: Result | TensorOpError) -> str | None:
    """Compares a result with what the case expects, exactly: an expected error by
    its code name; else the number of outputs and for each its dtype, sizes,
    strides (where the case asked for output strides) and the bits of every
    logical element read through the returned strides. None on a match."""
    if case.expected_error is not None:
        if isinstance(got, Result):
            return (
                f"expected {case.expected_error}, got {len(got.outputs)} outputs from {got.backend}"
            )
        if got.code != case.expected_error:
            return f"expected {case.expected_error}, got {got}"
        return None
    if isinstance(got, TensorOpError):
        return f"expected outputs, got {got}"
    if len(got.outputs) != len(case.expected_outputs):
        return f"expected {len(case.expected_outputs)} outputs, got {len(got.outputs)}"
    differences = []
    for i, (expected, array) in enumerate(zip(case.expected_outputs, got.outputs, strict=True)):
        requested = case.request.outputs[i] if i < len(case.request.outputs) else None
        difference = _compare_tensor(expected, requested, array)
        if difference:
            differences.append(f"outputs[{i}]: {difference}")
    return "; ".join(differences) or None


def run_case(
    call: Callable[[pb.RunRequest], Result], case: Case, backend: int
) -> Result | TensorOpError:
    """Sends one case's request with `backend`; the result or the error."""
    request = pb.RunRequest()
    request.CopyFrom(case.request)
    request.backend = backend  # type: ignore[assignment]  # a Backend value
    try:
        return call(request)
    except TensorOpError as e:
        return e
