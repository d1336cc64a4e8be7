"""The supervisor's decisions, with a fake backend and a fake clock: no process is started.

A death fails exactly the requests its unit held; the unit is restarted after the policy's
backoff; past the restart limit the deployment gives up and fails what is left.
"""

from __future__ import annotations


import pytest

from tests.launcher.fake_clock import Clock
import torch

import planner
from launcher.control.layout import layout
from launcher.control.restart import RestartPolicy
from launcher.control.supervisor import Supervisor
from launcher.errors import Unavailable, WorkerDied
from launcher.wire.ipc import SegmentPool
from launcher.wire.protocol import (
    Cancel,
    Deliver,
    HandedOver,
    Ready,
    Released,
    Result,
    Undeliverable,
)
from tests.launcher.fake_backend import FakeBackend
from tests.waiting import wait_until

BOUND_S = 30.0  # generous: these wait for the supervisor's thread, never for time to pass


@pytest.fixture
def deployment():
    """qwen3-tts with the vocoder isolated: units `pipeline` (entry) and `vocoder`."""
    result = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")])
    planned = layout(result.plan, "cpu", "spfake", {}, inline_bytes=1 << 20)
    backend, clock = FakeBackend(), Clock()
    stages = [s.name for s in result.plan.stages]
    sup = Supervisor(planned, backend, RestartPolicy(2, clock=clock), stages, "spfake",
                     max_queued=64)
    sup.start()
    for process in backend.pids:
        backend.say(process, Ready())
    assert sup.ready.wait(BOUND_S) and sup.state == "running"
    yield sup, backend, clock
    sup.stop()


def _audio(request_id: int, stage: str = "vocoder") -> Result:
    packed = SegmentPool("spfake", "vocoder", inline_bytes=1 << 20).pack(
        {"audio": torch.linspace(-1, 1, 480)}, "client")
    return Result(request_id, stage, None, True, packed)


def test_a_request_goes_to_the_entry_process_and_its_result_comes_back(deployment):
    sup, backend, _ = deployment
    handle = sup.submit("hello", None, stream=False)
    delivered = backend.messages_to("pipeline", Deliver)
    assert [d.request_id for d in delivered] == [handle.id]
    backend.say("pipeline", HandedOver(handle.id, "vocoder", backend.pids["vocoder"]))
    backend.say("pipeline", Released(handle.id))
    backend.say("vocoder", _audio(handle.id))
    audio = handle.result(timeout=BOUND_S)
    assert audio.samples.shape == (480,)


def test_the_entry_payload_says_whether_the_client_asked_for_a_stream(deployment):
    # A whole response is decoded without chunks: the stages need to know which was asked for.
    sup, backend, _ = deployment
    whole = sup.submit("hello", "joe", stream=False, options={"speed": 1.5})
    streamed = sup.submit("hello", None, stream=True)
    sent = {d.request_id: dict(d.packed.values) for d in backend.messages_to("pipeline", Deliver)}
    assert sent[whole.id] == {"text": "hello", "voice": "joe", "speed": 1.5, "stream": False}
    assert sent[streamed.id]["stream"] is True


def test_a_death_fails_exactly_the_requests_its_unit_held_and_the_unit_restarts(deployment):
    sup, backend, clock = deployment
    at_vocoder = sup.submit("one", None, stream=False)
    at_pipeline = sup.submit("two", None, stream=False)
    vocoder_pid = backend.pids["vocoder"]
    backend.say("pipeline", HandedOver(at_vocoder.id, "vocoder", vocoder_pid),
                Released(at_vocoder.id))
    backend.die("vocoder")
    with pytest.raises(WorkerDied, match="vocoder"):
        at_vocoder.result(timeout=BOUND_S)
    # The request the pipeline process still holds is not touched by the vocoder's death.
    wait_until(lambda: sup.procs["vocoder"].state == "restarting",
               BOUND_S, "the vocoder to be restarting")
    assert sup.table.get(at_pipeline.id) is not None
    # Nothing restarts before the backoff is over; afterwards the unit is started again.
    assert backend.started.count("vocoder") == 1
    clock.now += 10.0
    wait_until(lambda: backend.started.count("vocoder") == 2, BOUND_S, "the vocoder's restart")
    assert backend.pids["vocoder"] != vocoder_pid
    assert sup.procs["vocoder"].restarts == 1


