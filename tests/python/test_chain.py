"""RunChain through the Python client against the real tensord: a chain of the
four operators gives the bytes of the same operators run one by one, kept
results, handles as inputs, inputs over the message limit, errors naming
steps[i] and results[j], and the same through AsyncClient. Every public case
as a one-step chain: test_conformance.py (--chain)."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from conftest import SMALL_CHUNK_BYTES, SMALL_MESSAGE_BYTES, Tensord
from tensorop_client import (
    AsyncClient,
    AsyncRemoteTensor,
    Client,
    Output,
    RemoteTensor,
    Step,
    StepRef,
    TensorOpError,
    make_chain_request,
    to_tensor,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.wire import chain_request_meta, encode_chain_request

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.name

# Random bits: NaN payloads, -0.0 and subnormals must come through unchanged.
X = np.random.default_rng(11).integers(0, 2**32, (6, 8), dtype=np.uint32).view(np.float32)
REVERSE_ROWS = {"offsets": [0, 0], "window_sizes": [6, 8], "window_strides": [-1, 1]}  # 6x8
ODD_COLUMNS = {"begin": [0, 1], "end": [6, 8], "stride": [1, 2]}  # 6x4
PERMUTATION = [3, 0, 5, 1, 4, 2]
# scatter_elements on axis 0 with the input as its own updates: row r goes to row PERMUTATION[r].
ROWS_TO = np.repeat(np.array(PERMUTATION, dtype=np.int64)[:, None], 4, axis=1)
HALVES = [(2, 4), (4, 4)]


def bits(array: np.ndarray) -> np.ndarray:
    """The elements' bits, row-major: equal arrays of bits are byte-exact."""
    return np.ascontiguousarray(array).view(f"u{array.itemsize}")


def four_steps(x: object = X) -> list[Step]:
    """Slice (rows reversed) -> StridedSlice (odd columns) -> ScatterElements
    (rows permuted) -> Split (2 and 4 rows)."""
    reversed_rows = Step("slice", {"input": x}, REVERSE_ROWS, [(6, 8)])
    odd_columns = Step("strided_slice", {"input": reversed_rows}, ODD_COLUMNS)
    permuted = Step(
        "scatter_elements",
        {"input": odd_columns, "indices": ROWS_TO, "updates": odd_columns.output(0)},
        {"axis": 0},
    )
    halves = Step("split", {"input": permuted}, {"axis": 0}, HALVES)
    return [reversed_rows, odd_columns, permuted, halves]


def one_by_one(client: Client, backend: str) -> list[np.ndarray]:
    """The four operators through client.run, each answer sent back as the
    next input: the outputs of steps 0, 1, 2 and the two of step 3."""
    a = client.run("slice", {"input": X}, REVERSE_ROWS, [(6, 8)], backend).outputs[0]
    b = client.run("strided_slice", {"input": a}, ODD_COLUMNS, None, backend).outputs[0]
    scatter = {"input": b, "indices": ROWS_TO, "updates": b}
    c = client.run("scatter_elements", scatter, {"axis": 0}, None, backend).outputs[0]
    d = client.run("split", {"input": c}, {"axis": 0}, HALVES, backend).outputs
    return [a, b, c, *d]


def numpy_outputs() -> list[np.ndarray]:
    a = X[::-1]
    b = a[:, 1::2]
    c = np.empty_like(b)
    c[PERMUTATION] = b
    return [a, b, c, c[:2], c[2:]]


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_four_steps_give_the_bytes_of_four_runs(client: Client, backend: str) -> None:
    separate = one_by_one(client, backend)
    for got, expected in zip(separate, numpy_outputs(), strict=True):
        np.testing.assert_array_equal(bits(got), bits(expected))
    result = client.chain(four_steps(), backend=backend)  # the last step's two outputs
    assert result.backend.split(":")[0] == backend
    assert len(result.outputs) == 2
    for got, expected in zip(result.outputs, separate[3:], strict=True):
        assert isinstance(got, np.ndarray) and not got.flags.writeable
        assert (got.dtype, got.shape) == (np.float32, expected.shape)
        np.testing.assert_array_equal(bits(got), bits(expected))


