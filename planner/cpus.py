"""How many CPUs this process may use: the one answer `planner solve` counts a plan's threads
against, this machine's node is built with, and tune's workers are sized by. Its own module so
that a cold `planner solve` reads it without loading the cluster files' code."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (a container or taskset can allow fewer than exist)."""
    return len(usable_cpu_ids())


def usable_cpu_ids() -> tuple[int, ...]:
    """Which CPUs those are (a plan's pins name them); 0 to the count - 1 where the OS does not
    say."""
    allowed = allowed_cpus()
    return allowed if allowed is not None else tuple(range(os.cpu_count() or 1))


def allowed_cpus() -> tuple[int, ...] | None:
    """The CPUs the OS lets this process run on, or None where it cannot pin a process to CPUs
    (not Linux): a pin is refused there, while a count may still be guessed."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return None
