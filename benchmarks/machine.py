"""The machine a benchmark ran on, in the words it prints beside its numbers."""

from __future__ import annotations

import os
import platform

from planner.app.bench.machine import cpu_model


def cpu_name() -> str:
    """The CPU's model name (as `planner bench` records it), else the architecture."""
    return cpu_model() or platform.machine()


def described() -> str:
    """`CPU, N cores, load average L1 L5 L15`: the line a saved run keeps beside its figures."""
    one, five, fifteen = os.getloadavg()
    return f"{cpu_name()}, {os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}"
