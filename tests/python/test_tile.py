"""tile against the real tensord, through Client and AsyncClient: the method
against numpy.tile, shapes and bits, for float32, bfloat16, bool and int64
(an integer `reps`, one shorter than the rank, padded with leading 1s, and
one longer, which gives the input leading dimensions); strided and broadcast
inputs on both backends; kept outputs and RemoteTensors in (a longer `reps`
through a Reshape step in one chain); `run` without outputs; chains; the
server's INVALID_ARGUMENT naming tile.repeats and its RESOURCE_EXHAUSTED;
and a tile whose answer outgrows the message limit."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tensorop_client import Step, TensorOpError
from test_operators import Caller, check_progress, same, values

DTYPES = [np.float32, ml_dtypes.bfloat16, np.bool_, np.int64]


def refused(error: pytest.ExceptionInfo[TensorOpError]) -> str:
    """The server's INVALID_ARGUMENT message."""
    assert error.value.code == "INVALID_ARGUMENT", error.value
    return error.value.message


# ---- numpy.tile ---------------------------------------------------------------

TILES = [
    ((2, 3), 2, (2, 6)),  # an integer: the last dimension
    ((2, 3), (2,), (2, 6)),  # shorter than the rank: padded with leading 1s
    ((2, 3, 4), (3, 2), (2, 9, 8)),
    ((2, 3), (3, 2), (6, 6)),
    ((2, 3), (2, 1, 2), (2, 2, 6)),  # longer: x takes a leading dimension of size 1
    ((4,), (2, 3), (2, 12)),
    ((3,), (2, 1, 1, 2), (2, 1, 1, 6)),
    ((3,), 1, (3,)),  # all 1s: a copy
    ((1, 1, 2, 3), (1, 1, 3, 3), (1, 1, 6, 9)),  # DirectML's example (tile/doc_example)
    ((2, 2), np.array([1, 2]), (2, 4)),
    ((), 3, (3,)),  # a 0-d array: a leading dimension, made here
    ((), (2, 2), (2, 2)),
    ((1, 2, 1, 1, 2, 1, 1, 1), (2, 1, 1, 3, 1, 1, 1, 2), (2, 2, 1, 3, 2, 1, 1, 2)),  # rank 8
    ((2, 3), (1, 1, 1, 1, 1, 1, 2, 1), (1, 1, 1, 1, 1, 1, 4, 3)),  # rank 8 from reps
]


@pytest.mark.parametrize("shape, reps, tiled", TILES, ids=repr)
def test_tile_is_numpys(caller: Caller, shape: tuple[int, ...], reps: Any, tiled: Any) -> None:
    for dtype in DTYPES:
        x = values(shape, dtype)
        got = caller.call("tile", x, reps)
        assert got.shape == tiled
        same(got, np.tile(x, reps))
        assert not got.flags.writeable


def test_tile_values_are_the_operators_example(caller: Caller) -> None:
    x = np.array([[1, 2], [3, 4]], np.float32)
    assert caller.call("tile", x, (1, 2)).tolist() == [[1, 2, 1, 2], [3, 4, 3, 4]]
    assert caller.call("tile", x, 2).tolist() == [[1, 2, 1, 2], [3, 4, 3, 4]]
    assert caller.call("tile", x[0], (2, 1)).tolist() == [[1, 2], [1, 2]]
    flags = np.array([True, False])
    assert caller.call("tile", flags, (2, 2)).tolist() == [[True, False, True, False]] * 2
    halves = np.array([1.5, -0.0, np.inf], ml_dtypes.bfloat16)
    got = caller.call("tile", halves, 2)
    assert got.dtype == ml_dtypes.bfloat16
    assert got.view(np.uint16).tolist() == halves.view(np.uint16).tolist() * 2  # -0.0 kept


def test_tile_of_strided_views_and_both_backends(caller: Caller) -> None:
    base = values((6, 8), np.float32)
    for backend in ("cpu", "opencl"):
        for x in (base.T, base[:, ::2], base[::-1, 1::3], np.broadcast_to(base[:1], (4, 8))):
            for reps in (2, (2, 1), (3, 2), (2, 1, 2)):
                same(caller.call("tile", x, reps, backend=backend), np.tile(x, reps))


# ---- kept outputs, RemoteTensors in -------------------------------------------


def test_kept_outputs_fetch_as_numpy_tiles(caller: Caller) -> None:
    x = values((2, 3), ml_dtypes.bfloat16)
    for reps in ((2, 2), 3, (2, 1, 1)):
        kept = caller.call("tile", x, reps, keep=True)
        expected = np.tile(x, reps)
        assert (kept.shape, kept.dtype) == (expected.shape, expected.dtype), reps
        same(caller.fetch(kept), expected)
        caller.release(kept)