def test_results_in_order_with_strides(client: Client) -> None:
    steps = four_steps()
    separate = one_by_one(client, "cpu")
    result = client.chain(
        steps,
        [steps[3].output(1, strides=(1, 4)), (1, 0), StepRef(steps[2]), steps[0]],
        backend="cpu",
    )
    bottom, odd_columns, permuted, reversed_rows = result.outputs
    assert bottom.strides == (4, 16)  # column-major, as asked
    for got, expected in [
        (bottom, separate[4]),
        (odd_columns, separate[1]),
        (permuted, separate[2]),
        (reversed_rows, separate[0]),
    ]:
        np.testing.assert_array_equal(bits(got), bits(expected))
    # The step's own OutputDesc strides are the result's when it has none.
    steps[3].outputs = [HALVES[0], Output(HALVES[1], strides=(1, 4))]
    assert client.chain(steps).outputs[1].strides == (4, 16)


def test_the_request_chain_sends(client: Client) -> None:
    steps = four_steps()
    request = make_chain_request(steps, [steps[3].output(1, keep=True)], "cpu", id="four")
    assert (request.id, request.backend) == ("four", pb.CPU)
    assert not request.HasField("device_index")
    assert len(request.steps) == 4
    assert request.steps[0].inputs["input"].tensor == to_tensor(X)
    assert request.steps[1].inputs["input"].step == pb.StepOutput(step=0, output=0)
    scatter = request.steps[2]
    assert scatter.scatter_elements.axis == 0
    assert scatter.inputs["input"].step == scatter.inputs["updates"].step == pb.StepOutput(step=1)
    assert scatter.inputs["indices"].tensor == to_tensor(ROWS_TO)
    assert [list(o.sizes) for o in request.steps[3].outputs] == [[2, 4], [4, 4]]
    assert not any(o.keep for step in request.steps for o in step.outputs)
    assert list(request.results) == [pb.ChainResult(step=3, output=1, keep=True)]
    # What is framed by hand parses as protobuf builds it, and back.
    header, data = chain_request_meta(request)
    assert set(data) == {(0, "input"), (2, "indices")}
    assert pb.RunChainRequest.FromString(b"".join(encode_chain_request(header, data))) == request
    result = client.chain_request(request)
    (kept,) = result.outputs
    assert isinstance(kept, RemoteTensor)
    np.testing.assert_array_equal(bits(kept.fetch()), bits(one_by_one(client, "cpu")[4]))
    kept.release()


def test_kept_results_are_remote_tensors_that_fetch_the_bytes(client: Client) -> None:
    steps = four_steps()
    top, bottom = client.chain(steps, backend="cpu").outputs
    result = client.chain(steps, [steps[3].output(0, keep=True), steps[3].output(1)], "cpu")
    kept, array = result.outputs
    assert isinstance(kept, RemoteTensor) and isinstance(array, np.ndarray)
    assert (kept.dtype, kept.shape, kept.strides) == (np.float32, (2, 4), (4, 1))
    assert (kept.handle.backend, kept.handle.byte_size) == ("cpu", 32)
    np.testing.assert_array_equal(bits(kept.fetch()), bits(top))
    np.testing.assert_array_equal(bits(array), bits(bottom))
    # keep=True keeps every result, as run(keep=True) does.
    both = client.chain(steps, backend="cpu", keep=True).outputs
    assert all(isinstance(r, RemoteTensor) for r in both)
    np.testing.assert_array_equal(bits(both[1].fetch(strides=(1, 4))), bits(bottom))
    client.release([kept, *both])
    with pytest.raises(TensorOpError) as error:
        kept.fetch()
    assert error.value.code == "NOT_FOUND"


