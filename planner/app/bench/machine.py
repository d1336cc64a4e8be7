"""Where and how a bench ran: machine, versions, date and command line, for results.json."""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planner.cpus import usable_cpus

PACKAGES = ("stage-planner", "torch", "starlette", "uvicorn", "httpx", "ortools", "rich",
            "matplotlib")


def cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo), else what the platform says, else None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds process `pid` (all its threads) has used so far, or None if it cannot be
    read. Its scheduler clock, to the nanosecond, where the kernel lets us read another process's
    (Linux: the clock id of a pid is `~pid << 3 | 2`); else its user and system ticks from /proc
    (10 ms each: over a few dozen short requests, as coarse as what is measured)."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _load_average() -> list[float] | None:
    """1, 5 and 15-minute load averages: a busy machine shows here before it shows in numbers."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _gpus() -> list[str]:
    """GPU names from nvidia-smi, without importing torch into the client."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parents[2])
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _version(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def environment(argv: Sequence[str]) -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
        "command": shlex.join(["planner", *argv]),
        "machine": {
            "hostname": platform.node(),
            "platform": platform.platform(),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "usable_cpus": usable_cpus(),
            "load_average": _load_average(),
            "memory_bytes": _memory_bytes(),
            "gpus": _gpus(),
        },
        "versions": {"python": sys.version.split()[0], "git_commit": _git_commit(),
                     **{p: _version(p) for p in PACKAGES}},
    }
