"""The operators' own methods (Client.split, strided_slice, slice,
scatter_elements, tile; the gathers' in test_gathers_core.py) without a
server: NumPy's keys, split points, axes and indices as the operators'
attributes and inputs, checked against NumPy itself; output sizes derived
from requests (a slice's whole window, a strided slice's, the bytes an
answer carries, checked against the public cases);
progress totals known from the start; and the methods' plans stepped by
hand."""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tensorop_client import AsyncClient, Client, Output, Step, make_chain_request, make_request
from tensorop_client._core import operators, plans
from tensorop_client._core.indexing import split_parts, strided_slice_key, tiles
from tensorop_client._core.progress import _Progress
from tensorop_client._core.requests import _prepare_any, answer_bytes_bound
from tensorop_client._core.routing import Target
from tensorop_client._core.shapes import (
    answer_bytes,
    chain_answer_bytes,
    layout_bytes,
    slice_window_sizes,
    strided_slice_sizes,
)
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.cases import load_cases
from test_core import FakeClient, FakeRemote, finish, handle, response, start, streamed

RNG = random.Random(47)


def random_bound(n: int) -> int | None:
    """A slice bound: None, inside the axis, negative, or past either end."""
    return RNG.choice([None, RNG.randint(-n - 3, n + 3), RNG.randint(-2 * n - 5, 2 * n + 5)])


def random_key(rank: int) -> tuple[Any, ...]:
    """A basic-indexing key for an array of `rank` dimensions: slices (any
    bounds, steps of either sign), integers, None and at most one Ellipsis,
    never more integers and slices than dimensions."""
    items: list[Any] = []
    consumed = 0
    ellipsis = False
    for _ in range(RNG.randint(0, rank + 3)):
        kind = RNG.choice(["slice", "slice", "int", "new", "ellipsis"])
        if kind in ("slice", "int") and consumed == rank:
            kind = "new"
        if kind == "ellipsis" and ellipsis:
            kind = "new"
        if kind == "slice":
            step = RNG.choice([None, 1, 2, 3, -1, -2, -5, 7])
            items.append(slice(random_bound(6), random_bound(6), step))
            consumed += 1
        elif kind == "int":
            items.append(RNG.randint(-7, 6))  # fixed below to fit its axis
            consumed += 1
        elif kind == "new":
            items.append(None)
        else:
            items.append(Ellipsis)
            ellipsis = True
    return tuple(items)


