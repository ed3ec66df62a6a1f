"""The installed package as a wheel ships it (no server): the stubs generated for the
whole protobuf range the package claims, the typing markers, and the floors the oldest
venv tests. scripts/python-test.sh runs this in every venv it makes (newest pins, oldest
pins, beside tritonclient[all]).

protobuf's generated code refuses a runtime older than the protoc that generated it,
and the generated _pb2_grpc module a grpcio older than its grpcio-tools: so the floors
of the protobuf and grpcio ranges must be the versions the stubs were generated with
(client/python/pyproject.toml pins grpcio-tools for that)."""

from __future__ import annotations

import re
from importlib import metadata, resources
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import tensorop_client
from tensorop_client._proto import tensorop_pb2 as pb

PINS = Path(__file__).resolve().parent / "pins"
PROTO = resources.files("tensorop_client") / "_proto"


def declared() -> dict[str, Requirement]:
    """The installed distribution's requirements (its METADATA), extras left out, by
    canonical name (ml-dtypes for ml_dtypes)."""
    requirements = [Requirement(text) for text in metadata.requires("tensorop-client") or []]
    return {canonicalize_name(r.name): r for r in requirements if r.marker is None}


def floor(requirement: Requirement) -> Version:
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    assert len(floors) == 1, f"{requirement}: one >= bound expected"
    return floors[0]


def ceiling(requirement: Requirement) -> Version:
    ceilings = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
    assert len(ceilings) == 1, f"{requirement}: one < bound expected"
    return ceilings[0]


def test_dependencies_are_ranges_not_pins() -> None:
    requirements = declared()
    assert sorted(requirements) == ["grpcio", "ml-dtypes", "numpy", "protobuf"]
    for requirement in requirements.values():
        assert floor(requirement) < ceiling(requirement), str(requirement)
        assert not any(s.operator in ("==", "===", "~=") for s in requirement.specifier), (
            str(requirement)
        )


def test_the_stubs_gencode_is_the_protobuf_floor() -> None:
    source = (PROTO / "tensorop_pb2.py").read_text()
    match = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*"
        r"(\d+),\s*(\d+),\s*(\d+),\s*''",
        source,
    )
    assert match is not None, source[:600]
    gencode = Version(".".join(match.groups()))
    assert gencode == floor(declared()["protobuf"])
    # The runtime in this venv takes it (the import above ran the check) and is in range.
    assert Version(metadata.version("protobuf")) in declared()["protobuf"].specifier


def test_the_service_stub_needs_the_grpcio_floor() -> None:
    source = (PROTO / "tensorop_pb2_grpc.py").read_text()
    match = re.search(r"^GRPC_GENERATED_VERSION = '([0-9.]+)'$", source, re.MULTILINE)
    assert match is not None, source[:600]
    assert Version(match.group(1)) == floor(declared()["grpcio"])
    assert Version(metadata.version("grpcio")) in declared()["grpcio"].specifier


def test_the_oldest_pins_are_the_floors() -> None:
    pins = {}
    for line in (PINS / "oldest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(requirement.name)] = Version(spec.version)
    for name, requirement in declared().items():
        assert pins[name] == floor(requirement), name


def test_the_typing_markers_ship() -> None:
    package = resources.files("tensorop_client")
    assert (package / "py.typed").is_file()
    stub = (PROTO / "tensorop_pb2.pyi").read_text()
    assert "class RunRequest(_message.Message):" in stub
    files = [str(f) for f in metadata.files("tensorop-client") or []]
    assert "tensorop_client/py.typed" in files
    assert "tensorop_client/_proto/tensorop_pb2.pyi" in files
    assert metadata.metadata("tensorop-client").get_all("Classifier") == ["Typing :: Typed"]


def test_the_version_is_the_wheels() -> None:
    assert tensorop_client.__version__ == metadata.version("tensorop-client")
    assert tensorop_client.__version__ != "0+unknown"


def test_imports_beside_tritonclient() -> None:
    """Both packages' protobuf modules load in one process (issue 46: the package's
    stubs refused the protobuf tritonclient[all] installs) and both make messages."""
    grpc_client = pytest.importorskip("tritonclient.grpc")
    pytest.importorskip("tritonclient.http")
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="slice")
    assert service_pb2.ModelInferRequest.FromString(request.SerializeToString()) == request
    ours = pb.RunRequest(id="beside tritonclient", slice=pb.SliceAttrs(offsets=[1]))
    assert pb.RunRequest.FromString(ours.SerializeToString()) == ours
    assert grpc_client.InferenceServerClient  # the gRPC client itself loaded
