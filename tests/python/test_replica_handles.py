"""Handles across replicas through the Python client: three tensord replicas
behind one target. A RemoteTensor lives on one replica (handle.replica), and
run, fetch, release and chains using it go there; a call reading handles of
two replicas raises INVALID_ARGUMENT before anything is sent."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import AsyncClient, Client, RemoteTensor, Step, TensorOpError
from tensorop_client._proto import tensorop_pb2 as pb
from tensorop_client.channel import (
    replica_service_config_json,
    service_config_json,
    target_authority,
)
from tensorop_client.conformance import run_with_handles

REPLICAS = 3
# README's slice of float32 [1,1,4,4] 1..16: 2, 4, 10, 12.
DOC = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
SLICE = {"offsets": [0, 0, 0, 1], "window_sizes": [1, 1, 4, 3], "window_strides": [1, 1, 2, 2]}
SLICED = np.array([2, 4, 10, 12], dtype=np.float32).reshape(1, 1, 2, 2)
ROW = np.array([1, 2, 3, 4], dtype=np.float32)
UPDATE = np.array([-7], dtype=np.float32)
AT_2 = np.array([2], dtype=np.int32)


@pytest.fixture
def replicas(tensord_binary: str, tmp_path: Path) -> Iterator[list[Tensord]]:
    # A replica holding handles serves them for its grace period on SIGTERM:
    # short here, and the tests release what they made.
    servers = [
        Tensord(tensord_binary, tmp_path / f"replica{i}.log", "--backends=cpu",
                "--shutdown_grace_seconds=5")
        for i in range(REPLICAS)
    ]
    yield servers
    for server in servers:
        server.stop()


def target(replicas: list[Tensord]) -> str:
    return ",".join(r.address for r in replicas)


def put_on_several(client: Client) -> list[RemoteTensor]:
    """DOC Put until the handles sit on every replica (round-robin spreads
    them once the channel has connected to each)."""
    handles: list[RemoteTensor] = []
    while len(handles) < 30 and (
        len(handles) < 6 or len({h.handle.replica for h in handles}) < REPLICAS
    ):
        handles.append(client.put(DOC))
    return handles


def test_replica_channels_use_pick_first_without_health_checking() -> None:
    shared = json.loads(service_config_json())
    replica = json.loads(replica_service_config_json())
    assert replica["loadBalancingConfig"] == [{"pick_first": {}}]
    assert "healthCheckConfig" not in replica
    assert replica["methodConfig"] == shared["methodConfig"]


@pytest.mark.parametrize(
    ("target", "authority"),
    [
        ("tensord.example:50051", "tensord.example:50051"),
        ("dns:///tensord.default.svc:50051", "tensord.default.svc:50051"),
        ("dns://10.0.0.10:53/tensord:50051", "tensord:50051"),
        ("10.0.0.1:50051,10.0.0.2:50051", None),
        ("ipv4:10.0.0.1:50051", None),
        ("unix:///run/tensord.sock", None),
    ],
)
def test_target_authority(target: str, authority: str | None) -> None:
    assert target_authority(target) == authority


def test_remote_tensors_are_used_on_their_replica(replicas: list[Tensord]) -> None:
    with Client(target(replicas), timeout=30) as client:
        handles = put_on_several(client)
        held_on = {h.handle.replica for h in handles}
        assert held_on <= {r.address for r in replicas}
        assert len(held_on) >= 2, "round-robin put every handle on one replica"
        kept: list[RemoteTensor] = []
        # The other replicas do not have a handle (NOT_FOUND): right answers
        # show each call went to its replica.
        for h in handles:
            for call in (client.run, client.run_stream, client.run_chunked):
                out = call("slice", {"input": h}, SLICE, outputs=[(1, 1, 2, 2)], backend="cpu")
                np.testing.assert_array_equal(out.outputs[0], SLICED)
            first = Step("slice", {"input": h}, SLICE, outputs=[(1, 1, 2, 2)])
            row = Step("slice", {"input": first}, {"offsets": [0, 0, 0, 0],
                       "window_sizes": [1, 1, 1, 2], "window_strides": [1, 1, 1, 1]},
                       outputs=[(1, 1, 1, 2)])
            np.testing.assert_array_equal(client.chain([first, row]).outputs[0], [[[[2, 4]]]])
            out = client.run("slice", {"input": h}, SLICE, outputs=[(1, 1, 2, 2)], keep=True)
            kept.append(out.outputs[0])
            assert kept[-1].handle.replica == h.handle.replica
            np.testing.assert_array_equal(kept[-1].fetch(), SLICED)
            np.testing.assert_array_equal(h.fetch(), DOC)
        # run_many's requests on handles go to their replicas too.
        requests = [("slice", {"input": h}, SLICE, [(1, 1, 2, 2)], "cpu") for h in handles]
        for outcome in client.run_many(requests):
            assert not isinstance(outcome, TensorOpError), outcome
            np.testing.assert_array_equal(outcome.outputs[0], SLICED)

        client.release(handles + kept)  # one call per replica
        for h in handles:
            with pytest.raises(TensorOpError) as failed:
                h.fetch()
            assert failed.value.code == "NOT_FOUND"
            assert f"does not exist on replica {h.handle.replica}" in failed.value.message


def test_a_call_reading_handles_of_two_replicas_raises_before_sending(
    replicas: list[Tensord],
) -> None:
    with Client(target(replicas), timeout=30) as client:
        handles = put_on_several(client)
        a = handles[0].handle.replica
        b = next(h.handle.replica for h in handles if h.handle.replica != a)
        row = client.put(ROW, replica=a)
        far = client.put(UPDATE, replica=b)
        near = client.put(UPDATE, replica=a)
        assert (row.handle.replica, far.handle.replica, near.handle.replica) == (a, b, a)

        message = (
            f'inputs["input"] lives on replica {a} and inputs["updates"] on replica {b}; '
            "a call reads handles of one replica"
        )
        mixed = {"input": row, "indices": AT_2, "updates": far}
        for call in (client.run, client.run_stream, client.run_chunked):
            with pytest.raises(TensorOpError) as refused:
                call("scatter_elements", mixed, {"axis": 0}, backend="cpu")
            assert (refused.value.code, refused.value.message) == ("INVALID_ARGUMENT", message)
        (outcome,) = client.run_many([("scatter_elements", mixed, {"axis": 0})])
        assert isinstance(outcome, TensorOpError)
        assert (outcome.code, outcome.message) == ("INVALID_ARGUMENT", message)
        with pytest.raises(TensorOpError) as refused:
            client.chain([Step("scatter_elements", mixed, {"axis": 0})])
        assert refused.value.code == "INVALID_ARGUMENT"
        assert refused.value.message == (
            f'steps[0].inputs["input"] lives on replica {a} and steps[0].inputs["updates"] on '
            f"replica {b}; a call reads handles of one replica"
        )
        for replica in replicas:  # none was sent
            assert '"scatter_elements"' not in replica.log.read_text()

        beside = {"input": row, "indices": AT_2, "updates": near}
        out = client.run("scatter_elements", beside, {"axis": 0}, backend="cpu")
        np.testing.assert_array_equal(out.outputs[0], [1, 2, -7, 4])

        # Conformance's --handles Puts every input on one replica.
        request = pb.RunRequest(backend=pb.CPU)
        request.scatter_elements.axis = 0
        for name, array in (("input", ROW), ("indices", AT_2), ("updates", UPDATE)):
            tensor = request.inputs[name]
            tensor.dtype = {np.float32: pb.FLOAT32, np.int32: pb.INT32}[array.dtype.type]
            tensor.sizes.extend(array.shape)
            tensor.data = array.tobytes()
        for _ in range(6):
            np.testing.assert_array_equal(
                run_with_handles(client, request).outputs[0], [1, 2, -7, 4]
            )
        client.release(handles + [row, far, near])


def test_a_handle_of_a_replica_gone_is_unavailable_naming_it(replicas: list[Tensord]) -> None:
    with Client(target(replicas), timeout=30) as client:
        handles = put_on_several(client)
        gone = handles[0]
        victim = next(r for r in replicas if r.address == gone.handle.replica)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=10)
        with pytest.raises(TensorOpError) as failed:
            gone.fetch()
        assert failed.value.code == "UNAVAILABLE"
        assert failed.value.message.startswith(
            f"replica {gone.handle.replica} holding {gone.id[:8]}... is unreachable: "
        )
        assert gone.id not in failed.value.message
        client.release([h for h in handles if h.handle.replica != gone.handle.replica])


def test_async_remote_tensors_are_used_on_their_replica(replicas: list[Tensord]) -> None:
    async def main() -> None:
        async with AsyncClient(target(replicas), timeout=30) as client:
            handles = [await client.put(DOC) for _ in range(9)]
            assert len({h.handle.replica for h in handles}) >= 2
            for h in handles:
                out = await client.run("slice", {"input": h}, SLICE, outputs=[(1, 1, 2, 2)])
                np.testing.assert_array_equal(out.outputs[0], SLICED)
                np.testing.assert_array_equal(await h.fetch(), DOC)
            a = handles[0]
            b = next(h for h in handles if h.handle.replica != a.handle.replica)
            with pytest.raises(TensorOpError) as refused:
                await client.run("slice", {"input": a, "other": b}, SLICE)
            assert refused.value.code == "INVALID_ARGUMENT"
            assert refused.value.message.startswith(
                f'inputs["input"] lives on replica {a.handle.replica} and inputs["other"] '
                f"on replica {b.handle.replica}"
            )
            await client.release(handles)
            with pytest.raises(TensorOpError) as released:
                await a.fetch()
            assert released.value.code == "NOT_FOUND"

    asyncio.run(main())
