"""Asking the OS about a process, for tests that kill workers."""

from __future__ import annotations

import os
import select


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
