"""A program that uses a Client (or AsyncClient) and never closes it still
exits: each test runs a small script doing one public call against the real
tensord, with the client left open, and expects it to print the call's result
and exit 0 within 5 s.

Until Client closed its channels itself (when collected or at exit), a script
that reached a replica's channel (fetch, release, calls reading handles) hung
at exit: the channel's connectivity subscription keeps a gRPC polling thread
alive, which the interpreter's shutdown freezes mid-watch, and grpc's own
finalizers then wait for it forever."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Tensord, _serve

# The child is killed after this long; it must have exited well before.
KILL_SECONDS = 10
EXIT_SECONDS = 5

SYNC_PRELUDE = """
import sys
import numpy as np
from tensorop_client import Client, Step
x = np.arange(12, dtype=np.float32).reshape(3, 4)
SLICE = {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]}  # x[0:2, 1::2]
client = Client(sys.argv[1], timeout=30)  # never closed
"""

ASYNC_PRELUDE = """
import asyncio
import sys
import numpy as np
from tensorop_client import AsyncClient
x = np.arange(12, dtype=np.float32).reshape(3, 4)
SLICE = {"offsets": [0, 1], "window_sizes": [2, 3], "window_strides": [1, 2]}  # x[0:2, 1::2]
"""

@pytest.fixture(scope="module")
def tensord(tensord_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tensord]:
    """A tensord of this module's own: the scripts leave handles behind, as
    the programs they stand for do, which would change what other tests' list
    of handles holds and hold up the shared server's shutdown for its grace
    period; this one stops at once (--shutdown_grace_seconds=0)."""
    yield from _serve(
        tensord_binary, tmp_path_factory, "tensord-exit", "--shutdown_grace_seconds=0"
    )


SLICED = "[[1.0, 3.0], [5.0, 7.0]]"
X = "[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]"


def run_script(
    tmp_path: Path, address: str, prelude: str, body: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Runs prelude + body as a script (argv[1]: the address), printing "done"
    last; the finished child and the seconds it took to exit. Fails the
    test, with what it printed, if it is still running after KILL_SECONDS."""
    script = tmp_path / "script.py"
    script.write_text(prelude + textwrap.dedent(body).strip("\n") + '\nprint("done", flush=True)\n')
    start = time.monotonic()
    try:
        child = subprocess.run(
            [sys.executable, str(script), address],
            capture_output=True, text=True, timeout=KILL_SECONDS,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        pytest.fail(f"the script did not exit within {KILL_SECONDS} s; it printed:\n{out}")
    return child, time.monotonic() - start


def assert_exits(tmp_path: Path, address: str, prelude: str, body: str, expected: str) -> None:
    child, seconds = run_script(tmp_path, address, prelude, body)
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout == expected + "\ndone\n", child.stderr
    # Nothing failed on the way out either (a gRPC thread, a finalizer).
    assert "Traceback" not in child.stderr and "Exception" not in child.stderr, child.stderr
    assert seconds < EXIT_SECONDS, f"took {seconds:.1f} s to exit"


# (test id, the script's body, what it prints before "done").
SYNC_CASES = [
    ("run", 'print(client.run("slice", {"input": x}, SLICE, outputs=[(2, 2)]).outputs[0].tolist())',
     SLICED),
    ("run_stream",
     'print(client.run_stream("slice", {"input": x}, SLICE, outputs=[(2, 2)]).outputs[0].tolist())',
     SLICED),
    ("run_chunked",
     'print(client.run_chunked("slice", {"input": x}, SLICE, outputs=[(2, 2)], chunk_bytes=16)'
     ".outputs[0].tolist())",
     SLICED),
    ("put", """
     h = client.put(x)
     beside = client.put(x[:1], replica=h.handle.replica)  # through the replica's channel
     print(h.shape, beside.shape, beside.handle.replica == h.handle.replica)
     """, "(3, 4) (1, 4) True"),
    ("fetch", """
     h = client.put(x)
     print(h.fetch().tolist())
     """, X),
    ("fetch_strided", """
     h = client.put(x)
     print(h.fetch(strides=[8, 2])[:, ::2].tolist())
     """, "[[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]"),
    ("fetch_by_id", """
     h = client.put(x)
     print(client.fetch(h.id).tolist())
     """, X),
    ("fetch_in_with", """
     with client.put(x) as h:
         print(h.fetch().tolist())
     """, X),
    ("release", """
     h = client.put(x)
     h.release()
     print(h.id in {t.id for t in client.list_handles()})
     """, "False"),
    ("fetch_then_release", """
     h = client.put(x)
     print(h.fetch().sum())
     h.release()
     """, "66.0"),
    ("run_on_a_handle", """
     h = client.put(x)
     print(client.run("slice", {"input": h}, SLICE, outputs=[(2, 2)]).outputs[0].tolist())
     print(client.run_stream("slice", {"input": h}, SLICE, outputs=[(2, 2)]).outputs[0].tolist())
     """, SLICED + "\n" + SLICED),
    ("fetch_kept_output", """
     kept = client.run("slice", {"input": x}, SLICE, outputs=[(2, 2)], keep=True).outputs[0]
     print(kept.fetch().tolist())
     """, SLICED),
    ("chain", """
     first = Step("slice", {"input": x}, SLICE, outputs=[(2, 2)])
     halves = Step("split", {"input": first}, {"axis": 0}, outputs=[(1, 2), (1, 2)])
     print([o.tolist() for o in client.chain([first, halves]).outputs])
     """, "[[[1.0, 3.0]], [[5.0, 7.0]]]"),
    ("chain_kept", """
     first = Step("slice", {"input": x}, SLICE, outputs=[(2, 2)])
     (kept,) = client.chain([first], keep=True).outputs
     print(kept.fetch().tolist())
     """, SLICED),
    ("list_handles", """
     h = client.put(x)
     print(h.id in {t.id for t in client.list_handles()})
     """, "True"),
    ("run_many", """
     request = {"op": "slice", "inputs": {"input": x}, "attrs": SLICE, "outputs": [(2, 2)]}
     print([r.outputs[0].tolist() for r in client.run_many([request] * 3)])
     """, f"[{SLICED}, {SLICED}, {SLICED}]"),
    ("run_many_abandoned", """
     request = {"op": "slice", "inputs": {"input": x}, "attrs": SLICE, "outputs": [(2, 2)]}
     outcomes = client.run_many([request] * 100, window=4)  # read once, then left
     print(next(outcomes).outputs[0].tolist())
     """, SLICED),
    ("run_many_ended_by_close", """
     request = {"op": "slice", "inputs": {"input": x}, "attrs": SLICE, "outputs": [(2, 2)]}
     outcomes = client.run_many([request] * 100, window=4)
     print(next(outcomes).outputs[0].tolist())
     client.close()  # ends the iteration, its call cancelled
     print(list(outcomes))
     """, f"{SLICED}\n[]"),
    ("shared_memory", """
     import os
     from multiprocessing import shared_memory
     from tensorop_client.shared_memory import (
         SharedRegion, register_shared_memory, shared_memory_status, unregister_shared_memory)
     name = f"exit-{os.getpid()}"
     shm = shared_memory.SharedMemory(create=True, size=4096)
     register_shared_memory(client, name, shm.name)
     print([(r.region, r.byte_size) for r in shared_memory_status(client, name).regions]
           == [(name, 4096)])
     unregister_shared_memory(client, name)
     print(name in {r.region for r in shared_memory_status(client).regions})
     shm.close()
     shm.unlink()
     region = SharedRegion(client, name, 4096)
     a = region.ndarray((3, 4), np.float32)
     a[...] = x
     out = region.ndarray((2, 2), np.float32, offset=64)
     region.run("slice", {"input": a}, SLICE, outputs=[out])
     print(out.tolist())
     del a, out
     region.close()  # unregisters it and unlinks the object
     """, f"True\nFalse\n{SLICED}"),
    ("after_close", """
     h = client.put(x)
     client.close()
     try:
         h.fetch()  # no channel to the replica is opened after close
     except ValueError as e:
         print(e)
     """, "Cannot invoke RPC on closed channel!"),
    ("collected_clients", """
     import threading
     def use():
         c = Client(sys.argv[1], timeout=30)
         h = c.put(x)
         return float(h.fetch().sum())
     print([use() for _ in range(5)])
     del client
     for _ in range(100):  # their channels close on threads of their own
         if threading.active_count() == 1:
             break
         import time; time.sleep(0.05)
     print([t.name for t in threading.enumerate()])
     """, "[66.0, 66.0, 66.0, 66.0, 66.0]\n['MainThread']"),
]


@pytest.mark.parametrize(
    "body, expected", [pytest.param(b, e, id=i) for i, b, e in SYNC_CASES]
)
def test_a_client_left_open_exits(
    tensord: Tensord, tmp_path: Path, body: str, expected: str
) -> None:
    assert_exits(tmp_path, tensord.address, SYNC_PRELUDE, body, expected)


def async_body(statements: str, keep_client: bool = False) -> str:
    """`statements` in a coroutine run by asyncio.run, `client` an AsyncClient
    never closed (with keep_client, a global that outlives the event loop)."""
    return (
        "async def main():\n"
        + ("    global client\n" if keep_client else "")
        + "    client = AsyncClient(sys.argv[1], timeout=30)\n"
        + textwrap.indent(textwrap.dedent(statements), "    ")
        + "asyncio.run(main())\n"
    )


ASYNC_CASES = [
    ("run", """
     r = await client.run("slice", {"input": x}, SLICE, outputs=[(2, 2)])
     print(r.outputs[0].tolist())
     """, SLICED),
    ("run_stream", """
     r = await client.run_stream("slice", {"input": x}, SLICE, outputs=[(2, 2)])
     print(r.outputs[0].tolist())
     """, SLICED),
    ("put_fetch", """
     h = await client.put(x)
     print((await h.fetch()).tolist())
     """, X),
    ("put_fetch_release", """
     async with await client.put(x) as h:
         print((await h.fetch()).sum())
     print(h.id in {t.id for t in await client.list_handles()})
     """, "66.0\nFalse"),
    ("fetch_kept_output", """
     r = await client.run("slice", {"input": x}, SLICE, outputs=[(2, 2)], keep=True)
     print((await r.outputs[0].fetch()).tolist())
     """, SLICED),
]


@pytest.mark.parametrize(
    "body, expected", [pytest.param(b, e, id=i) for i, b, e in ASYNC_CASES]
)
@pytest.mark.parametrize("keep_client", [False, True], ids=["local", "global"])
def test_an_async_client_left_open_exits(
    tensord: Tensord, tmp_path: Path, body: str, expected: str, keep_client: bool
) -> None:
    assert_exits(
        tmp_path, tensord.address, ASYNC_PRELUDE, async_body(body, keep_client), expected
    )


def test_a_client_collected_while_the_registry_is_held_does_not_wait_for_itself(
    tensord: Tensord,
) -> None:
    """A garbage collection can run wherever the channels' registry lock is
    held (an allocation, a WeakSet's pending removals inside Client.close)
    and finalize a collected Client, whose finalizer takes the same lock on
    the same thread. With a plain Lock that thread waited for itself for
    ever (a test run hung so in a fixture's close); the lock is re-entrant."""
    import gc
    import threading

    from tensorop_client import Client
    from tensorop_client import client as client_module

    def collect_inside_the_lock() -> None:
        cycle: list[object] = [Client(tensord.address, timeout=30)]
        cycle.append(cycle)  # only the cycle collector frees it
        del cycle
        with client_module._registry_lock:
            gc.collect()  # finalizes the Client here, on this thread

    thread = threading.Thread(target=collect_inside_the_lock, daemon=True)
    thread.start()
    thread.join(EXIT_SECONDS)
    assert not thread.is_alive(), "the finalizer waited for the lock its own thread held"
