"""The open-loop sender process: the connections it hands over, what it reports when it cannot
send, the clock its stamps are on, and that it never outlives the load or the bench.

Against the stub server (real sockets: descriptors cross processes here). Times are checked
only for order (a stamp lies between the instants that bracket it), never for speed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
import socket
import subprocess
import sys
import time

from planner.app.bench.arrivals import Sent, Unsent
from planner.app.bench.http1 import Endpoint, Response
from planner.app.bench.speech import OURS
from planner.app.bench.sendproc import SenderProcess
from tests.planner.app.bench.stub_server import Reply, StubServer
from tests.waiting import wait_until

ROOT = str(Path(__file__).resolve().parents[4])  # the repository


def exited(pid: int, within_s: float) -> bool:
    """Whether process `pid` (not a child of this one, or an orphan re-parented here) ends."""
    def ended() -> bool:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:  # an orphan re-parented to this process
                return True
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return wait_until(ended, within_s, fail=False)


def read_response(sock: socket.socket) -> Response:
    sock.setblocking(True)
    response = Response()
    while not response.done:
        data = sock.recv(65536)
        if not data:
            response.finish()
            break
        response.feed(data)
    return response


async def collect(sender: SenderProcess, t_start: float, reply=None) -> list:
    """Everything the sender hands over (item, when it arrived, its connection's local
    address); with `reply`, each response is read and handed to it, and the request finished."""
    sender.go(t_start)
    out = []
    async for item in sender.items():
        local = item.sock.getsockname() if isinstance(item, Sent) else None
        out.append((item, time.perf_counter(), local))
        if reply is not None and isinstance(item, Sent):
            response = await asyncio.to_thread(read_response, item.sock)
            reply(response)
            if response.reusable:
                sender.give(item.sock)
            else:
                item.sock.close()
            sender.done()
    return out


def start(server_url: str, schedule, max_in_flight: int = 100) -> SenderProcess:
    endpoint = Endpoint.parse(server_url)
    return SenderProcess(endpoint, schedule, [OURS.request(endpoint, "hi", True)],
                         max_in_flight, connect_timeout_s=5.0)


def test_its_stamps_are_on_the_parents_clock():
    # perf_counter read in another process lies between two readings here: one clock (on Linux,
    # CLOCK_MONOTONIC), so a stamp taken in the sender is comparable with the loop's.
    before = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "import time; print(repr(time.perf_counter()))"],
                         capture_output=True, text=True, check=True)
    after = time.perf_counter()
    assert before < float(out.stdout) < after


def test_each_request_arrives_written_on_a_connection_the_loop_can_read():
    with StubServer(lambda n: Reply(chunks=((b"\0" * 480, 0.0),))) as server:
        sender = start(server.url, (0.0, 0.02, 0.04))
        try:
            t_start = time.perf_counter() + 0.05
            statuses = []
            out = asyncio.run(collect(sender, t_start, lambda r: statuses.append(r.status)))
        finally:
            sender.close()
    assert [item.index for item, *_ in out] == [0, 1, 2] and statuses == [200] * 3
    for item, received, _ in out:
        assert isinstance(item, Sent)
        assert t_start + item.due_s <= item.sent <= received  # stamped after it was due
    assert sender.realtime in (True, False)


def test_a_connection_handed_back_carries_a_later_request():
    with StubServer(lambda n: Reply(chunks=((b"\0" * 480, 0.0),))) as server:
        sender = start(server.url, (0.0, 0.3))
        try:
            out = asyncio.run(collect(sender, time.perf_counter() + 0.05, lambda r: None))
        finally:
            sender.close()
    (first, _, address), (second, _, again) = out
    assert isinstance(first, Sent) and isinstance(second, Sent) and address == again


def test_a_refused_connection_is_reported_as_unsent():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        sender = start(url, (0.0, 0.01))
        try:
            out = asyncio.run(collect(sender, time.perf_counter() + 0.05))
        finally:
            sender.close()
    assert [type(item) for item, *_ in out] == [Unsent, Unsent]
    assert {item.kind for item, *_ in out} == {"connect"}
    assert "ConnectionRefusedError" in out[0][0].message


def test_requests_past_the_in_flight_limit_are_not_sent_until_one_is_done():
    with StubServer(lambda n: Reply(first_s=0.2)) as server:
        sender = start(server.url, (0.0, 0.01, 0.4), max_in_flight=1)
        try:
            out = asyncio.run(collect(sender, time.perf_counter() + 0.05, lambda r: None))
        finally:
            sender.close()
    # The first is in flight until 0.2 s: the second is not sent; the third, due after the
    # first was done, is.
    assert [(type(item), item.index) for item, *_ in out] == [(Sent, 0), (Unsent, 1), (Sent, 2)]
    assert out[1][0].kind == "not-sent"


def test_it_exits_when_its_schedule_ends_and_when_the_load_is_closed_early():
    with StubServer(lambda n: Reply()) as server:
        sender = start(server.url, (0.0,))
        asyncio.run(collect(sender, time.perf_counter() + 0.05, lambda r: None))
        sender._proc.wait(5.0)  # on its own, after the last request
        sender.close()
        sender = start(server.url, (30.0,))
        sender.go(time.perf_counter())
        began = time.monotonic()
        sender.close()  # long before the request is due
        assert sender._proc.returncode == 0 and time.monotonic() - began < 3.0


PARENT = """
import sys, time
from planner.app.bench.http1 import Endpoint
from planner.app.bench.sendproc import SenderProcess
sender = SenderProcess(Endpoint("127.0.0.1", 9), (60.0,), [b"x"], 10, 5.0)
sender.go(time.perf_counter())
print(sender._proc.pid, flush=True)
time.sleep(60)
"""


def test_it_exits_when_the_bench_dies():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait()
    assert exited(child, 5.0)
