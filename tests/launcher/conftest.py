"""Every launcher test must leave no process and no shared-memory segment behind."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os

import pytest

from launcher.wire import ipc
from launcher.backends import forkserver
from launcher.deployment import SHM_PREFIX

from tests.waiting import wait_until

TINY = {"size": "tiny"}
# benchmarks/gpu_check.sh sets cuda to run the same end-to-end tests on a GPU.
DEVICE = os.environ.get("LAUNCHER_TEST_DEVICE", "cpu")


def _children() -> dict[int, int]:
    """pid -> parent pid, for every process on the machine."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                out[int(entry)] = int(fields[1])
    return out


def descendants(root: int) -> set[int]:
    parents = _children()
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _infrastructure() -> set[int]:
    """multiprocessing's fork server and resource tracker: shared helpers that live as long as
    pytest does (they exit with it), not processes a deployment owns."""
    pids = {multiprocessing.forkserver._forkserver._forkserver_pid,
            multiprocessing.resource_tracker._resource_tracker._pid}
    return {p for p in pids if p}


def leftovers() -> tuple[set[int], list[str]]:
    procs = descendants(os.getpid()) - _infrastructure()
    # Only this run's segments: another test run on the same machine (a CI job, a colleague) has
    # live segments of its own. A segment whose owner is gone is counted: it may be ours, leaked.
    ours = procs | {os.getpid()}
    return procs, [n for n in ipc.segments(SHM_PREFIX)
                   if (pid := ipc.owner_pid(n)) is None or pid in ours or not pid_alive(pid)]


@pytest.fixture(scope="session", autouse=True)
def shared_fork_server():
    """Start multiprocessing's fork server (the stand-ins, and so torch, preloaded) and resource
    tracker once for the session. A deployment stops only the helpers it started itself, so the
    tests then share these instead of paying for a fresh fork server each."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        [*forkserver.PRELOAD, forkserver.STANDINS])
    multiprocessing.forkserver.ensure_running()
    yield


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    wait_until(lambda: leftovers() == (set(), []), 3.0, fail=False)
    procs, segments = leftovers()
    # A leak fails the test that made it, not every test after it: remove what is reported.
    for name in segments:
        ipc.sweep(name)
    assert not procs, f"processes left running: {sorted(procs)}"
    assert not segments, f"shared-memory segments left: {segments}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
