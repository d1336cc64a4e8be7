"""A stage that raises fails its request, not the process: its worker logs the exception with its
traceback (at ERROR, naming the stage and the request) and sends the supervisor the summary and
the traceback; a stage that raises on a request already cancelled logs no error.

In-process: one stage thread and a channel that keeps what it is sent. Events, no sleeps."""

from __future__ import annotations

import logging
import threading

import pytest

from launcher.wire.protocol import Released, StageError
from launcher.wire.specs import CLIENT, StageSpec, WorkerSpec
from launcher.worker.join import Envelope
from launcher.worker.stages import StageRunner

from tests.launcher.worker.runner_fakes import STOP, RecordingChannel, StoppableQueue

BOUND_S = 30.0  # generous: waits for the stage thread, never for time to pass


INSIDE, CANCELLED = threading.Event(), threading.Event()


def speak(payload):
    if payload["text"] == "fail":
        raise RuntimeError("the voice file went missing")
    if payload["text"] == "cancelled meanwhile":  # raises once its client has gone away
        INSIDE.set()
        assert CANCELLED.wait(BOUND_S)
        raise RuntimeError("its prepared entry was dropped")
    return {"audio": [0.0]}


@pytest.fixture
def runner():
    out = StageSpec("out", "speak", (), (), (CLIENT,), (), "cpu")
    channel, gone = RecordingChannel(), threading.Event()
    r = StageRunner(WorkerSpec("speaker", (out,), None, None, "sptest"), {"out": speak}, channel,
                    None, None, lambda *_: None, gone.set)
    r.inboxes["out"].raw = StoppableQueue()
    thread = threading.Thread(target=r._loop, args=(out,), daemon=True)
    thread.start()
    yield r, channel
    r.inboxes["out"].put(STOP)
    thread.join(BOUND_S)
    assert gone.is_set() and not thread.is_alive()


def test_a_stage_that_raises_is_logged_with_its_traceback_and_reported_with_it(runner, caplog):
    r, channel = runner
    caplog.set_level(logging.DEBUG, logger="launcher")
    r.put("out", Envelope(7, CLIENT, None, True, {"text": "fail"}))
    error, released = channel.sent.get(timeout=BOUND_S)
    assert isinstance(error, StageError) and released == Released(7)
    assert (error.request_id, error.stage) == (7, "out")
    assert error.message == "RuntimeError: the voice file went missing"
    assert error.traceback.startswith("Traceback (most recent call last):")
    assert "in speak" in error.traceback and error.traceback.endswith(error.message)
    (record,) = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert record.name == "launcher.worker.stages" and record.levelno == logging.ERROR
    assert record.getMessage() == "stage 'out' failed request 7"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


def test_a_stage_that_raises_on_a_cancelled_request_logs_no_error(runner, caplog):
    r, channel = runner
    caplog.set_level(logging.DEBUG, logger="launcher")
    r.put("out", Envelope(8, CLIENT, None, True, {"text": "cancelled meanwhile"}))
    assert INSIDE.wait(BOUND_S)
    r.cancel(8)
    CANCELLED.set()
    error, _ = channel.sent.get(timeout=BOUND_S)
    assert error.request_id == 8
    assert [rec.levelname for rec in caplog.records] == ["DEBUG"]
    assert "after it was cancelled" in caplog.records[0].getMessage()