def fit_ints(key: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """`key` with each integer moved into its axis (None: an axis of size 0)."""
    consumed = sum(isinstance(k, int | slice) for k in key)
    dim, fitted = 0, []
    for item in key:
        if item is Ellipsis:
            dim += len(shape) - consumed
        elif isinstance(item, int):
            n = shape[dim]
            if n == 0:
                return None
            fitted.append(item % n - (n if item < 0 else 0))
            dim += 1
            continue
        elif isinstance(item, slice):
            dim += 1
        fitted.append(item)
    return tuple(fitted)


def attrs_message(attrs: dict[str, list[int]]) -> pb.StridedSliceAttrs:
    return pb.StridedSliceAttrs(**attrs)


def test_numpy_keys_map_to_attributes_whose_sizes_are_numpys() -> None:
    """Thousands of keys: the shape the mapping promises and the shape the
    attributes give by the operator's rules (strided_slice_sizes, what the
    server derives) are both x[key].shape."""
    checked = 0
    for _ in range(4000):
        rank = RNG.randint(1, 4)
        shape = tuple(RNG.choice([0, 1, 2, 3, 5, 6]) for _ in range(rank))
        key = fit_ints(random_key(rank), shape)
        if key is None:
            continue
        x = np.zeros(shape, np.uint8)
        mapped = strided_slice_key(key, shape)
        assert mapped.shape == x[key].shape, key
        assert strided_slice_sizes(shape, attrs_message(mapped.attrs)) == list(mapped.shape), key
        checked += 1
    assert checked > 3000


def test_the_mapping_sends_bounds_as_numpy_resolves_them() -> None:
    shape = (2, 3, 4)
    # x[1:, :, ::-1]: begin_mask and end_mask stand for the omitted bounds.
    attrs = strided_slice_key(np.s_[1:, :, ::-1], shape).attrs
    assert attrs["begin"] == [1, 0, 0] and attrs["end"] == [0, 0, 0]
    assert attrs["stride"] == [1, 1, -1]
    assert attrs["begin_mask"] == [0, 1, 1] and attrs["end_mask"] == [1, 1, 1]
    # Negative bounds counted from the end; a reversed range past element 0
    # is end_mask; an integer shrinks; None and Ellipsis are their masks.
    attrs = strided_slice_key(np.s_[-1, None, ..., 2:-9:-1], shape).attrs
    assert attrs["begin"] == [1, 0, 0, 2] and attrs["end"] == [2, 0, 0, 0]
    assert attrs["end_mask"] == [0, 0, 0, 1]
    assert attrs["shrink_axis_mask"] == [1, 0, 0, 0]
    assert attrs["new_axis_mask"] == [0, 1, 0, 0]
    assert attrs["ellipsis_mask"] == [0, 0, 1, 0]
    # The operator's one departure from NumPy: a reversed range whose begin is
    # below -n. NumPy: empty; sent as begin == end, which is empty there too.
    key = np.s_[-10::-1]
    assert np.zeros(5)[key].shape == (0,)
    mapped = strided_slice_key(key, (5,))
    assert (mapped.attrs["begin"], mapped.attrs["end"], mapped.shape) == ([0], [0], (0,))
    raw = pb.StridedSliceAttrs(begin=[-10], end=[0], stride=[-1], end_mask=[1])
    assert strided_slice_sizes([5], raw) == [1]  # as the key would be sent unresolved
    # No key items: no steps, the whole input.
    assert strided_slice_key((), shape).attrs["begin"] == []


@pytest.mark.parametrize(
    "key",
    [
        np.s_[0, 0, 0, 0],  # too many indices
        np.s_[..., 1, ...],  # two ellipses
        np.s_[2],  # out of bounds
        np.s_[:, -4],
        np.s_[::0],  # a step of 0
        np.s_[1.5],  # no index at all
        np.s_["a"],
        np.s_[1.5:],  # a slice bound that is no integer
    ],
    ids=repr,
)
def test_keys_numpy_refuses_raise_what_numpy_raises(key: Any) -> None:
    x = np.zeros((2, 3, 4))
    with pytest.raises(Exception) as expected:
        x[key]
    with pytest.raises(type(expected.value)) as got:
        strided_slice_key(key, x.shape)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize(
    "key", [[0, 1], np.array([0, 1]), True, np.bool_(False), (slice(None), [1])], ids=repr
)
def test_advanced_indexing_is_a_type_error(key: Any) -> None:
    with pytest.raises(TypeError, match="advanced indexing"):
        strided_slice_key(key, (2, 3))


def test_a_0d_integer_array_is_an_integer_index_as_in_numpy() -> None:
    x = np.zeros((4, 3))
    assert strided_slice_key(np.array(2), x.shape).shape == x[np.array(2)].shape == (3,)


@pytest.mark.parametrize(
    "indices_or_sections",
    [
        1,
        2,
        3,
        6,
        np.int64(2),
        2.0,
        [],
        [0],
        [1],
        [6],
        [10],
        [-1],
        [-10],
        [2, 4],
        [4, 2],
        [1, 1],
        [0, 0, 6],
        [3, -1, 9],
        np.array([2, 5]),
        (1, 2, 3, 4, 5),
    ],
    ids=repr,
)
def test_split_points_make_numpys_parts(indices_or_sections: Any) -> None:
    x = np.arange(6)
    parts = split_parts(6, indices_or_sections)
    expected = np.split(x, indices_or_sections)
    assert [x[a:b].tolist() for a, b in parts] == [e.tolist() for e in expected]
    assert all(a <= b for a, b in parts)


@pytest.mark.parametrize(
    "indices_or_sections, error",
    [
        (4, ValueError),
        (-2, ValueError),
        ([1.5], TypeError),
        ([[1, 2]], TypeError),
        (2.5, ValueError),
    ],
    ids=repr,
)
def test_split_points_numpy_refuses_raise_what_numpy_raises(
    indices_or_sections: Any, error: type[Exception]
) -> None:
    x = np.arange(6)
    with pytest.raises(error) as expected:
        np.split(x, indices_or_sections)
    with pytest.raises(error) as got:
        split_parts(6, indices_or_sections)
    assert str(got.value) == str(expected.value)
    # 0 sections: numpy's own ZeroDivisionError, a ValueError here.
    with pytest.raises(ValueError, match="number sections must be larger than 0"):
        split_parts(6, 0)


def test_parts_tile_when_they_follow_one_another() -> None:
    assert tiles(split_parts(6, [2, 2, 4]), 6)  # an empty part between
    assert tiles(split_parts(6, [0, 6, 9]), 6)
    assert not tiles(split_parts(6, [4, 2]), 6)  # [0:4], [4:2] empty, [2:6]: overlap


# ---- derived sizes ----------------------------------------------------------


def test_a_slice_without_outputs_gets_its_whole_window() -> None:
    assert slice_window_sizes([4, 3, 1], [2, -2, 5]) == [2, 2, 1]
    assert slice_window_sizes([7], [-3]) == [3]
    # No valid size: 1, so that the server names the attribute.
    assert slice_window_sizes([0, -2, 3, 4], [1, 1, 0]) == [1, 1, 1, 1]
    x = np.zeros((4, 6), np.int16)
    attrs = {"offsets": [0, 1], "window_sizes": [4, 5], "window_strides": [3, -2]}
    request = make_request("slice", {"input": x}, attrs)
    assert [list(o.sizes) for o in request.outputs] == [[2, 3]]
    request = make_request("slice", {"input": x}, attrs, [Output(strides=(1, 2))], keep=True)
    assert [(list(o.sizes), list(o.strides), o.keep) for o in request.outputs] == [
        ([2, 3], [1, 2], True)
    ]
    given = make_request("slice", {"input": x}, attrs, [(1, 1)])
    assert [list(o.sizes) for o in given.outputs] == [[1, 1]]
    # In a chain too, where a slice step without outputs is one output.
    first = Step("slice", {"input": x}, attrs)
    chain = make_chain_request(
        [first, Step("strided_slice", {"input": first}, {"begin": [1], "end": [2]})]
    )
    assert [list(o.sizes) for o in chain.steps[0].outputs] == [[2, 3]]
    source = chain.steps[1].inputs["input"].step
    assert (source.step, source.output) == (0, 0)
    assert first.output_count() == 1
    chain = make_chain_request([first], [first])  # a Step as a result: its one output
    assert [(r.step, r.output) for r in chain.results] == [(0, 0)]
    # run_many's requests too.
    many = _prepare_any(("slice", {"input": x}, attrs))
    assert [list(o.sizes) for o in many.header.outputs] == [[2, 3]]


def test_answer_bytes_are_the_public_cases_outputs(cases_dir: Path, dtype_cases: Path) -> None:
    """Every case the server answers with outputs: the bytes derived from
    the request alone (strided_slice's sizes by the operator's rules) are the
    expected outputs' bytes, in the layout the case asks for."""
    checked = 0
    for path in (cases_dir, dtype_cases):
        for loaded in load_cases(path):
            case = loaded.case
            assert case is not None
            if case.expected_error is not None:
                continue
            request = case.request
            descs = list(request.outputs) or [pb.OutputDesc()]
            expected = sum(
                layout_bytes((t.dtype, tuple(t.sizes)), list(d.strides)) or 0
                for t, d in zip(case.expected_outputs, descs, strict=True)
            )
            assert answer_bytes(request) == expected, case.name
            if request.WhichOneof("op") == "strided_slice":
                source = request.inputs["input"]
                sizes = strided_slice_sizes(list(source.sizes), request.strided_slice)
                assert sizes == case.expected_outputs[0].sizes, case.name
            checked += 1
    assert checked > 50


def test_strided_slice_sizes_are_none_for_requests_the_server_refuses() -> None:
    refused = [
        pb.StridedSliceAttrs(begin=[0], end=[1, 2]),  # lengths differ
        pb.StridedSliceAttrs(begin=[0], end=[1], stride=[0]),
        pb.StridedSliceAttrs(begin=[0, 0], end=[1, 1], ellipsis_mask=[1, 1]),
        pb.StridedSliceAttrs(begin=[0], end=[1], new_axis_mask=[1], shrink_axis_mask=[1]),
        pb.StridedSliceAttrs(begin=[5], end=[1], shrink_axis_mask=[1]),
        pb.StridedSliceAttrs(begin=[0], end=[1], begin_mask=[2]),
        pb.StridedSliceAttrs(begin=[0, 0, 0], end=[1, 1, 1]),  # more steps than dimensions
    ]
    for attrs in refused:
        assert strided_slice_sizes([4, 4], attrs) is None, attrs
    assert strided_slice_sizes([], pb.StridedSliceAttrs()) is None  # rank 0


def test_answer_bytes_count_layouts_and_skip_kept_outputs() -> None:
    x = np.zeros((4, 6), np.float32)
    assert answer_bytes(make_request("split", {"input": x}, {"axis": 1}, [(4, 2), (4, 4)])) == 96
    padded = make_request("split", {"input": x}, {"axis": 0}, [Output((1, 6), strides=(8, 2))])
    assert answer_bytes(padded) == (1 + 5 * 2) * 4
    kept = make_request("split", {"input": x}, {"axis": 0}, [(4, 6)], keep=True)
    assert answer_bytes(kept) == 0
    scatter = make_request(
        "scatter_elements", {"input": x, "indices": np.zeros((1, 6), np.int32), "updates": x[:1]}
    )
    assert answer_bytes(scatter) == 96
    remote = FakeRemote(None, handle("a" * 32, sizes=(4, 4)))
    assert (
        answer_bytes(make_request("strided_slice", {"input": remote}, {"begin": [1], "end": [3]}))
        == 32
    )
    # A handle named without its layout: unknown.
    request = pb.RunRequest(strided_slice=pb.StridedSliceAttrs(begin=[0], end=[1]))
    request.inputs["input"].handle.id = "a" * 32
    assert answer_bytes(request) is None
    # A chain: each step's outputs from the steps before it.
    first = Step(
        "slice", {"input": x}, {"offsets": [0, 0], "window_sizes": [4, 6], "window_strides": [2, 1]}
    )
    second = Step(
        "strided_slice", {"input": first}, {"begin": [0, 1], "end": [1, 6], "stride": [1, 2]}
    )
    halves = Step("split", {"input": first}, {"axis": 1}, [(2, 3), (2, 3)])
    chain = make_chain_request(
        [first, second, halves], [second.output(0), halves.output(1, keep=True), (0, 0)]
    )
    assert chain_answer_bytes(chain) == (3 + 12) * 4


# ---- progress ---------------------------------------------------------------


def test_progress_counts_a_known_answer_from_the_first_report() -> None:
    seen: list[tuple[int, int]] = []
    counter = _Progress(lambda d, t: seen.append((d, t)), 100, answer=60)
    counter.add()
    counter.add(done=100)
    assert not counter.announce(40) and not counter.announce(20)
    counter.add(done=60)
    assert not counter.settle()
    assert seen == [(0, 160), (100, 160), (160, 160)]
    # An answer other than counted: total follows it, and ends at done.
    larger = _Progress(None, 10, answer=5)
    assert larger.announce(8) and larger.total == 18
    smaller = _Progress(None, 10, answer=5)
    assert not smaller.announce(3) and smaller.settle() and smaller.total == 13
    unknown = _Progress(None, 10)
    assert unknown.announce(7) and unknown.total == 17 and not unknown.settle()


def test_a_streamed_run_reports_its_whole_total_from_the_first_report() -> None:
    x = np.arange(5, dtype=np.uint8)
    seen: list[tuple[int, int]] = []
    plan = plans.run_chunked(
        FakeClient(),
        "slice",
        {"input": x},
        {"offsets": [1], "window_sizes": [4], "window_strides": [-1]},
        chunk_bytes=2,
        progress=lambda d, t: seen.append((d, t)),
    )
    call = start(plan)
    assert len(list(call.request)) == 4  # the request, then 2 + 2 + 1 bytes, counted
    header = pb.OutputHeader(
        index=0, dtype=pb.UINT8, sizes=[4], strides=[1], byte_length=4, backend="cpu"
    )
    parts = [
        pb.ResultPart(header=header),
        pb.ResultPart(chunk=b"\4\3"),
        pb.ResultPart(chunk=b"\2\1"),
    ]
    result = finish(plan, streamed(call, parts))
    assert result.outputs[0].tolist() == [4, 3, 2, 1]
    assert seen == [(0, 9), (2, 9), (4, 9), (5, 9), (7, 9), (9, 9)]


def test_fetching_a_remote_tensor_knows_its_total() -> None:
    remote = FakeRemote(None, handle("e" * 32, "", (6,)))
    seen: list[tuple[int, int]] = []
    plan = plans.fetch(FakeClient(), remote, progress=lambda d, t: seen.append((d, t)))
    call = start(plan)
    header = pb.OutputHeader(index=0, dtype=pb.FLOAT32, sizes=[6], strides=[1], byte_length=24)
    x = np.arange(6, dtype=np.float32)
    parts = [
        pb.ResultPart(header=header),
        pb.ResultPart(chunk=x[:4].tobytes()),
        pb.ResultPart(chunk=x[4:].tobytes()),
    ]
    finish(plan, streamed(call, parts))
    assert seen == [(16, 24), (24, 24)]


# ---- the methods' plans -----------------------------------------------------


def test_split_is_one_split_with_the_non_empty_parts() -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    plan = operators.split(FakeClient(), x, [2, 2, 9], axis=-1)
    call = start(plan)
    assert call.method == "run"
    request = pb.RunRequest.FromString(call.request)
    assert request.split.axis == 1
    assert [list(o.sizes) for o in request.outputs] == [[2, 2], [2, 4]]
    parts = finish(plan, response(*(np.ascontiguousarray(p) for p in (x[:, :2], x[:, 2:]))))
    assert [p.shape for p in parts] == [(2, 2), (2, 0), (2, 4), (2, 0)]
    assert all(not p.flags.writeable for p in parts)
    assert parts[1].dtype == np.float32
    assert [p.tolist() for p in parts] == [p.tolist() for p in np.split(x, [2, 2, 9], axis=-1)]


def test_a_split_of_empty_parts_only_sends_nothing() -> None:
    x = np.zeros((0, 3), np.int8)
    seen: list[tuple[int, int]] = []
    with pytest.raises(StopIteration) as done:
        next(operators.split(FakeClient(), x, 3, axis=1, progress=lambda d, t: seen.append((d, t))))
    assert [p.shape for p in done.value.value] == [(0, 1)] * 3
    assert seen == [(0, 0)]
    with pytest.raises(TypeError):  # no tensor has this dtype, sent or not
        next(operators.split(FakeClient(), np.zeros((0, 3), np.complex64), 3))


@pytest.mark.parametrize(
    "x, indices, axis, keep",
    [
        (np.zeros((4, 3)), [3, 1], 0, False),  # overlapping parts
        (np.zeros((4, 3)), [2, 2], 0, True),  # an empty part, kept
        (np.zeros((2,) * 9), 2, -1, False),  # rank 9: over Split's 8
    ],
    ids=["overlap", "kept-empty", "rank-9"],
)
def test_splits_one_split_cannot_make_are_one_chain_of_strided_slices(
    x: np.ndarray, indices: Any, axis: int, keep: bool
) -> None:
    plan = operators.split(FakeClient(), x, indices, axis=axis, keep=keep)
    call = start(plan)
    assert call.method == "run_chain"
    chain = pb.RunChainRequest.FromString(call.request)
    ops = [s.WhichOneof("op") for s in chain.steps]
    assert set(ops) == {"strided_slice"}
    parts = split_parts(x.shape[axis], indices)
    wanted = len(parts) if keep else sum(a < b for a, b in parts)
    # The input is sent once (a copy step, read by the others), kept or not.
    assert len(chain.steps) == 1 + wanted
    assert [s.inputs["input"].HasField("tensor") for s in chain.steps] == [True] + [False] * wanted
    assert [r.keep for r in chain.results] == [keep] * wanted


def test_a_remote_input_is_read_by_each_step() -> None:
    remote = FakeRemote(None, handle("a" * 32, "r1", (4, 2)))
    call = start(operators.split(FakeClient(), remote, [3, 1]))
    chain = pb.RunChainRequest.FromString(call.request)
    assert len(chain.steps) == 2 and call.to.replica == "r1"
    assert all(s.inputs["input"].tensor.handle.id == "a" * 32 for s in chain.steps)


def test_strided_slice_sends_the_mapped_key_and_its_shape() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    call = start(operators.strided_slice(FakeClient(), x, np.s_[1, ::-2, None]))
    request = pb.RunRequest.FromString(call.request)
    assert [list(o.sizes) for o in request.outputs] == [[2, 1, 4]]
    assert list(request.strided_slice.shrink_axis_mask) == [1, 0, 0]
    # Rank 0 results: no sizes to send (the server derives them).
    call = start(operators.strided_slice(FakeClient(), x, np.s_[0, 1, 2]))
    assert not pb.RunRequest.FromString(call.request).outputs


def test_scatter_elements_broadcasts_updates_and_counts_the_axis_from_the_end() -> None:
    x = np.zeros((2, 3), np.float32)
    call = start(operators.scatter_elements(FakeClient(), x, [[0], [2]], 5, axis=-1))
    request = pb.RunRequest.FromString(call.request)
    assert request.scatter_elements.axis == 1
    updates = request.inputs["updates"]
    assert (updates.dtype, list(updates.sizes), list(updates.strides)) == (
        pb.FLOAT32,
        [2, 1],
        [0, 0],
    )
    assert request.inputs["indices"].dtype == pb.INT64
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        next(operators.scatter_elements(FakeClient(), x, [[0]], [[1]], axis=2))


def test_slice_makes_the_whole_window() -> None:
    x = np.zeros((4, 6), np.uint8)
    call = start(operators.slice(FakeClient(), x, [0, 1], [4, 5], [2, -1]))
    request = pb.RunRequest.FromString(call.request)
    assert [list(o.sizes) for o in request.outputs] == [[2, 5]]
    call = start(operators.slice(FakeClient(), x, [1, 1], [2, 3]))
    request = pb.RunRequest.FromString(call.request)
    assert list(request.slice.window_strides) == [1, 1]
    assert [list(o.sizes) for o in request.outputs] == [[2, 3]]


def test_a_tile_sends_numpys_reps_and_bounds_its_answer_by_the_derived_sizes() -> None:
    client = FakeClient()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # numpy.tile's reps: an integer, one shorter (padded with leading 1s), one
    # longer (x given leading 1s, here, as a view).
    for reps, sizes, repeats in [
        (2, [2, 3], [1, 2]),
        ((3,), [2, 3], [1, 3]),
        ((2, 1, 2), [1, 2, 3], [2, 1, 2]),
    ]:
        call = start(operators.tile(client, x, reps))
        assert call.method == "run"
        sent = pb.RunRequest.FromString(call.request)
        assert sent.WhichOneof("op") == "tile" and list(sent.tile.repeats) == repeats
        assert list(sent.inputs["input"].sizes) == sizes and not sent.outputs
        assert answer_bytes_bound(sent) == np.tile(x, reps).nbytes
    # Past 2^32 - 1 elements no sizes are derived: the input's bound, for the
    # server to answer RESOURCE_EXHAUSTED.
    one = np.zeros((1, 1), np.uint8)
    assert answer_bytes_bound(make_request("tile", {"input": one}, {"repeats": [65536] * 2})) == 1
    twice = {"repeats": [2, 2]}
    assert answer_bytes_bound(make_request("tile", {"input": x}, twice)) == 96
    assert answer_bytes_bound(make_request("tile", {"input": x}, twice, keep=True)) == 0


def test_a_tile_of_a_remote_tensor_takes_its_leading_dimensions_in_one_chain() -> None:
    client = FakeClient()
    remote = FakeRemote(client, handle("ab" * 16, "r2", (2, 3)))
    run = start(operators.tile(client, remote, 2, keep=True))  # padded: one Run
    sent = pb.RunRequest.FromString(run.request)
    assert list(sent.tile.repeats) == [1, 2] and [o.keep for o in sent.outputs] == [True]
    plan = operators.tile(client, remote, (2, 1, 1), keep=True)
    call = start(plan)
    assert call.method == "run_chain" and call.to == Target("r2", "ab" * 16)
    chain = pb.RunChainRequest.FromString(call.request)
    reshape, tile = chain.steps
    assert reshape.WhichOneof("op") == "reshape" and list(reshape.reshape.sizes) == [1, 2, 3]
    assert reshape.inputs["input"].tensor.handle.id == "ab" * 16
    assert tile.WhichOneof("op") == "tile" and list(tile.tile.repeats) == [2, 1, 1]
    assert tile.inputs["input"].step == pb.StepOutput(step=0, output=0)
    assert [(r.step, r.output, r.keep) for r in chain.results] == [(1, 0, True)]
    scalar = FakeRemote(client, pb.TensorHandle(id="cd" * 16, dtype=pb.FLOAT32))
    with pytest.raises(ValueError, match=r"0-d RemoteTensor leading dimensions"):
        start(operators.tile(client, scalar, 3))
    with pytest.raises(TypeError, match="reps must be an integer or a sequence of integers"):
        start(operators.tile(client, remote, None))  # type: ignore[arg-type]


def test_the_operators_methods_return_remote_tensors_when_kept() -> None:
    # The methods' arguments and docs are the plans' (test_core.py).
    assert "RemoteTensor" in inspect.signature(Client.split).return_annotation
    assert "AsyncRemoteTensor" in inspect.signature(AsyncClient.split).return_annotation