def test_remote_tensors_in_and_kept_results_as_the_next_input(caller: Caller) -> None:
    x = values((4, 6), np.int64)
    view = x[:, ::2]
    remote = caller.call("put", view)  # strided on the server too
    made = [remote]
    try:
        same(caller.call("tile", remote, (2, 3)), np.tile(view, (2, 3)))
        same(caller.call("tile", remote, 2), np.tile(view, 2))  # padded reps
        # reps longer than the rank: a Reshape step gives it leading 1s, one chain.
        same(caller.call("tile", remote, (2, 1, 2)), np.tile(view, (2, 1, 2)))
        same(caller.call("tile", remote, (3, 1, 1, 1)), np.tile(view, (3, 1, 1, 1)))
        wide = caller.call("tile", remote, (2, 1, 2), keep=True)
        made.append(wide)
        assert wide.shape == (2, 4, 6)
        same(caller.fetch(wide), np.tile(view, (2, 1, 2)))
        # A kept result as the next input, through tile and another operator.
        again = caller.call("tile", wide, (2, 1, 1, 1), keep=True)
        made.append(again)
        assert again.shape == (2, 2, 4, 6)
        same(caller.fetch(again), np.tile(view, (2, 2, 1, 2)))
        same(caller.call("transpose", wide, (2, 0, 1)), np.tile(view, (2, 1, 2)).transpose(2, 0, 1))
        # A transposed kept tensor (a view on the server) tiled.
        turned = caller.call("transpose", remote, keep=True)
        made.append(turned)
        same(caller.call("tile", turned, (1, 2)), np.tile(view.T, (1, 2)))
        same(caller.call("tile", turned, (2, 1, 1)), np.tile(view.T, (2, 1, 1)))
    finally:
        for kept in made:
            caller.release(kept)


def test_a_0d_remote_tensor_takes_no_leading_dimensions(caller: Caller) -> None:
    x = values((5,), np.float32)
    scalar = caller.call("strided_slice", x, np.s_[2], keep=True)  # kept, rank 0
    try:
        assert scalar.shape == ()
        with pytest.raises(ValueError) as error:
            caller.call("tile", scalar, 3)
        assert str(error.value) == (
            "tile: reps [3] give a 0-d RemoteTensor leading dimensions, which the server's "
            "Reshape cannot (it takes rank 1..8): fetch it and tile the array"
        )
        # Fetched, the array tiles as NumPy's.
        same(caller.call("tile", caller.fetch(scalar), 3), np.tile(x[2], 3))
    finally:
        caller.release(scalar)


# ---- run, chains, large answers -----------------------------------------------


@pytest.mark.parametrize("call", ["run", "run_stream", "run_chunked"])
def test_run_derives_the_output_sizes(caller: Caller, call: str) -> None:
    x = values((2, 3), np.bool_)
    (out,) = caller.call(call, "tile", {"input": x}, {"repeats": [2, 3]}).outputs
    same(out, np.tile(x, (2, 3)))
    column = values((3, 4), np.float32)[:, 1:2]  # (3, 1), strided
    (out,) = caller.call(call, "tile", {"input": column}, {"repeats": [1, 4]}).outputs
    same(out, np.tile(column, (1, 4)))
    (out,) = caller.call(call, "tile", {"input": x}, {"repeats": [1, 2]}, [(2, 6)]).outputs
    same(out, np.tile(x, (1, 2)))  # sizes given: the server checks them
    (kept,) = caller.call(call, "tile", {"input": x}, {"repeats": [3, 1]}, keep=True).outputs
    assert kept.shape == (6, 3)
    same(caller.fetch(kept), np.tile(x, (3, 1)))
    caller.release(kept)


def test_a_chain_tiles_then_slices(caller: Caller) -> None:
    x = values((2, 3), np.float32)
    tiled = Step("tile", {"input": x}, {"repeats": [2, 3]})  # (4, 9)
    window = Step(
        "slice",
        {"input": tiled},
        {"offsets": [1, 2], "window_sizes": [3, 6], "window_strides": [2, 3]},
    )
    rows = Step("strided_slice", {"input": tiled}, {"begin": [3], "end": [0], "stride": [-2]})
    again = Step("tile", {"input": window}, {"repeats": [1, 2]})
    result = caller.call(
        "chain", [tiled, window, rows, again], [window, rows, again, tiled.output(0, keep=True)]
    )
    got_window, got_rows, got_again, kept = result.outputs
    big = np.tile(x, (2, 3))
    same(got_window, big[1:4:2, 2:8:3])
    assert got_window.shape == (2, 2)
    same(got_rows, big[3:0:-2])
    same(got_again, np.tile(big[1:4:2, 2:8:3], (1, 2)))
    same(caller.fetch(kept), big)
    caller.release(kept)


