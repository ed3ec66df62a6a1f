"""What the system shared memory tests share (test_v2_grpc_shm.py over gRPC,
test_v2_http_shm.py over HTTP): tritonclient's shared memory utilities (behind
the pkg_resources shim they need), the region's size and alignment, and the
cases run through it."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

# tritonclient 2.41's shared memory utilities find their C library with
# pkg_resources.resource_filename, and pkg_resources is gone from the pinned
# setuptools (84): that one function, as it behaves for an installed package.
if importlib.util.find_spec("pkg_resources") is None:
    _shim = types.ModuleType("pkg_resources")
    _shim.resource_filename = lambda package, name: os.path.join(  # type: ignore[attr-defined]
        os.path.dirname(importlib.util.find_spec(package).origin), name)
    sys.modules["pkg_resources"] = _shim
import tritonclient.utils.shared_memory as shm  # noqa: E402,F401

from v2_cases import public_cases  # noqa: E402

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
    assert sorted(chosen) == ["scatter_elements", "slice", "split", "strided_slice"]
    return [v2 for op in sorted(chosen) for v2 in chosen[op]]
