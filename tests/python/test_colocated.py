"""Co-located clients against the real tensord: its Unix domain socket, and
shared memory regions whose numpy arrays tensord reads and writes in place."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import Client, TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.case_compare import find_mismatch, run_case
from tensorop_client.cases import load_cases
from tensorop_client.shared_memory import (
    SharedRegion,
    register_shared_memory,
    run_request_in_region,
    shared_memory_status,
)


@pytest.fixture(scope="module")
def uds_tensord(
    tensord_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Tensord, str]]:
    """tensord on TCP and a Unix socket, leasing idle regions for 1 s."""
    directory = tmp_path_factory.mktemp("uds")
    target = f"unix://{directory}/tensord.sock"
    server = Tensord(
        tensord_binary, directory / "tensord.log", f"--address={target}",
        "--shared_memory_idle_seconds=1",
    )
    yield server, target
    assert server.stop() == 0


def test_public_cases_pass_over_the_unix_socket(
    uds_tensord: tuple[Tensord, str], cases_dir: Path, case_count: int
) -> None:
    _, target = uds_tensord
    run = subprocess.run(
        [sys.executable, "-m", "tensorop_client", "conformance", "--target", target,
         str(cases_dir)],
        capture_output=True, text=True, timeout=300,
    )
    assert run.stdout.splitlines()[-1] == f"conformance: {case_count} passed, 0 failed", run.stdout
    assert run.returncode == 0


def test_public_cases_pass_through_shared_memory(
    uds_tensord: tuple[Tensord, str], cases_dir: Path, case_count: int
) -> None:
    _, target = uds_tensord
    passed = 0
    with Client(target, timeout=60) as client:
        for file in sorted(cases_dir.glob("*.json")):
            for loaded in load_cases(file):
                assert loaded.case is not None, loaded.error
                got = run_case(lambda r: run_request_in_region(client, r, "case"), loaded.case,
                               pb.CPU)
                assert find_mismatch(loaded.case, got) is None, loaded.name
                passed += 1
        assert passed == case_count
        assert list(shared_memory_status(client).regions) == []


def test_region_arrays_are_read_and_written_in_place(uds_tensord: tuple[Tensord, str]) -> None:
    _, target = uds_tensord
    with Client(target, timeout=60) as client, SharedRegion(client, "arrays", 1 << 16) as region:
        x = region.ndarray((16, 16), np.int32)
        x[...] = np.arange(256, dtype=np.int32).reshape(16, 16)
        # A padded, strided output after the input: rows of 8 elements, 5 used.
        y = region.ndarray((4, 5), np.int32, offset=2048, strides=(8, 1))
        whole = region.ndarray((4 * 8,), np.int32, offset=2048)
        whole[...] = -1
        result = region.run(
            "slice", {"input": x[::2, 1:]},  # a strided input view, sent as is
            {"offsets": [1, 0], "window_sizes": [4, 10], "window_strides": [1, 2]},
            outputs=[y],
        )
        assert result.outputs[0] is y
        np.testing.assert_array_equal(y, x[::2, 1:][1:5, 0:10:2])
        # Padding inside the output's extent is zeroed; past it, untouched.
        assert whole.reshape(4, 8)[:3, 5:].tolist() == [[0, 0, 0]] * 3
        assert whole[-3:].tolist() == [-1, -1, -1]
        status = shared_memory_status(client, "arrays")
        assert [(r.region, r.byte_size, r.in_use) for r in status.regions] == [
            ("arrays", 1 << 16, 0)
        ]
        del x, y, whole, result


def test_bad_references_name_the_region(uds_tensord: tuple[Tensord, str]) -> None:
    _, target = uds_tensord
    with Client(target, timeout=60) as client, SharedRegion(client, "small", 256) as region:
        x = region.ndarray((16,), np.float32)
        request = region.request("slice", {"input": x},
                                 {"offsets": [0], "window_sizes": [16], "window_strides": [1]},
                                 outputs=[region.ndarray((16,), np.float32, offset=64)])
        request.outputs[0].shared_memory.offset = 224
        with pytest.raises(TensorOpError) as error:
            client.run_request(request)
        assert error.value.code == "INVALID_ARGUMENT"
        assert error.value.message == (
            'outputs[0].shared_memory: offset 224 + 64 bytes passes the end of region "small" '
            "(256 bytes)"
        )
        request.inputs["input"].shared_memory.region = "gone"
        with pytest.raises(TensorOpError) as error:
            client.run_request(request)
        assert error.value.code == "NOT_FOUND"
        assert 'shared memory region "gone" is not registered' in error.value.message
        with pytest.raises(TensorOpError) as error:
            register_shared_memory(client, "other", "../secret")
        assert error.value.code == "INVALID_ARGUMENT"
        assert '"../secret" is not a shared memory key' in error.value.message
        del x


KILLED_CLIENT = """
import os, signal, sys
from multiprocessing import shared_memory
from tensorop_client import Client
from tensorop_client.shared_memory import register_shared_memory
shm = shared_memory.SharedMemory(create=True, size=1 << 20)
with Client(sys.argv[1]) as client:
    register_shared_memory(client, "orphan", shm.name)
print(shm.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_client_leaves_no_mapping(uds_tensord: tuple[Tensord, str]) -> None:
    server, target = uds_tensord
    run = subprocess.run([sys.executable, "-c", KILLED_CLIENT, target],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == -9, run.stderr
    key = run.stdout.strip()
    maps = Path(f"/proc/{server.process.pid}/maps")
    with Client(target, timeout=60) as client:
        # Its lease (1 s) runs out; wait for that, bounded, without timing it.
        for _ in range(300):
            if not shared_memory_status(client).regions:
                break
            time.sleep(0.1)
        status = shared_memory_status(client)
    assert (list(status.regions), status.mapped_bytes) == ([], 0)
    assert f"/dev/shm/{key}" not in maps.read_text()
    if os.path.exists(f"/dev/shm/{key}"):  # the killed client's own leftover
        os.unlink(f"/dev/shm/{key}")