def test_a_handoff_to_a_process_that_just_died_fails_saying_how_it_died(deployment):
    # The sender can find the vocoder gone before the supervisor has read its exit: the client
    # is told how it ended (killed by SIGKILL), not only that it could not be reached.
    sup, backend, _ = deployment
    request = sup.submit("one", None, stream=True)
    backend.vanish("vocoder")
    # The backend's events come in the order made: the Undeliverable is read before the exit.
    backend.say("pipeline", Undeliverable(request.id, "tts_engine", "vocoder",
                                          "process 'vocoder' is not accepting handoffs"))
    backend.report_exit("vocoder")
    with pytest.raises(WorkerDied, match=r"process 'vocoder' \(pid \d+, stages: vocoder\) was "
                                         r"killed by SIGKILL while handling this request"):
        request.result(timeout=BOUND_S)


def test_a_handoff_to_a_process_whose_death_was_read_first_says_how_it_died(deployment):
    # The vocoder held nothing when it died (between two chunks): its exit fails no request, and
    # the next handoff to it finds it restarting. The client is still told how it ended.
    sup, backend, _ = deployment
    request = sup.submit("one", None, stream=True)
    backend.die("vocoder")
    wait_until(lambda: sup.procs["vocoder"].state == "restarting", BOUND_S,
               "the vocoder's exit to be read")
    backend.say("pipeline", Undeliverable(request.id, "tts_engine", "vocoder",
                                          "process 'vocoder' is not accepting handoffs"))
    with pytest.raises(WorkerDied, match=r"process 'vocoder' \(pid \d+, stages: vocoder\) was "
                                         r"killed by SIGKILL; it is restarting; cannot hand "
                                         r"over from 'tts_engine'"):
        request.result(timeout=BOUND_S)


def test_a_restarting_process_refuses_new_requests_that_need_it_at_entry(deployment):
    sup, backend, _ = deployment
    backend.die("pipeline")
    wait_until(lambda: sup.procs["pipeline"].state == "restarting",
               BOUND_S, "the pipeline to be restarting")
    with pytest.raises(Unavailable, match="pipeline"):
        sup.submit("hello", None, stream=False)


def test_past_the_restart_limit_the_deployment_gives_up_and_fails_what_is_left(deployment):
    sup, backend, clock = deployment
    for _ in range(2):  # the policy allows two restarts
        backend.die("vocoder")
        wait_until(lambda: sup.procs["vocoder"].state == "restarting",
                   BOUND_S, "a restart to be scheduled")
        clock.now += 10.0
        wait_until(lambda: sup.procs["vocoder"].state == "starting", BOUND_S, "the restart")
        backend.say("vocoder", Ready())
        wait_until(lambda: sup.procs["vocoder"].state == "ready",
                   BOUND_S, "the vocoder to be ready")
    pending = sup.submit("left", None, stream=False)
    backend.die("vocoder")
    assert sup.failed.wait(BOUND_S)
    assert sup.state == "failed" and "restarts" in sup.failure
    with pytest.raises(Unavailable):
        pending.result(timeout=BOUND_S)
    assert "pipeline" in backend.stopped  # the survivors are stopped too


def test_a_cancelled_request_is_cancelled_in_every_running_process(deployment):
    sup, backend, _ = deployment
    handle = sup.submit("bye", None, stream=False)
    handle.cancel()
    wait_until(lambda: all(backend.messages_to(p, Cancel) for p in ("pipeline", "vocoder")),
               BOUND_S,
          "Cancel in both processes")
    assert {m.request_id for p in ("pipeline", "vocoder") for m in backend.messages_to(p, Cancel)} \
        == {handle.id}
