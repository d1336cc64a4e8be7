"""A streaming stage serving two requests interleaves them by chunk (`StageRunner`, issue 33):
the second request's first chunk is handed on before the first request's last one, each
request's chunks stay in order, and cancelling one closes its stream while the other goes on.

In-process: one stage thread, toy stages, the next stage's inbox read directly. Events, no
sleeps."""

from __future__ import annotations

import threading

import pytest

from launcher.worker.join import Envelope
from launcher.worker.stages import StageRunner
from launcher.wire.specs import CLIENT, StageSpec, Successor, WorkerSpec

from tests.launcher.worker.runner_fakes import STOP, RecordingChannel, StoppableQueue

BOUND_S = 30.0  # generous: waits for the stage thread, never for time to pass


class Toy:
    """A streaming stage: `n` chunks per request; request 1 stops before its second chunk until
    the test has queued request 2 (so both are in flight), and tells when its stream closes."""

    def __init__(self) -> None:
        self.inside, self.go, self.closed = threading.Event(), threading.Event(), {}

    def __call__(self, payload):
        rid = payload["rid"]
        self.closed[rid] = threading.Event()
        try:
            for i in range(payload["n"]):
                if rid == 1 and i == 1:
                    self.inside.set()
                    assert self.go.wait(BOUND_S)
                yield {"piece": i}
        finally:
            self.closed[rid].set()


@pytest.fixture
def runner():
    gen = StageSpec("gen", "toy", (), (), (CLIENT,), (Successor("sink", True, "p"),), "cpu")
    sink = StageSpec("sink", "toy", (), (), ("gen",), (), "cpu")
    spec = WorkerSpec("p", (gen, sink), None, None, "sptest")
    toy, gone = Toy(), threading.Event()
    r = StageRunner(spec, {"gen": toy, "sink": dict}, RecordingChannel(), None, None,
                    lambda *_: None, gone.set)
    r.inboxes["gen"].raw = StoppableQueue()
    thread = threading.Thread(target=r._loop, args=(gen,), daemon=True)
    thread.start()
    yield r, toy
    r.inboxes["gen"].put(STOP)
    thread.join(BOUND_S)
    assert gone.is_set() and not thread.is_alive()


def _submit(r: StageRunner, rid: int, n: int) -> None:
    r.put("gen", Envelope(rid, CLIENT, None, True, {"rid": rid, "n": n}))


def _handed_on(r: StageRunner, until: int) -> list[tuple[int, int, bool]]:
    """(request, chunk, last) as the next stage receives them, until `until` lasts are seen."""
    out = []
    while sum(last for *_, last in out) < until:
        env = r.inboxes["sink"].raw.get(timeout=BOUND_S)
        out.append((env.request_id, env.chunk, env.last))
        assert env.data["piece"] == env.chunk and env.data["rid"] == env.request_id
    return out


def test_a_second_requests_first_chunk_comes_before_the_first_requests_last(runner):
    r, toy = runner
    _submit(r, 1, 6)
    assert toy.inside.wait(BOUND_S)  # request 1 is streaming
    _submit(r, 2, 3)
    toy.go.set()
    got = _handed_on(r, until=2)
    order = [(rid, chunk) for rid, chunk, _ in got]
    assert order.index((2, 0)) < order.index((1, 5))
    for rid, n in ((1, 6), (2, 3)):
        assert [(c, last) for q, c, last in got if q == rid] == \
            [(i, i == n - 1) for i in range(n)]


def test_cancelling_one_of_two_streams_closes_it_at_a_chunk_and_the_other_goes_on(runner):
    r, toy = runner
    _submit(r, 1, 1000)
    assert toy.inside.wait(BOUND_S)
    _submit(r, 2, 3)
    r.cancel(1)
    toy.go.set()
    assert toy.closed[1].wait(BOUND_S)  # its generator was closed, long before chunk 999
    got = _handed_on(r, until=1)
    assert [(c, last) for q, c, last in got if q == 2] == [(0, False), (1, False), (2, True)]
    assert all(c < 2 for q, c, _ in got if q == 1)
