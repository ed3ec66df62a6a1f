"""The Python client over several tensord replicas: the target forms it accepts,
round-robin to every replica, and no request lost when a replica is killed
mid-run (retries of UNAVAILABLE on another replica)."""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import Client, TensorOpError
from tensorop_client.channel import channel_target, service_config_json

REPLICAS = 3
RUN_OK = re.compile(r'^tensorop_requests_total\{method="Run",.*code="OK"\} (\d+)$', re.M)


def runs_served(server: Tensord) -> int:
    """Run calls the replica answered OK, from its /metrics."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as r:
        return sum(int(n) for n in RUN_OK.findall(r.read().decode()))


@pytest.fixture
def replicas(tensord_binary: str, tmp_path: Path) -> Iterator[list[Tensord]]:
    servers = [
        Tensord(tensord_binary, tmp_path / f"replica{i}.log", "--backends=cpu", "--drain_seconds=1")
        for i in range(REPLICAS)
    ]
    yield servers
    for server in servers:
        server.stop()


def slice_at(client: Client, offset: int) -> np.ndarray:
    x = np.arange(64, dtype=np.uint8)
    result = client.run(
        "slice", {"input": x}, {"offsets": [offset], "window_sizes": [4], "window_strides": [1]},
        outputs=[(4,)], backend="cpu",
    )
    return result.outputs[0]


def test_channel_target_forms() -> None:
    assert channel_target("127.0.0.1:50051") == "127.0.0.1:50051"
    assert channel_target("dns:///tensord-headless:50051") == "dns:///tensord-headless:50051"
    assert channel_target("10.0.0.1:1, 10.0.0.2:2") == "ipv4:10.0.0.1:1,10.0.0.2:2"
    assert channel_target("[::1]:1,[fe80::1]:2") == "ipv6:[::1]:1,[fe80::1]:2"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("", "target is empty"),
        ("10.0.0.1:1,,10.0.0.2:2", 'target "10.0.0.1:1,,10.0.0.2:2" has an empty entry 1'),
        ("10.0.0.1:1,replica-b:2", 'target entry 1 "replica-b:2" is not an IP address with a port'),
        ("10.0.0.1:1,10.0.0.2:0", 'target entry 1 "10.0.0.2:0" is not an IP address'),
        ("10.0.0.1:1,[::1]:2", 'target entry 1 "[::1]:2" mixes IPv4 and IPv6'),
    ],
)
def test_malformed_targets_name_the_entry(target: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Client(target)


def test_service_config_is_the_shared_one() -> None:
    shared = Path(__file__).resolve().parents[2] / "client/service_config.json"
    assert json.loads(service_config_json()) == json.loads(shared.read_text())


def test_every_replica_serves_requests_of_one_client(replicas: list[Tensord]) -> None:
    requests = 150
    with Client(",".join(r.address for r in replicas), timeout=30) as client:
        for i in range(requests):
            assert slice_at(client, i % 60).tolist() == [i % 60 + k for k in range(4)]
    served = [runs_served(r) for r in replicas]
    assert all(n > 0 for n in served), served
    assert sum(served) == requests


def test_no_request_is_lost_when_a_replica_is_killed(replicas: list[Tensord]) -> None:
    answered = 0
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def work(client: Client, worker: int) -> None:
        nonlocal answered
        i = worker
        while not stop.is_set():
            offset = i % 60
            try:
                got = slice_at(client, offset).tolist()
                if got != [offset + k for k in range(4)]:
                    failures.append(f"request {i}: wrong answer {got}")
            except TensorOpError as e:
                failures.append(f"request {i}: {e}")
            with lock:
                answered += 1
            i += 4

    def wait_for(count: int) -> None:
        for _ in range(6000):
            with lock:
                if answered >= count:
                    return
            stop.wait(0.01)

    with Client(",".join(r.address for r in replicas), timeout=30) as client:
        workers = [threading.Thread(target=work, args=(client, w)) for w in range(4)]
        for w in workers:
            w.start()
        wait_for(100)
        killed_had_served = runs_served(replicas[1])
        replicas[1].process.send_signal(signal.SIGKILL)
        replicas[1].process.wait(timeout=10)
        with lock:
            at_kill = answered
        wait_for(at_kill + 300)
        stop.set()
        for w in workers:
            w.join()

    assert failures == []
    assert killed_had_served > 0
    assert answered >= at_kill + 300
