"""tensord's malloc settings as its memory map shows them: one arena for all of
its threads (server/process/main.cc), unless GLIBC_TUNABLES names another count. With
several, each arena kept its own peak of gRPC's receive slices (RELIABILITY.md,
"One malloc arena")."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from conftest import Tensord
from tensorop_client import Client

# glibc's HEAP_MAX_SIZE on 64-bit: every arena but the main one lives in heaps
# of this size, each mapped at a multiple of it.
HEAP_BYTES = 64 << 20


def extra_arena_heaps(pid: int) -> int:
    """The heaps of arenas other than glibc's main one in process `pid`: an
    anonymous read-write mapping at a multiple of 64 MiB, the rest of its 64 MiB
    reserved right after it with no access."""
    maps = [line.split() for line in Path(f"/proc/{pid}/maps").read_text().splitlines()]
    heaps = 0
    for used, reserved in zip(maps, maps[1:], strict=False):
        start, end = (int(x, 16) for x in used[0].split("-"))
        reserved_start, reserved_end = (int(x, 16) for x in reserved[0].split("-"))
        heaps += (
            len(used) == 5
            and used[1] == "rw-p"
            and start % HEAP_BYTES == 0
            and len(reserved) == 5
            and reserved[1] == "---p"
            and reserved_start == end
            and reserved_end - start == HEAP_BYTES
        )
    return heaps


@pytest.mark.parametrize(
    ("tunables", "heaps"), [(None, 0), ("glibc.malloc.arena_max=2", 1)], ids=["default", "two"]
)
def test_every_thread_allocates_from_one_arena_unless_glibc_tunables_says_otherwise(
    tensord_binary: str, tmp_path: Path, tunables: str | None, heaps: int
) -> None:
    binary = Path(tensord_binary).read_bytes()
    if b"__asan_init" in binary or b"__tsan_init" in binary:
        pytest.skip("a sanitizer's allocator replaces glibc's malloc in this tensord")
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    server = Tensord(tensord_binary, tmp_path / "tensord.log", env=env)
    try:
        n = 1 << 18  # 1 MiB of uint32: gRPC reads it on its poller threads, a worker copies it
        x = np.arange(n, dtype=np.uint32)

        def reversed_on_the_server(_: int) -> np.ndarray:
            with Client(server.address, timeout=60) as client:
                return client.run(
                    "slice",
                    {"input": x},
                    {"offsets": [0], "window_sizes": [n], "window_strides": [-1]},
                    outputs=[(n,)],
                    backend="cpu",
                ).outputs[0]

        with ThreadPoolExecutor(4) as pool:
            for out in pool.map(reversed_on_the_server, range(8)):
                np.testing.assert_array_equal(out, x[::-1])
        assert extra_arena_heaps(server.process.pid) == heaps
    finally:
        assert server.stop() == 0, server.log.read_text()[-4000:]
