"""Fixtures: the real tensord (started per session on a free port), grpcurl and the
public conformance cases.

Paths come from the environment, with the repository's defaults:
TENSORD (build/bin/tensord), GRPCURL (build/go-bin/grpcurl, else on PATH),
TENSOROP_CASES (tests/conformance/cases), TENSOROP_DTYPE_CASES
(tests/conformance/dtypes.json).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tensorop_client import Client

if TYPE_CHECKING:
    from test_operators import Caller

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"tensord listening on (\S+:\d+)")
METRICS = re.compile(r"tensord metrics on (\S+:\d+)")
HTTP = re.compile(r"tensord http on (\S+:\d+)")


def _existing_file(path: str, what: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        pytest.fail(f"{what} not found at {path}", pytrace=False)
    return path


class Tensord:
    """A tensord child process on 127.0.0.1 with a port of its own choosing, in
    `env` (None: this process's environment)."""

    def __init__(
        self, binary: str, log: Path, *flags: str, env: dict[str, str] | None = None
    ) -> None:
        self.log = log
        self._log_file = log.open("w")
        # Metrics and the v2 HTTP API on free ports too, so servers never fight
        # over the defaults; with TLS the HTTP API (then HTTPS) is off unless the
        # flags set it, as most TLS tests are about gRPC.
        http_flags = ["--http_address=127.0.0.1:0"]
        if any(f.startswith("--tls_cert_file=") for f in flags) and not any(
            f.startswith("--http_address") for f in flags
        ):
            http_flags.append("--http_address=")
        http_last = [f for f in [*http_flags, *flags] if f.startswith("--http_address=")][-1]
        http_wanted = http_last != "--http_address=" and "--echo" not in flags
        self.process = subprocess.Popen(
            [binary, "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", *http_flags,
             *flags],
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env=env,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            # Keeps draining stdout after the address line so the pipe never fills.
            assert self.process.stdout is not None
            for line in self.process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.address = ""
        self.metrics_address = ""  # where GET /metrics answers
        self.http_address = ""  # where the v2 HTTP/REST API answers, or "" without it
        while not (
            self.address and self.metrics_address and (self.http_address or not http_wanted)
        ):
            try:
                line = lines.get(timeout=30)
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                pytest.fail(f"tensord did not print its address; log:\n{log.read_text()}")
            elif match := LISTENING.search(line):
                self.address = match.group(1)
            elif match := METRICS.search(line):
                self.metrics_address = match.group(1)
            elif match := HTTP.search(line):
                self.http_address = match.group(1)

    def stop(self) -> int:
        """SIGTERM (the documented graceful shutdown); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        finally:
            self._log_file.close()


@pytest.fixture(scope="session")
def tensord_binary() -> str:
    return _existing_file(os.environ.get("TENSORD", str(REPO / "build/bin/tensord")), "tensord")


@pytest.fixture(scope="session")
def grpcurl() -> str:
    default = REPO / "build/go-bin/grpcurl"
    path = os.environ.get("GRPCURL") or (
        str(default) if default.exists() else shutil.which("grpcurl")
    )
    return _existing_file(path or str(default), "grpcurl")


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    path = Path(os.environ.get("TENSOROP_CASES", REPO / "tests/conformance/cases"))
    if not any(path.glob("*.json")):
        pytest.fail(f"no conformance cases in {path}", pytrace=False)
    return path


def count_cases(*files: Path) -> int:
    """Cases in the files, counted from the JSON (a file is a case or a list of them)."""
    total = 0
    for file in files:
        root = json.loads(file.read_text())
        total += len(root) if isinstance(root, list) else 1
    return total


@pytest.fixture(scope="session")
def case_count(cases_dir: Path) -> int:
    """Cases in the public files (cases_dir)."""
    return count_cases(*sorted(cases_dir.glob("*.json")))


@pytest.fixture(scope="session")
def dtype_cases() -> Path:
    """tests/conformance/dtypes.json: the bfloat16 and bool cases of the operators
    implemented (tests/conformance/README.md), beside the public cases."""
    path = Path(os.environ.get("TENSOROP_DTYPE_CASES", REPO / "tests/conformance/dtypes.json"))
    if not path.is_file():
        pytest.fail(f"no bfloat16 and bool cases at {path}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def dtype_case_count(dtype_cases: Path) -> int:
    return count_cases(dtype_cases)


def _serve(binary: str, tmp: pytest.TempPathFactory, name: str, *flags: str) -> Iterator[Tensord]:
    server = Tensord(binary, tmp.mktemp(name) / "tensord.log", *flags)
    yield server
    code = server.stop()
    assert code == 0, f"tensord exited {code} on SIGTERM; log:\n{server.log.read_text()[-4000:]}"


@pytest.fixture(scope="session")
def tensord(tensord_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tensord]:
    """tensord with its default settings (both backends: cpu and opencl)."""
    yield from _serve(tensord_binary, tmp_path_factory, "tensord")


@pytest.fixture(scope="session")
def tensord_small_chunks(
    tensord_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tensord]:
    """tensord streaming 64-byte chunks, so small results arrive in many parts."""
    yield from _serve(tensord_binary, tmp_path_factory, "tensord-chunks", "--chunk_bytes=64")


# A message limit small enough that the tests of the chunked and streamed paths
# stay small: tensord's --max_message_bytes and the client's max_message_bytes.
SMALL_MESSAGE_BYTES = 64 << 10
SMALL_CHUNK_BYTES = 16 << 10


@pytest.fixture(scope="session")
def tensord_small_messages(
    tensord_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tensord]:
    """tensord refusing messages over 64 KiB (streaming 16 KiB chunks), so any
    tensor over that has to go through RunChunked or the streamed answer."""
    yield from _serve(
        tensord_binary,
        tmp_path_factory,
        "tensord-small-messages",
        f"--max_message_bytes={SMALL_MESSAGE_BYTES}",
        f"--chunk_bytes={SMALL_CHUNK_BYTES}",
    )


@pytest.fixture
def client(tensord: Tensord) -> Iterator[Client]:
    with Client(tensord.address, timeout=60) as c:
        yield c


# The operator tests' callers (test_operators.Caller): each test runs once
# through Client and once through AsyncClient.
@pytest.fixture(params=[False, True], ids=["sync", "async"])
def caller(request: pytest.FixtureRequest, tensord: Tensord) -> Iterator[Caller]:
    from test_operators import Caller

    c = Caller(tensord.address, request.param)
    yield c
    c.close()


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def small(request: pytest.FixtureRequest, tensord_small_messages: Tensord) -> Iterator[Caller]:
    """A caller whose message limit is the server's 64 KiB: tensors over it
    are uploaded in chunks and streamed back."""
    from test_operators import Caller

    c = Caller(
        tensord_small_messages.address,
        request.param,
        max_message_bytes=SMALL_MESSAGE_BYTES,
        chunk_bytes=SMALL_CHUNK_BYTES,
    )
    yield c
    c.close()