def test_a_chain_reads_handles(client: Client) -> None:
    expected = numpy_outputs()
    with client.put(X) as h:
        top, bottom = client.chain(four_steps(h), backend="cpu").outputs
        # Steps as run_many takes requests: a mapping of keyword arguments, a
        # tuple of positional ones; earlier steps by index.
        steps = [
            {"op": "slice", "inputs": {"input": h}, "attrs": REVERSE_ROWS, "outputs": [(6, 8)]},
            ("strided_slice", {"input": StepRef(0)}, ODD_COLUMNS),
        ]
        (odd_columns,) = client.chain(steps).outputs
        assert h.id in {listed.id for listed in client.list_handles()}  # still there
    np.testing.assert_array_equal(bits(top), bits(expected[3]))
    np.testing.assert_array_equal(bits(bottom), bits(expected[4]))
    np.testing.assert_array_equal(bits(odd_columns), bits(expected[1]))


def test_an_error_names_its_step(client: Client) -> None:
    zero_stride = {"offsets": [0, 0], "window_sizes": [6, 8], "window_strides": [1, 0]}
    steps = [
        Step("slice", {"input": X}, REVERSE_ROWS, [(6, 8)]),
        Step("slice", {"input": StepRef(0)}, zero_stride, [(6, 8)]),
    ]
    with pytest.raises(TensorOpError) as error:
        client.chain(steps)
    assert error.value.code == INVALID_ARGUMENT
    assert error.value.message == "steps[1].slice.window_strides[1] must not be 0"


def test_a_reference_to_a_later_step_is_refused(client: Client) -> None:
    steps = [
        Step("slice", {"input": StepRef(1)}, REVERSE_ROWS, [(6, 8)]),
        Step("slice", {"input": X}, REVERSE_ROWS, [(6, 8)]),
    ]
    with pytest.raises(TensorOpError) as error:
        client.chain(steps)
    assert (error.value.code, error.value.message) == (
        INVALID_ARGUMENT,
        'steps[0].inputs["input"].step.step is 1; steps[0] has no earlier step to read',
    )


def test_results_naming_no_output_are_refused(client: Client) -> None:
    steps = four_steps()
    with pytest.raises(TensorOpError) as error:
        client.chain(steps, [steps[3].output(2)])
    assert (error.value.code, error.value.message) == (
        INVALID_ARGUMENT,
        "results[0].output is 2; steps[3] has 2 outputs",
    )
    with pytest.raises(TensorOpError) as error:
        client.chain(steps, [])
    assert (error.value.code, error.value.message) == (
        INVALID_ARGUMENT,
        "results is empty: name the step outputs to answer with or keep",
    )


def test_more_steps_than_the_limit(client: Client) -> None:
    x = np.arange(4, dtype=np.int8)
    steps = [Step("split", {"input": x if i == 0 else StepRef(i - 1)}, {"axis": 0}, [(4,)])
             for i in range(65)]
    assert client.chain(steps[:64]).outputs[0].tolist() == [0, 1, 2, 3]
    with pytest.raises(TensorOpError) as error:
        client.chain(steps)
    assert (error.value.code, error.value.message) == (
        "RESOURCE_EXHAUSTED",
        "steps has 65 entries, more than the server's limit of 64 (--max_chain_steps)",
    )


