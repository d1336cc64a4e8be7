"""The order in which a stage takes the work of several requests (`launcher.worker.fair_inbox`)."""

from __future__ import annotations

import queue

import pytest

from launcher.worker.fair_inbox import FairInbox, FairQueue


def _drain(q: FairQueue) -> list[tuple[int, str]]:
    return [q.take() for _ in range(len(q))]


def test_a_new_requests_first_item_goes_before_the_chunks_of_requests_already_served():
    q: FairQueue[str] = FairQueue()
    for i in range(4):
        q.put(1, f"a{i}")
    assert q.take() == (1, "a0")
    q.put(2, "b0")
    q.put(2, "b1")
    assert q.take() == (2, "b0")  # not behind a1..a3


def test_served_requests_take_turns_one_item_each_in_their_own_order():
    q: FairQueue[str] = FairQueue()
    for r, n in ((1, 3), (2, 1), (3, 2)):
        for i in range(n):
            q.put(r, f"{r}.{i}")
    # first items in arrival order, then one item per request per round
    assert _drain(q) == [(1, "1.0"), (2, "2.0"), (3, "3.0"), (1, "1.1"), (3, "3.1"), (1, "1.2")]
    assert len(q) == 0
    with pytest.raises(IndexError):
        q.take()


def test_put_front_keeps_a_requests_order_and_its_turn():
    q: FairQueue[str] = FairQueue()
    q.put(1, "x0")
    q.put(1, "x1")
    assert q.take() == (1, "x0")
    q.put_front(1, "resumed")
    q.put(2, "y0")
    assert _drain(q) == [(2, "y0"), (1, "resumed"), (1, "x1")]


def test_a_request_that_comes_back_after_a_pause_is_one_more_turn_until_it_is_finished():
    q: FairQueue[str] = FairQueue()
    q.put(1, "a0")
    q.put(2, "b0")
    assert _drain(q) == [(1, "a0"), (2, "b0")]
    q.put(1, "a1")  # request 1's next chunk arrives after a gap: not a first item
    q.put(3, "c0")
    assert _drain(q) == [(3, "c0"), (1, "a1")]
    assert sorted(q.requests()) == [1, 2, 3]
    q.finish(2)
    assert sorted(q.requests()) == [1, 3]


def test_finish_hands_back_the_items_still_waiting_and_forgets_the_request():
    q: FairQueue[str] = FairQueue()
    q.put(1, "a0")
    q.put(1, "a1")
    q.put(2, "b0")
    assert q.take() == (1, "a0")
    assert q.finish(1) == ["a1"]
    assert len(q) == 1 and list(q.requests()) == [2]
    assert q.take() == (2, "b0")
    assert q.finish(7) == []


def test_a_fair_inbox_counts_what_arrived_and_what_waits_in_its_queue():
    box = FairInbox(queue.SimpleQueue())
    box.put("raw")
    box.work.put(1, "taken")
    assert box.qsize() == 2 and not box.empty()
