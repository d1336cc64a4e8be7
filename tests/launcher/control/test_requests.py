"""The request table on its own: who holds a request, how it ended; no processes."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from launcher.errors import RequestFailed, RequestTimeout
from launcher.control.request_table import RequestTable, SpeechRequest


class Clock:
    now = 10.0

    def __call__(self) -> float:
        return self.now


def handle(request_id: int, cancels: list | None = None) -> SpeechRequest:
    sink = cancels if cancels is not None else []
    return SpeechRequest(request_id, False,
                         lambda rid, err, outcome: sink.append((rid, outcome)))


def test_holders_follow_handoffs_and_releases():
    table = RequestTable()
    table.open(handle(1), {"pipeline"})
    assert table.held_by(["pipeline"]) == [1] and table.held_by(["vocoder"]) == []
    assert table.handed(1, "vocoder")
    table.released(1, "pipeline")
    assert table.held_by(["pipeline"]) == [] and table.held_by(["vocoder"]) == [1]


def test_a_handoff_reported_after_the_receiver_released_it_does_not_make_it_a_holder():
    """Two pipes, no order between them: the receiver's Released may arrive first."""
    table = RequestTable()
    table.open(handle(1), {"pipeline"})
    table.released(1, "vocoder")
    assert table.handed(1, "vocoder")
    assert table.held_by(["vocoder"]) == []


def test_a_death_finds_exactly_the_requests_its_unit_holds():
    table = RequestTable()
    for rid, holders in ((1, {"a"}), (2, {"b"}), (3, {"a", "c"}), (4, {"c"})):
        table.open(handle(rid), holders)
    assert table.held_by(["a"]) == [1, 3]
    assert table.held_by(["b", "c"]) == [2, 3, 4]


def test_closing_counts_the_outcome_once_and_reports_holders_and_duration():
    clock = Clock()
    table = RequestTable(clock)
    table.open(handle(1), {"pipeline"})
    table.handed(1, "vocoder")
    clock.now += 0.25
    closed = table.close(1, "ok")
    assert closed.holders == {"pipeline", "vocoder"} and closed.seconds == pytest.approx(0.25)
    assert table.close(1, "error") is None  # already closed: counted once
    assert table.outcomes == {"ok": 1, "error": 0, "cancelled": 0}
    assert len(table) == 0 and table.pending() == []
    assert not table.handed(1, "vocoder")  # no longer in flight


def test_a_request_closed_from_two_threads_is_closed_once():
    table = RequestTable()
    for rid in range(200):
        table.open(handle(rid), {"p"})
    results = []

    def close_all(outcome):
        results.extend(r for rid in range(200) if (r := table.close(rid, outcome)) is not None)

    threads = [threading.Thread(target=close_all, args=(o,)) for o in ("ok", "cancelled")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 200 and sum(table.outcomes.values()) == 200


def test_the_handle_streams_chunks_then_ends_or_raises():
    h = handle(1)
    h._chunk(torch.ones(3))
    h._chunk(torch.zeros(2))
    h._end()
    assert h.result(timeout=1).samples.tolist() == [1, 1, 1, 0, 0] and h.done
    failing = handle(2)
    failing._fail(RequestFailed("stage 'vocoder' failed"))
    with pytest.raises(RequestFailed, match="vocoder"):
        failing.result(timeout=1)


def test_a_caller_that_stops_waiting_cancels_its_request():
    cancels = []
    h = handle(7, cancels)
    with pytest.raises(RequestTimeout):
        h.result(timeout=0.01)
    h.cancel()
    assert cancels == [(7, "cancelled"), (7, "cancelled")]


def test_an_event_loop_reads_the_same_chunks_fed_from_another_thread_as_they_come():
    """The front door awaits a handle on its event loop: the supervisor's thread that feeds it
    wakes the loop, chunk by chunk, and the answer is what the blocking read gives."""
    h, whole = handle(1), handle(2)

    def feed(target: SpeechRequest, gate: threading.Event | None) -> None:
        for i in range(3):
            target._chunk(torch.full((2,), float(i)))
            if gate is not None:
                gate.wait(10)  # the next chunk only once the loop has taken this one
                gate.clear()
        target._end()

    async def read() -> tuple[list, list]:
        gate, seen = threading.Event(), []
        threading.Thread(target=feed, args=(h, gate)).start()
        async for chunk in h.chunks_async(timeout=10):
            seen.append(chunk.tolist())
            gate.set()
        threading.Thread(target=feed, args=(whole, None)).start()
        audio = await whole.result_async(timeout=10)
        return seen, audio.samples.tolist()

    seen, samples = asyncio.run(read())
    assert seen == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]] and h.done
    assert samples == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    failing = handle(3)
    threading.Timer(0.05, failing._fail, (RequestFailed("stage 'vocoder' failed"),)).start()
    with pytest.raises(RequestFailed, match="vocoder"):
        asyncio.run(failing.result_async(timeout=10))


def test_a_loop_that_stops_waiting_cancels_its_request_and_a_late_chunk_harms_nothing():
    cancels = []
    h = handle(7, cancels)
    with pytest.raises(RequestTimeout):
        asyncio.run(h.result_async(timeout=0.01))
    assert cancels == [(7, "cancelled")]
    h._chunk(torch.ones(1))  # its loop is gone: feeding it still returns
    h._end()
    assert h.result(timeout=1).samples.tolist() == [1.0]


def test_a_request_passed_on_moves_from_its_sender_to_its_receiver():
    table = RequestTable()
    table.open(handle(1), {"pipeline"})
    table.passed(1, "pipeline", "vocoder")
    assert table.held_by(["pipeline"]) == [] and table.held_by(["vocoder"]) == [1]
    # the receiver's own Released may come first (another pipe): it is not made a holder again
    table.open(handle(2), {"pipeline"})
    table.released(2, "vocoder")
    table.passed(2, "pipeline", "vocoder")
    assert table.held_by(["pipeline", "vocoder"]) == [1]  # only the first

