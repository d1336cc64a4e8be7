"""A dying worker counts as down as soon as its control pipe hangs up, before its exit can be
read: the kernel closes a killed process's sockets first, and with a CUDA context the rest of its
teardown takes long enough that a peer finds it unreachable before the supervisor could say how
it ended (seen on an H200: "not reachable" instead of "was killed by SIGKILL")."""

from __future__ import annotations

import multiprocessing as mp

from launcher.backends.local import _Handle
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
