"""The Open Inference Protocol's system shared memory extension through a
third-party client: tritonclient's shared memory utilities make and fill a POSIX
shared memory region, tritonclient.grpc registers it with the real tensord, and
public conformance cases run with their data inputs read from the region and
their outputs written into it, compared byte for byte; then it is unregistered.

The cases and their v2 inputs come from test_v2_grpc (the contiguous public
cases, the same classification); v2_shm.py holds what test_v2_http_shm.py
shares.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from conftest import Tensord
from tensorop_client.tensors import numpy_dtype
from test_v2_grpc import _inputs
from v2_shm import (
    CASES_PER_OPERATOR,
    REGION_BYTES,
    place_in_region,
    registered_region,
    shm,
    shm_cases,
)


@pytest.fixture
def v2_client(tensord: Tensord) -> triton.InferenceServerClient:
    client = triton.InferenceServerClient(tensord.address)
    yield client
    client.close()


@pytest.fixture
def region(v2_client: triton.InferenceServerClient):
    """A registered 1 MiB region "v2shm" (v2_shm.registered_region)."""
    with registered_region(v2_client, "v2shm") as handle:
        yield handle


def test_public_cases_through_system_shared_memory(
    v2_client: triton.InferenceServerClient, region, cases_dir: Path
) -> None:
    cases = shm_cases(cases_dir)
    assert len(cases) == 12 * CASES_PER_OPERATOR
    for v2 in cases:
        name = v2.case.name
        inputs = _inputs(v2)
        outputs, placed = place_in_region(v2, inputs, region, "v2shm",
                                          triton.InferRequestedOutput)
        result = v2_client.infer(v2.op, inputs, outputs=outputs, request_id=name,
                                 parameters={"backend": "cpu"})
        response = result.get_response()
        assert len(response.outputs) == len(v2.case.expected_outputs), name
        pairs = zip(v2.case.expected_outputs, response.outputs, strict=True)
        for k, (want, got) in enumerate(pairs):
            assert got.name == outputs[k].name(), name
            assert list(got.shape) == want.sizes, name
            assert got.parameters["shared_memory_region"].string_param == "v2shm", name
            assert got.parameters["shared_memory_byte_size"].int64_param == len(want.data), name
            assert response.raw_output_contents[k] == b"", name
            dtype = numpy_dtype(want.dtype)
            contents = shm.get_contents_as_numpy(region, dtype, want.sizes, offset=placed[k])
            assert contents.tobytes() == want.data, name


def test_register_status_and_unregister(
    v2_client: triton.InferenceServerClient, region
) -> None:
    key = f"/tensorop-v2shm-{os.getpid()}"
    status = v2_client.get_system_shared_memory_status("v2shm")
    assert list(status.regions) == ["v2shm"]
    assert status.regions["v2shm"].key == key.lstrip("/")
    assert status.regions["v2shm"].byte_size == REGION_BYTES
    # A second region on the same object, from an offset.
    v2_client.register_system_shared_memory("v2shm-tail", key, 4096, offset=REGION_BYTES - 4096)
    status = v2_client.get_system_shared_memory_status()
    assert sorted(status.regions) == ["v2shm", "v2shm-tail"]
    assert status.regions["v2shm-tail"].offset == REGION_BYTES - 4096
    v2_client.unregister_system_shared_memory("v2shm-tail")

    with pytest.raises(InferenceServerException) as error:
        v2_client.register_system_shared_memory("v2shm", key, 16)
    assert error.value.status() == "StatusCode.ALREADY_EXISTS"
    assert 'shared memory region "v2shm" is already registered' in error.value.message()

    v2_client.unregister_system_shared_memory("v2shm")
    assert list(v2_client.get_system_shared_memory_status().regions) == []
    inputs = [triton.InferInput("input", [4], "FP32")]
    inputs[0].set_shared_memory("v2shm", 16)
    for name in ("offsets", "window_sizes", "window_strides"):
        inputs.append(triton.InferInput(name, [1], "INT64"))
        inputs[-1].set_data_from_numpy(np.array([0 if name == "offsets" else 1], np.int64))
    with pytest.raises(InferenceServerException) as error:
        v2_client.infer("slice", inputs)
    assert error.value.status() == "StatusCode.NOT_FOUND"
    assert 'shared memory region "v2shm" is not registered' in error.value.message()