def test_steps_that_cannot_be_built_here() -> None:
    split = Step("split", {"input": X}, {"axis": 0}, HALVES)
    with pytest.raises(ValueError, match=r"steps\[1\]: a split step with 2 outputs"):
        make_chain_request([split, Step("strided_slice", {"input": split}, ODD_COLUMNS)])
    elsewhere = Step("slice", {"input": X}, REVERSE_ROWS, [(6, 8)])
    with pytest.raises(ValueError, match=r"steps\[0\]: a StepRef names a Step that is not in"):
        make_chain_request([Step("strided_slice", {"input": elsewhere}, ODD_COLUMNS)])
    with pytest.raises(ValueError, match=r"steps\[1\]: a step output read as an input takes no"):
        make_chain_request([split, Step("split", {"input": split.output(0, keep=True)}, {}, [])])
    with pytest.raises(ValueError, match=r"steps\[0\]: attrs.axis: not an attribute of slice"):
        make_chain_request([Step("slice", {"input": X}, {"axis": 0})])
    with pytest.raises(ValueError, match=r"results\[0\]: a StepRef names a Step that is not in"):
        make_chain_request([split], [elsewhere.output(0)])
    with pytest.raises(ValueError, match=r"results\[1\]: expected a StepRef, a Step or a \(step"):
        make_chain_request([split], [split.output(0), (0,)])


@pytest.mark.parametrize(
    "limits",
    [{"max_message_bytes": SMALL_MESSAGE_BYTES, "chunk_bytes": SMALL_CHUNK_BYTES}, {}],
    ids=["ours", "theirs"],
)
def test_inputs_over_the_message_limit_go_as_handles(
    tensord_small_messages: Tensord, limits: dict[str, int]
) -> None:
    """An input over the limit is Put first and released after. "theirs": the
    server's limit is lower than the client's, whose first try it refuses."""
    x = np.arange(40_000, dtype=np.uint32)  # 160000 bytes, over 64 KiB
    small = np.arange(10, dtype=np.uint32)
    seen: list[tuple[int, int]] = []
    steps = [
        Step("slice", {"input": x}, {"offsets": [0], "window_sizes": [40_000],
                                     "window_strides": [-1]}, [(40_000,)]),
        Step("scatter_elements", {"input": StepRef(0), "indices": np.arange(10),
                                  "updates": small}, {"axis": 0}),
        Step("split", {"input": StepRef(1)}, {"axis": 0}, [(39_990,), (10,)]),
    ]
    with Client(tensord_small_messages.address, timeout=60, **limits) as c:
        before = {h.id for h in c.list_handles()}
        result = c.chain(steps, [(2, 1), (1, 0)], progress=lambda d, t: seen.append((d, t)))
        assert {h.id for h in c.list_handles()} == before  # the Put input is released
    tail, whole = result.outputs
    np.testing.assert_array_equal(tail, x[9::-1])
    np.testing.assert_array_equal(whole[:10], small)
    np.testing.assert_array_equal(whole[10:], x[::-1][10:])
    total = 160_000 + 40 + 80 + 40 + 160_000  # inputs, then both results
    assert seen[-1] == (total, total)
    assert {t for _, t in seen} == {total}  # the results' bytes counted from the start
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_async_client_chain(tensord: Tensord) -> None:
    expected = numpy_outputs()

    async def main() -> None:
        async with AsyncClient(tensord.address, timeout=60) as client:
            steps = four_steps()
            result = await client.chain(
                steps, [steps[3].output(0), steps[3].output(1, keep=True)], backend="cpu"
            )
            top, kept = result.outputs
            assert result.backend == "cpu" and isinstance(kept, AsyncRemoteTensor)
            np.testing.assert_array_equal(bits(top), bits(expected[3]))
            async with kept:
                np.testing.assert_array_equal(bits(await kept.fetch()), bits(expected[4]))
            request = make_chain_request(steps[:2])
            (odd_columns,) = (await client.chain_request(request)).outputs
            np.testing.assert_array_equal(bits(odd_columns), bits(expected[1]))
            with pytest.raises(TensorOpError) as error:
                await client.chain([steps[0], Step("slice", {"input": StepRef(0)},
                                    dict(REVERSE_ROWS, window_strides=[1, 0]), [(6, 8)])])
            assert (error.value.code, error.value.message) == (
                INVALID_ARGUMENT,
                "steps[1].slice.window_strides[1] must not be 0",
            )

    asyncio.run(main())
