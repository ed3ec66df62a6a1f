"""Builds tensorop_client, generating its gRPC stubs from proto/ on the way.

The stubs are not committed: build_py runs grpc_tools.protoc on
proto/tensorop/v1/tensorop.proto and writes tensorop_pb2.py(.pyi) and
tensorop_pb2_grpc.py into tensorop_client/_proto in the build tree, so every
install matches the proto it was built from. It also copies the channels'
service config, service_config.json, into the package. The protoc is the one
inside the grpcio-tools that pyproject.toml pins as a build requirement: its
version sets the floors of the protobuf and grpcio ranges the package claims
(pyproject.toml says why).

Where it builds from: inside the repository (client/python), the proto and the
service config are ../../proto and ../service_config.json; an sdist carries
copies of both at its top (proto/, service_config.json: BuildSdist puts them
there), so a wheel built from it needs nothing outside it.

The version is tensorop's one version, as tensord --version prints it. In an
sdist it is the one the sdist was made with (its PKG-INFO); otherwise
$TENSOROP_VERSION when set, else ../../cmake/version.cmake (the CMake project
version plus what git describe says, e.g. 0.1.0+g2ec2a5b.dirty), or, without
cmake, the bare project version from ../../CMakeLists.txt's project() line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTO = "tensorop/v1/tensorop.proto"
GENERATED = ("tensorop_pb2.py", "tensorop_pb2.pyi", "tensorop_pb2_grpc.py")
# An unpacked sdist: setuptools writes PKG-INFO at its top, never in the repository.
SDIST_INFO = HERE / "PKG-INFO"
SERVICE_CONFIG_NAME = "service_config.json"
# The copies an sdist carries (BuildSdist), else the repository's. The service
# config is shared with the C++ client (round_robin, health checking, retries).
if SDIST_INFO.is_file():
    PROTO_ROOT = HERE / "proto"
    SERVICE_CONFIG = HERE / SERVICE_CONFIG_NAME
else:
    PROTO_ROOT = REPO / "proto"
    SERVICE_CONFIG = HERE.parent / SERVICE_CONFIG_NAME


def sdist_version() -> str | None:
    """The Version: line of an unpacked sdist's PKG-INFO, or None outside one."""
    try:
        text = SDIST_INFO.read_text()
    except OSError:
        return None
    match = re.search(r"^Version: (\S+)$", text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"no Version: line in {SDIST_INFO}")
    return match.group(1)


def project_version() -> str:
    """The version tensord and tensorctl report: an sdist's own, fixed when it
    was made; else $TENSOROP_VERSION when set (a build's, as
    scripts/python-test.sh passes its tensord's), else cmake/version.cmake's,
    or the CMake project version alone when cmake is missing or fails."""
    if packed := sdist_version():
        return packed
    if given := os.environ.get("TENSOROP_VERSION"):
        return given
    cmake = shutil.which("cmake")
    script = REPO / "cmake" / "version.cmake"
    if cmake and script.is_file():
        try:
            done = subprocess.run(
                [cmake, f"-DSOURCE_DIR={REPO}", "-P", str(script)],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            version = done.stdout.strip()
            if version:
                return version
        except (OSError, subprocess.SubprocessError):
            pass
    lists = REPO / "CMakeLists.txt"
    try:
        match = re.search(r"^project\(tensorop VERSION ([0-9.]+)", lists.read_text(), re.MULTILINE)
    except OSError:
        match = None
    if match is None:
        raise SystemExit(
            f"no project(tensorop VERSION ...) line in {lists}: build tensorop-client from "
            "client/python inside the tensorop repository, or from its sdist"
        )
    return match.group(1)


def generate_stubs(out_dir: Path) -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml)

    source = PROTO_ROOT / PROTO
    if not source.is_file():
        raise SystemExit(
            f"{source} not found: build tensorop-client from client/python inside the "
            "tensorop repository, or from its sdist (the stubs are generated from proto/)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        status = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"--python_out={tmp}",
                f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(source),
            ]
        )
        if status != 0:
            raise SystemExit(f"grpc_tools.protoc failed on {source} ({status})")
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in GENERATED:
            text = (Path(tmp) / "tensorop" / "v1" / name).read_text()
            # protoc mirrors the proto's path, so the service stub imports the
            # messages as a top-level `tensorop.v1` package; inside our package
            # that import has to be relative.
            text = text.replace(
                "from tensorop.v1 import tensorop_pb2", "from . import tensorop_pb2"
            )
            (out_dir / name).write_text(text)


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        package = Path(self.build_lib) / "tensorop_client"
        generate_stubs(package / "_proto")
        (package / SERVICE_CONFIG_NAME).write_text(SERVICE_CONFIG.read_text())

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        package = Path(self.build_lib) / "tensorop_client"
        generated = [str(package / "_proto" / name) for name in GENERATED]
        generated.append(str(package / SERVICE_CONFIG_NAME))
        return list(super().get_outputs(include_bytecode)) + generated


class BuildSdist(sdist):
    """An sdist that builds outside the repository: the proto and the service
    config copied to its top (PKG-INFO, which setuptools writes there, carries
    the version)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        proto = Path(base_dir) / "proto" / PROTO
        proto.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROTO_ROOT / PROTO, proto)
        shutil.copyfile(SERVICE_CONFIG, Path(base_dir) / SERVICE_CONFIG_NAME)


setup(
    version=project_version(),
    cmdclass={"build_py": BuildPyWithStubs, "sdist": BuildSdist},
)
