"""What the system shared memory tests share (test_v2_grpc_shm.py over gRPC,
test_v2_http_shm.py over HTTP): tritonclient's shared memory utilities (behind
the pkg_resources shim they need), the region's size and alignment, and the
cases run through it."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import numpy as np

# tritonclient 2.41's shared memory utilities find their C library with
# pkg_resources.resource_filename, and pkg_resources is gone from the pinned
# setuptools (84): that one function, as it behaves for an installed package.
if importlib.util.find_spec("pkg_resources") is None:
    _shim = types.ModuleType("pkg_resources")
    _shim.resource_filename = lambda package, name: os.path.join(  # type: ignore[attr-defined]
        os.path.dirname(importlib.util.find_spec(package).origin), name)
    sys.modules["pkg_resources"] = _shim
import tritonclient.utils.shared_memory as shm  # noqa: E402,F401
from tritonclient.utils import InferenceServerException  # noqa: E402

from tensorop_client.tensors import numpy_dtype  # noqa: E402
from v2_cases import data_inputs, public_cases  # noqa: E402

REGION_BYTES = 1 << 20
ALIGN = 64  # every tensor starts on a multiple of this (and so of its element size)
CASES_PER_OPERATOR = 3


def aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def shm_cases(cases_dir: Path) -> list:
    """The first few passing contiguous public cases of each operator."""
    chosen: dict[str, list] = {}
    for v2 in public_cases(cases_dir):
        if v2.excluded or v2.case.expected_error is not None:
            continue
        if len(chosen.setdefault(v2.op, [])) < CASES_PER_OPERATOR:
            chosen[v2.op].append(v2)
    assert sorted(chosen) == ["expand", "gather", "gather_elements", "join", "pad",
                              "reshape", "scatter_elements", "slice", "split",
                              "strided_slice", "tile", "transpose"]
    return [v2 for op in sorted(chosen) for v2 in chosen[op]]


@contextlib.contextmanager
def registered_region(client, name: str):
    """A REGION_BYTES region `name` (object /tensorop-<name>-<pid>), registered
    through `client` (tritonclient's gRPC or HTTP one); unregistered and
    destroyed afterwards. Yields the shared memory handle."""
    key = f"/tensorop-{name}-{os.getpid()}"
    handle = shm.create_shared_memory_region(name, key, REGION_BYTES)
    try:
        client.register_system_shared_memory(name, key, REGION_BYTES)
        yield handle
    finally:
        try:
            client.unregister_system_shared_memory(name)
        except InferenceServerException:
            pass  # the test unregistered it already
        shm.destroy_shared_memory_region(handle)


def place_in_region(v2, inputs: list, handle, name: str, requested_output) -> tuple[list, list]:
    """Writes case `v2`'s data inputs into region `name` (`handle`), each at its
    own aligned offset, and points `inputs` at them (parameter tensors stay in
    the request); then asks for every expected output in the region after them.
    `requested_output` is the client's InferRequestedOutput class. Returns the
    requested outputs and their offsets."""
    offset = 0
    for item in inputs:
        if item.name() not in data_inputs(v2.op, v2.case.request):
            continue
        tensor = v2.case.request.inputs[item.name()]
        array = np.frombuffer(tensor.data, dtype=numpy_dtype(tensor.dtype))
        shm.set_shared_memory_region(handle, [array], offset=offset)
        item.set_shared_memory(name, len(tensor.data), offset=offset)
        offset = aligned(offset + len(tensor.data))
    outputs = []
    placed = []
    for k, want in enumerate(v2.case.expected_outputs):
        output = requested_output(f"output_{k}" if v2.op == "split" else "output")
        output.set_shared_memory(name, len(want.data), offset=offset)
        outputs.append(output)
        placed.append(offset)
        offset = aligned(offset + len(want.data))
    assert offset <= REGION_BYTES, v2.case.name
    return outputs, placed