def test_a_chain_tiles_a_kept_input_then_slices(caller: Caller) -> None:
    x = values((3, 2), np.int64)
    remote = caller.call("put", x)
    try:
        tiled = Step("tile", {"input": remote}, {"repeats": [1, 4]})  # (3, 8)
        part = Step("slice", {"input": tiled}, {"offsets": [0, 3], "window_sizes": [3, 4],
                                                "window_strides": [1, 1]})  # fmt: skip
        (out,) = caller.call("chain", [tiled, part]).outputs
        same(out, np.tile(x, (1, 4))[:, 3:7])
    finally:
        caller.release(remote)


def test_a_tile_larger_than_a_message_streams_back(small: Caller) -> None:
    x = values((10, 100), np.float32)  # 4000 bytes up; 400000 down, over the 64 KiB limit
    seen: list[tuple[int, int]] = []
    got = small.call("tile", x, (10, 10), progress=lambda d, t: seen.append((d, t)))
    same(got, np.tile(x, (10, 10)))
    check_progress(seen, 4000 + 400_000)
    seen.clear()
    remote = small.call("put", x)
    try:  # through the chain: the Reshape step, then the Tile
        got = small.call("tile", remote, (2, 5, 10), progress=lambda d, t: seen.append((d, t)))
        same(got, np.tile(x, (2, 5, 10)))
        check_progress(seen, 400_000)
    finally:
        small.release(remote)


# ---- errors -------------------------------------------------------------------


def test_tile_errors(caller: Caller) -> None:
    x = values((2, 2), np.float32)
    with pytest.raises(TypeError, match="reps must be an integer or a sequence of integers"):
        caller.call("tile", x, (2.0, 3))
    with pytest.raises(TypeError, match="reps must be an integer or a sequence of integers"):
        caller.call("tile", x, "2, 3")
    # A 0 (NumPy's empty result) or a negative count: the server's, naming the
    # entry of the padded reps.
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", x, (1, 0))
    assert refused(error) == "tile.repeats[1] must be >= 1, got 0"
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", x, 0)  # padded: [1, 0]
    assert refused(error) == "tile.repeats[1] must be >= 1, got 0"
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", x, (-1, 2))
    assert refused(error) == "tile.repeats[0] must be >= 1, got -1"
    # run sends repeats as given: one per dimension.
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "tile", {"input": x}, {"repeats": [2]})
    assert refused(error) == (
        "tile.repeats has 1 entries; the input has rank 2 and takes one repeat count per dimension"
    )
    with pytest.raises(TensorOpError) as error:
        caller.call("run", "tile", {"input": x}, {"repeats": [2, 2, 2]})
    assert refused(error).startswith("tile.repeats has 3 entries; the input has rank 2")
    # Ranks 1..8: a 0-d array with an empty reps, a reps giving it a ninth dimension.
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", values((), np.float32), ())
    assert refused(error) == "input.sizes has 0 dimensions; tile takes rank 1..8"
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", x, (1,) * 9)
    assert refused(error) == "input.sizes has 9 dimensions; tile takes rank 1..8"
    # An output over 2^32 - 1 elements.
    with pytest.raises(TensorOpError) as error:
        caller.call("tile", values((1, 1), np.uint8), (65536, 65536))
    assert error.value.code == "RESOURCE_EXHAUSTED", error.value
    assert error.value.message == (
        "outputs[0].sizes [65536, 65536] hold 4294967296 elements; the limit is 4294967295"
    )


def test_tile_errors_of_a_kept_input_through_the_chain(caller: Caller) -> None:
    remote = caller.call("put", values((2, 2), np.float32))
    try:
        with pytest.raises(TensorOpError) as error:
            caller.call("tile", remote, (1, 0))  # one Run: the request's own field
        assert refused(error) == "tile.repeats[1] must be >= 1, got 0"
        with pytest.raises(TensorOpError) as error:  # Reshape, then Tile: steps[1]
            caller.call("tile", remote, (0, 1, 1))
        assert refused(error) == "steps[1].tile.repeats[0] must be >= 1, got 0"
        with pytest.raises(TensorOpError) as error:  # a ninth dimension: Reshape's refusal
            caller.call("tile", remote, (1,) * 9)
        assert refused(error) == "steps[0].reshape.sizes has 9 entries; reshape takes 1..8"
        with pytest.raises(TensorOpError) as error:
            caller.call("tile", remote, (65536, 65536, 1))
        assert error.value.code == "RESOURCE_EXHAUSTED", error.value
    finally:
        caller.release(remote)
