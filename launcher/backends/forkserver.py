"""The fork server the local backend starts workers from, and starting it ahead of need.

Its preload is the worker's modules (no torch) and the plan's factory modules (`preload_for`):
torch for the stand-ins, which then start without importing it, but not for a plan whose stages
do not use it (piper: onnxruntime), whose workers would otherwise each carry torch's pages. A
preload that imports torch takes seconds. Started by the first `launch`, it runs after the
launching process has imported its own modules, one after the other; a process that knows it
will launch a plan can call `start_early` before its own heavy imports, so that both run at once.
This module imports nothing heavy for that reason.

The fork server is one per interpreter: the first backend to start it sets its preload, and
deployments that open while it runs share it.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import threading
from collections.abc import Iterable, Sequence

PRELOAD = ["launcher.backends.local", "launcher.worker.main"]
# What `start_early` preloads when it is not told: the stand-ins, which the benchmarks serve.
STANDINS = "launcher.standins"

_lock = threading.Lock()
# (fork server, resource tracker) that `start_early` started and no backend has taken over yet.
_unclaimed = (False, False)


def preload_for(factories: Iterable[str | None]) -> list[str]:
    """The fork server's preload for stages built by `factories` ('module:callable')."""
    modules = sorted({f.partition(":")[0] for f in factories if f and ":" in f})
    return [*PRELOAD, *(m for m in modules if m not in PRELOAD)]


def start_early(preload: Sequence[str] | None = None) -> None:
    """Start the fork server (and multiprocessing's resource tracker, which it needs) now. The
    first local backend then stops them when it closes, as if it had started them; when none
    opens, they are stopped at exit. `preload`: as `preload_for` gives (default: the stand-ins')."""
    global _unclaimed
    with _lock:
        fresh = (forkserver_pid() is None, tracker_pid() is None)
        mp.get_context("forkserver").set_forkserver_preload(
            list(preload) if preload is not None else [*PRELOAD, STANDINS])
        mp.forkserver.ensure_running()
        _unclaimed = (_unclaimed[0] or fresh[0], _unclaimed[1] or fresh[1])
    atexit.register(_stop_unclaimed)


def claim() -> tuple[bool, bool]:
    """Which of (fork server, resource tracker) `start_early` started for the caller to stop;
    each is handed out once."""
    global _unclaimed
    with _lock:
        claimed, _unclaimed = _unclaimed, (False, False)
    return claimed


def stop(forkserver: bool, tracker: bool) -> None:
    try:
        if forkserver and (pid := forkserver_pid()) is not None:
            # It holds nothing to flush; a signal spares it tearing torch down (~0.5 s).
            os.kill(pid, signal.SIGTERM)
            mp.forkserver._forkserver._stop()
        if tracker and tracker_pid() is not None:
            mp.resource_tracker._resource_tracker._stop()
    except (AttributeError, OSError, ChildProcessError):
        pass  # private API moved, or already gone: they exit with this process anyway


def _stop_unclaimed() -> None:
    stop(*claim())


def forkserver_pid() -> int | None:
    return getattr(mp.forkserver._forkserver, "_forkserver_pid", None)


def tracker_pid() -> int | None:
    return getattr(mp.resource_tracker._resource_tracker, "_pid", None)
