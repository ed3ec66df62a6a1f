"""Builds tensorop_client, generating its gRPC stubs from proto/ on the way.

The stubs are not committed: build_py runs grpc_tools.protoc on
../../proto/tensorop/v1/tensorop.proto and writes tensorop_pb2.py(.pyi) and
tensorop_pb2_grpc.py into tensorop_client/_proto in the build tree, so every
install matches the proto it was built from. It also copies the channels'
service config, ../service_config.json, into the package.

The version is tensorop's one version, as tensord --version prints it:
../../cmake/version.cmake (the CMake project version plus what git describe
says, e.g. 0.1.0+g2ec2a5b.dirty), or, without cmake, the bare project version
from ../../CMakeLists.txt's project() line.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTO_ROOT = REPO / "proto"
PROTO = "tensorop/v1/tensorop.proto"
GENERATED = ("tensorop_pb2.py", "tensorop_pb2.pyi", "tensorop_pb2_grpc.py")


def project_version() -> str:
    """The version tensord and tensorctl report: $TENSOROP_VERSION when set (a
    build's, as scripts/python-test.sh passes its tensord's), else
    cmake/version.cmake's, or the CMake project version alone when cmake is
    missing or fails."""
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
            "client/python inside the tensorop repository"
        )
    return match.group(1)


def generate_stubs(out_dir: Path) -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml)

    source = PROTO_ROOT / PROTO
    if not source.is_file():
        raise SystemExit(
            f"{source} not found: build tensorop-client from client/python inside the "
            "tensorop repository (the stubs are generated from proto/)"
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


# Shared with the C++ client (round_robin, health checking, retries).
SERVICE_CONFIG = HERE.parent / "service_config.json"


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        package = Path(self.build_lib) / "tensorop_client"
        generate_stubs(package / "_proto")
        (package / SERVICE_CONFIG.name).write_text(SERVICE_CONFIG.read_text())

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        package = Path(self.build_lib) / "tensorop_client"
        generated = [str(package / "_proto" / name) for name in GENERATED]
        generated.append(str(package / SERVICE_CONFIG.name))
        return list(super().get_outputs(include_bytecode)) + generated


setup(version=project_version(), cmdclass={"build_py": BuildPyWithStubs})
