"""The Open Inference Protocol's system shared memory extension over HTTP/REST,
through a third-party client: tritonclient's shared memory utilities make and
fill a POSIX shared memory region, tritonclient.http registers it with the real
tensord (/v2/systemsharedmemory/...), and public conformance cases run with
their data inputs read from the region and their outputs written into it,
compared byte for byte; then it is unregistered. test_v2_grpc_shm.py does the
same over gRPC; the cases and region layout are v2_shm.py's, the v2 inputs
test_v2_http's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from conftest import Tensord
from tensorop_client.tensors import numpy_dtype
from test_v2_http import _inputs
from v2_shm import (
    CASES_PER_OPERATOR,
    REGION_BYTES,
    place_in_region,
    registered_region,
    shm,
    shm_cases,
)


@pytest.fixture
def v2_http(tensord: Tensord) -> triton.InferenceServerClient:
    client = triton.InferenceServerClient(tensord.http_address)
    yield client
    client.close()


@pytest.fixture
def http_region(v2_http: triton.InferenceServerClient):
    """A 1 MiB region "v2httpshm" registered over HTTP (v2_shm.registered_region)."""
    with registered_region(v2_http, "v2httpshm") as handle:
        yield handle


def test_public_cases_through_system_shared_memory_over_http(
    v2_http: triton.InferenceServerClient, http_region, cases_dir: Path
) -> None:
    cases = shm_cases(cases_dir)
    assert len(cases) == 12 * CASES_PER_OPERATOR
    for v2 in cases:
        name = v2.case.name
        # Parameter tensors travel in the request, as binary parts.
        inputs = _inputs(v2, binary=True)
        outputs, placed = place_in_region(v2, inputs, http_region, "v2httpshm",
                                          triton.InferRequestedOutput)
        result = v2_http.infer(v2.op, inputs, outputs=outputs, request_id=name,
                               parameters={"backend": "cpu"})
        response = result.get_response()
        assert len(response["outputs"]) == len(v2.case.expected_outputs), name
        pairs = zip(v2.case.expected_outputs, response["outputs"], strict=True)
        for k, (want, got) in enumerate(pairs):
            assert got["name"] == outputs[k].name(), name
            assert list(got["shape"]) == want.sizes, name
            assert "data" not in got, name
            assert got["parameters"]["shared_memory_region"] == "v2httpshm", name
            assert got["parameters"]["shared_memory_byte_size"] == len(want.data), name
            assert got["parameters"].get("shared_memory_offset", 0) == placed[k], name
            dtype = numpy_dtype(want.dtype)
            contents = shm.get_contents_as_numpy(http_region, dtype, want.sizes,
                                                 offset=placed[k])
            assert contents.tobytes() == want.data, name


def test_register_status_and_unregister_over_http(
    v2_http: triton.InferenceServerClient, http_region
) -> None:
    key = f"/tensorop-v2httpshm-{os.getpid()}"
    assert "system_shared_memory" in v2_http.get_server_metadata()["extensions"]
    status = v2_http.get_system_shared_memory_status("v2httpshm")
    assert status == [{"name": "v2httpshm", "key": key.lstrip("/"), "offset": 0,
                       "byte_size": REGION_BYTES}]
    # A second region on the same object, from an offset.
    v2_http.register_system_shared_memory("v2httpshm-tail", key, 4096,
                                          offset=REGION_BYTES - 4096)
    status = v2_http.get_system_shared_memory_status()
    assert [region["name"] for region in status] == ["v2httpshm", "v2httpshm-tail"]
    assert status[1]["offset"] == REGION_BYTES - 4096
    v2_http.unregister_system_shared_memory("v2httpshm-tail")

    with pytest.raises(InferenceServerException) as error:
        v2_http.register_system_shared_memory("v2httpshm", key, 16)
    assert error.value.status() == "409"
    assert 'shared memory region "v2httpshm" is already registered' in error.value.message()

    with pytest.raises(InferenceServerException) as error:
        v2_http.get_cuda_shared_memory_status()
    assert error.value.status() == "501"
    assert "tensord serves no CUDA shared memory" in error.value.message()

    v2_http.unregister_system_shared_memory("v2httpshm")
    assert v2_http.get_system_shared_memory_status() == []
    inputs = [triton.InferInput("input", [4], "FP32")]
    inputs[0].set_shared_memory("v2httpshm", 16)
    for name in ("offsets", "window_sizes", "window_strides"):
        inputs.append(triton.InferInput(name, [1], "INT64"))
        inputs[-1].set_data_from_numpy(np.array([0 if name == "offsets" else 1], np.int64))
    with pytest.raises(InferenceServerException) as error:
        v2_http.infer("slice", inputs)
    assert error.value.status() == "404"
    assert 'shared memory region "v2httpshm" is not registered' in error.value.message()
