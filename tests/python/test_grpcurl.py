"""grpcurl against the real tensord through server reflection (no .proto given):
proto3 JSON in and out, where bytes are base64 and 64-bit integers strings."""

from __future__ import annotations

import base64
import json
import subprocess

import numpy as np

from conftest import Tensord


def grpcurl_run(
    grpcurl: str, address: str, request: dict[str, object]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [grpcurl, "-plaintext", "-d", "@", address, "tensorop.v1.TensorOp/Run"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_list_shows_the_service(grpcurl: str, tensord: Tensord) -> None:
    run = subprocess.run(
        [grpcurl, "-plaintext", tensord.address, "list"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "tensorop.v1.TensorOp" in run.stdout.splitlines()


def test_run_from_json(grpcurl: str, tensord: Tensord) -> None:
    values = np.array([1, -(2**62) - 3, 2**63 - 1, -(2**63)], dtype="<i8")
    request = {
        "slice": {"offsets": ["1"], "window_sizes": ["3"], "window_strides": ["1"]},
        "inputs": {
            "input": {
                "dtype": "INT64",
                "sizes": ["4"],
                "data": base64.b64encode(values.tobytes()).decode(),
            }
        },
        "outputs": [{"sizes": ["3"]}],
        "backend": "CPU",
    }
    run = grpcurl_run(grpcurl, tensord.address, request)
    assert run.returncode == 0, run.stderr
    response = json.loads(run.stdout)
    (output,) = response["outputs"]
    assert response["backend"] == "cpu"
    assert (output["dtype"], output["sizes"], output["strides"]) == ("INT64", ["3"], ["1"])
    data = np.frombuffer(base64.b64decode(output["data"]), dtype="<i8")
    assert data.tolist() == [-(2**62) - 3, 2**63 - 1, -(2**63)]


def test_run_error_from_json(grpcurl: str, tensord: Tensord) -> None:
    request = {
        "slice": {"offsets": ["0"], "window_sizes": ["1"], "window_strides": ["0"]},
        "inputs": {"input": {"dtype": "UINT8", "sizes": ["1"], "data": "AA=="}},
        "outputs": [{"sizes": ["1"]}],
    }
    run = grpcurl_run(grpcurl, tensord.address, request)
    # grpcurl exits 64 + the status code (INVALID_ARGUMENT = 3).
    assert run.returncode == 67
    assert "Code: InvalidArgument" in run.stderr
    assert "Message: slice.window_strides[0] must not be 0" in run.stderr
