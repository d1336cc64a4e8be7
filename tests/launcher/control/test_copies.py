"""Copies of a process group, without starting a process: which copy a request is bound to, how
the binding travels and is followed, and what a copy's death does (fake backend, fake clock)."""

from __future__ import annotations

import queue
import threading
from dataclasses import replace

import pytest

from tests.launcher.fake_clock import Clock
import torch

from launcher.backends.ray_bundles import replica_bundles
from launcher.control.admission import default_max_queued
from launcher.control.copies import CopyChooser, NoCopyUp
from launcher.control.layout import layout
from launcher.control.restart import RestartPolicy
from launcher.control.supervisor import Supervisor
from launcher.errors import Unavailable, WorkerDied
from launcher.wire import ipc
from launcher.wire.backend import PeerUnreachable
from launcher.wire.protocol import (
    Deliver, HandedOver, PassedOn, Ready, Released, Result, Undeliverable, decode, encode,
)
from launcher.wire.specs import CLIENT, StageSpec, Successor, WorkerSpec
from launcher.worker.holdings import Holdings
from launcher.worker.stages import StageRunner
from tests.launcher import plans
from tests.launcher.fake_backend import FakeBackend

BOUND_S = 30.0  # generous: these wait for another thread, never for time to pass
VOCODERS = ("vocoder.0", "vocoder.1")


def with_copies(plan, group: str, n: int):
    return replace(plan, groups=tuple(replace(g, copies=n) if g.name == group else g
                                      for g in plan.groups))


def _wait(condition, what: str) -> None:
    pause = threading.Event()
    for _ in range(int(BOUND_S / 0.01)):
        if condition():
            return
        pause.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


# -- the chooser ---------------------------------------------------------------------------------

def chooser() -> CopyChooser:
    return CopyChooser({"pipeline": ("pipeline",),
                        "vocoder": ("vocoder.0", "vocoder.1", "vocoder.2")})


def test_a_request_goes_to_the_copy_with_least_in_flight_ties_to_the_lowest_index():
    c = chooser()
    up = lambda name: True  # noqa: E731
    routes = [c.bind(rid, up) for rid in range(1, 5)]
    assert [dict(r)["vocoder"] for r in routes] == \
        ["vocoder.0", "vocoder.1", "vocoder.2", "vocoder.0"]
    assert all("pipeline" not in dict(r) for r in routes)  # a single copy needs no naming
    c.release(2)  # vocoder.1 now has the least work
    assert dict(c.bind(5, up))["vocoder"] == "vocoder.1"
    assert c.in_flight() == {"pipeline": 4, "vocoder.0": 2, "vocoder.1": 1, "vocoder.2": 1}
    assert c.served()["vocoder.1"] == 2 and c.served()["pipeline"] == 5


def test_a_copy_that_is_down_is_skipped_and_a_group_with_none_up_refuses():
    c = chooser()
    assert dict(c.bind(1, lambda name: name != "vocoder.0"))["vocoder"] == "vocoder.1"
    with pytest.raises(NoCopyUp, match="vocoder"):
        c.bind(2, lambda name: not name.startswith("vocoder"))
    assert 2 not in c._bound and c.in_flight()["pipeline"] == 1  # nothing half-bound


def test_a_request_keeps_its_copies_for_its_life():
    c = chooser()
    first = c.bind(1, lambda name: True)
    c.bind(2, lambda name: True)
    assert c.bind(1, lambda name: name != "vocoder.0") == first  # sticky, even if now down
    assert c.copy_of(1, "vocoder") == "vocoder.0"
    c.release(1)
    c.release(1)  # twice is once
    assert c.copy_of(1, "vocoder") is None and c.in_flight()["vocoder.0"] == 0


# -- what the plan becomes ------------------------------------------------------------------------

def test_each_copy_is_a_worker_and_a_unit_of_its_own_and_counts_for_admission():
    plan = with_copies(plans.qwen3("vocoder"), "vocoder", 2)
    planned = layout(plan, "cpu", "sp", {})
    assert [u.name for u in planned.units] == ["pipeline", *VOCODERS]
    assert set(planned.workers()) == {"pipeline", *VOCODERS}
    assert planned.home["vocoder"] == "vocoder"  # logical: the route names the copy
    assert planned.copies == {"pipeline": ("pipeline",), "vocoder": VOCODERS}
    engine = next(s for s in planned.workers()["pipeline"].stages if s.name == "tts_engine")
    assert engine.successors == (Successor("vocoder", True, "vocoder", copied=True),)
    assert default_max_queued(plan) == 3 * default_max_queued(plans.qwen3())


def test_on_ray_each_copy_is_an_actor_with_its_share_of_the_gpu():
    plan = with_copies(plans.qwen3("vocoder"), "vocoder", 2)
    bundles = replica_bundles(plan, ((0, 105),), 100)
    assert set(bundles.actors) == {"pipeline", *VOCODERS}
    assert bundles.bundles[0].processes == ("pipeline", *VOCODERS)


