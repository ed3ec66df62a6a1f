"""The Open Inference Protocol (KServe v2) over gRPC, through a third-party client:
tritonclient's InferenceServerClient runs every contiguous public conformance case
against the real tensord and compares the outputs byte for byte.

A case is run unless a stated rule excludes it (the excluded are counted, and the
count is asserted, so none is skipped silently):
  - strided: an input or an output has explicit strides (v2 tensors are row-major
    contiguous);
  - output sizes: the case chooses output sizes the v2 model derives itself and
    differ from them (slice: the whole window, 1 + (window_size - 1) / |stride|
    per dimension; split: the input's sizes with the axis replaced), or, for
    the operators that derive their output (strided_slice, scatter_elements,
    transpose, reshape, expand, tile, gather, gather_elements, join, pad), an error case that
    gives output sizes (a v2 request cannot carry them).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import InferenceServerException

from conftest import Tensord
from tensorop_client.cases import HostTensor
from tensorop_client.tensors import numpy_dtype
from v2_cases import V2Case, data_inputs, parameter_tensors, run_public_cases


def _inputs(v2: V2Case) -> list[triton.InferInput]:
    request = v2.case.request
    inputs = []
    for name in data_inputs(v2.op, request):
        if name not in request.inputs:
            continue
        tensor = request.inputs[name]
        array = np.frombuffer(tensor.data, dtype=numpy_dtype(tensor.dtype))
        array = array.reshape(list(tensor.sizes)) if array.size == np.prod(tensor.sizes) else array
        datatype = triton.np_to_triton_dtype(array.dtype)
        item = triton.InferInput(name, list(tensor.sizes), datatype)
        # Raw bytes as the case has them, even a count that does not match the
        # shape (the server must say so).
        item._raw_content = tensor.data
        item._input.ClearField("contents")
        inputs.append(item)
    for name, datatype, array in parameter_tensors(v2):
        item = triton.InferInput(name, list(array.shape), datatype)
        item.set_data_from_numpy(array)
        inputs.append(item)
    return inputs


def _compare(expected: list[HostTensor], result: triton.InferResult, op: str) -> None:
    response = result.get_response()
    assert len(response.outputs) == len(expected)
    for k, (want, got) in enumerate(zip(expected, response.outputs, strict=True)):
        assert got.name == (f"output_{k}" if op == "split" else "output")
        assert got.datatype == triton.np_to_triton_dtype(numpy_dtype(want.dtype))
        assert list(got.shape) == want.sizes
        assert response.raw_output_contents[k] == want.data


@pytest.fixture(scope="module")
def v2_client(tensord: Tensord) -> triton.InferenceServerClient:
    client = triton.InferenceServerClient(tensord.address)
    yield client
    client.close()


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_every_contiguous_public_case_passes(
    v2_client: triton.InferenceServerClient, cases_dir: Path, case_count: int, backend: str
) -> None:
    def check(v2: V2Case, result: triton.InferResult) -> None:
        _compare(v2.case.expected_outputs, result, v2.op)
        assert result.get_response().parameters["backend"].string_param.startswith(backend)

    run_public_cases(
        cases_dir, case_count,
        lambda v2: v2_client.infer(v2.op, _inputs(v2), model_version="1",
                                   request_id=v2.case.name, parameters={"backend": backend}),
        lambda code: f"StatusCode.{code}", check)


def test_health_metadata_and_repository(v2_client: triton.InferenceServerClient) -> None:
    assert v2_client.is_server_live()
    assert v2_client.is_server_ready()
    assert v2_client.is_model_ready("strided_slice", "1")
    metadata = v2_client.get_server_metadata()
    assert metadata.name == "tensord"
    model = v2_client.get_model_metadata("scatter_elements")
    assert [t.name for t in model.inputs] == ["input", "indices", "updates", "axis"]
    assert [t.name for t in model.outputs] == ["output"]
    for name, parameter in [("transpose", "perm"), ("reshape", "sizes"), ("expand", "sizes"),
                            ("tile", "repeats")]:
        assert v2_client.is_model_ready(name, "1")
        model = v2_client.get_model_metadata(name)
        assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
            ("input", "FP32", [-1]), (parameter, "INT64", [-1])]
        assert [t.name for t in model.outputs] == ["output"]
    # The gathers: the input, the indices (INT64 listed, as scatter_elements'), the axis.
    for name in ("gather", "gather_elements"):
        assert v2_client.is_model_ready(name, "1")
        model = v2_client.get_model_metadata(name)
        assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
            ("input", "FP32", [-1]), ("indices", "INT64", [-1]), ("axis", "INT64", [1])]
        assert [t.name for t in model.outputs] == ["output"]
    # join: inputs_0 listed, the further numbered inputs in its config's "inputs".
    model = v2_client.get_model_metadata("join")
    assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
        ("inputs_0", "FP32", [-1]), ("axis", "INT64", [1])]
    index = v2_client.get_model_repository_index()
    assert [(m.name, m.version, m.state) for m in index.models] == [
        ("slice", "1", "READY"), ("strided_slice", "1", "READY"), ("split", "1", "READY"),
        ("scatter_elements", "1", "READY"), ("transpose", "1", "READY"),
        ("reshape", "1", "READY"), ("expand", "1", "READY"), ("tile", "1", "READY"),
        ("gather", "1", "READY"), ("gather_elements", "1", "READY"), ("join", "1", "READY"),
        ("pad", "1", "READY"),
    ]


def test_model_config_as_tritonclient_reads_it(v2_client: triton.InferenceServerClient) -> None:
    """Triton's ModelConfig: the metadata's tensors with Triton's data types and
    dims, no batch dimension, and what each tensor takes in the parameters."""
    config = v2_client.get_model_config("split").config
    assert (config.name, config.platform, config.backend, config.max_batch_size) == (
        "split", "tensorop", "tensorop", 0)
    assert [(i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims))
            for i in config.input] == [
        ("input", "TYPE_FP32", [-1]), ("axis", "TYPE_INT64", [1]), ("split", "TYPE_INT64", [-1])]
    assert [o.name for o in config.output] == ["output_0"]
    assert config.parameters["outputs"].string_value == (
        "output_0 ... output_{k-1}, one per entry of the split tensor")
    assert "BF16" in config.parameters["input.datatypes"].string_value
    assert config.parameters["axis.datatypes"].string_value == "INT64, INT32"
    as_json = v2_client.get_model_config("strided_slice", "1", as_json=True)["config"]
    assert [i.get("optional", False) for i in as_json["input"]][:5] == [
        False, False, False, True, True]
    # transpose's perm may be left out (reversed); reshape's and expand's sizes and
    # tile's repeats may not.
    for name, parameter, optional in [
        ("transpose", "perm", True), ("reshape", "sizes", False), ("expand", "sizes", False),
        ("tile", "repeats", False),
    ]:
        config = v2_client.get_model_config(name, "1").config
        assert [(i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims), i.optional)
                for i in config.input] == [
            ("input", "TYPE_FP32", [-1], False), (parameter, "TYPE_INT64", [-1], optional)]
        assert [o.name for o in config.output] == ["output"]
        assert config.parameters[f"{parameter}.datatypes"].string_value == "INT64, INT32"
    # The gathers' axis is required; their indices take the four index datatypes.
    for name in ("gather", "gather_elements"):
        config = v2_client.get_model_config(name, "1").config
        assert [(i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims), i.optional)
                for i in config.input] == [
            ("input", "TYPE_FP32", [-1], False), ("indices", "TYPE_INT64", [-1], False),
            ("axis", "TYPE_INT64", [1], False)]
        assert config.parameters["indices.datatypes"].string_value == (
            "INT64, INT32, UINT64, UINT32")
        assert config.parameters["axis.datatypes"].string_value == "INT64, INT32"
    # pad's mode and value are text: one BYTES element (Triton's TYPE_STRING), optional.
    config = v2_client.get_model_config("pad", "1").config
    assert [(i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims), i.optional)
            for i in config.input] == [
        ("input", "TYPE_FP32", [-1], False), ("start_padding", "TYPE_INT64", [-1], False),
        ("end_padding", "TYPE_INT64", [-1], False), ("mode", "TYPE_STRING", [1], True),
        ("value", "TYPE_STRING", [1], True)]
    assert config.parameters["value.datatypes"].string_value == "BYTES"
    with pytest.raises(InferenceServerException) as error:
        v2_client.get_model_config("resnet50")
    assert error.value.status() == "StatusCode.NOT_FOUND"


def test_unknown_model_is_not_found(v2_client: triton.InferenceServerClient) -> None:
    item = triton.InferInput("input", [1], "FP32")
    item.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    with pytest.raises(InferenceServerException) as error:
        v2_client.infer("resnet50", [item])
    assert error.value.status() == "StatusCode.NOT_FOUND"
    assert 'model "resnet50" is not served here' in error.value.message()


def test_typed_contents_and_bool(v2_client: triton.InferenceServerClient) -> None:
    """tritonclient sends BOOL as raw bytes; typed contents go through a hand-built
    request on the same stub."""
    data = triton.InferInput("input", [2, 2], "BOOL")
    data.set_data_from_numpy(np.array([[True, False], [False, True]]))
    axis = triton.InferInput("axis", [1], "INT64")
    axis.set_data_from_numpy(np.array([1], dtype=np.int64))
    split = triton.InferInput("split", [2], "INT64")
    split.set_data_from_numpy(np.array([1, 1], dtype=np.int64))
    result = v2_client.infer("split", [data, axis, split])
    assert result.as_numpy("output_0").tolist() == [[True], [False]]
    assert result.as_numpy("output_1").tolist() == [[False], [True]]

    request = service_pb2.ModelInferRequest(model_name="slice")
    for name, datatype, shape, values in [
        ("input", "INT32", [4], [5, -6, 7, -8]),
        ("offsets", "INT64", [1], [1]),
        ("window_sizes", "INT64", [1], [3]),
        ("window_strides", "INT64", [1], [-1]),
    ]:
        tensor = request.inputs.add(name=name, datatype=datatype, shape=shape)
        if datatype == "INT32":
            tensor.contents.int_contents.extend(values)
        else:
            tensor.contents.int64_contents.extend(values)
    response = v2_client._client_stub.ModelInfer(request)
    assert np.frombuffer(response.raw_output_contents[0], dtype=np.int32).tolist() == [-8, 7, -6]


def test_bf16_as_tritonclient_sends_it(v2_client: triton.InferenceServerClient) -> None:
    """tritonclient takes BF16 as float32 arrays and sends their upper halves; the
    outputs come back as BF16, which it reads back into float32."""
    values = np.array([[1.5, -2.0], [0.5, 65280.0]], dtype=np.float32)  # exact in bfloat16
    data = triton.InferInput("input", [2, 2], "BF16")
    data.set_data_from_numpy(values)
    axis = triton.InferInput("axis", [1], "INT64")
    axis.set_data_from_numpy(np.array([1], dtype=np.int64))
    split = triton.InferInput("split", [2], "INT64")
    split.set_data_from_numpy(np.array([1, 1], dtype=np.int64))
    result = v2_client.infer("split", [data, axis, split])
    assert result.get_output("output_0").datatype == "BF16"
    assert result.as_numpy("output_0").tolist() == [[1.5], [0.5]]
    assert result.as_numpy("output_1").tolist() == [[-2.0], [65280.0]]


def test_int32_parameters_are_accepted(v2_client: triton.InferenceServerClient) -> None:
    """A Triton user's INT32 parameter tensors (NumPy's int32) work as INT64 ones do,
    negative values included."""
    data = triton.InferInput("input", [2, 3], "FP32")
    data.set_data_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    parameters = []
    for name, values in [("offsets", [0, 0]), ("window_sizes", [2, 3]),
                         ("window_strides", [1, -1])]:
        tensor = triton.InferInput(name, [2], "INT32")
        tensor.set_data_from_numpy(np.array(values, dtype=np.int32))
        parameters.append(tensor)
    result = v2_client.infer("slice", [data, *parameters])
    assert result.as_numpy("output").tolist() == [[2, 1, 0], [5, 4, 3]]


def test_an_infer_over_the_message_limit_names_the_flag(tensord_small_messages: Tensord) -> None:
    """A request over tensord's --max_message_bytes (64 KiB here; 96 KiB of data) is
    refused naming the flag and the limit, not with gRPC's "Received message larger
    than max" (which tensord keeps as a backstop at twice the limit)."""
    client = triton.InferenceServerClient(tensord_small_messages.address)
    try:
        data = triton.InferInput("input", [96 << 8], "FP32")
        data.set_data_from_numpy(np.zeros(96 << 8, dtype=np.float32))
        parameters = []
        for name, values in [("offsets", [0]), ("window_sizes", [4]), ("window_strides", [1])]:
            tensor = triton.InferInput(name, [1], "INT64")
            tensor.set_data_from_numpy(np.array(values, dtype=np.int64))
            parameters.append(tensor)
        with pytest.raises(InferenceServerException) as refused:
            client.infer("slice", [data, *parameters])
        assert refused.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        assert re.fullmatch(
            r"ModelInfer: a message of 98\d{3} bytes, over the server's message limit of "
            r"65536 bytes \(--max_message_bytes\)",
            refused.value.message(),
        ), refused.value.message()
    finally:
        client.close()


