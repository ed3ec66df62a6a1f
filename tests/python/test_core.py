"""The client's core without a server (tensorop_client._core): requests built,
encoded and decoded, chunked, routed, and each call's plan stepped by hand in
place of a transport, asserting the gRPC calls it asks for and what it makes
of their answers."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest

from tensorop_client import (
    AsyncClient,
    Client,
    Result,
    Step,
    TensorOpError,
    make_request,
)
from tensorop_client._core import gathers, operators, plans
from tensorop_client._core.chunking import (
    _chunk_parts,
    _chunk_size,
    _chunks_within,
    _fallback_chunk_bytes,
    _put_header,
    _put_parts,
    _refused_limit,
    _smaller_limit,
    _too_big,
)
from tensorop_client._core.handles import _by_replica, _Remote
from tensorop_client._core.plans import Call, Plan, Planning, PlanRunner
from tensorop_client._core.requests import _prepare, answer_bytes_bound, set_attrs
from tensorop_client._core.results import _result_from_response
from tensorop_client._core.routing import (
    Target,
    _choose_route,
    _replica_read,
    _Route,
    _target,
    _tensor_reads,
)
from tensorop_client._core.window import _Window
from tensorop_client._proto import tensorop_pb2 as pb

SLICE = {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]}


class FakeRemote(_Remote):
    """The RemoteTensor of FakeClient."""


class FakeClient(Planning[FakeRemote]):
    """The options the plans read, and no transport: the tests answer."""

    def __init__(
        self,
        max_message_bytes: int = 1 << 20,
        chunk_bytes: int = 1 << 16,
        stream_threshold_bytes: int = 8 << 20,
    ) -> None:
        super().__init__(max_message_bytes, chunk_bytes, stream_threshold_bytes)

    def _remote(self, handle: pb.TensorHandle) -> FakeRemote:
        return FakeRemote(self, handle)


def handle(id: str, replica: str = "", sizes: tuple[int, ...] = (2, 2)) -> pb.TensorHandle:
    strides = (sizes[1], 1) if len(sizes) == 2 else (1,)
    return pb.TensorHandle(id=id, replica=replica, dtype=pb.FLOAT32, sizes=sizes, strides=strides)


def response(*arrays: np.ndarray, backend: str = "cpu", id: str = "") -> bytes:
    """A serialized RunResponse carrying `arrays` (packed)."""
    return pb.RunResponse(
        id=id,
        backend=backend,
        outputs=[
            pb.Tensor(
                dtype=pb.FLOAT32,
                sizes=a.shape,
                strides=[s // a.itemsize for s in a.strides],
                data=a.tobytes(),
            )
            for a in arrays
        ],
    ).SerializeToString()


def start(plan: Plan[Any]) -> Call:
    call = next(plan)
    assert isinstance(call, Call)
    return call


def finish(plan: Plan[Any], answer: Any) -> Any:
    with pytest.raises(StopIteration) as done:
        plan.send(answer)
    return done.value.value


def streamed(call: Call, parts: list[pb.ResultPart]) -> Any:
    """What a transport sends a plan for a streamed call: the answer's parts
    fed to call.answer, reassembled."""
    assert call.answer is not None
    for part in parts:
        call.answer.feed(part.SerializeToString())
    return call.answer.result()


def parts_of(call: Call) -> list[bytes]:
    assert isinstance(call.request, Iterator)
    return list(call.request)


# ---- requests ---------------------------------------------------------------


def test_a_request_names_its_inputs_layout_and_keeps_their_bytes_beside_it() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    prepared = _prepare("slice", {"input": x[:, 1:]}, SLICE, [(2, 2)], "cpu", 1)
    header = prepared.header
    assert header.WhichOneof("op") == "slice"
    assert list(header.slice.offsets) == [0, 1]
    assert list(header.slice.window_strides) == [1, 2]
    assert header.backend == pb.CPU and header.device_index == 1
    assert list(header.outputs[0].sizes) == [2, 2]
    tensor = header.inputs["input"]
    assert (tensor.dtype, list(tensor.sizes), list(tensor.strides)) == (pb.FLOAT32, [3, 3], [4, 1])
    assert not tensor.HasField("data")
    # The strided view's bytes: its span (3 rows of 4 minus the first and
    # last element's padding), read from x's memory without a copy.
    view = prepared.data["input"]
    assert prepared.data_bytes == view.nbytes == (2 * 4 + 3) * 4
    assert np.frombuffer(view, np.float32).tolist() == list(range(1, 12))
    assert np.shares_memory(np.frombuffer(view, np.uint8), x)


def test_the_encoded_request_is_the_run_request_make_request_builds() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    prepared = _prepare("split", {"input": x}, {"axis": 1}, [(2, 1), (2, 2)], "auto", None)
    pieces, size = prepared.pieces()
    encoded = b"".join(pieces)
    assert size == len(encoded)
    decoded = pb.RunRequest.FromString(encoded)
    assert decoded == make_request("split", {"input": x}, {"axis": 1}, [(2, 1), (2, 2)])
    assert np.frombuffer(decoded.inputs["input"].data, np.int32).tolist() == [0, 1, 2, 3, 4, 5]


def test_keep_marks_every_output_and_a_remote_input_goes_by_its_handle() -> None:
    remote = FakeRemote(None, handle("ab" * 16, "10.0.0.2:50051", (4, 4)))
    prepared = _prepare("strided_slice", {"input": remote}, None, None, "auto", None, keep=True)
    assert [o.keep for o in prepared.header.outputs] == [True]  # the one derived output
    tensor = prepared.header.inputs["input"]
    assert tensor.handle.id == "ab" * 16 and tensor.handle.replica == "10.0.0.2:50051"
    assert list(tensor.sizes) == [4, 4] and prepared.data == {}


def test_attrs_are_checked_against_the_operator() -> None:
    request = pb.RunRequest()
    with pytest.raises(ValueError, match=r"unknown operator 'matmul' \(one of slice, .*transpose"):
        set_attrs(request, "matmul", None)
    with pytest.raises(ValueError, match=r"attrs\.offsets: expected a list of integers"):
        set_attrs(request, "slice", {"offsets": 3})
    with pytest.raises(ValueError, match=r"attrs\.axis: expected an integer"):
        set_attrs(request, "split", {"axis": [0]})
    with pytest.raises(
        ValueError, match=r"attrs\.size: not an attribute of split; its attributes are axis$"
    ):
        set_attrs(request, "split", {"size": 1})
    with pytest.raises(
        ValueError,
        match=r"attrs\.axes: not an attribute of scatter_elements; its attributes are axis$",
    ):
        set_attrs(request, "scatter_elements", {"axes": 1})
    with pytest.raises(ValueError, match="backend is one of auto, cpu, opencl, not 'gpu'"):
        _prepare("split", {}, None, None, "gpu", None)


def test_the_answer_bound_is_exact_for_given_sizes_and_an_upper_bound_otherwise() -> None:
    x = np.zeros((8, 8), np.float64)
    assert answer_bytes_bound(make_request("slice", {"input": x}, SLICE, [(2, 3)])) == 6 * 8
    assert (
        answer_bytes_bound(make_request("split", {"input": x}, {"axis": 0}, [(4, 8), (4, 8)]))
        == 512
    )
    # strided_slice without sizes: at most every input element once.
    assert answer_bytes_bound(make_request("strided_slice", {"input": x})) == 64 * 8
    assert answer_bytes_bound(make_request("strided_slice", {"input": x}, keep=True)) == 0


# ---- results ----------------------------------------------------------------


def test_a_run_response_decodes_to_read_only_arrays_over_its_bytes() -> None:
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    meta, result, out = _result_from_response(
        response(a, a.T.copy(), backend="opencl:0"), FakeClient()
    )
    assert result.backend == meta.backend == "opencl:0"
    assert out == 32
    assert result.outputs[0].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert result.outputs[1].tolist() == [[0.0, 2.0], [1.0, 3.0]]
    assert not result.outputs[0].flags.writeable


def test_a_kept_output_becomes_the_clients_remote_tensor() -> None:
    answer = pb.RunResponse(backend="cpu")
    answer.outputs.add().handle.CopyFrom(handle("cd" * 16, "r1"))
    _, result, out = _result_from_response(answer.SerializeToString(), FakeClient())
    (kept,) = result.outputs
    assert isinstance(kept, FakeRemote)
    assert (kept.id, kept.handle.replica, kept.shape, out) == ("cd" * 16, "r1", (2, 2), 0)


def test_an_answer_that_cannot_be_valid_is_internal() -> None:
    answer = pb.RunResponse(outputs=[pb.Tensor(dtype=pb.FLOAT32, sizes=[2, 2], data=b"\0" * 8)])
    with pytest.raises(TensorOpError) as e:
        _result_from_response(answer.SerializeToString(), FakeClient())
    assert e.value.code == "INTERNAL"
    assert e.value.message.startswith("server broke the protocol: output 0: ")


# ---- chunking ---------------------------------------------------------------


def test_run_chunked_parts_carry_the_header_then_each_input_in_name_order() -> None:
    x = np.arange(10, dtype=np.uint8)
    y = np.arange(100, 104, dtype=np.uint8)
    prepared = _prepare(
        "scatter_elements", {"updates": y, "input": x}, {"axis": 0}, None, "cpu", None
    )
    parts = list(_chunk_parts(prepared, 4))
    assert [data_bytes for _, data_bytes in parts] == [0, 4, 4, 2, 4]
    first = pb.RequestPart.FromString(parts[0][0])
    assert first.request == prepared.header
    chunks = [pb.RequestPart.FromString(p).chunk for p, _ in parts[1:]]
    assert [c.input for c in chunks] == ["input", "input", "input", "updates"]
    assert b"".join(c.data for c in chunks[:3]) == x.tobytes()
    assert chunks[3].data == y.tobytes()


def test_put_sends_exactly_the_layouts_bytes_in_chunks() -> None:
    x = np.arange(20, dtype=np.int16).reshape(4, 5)
    header, data = _put_header(x[:, ::2], "opencl", 30, 2)
    assert (list(header.sizes), list(header.strides)) == ([4, 3], [5, 2])
    assert (header.backend, header.ttl_seconds, header.device_index) == (pb.OPENCL, 30, 2)
    assert data.nbytes == (3 * 5 + 2 * 2 + 1) * 2  # the span, not the whole row after it
    parts = list(_put_parts(header, data, 16))
    assert [n for _, n in parts] == [0, 16, 16, 8]
    assert pb.PutPart.FromString(parts[0][0]).header == header
    sent = b"".join(pb.PutPart.FromString(p).chunk for p, _ in parts[1:])
    assert sent == bytes(data)


def test_chunk_sizes_and_the_limits_refusals_name() -> None:
    assert _chunk_size(None, 4096, 1 << 20) == 4096
    with pytest.raises(
        ValueError, match=r"chunk_bytes must be in \[1, max_message_bytes - 1024 = 7168\], got 7169"
    ):
        _chunk_size(7169, 4096, 8192)
    grpc_refusal = TensorOpError(
        "RESOURCE_EXHAUSTED", "Received message larger than max (9000 vs. 8192)"
    )
    tensord_refusal = TensorOpError(
        "RESOURCE_EXHAUSTED",
        "Run: a message of 9000 bytes, over the server's message limit of 6000 bytes"
        " (--max_message_bytes)",
    )
    assert _too_big(grpc_refusal) and _too_big(tensord_refusal)
    assert not _too_big(TensorOpError("RESOURCE_EXHAUSTED", "handle budget exceeded"))
    # gRPC's words on the server's side come from tensord's backstop, twice
    # its --max_message_bytes; on the client's side its limit is ours.
    assert (_refused_limit(grpc_refusal), _refused_limit(tensord_refusal)) == (4096, 6000)
    sent_refusal = TensorOpError(
        "RESOURCE_EXHAUSTED", "Sent message larger than max (9000 vs. 8192)"
    )
    assert _refused_limit(sent_refusal) == 8192
    assert _chunks_within(8192, 1 << 20) == 7168
    assert _fallback_chunk_bytes(grpc_refusal, 1 << 20) == 3072
    assert _fallback_chunk_bytes(TensorOpError("RESOURCE_EXHAUSTED", "no number"), 99) == 99
    assert _smaller_limit(tensord_refusal, 8192) == 6000
    assert _smaller_limit(tensord_refusal, 4096) is None


# ---- routing ----------------------------------------------------------------


def test_the_call_follows_the_sizes() -> None:
    x = np.zeros(16, np.uint8)
    small = _prepare("split", {"input": x}, {"axis": 0}, [(4,), (12,)], "auto", None)
    big_answer = _prepare("split", {"input": x}, {"axis": 0}, [(6000,)], "auto", None)
    mib = 1 << 20
    assert _choose_route(small, 100, False, mib, mib) is _Route.UNARY
    assert _choose_route(small, 100, True, mib, mib) is _Route.STREAM
    assert _choose_route(small, mib + 1, False, mib, mib) is _Route.CHUNKED
    assert _choose_route(small, 100, False, mib, 15) is _Route.CHUNKED  # 16 bytes of inputs
    assert _choose_route(big_answer, 100, False, mib, 5999) is _Route.STREAM
    # 6000 bytes back do not fit beside the 64 KiB kept for the rest of an answer.
    assert _choose_route(big_answer, 100, False, (64 << 10) + 5999, mib) is _Route.STREAM
    assert _choose_route(big_answer, 100, False, (64 << 10) + 6000, mib) is _Route.UNARY


def test_handles_route_the_call_to_their_one_replica() -> None:
    a = FakeRemote(None, handle("a" * 32, "10.0.0.1:1"))
    b = FakeRemote(None, handle("b" * 32, "10.0.0.2:1"))
    old = FakeRemote(None, handle("c" * 32, ""))  # an older server's: names no replica
    same = _prepare(
        "scatter_elements", {"input": a, "updates": old}, {"axis": 0}, None, "auto", None
    )
    chosen = _replica_read(_tensor_reads(same.header.inputs))
    assert _target(chosen) == Target("10.0.0.1:1", "a" * 32)
    assert _target(None) == Target()
    both = _prepare("scatter_elements", {"input": a, "updates": b}, {"axis": 0}, None, "auto", None)
    with pytest.raises(TensorOpError) as e:
        _replica_read(_tensor_reads(both.header.inputs))
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.message == (
        'inputs["input"] lives on replica 10.0.0.1:1 and inputs["updates"] on replica '
        "10.0.0.2:1; a call reads handles of one replica"
    )
    assert _by_replica([a, "d" * 32, b, old]) == {
        "10.0.0.1:1": ["a" * 32],
        "": ["d" * 32, "c" * 32],
        "10.0.0.2:1": ["b" * 32],
    }


# ---- plans ------------------------------------------------------------------


def test_a_small_run_is_one_unary_call_and_reports_its_bytes() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    seen: list[tuple[int, int]] = []
    plan = plans.run(
        FakeClient(),
        "slice",
        {"input": x},
        SLICE,
        [(2, 3)],
        progress=lambda d, t: seen.append((d, t)),
    )
    call = start(plan)
    assert (call.method, call.to, call.answer) == ("run", Target(), None)
    assert pb.RunRequest.FromString(call.request) == make_request(
        "slice", {"input": x}, SLICE, [(2, 3)]
    )
    out = np.array([[1, 3, 5], [5, 7, 9]], np.float32)
    result = finish(plan, response(out))
    assert result.outputs[0].tolist() == out.tolist()
    assert seen == [(48 + 24, 48 + 24)]


def test_a_run_the_server_refuses_as_too_large_is_sent_again_in_chunks_that_fit() -> None:
    x = np.zeros(3000, np.uint8)
    plan = plans.run(FakeClient(), "strided_slice", {"input": x}, {"begin": [0], "end": [3000]})
    assert start(plan).method == "run"
    refusal = TensorOpError("RESOURCE_EXHAUSTED", "Sent message larger than max (3100 vs. 2048)")
    retry = plan.throw(refusal)
    assert retry.method == "run_chunked"
    chunks = [pb.RequestPart.FromString(p).chunk for p in parts_of(retry)[1:]]
    assert [len(c.data) for c in chunks] == [1024, 1024, 952]  # 2048 less 1024 for the framing


def test_other_errors_come_out_of_the_plan_as_they_are() -> None:
    plan = plans.run(FakeClient(), "split", {"input": np.zeros(4)}, {"axis": 0}, [(4,)])
    start(plan)
    with pytest.raises(TensorOpError, match="INVALID_ARGUMENT: outputs"):
        plan.throw(TensorOpError("INVALID_ARGUMENT", "outputs[0]: sizes"))


def test_run_chunked_streams_the_answer_back() -> None:
    x = np.arange(5, dtype=np.uint8)
    plan = plans.run_chunked(
        FakeClient(), "strided_slice", {"input": x}, {"begin": [1], "end": [5]}, chunk_bytes=2
    )
    call = start(plan)
    assert call.method == "run_chunked" and call.failed == []
    assert len(parts_of(call)) == 1 + 3  # the request, then 2 + 2 + 1 bytes
    header = pb.OutputHeader(
        index=0, dtype=pb.UINT8, sizes=[4], strides=[1], byte_length=4, backend="cpu"
    )
    result = finish(
        plan, streamed(call, [pb.ResultPart(header=header), pb.ResultPart(chunk=b"\1\2\3\4")])
    )
    assert result.outputs[0].tolist() == [1, 2, 3, 4]


def test_release_asks_each_replica_for_its_handles_and_raises_the_first_error() -> None:
    a = FakeRemote(None, handle("a" * 32, "r1"))
    b = FakeRemote(None, handle("b" * 32, "r2"))
    plan = plans.release(FakeClient(), [a, "c" * 32, b])
    first = start(plan)
    assert (first.method, first.to, list(first.request.ids)) == (
        "release",
        Target("r1", "a" * 32),
        ["a" * 32],
    )
    second = plan.throw(TensorOpError("UNAVAILABLE", "r1 is gone"))
    assert (second.to, list(second.request.ids)) == (Target("", "c" * 32), ["c" * 32])
    third = plan.send(pb.ReleaseResponse())
    assert third.to == Target("r2", "b" * 32)
    with pytest.raises(TensorOpError, match="UNAVAILABLE: r1 is gone"):
        plan.send(pb.ReleaseResponse())


def test_list_handles_reads_every_page() -> None:
    plan = plans.list_handles(FakeClient(), page_size=1)
    first = start(plan)
    assert (first.method, first.request.page_size, first.request.page_token) == (
        "list_handles",
        1,
        "",
    )
    second = plan.send(pb.ListHandlesResponse(handles=[handle("a" * 32)], next_page_token="t1"))
    assert second.request.page_token == "t1"
    handles = finish(plan, pb.ListHandlesResponse(handles=[handle("b" * 32)]))
    assert [h.id for h in handles] == ["a" * 32, "b" * 32]
    looping = plans.list_handles(FakeClient())
    start(looping)
    looping.send(pb.ListHandlesResponse(next_page_token="t"))
    with pytest.raises(TensorOpError, match='ListHandles answered page token "t" with itself'):
        looping.send(pb.ListHandlesResponse(next_page_token="t"))


def test_put_and_fetch() -> None:
    client = FakeClient()
    x = np.arange(6, dtype=np.float32)
    put = plans.put(client, x, chunk_bytes=16, replica="r3")
    call = start(put)
    assert (call.method, call.to) == ("put", Target("r3"))
    assert [len(pb.PutPart.FromString(p).chunk) for p in parts_of(call)[1:]] == [16, 8]
    remote = finish(put, handle("e" * 32, "r3", (6,)))
    assert isinstance(remote, FakeRemote) and remote.shape == (6,)
    fetch = plans.fetch(client, remote, strides=[1])
    call = start(fetch)
    assert (call.method, call.to) == ("fetch", Target("r3", "e" * 32))
    assert pb.FetchRequest.FromString(call.request) == pb.FetchRequest(id="e" * 32, strides=[1])
    header = pb.OutputHeader(index=0, dtype=pb.FLOAT32, sizes=[6], strides=[1], byte_length=24)
    array = finish(
        fetch, streamed(call, [pb.ResultPart(header=header), pb.ResultPart(chunk=x.tobytes())])
    )
    assert array.tolist() == x.tolist()


def test_a_chain_over_the_message_limit_puts_its_largest_input_and_releases_it_after() -> None:
    client = FakeClient(max_message_bytes=8192, chunk_bytes=4096)
    big = np.zeros(3000, np.float32)  # 12000 bytes: over the limit
    first = Step("strided_slice", {"input": big}, {"begin": [0], "end": [10]})
    plan = plans.chain(client, [first])
    put = start(plan)
    assert put.method == "put" and put.to == Target()
    assert [len(pb.PutPart.FromString(p).chunk) for p in parts_of(put)[1:]] == [4096, 4096, 3808]
    run_chain = plan.send(handle("f" * 32, "r4", (3000,)))
    assert run_chain.method == "run_chain" and run_chain.to == Target("r4", "f" * 32)
    sent = pb.RunChainRequest.FromString(run_chain.request)
    assert sent.steps[0].inputs["input"].tensor.handle.id == "f" * 32
    # The chain fails; the Put input is released all the same, then the error comes out.
    release = plan.throw(TensorOpError("NOT_FOUND", "steps[0]"))
    assert (release.method, list(release.request.ids)) == ("release", ["f" * 32])
    with pytest.raises(TensorOpError, match="NOT_FOUND: steps"):
        plan.send(pb.ReleaseResponse())


def test_a_chain_past_the_stream_threshold_puts_its_input_though_it_fits_a_message() -> None:
    """One large message is slower than a Put's chunks (as `run` takes RunChunked):
    data past stream_threshold_bytes goes as a handle; below it, inline."""
    client = FakeClient(max_message_bytes=1 << 20, chunk_bytes=4096, stream_threshold_bytes=8192)
    big = np.zeros(3000, np.float32)  # 12000 bytes: fits a message, past the threshold
    plan = plans.chain(client, [Step("strided_slice", {"input": big}, {"begin": [0], "end": [10]})])
    assert start(plan).method == "put"
    small = np.zeros(2000, np.float32)  # 8000 bytes: inline
    plan = plans.chain(
        client, [Step("strided_slice", {"input": small}, {"begin": [0], "end": [9]})]
    )
    assert start(plan).method == "run_chain"


def test_the_runner_throws_each_error_into_the_plan() -> None:
    answers: dict[str, Any] = {"run": ValueError("Cannot invoke RPC on closed channel!")}

    def perform(call: Call) -> Any:
        answer = answers[call.method]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    runner = PlanRunner(
        plans.run(FakeClient(), "split", {"input": np.zeros(2)}, {"axis": 0}, [(2,)])
    )
    with pytest.raises(ValueError, match="closed channel"):
        for call in runner:
            try:
                runner.answer(perform(call))
            except BaseException as e:  # noqa: BLE001 (as a transport does)
                runner.fail(e)
    done = PlanRunner(plans.release(FakeClient(), []))
    assert list(done) == [] and done.result is None


# ---- run_many ---------------------------------------------------------------


def test_the_window_hands_out_outcomes_in_request_order() -> None:
    x = np.arange(4, dtype=np.float32)
    requests = [("strided_slice", {"input": x}, {"begin": [k], "end": [4]}) for k in range(4)]
    window = _Window(FakeClient(), requests)
    lock = nullcontext()
    sent = [window.next_to_send(lock) for _ in range(4)]
    assert [pb.RunRequest.FromString(s).id for s in sent if s is not None] == ["0", "1", "2", "3"]
    assert window.next_to_send(lock) is None
    assert window.answer(response(x[2:], id="2"))
    assert window.pop_ready() is None  # request 0 comes first
    status = pb.Status(code=3, message="outputs[0]: sizes")
    assert window.answer(pb.RunResponse(id="0", status=status).SerializeToString())
    assert window.answer(response(x[1:], id="1"))
    assert not window.answer(response(x, id="7"))  # no request has id 7: the stream is over
    window.end()
    outcomes = []
    while (slot := window.pop_ready()) is not None:
        outcomes.append(slot.outcome())
    assert len(outcomes) == 4
    refused, one, two, unanswered = outcomes
    assert isinstance(refused, TensorOpError)
    assert (refused.code, refused.message) == ("INVALID_ARGUMENT", "outputs[0]: sizes")
    assert isinstance(one, Result) and one.outputs[0].tolist() == [1, 2, 3]
    assert isinstance(two, Result) and two.outputs[0].tolist() == [2, 3]
    assert isinstance(unanswered, TensorOpError) and unanswered.message == (
        'server broke the protocol: an answer for id "7", which no unanswered request has'
    )
    window.raise_if_unfinished()  # every request was sent


# ---- the transports' methods ------------------------------------------------


@pytest.mark.parametrize(
    ("module", "name"),
    [
        *[
            (plans, name)
            for name in (
                "run", "run_stream", "run_chunked", "chain", "put", "fetch", "release",
                "list_handles",
            )
        ],
        *[
            (operators, name)
            for name in (
                "split", "strided_slice", "slice", "scatter_elements", "transpose", "reshape",
                "expand", "broadcast_to", "tile",
            )
        ],
        *[(gathers, name) for name in ("take", "gather", "take_along_axis", "gather_elements")],
    ],
)  # fmt: skip
def test_client_and_async_client_methods_take_the_plans_arguments(module: Any, name: str) -> None:
    plan = inspect.signature(getattr(module, name))
    expected = list(plan.parameters)[1:]
    for cls in (Client, AsyncClient):
        method = inspect.signature(getattr(cls, name))
        assert list(method.parameters) == ["self", *expected]
    assert inspect.iscoroutinefunction(getattr(AsyncClient, name))
    assert not inspect.iscoroutinefunction(getattr(Client, name))
    assert getattr(Client, name).__doc__ == getattr(module, name).__doc__


def test_the_transports_describe_their_own_results() -> None:
    assert inspect.signature(Client.run).return_annotation == "Result"
    assert inspect.signature(AsyncClient.run).return_annotation == "Result"
    assert inspect.signature(Client.put).return_annotation == "RemoteTensor"
    assert inspect.signature(AsyncClient.put).return_annotation == "AsyncRemoteTensor"
    assert inspect.signature(Client.fetch).return_annotation == "np.ndarray"
    assert AsyncClient.run.__doc__ == "Client.run."
    options = ["target", "timeout", "max_message_bytes", "chunk_bytes", "stream_threshold_bytes"]
    for cls in (Client, AsyncClient):
        assert list(inspect.signature(cls).parameters)[:5] == options
