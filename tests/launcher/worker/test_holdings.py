"""A worker's own bookkeeping of the requests it holds, and what it tells the supervisor; no
processes."""

from __future__ import annotations

from launcher.wire import ipc
from launcher.worker.holdings import FORGET_AFTER, Holdings, release_notes
from launcher.wire.protocol import HandedOver, PassedOn, Released, Result


def test_a_process_is_done_with_a_request_once_every_stage_of_it_is():
    held = Holdings(stages=2)
    assert not held.finish("tts_engine", 1)
    assert held.finish("vocoder", 1)
    assert not held.finish("tts_engine", 2)  # another request: counted apart


def test_the_supervisor_is_told_of_a_handoff_once_per_receiving_incarnation():
    held = Holdings(stages=1)
    assert held.first_handoff(1, "vocoder", 42)
    assert not held.first_handoff(1, "vocoder", 42)  # the next chunk of the same stream
    assert held.first_handoff(1, "vocoder", 43)  # the receiver restarted meanwhile
    assert held.finish("engine", 1)
    assert held.first_handoff(1, "vocoder", 42)  # forgotten with the request


def test_a_cancelled_request_is_remembered_for_a_while_and_its_progress_forgotten():
    held = Holdings(stages=2)
    held.finish("tts_engine", 7)
    held.cancel(7)
    assert 7 in held.cancelled
    assert not held.finish("vocoder", 7)  # its earlier progress went with the cancellation
    for rid in range(100, 100 + FORGET_AFTER):
        held.cancel(rid)
    assert 7 not in held.cancelled and 100 + FORGET_AFTER - 1 in held.cancelled


def test_a_process_says_it_is_done_with_a_request_in_as_few_messages_as_it_can():
    handed = [HandedOver(7, "vocoder", 42)]
    release_notes(handed, 7)
    assert handed == [PassedOn(7, "vocoder", 42)]
    ended = [Result(7, "vocoder", None, True, ipc.Packed(None, (), {}))]
    release_notes(ended, 7)
    assert len(ended) == 1  # the last result ends the request: nobody asks who holds it
    streaming = [Result(7, "vocoder", 3, False, ipc.Packed(None, (), {}))]
    release_notes(streaming, 7)
    assert streaming[-1] == Released(7)
    other = [HandedOver(8, "vocoder", 42)]
    release_notes(other, 7)
    assert other == [HandedOver(8, "vocoder", 42), Released(7)]
    nothing: list = []
    release_notes(nothing, 7)
    assert nothing == [Released(7)]
