"""The launcher-overhead benchmark runs end to end in its quick mode and prints every figure."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAN_PIN = hasattr(os, "sched_setaffinity")  # CPU affinity is Linux-only


@pytest.fixture(scope="module")
def quick_run():
    """One quick run (mostly imports and worker start-up), confined to one core where the OS
    can pin, with its JSON after the report: the tests read only what it prints, never how
    fast. Unpinned, the same code runs without the affinity call."""
    argv = ["--quick", "--json", *(["--cores", "1"] if CAN_PIN else [])]
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.launcher_overhead", *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


@pytest.mark.slow
def test_quick_mode_prints_every_figure(quick_run):
    out = quick_run
    assert out.returncode == 0, out.stderr
    for figure in ("C=1 latency, 1 KiB", "C=16 throughput, 1 KiB", "C=1 latency, 64 MiB",
                   "64 MiB crossing"):
        assert figure in out.stdout
    assert out.stdout.count("goal") == 3
    if sys.platform.startswith("linux"):  # read from /proc
        assert "CPU per request at C=16" in out.stdout and "relay" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(not CAN_PIN, reason="CPU affinity is Linux-only")
def test_cores_option_confines_the_workers_too(quick_run):
    """`--cores 1` must reach the worker processes, or the ratio it prints is not one core's."""
    out = quick_run
    assert out.returncode == 0, out.stderr
    header, _, raw = out.stdout.partition("\n{")
    assert "1 cores" in header or "1 of " in header
    assert json.loads("{" + raw)["worker_cpus"] == [1]
