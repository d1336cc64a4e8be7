"""A stage failure at the supervisor: the request fails with the worker's traceback attached, the
failure is logged naming the stage, the request and the process, and counted on /metrics; a
failure of a request that had ended (cancelled: its client went away) is no error. A fake backend
plays the workers: no process is started."""

from __future__ import annotations

import logging

import pytest

import planner
from launcher.control import metrics
from launcher.control.layout import layout
from launcher.control.metric_names import STAGE_FAILURES, total
from launcher.control.restart import RestartPolicy
from launcher.control.supervisor import Supervisor
from launcher.errors import StageFailed
from launcher.wire.protocol import Ready, Released, StageError
from tests.launcher.fake_backend import FakeBackend
from tests.waiting import wait_until

BOUND_S = 30.0  # generous: these wait for the supervisor's thread, never for time to pass
TRACE = ('Traceback (most recent call last):\n  File "engine.py", line 9, in run\n'
         "RuntimeError: out of codebook entries")


@pytest.fixture
def deployment():
    """qwen3-tts with the vocoder isolated: processes `pipeline` and `vocoder`."""
    plan = planner.solve("qwen3-tts", requests=[planner.Isolate("vocoder")]).plan
    backend = FakeBackend()
    sup = Supervisor(layout(plan, "cpu", "spfake", {}), backend, RestartPolicy(2),
                     [s.name for s in plan.stages], "spfake", max_queued=64)
    sup.start()
    for process in backend.pids:
        backend.say(process, Ready())
    assert sup.ready.wait(BOUND_S)
    yield sup, backend
    sup.stop()


def _error_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("shares_stderr", [True, False], ids=["local", "remote-workers"])
def test_a_stage_failure_is_named_counted_and_keeps_its_traceback(deployment, caplog,
                                                                   shares_stderr):
    sup, backend = deployment
    backend.shares_stderr = shares_stderr
    caplog.set_level(logging.DEBUG, logger="launcher")
    handle = sup.submit("hello", None, stream=False)
    backend.say("pipeline", StageError(handle.id, "tts_engine", "RuntimeError: out of codebook "
                                       "entries", TRACE), Released(handle.id))
    with pytest.raises(StageFailed) as err:
        handle.result(timeout=BOUND_S)
    assert str(err.value) == ("stage 'tts_engine' in process 'pipeline' failed: RuntimeError: out "
                              "of codebook entries")
    assert err.value.worker_traceback == TRACE
    (record,) = _error_records(caplog)
    assert record.name == "launcher.control.supervisor"
    message = record.getMessage()
    assert message.startswith(
        f"stage 'tts_engine' in process 'pipeline' (pid {backend.pids['pipeline']}) failed "
        f"request {handle.id}: RuntimeError: out of codebook entries")
    # Where the worker's own log does not reach this stderr, the traceback is shown here.
    assert (TRACE in message) is not shares_stderr
    counts = sup.tallies().stage_failures
    assert counts[("tts_engine", "pipeline")] == 1
    assert sum(counts.values()) == 1 and counts[("vocoder", "vocoder")] == 0


def test_a_failure_of_a_request_already_cancelled_is_no_error(deployment, caplog):
    sup, backend = deployment
    caplog.set_level(logging.DEBUG, logger="launcher")
    handle = sup.submit("hello", None, stream=True)
    handle.cancel()  # the client went away
    backend.say("pipeline", StageError(handle.id, "tts_engine", "RuntimeError: dropped", ""),
                Released(handle.id))
    wait_until(lambda: any("it had ended" in r.getMessage() for r in caplog.records), BOUND_S,
               "the supervisor to read the stage error")
    assert _error_records(caplog) == []
    assert sum(sup.tallies().stage_failures.values()) == 0


def test_stage_failures_are_exposed_per_stage_and_process():
    empty = metrics.Histogram()
    sample = metrics.Sample(model="m", stage_latency={}, request_latency=empty, outcomes={},
                            in_flight=0, processes=(),
                            stage_failures={("tts_engine", "pipeline"): 3, ("vocoder", "v"): 0})
    text, _ = metrics.render(sample)
    assert f'{total(STAGE_FAILURES)}{{process="pipeline",stage="tts_engine"}} 3.0' in text
    assert f'{total(STAGE_FAILURES)}{{process="v",stage="vocoder"}} 0.0' in text
