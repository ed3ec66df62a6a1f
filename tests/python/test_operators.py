"""The operators' own methods against the real tensord, each through Client and
AsyncClient: split against numpy.split, strided_slice against x[key] (shapes
and bits), slice's whole window, scatter_elements against put_along_axis,
arrays and RemoteTensors in, arrays and kept RemoteTensors out, NumPy's
errors raised here and the server's INVALID_ARGUMENT; output sizes left out
of `run`; and progress whose total is the same in every report."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from conftest import REPO, Tensord
from tensorop_client import (
    AsyncClient,
    AsyncRemoteTensor,
    Client,
    Output,
    RemoteTensor,
    Step,
    TensorOpError,
)
from test_operators_core import fit_ints, random_key

DTYPES = [np.float32, np.int64, np.uint8, np.float16, ml_dtypes.bfloat16, np.bool_]


class Caller:
    """One client, sync or async, behind one blocking interface: `call(name,
    ...)` runs a method, `fetch` and `release` a kept tensor's."""

    def __init__(self, address: str, asynchronous: bool, **options: Any) -> None:
        self.asynchronous = asynchronous
        if asynchronous:
            self._loop = asyncio.new_event_loop()

            async def make() -> AsyncClient:
                return AsyncClient(address, timeout=60, **options)

            self.client: Any = self._loop.run_until_complete(make())
        else:
            self.client = Client(address, timeout=60, **options)

    def _wait(self, value: Any) -> Any:
        return self._loop.run_until_complete(value) if self.asynchronous else value

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._wait(getattr(self.client, name)(*args, **kwargs))

    def fetch(self, kept: Any) -> np.ndarray:
        kind = AsyncRemoteTensor if self.asynchronous else RemoteTensor
        assert isinstance(kept, kind), kept
        array: np.ndarray = self._wait(kept.fetch())
        return array

    def release(self, kept: Any) -> None:
        self._wait(self.client.release(kept))

    def close(self) -> None:
        self._wait(self.client.close())
        if self.asynchronous:
            self._loop.close()