def test_proto_matches_tritonclients(tmp_path: Path) -> None:
    """Every message, field (number, type, label) and rpc of proto/inference/
    grpc_service.proto is the same in tritonclient's generated grpc_service
    (a superset: Triton's extensions are absent from ours)."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    proto_dir = Path(__file__).resolve().parents[2] / "proto"
    out = tmp_path / "ours.pb"
    assert protoc.main(["protoc", f"--proto_path={proto_dir}", f"--descriptor_set_out={out}",
                        str(proto_dir / "inference/grpc_service.proto")]) == 0
    ours = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    theirs = descriptor_pb2.FileDescriptorProto.FromString(service_pb2.DESCRIPTOR.serialized_pb)
    assert (ours.package, ours.service[0].name) == (theirs.package, theirs.service[0].name)

    def messages(types, prefix=""):
        for m in types:
            yield prefix + m.name, m
            yield from messages(m.nested_type, prefix + m.name + ".")

    # Triton keeps ModelConfig and its parts in model_config.proto; ours are
    # in the one file.
    their_config = descriptor_pb2.FileDescriptorProto.FromString(
        model_config_pb2.DESCRIPTOR.serialized_pb)
    their_messages = dict(messages(theirs.message_type)) | dict(
        messages(their_config.message_type))
    their_enums = {e.name: e for e in their_config.enum_type}
    differences = []
    fields = 0
    for name, message in messages(ours.message_type):
        if name not in their_messages:
            differences.append(f"{name}: not in tritonclient's")
            continue
        their_fields = {f.name: f for f in their_messages[name].field}
        for f in message.field:
            fields += 1
            t = their_fields.get(f.name)
            if t is None or (t.number, t.type, t.label, t.type_name) != (
                f.number, f.type, f.label, f.type_name
            ):
                differences.append(f"{name}.{f.name} = {f.number}: tritonclient has {t}")
    for enum in ours.enum_type:
        values = [(v.name, v.number) for v in enum.value]
        their_values = [(v.name, v.number) for v in their_enums[enum.name].value]
        if values != their_values:
            differences.append(f"enum {enum.name}: {values} against {their_values}")
    their_rpcs = {m.name: m for m in theirs.service[0].method}
    for rpc in ours.service[0].method:
        t = their_rpcs[rpc.name]
        if (t.input_type, t.output_type, t.client_streaming, t.server_streaming) != (
            rpc.input_type, rpc.output_type, rpc.client_streaming, rpc.server_streaming
        ):
            differences.append(f"rpc {rpc.name}")
    assert differences == []
    assert fields >= 90 and len(ours.service[0].method) == 16
