"""Asking the OS about a process, for tests that kill workers; busy-looping processes, for tests
of what a busy machine does."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest


def gone(pid: int) -> bool:
    """Dead: its pidfd is readable (every thread has exited; /proc may show the leader as a
    zombie a moment earlier), or there is no such process any more."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 0)[0])
    finally:
        os.close(fd)


def interrupt(proc: subprocess.Popen, timeout_s: float = 60.0,
              sig: signal.Signals = signal.SIGINT) -> int:
    """Stop a server as Ctrl-C would (SIGINT; SIGTERM as an operator's `kill` would: it drains
    and stops its workers); kill it if it has not ended within `timeout_s`. Its exit status."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@pytest.fixture
def cpu_hogs():
    """One busy-looping process per core, and one more, for the length of the test."""
    n = len(os.sched_getaffinity(0)) + 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        # Wait until they are really running (each has used CPU), not for a guessed time.
        for hog in hogs:
            while _cpu_s(hog.pid) < 0.05:
                assert hog.poll() is None
                os.sched_yield()
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(30)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
