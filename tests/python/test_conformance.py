"""`python -m tensorop_client conformance` against the real tensord: every public case
and every bfloat16 and bool case (tests/conformance/dtypes.json) passes on both
backends, unary, streamed, chunked, through handles (inputs Put, outputs kept and
Fetched) and as a one-step RunChain; failures are reported and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Tensord


def conformance(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tensorop_client", "conformance", "--target", address, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "style",
    [[], ["--stream"], ["--chunked"], ["--handles"], ["--chain"]],
    ids=["unary", "stream", "chunked", "handles", "chain"],
)
@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_every_public_case_passes(
    tensord: Tensord,
    cases_dir: Path,
    case_count: int,
    dtype_cases: Path,
    dtype_case_count: int,
    backend: str,
    style: list[str],
) -> None:
    args = ["--backend", backend, *style, str(cases_dir), str(dtype_cases)]
    run = conformance(tensord.address, *args)
    total = case_count + dtype_case_count
    assert run.stdout.splitlines()[-1] == f"conformance: {total} passed, 0 failed", run.stdout
    assert (run.returncode, run.stderr) == (0, "")


def test_bfloat16_and_bool_failures_are_printed(tensord: Tensord, tmp_path: Path) -> None:
    def case(name: str, dtype: str, data: list[object], expected: list[object]) -> object:
        return {
            "name": name,
            "op": "slice",
            "inputs": {"input": {"dtype": dtype, "sizes": [len(data)], "data": data}},
            "attrs": {"offsets": [0], "window_sizes": [len(data)], "window_strides": [-1]},
            "outputs": [{"sizes": [len(data)]}],
            "expect": {"outputs": [{"dtype": dtype, "sizes": [len(data)], "data": expected}]},
        }

    path = tmp_path / "cases.json"
    path.write_text(
        json.dumps(
            [
                case("bf16/reverse", "bfloat16", [1.5, "nan", -0.0, "-inf"],
                     ["-inf", -0.0, "nan", 1.5]),
                case("bf16/wrong", "bfloat16", [1.5, 0.0, "inf"], ["inf", -0.0, 1.5]),
                case("bool/reverse", "bool", [True, False, False], [False, False, True]),
                case("bool/wrong", "bool", [True, False, False], [True, False, False]),
                case("bool/number", "bool", [1, 0], [0, 1]),
            ]
        )
    )
    run = conformance(tensord.address, str(path))
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "FAIL bf16/wrong: outputs[0]: element [1] is 0.0, expected -0.0 (1 of 3 elements differ)",
        "FAIL bool/wrong: outputs[0]: element [0] is false, expected true "
        "(2 of 3 elements differ)",
        "FAIL bool/number: invalid case: inputs.input: data[0]: expected true or false (bool), "
        "got 1",
        "conformance: 2 passed, 3 failed",
    ]


def test_failures_are_printed_and_exit_1(tensord: Tensord, tmp_path: Path) -> None:
    case = {
        "name": "slice/reverse",
        "op": "slice",
        "inputs": {
            "input": {"dtype": "int64", "sizes": [3], "data": [1, "-9223372036854775808", 3]}
        },
        "attrs": {"offsets": [0], "window_sizes": [3], "window_strides": [-1]},
        "outputs": [{"sizes": [3]}],
        "expect": {
            "outputs": [{"dtype": "int64", "sizes": [3], "data": [3, "-9223372036854775808", 1]}]
        },
    }
    wrong_value = dict(
        case,
        name="wrong/value",
        expect={"outputs": [{"dtype": "int64", "sizes": [3], "data": [3, 2, 1]}]},
    )
    wrong_code = dict(
        case,
        name="wrong/code",
        attrs=dict(case["attrs"], window_strides=[0]),
        expect={"error": "OUT_OF_RANGE"},
    )
    unreadable = dict(case, name="wrong/case", outputs=[{"sizes": [3], "stride": [1]}])
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([case, wrong_value, wrong_code, unreadable]))
    run = conformance(tensord.address, "--stream", str(path))
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "FAIL wrong/value: outputs[0]: element [1] is -9223372036854775808, expected 2 "
        "(1 of 3 elements differ)",
        "FAIL wrong/code: expected OUT_OF_RANGE, got INVALID_ARGUMENT: "
        "slice.window_strides[0] must not be 0",
        'FAIL wrong/case: invalid case: outputs[0]: unknown field "stride" in an output',
        "conformance: 1 passed, 3 failed",
    ]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    missing.mkdir()
    run = conformance("127.0.0.1:1", str(missing))
    assert (run.returncode, run.stderr) == (2, f"tensorop_client: {missing}: no *.json files\n")
    run = conformance("127.0.0.1:1", "--backend", "gpu", str(missing))
    assert run.returncode == 2 and "invalid choice: 'gpu'" in run.stderr
