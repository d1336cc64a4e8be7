"""The restart policy on its own: a fake clock, no processes."""

from __future__ import annotations

import pytest

from tests.launcher.fake_clock import Clock

from launcher.control.restart import RestartPolicy


@pytest.fixture
def clock():
    return Clock(1000.0)


def test_backoff_doubles_from_half_a_second_and_is_capped(clock):
    policy = RestartPolicy(max_restarts=10, clock=clock)
    delays = []
    for _ in range(7):
        delays.append(policy.died("vocoder"))
        clock.now += 1.0
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_a_unit_is_due_once_its_backoff_is_over_and_only_once(clock):
    policy = RestartPolicy(clock=clock)
    assert policy.died("vocoder") == 0.5
    assert policy.due() == [] and policy.wait_s() == 0.5
    clock.now += 0.25
    assert policy.wait_s() == 0.25
    clock.now += 0.25
    assert policy.due() == ["vocoder"]
    assert policy.due() == [] and policy.wait_s() == 0.0


def test_more_than_max_restarts_within_the_window_gives_up(clock):
    policy = RestartPolicy(max_restarts=3, clock=clock)
    assert [policy.died("tp:tts_engine") for _ in range(3)] == [0.5, 1.0, 2.0]
    assert policy.died("tp:tts_engine") is None
    assert "more than 3 restarts in 60 s" in policy.limit_text()


def test_restarts_older_than_the_window_are_forgotten(clock):
    policy = RestartPolicy(max_restarts=2, clock=clock)
    policy.died("vocoder")
    clock.now += 30
    policy.died("vocoder")
    clock.now += 31  # the first restart left the 60 s window
    assert policy.died("vocoder") == 1.0  # one restart in the window: the second backoff


def test_units_are_counted_apart(clock):
    policy = RestartPolicy(max_restarts=1, clock=clock)
    assert policy.died("a") == 0.5 and policy.died("b") == 0.5
    assert policy.died("a") is None
    clock.now += 1
    assert policy.due() == ["b"]  # giving up on "a" dropped its pending restart


def test_zero_restarts_gives_up_at_the_first_death(clock):
    assert RestartPolicy(max_restarts=0, clock=clock).died("vocoder") is None
