"""Stopping a `planner serve` child the way an operator does: Ctrl-C (it drains, then stops its
workers), and a kill only if it has not exited within the bound."""

from __future__ import annotations

import signal
import subprocess

STOP_S = 60.0  # serve's drain and its workers' exit; past it the benchmark must not hang


def stop(proc: subprocess.Popen, timeout: float = STOP_S) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
