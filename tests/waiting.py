"""Waiting for an event in a test: poll a predicate under a generous bound, never sleep a guess.

A loaded machine (two cores shared with other work) stretches every step by seconds, so the bound
only says when to stop hoping: a test that passes waits as long as the event takes, and one that
fails says which event never came.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT_S,
               what: str | Callable[[], object] = "the condition", *, interval: float = 0.02,
               fail: bool = True) -> T:
    """Call `predicate` until it returns something truthy, and return that.

    Past `timeout` seconds: raise an AssertionError naming `what` (a callable is called then, to
    describe the state at the moment of failure), or, with `fail=False`, return the predicate's
    last (falsy) value, for a caller that asserts something more specific or only does its best.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            if not fail:
                return value
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
        time.sleep(interval)


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper here may be slow, or none at all)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
