"""Ending a process that has loaded torch without the interpreter's teardown of its modules.

Finalizing torch's modules takes over a second after everything the process started has already
closed, and whoever waits for the exit (Ctrl-C at a terminal, a supervisor, bench's next
placement) waits with it. The measurement: docs/performance.md ("Exiting without torch's
teardown").
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def exit_now(code: int) -> None:
    """What a normal exit does up to the module teardown, then end the process with `code`: wait
    for the threads that are not daemons, run the atexit handlers (they stop the fork server,
    remove multiprocessing's temporary directory and flush logging), flush stdout and stderr."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a reader that went away, or a stream closed already: nothing more to say
    os._exit(code)
