"""The Open Inference Protocol (KServe v2) over HTTP/REST, through a third-party
client: tritonclient.http runs every contiguous public conformance case against the
real tensord, with tensors as binary parts (the binary tensor data extension) and as
JSON data, and compares the outputs byte for byte. The cases run and the rules that
exclude the others are test_v2_grpc.py's (v2_cases.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from conftest import Tensord
from tensorop_client.cases import HostTensor
from tensorop_client.tensors import numpy_dtype
from v2_cases import V2Case, data_inputs, parameter_tensors, run_public_cases

# The HTTP status of each gRPC code a case expects (server/wire/status_map.cc ToHttpStatus).
HTTP_STATUS = {"INVALID_ARGUMENT": "400", "NOT_FOUND": "404", "RESOURCE_EXHAUSTED": "429",
               "UNAVAILABLE": "503", "UNIMPLEMENTED": "501", "OUT_OF_RANGE": "400",
               "FAILED_PRECONDITION": "400"}


def _post_json_infer(tensord: Tensord, model: str, body: dict[str, Any]) -> Any:
    """POST /v2/models/MODEL/infer with a JSON body, as curl would; the JSON answer."""
    request = urllib.request.Request(
        f"http://{tensord.http_address}/v2/models/{model}/infer", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


def _inputs(v2: V2Case, binary: bool) -> list[triton.InferInput]:
    request = v2.case.request
    inputs = []
    for name in data_inputs(v2.op, request):
        if name not in request.inputs:
            continue
        tensor = request.inputs[name]
        array = np.frombuffer(tensor.data, dtype=numpy_dtype(tensor.dtype))
        item = triton.InferInput(name, list(tensor.sizes), triton.np_to_triton_dtype(array.dtype))
        # The case's elements as they are, even a count that does not match the
        # shape (the server must say so): set behind tritonclient's shape check.
        if binary:
            item._raw_data = tensor.data
            item._parameters["binary_data_size"] = len(tensor.data)
        else:
            item._data = [v.item() for v in array]
        inputs.append(item)
    for name, datatype, array in parameter_tensors(v2):
        item = triton.InferInput(name, list(array.shape), datatype)
        item.set_data_from_numpy(array, binary_data=binary)
        inputs.append(item)
    return inputs


def _outputs(v2: V2Case, binary: bool) -> list[triton.InferRequestedOutput]:
    count = len(v2.case.request.outputs) if v2.op == "split" else 1
    names = [f"output_{k}" for k in range(count)] if v2.op == "split" else ["output"]
    return [triton.InferRequestedOutput(name, binary_data=binary) for name in names]


def _compare(expected: list[HostTensor], result: triton.InferResult, op: str) -> None:
    outputs = result.get_response()["outputs"]
    assert len(outputs) == len(expected)
    for k, (want, got) in enumerate(zip(expected, outputs, strict=True)):
        assert got["name"] == (f"output_{k}" if op == "split" else "output")
        assert got["datatype"] == triton.np_to_triton_dtype(numpy_dtype(want.dtype))
        assert list(got["shape"]) == want.sizes
        array = result.as_numpy(got["name"])
        assert array.astype(numpy_dtype(want.dtype), copy=False).tobytes() == want.data


@pytest.fixture(scope="module")
def http_client(tensord: Tensord) -> triton.InferenceServerClient:
    client = triton.InferenceServerClient(tensord.http_address)
    yield client
    client.close()


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_every_contiguous_public_case_passes(
    http_client: triton.InferenceServerClient, cases_dir: Path, case_count: int, backend: str,
    binary: bool,
) -> None:
    def check(v2: V2Case, result: triton.InferResult) -> None:
        _compare(v2.case.expected_outputs, result, v2.op)
        assert result.get_response()["parameters"]["backend"].startswith(backend)

    run_public_cases(
        cases_dir, case_count,
        lambda v2: http_client.infer(v2.op, _inputs(v2, binary), model_version="1",
                                     request_id=v2.case.name, outputs=_outputs(v2, binary),
                                     parameters={"backend": backend}),
        HTTP_STATUS.__getitem__, check)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_int32_parameters_are_accepted(
    http_client: triton.InferenceServerClient, binary: bool
) -> None:
    """INT32 parameter tensors, as binary parts and as JSON data, work as INT64 ones do."""
    data = triton.InferInput("input", [2, 3], "FP32")
    data.set_data_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), binary_data=binary)
    axis = triton.InferInput("axis", [1], "INT32")
    axis.set_data_from_numpy(np.array([1], dtype=np.int32), binary_data=binary)
    split = triton.InferInput("split", [2], "INT32")
    split.set_data_from_numpy(np.array([1, 2], dtype=np.int32), binary_data=binary)
    result = http_client.infer("split", [data, axis, split])
    assert result.as_numpy("output_0").tolist() == [[0], [3]]
    assert result.as_numpy("output_1").tolist() == [[1, 2], [4, 5]]


def test_bf16_in_binary_parts_and_as_json(
    http_client: triton.InferenceServerClient, tensord: Tensord
) -> None:
    """BF16 as tritonclient sends it (float32 arrays, their upper halves in binary
    parts), and as JSON numbers rounded to the nearest bfloat16."""
    data = triton.InferInput("input", [2, 2], "BF16")
    data.set_data_from_numpy(np.array([[1.5, -2.0], [0.5, 65280.0]], dtype=np.float32))
    axis = triton.InferInput("axis", [1], "INT64")
    axis.set_data_from_numpy(np.array([0], dtype=np.int64))
    split = triton.InferInput("split", [2], "INT64")
    split.set_data_from_numpy(np.array([1, 1], dtype=np.int64))
    result = http_client.infer("split", [data, axis, split])
    assert result.get_output("output_1")["datatype"] == "BF16"
    assert result.as_numpy("output_1").tolist() == [[0.5, 65280.0]]

    body = {"inputs": [
        {"name": "input", "datatype": "BF16", "shape": [4], "data": [0.1, 1.0, 65280, -2.5]},
        {"name": "axis", "datatype": "INT64", "shape": [1], "data": [0]},
        {"name": "split", "datatype": "INT64", "shape": [2], "data": [2, 2]},
    ]}
    answer = _post_json_infer(tensord, "split", body)
    # 0.1 rounds to the nearest bfloat16, 0.10009765625.
    assert answer["outputs"][0] == {
        "name": "output_0", "datatype": "BF16", "shape": [2], "data": [0.10009765625, 1.0]}
    assert answer["outputs"][1]["data"] == [65280.0, -2.5]


def test_health_metadata_and_repository(http_client: triton.InferenceServerClient) -> None:
    assert http_client.is_server_live()
    assert http_client.is_server_ready()
    assert http_client.is_model_ready("strided_slice", "1")
    assert http_client.get_server_metadata()["name"] == "tensord"
    model = http_client.get_model_metadata("scatter_elements")
    assert [t["name"] for t in model["inputs"]] == ["input", "indices", "updates", "axis"]
    assert [t["name"] for t in model["outputs"]] == ["output"]
    for name, parameter in [("transpose", "perm"), ("reshape", "sizes"), ("expand", "sizes"),
                            ("tile", "repeats")]:
        assert http_client.is_model_ready(name, "1")
        model = http_client.get_model_metadata(name)
        assert [(t["name"], t["datatype"], t["shape"]) for t in model["inputs"]] == [
            ("input", "FP32", [-1]), (parameter, "INT64", [-1])]
        assert [t["name"] for t in model["outputs"]] == ["output"]
    # The gathers: the input, the indices (INT64 listed, as scatter_elements'), the axis.
    for name in ("gather", "gather_elements"):
        assert http_client.is_model_ready(name, "1")
        model = http_client.get_model_metadata(name)
        assert [(t["name"], t["datatype"], t["shape"]) for t in model["inputs"]] == [
            ("input", "FP32", [-1]), ("indices", "INT64", [-1]), ("axis", "INT64", [1])]
        assert [t["name"] for t in model["outputs"]] == ["output"]
    # join: inputs_0 listed, the further numbered inputs in its config's "inputs".
    model = http_client.get_model_metadata("join")
    assert [(t["name"], t["datatype"], t["shape"]) for t in model["inputs"]] == [
        ("inputs_0", "FP32", [-1]), ("axis", "INT64", [1])]
    index = http_client.get_model_repository_index()
    assert [(m["name"], m["version"], m["state"]) for m in index] == [
        ("slice", "1", "READY"), ("strided_slice", "1", "READY"), ("split", "1", "READY"),
        ("scatter_elements", "1", "READY"), ("transpose", "1", "READY"),
        ("reshape", "1", "READY"), ("expand", "1", "READY"), ("tile", "1", "READY"),
        ("gather", "1", "READY"), ("gather_elements", "1", "READY"), ("join", "1", "READY"),
        ("pad", "1", "READY"),
    ]


def test_model_config_as_tritonclient_reads_it(
    http_client: triton.InferenceServerClient, tensord: Tensord
) -> None:
    """GET /v2/models/{m}[/versions/1]/config: Triton's ModelConfig as its HTTP API
    writes it (field names of model_config.proto, TYPE_ data types, numeric dims)."""
    config = http_client.get_model_config("slice")
    assert {k: config[k] for k in ("name", "platform", "backend", "max_batch_size")} == {
        "name": "slice", "platform": "tensorop", "backend": "tensorop", "max_batch_size": 0}
    assert config["input"][0] == {"name": "input", "data_type": "TYPE_FP32", "dims": [-1]}
    assert [i["name"] for i in config["input"]] == [
        "input", "offsets", "window_sizes", "window_strides"]
    assert config["output"] == [{"name": "output", "data_type": "TYPE_FP32", "dims": [-1]}]
    assert config["parameters"]["offsets.datatypes"] == {"string_value": "INT64, INT32"}
    assert http_client.get_model_config("slice", "1") == config
    # transpose's perm may be left out (reversed); reshape's and expand's sizes and
    # tile's repeats may not.
    for name, parameter, optional in [
        ("transpose", "perm", True), ("reshape", "sizes", False), ("expand", "sizes", False),
        ("tile", "repeats", False),
    ]:
        config = http_client.get_model_config(name)
        assert config["input"] == [
            {"name": "input", "data_type": "TYPE_FP32", "dims": [-1]},
            {"name": parameter, "data_type": "TYPE_INT64", "dims": [-1]}
            | ({"optional": True} if optional else {})]
        assert config["output"] == [{"name": "output", "data_type": "TYPE_FP32", "dims": [-1]}]
        assert config["parameters"][f"{parameter}.datatypes"] == {"string_value": "INT64, INT32"}
    # The gathers' axis is required; their indices take the four index datatypes.
    for name in ("gather", "gather_elements"):
        config = http_client.get_model_config(name)
        assert config["input"] == [
            {"name": "input", "data_type": "TYPE_FP32", "dims": [-1]},
            {"name": "indices", "data_type": "TYPE_INT64", "dims": [-1]},
            {"name": "axis", "data_type": "TYPE_INT64", "dims": [1]}]
        assert config["parameters"]["indices.datatypes"] == {
            "string_value": "INT64, INT32, UINT64, UINT32"}
    with pytest.raises(InferenceServerException) as error:
        http_client.get_model_config("slice", "2")
    assert error.value.status() == "404"
    assert 'has no version "2"' in error.value.message()


def test_errors_have_the_expected_status(http_client: triton.InferenceServerClient) -> None:
    item = triton.InferInput("input", [1], "FP32")
    item.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    with pytest.raises(InferenceServerException) as error:
        http_client.infer("resnet50", [item])
    assert error.value.status() == "404"
    assert 'model "resnet50" is not served here' in error.value.message()

    offsets = triton.InferInput("offsets", [1], "INT64")
    offsets.set_data_from_numpy(np.array([0], dtype=np.int64))
    with pytest.raises(InferenceServerException) as error:
        http_client.infer("slice", [item, offsets])
    assert error.value.status() == "400"
    assert 'slice: input "window_sizes" is missing' in error.value.message()


def test_a_route_asked_with_another_method_is_405_with_allow(tensord: Tensord) -> None:
    """A path served for other methods answers 405 naming them in Allow (not 404);
    a path served for none stays 404."""
    base = f"http://{tensord.http_address}"
    for method, path, allowed in [
        ("GET", "/v2/models/slice/infer", "POST"),
        ("GET", "/v2/models/slice/versions/1/infer", "POST"),
        ("POST", "/v2/models/split", "GET"),
        ("DELETE", "/v2/health/live", "GET"),
    ]:
        request = urllib.request.Request(base + path, method=method,
                                         data=b"{}" if method == "POST" else None)
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == 405, (method, path)
        assert error.value.headers["Allow"] == allowed, (method, path)
        body = json.loads(error.value.read())
        assert body["error"] == f"{method} {path} is not served; use {allowed}"

    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(base + "/v2/models/slice/nothing", timeout=30)
    assert error.value.code == 404
    assert error.value.headers["Allow"] is None


def test_bool_and_fp16_as_json(tensord: Tensord) -> None:
    """JSON data as curl would send it: BOOL as true/false, FP16 as numbers."""
    body = {"inputs": [
        {"name": "input", "datatype": "BOOL", "shape": [2, 2],
         "data": [[True, False], [False, True]]},
        {"name": "axis", "datatype": "INT64", "shape": [1], "data": [1]},
        {"name": "split", "datatype": "INT64", "shape": [2], "data": [1, 1]},
    ]}
    answer = _post_json_infer(tensord, "split", body)
    assert [o["data"] for o in answer["outputs"]] == [[True, False], [False, True]]
    assert answer["outputs"][0]["datatype"] == "BOOL"

    body["inputs"][0] = {"name": "input", "datatype": "FP16", "shape": [2, 2],
                         "data": [0.1, 1.0, 65504, -2.5]}
    answer = _post_json_infer(tensord, "split", body)
    # 0.1 rounds to the nearest half, 0.0999755859375.
    assert answer["outputs"][0]["data"] == [0.0999755859375, 65504.0]
    assert answer["outputs"][1]["data"] == [1.0, -2.5]
