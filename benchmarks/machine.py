"""The machine a benchmark ran on, in the words it prints beside its numbers."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shlex
import sys
from pathlib import Path

from benchmarks.served_process import ROOT
from planner.app.bench.machine import cpu_model


def cpu_name() -> str:
    """The CPU's model name (as `planner bench` records it), else the architecture."""
    return cpu_model() or platform.machine()


def described() -> str:
    """`CPU, N cores, load average L1 L5 L15`: the line a saved run keeps beside its figures."""
    one, five, fifteen = os.getloadavg()
    return f"{cpu_name()}, {os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def run_facts() -> dict:
    """When and where a run is, as its JSON keeps it: the date, the CPU, the cores this process
    may use, the load average, and the command that ran."""
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "command": command_line()}


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran as one types it in the repository's root (`python -m
    benchmarks.peer_hibari ARGS`): a saved report names no path of the machine it ran on."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    if script.is_relative_to(ROOT) and script.suffix == ".py":
        head = ["python", "-m", ".".join(script.relative_to(ROOT).with_suffix("").parts)]
    else:
        head = ["python", script.name]
    return shlex.join([*head, *argv[1:]])
