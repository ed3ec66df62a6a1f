"""One version: tensorop_client.__version__ (set by client/python/setup.py from
cmake/version.cmake at build time) is the string tensord and tensorctl print
for --version, and tensorctl answers --help and -h with its usage."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import tensorop_client

# PEP 440 with a local part: 0.1.0, 0.1.0+g2ec2a5b, 0.1.0+3.g2ec2a5b.dirty.
VERSION = re.compile(r"^\d+(\.\d+)*(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")


@pytest.fixture(scope="module")
def tensorctl_binary(tensord_binary: str) -> str:
    """TENSORCTL, or the tensorctl beside tensord (build/bin)."""
    path = os.environ.get("TENSORCTL", str(Path(tensord_binary).with_name("tensorctl")))
    if not os.access(path, os.X_OK):
        pytest.fail(f"tensorctl not found at {path}", pytrace=False)
    return path


def version_of(binary: str, name: str) -> str:
    done = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert len(words) == 2 and words[0] == name, done.stdout
    return words[1]


def test_the_package_reports_the_version_tensord_reports(tensord_binary: str) -> None:
    assert VERSION.match(tensorop_client.__version__), tensorop_client.__version__
    # A mismatch means the package and tensord were built from different trees
    # (another commit, or uncommitted changes on one side only): rebuild tensord
    # and reinstall the package (scripts/python-test.sh) from the same tree.
    assert tensorop_client.__version__ == version_of(tensord_binary, "tensord")


def test_tensorctl_reports_the_same_version(tensord_binary: str, tensorctl_binary: str) -> None:
    assert version_of(tensorctl_binary, "tensorctl") == version_of(tensord_binary, "tensord")
    assert version_of(tensorctl_binary, "tensorctl") == tensorop_client.__version__


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_tensorctl_help_prints_its_usage(tensorctl_binary: str, flag: str) -> None:
    done = subprocess.run(
        [tensorctl_binary, flag], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout
