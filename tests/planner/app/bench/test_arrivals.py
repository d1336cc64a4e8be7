"""The open-loop sender's scheduling, on an injected clock: no real time passes, so the tests
check when things happen exactly, never how fast anything runs."""

from __future__ import annotations

import os

import pytest

from planner.app.bench import arrivals
from planner.app.bench.arrivals import PREPARE_S, Pacer, Sender, Sent, Unsent, keep

TICK_S = 0.00001  # what each reading of the fake clock costs, so a spin moves on


class FakeClock:
    """A clock that moves only when read (a tick) or slept on (the time asked, plus `oversleep`
    as an OS that wakes late)."""

    def __init__(self, oversleep: float = 0.0) -> None:
        self.now, self.oversleep, self.slept = 100.0, oversleep, []

    def __call__(self) -> float:
        self.now += TICK_S
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds + self.oversleep
        self.woke = self.now


def pacer(clock: FakeClock, spin_s: float = arrivals.SPIN_S) -> Pacer:
    return Pacer(clock=clock, sleep=clock.sleep, spin_s=spin_s)


def run_keep(schedule, clock, spin_s=arrivals.SPIN_S):
    events = []
    keep(schedule, 100.0, pacer(clock, spin_s),
         prepare=lambda i, n: events.append(("prepare", i, n, clock.now)),
         fire=lambda i, due: events.append(("fire", i, due, clock.now)))
    return events


def test_each_request_fires_at_its_due_time_in_order():
    schedule = (0.0, 0.02, 0.5, 0.5004, 1.25)
    fired = [e for e in run_keep(schedule, FakeClock()) if e[0] == "fire"]
    assert [(i, due) for _, i, due, _ in fired] == list(enumerate(schedule))
    for _, _, due, at in fired:  # never early; late by a few clock readings at most
        assert 100.0 + due <= at <= 100.0 + due + 5 * TICK_S


def test_the_last_stretch_is_spun_not_slept():
    clock = FakeClock()
    (fired,) = [e for e in run_keep((1.0,), clock, spin_s=0.0005) if e[0] == "fire"]
    # The last sleep ends spin_s before the due time; the rest is spun.
    assert fired[3] - clock.woke == pytest.approx(0.0005, abs=5 * TICK_S)
    assert all(s > 0 for s in clock.slept)


def test_without_a_spin_it_sleeps_to_the_due_time():
    clock = FakeClock()
    fired = [e for e in run_keep((0.3,), clock, spin_s=0.0) if e[0] == "fire"]
    assert sum(clock.slept) == pytest.approx(0.3, abs=10 * TICK_S)
    assert fired[0][3] >= 100.3


def test_long_sleeps_are_cut_into_naps_to_notice_a_stop():
    clock = FakeClock()
    run_keep((2.0,), clock)
    assert max(clock.slept) <= arrivals.MAX_NAP_S and len(clock.slept) >= 20


def test_connections_for_a_burst_are_opened_before_its_first_request_is_due():
    # Three requests within PREPARE_S of each other, then one alone.
    schedule = (0.1, 0.1 + PREPARE_S / 3, 0.1 + PREPARE_S / 2, 0.4)
    events = run_keep(schedule, FakeClock())
    prepares = [(i, n) for kind, i, n, _ in events if kind == "prepare"]
    assert prepares == [(0, 3), (1, 2), (2, 1), (3, 1)]
    kinds = [(kind, i) for kind, i, *_ in events]
    assert kinds.index(("prepare", 0)) < kinds.index(("fire", 0))
    first_prepare = next(at for kind, i, _, at in events if kind == "prepare")
    assert first_prepare <= 100.1 - PREPARE_S + 2 * TICK_S


def test_a_late_wake_up_fires_at_once_and_is_not_hidden():
    # An OS that wakes 3 ms late: the sleep that should end SPIN_S before the due time ends
    # 2.5 ms after it, and the request fires then, late, as it is.
    clock = FakeClock(oversleep=0.003)
    fired = [e for e in run_keep((0.1, 0.2), clock) if e[0] == "fire"]
    assert all(at - (100.0 + due) >= 0.003 - arrivals.SPIN_S for _, _, due, at in fired)


def test_a_stop_ends_the_schedule():
    clock = FakeClock()
    p = pacer(clock)
    p.stop.set()
    fired = []
    keep((0.5, 1.0), 100.0, p, lambda i, n: None, lambda i, due: fired.append(i))
    assert fired == []


class FakeSocket:
    def __init__(self) -> None:
        self.written, self.closed, self.fail = b"", False, False

    def settimeout(self, t):
        pass

    def sendall(self, data: bytes) -> None:
        if self.fail:
            raise BrokenPipeError("gone")
        self.written += data

    def close(self) -> None:
        self.closed = True


class FakePool:
    connect_timeout_s = 10.0

    def __init__(self, refuse: bool = False) -> None:
        self.idle, self.refuse, self.filled = [], refuse, []

    def take(self):
        return self.idle.pop() if self.idle else None

    def connect(self):
        if self.refuse:
            raise ConnectionRefusedError("refused")
        return FakeSocket()

    def fill(self, n):
        self.filled.append(n)


def send_all(schedule, pool, finished=lambda: 0, max_in_flight=100):
    clock = FakeClock()
    out = []
    Sender(schedule, 100.0, pool, lambda i: b"request %d" % i, out.append, finished,
           max_in_flight, pacer(clock)).run()
    return out


def test_the_sender_writes_each_request_and_stamps_it_after_the_write():
    out = send_all((0.0, 0.01, 0.02), FakePool())
    assert all(isinstance(s, Sent) for s in out)
    assert [s.sock.written for s in out] == [b"request 0", b"request 1", b"request 2"]
    assert all(s.sent >= 100.0 + s.due_s for s in out)


def test_requests_past_the_in_flight_limit_are_not_sent():
    out = send_all((0.0, 0.01, 0.02), FakePool(), finished=lambda: 0, max_in_flight=2)
    assert [type(s) for s in out] == [Sent, Sent, Unsent]
    assert out[2].kind == "not-sent" and "2 requests were still in flight" in out[2].message


def test_failed_writes_are_handed_over_with_their_kind():
    assert {s.kind for s in send_all((0.0, 0.01), FakePool(refuse=True))} == {"connect"}
    pool = FakePool()
    broken = FakeSocket()
    broken.fail = True
    pool.idle.append(broken)
    out = send_all((0.0,), pool)
    assert out[0].kind == "disconnect" and "BrokenPipeError" in out[0].message and broken.closed


@pytest.mark.skipif(not hasattr(os, "SCHED_FIFO"), reason="a POSIX scheduling policy")
def test_real_time_priority_is_asked_for_and_done_without_where_refused(monkeypatch):
    calls = []
    monkeypatch.setattr(arrivals.os, "sched_setscheduler", lambda *a: calls.append(a),
                        raising=False)
    assert arrivals.realtime() and calls and calls[0][0] == 0  # 0: the calling thread

    def refuse(*a):
        raise PermissionError("operation not permitted")

    monkeypatch.setattr(arrivals.os, "sched_setscheduler", refuse, raising=False)
    assert arrivals.realtime() is False
    monkeypatch.setattr(arrivals, "REALTIME", False)
    assert arrivals.realtime() is False