def values(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Distinct values where the dtype allows (bool: a pattern)."""
    count = int(np.prod(shape))
    if np.dtype(dtype) == np.bool_:
        return (np.arange(count) % 3 == 1).reshape(shape)
    rng = np.random.default_rng(seed)
    return rng.permutation(count).astype(dtype).reshape(shape)


def same(got: Any, expected: np.ndarray) -> None:
    """Equal shape, dtype and bits."""
    assert isinstance(got, np.ndarray)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    width = np.dtype(f"<u{expected.itemsize}")
    assert np.array_equal(
        np.ascontiguousarray(got).view(width), np.ascontiguousarray(expected).view(width)
    )


# ---- split ------------------------------------------------------------------

SPLITS = [
    ((6,), 3, 0),
    ((6,), [2, 5], 0),
    ((4, 6), 2, -1),
    ((4, 6), [1, 1, 3], 1),  # an empty part
    ((4, 6), [0, 6], -1),  # empty parts at both ends
    ((4, 6), [-2], 0),  # from the end
    ((4, 6), [10], 0),  # past the end: the last part is empty
    ((4, 6), [-10, 2], 1),
    ((4, 6), [4, 2], 1),  # decreasing: parts overlap
    ((2, 3, 4), [], 2),  # one part: a copy
    ((2, 3, 4), np.array([1, 2]), -2),
    ((2, 3, 4), 1, -3),
    ((3, 1, 5, 2), 5, 2),
    ((2,) * 9, 2, 4),  # rank 9: over Split's 8
    ((0, 3), 3, 1),  # no elements: every part empty
]


@pytest.mark.parametrize("shape, indices, axis", SPLITS, ids=repr)
def test_split_is_numpys(caller: Caller, shape: tuple[int, ...], indices: Any, axis: int) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        expected = np.split(x, indices, axis=axis)
        got = caller.call("split", x, indices, axis)
        assert isinstance(got, list) and len(got) == len(expected)
        for part, want in zip(got, expected, strict=True):
            same(part, want)
            assert not part.flags.writeable


@pytest.mark.parametrize("shape, indices, axis", SPLITS, ids=repr)
def test_split_keeps_its_parts_and_reads_remote_tensors(
    caller: Caller, shape: tuple[int, ...], indices: Any, axis: int
) -> None:
    x = values(shape, np.int32)
    expected = np.split(x, indices, axis=axis)
    kept = caller.call("split", x, indices, axis, keep=True, backend="cpu")
    assert len(kept) == len(expected)
    for part, want in zip(kept, expected, strict=True):
        assert part.shape == want.shape and part.dtype == want.dtype
        same(caller.fetch(part), want)
    caller.release(kept)
    remote = caller.call("put", x)
    try:
        for part, want in zip(caller.call("split", remote, indices, axis), expected, strict=True):
            same(part, want)
    finally:
        caller.release(remote)


def test_split_of_strided_views_and_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    for backend in ("cpu", "opencl"):
        for x in (base[::2, 1::3], base.T, base[:, ::-1]):
            for indices in (1, [1, 2], [2, 1], [3]):
                for axis in (0, -1):
                    expected = np.split(x, indices, axis=axis)
                    got = caller.call("split", x, indices, axis=axis, backend=backend)
                    for part, want in zip(got, expected, strict=True):
                        same(part, want)


def test_split_raises_numpys_errors_before_sending(caller: Caller) -> None:
    x = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        caller.call("split", x, 4, axis=1)
    with pytest.raises(ValueError, match="number sections must be larger than 0"):
        caller.call("split", x, -2)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        caller.call("split", x, 2, axis=2)
    with pytest.raises(IndexError):  # numpy's own error for it
        caller.call("split", x, 2, axis=-3)
    with pytest.raises(TypeError, match="slice indices must be integers"):
        caller.call("split", x, [1.5])
    with pytest.raises(TypeError):  # no wire dtype
        caller.call("split", np.zeros(4, np.complex64), 2)


def test_split_errors_from_the_server_are_invalid_argument(caller: Caller) -> None:
    x = np.zeros((4, 6), np.float32)
    with pytest.raises(TensorOpError) as error:
        caller.call("split", x, 2, backend="opencl", device_index=99)
    assert error.value.code == "INVALID_ARGUMENT" and "device_index = 99" in error.value.message
    try:
        rank_33 = np.zeros((1,) * 33, np.uint8)
    except ValueError:  # numpy 1 stops at rank 32
        return
    with pytest.raises(TensorOpError) as error:  # rank 33: over StridedSlice's 32 too
        caller.call("split", rank_33, 1)
    assert error.value.code == "INVALID_ARGUMENT" and "rank 1..32" in error.value.message


# ---- strided_slice ----------------------------------------------------------

KEYS = [
    np.s_[1:3, ::-2, None, ...],
    np.s_[...],
    np.s_[()],
    np.s_[::-1],
    np.s_[::-1, ::-1, ::-1],
    np.s_[-1],
    np.s_[0, -1, 2],  # every dimension shrunk: a 0-d result
    np.s_[..., 1],
    np.s_[None, ..., None],
    np.s_[:, None, 1:, -2:0:-1],
    np.s_[-100:100, 100:],  # bounds past both ends; an empty result
    np.s_[-10::-1],  # reversed from below -n: NumPy's empty range, not element 0
    np.s_[1:-10:-1],  # reversed past element 0
    np.s_[5:1:-2, :, ::3],
    np.s_[1:1],
    np.s_[:, 4:1],
    np.s_[np.int64(1), np.array(2)],
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_strided_slice_is_x_of_key(caller: Caller, key: Any) -> None:
    for dtype in DTYPES:
        x = values((3, 4, 5), dtype)
        got = caller.call("strided_slice", x, key)
        same(got, np.asarray(x[key]))


def test_strided_slice_of_random_keys_on_random_shapes(caller: Caller) -> None:
    rng = random.Random(5)
    checked = 0
    while checked < 150:
        rank = rng.randint(1, 4)
        shape = tuple(rng.choice([0, 1, 2, 3, 5]) for _ in range(rank))
        key = fit_ints(random_key(rank), shape)
        if key is None:
            continue
        x = values(shape, np.uint16, seed=checked)
        view = x[::-1] if rank > 1 and checked % 3 == 0 else x  # a strided view sometimes
        same(caller.call("strided_slice", view, key), np.asarray(view[key]))
        checked += 1


def test_strided_slice_keeps_and_reads_remote_tensors(caller: Caller) -> None:
    x = values((4, 6), np.float32)
    for key in (np.s_[::-1, 1::2], np.s_[2, 3], np.s_[4:, None]):
        kept = caller.call("strided_slice", x, key, keep=True)
        assert kept.shape == x[key].shape
        same(caller.fetch(kept), np.asarray(x[key]))
        caller.release(kept)
    remote = caller.call("put", x)
    try:
        same(caller.call("strided_slice", remote, np.s_[:, ::-3]), x[:, ::-3])
    finally:
        caller.release(remote)


def test_strided_slice_raises_numpys_errors_before_sending(caller: Caller) -> None:
    x = np.zeros((2, 3))
    with pytest.raises(IndexError, match="too many indices for array"):
        caller.call("strided_slice", x, np.s_[0, 0, 0])
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        caller.call("strided_slice", x, np.s_[:, 3])
    with pytest.raises(IndexError, match="single ellipsis"):
        caller.call("strided_slice", x, np.s_[..., ...])
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        caller.call("strided_slice", x, np.s_[::0])
    with pytest.raises(IndexError, match="only integers, slices"):
        caller.call("strided_slice", x, 1.0)
    with pytest.raises(TypeError, match="advanced indexing"):
        caller.call("strided_slice", x, [0, 1])


def test_strided_slice_of_a_0d_input_is_refused_by_the_server(caller: Caller) -> None:
    with pytest.raises(TensorOpError) as error:
        caller.call("strided_slice", np.array(5.0), np.s_[None])
    assert error.value.code == "INVALID_ARGUMENT"
    assert error.value.message == "input.sizes has 0 dimensions; strided_slice takes rank 1..32"


# ---- slice ------------------------------------------------------------------


def test_slice_makes_the_whole_window(caller: Caller) -> None:
    x = values((1, 1, 4, 4), np.float32) + 1
    got = caller.call("slice", x, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])
    same(got, x[:, :, 3::-2, 1:4:2])
    same(caller.call("slice", x, [0, 0, 1, 1], [1, 1, 2, 3]), x[:, :, 1:3, 1:4])
    kept = caller.call("slice", x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 3, -3], keep=True)
    same(caller.fetch(kept), x[:, :, ::3, ::-3])
    caller.release(kept)
    with pytest.raises(TensorOpError) as error:
        caller.call("slice", x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 0, 1])
    assert (error.value.code, error.value.message) == (
        "INVALID_ARGUMENT",
        "slice.window_strides[2] must not be 0",
    )


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_run_derives_a_slices_output_sizes(caller: Caller, call: str) -> None:
    x = values((5, 7), np.int16)
    attrs = {"offsets": [1, 0], "window_sizes": [4, 7], "window_strides": [-3, 2]}
    (out,) = caller.call(call, "slice", {"input": x}, attrs).outputs
    same(out, x[4:0:-3, ::2])
    (out,) = caller.call(call, "slice", {"input": x}, attrs, [Output(strides=(1, 2))]).outputs
    assert out.strides == (2, 4)  # the strides asked for, in bytes
    same(out, x[4:0:-3, ::2])
    (kept,) = caller.call(call, "slice", {"input": x}, attrs, keep=True).outputs
    same(caller.fetch(kept), x[4:0:-3, ::2])
    caller.release(kept)
    # Attributes that make no window: the server names them.
    bad = dict(attrs, window_sizes=[4, 0])
    with pytest.raises(TensorOpError) as error:
        caller.call(call, "slice", {"input": x}, bad)
    assert (error.value.code, error.value.message) == (
        "INVALID_ARGUMENT",
        "slice.window_sizes[1] must be >= 1, got 0",
    )


def test_a_chain_slice_step_without_outputs_makes_its_whole_window(caller: Caller) -> None:
    x = values((4, 6), np.float32)
    first = Step(
        "slice",
        {"input": x},
        {"offsets": [0, 0], "window_sizes": [4, 6], "window_strides": [-1, 2]},
    )
    halves = Step("split", {"input": first}, {"axis": 0}, [(2, 3), (2, 3)])
    top, bottom = caller.call("chain", [first, halves]).outputs
    same(top, x[::-1, ::2][:2])
    same(bottom, x[::-1, ::2][2:])


# ---- scatter_elements -------------------------------------------------------


def put_along_axis(x: np.ndarray, indices: np.ndarray, updates: Any, axis: int) -> np.ndarray:
    expected = x.copy()
    np.put_along_axis(expected, indices, updates, axis)
    return expected


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_scatter_elements_is_put_along_axis(caller: Caller, axis: int) -> None:
    rng = np.random.default_rng(axis + 3)
    shape = (3, 4, 5)
    for dtype in DTYPES:
        x = values(shape, dtype)
        n = shape[axis]
        # Distinct indices along the axis (no element written twice), some negative.
        order = np.argsort(rng.random(shape), axis=axis)
        indices = np.take(order, range(n - 1), axis=axis)
        indices = np.where(indices % 2 == 1, indices - n, indices)
        updates = values(indices.shape, dtype, seed=9)
        got = caller.call("scatter_elements", x, indices, updates, axis=axis)
        same(got, put_along_axis(x, indices % n, updates, axis))


def test_scatter_elements_broadcasts_updates_keeps_and_reads_remote_tensors(
    caller: Caller,
) -> None:
    x = values((2, 5), np.int32)
    indices = np.array([[4, 0], [1, -1]])
    same(
        caller.call("scatter_elements", x, indices, 7, axis=-1),
        put_along_axis(x, indices % 5, 7, 1),
    )
    same(
        caller.call("scatter_elements", x.tolist(), indices.tolist(), [[8], [9]], 1),
        put_along_axis(x.astype(np.int64), indices % 5, np.array([[8], [9]]), 1),
    )
    remote = caller.call("put", x)
    try:
        kept = caller.call("scatter_elements", remote, indices, [[1, 2], [3, 4]], axis=1, keep=True)
        same(caller.fetch(kept), put_along_axis(x, indices % 5, np.array([[1, 2], [3, 4]]), 1))
        caller.release(kept)
    finally:
        caller.release(remote)


def test_scatter_elements_errors(caller: Caller) -> None:
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(np.exceptions.AxisError):
        caller.call("scatter_elements", x, [[0]], [[1]], axis=2)
    with pytest.raises(TensorOpError) as error:
        caller.call("scatter_elements", x, np.array([[0], [5]]), 1.0, axis=1)
    assert (error.value.code, error.value.message) == (
        "INVALID_ARGUMENT",
        "indices[1, 0] = 5 is outside [-5, 5) for input.sizes[1] = 5 (scatter_elements.axis = 1)",
    )
    with pytest.raises(TensorOpError) as error:  # updates of another dtype: not cast here
        caller.call("scatter_elements", x, np.array([[0]]), np.array([[1]], np.int32), axis=1)
    assert error.value.code == "INVALID_ARGUMENT"


# ---- progress ---------------------------------------------------------------


def check_progress(seen: list[tuple[int, int]], total: int) -> None:
    """Many reports, each with the whole total, done only growing to it."""
    assert len(seen) > 3
    assert {t for _, t in seen} == {total}
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and dones[-1] == total


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_progress_reports_the_whole_total_from_the_first_report(small: Caller, call: str) -> None:
    x = values((100_000,), np.uint16)  # 200000 bytes up, 150000 down: both ways in chunks
    seen: list[tuple[int, int]] = []
    attrs = {"offsets": [10], "window_sizes": [75_000], "window_strides": [1]}
    result = small.call(
        call, "slice", {"input": x}, attrs, progress=lambda d, t: seen.append((d, t))
    )
    same(result.outputs[0], x[10:75_010])
    check_progress(seen, 350_000)
    assert seen[0] == (0, 350_000)
    # strided_slice and scatter_elements: sizes that follow from the input.
    seen.clear()
    small.call(
        call,
        "strided_slice",
        {"input": x},
        {"begin": [-1], "end": [0], "stride": [-2]},
        progress=lambda d, t: seen.append((d, t)),
    )
    check_progress(seen, 200_000 + 100_000)
    seen.clear()
    indices = np.arange(50_000, dtype=np.uint32)
    small.call(
        call,
        "scatter_elements",
        {"input": x, "indices": indices, "updates": x[:50_000]},
        {"axis": 0},
        progress=lambda d, t: seen.append((d, t)),
    )
    check_progress(seen, 200_000 + 200_000 + 100_000 + 200_000)


def test_the_methods_progress_has_one_total(small: Caller) -> None:
    x = values((300, 200), np.float32)  # 240000 bytes
    seen: list[tuple[int, int]] = []
    parts = small.call("split", x, [100, 100, 250], progress=lambda d, t: seen.append((d, t)))
    assert [p.shape for p in parts] == [(100, 200), (0, 200), (150, 200), (50, 200)]
    check_progress(seen, 240_000 + 240_000)
    seen.clear()
    # A split made by a chain (overlapping parts): the results' bytes are known too.
    parts = small.call("split", x, [200, 100], progress=lambda d, t: seen.append((d, t)))
    for part, want in zip(parts, np.split(x, [200, 100]), strict=True):
        same(part, want)
    check_progress(seen, 240_000 + (160_000 + 0 + 160_000))
    seen.clear()
    out = small.call(
        "strided_slice", x, np.s_[::-1, 1::2], progress=lambda d, t: seen.append((d, t))
    )
    same(out, x[::-1, 1::2])
    check_progress(seen, 240_000 + 120_000)
    seen.clear()
    kept = small.call(
        "slice",
        x,
        [0, 0],
        [300, 200],
        [1, -1],
        keep=True,
        progress=lambda d, t: seen.append((d, t)),
    )
    check_progress(seen, 240_000)  # kept: no bytes come back
    seen.clear()
    got = small.call("fetch", kept, progress=lambda d, t: seen.append((d, t)))
    same(got, x[:, ::-1])
    check_progress(seen, 240_000)
    small.release(kept)


# ---- the README -------------------------------------------------------------


def test_the_readme_example_runs_as_written(tensord: Tensord) -> None:
    """client/python/README.md's example of the methods, as a program, against
    this tensord in place of the 127.0.0.1:50051 it dials."""
    readme = (REPO / "client/python/README.md").read_text()
    section = readme.split("## One method per operator", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"127.0.0.1:50051"' in code and "client.split(" in code
    program = code.replace("127.0.0.1:50051", tensord.address)
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