def test_a_route_survives_the_wire():
    packed = ipc.Packed(None, (), {"text": "x"})
    message = Deliver("vocoder", 7, "tts_engine", 2, False, packed, (("vocoder", "vocoder.1"),))
    assert decode(encode(message)) == message
    assert decode(encode(Deliver("a", 1, CLIENT, None, True, packed))).route == ()


# -- a worker follows the route -------------------------------------------------------------------

def test_a_worker_keeps_a_route_while_it_has_the_request():
    held = Holdings(stages=2)
    held.bind(1, (("vocoder", "vocoder.1"),))
    assert held.copy_of(1, "vocoder") == "vocoder.1"
    assert held.route(1) == (("vocoder", "vocoder.1"),)
    held.finish("tts_engine", 1)
    assert held.copy_of(1, "vocoder") == "vocoder.1"  # a stage of it still works on it
    held.finish("vocoder", 1)
    assert held.copy_of(1, "vocoder") is None and held.route(1) == ()
    held.bind(2, (("vocoder", "vocoder.0"),))
    held.cancel(2)
    assert held.copy_of(2, "vocoder") is None
    held.bind(2, (("vocoder", "vocoder.0"),))  # a late payload of a cancelled request
    assert held.copy_of(2, "vocoder") is None


class FakeChannel:
    """Peers by name; what was handed to whom; what the supervisor was told."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids, self.sent, self.told = pids, queue.SimpleQueue(), queue.SimpleQueue()

    def peer(self, process: str, stage: str) -> int:
        if process not in self.pids:
            raise PeerUnreachable(f"process '{process}' is not accepting handoffs")
        return self.pids[process]

    def to_peer(self, pid: int, message) -> None:
        self.sent.put((pid, message))

    def to_supervisor(self, *messages) -> None:
        for m in messages:
            self.told.put(m)


def engine_runner(channel: FakeChannel) -> StageRunner:
    stage = StageSpec("tts_engine", "x:y", (), (), (CLIENT,),
                      (Successor("vocoder", False, "vocoder", copied=True),), "cpu")
    spec = WorkerSpec("pipeline", (stage,), None, None, "sptest", inline_bytes=1 << 20)
    runner = StageRunner(spec, {"tts_engine": lambda data: {"codes": torch.ones(3)}}, channel,
                         ipc.SegmentPool("sptest", "pipeline", inline_bytes=1 << 20),
                         ipc.Receiver(lambda *a: None), lambda *a: None, lambda: None)
    runner.start()
    return runner


def client_deliver(request_id: int, route) -> Deliver:
    return Deliver("tts_engine", request_id, CLIENT, None, True,
                   ipc.Packed(None, (), {"text": "hi"}), route)


def test_a_worker_hands_a_request_to_the_copy_its_route_names_and_passes_the_route_on():
    channel = FakeChannel({"vocoder.0": 100, "vocoder.1": 101})
    runner = engine_runner(channel)
    for rid, copy in ((1, "vocoder.1"), (2, "vocoder.0")):
        route = (("vocoder", copy),)
        runner.put("tts_engine", runner.arrive(client_deliver(rid, route)))
        pid, message = channel.sent.get(timeout=BOUND_S)
        assert (pid, message.request_id, message.route) == (channel.pids[copy], rid, route)
        assert channel.told.get(timeout=BOUND_S) == PassedOn(rid, copy, channel.pids[copy])
        assert runner.holdings.copy_of(rid, "vocoder") is None  # released here: forgotten


def test_a_handoff_to_a_dead_copy_is_undeliverable_naming_that_copy():
    channel = FakeChannel({"vocoder.0": 100})
    runner = engine_runner(channel)
    runner.put("tts_engine", runner.arrive(client_deliver(1, (("vocoder", "vocoder.1"),))))
    told = channel.told.get(timeout=BOUND_S)
    assert isinstance(told, Undeliverable) and told.process == "vocoder.1"
    assert channel.told.get(timeout=BOUND_S) == Released(1)
    assert channel.sent.empty()  # never handed to another copy


# -- the supervisor: binding, death, restart ------------------------------------------------------

@pytest.fixture
def deployment():
    """qwen3 with the vocoder isolated in two copies: units `pipeline`, `vocoder.0/.1`."""
    plan = with_copies(plans.qwen3("vocoder"), "vocoder", 2)
    backend, clock = FakeBackend(), Clock()
    sup = Supervisor(layout(plan, "cpu", "spfake", {}, inline_bytes=1 << 20), backend,
                     RestartPolicy(2, clock=clock), [s.name for s in plan.stages], "spfake",
                     max_queued=64)
    sup.start()
    for process in list(backend.pids):
        backend.say(process, Ready())
    assert sup.ready.wait(BOUND_S) and sup.state == "running"
    yield sup, backend, clock
    sup.stop()


def _audio(request_id: int) -> Result:
    packed = ipc.SegmentPool("spfake", "vocoder", inline_bytes=1 << 20).pack(
        {"audio": torch.linspace(-1, 1, 480)}, "client")
    return Result(request_id, "vocoder", None, True, packed)


def _routes(backend: FakeBackend) -> dict[int, str]:
    return {d.request_id: dict(d.route)["vocoder"]
            for d in backend.messages_to("pipeline", Deliver)}


def _copy_for(sup: Supervisor, backend: FakeBackend, text: str) -> str:
    """The vocoder copy a new request is bound to (as its first Deliver says)."""
    handle = sup.submit(text, None, stream=True)
    return _routes(backend)[handle.id]


def _at(backend: FakeBackend, handle, copy: str) -> None:
    """The pipeline process hands the request to `copy` and is done with it."""
    backend.say("pipeline", PassedOn(handle.id, copy, backend.pids[copy]))


def test_requests_alternate_between_idle_copies_and_the_route_goes_with_them(deployment):
    sup, backend, _ = deployment
    handles = [sup.submit(f"r{i}", None, stream=True) for i in range(4)]
    assert [_routes(backend)[h.id] for h in handles] == [*VOCODERS, *VOCODERS]
    first = handles[0]
    _at(backend, first, "vocoder.0")
    backend.say("vocoder.0", _audio(first.id))
    assert first.result(timeout=BOUND_S).samples.shape == (480,)
    # vocoder.0 finished one: it has the least work now.
    assert _copy_for(sup, backend, "r5") == "vocoder.0"
    view = {p.name: p for p in sup.snapshot().processes}
    assert (view["vocoder.0"].group, view["vocoder.0"].in_flight, view["vocoder.0"].served) == \
        ("vocoder", 2, 3)


def test_a_copys_death_fails_only_its_requests_and_the_other_copy_keeps_serving(deployment):
    sup, backend, clock = deployment
    on_0, on_1, bound_0 = (sup.submit(t, None, stream=True) for t in ("a", "b", "c"))
    assert [_routes(backend)[h.id] for h in (on_0, on_1, bound_0)] == \
        ["vocoder.0", "vocoder.1", "vocoder.0"]
    _at(backend, on_0, "vocoder.0")
    _at(backend, on_1, "vocoder.1")
    dead_pid = backend.pids["vocoder.0"]
    backend.die("vocoder.0")
    with pytest.raises(WorkerDied, match=r"vocoder\.0"):
        on_0.result(timeout=BOUND_S)
    _wait(lambda: sup.procs["vocoder.0"].state == "restarting", "vocoder.0 to be restarting")
    # Not held by the dead copy: untouched. The other copy serves on, and takes new requests.
    assert sup.table.get(on_1.id) is not None and sup.table.get(bound_0.id) is not None
    backend.say("vocoder.1", _audio(on_1.id))
    assert on_1.result(timeout=BOUND_S).samples.numel() == 480
    assert _copy_for(sup, backend, "d") == "vocoder.1"
    assert sup.refusal_reason() is None
    # The dead copy comes back on its own, alone, after its backoff.
    assert backend.started.count("vocoder.0") == 1
    clock.now += 10.0
    _wait(lambda: backend.started.count("vocoder.0") == 2, "vocoder.0's restart")
    assert backend.started.count("vocoder.1") == 1 and backend.pids["vocoder.0"] != dead_pid
    backend.say("vocoder.0", Ready())
    _wait(lambda: sup.procs["vocoder.0"].state == "ready", "vocoder.0 to be ready")
    assert _copy_for(sup, backend, "e") == "vocoder.0"
    assert sup.procs["vocoder.0"].restarts == 1 and sup.procs["vocoder.1"].restarts == 0


def test_a_request_is_refused_only_while_every_copy_of_a_group_is_down(deployment):
    sup, backend, _ = deployment
    backend.die("vocoder.0")
    _wait(lambda: sup.procs["vocoder.0"].state == "restarting", "vocoder.0 to be restarting")
    assert sup.refusal_reason() is None
    backend.die("vocoder.1")
    _wait(lambda: sup.procs["vocoder.1"].state == "restarting", "vocoder.1 to be restarting")
    with pytest.raises(Unavailable, match="every copy of process group 'vocoder' is down"):
        sup.submit("x", None, stream=False)
    assert sup.refusals.snapshot()["restarting"] == 1


def test_a_handoff_to_a_copy_that_died_fails_that_request_naming_the_copy(deployment):
    sup, backend, _ = deployment
    handle = sup.submit("a", None, stream=False)
    backend.say("pipeline", HandedOver(handle.id, "vocoder.0", 1),  # a pid it never had
                Released(handle.id))
    with pytest.raises(WorkerDied, match=r"vocoder\.0"):
        handle.result(timeout=BOUND_S)
    assert sup.chooser.in_flight()["vocoder.0"] == 0  # off the copy it was bound to
