"""A dying worker counts as down as soon as its control pipe hangs up, before its exit can be
read: the kernel closes a killed process's sockets first, and with a CUDA context the rest of its
teardown takes long enough that a peer finds it unreachable before the supervisor could say how
it ended (seen on an H200: "not reachable" instead of "was killed by SIGKILL")."""

from __future__ import annotations

import multiprocessing as mp

from launcher.backends.local import _Handle
from launcher.wire.backend import hung_up
from tests.waiting import wait_until

BOUND_S = 30.0  # generous: this waits for another process, never for time to pass


def _hang_up_when_told(conn, orders) -> None:
    orders.recv()
    conn.close()  # what the kernel does first to a killed process
    orders.recv()  # the rest of its teardown, until told to finish


def test_a_worker_whose_control_pipe_hung_up_is_down_before_its_exit():
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=True)
    notes_ours, notes_theirs = ctx.Pipe(duplex=True)
    orders_in, orders_out = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_hang_up_when_told, args=(theirs, orders_in), daemon=True)
    child.start()
    theirs.close()
    notes_theirs.close()
    handle = _Handle(None, child, ours, notes_ours, child.pid)
    try:
        assert not handle.down()
        orders_out.send("hang up")
        wait_until(handle.down, BOUND_S, "the hung-up pipe to count as down")
        assert not handle.exited()  # still running: only its pipe is gone
        orders_out.send("exit")
        child.join(BOUND_S)
        assert handle.exited() and handle.down()
    finally:
        child.kill()
        child.join(BOUND_S)
        handle.close()


def test_a_control_connection_over_tcp_shows_its_worker_gone_too():
    # A Ray worker dials its supervisor over TCP, where a peer's close raises no POLLHUP, only
    # POLLRDHUP: a worker on another node that died is seen as down by the same check.
    import multiprocessing.connection as mpc
    import threading

    listener = mpc.Listener(("127.0.0.1", 0), authkey=b"k")
    dialled = []
    dialler = threading.Thread(target=lambda: dialled.append(mpc.Client(listener.address,
                                                                          authkey=b"k")))
    dialler.start()
    ours = listener.accept()
    dialler.join(BOUND_S)
    try:
        assert not hung_up(ours)
        dialled[0].close()
        wait_until(lambda: hung_up(ours), BOUND_S, "the closed TCP peer to count as gone")
    finally:
        ours.close()
        listener.close()
    assert not hung_up(ours)  # our own closed end: nothing to ask, not a death
